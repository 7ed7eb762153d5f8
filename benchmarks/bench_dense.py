"""Dense Boltzmann machines: a PCD update through ``ui.learn.pcd`` against a hand-written one.

Two measurements:

``bm16``
    a fully visible binary Boltzmann machine with 16 units (``ui.models.boltzmann_machine(16)``,
    dense couplings, one block per unit), PCD-1 with ``--particles`` persistent chains and
    minibatches of ``--batch`` random binary vectors, ``--steps`` updates inside one jitted
    ``lax.scan`` of ``learner.step`` (optax SGD), against the hand-written scan of
    ``benchmarks/handwritten.py`` (``bm_pcd``: sequential single-site sweep, plain SGD),
    timed alternately, compile excluded; the ratio is the median of per-repeat ratios.
``semi_rbm``
    one PCD-1 update of ``ui.models.semi_rbm(784, 500)`` (dense lateral couplings
    between the 784 visibles, which are therefore updated one unit at a time) with 100
    particles and a minibatch of 100 binary vectors: seconds per ``learner.step``
    (jitted, compile excluded), median of ``--repeats`` calls of ``--updates`` steps.

Both use the block Gibbs kernel's incremental single-site path
(``ugm_infer.kernels.pairwise``): one gradient per sweep and a rank-one field update per
unit, instead of one gradient per unit.

The same compiled step can run 10-20 % faster or slower from one process to the next
on a small virtual machine (thread placement of XLA's small operations); ``--processes
N`` runs ``bm16`` in ``N`` fresh processes and reports the median of their paired
medians, with the per-process ratios.

Run::

    python benchmarks/bench_dense.py                  # ~1 min
    python benchmarks/bench_dense.py --processes 5    # bm16 in 5 processes, ~2 min
    python benchmarks/bench_dense.py --quick          # a few seconds

Prints a table and writes ``benchmarks/results/bench_dense.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handwritten  # noqa: E402
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402


def bm16(num_units: int, particles: int, batch: int, steps: int, repeats: int, lr: float = 0.05) -> dict:
    model = ui.models.boltzmann_machine(num_units)
    params = model.init_params(jax.random.key(0), scale=0.5)
    data = jax.random.bernoulli(jax.random.key(1), 0.3, (steps, batch, num_units)).astype(jnp.float32)
    keys = jax.random.split(jax.random.key(2), steps)
    learner = ui.learn.pcd(model, optax.sgd(lr), num_particles=particles)
    state0 = learner.init(jax.random.key(3), params)

    @handwritten.jit
    def run_ugm(keys, state):
        def body(state, inputs):
            key, b = inputs
            return learner.step(key, state, {"s": b})[0], None

        return jax.lax.scan(body, state, (keys, data))[0]

    hand_step = handwritten.bm_pcd(num_units, particles, lr)
    W0 = params["W"]
    carry0 = (0.5 * (W0 + W0.T) * (1 - jnp.eye(num_units)), params["h"], state0.particles["s"].astype(jnp.float32))

    @handwritten.jit
    def run_hand(keys, carry):
        return jax.lax.scan(hand_step, carry, (keys, data))[0]

    runs = {"ugm_infer": (run_ugm, state0), "hand": (run_hand, carry0)}
    out = {}
    for name, (f, x) in runs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(f(keys, x))
        out[name] = {"first_call_s": time.perf_counter() - t0, "times_s": []}
    for _ in range(repeats):
        for name, (f, x) in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(keys, x))
            out[name]["times_s"].append(time.perf_counter() - t0)
    u, h = np.asarray(out["ugm_infer"]["times_s"]), np.asarray(out["hand"]["times_s"])
    return {
        "case": f"dense BM {num_units} units, PCD-1, {particles} particles, batch {batch}, {steps} updates per call",
        "ugm_infer_us_per_update": float(np.median(u) / steps * 1e6),
        "hand_us_per_update": float(np.median(h) / steps * 1e6),
        "ratio_ugm_over_hand_time": float(np.median(u / h)),
        "ratio_min_max": [float((u / h).min()), float((u / h).max())],
        **{f"{k}_first_call_s": v["first_call_s"] for k, v in out.items()},
        "times_s": {k: v["times_s"] for k, v in out.items()},
    }


def bm16_in_processes(args, steps: int, repeats: int) -> dict:
    """:func:`bm16` in ``args.processes`` fresh processes, one after another: the median of their paired medians."""
    runs = []
    for _ in range(args.processes):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bm16.json"
            command = [sys.executable, __file__, "--bm16-only", "--out", str(out), "--repeats", str(repeats)]
            command += ["--steps", str(steps), "--particles", str(args.particles), "--batch", str(args.batch)]
            subprocess.run(command, check=True)
            runs.append(json.loads(out.read_text()))
    ratios = np.asarray([r["ratio_ugm_over_hand_time"] for r in runs])
    return {
        "case": runs[0]["case"],
        "processes": len(runs),
        "ugm_infer_us_per_update": float(np.median([r["ugm_infer_us_per_update"] for r in runs])),
        "hand_us_per_update": float(np.median([r["hand_us_per_update"] for r in runs])),
        "ratio_ugm_over_hand_time": float(np.median(ratios)),
        "ratio_min_max": [float(ratios.min()), float(ratios.max())],
        "ratio_per_process": ratios.tolist(),
        "ugm_infer_first_call_s": float(np.median([r["ugm_infer_first_call_s"] for r in runs])),
        "hand_first_call_s": float(np.median([r["hand_first_call_s"] for r in runs])),
        "runs": runs,
    }


def semi_rbm(nv: int, nh: int, particles: int, batch: int, updates: int, repeats: int) -> dict:
    model = ui.models.semi_rbm(nv, nh)
    params = model.init_params(jax.random.key(0), scale=0.01, lateral_scale=0.01)
    data = jax.random.bernoulli(jax.random.key(1), 0.2, (updates, batch, nv)).astype(jnp.float32)
    keys = jax.random.split(jax.random.key(2), updates)
    learner = ui.learn.pcd(model, optax.sgd(0.01), num_particles=particles, visible="v")
    state0 = learner.init(jax.random.key(3), params)

    @handwritten.jit
    def run(keys, state):
        def body(state, inputs):
            key, b = inputs
            return learner.step(key, state, {"v": b})[0], None

        return jax.lax.scan(body, state, (keys, data))[0]

    t0 = time.perf_counter()
    jax.block_until_ready(run(keys, state0))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(keys, state0))
        times.append(time.perf_counter() - t0)
    return {
        "case": f"semi-RBM {nv}x{nh}, dense lateral couplings, PCD-1, {particles} particles, batch {batch}",
        "seconds_per_update_median": float(np.median(times) / updates),
        "seconds_per_update_min": float(np.min(times) / updates),
        "first_call_s": first,
        "updates_per_call": updates,
        "times_s": times,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--particles", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--steps", type=int, default=None, help="BM updates per timed call")
    parser.add_argument("--updates", type=int, default=None, help="semi-RBM updates per timed call")
    parser.add_argument("--processes", type=int, default=1, help="run bm16 in this many fresh processes")
    parser.add_argument("--bm16-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    args.out = args.out or f"benchmarks/results/bench_dense{'_quick' if args.quick else ''}.json"
    repeats = args.repeats or (2 if args.quick else 7)
    steps = args.steps or (20 if args.quick else 500)
    load_before = os.getloadavg()
    if args.bm16_only:
        Path(args.out).write_text(json.dumps(bm16(16, args.particles, args.batch, steps, repeats)))
        return
    if args.processes > 1:
        bm = bm16_in_processes(args, steps, repeats)
    else:
        bm = bm16(16, args.particles, args.batch, steps, repeats)
    print(
        f"{bm['case']}: ugm_infer {bm['ugm_infer_us_per_update']:.1f} us / update, hand-written "
        f"{bm['hand_us_per_update']:.1f} us; ugm / hand time {bm['ratio_ugm_over_hand_time']:.2f} (paired median"
        + (
            f" of {bm['processes']} processes: {', '.join(f'{r:.2f}' for r in bm['ratio_per_process'])})"
            if "processes" in bm
            else ")"
        ),
        flush=True,
    )
    if args.quick:
        semi = semi_rbm(16, 8, 10, 10, 2, repeats)
    else:
        semi = semi_rbm(784, 500, args.particles, args.batch, args.updates or 5, repeats)
    print(f"{semi['case']}: {semi['seconds_per_update_median']:.4f} s per update (median)", flush=True)
    result = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "quick": args.quick,
        "bm": bm,
        "semi_rbm": semi,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
