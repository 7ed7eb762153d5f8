"""bmDCA training speed: ``ugm_infer.dca.fit_dca`` versus the PyPI package adabmDCA on PF00014.

Same alignment (``shared/data/pfam/PF00014_mgap6.fasta.gz``, with
duplicate sequences removed as adabmDCA does: 8,871 of 13,600 sequences kept), same
settings on both sides: reweighting at 80% identity, pseudocount ``1/M_eff``, no L2,
plain gradient ascent with learning rate 0.05, ``--chains`` persistent chains, Gibbs
sampling with ``--sweeps`` sweeps per update, ``--epochs`` parameter updates, fields
initialised at the independent-site model and ``J = 0``.

Measured: training wall time per update (adabmDCA: its own ``Elapsed_s`` column at the
last step, i.e. from the start of training with its per-step bookkeeping -- AIS
log-weights, log-likelihood and entropy estimates -- included, data loading and
reweighting excluded; ugm_infer: the training loop, compilation excluded and reported
separately), and the Pearson correlation of the connected correlations (data vs
chains) after the last update, which both compute the same way.  The two run
alternately, ``--repeats`` times (adabmDCA, then ugm_infer, then adabmDCA again ...),
each repeat a fresh training run of ``--epochs`` updates; the speed ratio is the median
(and min-max) of the per-repeat paired ratios of seconds per update.  ``--cpu K`` pins
the benchmark and everything it starts to CPU core ``K`` (both then share one core,
one after the other).

adabmDCA runs in a separate virtual environment (it needs PyTorch); give its CLI with
``--adabmdca`` (default ``/work/dca-venv/bin/adabmDCA``) or reuse a finished run with
``--adabmdca-dir`` (the folder holding its ``adabmDCA.log``).  ``--threads 1`` (default)
limits both to one CPU thread (``OMP_NUM_THREADS=1`` for PyTorch; XLA's Eigen pool off),
which is fairer on a shared machine.

Run::

    python benchmarks/bench_dca.py --epochs 20 --repeats 3 --cpu 1   # alternated, pinned to core 1
    python benchmarks/bench_dca.py --epochs 50 --adabmdca-dir out/ada50   # reuse one adabmDCA run
    python benchmarks/bench_dca.py --quick                     # 2 updates of each (a smoke test)

Prints a markdown table and writes ``benchmarks/results/bench_dca.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# the Pfam alignment is not shipped with the repository: ../shared/data/pfam beside the repository root, or $UGM_DATA/pfam
DATA = os.path.join(
    os.environ.get("UGM_DATA", os.path.join(HERE, "..", "..", "shared", "data")), "pfam", "PF00014_mgap6.fasta.gz"
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--chains", type=int, default=1000)
    p.add_argument("--sweeps", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for both (1: both single-threaded)")
    p.add_argument("--adabmdca", default="/work/dca-venv/bin/adabmDCA")
    p.add_argument("--adabmdca-dir", dest="adabmdca_dir", default=None, help="reuse this finished adabmDCA run")
    p.add_argument("--workdir", default="out/bench_dca")
    p.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    p.add_argument("--repeats", type=int, default=3, help="alternated runs of each (paired ratios)")
    p.add_argument("--cpu", type=int, default=None, help="pin everything to this CPU core")
    p.add_argument("--quick", action="store_true", help="2 updates, 50 chains, 1 sweep (a smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.chains, args.sweeps, args.repeats = 2, 50, 1, 1
    args.out = args.out or os.path.join(HERE, "results", f"bench_dca{'_quick' if args.quick else ''}.json")
    return args


def parse_adabmdca_log(folder: str) -> dict:
    """Last row of the training table of ``adabmDCA.log`` (and the run's header fields)."""
    with open(os.path.join(folder, "adabmDCA.log")) as fh:
        lines = fh.read().splitlines()
    header = {}
    for line in lines:
        if ":" in line and not line.startswith(" "):
            k, _, v = line.partition(":")
            header[k.strip()] = v.strip()
    start = next(i for i, line in enumerate(lines) if line.startswith("Step"))
    cols = lines[start].split()
    rows = [dict(zip(cols, line.split())) for line in lines[start + 1 :] if line.strip() and line.split()[0].isdigit()]
    if not rows:
        raise RuntimeError(f"no training rows in {folder}/adabmDCA.log")
    last = rows[-1]
    return {
        "updates": int(last["Grad_steps"]),
        "pearson": float(last["Pearson"]),
        "train_time_s": float(last["Elapsed_s"]),
        "pearson_history": [(int(r["Grad_steps"]), float(r["Elapsed_s"]), float(r["Pearson"])) for r in rows],
        "meff": float(header.get("effective_sequences", "nan")),
        "num_sequences": int(header.get("retained_sequences", "0")),
        "version": header.get("package_version"),
    }


def run_adabmdca(args, repeat: int = 0) -> str:
    folder = os.path.join(args.workdir, f"adabmdca_{args.epochs}_{args.chains}_r{repeat}")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), PYTHONUNBUFFERED="1")
    cmd = [args.adabmdca, "train", "-d", DATA, "-o", folder, "-m", "bmDCA", "--lr", str(args.lr)]
    cmd += ["--nsweeps", str(args.sweeps), "--sampler", "gibbs", "--nchains", str(args.chains)]
    cmd += ["--nepochs", str(args.epochs), "--max-gradient-steps", str(args.epochs), "--device", "cpu"]
    cmd += ["--seed", "0", "--alphabet", "protein", "--no-progress"]
    print("running:", " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True)
    return folder


def run_ours(args, repeat: int = 0) -> dict:
    import jax

    from ugm_infer import dca

    aln = dca.read_fasta(DATA)
    seqs = np.unique(aln.sequences, axis=0)  # adabmDCA removes duplicates
    w = dca.sequence_weights(seqs, 0.8)
    eval_every = args.epochs if args.epochs <= 50 else 10
    res = dca.fit_dca(
        seqs,
        aln.num_states,
        rng_key=jax.random.key(repeat),
        weights=w,
        learning_rate=args.lr,
        num_chains=args.chains,
        num_sweeps=args.sweeps,
        num_updates=args.epochs,
        eval_every=eval_every,
    )
    h = res.history
    return {
        "updates": h["update"][-1],
        "pearson": h["pearson"][-1],
        "train_time_s": h["time"][-1],
        "compile_s": res.compile_time,
        "pearson_history": list(zip(h["update"], h["time"], h["pearson"])),
        "meff": res.meff,
        "num_sequences": int(len(seqs)),
        "jax_version": jax.__version__,
    }


def main(argv=None):
    args = parse_args(argv)
    if args.threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # inherited by the adabmDCA subprocesses
    os.makedirs(args.workdir, exist_ok=True)
    pairs = []
    for r in range(args.repeats):
        folder = args.adabmdca_dir or run_adabmdca(args, r)
        ada = parse_adabmdca_log(folder)
        if ada["updates"] != args.epochs:
            print(f"warning: the adabmDCA run has {ada['updates']} updates, --epochs is {args.epochs}", file=sys.stderr)
        t0 = time.perf_counter()
        ours = run_ours(args, r)
        ours["total_wall_s"] = time.perf_counter() - t0
        for side in (ada, ours):
            side["seconds_per_update"] = side["train_time_s"] / side["updates"]
        ada["load_average_after"] = ours["load_average_after"] = os.getloadavg()
        pairs.append((ada, ours))
        print(f"repeat {r}: adabmDCA {ada['seconds_per_update']:.3f} s/update, ugm_infer {ours['seconds_per_update']:.3f}")
    ratios = [a["seconds_per_update"] / o["seconds_per_update"] for a, o in pairs]
    ratio = float(np.median(ratios))
    print()
    print(
        f"PF00014, {pairs[0][1]['num_sequences']} unique sequences, L = 53, q = 21; {args.chains} chains, "
        f"{args.sweeps} Gibbs sweeps per update, lr {args.lr}, {args.threads} thread(s), "
        f"{'pinned to core ' + str(args.cpu) if args.cpu is not None else 'not pinned'}\n"
    )
    print("| implementation | M_eff | updates | s / update (median, min-max over repeats) | Pearson reached (each repeat) |")
    print("|---|---|---|---|---|")
    for name, side in (
        ("adabmDCA " + str(pairs[0][0]["version"]) + " (PyTorch, CPU)", 0),
        ("ugm_infer.dca.fit_dca (JAX, CPU)", 1),
    ):
        spu = [p[side]["seconds_per_update"] for p in pairs]
        pear = ", ".join(f"{p[side]['pearson']:.4f}" for p in pairs)
        print(
            f"| {name} | {pairs[0][side]['meff']:.1f} | {args.epochs} | "
            f"{np.median(spu):.3f} ({min(spu):.3f}-{max(spu):.3f}) | {pear} |"
        )
    print(
        f"\nspeed ratio (adabmDCA s/update / ugm_infer s/update, paired median of {len(ratios)}): {ratio:.2f}x "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}); "
        f"ugm_infer compile time {pairs[0][1]['compile_s']:.1f} s (not included)"
    )
    out = {
        "settings": vars(args),
        "repeats": [{"adabmdca": a, "ugm_infer": o} for a, o in pairs],
        "speed_ratios": ratios,
        "speed_ratio": ratio,
        "load_average": os.getloadavg(),
        "machine": "2 shared CPU cores (other jobs running; the two contenders alternate run by run)",
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
