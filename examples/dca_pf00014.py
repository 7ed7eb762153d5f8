"""bmDCA on the Pfam family PF00014 (Kunitz/BPTI domain): Potts model, Pearson tracking, contact prediction.

Pipeline (:mod:`ugm_infer.applications.dca`, also ``ui.dca``): read the aligned FASTA (13,600 sequences x 53 columns,
q = 21 with the gap), reweight at 80% identity, pseudocount ``1/M_eff``, fit a dense
Potts model by persistent-chain stochastic maximum likelihood with the fast Potts
Gibbs kernel (:func:`ugm_infer.applications.dca.fit_dca`), recording the Pearson correlation
between the data's and the chains' connected correlations as learning goes; then
score pairs by the APC-corrected Frobenius norm of the zero-sum-gauge couplings (gap
state excluded) and report the precision of the top-L (L = 53) pairs with
``|i - j| >= 4`` against the structure's contact map (minimal heavy-atom distance
< 8 A; ``../shared/data/pfam/README.md`` beside the repository root).  The Pfam files are
not shipped with the repository: they are read from ``../shared/data/pfam``, or from
the folder named by ``UGM_PFAM_DIR`` (or ``UGM_DATA``/pfam).

Writes ``dca_pf00014.json`` (settings, Meff, Pearson history with wall time, top-L
precision, the PPV curve) and ``dca_pf00014.png`` (Pearson vs updates and vs time,
PPV curve, contact map with the top-L predictions) and ``dca_pf00014_scores.npz`` (the
APC scores) into ``--out``.

Run::

    python examples/dca_pf00014.py --quick --out out/dca_quick     # < 90 s: 1,000 sequences, 30 updates
    python examples/dca_pf00014.py --out out/dca_pf00014           # whole alignment
    python examples/dca_pf00014.py --num-updates 2000 --time-limit 1800 --out out/dca_long
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from ugm_infer.applications import dca

# the Pfam files are not shipped with the repository: ../shared/data/pfam beside the repository root
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.environ.get("UGM_DATA", os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data")))
DATA = os.environ.get("UGM_PFAM_DIR", os.path.join(SHARED_DATA, "pfam"))


def run(args) -> dict:
    if not os.path.isfile(os.path.join(DATA, "PF00014_mgap6.fasta.gz")):
        raise SystemExit(
            f"error: PF00014_mgap6.fasta.gz not found in {DATA}; the Pfam files are not part of the repository: "
            "put them in ../shared/data/pfam beside the repository root or set UGM_PFAM_DIR to their folder"
        )
    t0 = time.perf_counter()
    aln = dca.read_fasta(os.path.join(DATA, "PF00014_mgap6.fasta.gz"))
    seqs = aln.sequences
    if args.dedup:
        seqs = np.unique(seqs, axis=0)
    if args.max_sequences:
        rng = np.random.default_rng(args.seed)
        seqs = seqs[np.sort(rng.choice(len(seqs), min(args.max_sequences, len(seqs)), replace=False))]
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    w = dca.sequence_weights(seqs, 0.8)
    t_weights = time.perf_counter() - t0
    dist = dca.read_contact_map(os.path.join(DATA, "PF00014_struct.dat.gz"), aln.length)
    print(f"{len(seqs)} sequences x {aln.length} columns, Meff = {w.sum():.1f} (weights {t_weights:.1f} s)", flush=True)

    def report(update, elapsed, pearson):
        print(f"update {update:5d}  {elapsed:8.1f} s  pearson {pearson:.4f}", flush=True)

    res = dca.fit_dca(
        seqs,
        aln.num_states,
        rng_key=jax.random.key(args.seed),
        weights=w,
        l2=args.l2,
        learning_rate=args.lr,
        num_chains=args.num_chains,
        num_sweeps=args.num_sweeps,
        num_updates=args.num_updates,
        eval_every=args.eval_every,
        target_pearson=args.target,
        time_limit=args.time_limit,
        callback=report,
    )
    scores = dca.frobenius_scores(res.params["J"], gap_state=aln.gap_state)
    prec = dca.contact_precision(scores, dist, threshold=8.0, min_separation=4)
    out = {
        "settings": {
            k: getattr(args, k)
            for k in ("num_chains", "num_sweeps", "num_updates", "eval_every", "lr", "l2", "seed", "dedup")
        },
        "num_sequences": int(len(seqs)),
        "length": aln.length,
        "num_states": aln.num_states,
        "meff": res.meff,
        "pseudocount": 1.0 / res.meff,
        "time_read_s": t_read,
        "time_weights_s": t_weights,
        "compile_s": res.compile_time,
        "history": res.history,
        "final_pearson": res.history["pearson"][-1],
        "updates_done": res.history["update"][-1],
        "train_time_s": res.history["time"][-1],
        "seconds_per_update": res.history["time"][-1] / res.history["update"][-1],
        "precision_top_L": prec["precision"],
        "precision_top_L_4.5A": dca.contact_precision(scores, dist, threshold=4.5)["precision"],
        "precision_top_L_over_2": float(prec["ppv"][aln.length // 2 - 1]),
        "precision_top_2L": float(prec["ppv"][min(2 * aln.length, prec["ppv"].size) - 1]),
        "ppv": prec["ppv"][: 3 * aln.length].tolist(),
        "top_L_pairs_1based": (prec["pairs"][: aln.length] + 1).tolist(),
        "num_contacts_sep4": int(np.sum(np.triu(dist < 8.0, 4))),
        "num_pairs_sep4": int(np.sum(~np.isnan(dist[np.triu_indices(aln.length, 4)]))),
    }
    print(
        f"final pearson {out['final_pearson']:.4f} after {out['updates_done']} updates "
        f"({out['train_time_s']:.0f} s, {out['seconds_per_update']:.3f} s/update, compile {res.compile_time:.0f} s); "
        f"top-L precision {out['precision_top_L']:.3f} (L/2: {out['precision_top_L_over_2']:.3f}, "
        f"2L: {out['precision_top_2L']:.3f})",
        flush=True,
    )
    return out, scores, dist, prec


def plot(out, scores, dist, prec, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = out["history"]
    length = out["length"]
    fig, ax = plt.subplots(1, 4, figsize=(19, 4.4))
    ax[0].plot(h["update"], h["pearson"], ".-")
    ax[0].set_xlabel("parameter updates")
    ax[0].set_ylabel("Pearson(C_data, C_model)")
    ax[0].set_title("convergence (connected correlations)")
    ax[1].plot(h["time"], h["pearson"], ".-")
    ax[1].set_xlabel("training wall time (s)")
    ax[1].set_title("Pearson vs time")
    for a in ax[:2]:
        a.grid(alpha=0.3)
    ppv = np.asarray(out["ppv"])
    ax[2].plot(np.arange(1, ppv.size + 1), ppv)
    ax[2].axvline(length, color="gray", ls="--", lw=0.8)
    ax[2].set_ylim(0, 1.02)
    ax[2].set_xlabel("number of top pairs (|i-j| >= 4)")
    ax[2].set_ylabel("precision")
    ax[2].set_title(f"top-L precision {out['precision_top_L']:.2f}")
    ax[2].grid(alpha=0.3)
    contact = np.where(np.isnan(dist), False, dist < 8.0)
    ii, jj = np.nonzero(np.triu(contact, 4))
    ax[3].scatter(jj + 1, ii + 1, s=12, c="lightgray", label="contact (< 8 A)")
    ax[3].scatter(ii + 1, jj + 1, s=12, c="lightgray")
    top = prec["pairs"][:length]
    ok = prec["is_contact"][:length]
    ax[3].scatter(top[ok, 0] + 1, top[ok, 1] + 1, s=14, c="tab:blue", label="top-L, contact")
    ax[3].scatter(top[~ok, 0] + 1, top[~ok, 1] + 1, s=14, c="tab:red", label="top-L, not a contact")
    ax[3].set_xlim(0, length + 1)
    ax[3].set_ylim(length + 1, 0)
    ax[3].set_aspect("equal")
    ax[3].set_title("PF00014 contact map")
    ax[3].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1,000 sequences, 200 chains, 3 sweeps, 30 updates (< 90 s)")
    p.add_argument("--out", default="out/dca_pf00014")
    p.add_argument("--num-chains", dest="num_chains", type=int, default=1000)
    p.add_argument("--num-sweeps", dest="num_sweeps", type=int, default=10)
    p.add_argument("--num-updates", dest="num_updates", type=int, default=1000)
    p.add_argument("--eval-every", dest="eval_every", type=int, default=25)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--l2", type=float, default=0.0)
    p.add_argument("--target", type=float, default=None, help="stop at this Pearson (bmDCA's usual 0.95)")
    p.add_argument("--time-limit", dest="time_limit", type=float, default=None, help="seconds of training")
    p.add_argument("--max-sequences", dest="max_sequences", type=int, default=0)
    p.add_argument("--dedup", action="store_true", help="drop duplicate sequences first (as adabmDCA does)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.quick:
        args.max_sequences = args.max_sequences or 1000
        args.num_chains, args.num_sweeps, args.num_updates, args.eval_every = 200, 3, 30, 15
    os.makedirs(args.out, exist_ok=True)
    out, scores, dist, prec = run(args)
    with open(os.path.join(args.out, "dca_pf00014.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    plot(out, scores, dist, prec, os.path.join(args.out, "dca_pf00014.png"))
    np.savez_compressed(os.path.join(args.out, "dca_pf00014_scores.npz"), scores=scores)
    print("wrote", os.path.join(args.out, "dca_pf00014.json"), "and .png")
    return out


if __name__ == "__main__":
    main()
