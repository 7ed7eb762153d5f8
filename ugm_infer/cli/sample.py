"""``ugm-infer sample MODEL_DIR``: run chains of a kernel on a saved model and diagnose their mixing."""

from __future__ import annotations

import math
import time

import numpy as np

from ugm_infer.cli import _build, _chains, _data, _report, _sizes
from ugm_infer.cli._options import (
    KERNELS,
    add_saved_model_options,
    int_at_least,
    nonnegative_int,
    one_of,
    path_text,
    positive_int,
    unit_interval,
)
from ugm_infer.cli._output import OutputFolder


def add_sample_parser(sub) -> None:
    smp = sub.add_parser(
        "sample",
        help="run chains of a kernel on a saved model",
        usage="ugm-infer sample MODEL_DIR [options]",
        description="Run chains of a kernel on a saved model; write the draws (netCDF), the last states, a trace plot "
        "and a plain-language mixing diagnosis.",
    )
    add_saved_model_options(smp, "overwrite earlier results in --out")
    add = smp.add_argument
    add("--kernel", type=one_of(KERNELS), default="gibbs", metavar="NAME", help=", ".join(KERNELS))
    add("--num-chains", type=positive_int, default=4, metavar="N", help="independent chains")
    add("--num-steps", type=positive_int, default=1000, metavar="N", help="draws kept per chain")
    add("--num-warmup", type=nonnegative_int, default=100, metavar="N", help="steps discarded first")
    add("--num-betas", type=int_at_least(2), default=10, metavar="N", help="inverse temperatures (tempered kernels)")
    add("--beta-min", type=unit_interval, default=0.5, metavar="BETA", help="smallest inverse temperature")
    add("--seed", type=nonnegative_int, default=0, metavar="N", help="random seed")
    add("--out", type=path_text, default="out/sample", metavar="DIR", help="output folder")


def run_sample(args, argv: list[str]) -> int:
    import jax

    import ugm_infer as ui

    output = OutputFolder(args.out, _report.SAMPLE_FILES, force=args.force)
    output.check()
    model, params = _data.load_saved_model(args.model_dir, args.max_model_bytes)
    num_sites = sum(math.prod(d.shape) for d in model.variables.values())
    _sizes.check_sampling(num_sites, num_chains=args.num_chains, num_steps=args.num_steps, replicas=_build.replicas(args))
    algorithm, ladder = _build.sampling_algorithm(args, model, params)
    chains, steps, warmup = args.num_chains, args.num_steps, args.num_warmup
    key = jax.random.key(args.seed)
    x0 = model.random_state(jax.random.fold_in(key, 0), chains)
    print(f"ugm-infer: sampling {args.model_dir} with {args.kernel}: {chains} chains x {steps} steps (+{warmup} warm-up)")
    t0 = time.perf_counter()
    run = ui.sample(jax.random.fold_in(key, 1), algorithm, x0, steps, num_warmup=warmup, model=model, params=params)
    seconds = time.perf_counter() - t0
    kernel = {"gibbs": "one Gibbs sweep", "metropolis": "one Metropolis step"}.get(args.kernel)
    if kernel is None:
        kernel = f"one {args.kernel.replace('_', ' ')} step over {args.num_betas} inverse temperatures"
    chains_run = _chains.diagnose_run(run, model, params, ladder, kernel, seconds)
    energies = np.asarray(chains_run.idata.posterior["energy"].values)
    rows = [
        ("model", args.model_dir),
        ("kernel", args.kernel),
        ("chains x steps", f"{chains} x {steps} (+{warmup} warm-up)"),
        ("time", f"{seconds:.1f} s"),
        ("mean energy", f"{energies.mean():.4f} (sd {energies.std():.4f})"),
        ("diagnosis", "ok" if chains_run.diagnosis.ok else "problems found (see diagnosis.txt)"),
    ]
    var = _data.visible_variable(model) if len(model.variables) == 1 or "v" in model.variables else None
    domain = model.variables.get(var)
    side = int(round(math.prod(domain.shape) ** 0.5)) if domain is not None else 0
    square = domain is not None and side * side == math.prod(domain.shape) and side >= 4 and len(domain.values) == 2
    intro = (
        f"Ran {chains} chains of the {args.kernel.replace('_', ' ')} kernel on the model saved in {args.model_dir}, "
        f"from random states: {warmup} steps discarded, then {steps} draws per chain, diagnosed with ArviZ by "
        "ui.diagnostics.diagnose."
    )
    output.create()
    try:
        _report.write_sample_report(
            output,
            title=f"ugm_infer: samples of {args.model_dir}",
            intro=intro,
            rows=rows,
            chains=chains_run,
            var=var,
            image_shape=(side, side) if square else None,
        )
    except BaseException:
        output.discard()
        raise
    return 0
