"""Bit-packed (multi-spin-coded) checkerboard heat bath versus the float block-Gibbs kernel.

Periodic 2D Ising lattices (J = 0.44, h = 0) with 32 chains (one
uint32 word per site) and 256 chains (8 words): ``ugm_infer.kernels.multispin``'s sweep in a
jitted ``lax.scan`` against the default path a user calls, ``ui.sample`` of
``ui.kernels.gibbs(model, params)`` from float32 positions (the four-sub-lattice sweep,
see ``bench_sweeps.py``).  Both run ``num_sweeps`` sweeps in one compiled call; compile
timed separately; the two are timed alternately, repeat after
repeat, and the speed ratio is the median of the per-repeat paired ratios.  Reports spin
updates per second (sites x chains x sweeps / time) and the mean number of random planes
the multi-spin kernel drew per sweep (two colours; at most 64).  A third contender runs the
multi-spin kernel with ``early_exit=False`` (always 32 planes per colour, a fixed-length
loop without a device-side condition, which may suit a GPU better).

Run::

    python benchmarks/bench_multispin.py            # writes benchmarks/results/bench_multispin.json
    python benchmarks/bench_multispin.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handwritten  # noqa: E402
from bench_sweeps import library_sweep, machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402
from ugm_infer.kernels import multispin  # noqa: E402


def multispin_run(model, params, num_sweeps, early_exit=True):
    sweep = multispin.build_sweep(model, early_exit=early_exit)

    @handwritten.jit
    def run(key, words):
        def body(w, k):
            return sweep(k, w, params)

        words, planes = jax.lax.scan(body, words, jax.random.split(key, num_sweeps))
        return words, planes

    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = parser.parse_args(argv)
    args.out = args.out or "benchmarks/results/bench_multispin.json"
    if args.quick and args.out == "benchmarks/results/bench_multispin.json":
        args.out = args.out.replace(".json", "_quick.json")
    repeats = args.repeats or (2 if args.quick else 5)
    cases = [(16, 32, 4)] if args.quick else [(128, 32, 100), (512, 32, 10), (128, 256, 20)]
    rows = []
    for size, chains, sweeps in cases:
        model = ui.models.lattice_ising(size, size)
        params = model.init_params(None)
        start = model.random_state(jax.random.key(1), chains)
        words = multispin.pack(start["s"])
        runs = {
            "float": library_sweep(model, params, sweeps),
            "multispin": multispin_run(model, params, sweeps),
            "multispin_fixed": multispin_run(model, params, sweeps, early_exit=False),
        }
        inputs = {"float": start, "multispin": words, "multispin_fixed": words}
        out = {}
        key = jax.random.key(0)
        for name, run in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(run(key, inputs[name]))
            out[name] = {"compile_and_first_s": time.perf_counter() - t0, "times_s": []}
        planes = []
        for r in range(repeats):
            for name, run in runs.items():
                k = jax.random.fold_in(key, r + 1)
                t0 = time.perf_counter()
                res = jax.block_until_ready(run(k, inputs[name]))
                out[name]["times_s"].append(time.perf_counter() - t0)
                if name == "multispin":
                    planes.append(float(np.mean(np.asarray(res[1]))))
        updates = size * size * chains * sweeps
        row = {"case": f"Ising {size}x{size} periodic, {chains} chains", "num_sweeps": sweeps, "num_chains": chains}
        for name, t in out.items():
            times = np.array(t["times_s"])
            row[name] = {
                "time_min_s": float(times.min()),
                "time_median_s": float(np.median(times)),
                "time_max_s": float(times.max()),
                "spin_updates_per_s_median": updates / float(np.median(times)),
                "compile_and_first_s": t["compile_and_first_s"],
                "times_s": [float(x) for x in times],
            }
        row["speed_ratio_multispin_over_float"] = float(
            np.median(np.array(out["float"]["times_s"]) / np.array(out["multispin"]["times_s"]))
        )
        paired = np.array(out["float"]["times_s"]) / np.array(out["multispin"]["times_s"])
        row["speed_ratio_multispin_over_float_min_max"] = [float(paired.min()), float(paired.max())]
        fixed = np.array(out["float"]["times_s"]) / np.array(out["multispin_fixed"]["times_s"])
        row["speed_ratio_multispin_fixed_over_float"] = float(np.median(fixed))
        row["random_planes_per_sweep_mean"] = float(np.mean(planes))
        rows.append(row)
        print(f"done: {row['case']}", flush=True)

    print()
    print(
        "| case | sweeps / call | float spin updates/s | multi-spin spin updates/s | multi-spin / float (paired) "
        "| random planes / sweep | fixed 32 planes / float (paired) | compile float / multi-spin (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        f, m = row["float"], row["multispin"]
        print(
            f"| {row['case']} | {row['num_sweeps']} | {f['spin_updates_per_s_median']:.3g} | "
            f"{m['spin_updates_per_s_median']:.3g} | **{row['speed_ratio_multispin_over_float']:.2f}** | "
            f"{row['random_planes_per_sweep_mean']:.1f} | {row['speed_ratio_multispin_fixed_over_float']:.2f} | "
            f"{f['compile_and_first_s']:.1f} / {m['compile_and_first_s']:.1f} |"
        )
    result = {"machine": machine_info(), "repeats": repeats, "quick": args.quick, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
