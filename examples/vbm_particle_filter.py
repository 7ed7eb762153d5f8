"""Particle-filtered MCMC-MLE versus PCD versus MCMC-MLE on a 15-spin VBM.

Reproduces the visible-Boltzmann-machine experiment of Asuncion, Liu, Ihler and
Smyth (2010), *Particle filtered MCMC-MLE with connections to contrastive
divergence*, ICML, section 4.1:

* a fully visible Boltzmann machine on 15 spins (``ui.models.ising(15)``), true
  couplings :math:`\\theta_{ij}` and fields :math:`\\theta_i` i.i.d. N(0, 1);
* 500 training and 100 test cases drawn exactly (``ui.exact.sample``);
* initial parameters :math:`\\theta_0 \\sim \\mathcal N(0, 1)`, the same for every
  method (one per trial);
* three learners, all with ``S`` particles, block-Gibbs moves and the same SGD step
  sizes :math:`a_t = \\mathrm{lr}\\; b / (b + t)` on the independent parameters
  (full-batch updates: one epoch = one update):

  - **PF** (``ui.learn.pf_mcmc_mle``, Alg. 2): importance weights along the
    parameter trail (eq. 10); resample and rejuvenate with ``n`` Gibbs sweeps only
    when the ESS (eq. 11) falls below ``ess_threshold * S``;
  - **PCD** (PCD-n: ``ui.learn.pcd(num_sweeps=n)``, = Alg. 3): ``n`` sweeps at
    every update;
  - **MCMC-MLE** (``ui.learn.mcmc_mle``, Alg. 1): ``m`` Gibbs sweeps at the anchor
    :math:`\\theta_0` then importance-weighted updates until the L1 gradient norm
    falls below a threshold or ``max_inner`` updates are done, then a new round.

* metric: the exact average test log-likelihood (2^15 states enumerated by
  ``ui.fit``'s evaluation) versus epochs and versus training wall time (compilation
  and evaluation excluded); for PF, the fraction of updates at which it resampled.

The paper's point: PF reaches the same likelihood as PCD in the same number of
updates but in less wall time, because most updates skip the MCMC rejuvenation.

Run ``python examples/vbm_particle_filter.py`` (full: 10 initialisations, 1000
updates, about 8 min on 2 loaded cores) or ``--quick`` (CI: one initialisation, 150
updates, PF and PCD only; about 30 s of CPU).  Writes
``vbm_particle_filter.{json,png}`` into ``--out`` (default
``out/vbm_particle_filter``).  Results: ``docs/results/vbm_particle_filter.md``.
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
METHODS = ("PF", "PCD", "MCMC-MLE")
QUICK_METHODS = ("PF", "PCD")


def project_couplings(fields: bool = True) -> optax.GradientTransformation:
    """Gradient w.r.t. dense ``W`` -> gradient w.r.t. ``theta_ij`` (i < j): ``g + g.T``, zero diagonal.

    As in ``examples/vbm_learning.py``: ``W[i, j] = W[j, i] = theta_ij`` stays exactly
    symmetric with a zero diagonal, and the learning rate means the same as for
    :math:`\\theta` itself.
    """

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        g = updates["W"]
        g = (g + g.T) * (1.0 - jnp.eye(g.shape[0], dtype=g.dtype))
        h = updates["h"] if fields else jnp.zeros_like(updates["h"])  # no fields: h stays at 0
        return {**updates, "W": g, "h": h}, state

    return optax.GradientTransformation(init, update)


def random_theta(rng_key: jax.Array, num_spins: int = NUM_SPINS, fields: bool = True) -> dict:
    """Every :math:`\\theta_{ij}` (i < j) and :math:`\\theta_i` i.i.d. N(0, 1) as ``{"W", "h"}`` (without fields h = 0)."""
    key_w, key_h = jax.random.split(rng_key)
    upper = jnp.triu(jax.random.normal(key_w, (num_spins, num_spins)), k=1)
    h = jax.random.normal(key_h, (num_spins,)) if fields else jnp.zeros((num_spins,))
    return {"W": upper + upper.T, "h": h}


def optimizer(lr: float, decay_b: float, fields: bool = True) -> optax.GradientTransformation:
    return optax.chain(project_couplings(fields), optax.sgd(ui.learn.robbins_monro(lr * decay_b, decay_b)))


def make_learner(name: str, model, args):
    opt = optimizer(args.lr, args.decay_b, not args.no_fields)
    s, n = args.num_particles, args.sweeps
    if name == "PF":
        return ui.learn.pf_mcmc_mle(
            model,
            None,
            opt,
            s,
            ess_threshold=args.ess_threshold,
            num_rejuvenation_steps=n,
            num_burnin_steps=args.burnin,
            max_updates_between_rejuvenation=args.pf_max_updates or None,
        )
    if name == "PCD":
        return ui.learn.pcd(model, opt, num_particles=s, num_sweeps=n)
    if name == "MCMC-MLE":
        return ui.learn.mcmc_mle(
            model,
            None,
            opt,
            s,
            num_mcmc_steps=args.mle_sweeps,
            grad_threshold=args.grad_threshold,
            max_inner_steps=args.max_inner,
        )
    raise ValueError(f"unknown method {name!r}")


def time_to_reach(wall, ll, target) -> float | None:
    """First training wall time at which the test LL reaches ``target`` (None if never)."""
    hit = np.nonzero(np.asarray(ll) >= target)[0]
    return float(np.asarray(wall)[hit[0]]) if hit.size else None


def run(args) -> dict:
    model = ising(args.num_spins)
    key = jax.random.key(args.seed)
    key_true, key_data, key_inits, key_fit = jax.random.split(key, 4)
    true_params = random_theta(key_true, args.num_spins, not args.no_fields)
    sample = exact.sample(key_data, model, true_params, args.num_train + args.num_test)
    train = {"s": np.asarray(sample["s"][: args.num_train])}
    test = {"s": np.asarray(sample["s"][args.num_train :])}
    true_test_ll = float(exact.average_log_likelihood(model, true_params, test))
    inits = [random_theta(k, args.num_spins, not args.no_fields) for k in jax.random.split(key_inits, args.trials)]
    curves: dict = {m: [] for m in args.methods}
    for name in args.methods:
        learner = make_learner(name, model, args)
        for i, params0 in enumerate(inits):
            res = fit(
                learner,
                jax.random.fold_in(key_fit, i),
                train,
                params=params0,
                num_epochs=args.epochs,
                batch_size=args.num_train,
                eval_every=args.eval_every,
                eval_data=test,
                progress=args.progress,
                step_info=True,  # every update's info: the counts below use all of them
            )
            ev = res.history["evaluations"]
            steps = res.history["steps"]
            run_rec = {
                "epoch": ev["epoch"].tolist(),
                "wall_time": ev["wall_time"].tolist(),
                "test_ll": ev["eval_log_likelihood"].tolist(),
                "train_ll": ev["train_log_likelihood"].tolist(),
                "compile_seconds": res.history["timing"]["compile_seconds"],
            }
            if "resampled" in steps:
                run_rec["resampled_fraction"] = float(np.mean(steps["resampled"]))
                run_rec["resample_steps"] = np.nonzero(steps["resampled"])[0].astype(int).tolist()
            if "ess" in steps:
                run_rec["mean_ess"] = float(np.mean(steps["ess"]))
            curves[name].append(run_rec)
            extra = f" resampled {run_rec['resampled_fraction']:.3f}" if "resampled_fraction" in run_rec else ""
            print(
                f"{name:9s} trial {i}: test LL {ev['eval_log_likelihood'][0]:8.4f} -> "
                f"{ev['eval_log_likelihood'][-1]:8.4f}  train {ev['wall_time'][-1]:6.2f}s{extra}",
                flush=True,
            )
    # common target for the time-to-reach column: the worst method's final median, minus nothing
    finals = {m: np.median([r["test_ll"][-1] for r in runs]) for m, runs in curves.items()}
    target = float(min(finals.values()) - args.target_slack)
    table = {}
    for name, runs in curves.items():
        final = np.array([r["test_ll"][-1] for r in runs])
        secs = np.array([r["wall_time"][-1] for r in runs])
        reach = [time_to_reach(r["wall_time"], r["test_ll"], target) for r in runs]
        row = {
            "final_test_ll_mean": float(final.mean()),
            "final_test_ll_sd": float(final.std(ddof=1)) if final.size > 1 else 0.0,
            "final_train_ll_mean": float(np.mean([r["train_ll"][-1] for r in runs])),
            "train_seconds_mean": float(secs.mean()),
            "ms_per_update_mean": float(1000.0 * secs.mean() / args.epochs),
            "seconds_to_target_median": float(np.median([x for x in reach if x is not None]))
            if any(x is not None for x in reach)
            else None,
            "runs_reaching_target": int(sum(x is not None for x in reach)),
        }
        if "resampled_fraction" in runs[0]:
            row["resampled_fraction_mean"] = float(np.mean([r["resampled_fraction"] for r in runs]))
        table[name] = row
    return {
        "config": {
            "num_spins": args.num_spins,
            "num_train": args.num_train,
            "num_test": args.num_test,
            "trials": args.trials,
            "epochs": args.epochs,
            "batch_size": args.num_train,
            "num_particles": args.num_particles,
            "sweeps": args.sweeps,
            "ess_threshold": args.ess_threshold,
            "pf_burnin": args.burnin,
            "pf_max_updates_between_rejuvenation": args.pf_max_updates,
            "fields": not args.no_fields,
            "mle_sweeps": args.mle_sweeps,
            "max_inner": args.max_inner,
            "grad_threshold": args.grad_threshold,
            "learning_rate": f"{args.lr} * {args.decay_b} / ({args.decay_b} + t)",
            "eval_every": args.eval_every,
            "methods": list(args.methods),
            "seed": args.seed,
            "quick": args.quick,
            "jax": jax.__version__,
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        },
        "true_params_test_ll": true_test_ll,
        "target_test_ll": target,
        "table": table,
        "curves": curves,
    }


COLOURS = {"PF": "C3", "PCD": "C0", "MCMC-MLE": "C2"}


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    lows = []
    for name, runs in result["curves"].items():
        c = COLOURS.get(name, "C4")
        ll = np.array([r["test_ll"] for r in runs])
        wall = np.array([r["wall_time"] for r in runs])
        epochs = np.array(runs[0]["epoch"])
        med = np.median(ll, axis=0)
        lows.append(np.percentile(med, 5))
        label = name
        if name == "PF":
            label += f" (resampled {result['table'][name]['resampled_fraction_mean']:.0%} of updates)"
        axes[0].plot(epochs, med, color=c, lw=1.8, label=label)
        axes[1].plot(np.median(wall, axis=0)[1:], med[1:], color=c, lw=1.8, label=label)
        for run_ll, run_wall in zip(ll, wall):
            axes[0].plot(epochs, run_ll, color=c, lw=0.5, alpha=0.3)
            axes[1].plot(run_wall[1:], run_ll[1:], color=c, lw=0.5, alpha=0.3)
    for ax in axes:
        ax.axhline(result["true_params_test_ll"], color="k", ls=":", lw=1, label="true parameters")
        ax.grid(alpha=0.3)
    top = result["true_params_test_ll"] + 0.3
    axes[0].set_ylim(max(min(lows), top - 2.5), top)
    axes[0].set_xlabel("epoch (= full-batch update)")
    axes[1].set_xlabel("training wall time, s (compilation and evaluation excluded)")
    axes[1].set_xscale("log")
    axes[0].set_ylabel("average test log-likelihood (exact)")
    axes[1].legend(loc="lower right", fontsize=7)
    cfg = result["config"]
    fig.suptitle(
        f"VBM-{cfg['num_spins']}: {cfg['trials']} initialisations (median and runs), S={cfg['num_particles']}, "
        f"n={cfg['sweeps']} sweeps, lr {cfg['learning_rate']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI setting: 1 initialisation, 150 epochs, PF and PCD only")
    p.add_argument("--out", default="out/vbm_particle_filter")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=None, help="initialisations (default 10, quick: 1)")
    p.add_argument("--epochs", type=int, default=None, help="full-batch updates (default 1000, quick: 150)")
    p.add_argument("--eval-every", type=int, default=None, help="epochs between evaluations (default epochs/50)")
    p.add_argument("--num-spins", type=int, default=NUM_SPINS, help="default 15 (the paper's)")
    p.add_argument("--num-train", type=int, default=500)
    p.add_argument("--num-test", type=int, default=100)
    p.add_argument("--num-particles", type=int, default=100, help="S")
    p.add_argument("--sweeps", type=int, default=5, help="n: Gibbs sweeps of PF's rejuvenation and of PCD-n")
    p.add_argument("--ess-threshold", type=float, default=0.9, help="PF resamples when ESS < this * S")
    p.add_argument("--burnin", type=int, default=100, help="PF: Gibbs sweeps at theta_0 before the first update")
    p.add_argument("--mle-sweeps", type=int, default=50, help="MCMC-MLE: Gibbs sweeps at the start of a round")
    p.add_argument("--max-inner", type=int, default=10, help="MCMC-MLE: most updates per round")
    p.add_argument("--grad-threshold", type=float, default=1e-3, help="MCMC-MLE: L1 gradient norm ending a round")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--decay-b", type=float, default=1000.0, help="lr_t = lr * b / (b + t)")
    p.add_argument("--pf-max-updates", type=int, default=0, help="PF: also rejuvenate after this many updates (0: off)")
    p.add_argument("--no-fields", action="store_true", help="couplings only, fields fixed at 0 (the paper's VBM)")
    p.add_argument(
        "--paper",
        action="store_true",
        help="Asuncion et al.'s settings: no fields, S=50, n=1, 10 sweeps at theta_0, ESS threshold 0.9, a "
        "rejuvenation at least every 100 updates, MCMC-MLE with 10 sweeps a round and rounds of at most 100 "
        "updates, step 0.01 decreasing as 0.01 b / (b + t) with b = 1000 (our choice), 2000 epochs",
    )
    p.add_argument("--target-slack", type=float, default=0.0, help="time-to-target: worst final median minus this")
    p.add_argument("--methods", nargs="*", default=None, help=f"subset of {list(METHODS)}")
    p.add_argument("--progress", default="off", choices=["auto", "on", "off"])
    p.add_argument("--replot", action="store_true", help="only redraw the PNG from an existing JSON in --out")
    args = p.parse_args(argv)
    if args.paper:
        args.no_fields, args.num_particles, args.sweeps, args.burnin, args.ess_threshold = True, 50, 1, 10, 0.9
        args.pf_max_updates, args.mle_sweeps, args.max_inner, args.lr, args.decay_b = 100, 10, 100, 0.01, 1000.0
        args.epochs = args.epochs or 2000
    args.trials = args.trials or (1 if args.quick else 10)
    args.epochs = args.epochs or (150 if args.quick else 1000)
    args.eval_every = args.eval_every or max(1, args.epochs // 50)
    args.methods = list(args.methods or (QUICK_METHODS if args.quick else METHODS))
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        p.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    args.progress = {"auto": "auto", "on": True, "off": False}[args.progress]
    return args


def main(argv=None) -> dict:
    """Command line entry point (see the module docstring)."""
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "vbm_particle_filter.json")
    png = os.path.join(args.out, "vbm_particle_filter.png")
    if args.replot:
        with open(json_path) as f:
            result = json.load(f)
        plot(result, png)
        return result
    t = time.perf_counter()
    result = run(args)
    result["config"]["total_seconds"] = time.perf_counter() - t
    result["config"]["command"] = "python examples/vbm_particle_filter.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result["config"]["provenance"] = provenance(argv, __file__)
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, png)
    print(f"\ntrue parameters: test LL {result['true_params_test_ll']:.4f}; target {result['target_test_ll']:.4f}")
    print(f"{'method':9s} {'final test LL':>18s} {'ms/update':>9s} {'s to target':>11s} {'resampled':>9s}")
    for name, row in result["table"].items():
        reach = row["seconds_to_target_median"]
        res = row.get("resampled_fraction_mean")
        print(
            f"{name:9s} {row['final_test_ll_mean']:9.4f} ± {row['final_test_ll_sd']:.4f} {row['ms_per_update_mean']:9.3f} "
            f"{'-' if reach is None else f'{reach:.2f}':>11s} {'-' if res is None else f'{res:.3f}':>9s}"
        )
    print(f"total {result['config']['total_seconds']:.1f}s; wrote {args.out}/vbm_particle_filter.{{json,png}}")
    return result


if __name__ == "__main__":
    main()
