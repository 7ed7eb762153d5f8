"""Cost curves of the ugm_infer block-Gibbs sweep: time per sweep and peak memory.

* versus the number of chains (1, 4, 16, 64, 256, 1024) on a periodic 64x64 Ising
  lattice and on a 784x500 RBM;
* versus the number of sites: periodic lattices 16^2 ... 1024^2 with 1 chain, and RBMs
  500x500, 1000x1000, 2000x2000, 4000x4000 (the size of the NORB model in Salakhutdinov's
  tempered-transitions paper) with 100 chains.

Every point runs in its own fresh Python process (so the peak resident set size,
``resource.getrusage(RUSAGE_SELF).ru_maxrss``, belongs to that point alone; the
process's maxrss after importing JAX and building the model is reported as the
baseline, and the peak increase over it separately).  Within a point: one compiled
``lax.scan`` of ``num_sweeps`` sweeps (``num_sweeps`` chosen so a call takes roughly
``--target`` seconds), compile timed separately, then ``--repeats`` timed calls
(min / median / max).  Only ugm_infer runs here, so nothing is paired: on a shared,
loaded machine the absolute times are inflated by contention (see
``docs/results/benchmarks.md``); the *shape* of the curves is the result.

Run::

    python benchmarks/bench_cost_curves.py            # full (about 10 min on 2 busy cores)
    python benchmarks/bench_cost_curves.py --quick    # 6 tiny points in one process (smoke test)

Writes ``benchmarks/results/cost_curves.json`` and ``cost_curves.png`` (``cost_curves_quick.*`` with ``--quick``).
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

HERE = Path(__file__).resolve().parent


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def run_point(spec: dict) -> dict:
    """Measure one point (runs inside the child process)."""
    import jax
    import numpy as np

    sys.path.insert(0, str(HERE))
    from bench_sweeps import library_sweep

    import ugm_infer as ui

    key = jax.random.key(0)
    if spec["kind"] == "lattice":
        n = spec["size"]
        model = ui.models.lattice_ising(n, n)
        params = model.init_params(key)
        sites = n * n
        work = sites * spec["chains"]  # site updates per sweep
        rate = 1e7  # rough site updates / s on this (loaded) machine, only to size the scan
    else:
        nv, nh = spec["size"]
        model = ui.models.rbm(nv, nh)
        params = model.init_params(key, scale=0.01)
        sites = nv + nh
        work = 4 * spec["chains"] * nv * nh  # matmul flops per sweep
        rate = 3e9  # rough flop / s
    sweeps = int(min(500, max(2, round(spec["target_s"] * rate / work))))
    x0 = model.random_state(key, spec["chains"])
    jax.block_until_ready(x0)
    base = _maxrss_mb()
    run = library_sweep(model, params, sweeps)
    t0 = time.perf_counter()
    jax.block_until_ready(run(key, x0))
    compile_s = time.perf_counter() - t0
    times = []
    for r in range(spec["repeats"]):
        t0 = time.perf_counter()
        jax.block_until_ready(run(jax.random.fold_in(key, r + 1), x0))
        times.append(time.perf_counter() - t0)
    per = np.asarray(times) / sweeps
    state_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(x0))
    param_bytes = sum(np.asarray(a).size * np.asarray(a).dtype.itemsize for a in jax.tree.leaves(params))
    return {
        **spec,
        "sites": sites,
        "num_sweeps": sweeps,
        "compile_and_first_s": compile_s,
        "time_per_sweep_s": {"min": float(per.min()), "median": float(np.median(per)), "max": float(per.max())},
        "site_updates_per_s_median": sites * spec["chains"] / float(np.median(per)),
        "maxrss_baseline_mb": base,
        "maxrss_peak_mb": _maxrss_mb(),
        "peak_increase_mb": _maxrss_mb() - base,
        "state_mb": state_bytes / 2**20,
        "params_mb": param_bytes / 2**20,
    }


def points(quick: bool, repeats: int, target: float) -> list[dict]:
    lattice_chain_size = 64
    if quick:
        chains = [1, 4]
        lattices = [16]
        rbms = [20]
        rbm_chain_shape = (20, 10)
        lattice_chain_size = 16
    else:
        chains = [1, 4, 16, 64, 256, 1024]
        lattices = [16, 32, 64, 128, 256, 512, 1024]
        rbms = [500, 1000, 2000, 4000]
        rbm_chain_shape = (784, 500)
    out = []
    for c in chains:
        out.append({"curve": "chains", "kind": "lattice", "size": lattice_chain_size, "chains": c})
    for c in chains:
        out.append({"curve": "chains", "kind": "rbm", "size": list(rbm_chain_shape), "chains": c})
    for n in lattices:
        out.append({"curve": "sites", "kind": "lattice", "size": n, "chains": 1})
    for n in rbms:
        out.append({"curve": "sites", "kind": "rbm", "size": [n, n], "chains": 100})
    for p in out:
        p.update(repeats=repeats, target_s=target)
    return out


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = [
        (axes[0], "chains", None, "number of chains", "vs chains (64x64 lattice, RBM 784x500)"),
        (axes[1], "sites", "lattice", "sites (L x L), 1 chain", "lattice, vs sites"),
        (axes[2], "sites", "rbm", "n (RBM n x n), 100 chains", "RBM, vs size"),
    ]
    for ax, curve, kind, xlabel, title in panels:
        ax2 = ax.twinx()
        for k, colour in (("lattice", "C0"), ("rbm", "C1")):
            if kind is not None and k != kind:
                continue
            sel = [r for r in rows if r["curve"] == curve and r["kind"] == k]
            if not sel:
                continue
            if curve == "chains":
                x = [r["chains"] for r in sel]
            elif k == "lattice":
                x = [r["size"] ** 2 for r in sel]
            else:
                x = [r["size"][0] for r in sel]
            med = [r["time_per_sweep_s"]["median"] for r in sel]
            lo = [r["time_per_sweep_s"]["min"] for r in sel]
            hi = [r["time_per_sweep_s"]["max"] for r in sel]
            ax.errorbar(
                x,
                med,
                yerr=[[m - a for m, a in zip(med, lo)], [b - m for m, b in zip(med, hi)]],
                marker="o",
                color=colour,
                label=f"{k}: s / sweep",
            )
            ax2.plot(
                x,
                [r["peak_increase_mb"] for r in sel],
                ls="--",
                marker="x",
                color=colour,
                alpha=0.6,
                label=f"{k}: peak RSS increase (MB)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax2.set_yscale("symlog")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds per sweep (median, min-max)")
        ax2.set_ylabel("peak RSS increase over baseline (MB)")
        ax.set_title(title)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    fig.suptitle("ugm_infer block-Gibbs sweep cost (2 shared CPU cores, absolute times inflated by contention)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--target", type=float, default=None, help="approximate seconds per timed call")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    parser.add_argument("--png", default=None, help="figure (default: next to the JSON, same name)")
    parser.add_argument("--point", default=None, help=argparse.SUPPRESS)  # internal: one point, JSON
    args = parser.parse_args(argv)
    args.out = args.out or "benchmarks/results/cost_curves.json"
    if args.quick and args.out == "benchmarks/results/cost_curves.json":
        args.out = args.out.replace(".json", "_quick.json")
    args.png = args.png or str(Path(args.out).with_suffix(".png"))
    if args.point is not None:
        print("RESULT " + json.dumps(run_point(json.loads(args.point))), flush=True)
        return
    repeats = args.repeats or (1 if args.quick else 3)
    target = args.target or (0.01 if args.quick else 0.4)
    rows = []
    for p in points(args.quick, repeats, target):
        if args.quick:  # in-process (fast smoke test); the RSS figures are then cumulative, not per point
            r = run_point(p)
            rows.append(r)
            print(f"{r['curve']} {r['kind']} {r['size']} chains={r['chains']}: {r['time_per_sweep_s']['median']:.2e} s")
            continue
        proc = subprocess.run(
            [sys.executable, __file__, "--point", json.dumps(p)], capture_output=True, text=True, env=os.environ.copy()
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            print(f"FAILED {p}: {proc.stderr[-2000:]}", flush=True)
            continue
        r = json.loads(lines[-1][len("RESULT ") :])
        rows.append(r)
        print(
            f"{r['curve']:6s} {r['kind']:7s} size={r['size']!s:12s} chains={r['chains']:5d}: "
            f"{1e3 * r['time_per_sweep_s']['median']:.3f} ms/sweep, peak RSS +{r['peak_increase_mb']:.0f} MB "
            f"(state {r['state_mb']:.1f} MB, params {r['params_mb']:.1f} MB), compile {r['compile_and_first_s']:.1f} s",
            flush=True,
        )

    print()
    print("| curve | model | chains | ms / sweep (median, min-max) | site updates / s | peak RSS + (MB) | compile (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        model = f"Ising {r['size']}x{r['size']}" if r["kind"] == "lattice" else f"RBM {r['size'][0]}x{r['size'][1]}"
        t = r["time_per_sweep_s"]
        print(
            f"| {r['curve']} | {model} | {r['chains']} | "
            f"{1e3 * t['median']:.3g} ({1e3 * t['min']:.3g}-{1e3 * t['max']:.3g}) "
            f"| {r['site_updates_per_s_median']:.3g} | {r['peak_increase_mb']:.0f} | {r['compile_and_first_s']:.1f} |"
        )
    sys.path.insert(0, str(HERE))
    from bench_sweeps import machine_info

    result = {"machine": machine_info(), "quick": args.quick, "repeats": repeats, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    plot(rows, args.png)
    print(f"\nwrote {args.out} and {args.png}")


if __name__ == "__main__":
    main()
