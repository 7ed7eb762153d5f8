"""ERGM edge-toggle throughput: the O(n) change-statistic kernel versus generic Gibbs.

Model: ``ergm(n, ("edges", "kstar2", "triangles", ("gwesp", 0.25)))`` with theta
``(-1.5, 0.05, 0.2, 0.3)`` (sparse graphs), ``num_chains`` chains (vmapped).

* ``ergm_toggle``: :data:`ugm_infer.applications.ergm.ergm_toggle`, systematic-scan Gibbs on
  the dyads; conditional log-odds :math:`\\theta^\\top\\delta_{ij}g(y)` from cached
  degrees and shared-partner counts, O(n) per toggle.
* ``ui.kernels.gibbs``: the library's generic systematic-scan Gibbs through the
  :class:`~ugm_infer.EnergyModel` (the energy is not multilinear, so each dyad update
  evaluates the full energy at both values: an ``n x n`` matrix product, O(n^3)).

Both sides run ``num_sweeps`` sweeps (one sweep = ``n(n-1)/2`` toggles per chain) in
one jitted ``lax.scan``; compile time is excluded; the two are timed alternately,
``repeats`` times, and the ratio of median toggles/s is reported.  Prints a markdown
table and writes JSON.

Run::

    python benchmarks/bench_ergm_toggle.py            # n = 10, 30, 60
    python benchmarks/bench_ergm_toggle.py --quick    # n = 8 (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.applications.ergm import ergm, ergm_toggle
from ugm_infer.kernels.gibbs import build_kernel as gibbs_build_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init

TERMS = ("edges", "kstar2", "triangles", ("gwesp", 0.25))
THETA = (-1.5, 0.05, 0.2, 0.3)


def make_runner(model, init_fn, kernel, params, num_chains, num_sweeps):
    logdensity = model.logdensity_fn(params)

    def chain(key, y):
        state = init_fn({"y": y}, logdensity)
        state, _ = jax.lax.scan(lambda s, k: kernel(k, s, logdensity), state, jax.random.split(key, num_sweeps))
        return state.position["y"]

    run = jax.jit(jax.vmap(chain))
    keys = jax.random.split(jax.random.key(0), num_chains)
    y0 = jnp.zeros((num_chains, model.num_dyads), jnp.int8)
    t0 = time.perf_counter()
    compiled = run.lower(keys, y0).compile()
    compile_s = time.perf_counter() - t0

    def timed(seed):
        keys = jax.random.split(jax.random.key(seed), num_chains)
        t = time.perf_counter()
        out = compiled(keys, y0)
        jax.block_until_ready(out)
        return time.perf_counter() - t, np.asarray(out)

    return compile_s, timed


def bench(n, num_chains, sweeps_fast, sweeps_generic, repeats):
    model = ergm(n, TERMS)
    params = model.params_from_theta(THETA)
    m = model.num_dyads
    sides = {
        "ergm_toggle": (ergm_toggle.init, ergm_toggle.build_kernel(model), sweeps_fast),
        "ui.kernels.gibbs": (gibbs_init, gibbs_build_kernel(model, "systematic"), sweeps_generic),
    }
    runners, compile_s = {}, {}
    for name, (init_fn, kernel, sweeps) in sides.items():
        compile_s[name], runners[name] = make_runner(model, init_fn, kernel, params, num_chains, sweeps)
    times = {name: [] for name in sides}
    densities = {}
    for r in range(repeats):
        for name in sides:
            t, ys = runners[name](r)
            times[name].append(t)
            densities[name] = float(ys.mean())
    rows = {}
    for name, (_, _, sweeps) in sides.items():
        ts = np.array(times[name])
        toggles = num_chains * m * sweeps
        rows[name] = {
            "sweeps": sweeps,
            "seconds_min": float(ts.min()),
            "seconds_median": float(np.median(ts)),
            "seconds_max": float(ts.max()),
            "toggles_per_s_median": toggles / float(np.median(ts)),
            "compile_s": compile_s[name],
            "final_density": densities[name],
        }
    ratio = rows["ergm_toggle"]["toggles_per_s_median"] / rows["ui.kernels.gibbs"]["toggles_per_s_median"]
    return {"n": n, "dyads": m, "num_chains": num_chains, "sides": rows, "ratio_toggles_per_s": ratio}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--out", default=None, help="JSON output path")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        sizes, chains, repeats = [(8, 5, 2)], 4, args.repeats or 2
    else:
        sizes, chains, repeats = [(10, 200, 20), (30, 50, 2), (60, 20, 1)], 16, args.repeats or 5
    results = [bench(n, chains, fast, generic, repeats) for n, fast, generic in sizes]
    print("| n | dyads | chains | ergm_toggle toggles/s | ui.kernels.gibbs toggles/s | ratio | compile s (toggle / gibbs) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        a, b = r["sides"]["ergm_toggle"], r["sides"]["ui.kernels.gibbs"]
        print(
            f"| {r['n']} | {r['dyads']} | {r['num_chains']} | {a['toggles_per_s_median']:.3g} | "
            f"{b['toggles_per_s_median']:.3g} | {r['ratio_toggles_per_s']:.1f} | "
            f"{a['compile_s']:.1f} / {b['compile_s']:.1f} |"
        )
    report = {
        "benchmark": "bench_ergm_toggle",
        "terms": [str(t) for t in TERMS],
        "theta": list(THETA),
        "quick": bool(args.quick),
        "repeats": repeats,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "load_average": list(os.getloadavg()),
            "jax_backend": jax.default_backend(),
            "jax_version": jax.__version__,
        },
        "results": results,
    }
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / "bench_ergm_toggle.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps({"ratios": {r["n"]: round(r["ratio_toggles_per_s"], 2) for r in results}, "out": str(out)}))


if __name__ == "__main__":
    main()
