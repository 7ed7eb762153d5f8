"""Block-Gibbs sweep throughput: ugm_infer kernels versus a minimal hand-written plain-JAX sweep.

Cases:

* periodic 2D Ising lattice 128x128 and 512x512, 32 chains (checkerboard sweep);
* RBM 784x500, 100 chains (two matmul block updates).

For the RBM it also measures the sweep's FLOP efficiency: a third
contender, ``matmul_ref``, runs the sweep's two matrix products alone -- ``(chains, nv) @
(nv, nh)`` then ``(chains, nh) @ (nh, nv)``, chained through the carry of a jitted
``lax.scan`` so neither can be hoisted -- and is timed alternately with the sweeps.  The
FLOP count of a sweep is ``2 * 2 * chains * nv * nh`` for the matmuls (156.8 MFLOP for
100 x 784 x 500) plus about ``6 * chains * (nv + nh)`` elementwise (bias add, sigmoid as
exp + add + divide, uniform draw compare, cast: 0.77 MFLOP, 0.5 %), which the fraction
below ignores.  Efficiency = achieved matmul FLOP/s of the sweep / measured matmul FLOP/s
at the same shapes = ``t_matmul_ref / t_ugm_infer`` (paired per repeat).

Both sides run ``num_sweeps`` sweeps in one compiled call (ugm_infer: ``ui.sample`` with
``keep_states=False`` and nothing traced, from the positions); compile time is
measured separately; ugm_infer and the baseline are timed alternately, repeat after
repeat, so the ratio is taken side by side on the same (shared) machine.  Prints a
markdown table and writes JSON (machine info, versions, min/median/max).

Run::

    python benchmarks/bench_sweeps.py            # full
    python benchmarks/bench_sweeps.py --quick    # smaller, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import ugm_infer as ui

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handwritten  # noqa: E402


# --------------------------------------------------------------------------------------
# hand-written baselines (what a JAX user would write without the library)
# --------------------------------------------------------------------------------------
def handwritten_lattice_sweep(J, h, num_sweeps):
    def sweep(s, key):
        height, width = s.shape[-2:]
        parity = (jnp.arange(height)[:, None] + jnp.arange(width)[None, :]) % 2
        for color, k in zip((0, 1), jax.random.split(key)):
            nb = jnp.roll(s, 1, -1) + jnp.roll(s, -1, -1) + jnp.roll(s, 1, -2) + jnp.roll(s, -1, -2)
            prob_up = jax.nn.sigmoid(2.0 * (J * nb + h))
            new = jnp.where(jax.random.uniform(k, s.shape) < prob_up, 1.0, -1.0)
            s = jnp.where(parity == color, new, s)
        return s, None

    @handwritten.jit
    def run(key, s):
        return jax.lax.scan(sweep, s, jax.random.split(key, num_sweeps))[0]

    return run


def handwritten_rbm_sweep(W, b, c, num_sweeps):
    def sweep(v, key):
        kh, kv = jax.random.split(key)
        hid = (jax.random.uniform(kh, (v.shape[0], W.shape[1])) < jax.nn.sigmoid(v @ W + c)).astype(v.dtype)
        v = (jax.random.uniform(kv, v.shape) < jax.nn.sigmoid(hid @ W.T + b)).astype(v.dtype)
        return v, None

    @handwritten.jit
    def run(key, v):
        return jax.lax.scan(sweep, v, jax.random.split(key, num_sweeps))[0]

    return run


def matmul_reference(W, num_sweeps):
    """The RBM sweep's two matrix products alone, chained so XLA cannot hoist them.

    A cheap rescaling (one rsqrt of the mean square) keeps the values normal (no
    denormals, no overflow); it costs ``O(chains * nv)`` next to ``2 * chains * nv * nh``.
    """

    def step(x, _):
        hid = x @ W
        x = hid @ W.T
        return x * jax.lax.rsqrt(jnp.mean(x * x) + 1e-12), None

    @handwritten.jit
    def run(key, v):
        del key
        return jax.lax.scan(step, v.astype(W.dtype), None, length=num_sweeps)[0]

    return run


# --------------------------------------------------------------------------------------
# ugm_infer
# --------------------------------------------------------------------------------------
def library_sweep(model, params, num_sweeps):
    """``run(key, position)``: what a user calls, ``ui.sample`` of ``ui.kernels.gibbs`` for ``num_sweeps`` sweeps.

    From the positions in every call (``ui.sample`` converts them to the kernel's layout
    inside its compiled run), nothing kept; returns the final kernel states.
    """
    algorithm = ui.kernels.gibbs(model, params)

    def run(key, position):
        return ui.sample(key, algorithm, position, num_sweeps, keep_states=False, trace_fn=lambda s, i: ()).final_state

    return run


def _block(x):
    return jax.tree.map(lambda a: a.block_until_ready(), x)


def time_pair(runs: dict, inputs: dict, repeats: int) -> dict:
    """Compile each run once (timed), then time them alternately ``repeats`` times."""
    key = jax.random.key(0)
    out = {}
    for name, run in runs.items():
        t0 = time.perf_counter()
        _block(run(key, inputs[name]))
        out[name] = {"compile_and_first_s": time.perf_counter() - t0, "times_s": []}
    for r in range(repeats):
        for name, run in runs.items():
            k = jax.random.fold_in(key, r + 1)
            t0 = time.perf_counter()
            _block(run(k, inputs[name]))
            out[name]["times_s"].append(time.perf_counter() - t0)
    return out


def machine_info() -> dict:
    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15min": os.getloadavg(),  # when the result is written
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "ugm_infer": ui.__version__,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = parser.parse_args(argv)
    args.out = args.out or "benchmarks/results/bench_sweeps.json"
    if args.quick and args.out == "benchmarks/results/bench_sweeps.json":
        args.out = args.out.replace(".json", "_quick.json")
    repeats = args.repeats or (2 if args.quick else 7)
    cases = []
    lattice_sizes = [(16, 4)] if args.quick else [(128, 200), (512, 20)]
    for size, sweeps in lattice_sizes:
        cases.append(("lattice", size, 32, sweeps))
    cases.append(("rbm", (20, 10) if args.quick else (784, 500), 4 if args.quick else 100, 4 if args.quick else 100))

    rows = []
    for kind, size, chains, sweeps in cases:
        key = jax.random.key(1)
        if kind == "lattice":
            model = ui.models.lattice_ising(size, size)
            params = model.init_params(key)
            J, h = float(params["J"]), float(params["h"])
            s0 = model.random_state(key, chains)
            runs = {
                "ugm_infer": library_sweep(model, params, sweeps),
                "handwritten": handwritten_lattice_sweep(J, h, sweeps),
            }
            inputs = {"ugm_infer": s0, "handwritten": s0["s"]}
            label = f"Ising {size}x{size} periodic, {chains} chains"
            site_updates = size * size * chains * sweeps
        else:
            nv, nh = size
            model = ui.models.rbm(nv, nh)
            params = model.init_params(key, scale=0.1)
            x0 = model.random_state(key, chains)
            runs = {
                "ugm_infer": library_sweep(model, params, sweeps),
                "handwritten": handwritten_rbm_sweep(params["W"], params["b"], params["c"], sweeps),
                "matmul_ref": matmul_reference(params["W"], sweeps),
            }
            inputs = {"ugm_infer": x0, "handwritten": x0["v"], "matmul_ref": x0["v"]}
            label = f"RBM {nv}x{nh}, {chains} chains"
            site_updates = (nv + nh) * chains * sweeps
        timings = time_pair(runs, inputs, repeats)
        row = {"case": label, "num_sweeps": sweeps, "num_chains": chains}
        for name, t in timings.items():
            times = np.array(t["times_s"])
            row[name] = {
                "sweeps_per_s_median": sweeps / float(np.median(times)),
                "time_min_s": float(times.min()),
                "time_median_s": float(np.median(times)),
                "time_max_s": float(times.max()),
                "compile_and_first_s": t["compile_and_first_s"],
                "site_updates_per_s_median": site_updates / float(np.median(times)),
                "times_s": [float(x) for x in times],
            }
        # ratio of medians of per-repeat paired ratios: robust to drift between repeats
        paired = np.array(timings["handwritten"]["times_s"]) / np.array(timings["ugm_infer"]["times_s"])
        row["speed_ratio_ugm_over_handwritten"] = float(np.median(paired))
        row["speed_ratio_ugm_over_handwritten_min_max"] = [float(paired.min()), float(paired.max())]
        if "matmul_ref" in timings:
            nv, nh = size
            matmul_flops = 2 * 2 * chains * nv * nh * sweeps
            t_mm = np.array(timings["matmul_ref"]["times_s"])
            t_u = np.array(timings["ugm_infer"]["times_s"])
            row["flops"] = {
                "matmul_flops_per_sweep": matmul_flops // sweeps,
                "elementwise_flops_per_sweep_approx": 6 * chains * (nv + nh),
                "ugm_infer_gflops_median": matmul_flops / float(np.median(t_u)) / 1e9,
                "matmul_ref_gflops_median": matmul_flops / float(np.median(t_mm)) / 1e9,
                "matmul_ref_gflops_max": matmul_flops / float(t_mm.min()) / 1e9,
                "efficiency_paired_median": float(np.median(t_mm / t_u)),
            }
        rows.append(row)
        print(f"done: {label}", flush=True)

    print()
    print("| case | ugm_infer sweeps/s | hand-written sweeps/s | ratio (ugm / hand) | compile ugm / hand (s) |")
    print("|---|---|---|---|---|")
    for row in rows:
        u, hw = row["ugm_infer"], row["handwritten"]
        print(
            f"| {row['case']} | {u['sweeps_per_s_median']:.1f} | {hw['sweeps_per_s_median']:.1f} | "
            f"{row['speed_ratio_ugm_over_handwritten']:.3f} | {u['compile_and_first_s']:.2f} / "
            f"{hw['compile_and_first_s']:.2f} |"
        )
    for row in rows:
        if "flops" in row:
            f = row["flops"]
            print(
                f"\n{row['case']}: sweep {f['ugm_infer_gflops_median']:.2f} GFLOP/s (matmul part, "
                f"{f['matmul_flops_per_sweep'] / 1e6:.1f} MFLOP/sweep) vs matmul reference "
                f"{f['matmul_ref_gflops_median']:.2f} GFLOP/s at the same shapes: "
                f"efficiency {100 * f['efficiency_paired_median']:.0f} % (paired median)"
            )
    result = {"machine": machine_info(), "repeats": repeats, "quick": args.quick, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
