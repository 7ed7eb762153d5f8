"""Every sampling and learning path on models with fast Gibbs sweeps: the cost per sweep against ``ui.sample``.

The paths users call hand their Gibbs moves the model's fast form (the lattice
sub-lattice sweeps, the pairwise incremental sweep), so each should cost about one
``ui.sample`` sweep per sweep it makes.  For each case the contenders run in one
process, timed alternately, repeat after repeat (compilation excluded, reported as
first call); ``B`` steps per call:

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
``pt``
    ``ui.sample`` of ``ui.kernels.parallel_tempering(model, params, betas)`` with 4
    replicas (``betas`` from 0.7 to 1): ``B`` steps of 4 sweeps and the swaps.
``tt``
    ``ui.sample`` of ``ui.kernels.tempered_transitions(model, params, betas)`` with 4
    betas from 0.7 to 1: ``B // 6`` runs of ``2 (4 - 1) = 6`` sweeps each (and the
    acceptance test).
``pcd``
    ``learner.step`` of ``ui.learn.pcd(model, num_particles=chains)`` (one sweep per
    update, SGD) in a ``lax.scan`` of ``B`` updates on a fixed minibatch of ``chains``
    random states: the sweep, the two gradients of the mean energy, the update.
    On a lattice the learner keeps its particles in the sweep's layout between
    updates (``SAPState.kernel_state``).
``pcd_reinit`` (only when named in ``--paths``)
    The same updates from the same state with ``kernel_state=()``: the particles
    re-initialised from their configurations at every update (converted to the
    sweep's layout and swept chains-first), the form that keeping them replaces;
    the same draws and parameters, bit for bit.

Cases: ``lattice_ising(128, 128)`` at ``J = 0.44`` (uniform base: the four-sub-lattice
sweep), ``lattice_potts(64, 64, 3)`` (uniform base: the Potts sub-lattice sweep) and
``semi_rbm(784, 500)`` with a base-rate base from binarized images (the visibles'
incremental single-site sweep; the hidden layer summed out along the AIS path).
Reported: ms per step (median), and per path the paired ratio of its time per sweep
to ``sample``'s (median and min-max; 1 would mean no cost beyond the sweep), and the
load average after each case.

Run::

    python benchmarks/bench_paths.py                  # the three cases
    python benchmarks/bench_paths.py --quick          # small sizes, seconds
    python benchmarks/bench_paths.py --cases lattice_ising --paths sample pt tt pcd
    python benchmarks/bench_paths.py --cases lattice_ising lattice_potts --paths pcd pcd_reinit --repeats 11

Prints a markdown table and writes ``benchmarks/results/bench_paths.json``.
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
from ugm_infer import _compile  # noqa: E402


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


def contenders(name: str, steps: int, quick: bool, paths: tuple[str, ...]) -> dict:
    """``{name: (run(key), first_call_seconds)}`` for one case."""
    model, params, x0, kw, chains = build_case(name, quick)
    out = {}
    t0 = time.perf_counter()
    algorithm = ui.kernels.gibbs(model, params)

    def sample(key):
        return ui.sample(key, algorithm, x0, steps, keep_states=False).final_state

    jax.block_until_ready(sample(jax.random.key(0)))
    out["sample"] = (sample, time.perf_counter() - t0)

    if "ais" in paths:
        t0 = time.perf_counter()

        def ais(key):
            return ui.smc.ais(key, model, params, num_runs=chains, num_betas=steps + 1, **kw).log_Z

        jax.block_until_ready(ais(jax.random.key(0)))
        out["ais"] = (ais, time.perf_counter() - t0)

    if "smc" in paths:
        t0 = time.perf_counter()
        schedule = np.linspace(0.0, 1.0, steps + 1)

        def smc(key):
            return ui.smc.tempered_smc(
                key, model, params, num_particles=chains, num_replicates=1, schedule=schedule, num_mcmc_steps=1, **kw
            ).log_Z

        jax.block_until_ready(smc(jax.random.key(0)))
        out["smc"] = (smc, time.perf_counter() - t0)
    if "pt" in paths:
        t0 = time.perf_counter()
        pt_algorithm = ui.kernels.parallel_tempering(model, params, betas=np.linspace(0.7, 1.0, REPLICAS))

        def pt(key):
            return ui.sample(key, pt_algorithm, x0, steps, keep_states=False).final_state

        jax.block_until_ready(pt(jax.random.key(0)))
        out["pt"] = (pt, time.perf_counter() - t0)
    if "tt" in paths:
        t0 = time.perf_counter()
        betas = ui.kernels.tempered_transitions.uniform_ladder(REPLICAS, 0.7)
        tt_algorithm = ui.kernels.tempered_transitions(model, params, betas=betas)

        def tt(key):
            return ui.sample(key, tt_algorithm, x0, max(1, steps // TT_SWEEPS), keep_states=False).final_state

        jax.block_until_ready(tt(jax.random.key(0)))
        out["tt"] = (tt, time.perf_counter() - t0)
    if "pcd" in paths or "pcd_reinit" in paths:
        t0 = time.perf_counter()
        learner = ui.learn.pcd(model, num_particles=chains)
        data = kw.get("data")  # the semi-RBM's images, else random states (all variables visible)
        batch = {n: x[:chains] for n, x in data.items()} if data else model.random_state(jax.random.key(2), chains)

        @_compile.jit  # the options ui.sample and ui.fit compile with
        def updates(key, state, batch):  # the batch an argument, as ui.fit passes it (a constant would be folded)
            def body(s, k):
                return learner.step(k, s, batch)[0], None

            return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

        start = learner.init(jax.random.key(3), params)

        def pcd(key):
            return updates(key, start, batch).params

        def pcd_reinit(key):  # the re-initialising path: a state without kept kernel states
            return updates(key, start._replace(kernel_state=()), batch).params

        for name, run in (("pcd", pcd), ("pcd_reinit", pcd_reinit)):
            if name in paths:
                jax.block_until_ready(run(jax.random.key(0)))
                out[name] = (run, time.perf_counter() - t0)
                t0 = time.perf_counter()
    return out


#: replicas of parallel tempering, betas of tempered transitions (a run is 2 (REPLICAS - 1) sweeps)
REPLICAS = 4
TT_SWEEPS = 2 * (REPLICAS - 1)
#: sweeps each path makes per step (a TT step is one run)
SWEEPS_PER_STEP = {"sample": 1, "ais": 1, "smc": 1, "pt": REPLICAS, "tt": TT_SWEEPS, "pcd": 1, "pcd_reinit": 1}
PATHS = ("sample", "ais", "smc", "pt", "tt", "pcd")
#: contenders run only when named in --paths
EXTRA_PATHS = ("pcd_reinit",)


def time_case(name: str, steps: int, repeats: int, quick: bool, paths: tuple[str, ...]) -> dict:
    runs = contenders(name, steps, quick, paths)
    times = {k: [] for k in runs}
    for r in range(repeats):
        for k, (run, _) in runs.items():
            key = jax.random.key(100 + r)
            t0 = time.perf_counter()
            jax.block_until_ready(run(key))
            times[k].append(time.perf_counter() - t0)
    row = {"case": name, "steps": steps, "first_call_s": {k: v[1] for k, v in runs.items()}}
    sweeps = {k: steps * SWEEPS_PER_STEP[k] if k != "tt" else max(1, steps // TT_SWEEPS) * TT_SWEEPS for k in times}
    row["ms_per_sweep"] = {k: 1e3 * float(np.median(v)) / sweeps[k] for k, v in times.items()}
    for k in (k for k in times if k != "sample"):
        ratios = (np.asarray(times[k]) / sweeps[k]) / (np.asarray(times["sample"]) / sweeps["sample"])
        row[f"{k}_over_sample"] = {
            "median": float(np.median(ratios)),
            "min": float(ratios.min()),
            "max": float(ratios.max()),
        }
    if "pcd" in times and "pcd_reinit" in times:  # keeping the particles against re-initialising them
        ratios = np.asarray(times["pcd"]) / np.asarray(times["pcd_reinit"])
        row["pcd_over_pcd_reinit"] = {
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
    p.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS + EXTRA_PATHS, help="contenders (sample runs)")
    p.add_argument("--steps", type=int, default=None, help="sweeps per call (default 48; quick 6)")
    p.add_argument("--repeats", type=int, default=None, help="alternated repeats (default 5; quick 2)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    steps = args.steps or (6 if args.quick else 48)
    repeats = args.repeats or (2 if args.quick else 5)
    paths = tuple(dict.fromkeys(["sample", *args.paths]))
    out_path = args.out or "benchmarks/results/bench_paths" + ("_quick" if args.quick else "") + ".json"
    load_before = os.getloadavg()
    rows = []
    for name in args.cases:
        row = time_case(name, steps, repeats, args.quick, paths)
        rows.append(row)
        print(f"{name}: {row['ms_per_sweep']} ms per sweep, load {row['load_average_after'][0]:.1f}", flush=True)
    others = [k for k in paths if k != "sample"]
    print()
    print(
        "| case | sample ms / sweep | "
        + " | ".join(f"**{k} / sample** (per sweep; paired median, min-max)" for k in others)
        + " | first call "
        + " / ".join(paths)
        + " (s) | load |"
    )
    print("|" + "---|" * (len(others) + 4))
    for row in rows:
        ms, fc = row["ms_per_sweep"], row["first_call_s"]

        def ratio(k, row=row):
            r = row[f"{k}_over_sample"]
            return f"**{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f})"

        print(
            f"| {row['case']} | {ms['sample']:.2f} | "
            + " | ".join(ratio(k) for k in others)
            + " | "
            + " / ".join(f"{fc[k]:.1f}" for k in paths)
            + f" | {row['load_average_after'][0]:.1f} |"
        )
    for row in rows:
        if "pcd_over_pcd_reinit" in row:
            r = row["pcd_over_pcd_reinit"]
            print(f"{row['case']}: pcd / pcd_reinit **{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f}), paired")
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
