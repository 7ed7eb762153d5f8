"""Lattice Potts block-Gibbs sweeps through ``ui.sample``, against the best hand-written plain-JAX sweep.

For periodic ``L x L`` lattices ``ui.models.lattice_potts(L, L, q, periodic=True)``
(random per-bond couplings ``init_params(scale=1)``, fields ``field_scale=0.1``,
int32 states), ``q`` in 3 and 10, 1 and 32 chains, the contenders run
``num_sweeps`` block-Gibbs sweeps of all chains in one call, timed alternately,
repeat after repeat, in one process (compilation excluded, reported as first call):

``ugm_infer``
    ``ui.sample(key, ui.kernels.gibbs(model, params), x0, num_sweeps, keep_states=False)``
    from the int32 start ``x0`` (converted to the sub-lattice layout in every call),
    the default trace (changed sites per sweep and chain).
``ugm_continue``
    the same call continuing from the ``final_state`` of an earlier call (kept in the
    sub-lattice layout).
``hand``
    the fastest plain-JAX sweep found (``handwritten.potts_sweep``): int8 sub-lattices,
    per-colour logits of its own sites only, one Threefry word per site, inverse-CDF
    draw; chains along the trailing axis with the couplings selected by value for
    many chains, couplings gathered for one chain.

Reported: ns per site update (median), the paired ratio ``t_hand / t_ugm`` (median
and min-max of the per-repeat ratios; above 1: ugm_infer faster), first-call seconds
and the load average after each case.

Run::

    python benchmarks/bench_lattice_potts.py                # 64, 128, 256 x q 3, 10 x 1, 32 chains
    python benchmarks/bench_lattice_potts.py --quick        # one 8x8 case, a few seconds
    python benchmarks/bench_lattice_potts.py --sizes 512 --states 3 --chains 32

Prints a markdown table and writes ``benchmarks/results/bench_lattice_potts.json``.
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
import handwritten  # noqa: E402
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402


def contenders(size: int, q: int, chains: int, num_sweeps: int) -> dict:
    """``{name: (run(key), first_call_seconds)}`` for one case."""
    model = ui.models.lattice_potts(size, size, q, periodic=True)
    params = model.init_params(jax.random.key(0), scale=1.0, field_scale=0.1)
    x0 = jax.block_until_ready(model.random_state(jax.random.key(1), chains))
    out = {}
    t0 = time.perf_counter()
    algorithm = ui.kernels.gibbs(model, params)

    def ugm(key):
        return ui.sample(key, algorithm, x0, num_sweeps, keep_states=False)

    state = jax.block_until_ready(ugm(jax.random.key(0))).final_state
    out["ugm_infer"] = (ugm, time.perf_counter() - t0)
    t0 = time.perf_counter()

    def ugm_continue(key):
        return ui.sample(key, algorithm, state, num_sweeps, keep_states=False)

    jax.block_until_ready(ugm_continue(jax.random.key(0)))
    out["ugm_continue"] = (ugm_continue, time.perf_counter() - t0)
    t0 = time.perf_counter()
    many = chains > 1
    sites = handwritten.potts_subl_from_sites(x0["x"], size, size, chains_last=many)
    run = handwritten.potts_sweep(size, size, q, num_sweeps, chains_last=many)
    jax.block_until_ready(run(jax.random.key(0), sites, params["J"], params["h"], 1.0))
    out["hand"] = (lambda key: run(key, sites, params["J"], params["h"], 1.0), time.perf_counter() - t0)
    return out


def time_case(size: int, q: int, chains: int, target_s: float, repeats: int, rate: float) -> dict:
    sites = size * size * chains
    num_sweeps = int(max(1, min(2000, round(target_s * rate / sites))))
    runs = contenders(size, q, chains, num_sweeps)
    times = {name: [] for name in runs}
    for r in range(repeats):
        for name, (run, _) in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(run(jax.random.key(r + 1)))
            times[name].append(time.perf_counter() - t0)
    updates = sites * num_sweeps
    row = {"size": size, "q": q, "chains": chains, "num_sweeps": num_sweeps}
    for name, t in times.items():
        row[name] = {
            "times_s": t,
            "ns_per_site_update_median": float(np.median(t) / updates * 1e9),
            "first_call_s": runs[name][1],
        }
    for ugm in ("ugm_infer", "ugm_continue"):
        paired = np.asarray(times["hand"]) / np.asarray(times[ugm])
        row[f"ratio_hand_over_{ugm}"] = {
            "median": float(np.median(paired)),
            "min": float(paired.min()),
            "max": float(paired.max()),
        }
    row["load_average_after"] = os.getloadavg()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tiny case, 2 repeats (a smoke test)")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--states", type=int, nargs="*", default=None, help="values of q")
    parser.add_argument("--chains", type=int, nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--target", type=float, default=None, help="approximate seconds per timed call")
    parser.add_argument("--rate", type=float, default=2e8, help="rough site updates / s, only to size the calls")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    default_out = "benchmarks/results/bench_lattice_potts" + ("_quick" if args.quick else "") + ".json"
    out_path = args.out or default_out
    sizes = args.sizes or ([8] if args.quick else [64, 128, 256])
    states = args.states or ([3] if args.quick else [3, 10])
    chain_counts = args.chains or ([2] if args.quick else [1, 32])
    repeats = args.repeats or (2 if args.quick else 5)
    target = args.target or (0.002 if args.quick else 0.3)
    load_before = os.getloadavg()
    rows = []
    for size in sizes:
        for q in states:
            for chains in chain_counts:
                row = time_case(size, q, chains, target, repeats, args.rate)
                rows.append(row)
                print(
                    f"L={size} q={q} chains={chains} sweeps={row['num_sweeps']}: "
                    + ", ".join(
                        f"{n} {row[n]['ns_per_site_update_median']:.2f} ns" for n in ("ugm_infer", "ugm_continue", "hand")
                    )
                    + f"; hand / ugm {row['ratio_hand_over_ugm_infer']['median']:.3f}, "
                    f"/ continuing {row['ratio_hand_over_ugm_continue']['median']:.3f}; "
                    f"load {row['load_average_after'][0]:.1f}",
                    flush=True,
                )
    load_after = os.getloadavg()
    print()
    print(
        "| L | q | chains | sweeps / call | ugm_infer ns / site update | continuing ns | hand ns "
        "| **hand / ugm** (paired median, min-max) | **hand / continuing** | first call ugm / hand (s) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:

        def ns(name):
            return f"{row[name]['ns_per_site_update_median']:.2f}"

        def ratio(key):
            r = row[key]
            return f"**{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f})"

        print(
            f"| {row['size']} | {row['q']} | {row['chains']} | {row['num_sweeps']} "
            f"| {ns('ugm_infer')} | {ns('ugm_continue')} | {ns('hand')} | {ratio('ratio_hand_over_ugm_infer')} "
            f"| {ratio('ratio_hand_over_ugm_continue')} "
            f"| {row['ugm_infer']['first_call_s']:.2f} / {row['hand']['first_call_s']:.2f} "
            f"| {row['load_average_after'][0]:.1f} |"
        )
    print(f"\nload average before {load_before}, after {load_after}")
    result = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "repeats": repeats,
        "quick": args.quick,
        "rows": rows,
    }
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(result, indent=2))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
