"""AIS and tempered SMC on models with fast Gibbs sweeps: the cost of one annealing step against one sweep.

``ui.smc.ais`` and ``ui.smc.tempered_smc`` hand their default block-Gibbs move the
path's density :math:`(1-\\beta)\\log p_0 - \\beta E` in the model's fast form
(``ugm_infer.smc._paths.bridge_logdensity``), so each annealing step should cost about
one sweep of ``ui.sample`` with the same kernel and chains, plus the energy of the
weights.  For each case the contenders run in one process, timed alternately, repeat
after repeat (compilation excluded, reported as first call):

``sample``
    ``ui.sample(key, ui.kernels.gibbs(model, params), x0, B, keep_states=False)``:
    ``B`` sweeps of the chains (the default trace).
``ais``
    ``ui.smc.ais(key, model, params, num_runs=chains, num_betas=B + 1, ...)``: ``B``
    annealing steps, one sweep each.
``smc``
    ``ui.smc.tempered_smc(key, model, params, num_particles=chains, num_replicates=1,
    schedule=linspace(0, 1, B + 1), num_mcmc_steps=1, ...)``: ``B`` SMC steps
    (resampling, one sweep, reweighting).

Cases: ``lattice_ising(128, 128)`` at ``J = 0.44`` (uniform base: the four-sub-lattice
sweep), ``lattice_potts(64, 64, 3)`` (uniform base: the Potts sub-lattice sweep) and
``semi_rbm(784, 500)`` with a base-rate base from binarized images (the visibles'
incremental single-site sweep; the hidden layer summed out along the AIS path).
Reported: ms per step (median), the paired ratios ``t_ais / t_sample`` and
``t_smc / t_sample`` (median and min-max; 1 would mean no cost beyond the sweep) and the
load average after each case.

Run::

    python benchmarks/bench_ais_path.py              # the three cases
    python benchmarks/bench_ais_path.py --quick      # small sizes, seconds

Prints a markdown table and writes ``benchmarks/results/bench_ais_path.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402


def _images(num: int, size: int, seed: int = 0) -> np.ndarray:
    """Binarized MNIST training images (``../shared/data`` or ``$UGM_DATA``), or random ones without the file."""
    root = Path(os.environ.get("UGM_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    path = root / "binarized_mnist.npz"
    if size == 784 and path.exists():
        with np.load(path) as z:
            return np.unpackbits(z["train"][:num], axis=1, count=784).astype(np.float32)
    rng = np.random.default_rng(seed)
    return (rng.random((num, size)) < 0.2).astype(np.float32)


def build_case(name: str, quick: bool):
    """``(model, params, x0, ais_kwargs, chains)``."""
    if name == "lattice_ising":
        size = 16 if quick else 128
        model = ui.models.lattice_ising(size, size)
        params, chains, kw = model.init_params(J=0.44), 32, {}
    elif name == "lattice_potts":
        size = 8 if quick else 64
        model = ui.models.lattice_potts(size, size, 3, periodic=True)
        params, chains, kw = model.init_params(jax.random.key(0), scale=1.0, field_scale=0.1), 32, {}
    else:
        nv, nh = (49, 10) if quick else (784, 500)
        model = ui.models.semi_rbm(nv, nh)
        params = model.init_params(jax.random.key(0), scale=0.01, lateral_scale=0.01)
        chains, kw = 100, {"base": "data", "data": {"v": _images(2000, nv)}}
    x0 = jax.block_until_ready(model.random_state(jax.random.key(1), chains))
    return model, params, x0, kw, chains


def contenders(name: str, steps: int, quick: bool) -> dict:
    """``{name: (run(key), first_call_seconds)}`` for one case."""
    model, params, x0, kw, chains = build_case(name, quick)
    out = {}
    t0 = time.perf_counter()
    algorithm = ui.kernels.gibbs(model, params)

    def sample(key):
        return ui.sample(key, algorithm, x0, steps, keep_states=False).final_state

    jax.block_until_ready(sample(jax.random.key(0)))
    out["sample"] = (sample, time.perf_counter() - t0)

    t0 = time.perf_counter()

    def ais(key):
        return ui.smc.ais(key, model, params, num_runs=chains, num_betas=steps + 1, **kw).log_Z

    jax.block_until_ready(ais(jax.random.key(0)))
    out["ais"] = (ais, time.perf_counter() - t0)

    t0 = time.perf_counter()
    schedule = np.linspace(0.0, 1.0, steps + 1)

    def smc(key):
        return ui.smc.tempered_smc(
            key, model, params, num_particles=chains, num_replicates=1, schedule=schedule, num_mcmc_steps=1, **kw
        ).log_Z

    jax.block_until_ready(smc(jax.random.key(0)))
    out["smc"] = (smc, time.perf_counter() - t0)
    return out


def time_case(name: str, steps: int, repeats: int, quick: bool) -> dict:
    runs = contenders(name, steps, quick)
    times = {k: [] for k in runs}
    for r in range(repeats):
        for k, (run, _) in runs.items():
            key = jax.random.key(100 + r)
            t0 = time.perf_counter()
            jax.block_until_ready(run(key))
            times[k].append(time.perf_counter() - t0)
    row = {"case": name, "steps": steps, "first_call_s": {k: v[1] for k, v in runs.items()}}
    row["ms_per_step"] = {k: 1e3 * float(np.median(v)) / steps for k, v in times.items()}
    for k in ("ais", "smc"):
        ratios = np.asarray(times[k]) / np.asarray(times["sample"])
        row[f"{k}_over_sample"] = {
            "median": float(np.median(ratios)),
            "min": float(ratios.min()),
            "max": float(ratios.max()),
        }
    row["times_s"] = times
    row["load_average_after"] = os.getloadavg()
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, 2 repeats (a smoke test)")
    p.add_argument("--cases", nargs="+", default=["lattice_ising", "lattice_potts", "semi_rbm"])
    p.add_argument("--steps", type=int, default=None, help="annealing steps (sweeps) per call (default 50; quick 5)")
    p.add_argument("--repeats", type=int, default=None, help="alternated repeats (default 5; quick 2)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    steps = args.steps or (5 if args.quick else 50)
    repeats = args.repeats or (2 if args.quick else 5)
    out_path = args.out or "benchmarks/results/bench_ais_path" + ("_quick" if args.quick else "") + ".json"
    load_before = os.getloadavg()
    rows = []
    for name in args.cases:
        row = time_case(name, steps, repeats, args.quick)
        rows.append(row)
        print(f"{name}: {row['ms_per_step']} ms/step, load {row['load_average_after'][0]:.1f}", flush=True)
    print()
    print(
        "| case | sample ms / sweep | ais ms / step | smc ms / step | **ais / sample** (paired median, min-max) "
        "| **smc / sample** | first call sample / ais / smc (s) | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        ms, fc = row["ms_per_step"], row["first_call_s"]

        def ratio(k, row=row):
            r = row[f"{k}_over_sample"]
            return f"**{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f})"

        print(
            f"| {row['case']} | {ms['sample']:.2f} | {ms['ais']:.2f} | {ms['smc']:.2f} | {ratio('ais')} | {ratio('smc')} "
            f"| {fc['sample']:.1f} / {fc['ais']:.1f} / {fc['smc']:.1f} | {row['load_average_after'][0]:.1f} |"
        )
    load_after = os.getloadavg()
    print(f"\nload average before {load_before}, after {load_after}")
    result = {
        "machine": machine_info(),
        "steps": steps,
        "repeats": repeats,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "rows": rows,
    }
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(result, indent=2))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
