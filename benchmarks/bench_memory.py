"""Memory case: a 1024x1024 Ising lattice with 32 chains (float32 states by default, or ``--dtype int8``).

Runs ``ui.sample`` with the block-Gibbs kernel of ``ui.models.lattice_ising(1024, 1024,
dtype=...)`` for a few sweeps without storing the chain (``keep_states=False``):
per draw it records only each chain's energy and magnetisation (a ``trace_fn``), i.e.
streaming summary statistics (``--plain``: only ``ui.sample``'s default trace), and
reports the process's resident set size (``/proc/self/status``):

* after the imports; after JAX's first operation (the CPU runtime and a first
  compilation, which every JAX program pays); after building the model and the kernel;
* after building the start (a uniformly random float32 state, generated on the device
  by one fused hash so that no temporaries of the generation set the peak);
* the peak during the ``ui.sample`` call, with the high-water mark reset once the start
  exists (``/proc/self/clear_refs``), so that it counts ``ui.sample`` alone;
* the peak after reading the final state as float32 positions
  (``result.final_state.position``: a second full-size state the caller asks for).

With ``--plain`` the same process steps run, each in its own subprocess, for the
hand-written sweeps of ``handwritten.py`` from the same float32 start (its conversion
to the sweep's layout, then the sweeps, in the same number of sweeps): ``hand_packed``
(packed ``uint16`` pairs, chains first) and ``hand_subl`` (four int8 sub-lattices,
chains in groups of 4); ``--contender`` runs one of them alone.

The target: the peak during ``ui.sample`` within 1.2x of the baseline plus the state
(``ratio_peak_over_baseline_plus_state``); the same against the resident size after
the imports and JAX's first operation, and the peak over the best hand-written sweep's
peak, are reported too.  ``ru_maxrss`` (the peak since the process started,
construction included) is recorded for reference.  Run::

    /usr/bin/time -v python benchmarks/bench_memory.py     # writes benchmarks/results/bench_memory.json
    python benchmarks/bench_memory.py --plain              # no summaries; the hand-written sweeps too
    python benchmarks/bench_memory.py --quick              # 64x64, 4 chains (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handwritten  # noqa: E402
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402

CONTENDERS = ("ugm_infer", "hand_packed", "hand_subl")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def status_mb(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak since start or the last reset) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def reset_peak() -> bool:
    """Reset the kernel's high-water mark of the resident set (Linux >= 4.0); False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def random_spins(rng_key, chains: int, size: int, dtype) -> jax.Array:
    """Uniformly random spins ``(chains, size, size)`` built in one compiled pass (no full-size temporaries).

    One Threefry hash per pair of sites (``ugm_infer.kernels.checkerboard.threefry2x32``,
    fused with the comparison), instead of ``model.random_state``, whose 32-bit random
    words and conversions would set the peak at this size.
    """
    from ugm_infer.kernels.checkerboard import key_pair, threefry2x32

    def build(key):
        k1, k2 = key_pair(key)
        pairs = jax.lax.iota(jnp.uint32, chains * size * size // 2).reshape(chains, size, size // 2)
        a, b = threefry2x32(k1, k2, jnp.uint32(0), pairs)
        bits = jnp.stack([a, b], axis=-1).reshape(chains, size, size) >> 31
        return jnp.where(bits == 1, 1, -1).astype(dtype)

    return jax.jit(build)(rng_key)


def memory_record(state_mb, seconds, rss_imports, rss_runtime, rss_state, reset, peak) -> dict:
    """The figures every contender reports: resident sizes before the call, its peak and the ratios."""
    return {
        "state_mb": state_mb,
        "seconds_including_compile": seconds,
        "rss_mb_after_imports": rss_imports,
        "rss_mb_after_first_jax_operation": rss_runtime,
        "rss_mb_after_state": rss_state,
        "peak_reset_before_sample": reset,
        "peak_rss_mb_during_sample": peak,
        "ratio_peak_over_imports_plus_state": peak / (rss_imports + state_mb),
        "ratio_peak_over_runtime_plus_state": peak / (rss_runtime + state_mb),
    }


def measure_hand(args, contender: str) -> dict:
    """The memory steps of :func:`main` for a hand-written sweep from the same float32 start."""
    rss_imports = status_mb("VmRSS")
    jax.block_until_ready(jnp.zeros(()) + 1)
    rss_runtime = status_mb("VmRSS")
    x0 = random_spins(jax.random.key(0), args.chains, args.size, args.dtype)
    jax.block_until_ready(x0)
    rss_state = status_mb("VmRSS")
    reset = reset_peak()
    if contender == "hand_packed":
        convert, run = handwritten.packed_from_spins, handwritten.packed_sweep(0.44, 0.0, args.draws)
    else:
        convert, run = handwritten.subl_from_spins, handwritten.subl_uniform_sweep(0.44, 0.0, args.draws)
    t0 = time.perf_counter()
    words = run(jax.random.key(1), handwritten.jit(convert)(x0))
    jax.block_until_ready(words)
    seconds = time.perf_counter() - t0
    state_mb = x0.nbytes / 2**20
    peak = status_mb("VmHWM")
    return {"contender": contender, **memory_record(state_mb, seconds, rss_imports, rss_runtime, rss_state, reset, peak)}


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
    parser.add_argument(
        "--contender", default="ugm_infer", choices=CONTENDERS, help="measure this one alone (hand_*: prints JSON only)"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.chains = 64, 4
    if args.contender != "ugm_infer":
        print(json.dumps(measure_hand(args, args.contender)))
        return
    suffix = ("_plain" if args.plain else "") + ("_quick" if args.quick else "")
    out_path = args.out or f"benchmarks/results/bench_memory{suffix}.json"
    load_before = os.getloadavg()
    rss_imports = status_mb("VmRSS")
    jax.block_until_ready(jnp.zeros(()) + 1)
    rss_runtime = status_mb("VmRSS")
    model = ui.models.lattice_ising(args.size, args.size, dtype=jnp.dtype(args.dtype))
    params = model.init_params(J=0.44)
    gibbs = ui.kernels.gibbs(model, params)
    rss_baseline = status_mb("VmRSS")
    x0 = {"s": random_spins(jax.random.key(0), args.chains, args.size, args.dtype)}
    jax.block_until_ready(x0)
    rss_state = status_mb("VmRSS")
    reset = reset_peak()

    def trace_fn(state, info):
        return {"magnetisation": jnp.mean(state.position["s"].astype(jnp.float32), axis=(-2, -1))}

    t0 = time.perf_counter()
    summaries = {} if args.plain else {"model": model, "params": params, "trace_fn": trace_fn}
    result = ui.sample(jax.random.key(1), gibbs, x0, args.draws, keep_states=False, **summaries)
    jax.block_until_ready(result)
    seconds = time.perf_counter() - t0
    peak_sample = status_mb("VmHWM")
    final = result.final_state.position["s"]  # a second full-size state, in the model's dtype
    jax.block_until_ready(final)
    peak_position = status_mb("VmHWM")
    final = np.asarray(final, dtype=np.float32)
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
        **memory_record(state_mb, seconds, rss_imports, rss_runtime, rss_state, reset, peak_sample),
        "rss_mb_baseline_after_model_and_kernel": rss_baseline,
        "peak_rss_mb_after_reading_final_position": peak_position,
        "ratio_peak_over_baseline_plus_state": peak_sample / (rss_baseline + state_mb),
        "ratio_peak_with_final_position_over_baseline_plus_two_states": peak_position / (rss_baseline + 2 * state_mb),
        "ru_maxrss_mb_since_start": peak_rss_mb(),
        "final_mean_abs_magnetisation": float(np.mean(np.abs(mag[-1]))),
        "final_mean_energy_per_site": float(np.mean(energies[-1]) / args.size**2),
        "recorded_shapes": {"energies": list(energies.shape), "magnetisation": list(mag.shape)},
    }
    if args.plain:  # the hand-written sweeps, each in a fresh process with the same steps
        hand = {}
        for contender in CONTENDERS[1:]:
            cmd = [sys.executable, __file__, "--contender", contender, "--size", str(args.size)]
            cmd += ["--chains", str(args.chains), "--draws", str(args.draws), "--dtype", args.dtype]
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            hand[contender] = json.loads(line)
        best = min(hand.values(), key=lambda r: r["peak_rss_mb_during_sample"])
        out["hand_written"] = hand
        out["best_hand_written"] = best["contender"]
        out["ratio_peak_over_best_hand_written_peak"] = peak_sample / best["peak_rss_mb_during_sample"]
    print(json.dumps(out, indent=2))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
