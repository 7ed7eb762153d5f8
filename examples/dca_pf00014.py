"""bmDCA on the Pfam family PF00014 (Kunitz/BPTI domain): Potts model, Pearson tracking, contact prediction.

Pipeline (:mod:`ugm_infer.dca`): read the aligned FASTA (13,600 sequences x 53 columns,
q = 21 with the gap), reweight at 80% identity, pseudocount ``1/M_eff``, fit a dense
Potts model by persistent-chain stochastic maximum likelihood with the fast Potts
Gibbs kernel (:func:`ugm_infer.dca.fit_dca`), recording the Pearson correlation
between the data's and the chains' connected correlations as learning goes; then
score pairs by the APC-corrected Frobenius norm of the zero-sum-gauge couplings (gap
state excluded) and report the precision of the top-L (L = 53) pairs with
``|i - j| >= 4`` against the structure's contact map (minimal heavy-atom distance
< 8 A; ``../shared/data/pfam/README.md``).

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
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ugm_infer.applications import dca
from ugm_infer.models.potts import potts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED_DATA, provenance  # noqa: E402

# the Pfam files are not shipped with the repository: ../shared/data/pfam beside the repository root
DATA = os.environ.get("UGM_PFAM_DIR", os.path.join(SHARED_DATA, "pfam"))


class _Result:
    """What :func:`fit_resumable` returns: the fields of ``dca.DCAResult`` the script reads."""

    def __init__(self, params, history, meff, compile_time):
        self.params, self.history, self.meff, self.compile_time = params, history, meff, compile_time


def fit_resumable(seqs, q, weights, args, callback, checkpoint_dir):
    """``dca.fit_dca``'s loop, step for step and key for key, with a checkpoint after every chunk.

    The persistent chains, parameters, chunk counter, elapsed training time and history
    are saved (atomically) to ``checkpoint_dir/checkpoint.npz``; a rerun continues from
    there and gives the same parameters as an uninterrupted run (checked by
    :func:`check_resume_matches_fit_dca`).  Stops at ``args.num_updates``, at
    ``args.target`` or after ``args.time_limit`` seconds of training (over all resumed runs).
    """
    length = seqs.shape[1]
    meff = float(weights.sum())
    fi, fij = dca.frequencies(seqs, q, weights=weights, pseudocount=1.0 / meff)
    model = potts(length, q, dtype=jnp.int8)
    init_fn, kernel_fn = dca.potts_gibbs.init, dca.potts_gibbs.build_kernel(model, "systematic", int(args.num_sweeps))
    optimizer = optax.sgd(args.lr)
    key_chains, key_train = jax.random.split(jax.random.key(args.seed))
    h0 = np.log(fi)
    params = {"J": jnp.zeros((length, length, q, q), jnp.float32), "h": jnp.asarray(h0 - h0.mean(1, keepdims=True))}
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    chains = jax.random.categorical(key_chains, jnp.asarray(np.log(fi), jnp.float32), shape=(args.num_chains, length))
    chains = chains.astype(jnp.int8)
    fi_t, fij_t = jnp.asarray(fi, jnp.float32), jnp.asarray(fij, jnp.float32)

    def update(carry, key):
        params, opt_state, chains = carry
        ld = model.logdensity_fn(params)

        def move(k, x):
            state, _ = kernel_fn(k, init_fn({"x": x}, ld), ld)
            return state.position["x"]

        chains = jax.vmap(move)(jax.random.split(key, args.num_chains), chains)
        pi, pij = dca.chain_frequencies(chains, q)
        g = dca.gradient(params, fi_t, fij_t, pi, pij, l2=args.l2)
        updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, g), opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, chains), None

    @jax.jit
    def chunk(key, carry):
        carry, _ = jax.lax.scan(update, carry, jax.random.split(key, args.eval_every))
        pi, pij = dca.chain_frequencies(carry[2], q)
        return carry, dca.pearson_connected(fi_t, fij_t, pi, pij)

    path = os.path.join(checkpoint_dir, "checkpoint.npz")
    history = {"update": [], "time": [], "cpu_time": [], "pearson": []}
    c, elapsed, cpu = 0, 0.0, 0.0
    if os.path.isfile(path):
        with np.load(path) as z:
            params = {"J": jnp.asarray(z["J"]), "h": jnp.asarray(z["h"])}
            chains = jnp.asarray(z["chains"])
            c, elapsed = int(z["chunk"]), float(z["elapsed"])
            cpu = float(z["cpu"]) if "cpu" in z else 0.0
            history = {k: z[f"history_{k}"].tolist() if f"history_{k}" in z else [] for k in history}
        print(f"resumed from {path} at update {c * args.eval_every} ({elapsed:.0f} s of training)", flush=True)
    carry = (params, optimizer.init(params), chains)
    t0 = time.perf_counter()
    compiled = chunk.lower(key_train, carry).compile()
    compile_time = time.perf_counter() - t0
    os.makedirs(checkpoint_dir, exist_ok=True)
    while c * args.eval_every < args.num_updates:
        if history["pearson"] and args.target is not None and history["pearson"][-1] >= args.target:
            break
        if args.time_limit is not None and elapsed >= args.time_limit:
            break
        t0, p0 = time.perf_counter(), time.process_time()
        carry, pearson = compiled(jax.random.fold_in(key_train, c), carry)
        pearson = float(pearson)
        elapsed += time.perf_counter() - t0
        cpu += time.process_time() - p0  # the process's CPU time: unaffected by waiting for a core
        c += 1
        for k, v in (("update", c * args.eval_every), ("time", elapsed), ("cpu_time", cpu), ("pearson", pearson)):
            history[k].append(v)
        callback(c * args.eval_every, elapsed, pearson)
        np.savez(
            path + ".tmp.npz",
            J=np.asarray(carry[0]["J"]),
            h=np.asarray(carry[0]["h"]),
            chains=np.asarray(carry[2]),
            chunk=c,
            elapsed=elapsed,
            cpu=cpu,
            **{f"history_{k}": np.asarray(v) for k, v in history.items()},
        )
        os.replace(path + ".tmp.npz", path)
    return _Result(jax.tree.map(np.asarray, carry[0]), history, meff, compile_time)


def pearson_ceiling(seqs, q, weights, num_chains, repeats=3, seed=0) -> list[float]:
    """The Pearson score of ``num_chains`` sequences drawn from the alignment itself (by weight).

    A perfectly fitted model whose chains were exact independent draws would score about
    this: the connected correlations of ``num_chains`` samples carry sampling noise of
    their own, so the score cannot reach 1 (and a target above this value cannot be met
    with that many chains).  ``repeats`` independent draws.
    """
    meff = float(weights.sum())
    fi, fij = dca.frequencies(seqs, q, weights=weights, pseudocount=1.0 / meff)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        idx = rng.choice(len(seqs), size=num_chains, p=np.asarray(weights) / meff)
        pi, pij = dca.chain_frequencies(jnp.asarray(seqs[idx]), q)
        out.append(float(dca.pearson_connected(fi, fij, pi, pij)))
    return out


def check_resume_matches_fit_dca(seqs, q, weights, tmp_dir) -> float:
    """Max abs difference of the couplings from ``dca.fit_dca`` and from an interrupted-then-resumed
    :func:`fit_resumable` (3 chunks of 2 updates, stopped after 1), on a few sequences."""
    small = argparse.Namespace(num_sweeps=1, lr=0.05, seed=3, num_chains=16, eval_every=2, l2=0.0, target=None)
    ref = dca.fit_dca(
        seqs,
        q,
        rng_key=jax.random.key(3),
        weights=weights,
        learning_rate=0.05,
        num_chains=16,
        num_sweeps=1,
        num_updates=6,
        eval_every=2,
    )
    quiet = lambda *a: None  # noqa: E731
    fit_resumable(seqs, q, weights, argparse.Namespace(**vars(small), num_updates=2, time_limit=None), quiet, tmp_dir)
    res = fit_resumable(seqs, q, weights, argparse.Namespace(**vars(small), num_updates=6, time_limit=None), quiet, tmp_dir)
    err = float(np.max(np.abs(res.params["J"] - ref.params["J"])))
    if not err < 1e-6 or res.history["pearson"] != ref.history["pearson"]:
        raise RuntimeError(f"resumed DCA run differs from fit_dca: max |dJ| = {err}")
    return err


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

    ceiling = pearson_ceiling(seqs, aln.num_states, np.asarray(w), args.num_chains, seed=args.seed)
    print(f"Pearson of {args.num_chains} sequences drawn from the alignment itself: {np.round(ceiling, 4)}", flush=True)

    def report(update, elapsed, pearson):
        print(f"update {update:5d}  {elapsed:8.1f} s  pearson {pearson:.4f}", flush=True)

    resume_check = None
    if args.quick:  # the resumable loop is fit_dca's, bit for bit
        resume_check = check_resume_matches_fit_dca(seqs[:200], aln.num_states, w[:200], os.path.join(args.out, "check"))
    if args.checkpoint_dir:
        res = fit_resumable(seqs, aln.num_states, w, args, report, args.checkpoint_dir)
    else:
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
        "resume_check_max_abs_dJ": resume_check,
        "pearson_of_alignment_draws": ceiling,
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
        "train_cpu_time_s": res.history["cpu_time"][-1] if res.history.get("cpu_time") else None,
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
    ax[1].plot(h["time"], h["pearson"], ".-", label="wall time")
    if h.get("cpu_time"):  # the process's CPU time: one core's work for a one-thread run, without pauses
        ax[1].plot(h["cpu_time"], h["pearson"], ".-", label="CPU time")
        ax[1].legend(fontsize=8, loc="lower right")
    ax[1].set_xlabel("training time (s)")
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
    p.add_argument(
        "--checkpoint-dir", default=None, help="checkpoint after every evaluation here and resume from it (long runs)"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.max_sequences = args.max_sequences or 1000
        args.num_chains, args.num_sweeps, args.num_updates, args.eval_every = 200, 3, 30, 15
    os.makedirs(args.out, exist_ok=True)
    out, scores, dist, prec = run(args)
    out["provenance"] = provenance(argv, __file__)
    with open(os.path.join(args.out, "dca_pf00014.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    plot(out, scores, dist, prec, os.path.join(args.out, "dca_pf00014.png"))
    np.savez_compressed(os.path.join(args.out, "dca_pf00014_scores.npz"), scores=scores)
    print("wrote", os.path.join(args.out, "dca_pf00014.json"), "and .png")
    return out


if __name__ == "__main__":
    main()
