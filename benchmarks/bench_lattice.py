"""Lattice Ising sweeps through ``ui.sample``, against the best hand-written plain-JAX sweeps.

For periodic ``L x L`` lattices (``J = 0.44``, ``h = 0``) with ``L`` in 64 ... 1024 and
1, 32 and 256 chains, three contenders each run ``num_sweeps`` block-Gibbs sweeps of
all chains in one call, timed alternately, repeat after repeat, in one process:

``ugm_infer``
    what a user calls: ``ui.sample(key, ui.kernels.gibbs(model, params), x0,
    num_sweeps, keep_states=False)`` with ``model = ui.models.lattice_ising(L, L)``
    (float32 states) and the default trace (the kernel's info, the number of changed
    sites, recorded at every sweep for every chain).  ``ui.sample`` is called
    afresh for every repeat (its compiled run is reused), from the float32 start,
    which it converts to the lattice layout in every call.
``ugm_continue``
    the same call continuing a chain: ``initial_position`` is the ``final_state`` of
    an earlier call (kept in the lattice layout, so nothing is converted), as a run
    split into several calls does.  The same state is passed in every repeat.
``hand_packed``
    the fastest plain-JAX sweep found for few chains (``benchmarks/handwritten.py``):
    colours stored as packed ``uint16`` pairs, ``(chains, h, w)``, a fused Threefry
    hash per pair, integer thresholds.
``hand_halves``
    the packed sweep of one chain with its half-sweeps in a loop, each colour static
    in a branch of a ``lax.switch`` (run for one chain).
``hand_last``
    the same sweep with the chains on the trailing axis, ``(h, w, chains)`` words (the
    neighbour reads shift whole rows of chains, the arithmetic is vectorised along the
    chains): the fastest found for many chains (run for 2 or more chains).
``hand_subl``
    four int8 sub-lattices, one ``jax.random.uniform`` per updated site, chains in
    groups of 4 processed with ``lax.map`` (``benchmarks/handwritten.py``).
``ugm_no_trace`` (only with ``--only ... ugm_no_trace``)
    the ``ugm_infer`` call with ``trace_fn=lambda s, i: ()`` (nothing recorded),
    reported as ``t_ugm / t_no_trace``: what the default trace costs; and as ``t_hand /
    t_no_trace`` against the faster hand-written sweep (a ``trace_fn`` that reads nothing
    of the info runs the sweeps without counting the changed sites).
``hand_sweep_keys`` (only with ``--only ... hand_sweep_keys``; chains first)
    ``hand_packed`` with a key per sweep and chain, split from the call's key before the
    loop, and the colour as the counter, as a kernel called ``step(key, state)`` once
    per sweep hashes; reported as ``t_sweep_keys / t_hand_packed``: what fresh keys
    at every sweep cost a hand-written sweep.  Not a baseline of the best-hand ratio.
``ugm_one_group`` (only with ``--only ... ugm_one_group``)
    the ``ugm_infer`` call with all chains in one group (``kernels._common.GROUP_BYTES``
    set to 0 for the call), reported as ``t_one_group / t_ugm``: what running the chains
    of a large state in cache-sized groups gains (above 1: the groups are faster).
``ugm_user`` (only with ``--only ... ugm_user``)
    the same ``ui.sample`` call on a user-written energy over the same lattice,
    ``ui.EnergyModel(lambda p, x: -p["J"] * sum(s * roll(s, 1, 0) + s * roll(s, 1, 1))
    - p["h"] * sum(s), {"s": ui.Spin((L, L))})``; reported as ``t_user / t_ugm``
    (paired median; the target is at most 1.3).

Reported per case: nanoseconds per spin update (median), spin updates per second,
the paired ratio ``t_hand / t_ugm`` against the faster hand-written sweep (median of
the per-repeat ratios; above 1 means ugm_infer is faster), for ``ugm_infer`` and for
``ugm_continue``, the same ratio in CPU time of the process (``time.process_time``,
all threads; on a machine shared with other jobs it does not count the time spent
waiting for a core) against ``hand_packed``, and the first-call latency (trace + compile + one run) of each
contender.  Compilation is excluded from the timed repeats.  The machine's load
average is recorded before and after the run and after each case.

Run::

    python benchmarks/bench_lattice.py                 # all 15 cases (~15 min on 2 idle cores)
    python benchmarks/bench_lattice.py --quick         # one 16x16 case with 2 chains, a few seconds
    python benchmarks/bench_lattice.py --sizes 128 512 --chains 32
    python benchmarks/bench_lattice.py --sizes 64 128 256 512 --chains 32 --only ugm_infer ugm_user \
        --out benchmarks/results/bench_lattice_user.json

Prints a markdown table and writes ``benchmarks/results/bench_lattice.json``.
"""

from __future__ import annotations

import argparse
import json
import os
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
from ugm_infer.kernels import _common  # noqa: E402

J, H = 0.44, 0.0
CONTENDERS = (
    "ugm_infer",
    "ugm_continue",
    "hand_packed",
    "hand_halves",
    "hand_last",
    "hand_subl",
    "ugm_user",
    "ugm_no_trace",
    "hand_sweep_keys",
    "ugm_one_group",
)
HANDS = ("hand_packed", "hand_halves", "hand_last", "hand_subl")


def user_energy(params, state):
    """A lattice Ising energy as a user writes it: periodic neighbours by ``jnp.roll``."""
    s = state["s"]
    return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1)) - params["h"] * jnp.sum(s)


#: ``hand_last``'s group of chains: None for the rule of ``ui.sample`` (:func:`hand_group`), else a fixed size
HAND_GROUP: int | None = None


def hand_group(size: int, chains: int) -> int:
    """The chains ``hand_last`` sweeps together: those of ``ui.sample`` on a CPU, or ``--hand-group``."""
    if HAND_GROUP is not None:
        return HAND_GROUP if chains % HAND_GROUP == 0 else chains
    return sample_group(size, chains)


def sample_group(size: int, chains: int) -> int:
    """The group of chains ``ui.sample`` runs ``lattice_ising(size, size)`` in on a CPU (``kernels._common.chain_group``)."""
    model = ui.models.lattice_ising(size, size)
    algorithm = ui.kernels.gibbs(model, model.init_params(J=J, h=H))
    start = {"s": jax.ShapeDtypeStruct((chains, size, size), jnp.float32)}
    return _common.chain_group(jax.eval_shape(jax.vmap(algorithm.init), start), chains)


def contenders(size: int, chains: int, num_sweeps: int, which: tuple[str, ...]):
    """``{name: (run(key) -> result, first_call_seconds)}`` for one case."""
    model = ui.models.lattice_ising(size, size)
    params = model.init_params(J=J, h=H)
    x0 = jax.block_until_ready(model.random_state(jax.random.key(1), chains))  # not inside a first call
    out = {}
    if "ugm_infer" in which:
        t0 = time.perf_counter()
        algorithm = ui.kernels.gibbs(model, params)

        def ugm(key):
            return ui.sample(key, algorithm, x0, num_sweeps, keep_states=False)

        state = jax.block_until_ready(ugm(jax.random.key(0))).final_state
        out["ugm_infer"] = (ugm, time.perf_counter() - t0)
    if "ugm_continue" in which:
        t0 = time.perf_counter()
        continuing = ui.kernels.gibbs(model, params)
        if "ugm_infer" not in which:
            state = ui.sample(jax.random.key(0), continuing, x0, 1, keep_states=False).final_state

        def ugm_continue(key):
            return ui.sample(key, continuing, state, num_sweeps, keep_states=False)

        jax.block_until_ready(ugm_continue(jax.random.key(0)))
        out["ugm_continue"] = (ugm_continue, time.perf_counter() - t0)
    if "ugm_no_trace" in which:
        t0 = time.perf_counter()
        silent = ui.kernels.gibbs(model, params)

        def ugm_no_trace(key):
            return ui.sample(key, silent, x0, num_sweeps, keep_states=False, trace_fn=lambda s, i: ())

        jax.block_until_ready(ugm_no_trace(jax.random.key(0)))
        out["ugm_no_trace"] = (ugm_no_trace, time.perf_counter() - t0)
    if "ugm_one_group" in which:
        t0 = time.perf_counter()
        whole = ui.kernels.gibbs(model, params)

        def ugm_one_group(key):
            budget, _common.GROUP_BYTES = _common.GROUP_BYTES, 0  # read by ui.sample when it is called
            try:
                return ui.sample(key, whole, x0, num_sweeps, keep_states=False)
            finally:
                _common.GROUP_BYTES = budget

        jax.block_until_ready(ugm_one_group(jax.random.key(0)))
        out["ugm_one_group"] = (ugm_one_group, time.perf_counter() - t0)
    if "ugm_user" in which:
        t0 = time.perf_counter()
        user = ui.EnergyModel(user_energy, {"s": ui.Spin((size, size))})
        user_algorithm = ui.kernels.gibbs(user, {"J": jnp.float32(J), "h": jnp.float32(H)})

        def ugm_user(key):
            return ui.sample(key, user_algorithm, x0, num_sweeps, keep_states=False)

        jax.block_until_ready(ugm_user(jax.random.key(0)))
        out["ugm_user"] = (ugm_user, time.perf_counter() - t0)
    if "hand_packed" in which:
        t0 = time.perf_counter()
        packed = handwritten.packed_from_spins(x0["s"])
        run_packed = handwritten.packed_sweep(J, H, num_sweeps)
        jax.block_until_ready(run_packed(jax.random.key(0), packed))
        out["hand_packed"] = (lambda key: run_packed(key, packed), time.perf_counter() - t0)
    if "hand_sweep_keys" in which:
        t0 = time.perf_counter()
        packed_k = handwritten.packed_from_spins(x0["s"])
        run_keys = handwritten.packed_sweep(J, H, num_sweeps, sweep_keys=True)
        jax.block_until_ready(run_keys(jax.random.key(0), packed_k))
        out["hand_sweep_keys"] = (lambda key: run_keys(key, packed_k), time.perf_counter() - t0)
    if "hand_halves" in which and chains == 1:
        t0 = time.perf_counter()
        packed_h = handwritten.packed_from_spins(x0["s"])
        run_halves = handwritten.packed_sweep(J, H, num_sweeps, halves=True)
        jax.block_until_ready(run_halves(jax.random.key(0), packed_h))
        out["hand_halves"] = (lambda key: run_halves(key, packed_h), time.perf_counter() - t0)
    if "hand_last" in which and chains > 1:
        t0 = time.perf_counter()
        last = tuple(jnp.moveaxis(w, 0, -1) for w in handwritten.packed_from_spins(x0["s"]))
        run_last = handwritten.packed_sweep(J, H, num_sweeps, chains_last=True, group=hand_group(size, chains))
        jax.block_until_ready(run_last(jax.random.key(0), last))
        out["hand_last"] = (lambda key: run_last(key, last), time.perf_counter() - t0)
    if "hand_subl" in which:
        t0 = time.perf_counter()
        subl = handwritten.subl_from_spins(x0["s"])
        run_subl = handwritten.subl_uniform_sweep(J, H, num_sweeps)
        jax.block_until_ready(run_subl(jax.random.key(0), subl))
        out["hand_subl"] = (lambda key: run_subl(key, subl), time.perf_counter() - t0)
    return out


def time_case(size: int, chains: int, target_s: float, repeats: int, which: tuple[str, ...], rate: float) -> dict:
    spins = size * size * chains
    num_sweeps = int(max(1, min(2000, round(target_s * rate / spins))))
    runs = contenders(size, chains, num_sweeps, which)
    times = {name: [] for name in runs}
    cpu = {name: [] for name in runs}  # CPU time of the process (all threads): less sensitive to other jobs
    for r in range(repeats):
        for name, (run, _) in runs.items():
            key = jax.random.key(r + 1)
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(run(key))
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    updates = spins * num_sweeps
    row = {
        "size": size,
        "chains": chains,
        "num_sweeps": num_sweeps,
        "hand_last_group": hand_group(size, chains),
        "ugm_group": sample_group(size, chains),
    }
    for name, t in times.items():
        t = np.asarray(t)
        row[name] = {
            "times_s": t.tolist(),
            "cpu_times_s": cpu[name],
            "ns_per_spin_update_median": float(np.median(t) / updates * 1e9),
            "spin_updates_per_s_median": float(updates / np.median(t)),
            "first_call_s": runs[name][1],
        }
    hands = [n for n in HANDS if n in times]
    for ugm, suffix in (("ugm_infer", ""), ("ugm_continue", "_continue"), ("ugm_no_trace", "_no_trace")):
        if ugm not in times or not hands:
            continue
        u = np.asarray(times[ugm])
        best = np.min(np.stack([np.asarray(times[n]) for n in hands]), axis=0)  # per repeat, the faster hand sweep
        paired = best / u
        row[f"ratio_best_hand_over_ugm{suffix}"] = {
            "median": float(np.median(paired)),
            "min": float(paired.min()),
            "max": float(paired.max()),
        }
        for n in hands:
            row[f"ratio_{n}_over_ugm{suffix}_median"] = float(np.median(np.asarray(times[n]) / u))
        # the same ratio in CPU time of the process
        best_cpu = np.min(np.stack([np.asarray(cpu[n]) for n in hands]), axis=0)
        paired_cpu = best_cpu / np.asarray(cpu[ugm])
        row[f"cpu_ratio_best_hand_over_ugm{suffix}"] = {
            "median": float(np.median(paired_cpu)),
            "min": float(paired_cpu.min()),
            "max": float(paired_cpu.max()),
        }
    if "ugm_infer" in times and "ugm_no_trace" in times:
        cost = np.asarray(times["ugm_infer"]) / np.asarray(times["ugm_no_trace"])
        cost_cpu = np.asarray(cpu["ugm_infer"]) / np.asarray(cpu["ugm_no_trace"])
        row["cpu_ratio_ugm_over_no_trace"] = {
            "median": float(np.median(cost_cpu)),
            "min": float(cost_cpu.min()),
            "max": float(cost_cpu.max()),
        }
        row["ratio_ugm_over_no_trace"] = {
            "median": float(np.median(cost)),
            "min": float(cost.min()),
            "max": float(cost.max()),
        }
    if "ugm_infer" in times and "ugm_one_group" in times:
        gain = np.asarray(times["ugm_one_group"]) / np.asarray(times["ugm_infer"])
        row["ratio_one_group_over_ugm"] = {
            "median": float(np.median(gain)),
            "min": float(gain.min()),
            "max": float(gain.max()),
        }
    if "hand_sweep_keys" in times and "hand_packed" in times:
        keyed = np.asarray(times["hand_sweep_keys"]) / np.asarray(times["hand_packed"])
        row["ratio_sweep_keys_over_hand_packed"] = {
            "median": float(np.median(keyed)),
            "min": float(keyed.min()),
            "max": float(keyed.max()),
        }
    if "ugm_infer" in times and "ugm_user" in times:
        user = np.asarray(times["ugm_user"]) / np.asarray(times["ugm_infer"])
        row["ratio_user_over_ugm"] = {"median": float(np.median(user)), "min": float(user.min()), "max": float(user.max())}
    if "ugm_infer" in times and hands:
        row["first_call_ratio_ugm_over_hand_packed"] = (
            runs["ugm_infer"][1] / runs["hand_packed"][1] if "hand_packed" in runs else None
        )
    row["load_average_after"] = os.getloadavg()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tiny case, 2 repeats (a smoke test)")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--chains", type=int, nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--target", type=float, default=None, help="approximate seconds per timed call")
    parser.add_argument("--rate", type=float, default=1.5e9, help="rough spin updates / s, only to size the calls")
    parser.add_argument("--only", nargs="*", default=None, choices=CONTENDERS, help="contenders (default: the first four)")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    parser.add_argument(
        "--hand-group",
        type=int,
        default=None,
        help="chains per group of hand_last (default: ui.sample's rule; the number of chains: no groups)",
    )
    args = parser.parse_args(argv)
    global HAND_GROUP
    HAND_GROUP = args.hand_group
    args.out = args.out or "benchmarks/results/bench_lattice.json"
    if args.quick and args.out == "benchmarks/results/bench_lattice.json":
        args.out = args.out.replace(".json", "_quick.json")
    sizes = args.sizes or ([16] if args.quick else [64, 128, 256, 512, 1024])
    chain_counts = args.chains or ([2] if args.quick else [1, 32, 256])
    repeats = args.repeats or (2 if args.quick else 5)
    target = args.target or (0.002 if args.quick else 0.3)
    which = tuple(args.only or CONTENDERS[:6])
    load_before = os.getloadavg()
    rows = []
    for size in sizes:
        for chains in chain_counts:
            row = time_case(size, chains, target, repeats, which, args.rate)
            rows.append(row)
            ratio = row.get("ratio_best_hand_over_ugm", {}).get("median", float("nan"))
            ratio_c = row.get("ratio_best_hand_over_ugm_continue", {}).get("median", float("nan"))
            print(
                f"L={size:5d} chains={chains:4d} sweeps={row['num_sweeps']:4d}: "
                + ", ".join(f"{n} {row[n]['ns_per_spin_update_median']:.2f} ns" for n in which if n in row)
                + f"; best hand / ugm {ratio:.3f}, / ugm continuing {ratio_c:.3f}; load {row['load_average_after'][0]:.1f}"
                + (f"; user / ugm {row['ratio_user_over_ugm']['median']:.3f}" if "ratio_user_over_ugm" in row else ""),
                flush=True,
            )
    load_after = os.getloadavg()

    print()
    print(
        "| L | chains | sweeps / call | ugm_infer ns / spin update | continuing ns | hand packed ns | hand halves ns "
        "| hand chains-last ns | hand sub-lattice ns | **best hand / ugm** (paired median, min-max) "
        "| **best hand / continuing** | CPU time: best hand / ugm | CPU time: best hand / continuing "
        "| first call ugm / hand packed (s) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:

        def ns(name):
            return f"{row[name]['ns_per_spin_update_median']:.2f}" if name in row else "-"

        def ratio(key):
            r = row.get(key)
            return f"**{r['median']:.3f}** ({r['min']:.2f}-{r['max']:.2f})" if r else "-"

        first = (
            f"{row['ugm_infer']['first_call_s']:.2f} / {row['hand_packed']['first_call_s']:.2f}"
            if "ugm_infer" in row and "hand_packed" in row
            else "-"
        )
        print(
            f"| {row['size']} | {row['chains']} | {row['num_sweeps']} | {ns('ugm_infer')} | {ns('ugm_continue')} | "
            f"{ns('hand_packed')} | {ns('hand_halves')} | {ns('hand_last')} | {ns('hand_subl')} | "
            f"{ratio('ratio_best_hand_over_ugm')} | "
            f"{ratio('ratio_best_hand_over_ugm_continue')} | {ratio('cpu_ratio_best_hand_over_ugm')} | "
            f"{ratio('cpu_ratio_best_hand_over_ugm_continue')} | {first} | {row['load_average_after'][0]:.1f} |"
        )
    for row in rows:
        if "ratio_ugm_over_no_trace" in row:
            r, c = row["ratio_ugm_over_no_trace"], row["cpu_ratio_ugm_over_no_trace"]
            h = row.get("ratio_best_hand_over_ugm_no_trace")
            versus = f"; best hand / no trace {h['median']:.3f} ({h['min']:.2f}-{h['max']:.2f})" if h else ""
            print(
                f"L={row['size']} chains={row['chains']}: default trace / no trace = **{r['median']:.3f}** "
                f"({r['min']:.2f}-{r['max']:.2f}); CPU time {c['median']:.3f} ({c['min']:.2f}-{c['max']:.2f})" + versus
            )
    for row in rows:
        if "ratio_one_group_over_ugm" in row:
            r = row["ratio_one_group_over_ugm"]
            print(
                f"L={row['size']} chains={row['chains']} (groups of {row['ugm_group']}): one group / groups = "
                f"**{r['median']:.3f}** ({r['min']:.2f}-{r['max']:.2f})"
            )
    for row in rows:
        if "ratio_sweep_keys_over_hand_packed" in row:
            r = row["ratio_sweep_keys_over_hand_packed"]
            print(
                f"L={row['size']} chains={row['chains']}: hand sweep, a key per sweep / one key per call = "
                f"**{r['median']:.3f}** ({r['min']:.2f}-{r['max']:.2f})"
            )
    for row in rows:
        if "ratio_user_over_ugm" in row:
            r = row["ratio_user_over_ugm"]
            print(
                f"L={row['size']} chains={row['chains']}: user roll energy / built-in = **{r['median']:.3f}** "
                f"({r['min']:.2f}-{r['max']:.2f}), first call {row['ugm_user']['first_call_s']:.2f} s"
            )
    for name in ("ugm_infer", "ugm_continue", "hand_packed", "hand_halves", "hand_last"):
        if name not in which:
            continue
        for chains in chain_counts:
            per = [r[name]["ns_per_spin_update_median"] for r in rows if r["chains"] == chains and name in r]
            if len(per) > 1:
                print(f"{name}, {chains} chains: ns per spin update max / min over sizes = {max(per) / min(per):.2f}")
    print(f"\nload average before {load_before}, after {load_after}")
    result = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "repeats": repeats,
        "quick": args.quick,
        "J": J,
        "h": H,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
