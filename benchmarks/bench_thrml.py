"""Block-Gibbs sweep throughput: ugm_infer versus hand-written JAX versus THRML.

Cases: periodic 2D Ising 128x128 and 512x512 with 1 and 32 chains
(two-colour checkerboard blocks) and an RBM 784x500 with 100 chains (visible and hidden
blocks).  THRML (PyPI ``thrml``, Extropic) must be installed, in the benchmark's own
environment::

    python3 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install -e . thrml "jax==0.10.2" "jaxlib==0.10.2"
    /work/bench-venv/bin/python benchmarks/bench_thrml.py            # full
    /work/bench-venv/bin/python benchmarks/bench_thrml.py --quick    # smoke test

The THRML side is the fastest form its public API allows: an ``IsingEBM`` (spins
``{-1, +1}`` stored as bools, the RBM mapped to spins exactly: ``W/4``,
``b/2 + W 1/4``, ``c/2 + W^T 1/4``) with an ``IsingSamplingProgram`` over the two
colour blocks, and ``thrml.sample_blocks`` (one visit of every block) in our own
``lax.scan`` -- what ``thrml``'s ``_run_blocks`` does, without observers or stored
samples -- vmapped over chains, under ``equinox.filter_jit`` with the program passed as
an argument.  All three contenders run ``num_sweeps`` sweeps in one compiled call;
compilation (and THRML's Python-side program construction) is timed separately; the
contenders are timed alternately, repeat after repeat, and the ratios are medians of
per-repeat paired ratios, so they hold on a shared, loaded machine even though the
absolute times do not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import thrml
from thrml.models import IsingEBM, IsingSamplingProgram

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import (  # noqa: E402
    handwritten_lattice_sweep,
    handwritten_rbm_sweep,
    library_sweep,
    machine_info,
    time_pair,
)

import ugm_infer as ui  # noqa: E402


# --------------------------------------------------------------------------------------
# THRML programs
# --------------------------------------------------------------------------------------
def thrml_lattice_program(size: int, J: float, h: float):
    """Periodic ``size x size`` Ising lattice; free blocks = the two checkerboard colours."""
    nodes = [thrml.SpinNode() for _ in range(size * size)]

    def at(i, j):
        return nodes[(i % size) * size + (j % size)]

    edges = [(at(i, j), at(i, j + 1)) for i in range(size) for j in range(size)]
    edges += [(at(i, j), at(i + 1, j)) for i in range(size) for j in range(size)]
    ebm = IsingEBM(nodes, edges, jnp.full(len(nodes), h, jnp.float32), jnp.full(len(edges), J, jnp.float32), jnp.array(1.0))
    colours = [thrml.Block([at(i, j) for i in range(size) for j in range(size) if (i + j) % 2 == c]) for c in (0, 1)]
    return IsingSamplingProgram(ebm, colours, []), [len(b.nodes) for b in colours]


def thrml_rbm_program(W: np.ndarray, b: np.ndarray, c: np.ndarray):
    """The binary RBM as a bipartite Ising model on spins ``s = 2x - 1`` (same distribution)."""
    nv, nh = W.shape
    vis = [thrml.SpinNode() for _ in range(nv)]
    hid = [thrml.SpinNode() for _ in range(nh)]
    edges = [(vis[i], hid[j]) for i in range(nv) for j in range(nh)]
    weights = jnp.asarray(W.reshape(-1) / 4.0, jnp.float32)
    biases = jnp.asarray(np.concatenate([b / 2 + W.sum(1) / 4, c / 2 + W.sum(0) / 4]), jnp.float32)
    ebm = IsingEBM(vis + hid, edges, biases, weights, jnp.array(1.0))
    return IsingSamplingProgram(ebm, [thrml.Block(vis), thrml.Block(hid)], []), [nv, nh]


def thrml_sweep(program, num_sweeps: int):
    """``num_sweeps`` calls of ``thrml.sample_blocks`` in a ``lax.scan``, vmapped over chains."""
    sampler_state = [s.init() for s in program.samplers]

    @eqx.filter_jit
    def run(key, state, program):
        def chain(k, s):
            def body(s, kk):
                return thrml.sample_blocks(kk, s, [], program, list(sampler_state))[0], None

            return jax.lax.scan(body, s, jax.random.split(k, num_sweeps))[0]

        return jax.vmap(chain)(jax.random.split(key, state[0].shape[0]), state)

    return lambda key, state: run(key, state, program)


def random_bool_state(key, chains, sizes):
    return [jax.random.bernoulli(k, 0.5, (chains, n)) for k, n in zip(jax.random.split(key, len(sizes)), sizes)]


# --------------------------------------------------------------------------------------
def stats(times):
    t = np.asarray(times)
    return float(t.min()), float(np.median(t)), float(t.max())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", default=None, help="run only cases whose label contains this string")
    parser.add_argument("--rbm-sweeps", type=int, default=20, help="sweeps per timed call for the RBM case")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = parser.parse_args(argv)
    args.out = args.out or "benchmarks/results/bench_thrml.json"
    if args.quick and args.out == "benchmarks/results/bench_thrml.json":
        args.out = args.out.replace(".json", "_quick.json")
    repeats = args.repeats or (2 if args.quick else 5)
    if args.quick:
        cases = [("lattice", 32, 1, 20), ("lattice", 32, 8, 10), ("rbm", (100, 50), 20, 10)]
    else:
        cases = [
            ("lattice", 128, 1, 200),
            ("lattice", 128, 32, 40),
            ("lattice", 512, 1, 40),
            ("lattice", 512, 32, 8),
            ("rbm", (784, 500), 100, args.rbm_sweeps),
        ]

    rows = []
    for kind, size, chains, sweeps in cases:
        key = jax.random.key(1)
        if kind == "lattice":
            label = f"Ising {size}x{size} periodic, {chains} chain{'s' if chains > 1 else ''}"
        else:
            label = f"RBM {size[0]}x{size[1]}, {chains} chains"
        if args.only and args.only not in label:
            continue
        t0 = time.perf_counter()
        if kind == "lattice":
            model = ui.models.lattice_ising(size, size)
            params = model.init_params(key)
            J, h = float(params["J"]), float(params["h"])
            s0 = model.random_state(key, chains)
            program, sizes = thrml_lattice_program(size, J, h)
            runs = {
                "ugm_infer": library_sweep(model, params, sweeps),
                "handwritten": handwritten_lattice_sweep(J, h, sweeps),
                "thrml": thrml_sweep(program, sweeps),
            }
            inputs = {"ugm_infer": s0, "handwritten": s0["s"]}
            site_updates = size * size * chains * sweeps
        else:
            nv, nh = size
            model = ui.models.rbm(nv, nh)
            params = model.init_params(key, scale=0.1)
            x0 = model.random_state(key, chains)
            program, sizes = thrml_rbm_program(*(np.asarray(params[k], np.float64) for k in ("W", "b", "c")))
            runs = {
                "ugm_infer": library_sweep(model, params, sweeps),
                "handwritten": handwritten_rbm_sweep(params["W"], params["b"], params["c"], sweeps),
                "thrml": thrml_sweep(program, sweeps),
            }
            inputs = {"ugm_infer": x0, "handwritten": x0["v"]}
            site_updates = (nv + nh) * chains * sweeps
        build_s = time.perf_counter() - t0
        inputs["thrml"] = random_bool_state(key, chains, sizes)
        print(f"{label}: THRML program built ({build_s:.1f} s incl. model setup)", flush=True)
        timings = time_pair(runs, inputs, repeats)
        row = {"case": label, "num_sweeps": sweeps, "num_chains": chains, "thrml_build_s": build_s}
        for name, t in timings.items():
            tmin, tmed, tmax = stats(t["times_s"])
            row[name] = {
                "sweeps_per_s_median": sweeps / tmed,
                "sweeps_per_s_min": sweeps / tmax,
                "sweeps_per_s_max": sweeps / tmin,
                "time_min_s": tmin,
                "time_median_s": tmed,
                "time_max_s": tmax,
                "times_s": t["times_s"],
                "compile_and_first_s": t["compile_and_first_s"],
                "site_updates_per_s_median": site_updates / tmed,
            }
        u = np.array(timings["ugm_infer"]["times_s"])
        row["ratio_ugm_over_handwritten"] = float(np.median(np.array(timings["handwritten"]["times_s"]) / u))
        row["ratio_ugm_over_thrml"] = float(np.median(np.array(timings["thrml"]["times_s"]) / u))
        rows.append(row)
        print(
            f"done: {label}: ugm/hand {row['ratio_ugm_over_handwritten']:.3f}, ugm/THRML {row['ratio_ugm_over_thrml']:.2f}",
            flush=True,
        )

    print()
    print(
        "| case | ugm_infer sweeps/s (min-max) | hand-written sweeps/s | THRML sweeps/s | ugm / hand | ugm / THRML "
        "| compile ugm / hand / THRML (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        u, hw, th = row["ugm_infer"], row["handwritten"], row["thrml"]

        def fmt(d):
            return f"{d['sweeps_per_s_median']:.3g} ({d['sweeps_per_s_min']:.3g}-{d['sweeps_per_s_max']:.3g})"

        print(
            f"| {row['case']} | {fmt(u)} | {fmt(hw)} | {fmt(th)} | {row['ratio_ugm_over_handwritten']:.3f} | "
            f"{row['ratio_ugm_over_thrml']:.2f} | {u['compile_and_first_s']:.1f} / {hw['compile_and_first_s']:.1f} / "
            f"{th['compile_and_first_s']:.1f} (+{row['thrml_build_s']:.1f} build) |"
        )
    info = machine_info()
    info["thrml"] = thrml.__version__
    info["equinox"] = eqx.__version__
    result = {"machine": info, "repeats": repeats, "quick": args.quick, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
