"""The fused draws of ``ugm_infer._random`` against ``jax.random`` on the paths users call.

``ugm_infer`` draws its uniforms, integers, categorical values and keys through
``ugm_infer._random``: the same numbers as ``jax.random`` bit for bit, with the
Threefry hash written as array operations that XLA fuses (``jax.random`` runs it as a
five-iteration loop over whole arrays on the CPU), and keys and large blocks computed
once (``computed_once``). This script times each path twice in one process, as
shipped and with every one of those names pointed back at ``jax.random`` (and
``computed_once`` at a plain call), alternated repeat by repeat, compile excluded; it
asserts that both give the same result bit for bit. Ratio = fused time / ``jax.random``
time per repeat (below 1: the fused draws are faster), median and min-max.

Cases:

``bm16_pcd``
    ``learner.step`` of ``ui.learn.pcd`` on ``ui.models.boltzmann_machine(16)``, 100
    particles, minibatches of 100, ``--steps`` updates in one jitted ``lax.scan``.
``rbm_pcd``
    the same on ``ui.models.rbm(784, 500)`` with random binary minibatches (``ui.fit``'s
    MNIST learner, without the data).
``ising_metropolis``
    ``ui.sample`` of ``ui.kernels.metropolis`` on ``ui.models.ising(16)``, 32 chains.
``potts_gibbs``
    ``ui.sample`` of ``ui.kernels.gibbs`` on ``ui.models.potts(12, 5)`` (one categorical
    site per block: the enumeration update), 32 chains.

Run::

    python benchmarks/bench_draws.py              # ~1 min
    python benchmarks/bench_draws.py --quick      # a smoke test

Prints a table and writes ``benchmarks/results/bench_draws.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402
from ugm_infer import _random  # noqa: E402

_JAX_RANDOM = {
    "split_key": jax.random.split,
    "fold_in_key": jax.random.fold_in,
    "split": jax.random.split,
    "fold_in": jax.random.fold_in,
    "uniform": lambda key, shape=(), dtype=jnp.float32: jax.random.uniform(key, shape, dtype),
    "randint": jax.random.randint,
    "categorical": jax.random.categorical,
    "computed_once": lambda fn, first, *args: fn(first, *args),
}
_FUSED = {
    "split_key": _random.split,
    "fold_in_key": _random.fold_in,
    "split": _random.split,
    "fold_in": _random.fold_in,
    "uniform": _random.uniform,
    "randint": _random.randint,
    "categorical": _random.categorical,
    "computed_once": _random.computed_once,
}
_SHIM = types.SimpleNamespace(**_JAX_RANDOM)


def draw_with(source: str) -> None:
    """Point every ``ugm_infer`` module's names for the ``_random`` functions at ``source`` ("fused" or "jax").

    Takes effect for programs traced afterwards; modules that hold ``_random`` itself get
    a namespace of the ``jax.random`` functions.
    """
    table = _FUSED if source == "fused" else _JAX_RANDOM
    for name, module in list(sys.modules.items()):
        if not name.startswith("ugm_infer") or module is None or module is _random:
            continue
        for attr in _FUSED:
            current = getattr(module, attr, None)
            if current is not None and (current is _FUSED[attr] or current is _JAX_RANDOM[attr]):
                setattr(module, attr, table[attr])
        if getattr(module, "_random", None) in (_random, _SHIM):
            module._random = _random if source == "fused" else _SHIM


def _learner_case(model, batch_of, particles: int, steps: int, visible=None):
    params = model.init_params(jax.random.key(0))
    keys = jax.random.split(jax.random.key(2), steps)
    data = batch_of(jax.random.key(1))
    kwargs = {} if visible is None else {"visible": visible}

    def build():
        learner = ui.learn.pcd(model, optax.sgd(0.01), num_particles=particles, **kwargs)
        state0 = learner.init(jax.random.key(3), params)

        @jax.jit
        def run(keys, state):
            def body(state, inputs):
                key, b = inputs
                return learner.step(key, state, b)[0], None

            return jax.lax.scan(body, state, (keys, data))[0].params

        return lambda: run(keys, state0)

    return build


def _kernel_info(_, state, info):
    return info


def _sample_case(model, kernel: str, chains: int, sweeps: int):
    params = model.init_params(jax.random.key(0))
    x0 = model.random_state(jax.random.key(1), chains)

    def build():
        algorithm = getattr(ui.kernels, kernel)(model, params)
        # ui.sample's default trace (the kernel's info), as a function of its own for each build: ui.sample
        # caches its compiled run per (kernel, sizes, trace_fn), and each source needs its own program
        trace_fn = functools.partial(_kernel_info, object())
        return lambda: (
            ui.sample(jax.random.key(2), algorithm, x0, sweeps, keep_states=False, trace_fn=trace_fn).final_state.position
        )

    return build


def cases(quick: bool, steps: int) -> dict:
    """``{name: (build() -> run(), description)}``."""
    n16 = 16
    rbm = (64, 16) if quick else (784, 500)
    out = {
        "bm16_pcd": (
            _learner_case(
                ui.models.boltzmann_machine(n16),
                lambda k: {"s": jax.random.bernoulli(k, 0.3, (steps, 100, n16)).astype(jnp.float32)},
                100,
                steps,
            ),
            f"dense BM {n16} units, PCD-1, 100 particles, batch 100, {steps} learner steps in a scan",
        ),
        "rbm_pcd": (
            _learner_case(
                ui.models.rbm(*rbm),
                lambda k: {"v": jax.random.bernoulli(k, 0.2, (steps // 5, 100, rbm[0])).astype(jnp.float32)},
                100,
                steps // 5,
                visible="v",
            ),
            f"RBM {rbm[0]}-{rbm[1]}, PCD-1, 100 particles, batch 100, {steps // 5} learner steps in a scan",
        ),
        "ising_metropolis": (
            _sample_case(ui.models.ising(16), "metropolis", 32, steps),
            f"ui.sample, Metropolis, ising(16), 32 chains, {steps} sweeps",
        ),
        "potts_gibbs": (
            _sample_case(ui.models.potts(12, 5), "gibbs", 32, steps // 5),
            f"ui.sample, block Gibbs (enumeration), potts(12, 5), 32 chains, {steps // 5} sweeps",
        ),
    }
    return out


def time_case(build, repeats: int) -> dict:
    runs, first, results = {}, {}, {}
    for source in ("fused", "jax"):
        draw_with(source)
        t0 = time.perf_counter()
        runs[source] = build()
        results[source] = jax.block_until_ready(runs[source]())
        first[source] = time.perf_counter() - t0
    draw_with("fused")
    for a, b in zip(jax.tree.leaves(results["fused"]), jax.tree.leaves(results["jax"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the same draws, bit for bit
    times = {source: [] for source in runs}
    for _ in range(repeats):
        for source, run in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(run())
            times[source].append(time.perf_counter() - t0)
    ratio = np.asarray(times["fused"]) / np.asarray(times["jax"])
    return {
        "fused_ms": float(np.median(times["fused"]) * 1e3),
        "jax_random_ms": float(np.median(times["jax"]) * 1e3),
        "ratio_fused_over_jax_random": {
            "median": float(np.median(ratio)),
            "min": float(ratio.min()),
            "max": float(ratio.max()),
        },
        "first_call_s": first,
        "times_s": times,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 repeats (a smoke test)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="learner steps / sweeps per timed call (default 500)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 9)
    steps = args.steps or (10 if args.quick else 500)
    out = Path(args.out or f"benchmarks/results/bench_draws{'_quick' if args.quick else ''}.json")
    load_before = os.getloadavg()
    rows = {}
    for name, (build, description) in cases(args.quick, steps).items():
        rows[name] = {"case": description, **time_case(build, repeats)}
        r = rows[name]["ratio_fused_over_jax_random"]
        print(f"{description}: fused {rows[name]['fused_ms']:.2f} ms, jax.random {rows[name]['jax_random_ms']:.2f} ms; "
              f"fused / jax.random {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})", flush=True)  # fmt: skip
    print("\n| case | fused ms | jax.random ms | **fused / jax.random** (paired median, min-max) | first call (s) |")
    print("|---|---|---|---|---|")
    for row in rows.values():
        r = row["ratio_fused_over_jax_random"]
        f = row["first_call_s"]
        print(f"| {row['case']} | {row['fused_ms']:.2f} | {row['jax_random_ms']:.2f} | **{r['median']:.2f}** "
              f"({r['min']:.2f}-{r['max']:.2f}) | {f['fused']:.2f} / {f['jax']:.2f} |")  # fmt: skip
    result = {
        "machine": machine_info(),
        "command": "python benchmarks/bench_draws.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "repeats": repeats,
        "steps": steps,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
