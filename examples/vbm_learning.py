"""Learning a visible Boltzmann machine: SAP/PCD-1, CD-1, pseudo-likelihood and exact ML.

Reproduces the setting of Asuncion, Liu, Ihler and Smyth (2010), *Particle filtered
MCMC-MLE with connections to contrastive divergence*, ICML, section 4.1:

* a fully visible Boltzmann machine on 15 spins :math:`x \\in \\{-1, +1\\}^{15}`,
  :math:`p(x \\mid \\theta) \\propto \\exp(\\sum_{i<j} \\theta_{ij} x_i x_j + \\sum_i \\theta_i x_i)`
  (``ui.models.ising(15)``: ``W[i, j] = W[j, i] = theta_ij``, ``h = theta_i``);
* a true :math:`\\theta` with every entry :math:`\\mathcal N(0, 1)` (couplings *and*
  fields -- our reading of ":math:`\\theta \\sim \\mathcal N(0, 1)`");
* 500 training and 100 test cases drawn exactly from it (``ui.exact.sample``);
* 10 initialisations :math:`\\theta_0 \\sim \\mathcal N(0, 1)` (same for every method);
* :math:`S = 50` persistent chains for SAP/PCD-1 (one Gibbs sweep per update);
* learning rate 0.01, decreasing as :math:`a_t = 0.01\\, b / (b + t)` (Robbins-Monro,
  ``ui.learn.robbins_monro(0.01 * b, b)``, ``b = 1000``), applied to the gradient
  with respect to the independent parameters :math:`\\theta_{ij}, i<j` (see
  :func:`project_couplings`), full-batch updates (one update per epoch, as in the
  paper's batch MCMC-MLE comparison);
* metric: exact average test log-likelihood (2^15 states enumerated), versus epochs
  and versus training wall time (compilation and evaluation excluded).

Run ``python examples/vbm_learning.py`` (full) or ``--quick`` (CI, < 2 min on 2
cores).  Writes ``vbm_learning.png`` and ``vbm_learning.json`` into ``--out``
(default ``./out/vbm_learning``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer import exact
from ugm_infer.fit import fit
from ugm_infer.models.ising import ising

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import provenance  # noqa: E402

NUM_SPINS = 15


def project_couplings() -> optax.GradientTransformation:
    """Map a gradient w.r.t. the dense matrix ``W`` to one w.r.t. ``theta_ij`` (i < j).

    ``W`` holds each coupling twice (``W[i, j] = W[j, i] = theta_ij``) and a diagonal
    that must stay zero, so :math:`\\partial L / \\partial \\theta_{ij} = g_{ij} + g_{ji}`
    and the diagonal gets no update.  Put first in an optax chain: the parameters
    stay exactly symmetric with an exactly zero diagonal (as ``ui.models.ising``
    requires), and a learning rate means the same as for :math:`\\theta` itself.
    """

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        g = updates["W"]
        g = (g + g.T) * (1.0 - jnp.eye(g.shape[0], dtype=g.dtype))
        return {**updates, "W": g}, state

    return optax.GradientTransformation(init, update)


def random_theta(rng_key: jax.Array) -> dict:
    """Every :math:`\\theta_{ij}` (i < j) and :math:`\\theta_i` i.i.d. :math:`\\mathcal N(0, 1)`, as ``{"W", "h"}``.

    Drawn here rather than with ``model.init_params`` so that the experiment's data
    depend only on ``jax.random`` (and ``ui.exact.sample``).
    """
    key_w, key_h = jax.random.split(rng_key)
    upper = jnp.triu(jax.random.normal(key_w, (NUM_SPINS, NUM_SPINS)), k=1)
    return {"W": upper + upper.T, "h": jax.random.normal(key_h, (NUM_SPINS,))}


def optimizer(lr: float, decay_b: float) -> optax.GradientTransformation:
    return optax.chain(project_couplings(), optax.sgd(ui.learn.robbins_monro(lr * decay_b, decay_b)))


def make_learners(model, lr: float, decay_b: float, num_chains: int) -> dict:
    return {
        "SAP/PCD-1": ui.learn.pcd(model, optimizer(lr, decay_b), num_particles=num_chains, num_sweeps=1),
        "CD-1": ui.learn.cd(model, k=1, optimizer=optimizer(lr, decay_b)),
        "pseudo-likelihood": ui.learn.pseudo_likelihood(model, optimizer(lr, decay_b)),
        "exact ML": ui.learn.exact_ml(model, optimizer(lr, decay_b)),
    }


def run(args) -> dict:
    model = ising(NUM_SPINS)
    key = jax.random.key(args.seed)
    key_true, key_data, key_inits, key_fit = jax.random.split(key, 4)
    true_params = random_theta(key_true)
    sample = exact.sample(key_data, model, true_params, args.num_train + args.num_test)
    train = {"s": np.asarray(sample["s"][: args.num_train])}
    test = {"s": np.asarray(sample["s"][args.num_train :])}
    true_test_ll = float(exact.average_log_likelihood(model, true_params, test))
    true_train_ll = float(exact.average_log_likelihood(model, true_params, train))
    inits = [random_theta(k) for k in jax.random.split(key_inits, args.num_inits)]
    mle_test_ll = mle_train_ll = None
    if args.mle_steps:
        # reference: the maximum-likelihood estimate itself (exact gradients, Adam, run
        # to convergence from zero parameters); the curves can at best reach it
        mle = fit(
            ui.learn.exact_ml(model, optax.chain(project_couplings(), optax.adam(0.05))),
            key_fit,
            train,
            params=jax.tree.map(jnp.zeros_like, true_params),
            num_epochs=args.mle_steps,
            batch_size=args.num_train,
            eval_fn=None,
            progress=False,
        )
        mle_test_ll = float(exact.average_log_likelihood(model, mle.params, test))
        mle_train_ll = float(exact.average_log_likelihood(model, mle.params, train))
        grad_norm = mle.history["steps"]["grad_norm"][-1]
        print(f"MLE reference: test LL {mle_test_ll:.4f}, train LL {mle_train_ll:.4f} (final |grad| {grad_norm:.2e})")
    learners = make_learners(model, args.lr, args.decay_b, args.num_chains)
    if args.methods:
        unknown = sorted(set(args.methods) - set(learners))
        if unknown:
            raise SystemExit(f"--methods: unknown {unknown}; choose from {list(learners)}")
        learners = {k: v for k, v in learners.items() if k in args.methods}
    batch = args.batch_size or args.num_train
    curves: dict[str, list[dict]] = {}
    for name, learner in learners.items():
        curves[name] = []
        for i, params0 in enumerate(inits):
            t = time.perf_counter()
            res = fit(
                learner,
                jax.random.fold_in(key_fit, i),
                train,
                params=params0,
                num_epochs=args.epochs,
                batch_size=batch,
                eval_every=args.eval_every,
                eval_data=test,
                progress=args.progress,
            )
            ev = res.history["evaluations"]
            curves[name].append(
                {
                    "epoch": ev["epoch"].tolist(),
                    "wall_time": ev["wall_time"].tolist(),
                    "test_ll": ev["eval_log_likelihood"].tolist(),
                    "train_ll": ev["train_log_likelihood"].tolist(),
                    "compile_seconds": res.history["timing"]["compile_seconds"],
                    "total_seconds": time.perf_counter() - t,
                }
            )
            print(
                f"{name:18s} init {i}: test LL {ev['eval_log_likelihood'][0]:8.4f} -> {ev['eval_log_likelihood'][-1]:8.4f}"
                f"  train {ev['wall_time'][-1]:6.2f}s (compile {res.history['timing']['compile_seconds']:.1f}s)",
                flush=True,
            )
    table = {}
    for name, runs in curves.items():
        final = np.array([r["test_ll"][-1] for r in runs])
        final_train = np.array([r["train_ll"][-1] for r in runs])
        secs = np.array([r["wall_time"][-1] for r in runs])
        table[name] = {
            "final_test_ll_mean": float(final.mean()),
            "final_test_ll_sd": float(final.std(ddof=1)) if len(final) > 1 else 0.0,
            "final_train_ll_mean": float(final_train.mean()),
            "train_seconds_mean": float(secs.mean()),
            "seconds_per_epoch_mean": float(secs.mean() / args.epochs),
        }
    return {
        "config": {
            "num_spins": NUM_SPINS,
            "num_train": args.num_train,
            "num_test": args.num_test,
            "num_inits": args.num_inits,
            "num_chains": args.num_chains,
            "epochs": args.epochs,
            "batch_size": batch,
            "learning_rate": f"{args.lr} * {args.decay_b} / ({args.decay_b} + t)",
            "eval_every": args.eval_every,
            "seed": args.seed,
            "quick": args.quick,
            "jax": jax.__version__,
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        },
        "true_params_test_ll": true_test_ll,
        "true_params_train_ll": true_train_ll,
        "mle_test_ll": mle_test_ll,
        "mle_train_ll": mle_train_ll,
        "mle_steps": args.mle_steps,
        "table": table,
        "curves": curves,
    }


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colours = {"SAP/PCD-1": "C0", "CD-1": "C1", "pseudo-likelihood": "C2", "exact ML": "C3"}
    for name, runs in result["curves"].items():
        c = colours.get(name, "C4")
        ll = np.array([r["test_ll"] for r in runs])
        epochs = np.array(runs[0]["epoch"])
        wall = np.array([r["wall_time"] for r in runs])
        # median and interquartile range over initialisations (robust to the few runs
        # that are still far away), individual runs as thin lines
        lo, med, hi = np.percentile(ll, [25, 50, 75], axis=0)
        axes[0].plot(epochs, med, color=c, lw=2, label=name)
        axes[0].fill_between(epochs, lo, hi, color=c, alpha=0.2, linewidth=0)
        for run_ll, run_wall in zip(ll, wall):
            axes[0].plot(epochs, run_ll, color=c, lw=0.5, alpha=0.3)
            axes[1].plot(run_wall[1:], run_ll[1:], color=c, lw=0.5, alpha=0.3)
        axes[1].plot(np.median(wall, axis=0)[1:], med[1:], color=c, lw=2, label=name)
    for ax in axes:
        ax.axhline(result["true_params_test_ll"], color="k", ls=":", lw=1, label="true parameters")
        if result.get("mle_test_ll") is not None:
            ax.axhline(result["mle_test_ll"], color="k", ls="--", lw=1, label="MLE (converged)")
        ax.grid(alpha=0.3)
    cfg = result["config"]
    axes[0].set_xlabel("epoch (= full-batch update)" if cfg["batch_size"] == cfg["num_train"] else "epoch")
    axes[1].set_xlabel("training wall time, s (compilation and evaluation excluded)")
    axes[1].set_xscale("log")
    axes[0].set_ylabel("average test log-likelihood (exact)")
    axes[0].set_ylim(result["true_params_test_ll"] - 8.0, result["true_params_test_ll"] + 0.5)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"VBM-{cfg['num_spins']}: {cfg['num_inits']} initialisations (median, quartiles, runs), "
        f"S={cfg['num_chains']} chains, "
        f"lr {cfg['learning_rate']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> dict:
    """Command line entry point (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI setting: 2 inits, 100 epochs")
    p.add_argument("--out", default="out/vbm_learning")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=None, help="default 1000 (quick: 100)")
    p.add_argument("--inits", dest="num_inits", type=int, default=None, help="default 10 (quick: 2)")
    p.add_argument("--eval-every", type=int, default=None, help="epochs between evaluations (default epochs/50)")
    p.add_argument("--num-train", type=int, default=500)
    p.add_argument("--num-test", type=int, default=100)
    p.add_argument("--num-chains", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=None, help="default: full batch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--decay-b", type=float, default=1000.0, help="lr_t = lr * b / (b + t)")
    p.add_argument("--methods", nargs="*", default=None, help="subset of: 'SAP/PCD-1' CD-1 pseudo-likelihood 'exact ML'")
    p.add_argument(
        "--mle-steps",
        type=int,
        default=None,
        help="Adam steps of the converged-MLE reference (default 1500, quick: 0 = off)",
    )
    p.add_argument("--progress", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--replot", action="store_true", help="only redraw the PNG from an existing JSON in --out")
    args = p.parse_args(argv)
    args.epochs = args.epochs or (100 if args.quick else 1000)
    args.num_inits = args.num_inits or (2 if args.quick else 10)
    args.eval_every = args.eval_every or max(1, args.epochs // 50)
    if args.mle_steps is None:
        args.mle_steps = 0 if args.quick else 1500
    args.progress = {"auto": "auto", "on": True, "off": False}[args.progress]
    os.makedirs(args.out, exist_ok=True)
    if args.replot:
        with open(os.path.join(args.out, "vbm_learning.json")) as f:
            result = json.load(f)
        plot(result, os.path.join(args.out, "vbm_learning.png"))
        return result
    t = time.perf_counter()
    result = run(args)
    result["config"]["total_seconds"] = time.perf_counter() - t
    result["config"]["command"] = "python examples/vbm_learning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result["config"]["provenance"] = provenance(argv, __file__)
    with open(os.path.join(args.out, "vbm_learning.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(args.out, "vbm_learning.png"))
    print(f"\ntrue parameters: test LL {result['true_params_test_ll']:.4f}")
    if result["mle_test_ll"] is not None:
        print(f"MLE:             test LL {result['mle_test_ll']:.4f}")
    print(f"{'method':18s} {'final test LL':>20s} {'train s':>8s}")
    for name, row in result["table"].items():
        print(
            f"{name:18s} {row['final_test_ll_mean']:11.4f} ± {row['final_test_ll_sd']:.4f} {row['train_seconds_mean']:8.2f}"
        )
    print(f"total {result['config']['total_seconds']:.1f}s; wrote {args.out}/vbm_learning.{{png,json}}")
    return result


if __name__ == "__main__":
    main()
