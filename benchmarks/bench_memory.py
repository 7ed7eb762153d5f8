"""Memory case: a 1024x1024 Ising lattice with 32 chains (float32 states by default, or ``--dtype int8``).

Runs ``ui.sample`` with the block-Gibbs kernel of ``ui.models.lattice_ising(1024, 1024,
dtype=...)`` for a few sweeps without storing the chain (``keep_states=False``):
per draw it records only each chain's energy and magnetisation (a ``trace_fn``), i.e.
streaming summary statistics, and reports the process's peak resident set size
(``resource.getrusage``'s ``ru_maxrss``) before and after, with the sizes of the state.
The target: the peak at the end within 1.2x of the peak after the imports plus the
state (``ratio_peak_over_imports_plus_state`` in the JSON).  Run it under
``/usr/bin/time -v`` for an independent peak-RSS reading::

    /usr/bin/time -v python benchmarks/bench_memory.py     # writes benchmarks/results/bench_memory.json
    python benchmarks/bench_memory.py --plain              # no summaries: bench_memory_plain.json
    python benchmarks/bench_memory.py --quick              # 64x64, 4 chains (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--chains", type=int, default=32)
    parser.add_argument("--draws", type=int, default=5, help="recorded draws (one sweep each)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "int8"), help="state dtype")
    parser.add_argument("--quick", action="store_true", help="64x64, 4 chains (a smoke test)")
    parser.add_argument(
        "--plain", action="store_true", help="no energies or trace_fn: ui.sample's default trace only (changed sites)"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.chains = 64, 4
    suffix = ("_plain" if args.plain else "") + ("_quick" if args.quick else "")
    out_path = args.out or f"benchmarks/results/bench_memory{suffix}.json"
    load_before = os.getloadavg()
    rss_start = peak_rss_mb()
    model = ui.models.lattice_ising(args.size, args.size, dtype=jnp.dtype(args.dtype))
    params = model.init_params(J=0.44)
    # a uniformly random start built in numpy int8 directly (model.random_state would
    # generate it through 32-bit random words, whose temporaries would set the peak)
    # (int8 on the host, the conversion on the device: no float64 temporaries on the host)
    rng = np.random.default_rng(0)
    spins = rng.integers(0, 2, size=(args.chains, args.size, args.size), dtype=np.int8)
    x0 = {"s": (2 * jnp.asarray(spins) - 1).astype(args.dtype)}
    del spins
    jax.block_until_ready(x0)
    rss_state = peak_rss_mb()
    gibbs = ui.kernels.gibbs(model, params)

    def trace_fn(state, info):
        return {"magnetisation": jnp.mean(state.position["s"].astype(jnp.float32), axis=(-2, -1))}

    t0 = time.perf_counter()
    summaries = {} if args.plain else {"model": model, "params": params, "trace_fn": trace_fn}
    result = ui.sample(jax.random.key(1), gibbs, x0, args.draws, keep_states=False, **summaries)
    jax.block_until_ready(result.final_state.position)
    seconds = time.perf_counter() - t0
    rss_end = peak_rss_mb()
    final = np.asarray(result.final_state.position["s"], dtype=np.float32)
    mag = np.mean(final, axis=(-2, -1))[:, None] if args.plain else np.asarray(result.infos["magnetisation"])
    energies = np.zeros((args.chains, 1)) if args.plain else np.asarray(result.energies)
    state_mb = x0["s"].nbytes / 2**20
    out = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "lattice": f"{args.size}x{args.size} periodic",
        "num_chains": args.chains,
        "num_draws": args.draws,
        "recorded": "default trace (changed sites)" if args.plain else "energies and magnetisation per draw",
        "state_dtype": str(x0["s"].dtype),
        "state_mb": state_mb,
        "seconds_including_compile": seconds,
        "peak_rss_mb_after_imports": rss_start,
        "peak_rss_mb_after_state": rss_state,
        "peak_rss_mb_end": rss_end,
        "peak_increase_over_imports_mb": rss_end - rss_start,
        "ratio_peak_over_imports_plus_state": rss_end / (rss_start + state_mb),
        "final_mean_abs_magnetisation": float(np.mean(np.abs(mag[-1]))),
        "final_mean_energy_per_site": float(np.mean(energies[-1]) / args.size**2),
        "recorded_shapes": {"energies": list(energies.shape), "magnetisation": list(mag.shape)},
    }
    print(json.dumps(out, indent=2))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
