"""Learning-rate robustness of PCD, PT, TT, SMC and persistent SMC on a 10-spin VBM.

Reproduces the first experiment of Xiong, Szedmak and Piater, *persistent sequential
Monte Carlo* (PSMC) for learning Markov random fields: a small fully visible
Boltzmann machine whose log-likelihood is exact, trained with three Robbins-Monro
learning-rate schemes of increasing size

.. math::  \\eta_t = \\frac{1}{100 + t}, \\qquad \\frac{1}{20 + 0.5\\,t}, \\qquad \\frac{1}{10 + 0.1\\,t}

(``ui.learn.robbins_monro(1, 100)``, ``(2, 40)`` and ``(10, 100)``), by

* PCD-1 (``ui.learn.pcd``, one Gibbs sweep per update),
* PCD-H (``ui.learn.pcd(num_sweeps=H)``, as many sweeps as PT/TT have temperatures),
* PT (``ui.learn.pt_sap`` with ``H`` inverse temperatures),
* TT (``ui.learn.sap`` with a tempered-transitions kernel of ``H`` temperatures at
  every update),
* standard SMC (``ui.learn.smc_learner``: adaptive tempered SMC from the uniform
  distribution at every update),
* PSMC (``ui.learn.psmc``: ESS threshold 0.9, half the particles re-initialised),
* exact ML (``ui.learn.exact_ml``: the exact gradient, the reference).

The paper's finding is that PSMC (and PT) keep learning well at the large learning
rates, where PCD-1 fails because its persistent chains cannot follow the model.

Model: ``ui.models.ising(10)`` (spins in {-1, +1}); the true couplings
:math:`\\theta_{ij}, i<j` i.i.d. N(0, 1) and zero fields (``--field-scale``: with
N(0, 1) fields too the 10-spin model is nearly deterministic); a different true model
for every trial (5); 200 training cases (and 1000 test cases) drawn exactly with
``ui.exact.sample``; full-batch updates (minibatch = the 200 cases: one epoch = one
update; 500 epochs); N = 100 particles; H = 10 inverse temperatures uniform in (0, 1];
every learner starts from zero parameters; the gradient is taken with respect to the
independent :math:`\\theta_{ij}` (see :func:`project_couplings`); metric: the exact
average training log-likelihood computed by ``ui.fit``, reported as the difference
to exact ML on the same trial.

Run ``python examples/vbm_learning_rates.py`` (full: about 25 min on 2 loaded cores)
or ``--quick`` (CI: one trial, the largest scheme, exact ML / PCD-1 / PSMC; about
35 s of CPU).  Writes ``vbm_learning_rates.json``, ``vbm_learning_rates.png`` (train
LL minus exact ML's versus epochs, one panel per scheme) and
``vbm_learning_rates_betas.png`` (number of bridges PSMC and SMC used at each update)
into ``--out`` (default ``out/vbm_learning_rates``).  Results:
``docs/results/vbm_learning_rates.md``.

Reference
---------
Xiong, H., Szedmak, S. and Piater, J. (2016). Learning undirected graphical models
using persistent sequential Monte Carlo. Machine Learning 103(2), 239-260 (first:
ACML 2014, JMLR W&CP 39, 205-220).
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

NUM_SPINS = 10

# eta_t = a / (b + t): 1/(100+t), 1/(20+0.5t) = 2/(40+t), 1/(10+0.1t) = 10/(100+t)
SCHEMES = {
    "1/(100+t)": (1.0, 100.0),
    "1/(20+0.5t)": (2.0, 40.0),
    "1/(10+0.1t)": (10.0, 100.0),
}
METHODS = ("exact ML", "PCD-1", "PCD-H", "PT", "TT", "SMC", "PSMC")
QUICK_METHODS = ("exact ML", "PCD-1", "PSMC")
QUICK_SCHEMES = ("1/(10+0.1t)",)


def project_couplings() -> optax.GradientTransformation:
    """Map a gradient w.r.t. the dense matrix ``W`` to one w.r.t. ``theta_ij`` (i < j).

    ``W[i, j] = W[j, i] = theta_ij`` with a zero diagonal, so
    :math:`\\partial L / \\partial \\theta_{ij} = g_{ij} + g_{ji}` and the diagonal gets
    no update (as in ``examples/vbm_learning.py``): a learning rate then means the
    same as for :math:`\\theta` itself, and ``W`` stays exactly symmetric.
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


def random_theta(rng_key: jax.Array, num_spins: int = NUM_SPINS, field_scale: float = 0.0) -> dict:
    """True parameters: every :math:`\\theta_{ij}` (i < j) ~ N(0, 1), every :math:`\\theta_i` ~ N(0, field_scale^2)."""
    key_w, key_h = jax.random.split(rng_key)
    upper = jnp.triu(jax.random.normal(key_w, (num_spins, num_spins)), k=1)
    return {"W": upper + upper.T, "h": field_scale * jax.random.normal(key_h, (num_spins,))}


def optimizer(a: float, b: float, scale: float = 1.0) -> optax.GradientTransformation:
    """SGD with :math:`\\eta_t = \\mathrm{scale} \\cdot a / (b + t)` on the independent parameters."""
    return optax.chain(project_couplings(), optax.sgd(ui.learn.robbins_monro(scale * a, b)))


def ladder(num_betas: int) -> np.ndarray:
    """``H`` inverse temperatures uniform in (0, 1]: ``1/H, 2/H, ..., 1``."""
    return np.linspace(1.0 / num_betas, 1.0, num_betas)


def make_learner(name: str, model, opt, args):
    n, h = args.num_particles, args.num_betas
    if name == "exact ML":
        return ui.learn.exact_ml(model, opt)
    if name == "PCD-1":
        return ui.learn.pcd(model, opt, num_particles=n, num_sweeps=1)
    if name == "PCD-H":
        return ui.learn.pcd(model, opt, num_particles=n, num_sweeps=h)
    if name == "PT":
        return ui.learn.pt_sap(model, opt, n, betas=ladder(h))
    if name == "TT":
        return ui.learn.sap(model, ui.learn.tempered_transitions_kernel(model, ladder(h)), opt, n, name="tt_sap")
    if name == "SMC":
        return ui.learn.smc_learner(model, None, opt, n, ess_threshold=args.ess_threshold)
    if name == "PSMC":
        return ui.learn.psmc(
            model,
            None,
            opt,
            n,
            ess_threshold=args.ess_threshold,
            max_bridges=args.max_bridges,
            reinit_fraction=args.reinit_fraction,
        )
    raise ValueError(f"unknown method {name!r}")


def summarise(values) -> dict:
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "sd": float(arr.std(ddof=1)) if arr.size > 1 else 0.0}


def run(args) -> dict:
    model = ising(args.num_spins)
    key = jax.random.key(args.seed)
    trials = []
    for trial in range(args.trials):
        key_true, key_data = jax.random.split(jax.random.fold_in(key, trial))
        true_params = random_theta(key_true, args.num_spins, args.field_scale)
        sample = exact.sample(key_data, model, true_params, args.num_train + args.num_test)
        train = {"s": np.asarray(sample["s"][: args.num_train])}
        test = {"s": np.asarray(sample["s"][args.num_train :])}
        trials.append(
            {
                "true_params": true_params,
                "train": train,
                "test": test,
                "true_train_ll": float(exact.average_log_likelihood(model, true_params, train)),
                "true_test_ll": float(exact.average_log_likelihood(model, true_params, test)),
            }
        )
    zeros = jax.tree.map(jnp.zeros_like, trials[0]["true_params"])
    curves: dict = {s: {m: [] for m in args.methods} for s in args.schemes}
    psmc_bridges: dict = {s: [] for s in args.schemes}
    smc_bridges: dict = {s: [] for s in args.schemes}
    timing: dict = {s: {} for s in args.schemes}
    for scheme in args.schemes:
        a, b = SCHEMES[scheme]
        for method in args.methods:
            learner = make_learner(method, model, optimizer(a, b, args.lr_scale), args)
            t0 = time.perf_counter()
            compile_s = 0.0
            for i, tr in enumerate(trials):
                res = fit(
                    learner,
                    jax.random.key(1000 * args.seed + i),
                    tr["train"],
                    params=zeros,
                    num_epochs=args.epochs,
                    batch_size=args.num_train,
                    eval_every=args.eval_every,
                    eval_data=tr["test"],
                    progress=args.progress,
                    step_info=True,  # every update's info: the counts below use all of them
                )
                ev = res.history["evaluations"]
                compile_s += res.history["timing"]["compile_seconds"]
                curves[scheme][method].append(
                    {
                        "epoch": ev["epoch"].tolist(),
                        "train_ll": ev["train_log_likelihood"].tolist(),
                        "test_ll": ev["eval_log_likelihood"].tolist(),
                        "wall_time": ev["wall_time"].tolist(),
                    }
                )
                steps = res.history["steps"]
                if method == "PSMC":
                    psmc_bridges[scheme].append(
                        {
                            "num_bridges": steps["num_bridges"].astype(int).tolist(),
                            "capped": int(np.sum(steps["capped"])),
                        }
                    )
                if method == "SMC":
                    smc_bridges[scheme].append({"num_bridges": steps["num_bridges"].astype(int).tolist()})
                print(
                    f"{scheme:12s} {method:9s} trial {i}: train LL {ev['train_log_likelihood'][0]:8.4f} -> "
                    f"{ev['train_log_likelihood'][-1]:8.4f} (true {tr['true_train_ll']:.4f})  "
                    f"train {ev['wall_time'][-1]:6.2f}s",
                    flush=True,
                )
            timing[scheme][method] = {
                "total_seconds": time.perf_counter() - t0,
                "compile_seconds": compile_s,
                "train_seconds_mean": float(np.mean([c["wall_time"][-1] for c in curves[scheme][method]])),
            }
    table = {
        scheme: {
            method: {
                "final_train_ll": summarise([c["train_ll"][-1] for c in runs]),
                "final_test_ll": summarise([c["test_ll"][-1] for c in runs]),
                "final_train_ll_per_trial": [c["train_ll"][-1] for c in runs],
            }
            for method, runs in per.items()
        }
        for scheme, per in curves.items()
    }
    gap_to_exact_ml = {
        scheme: {
            method: summarise(
                np.array(row["final_train_ll_per_trial"]) - np.array(per["exact ML"]["final_train_ll_per_trial"])
            )
            for method, row in per.items()
            if method != "exact ML"
        }
        for scheme, per in table.items()
        if "exact ML" in per
    }
    bridges_summary = {
        scheme: {
            "mean": float(np.mean([np.mean(r["num_bridges"]) for r in runs])) if runs else None,
            "max": int(np.max([np.max(r["num_bridges"]) for r in runs])) if runs else None,
            "first_10_mean": float(np.mean([np.mean(r["num_bridges"][:10]) for r in runs])) if runs else None,
            "capped_updates": int(sum(r["capped"] for r in runs)) if runs else None,
        }
        for scheme, runs in psmc_bridges.items()
    }
    return {
        "config": {
            "num_spins": args.num_spins,
            "num_train": args.num_train,
            "num_test": args.num_test,
            "trials": args.trials,
            "epochs": args.epochs,
            "batch_size": args.num_train,
            "num_particles": args.num_particles,
            "num_betas": args.num_betas,
            "betas": ladder(args.num_betas).tolist(),
            "ess_threshold": args.ess_threshold,
            "max_bridges": args.max_bridges,
            "reinit_fraction": args.reinit_fraction,
            "field_scale": args.field_scale,
            "lr_scale": args.lr_scale,
            "schemes": {s: f"{SCHEMES[s][0]} / ({SCHEMES[s][1]} + t)" for s in args.schemes},
            "methods": list(args.methods),
            "eval_every": args.eval_every,
            "seed": args.seed,
            "quick": args.quick,
            "jax": jax.__version__,
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        },
        "true_params_train_ll": [t["true_train_ll"] for t in trials],
        "true_params_test_ll": [t["true_test_ll"] for t in trials],
        "table": table,
        "gap_to_exact_ml": gap_to_exact_ml,
        "psmc_bridges_summary": bridges_summary,
        "psmc_bridges": psmc_bridges,
        "smc_bridges": smc_bridges,
        "timing": timing,
        "curves": curves,
    }


COLOURS = {
    "exact ML": "k",
    "PCD-1": "C0",
    "PCD-H": "C1",
    "PT": "C2",
    "TT": "C4",
    "SMC": "C5",
    "PSMC": "C3",
}


def plot(result: dict, path: str, path_betas: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    schemes = list(result["curves"])
    fig, axes = plt.subplots(1, len(schemes), figsize=(4.2 * len(schemes), 3.8), sharey=True, squeeze=False)
    for ax, scheme in zip(axes[0], schemes):
        per = result["curves"][scheme]
        ref = np.array([r["train_ll"] for r in per["exact ML"]]) if "exact ML" in per else None
        for method, runs in per.items():
            ll = np.array([r["train_ll"] for r in runs])
            epochs = np.array(runs[0]["epoch"])
            gap = (ll - ref).mean(axis=0) if ref is not None else ll.mean(axis=0)
            ls = "--" if method == "exact ML" else "-"
            ax.plot(epochs[1:], gap[1:], color=COLOURS.get(method, "C7"), ls=ls, lw=1.3, label=method)
        ax.set_title(f"eta_t = {scheme}")
        ax.set_xlabel("epoch (= full-batch update)")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel(f"train LL minus exact ML's (mean of {result['config']['trials']} trials)")
    axes[0][-1].legend(loc="lower right", fontsize=7)
    cfg = result["config"]
    fig.suptitle(
        f"VBM-{cfg['num_spins']}: {cfg['num_train']} cases, N={cfg['num_particles']} particles, H={cfg['num_betas']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for k, (scheme, runs) in enumerate(result["psmc_bridges"].items()):
        if not runs:
            continue
        nb = np.array([r["num_bridges"] for r in runs], dtype=float)
        ax.plot(np.arange(1, nb.shape[1] + 1), nb.mean(axis=0), color=f"C{k}", lw=1, label=f"PSMC, eta_t = {scheme}")
    for k, (scheme, runs) in enumerate(result.get("smc_bridges", {}).items()):
        if not runs:
            continue
        nb = np.array([r["num_bridges"] for r in runs], dtype=float)
        ax.plot(np.arange(1, nb.shape[1] + 1), nb.mean(axis=0), color=f"C{k}", ls=":", lw=1, label=f"SMC, eta_t = {scheme}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("update t")
    ax.set_ylabel("betas per update (mean of trials)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path_betas, dpi=80)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="CI setting: 1 trial, 150 epochs, exact ML / PCD-1 / PSMC, largest scheme"
    )
    p.add_argument("--out", default="out/vbm_learning_rates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=None, help="true models (default 5, quick: 1)")
    p.add_argument("--epochs", type=int, default=None, help="full-batch updates (default 500, quick: 150)")
    p.add_argument("--eval-every", type=int, default=None, help="epochs between evaluations (default epochs/50)")
    p.add_argument("--num-spins", type=int, default=NUM_SPINS, help="default 10 (the paper's)")
    p.add_argument("--num-train", type=int, default=200)
    p.add_argument("--num-test", type=int, default=1000)
    p.add_argument("--num-particles", type=int, default=None, help="particles/chains (default 100)")
    p.add_argument("--num-betas", type=int, default=10, help="H: temperatures of PT/TT, sweeps of PCD-H")
    p.add_argument("--ess-threshold", type=float, default=0.9)
    p.add_argument("--max-bridges", type=int, default=100)
    p.add_argument("--reinit-fraction", type=float, default=0.5, help="PSMC: particles re-initialised per update")
    p.add_argument("--lr-scale", type=float, default=1.0, help="multiply every scheme's eta_t by this")
    p.add_argument("--field-scale", type=float, default=0.0, help="sd of the true fields theta_i (default 0: no fields)")
    p.add_argument("--schemes", nargs="*", default=None, help=f"subset of {list(SCHEMES)}")
    p.add_argument("--methods", nargs="*", default=None, help=f"subset of {list(METHODS)}")
    p.add_argument("--progress", default="off", choices=["auto", "on", "off"])
    p.add_argument("--replot", action="store_true", help="only redraw the PNGs from an existing JSON in --out")
    args = p.parse_args(argv)
    args.trials = args.trials or (1 if args.quick else 5)
    args.epochs = args.epochs or (150 if args.quick else 500)
    args.num_particles = args.num_particles or 100
    args.eval_every = args.eval_every or max(1, args.epochs // 50)
    args.methods = list(args.methods or (QUICK_METHODS if args.quick else METHODS))
    args.schemes = list(args.schemes or (QUICK_SCHEMES if args.quick else SCHEMES))
    for name, given, known in (("--methods", args.methods, METHODS), ("--schemes", args.schemes, SCHEMES)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            p.error(f"{name}: unknown {unknown}; choose from {list(known)}")
    if args.num_betas < 2:
        p.error("--num-betas must be >= 2")
    args.progress = {"auto": "auto", "on": True, "off": False}[args.progress]
    return args


def main(argv=None) -> dict:
    """Command line entry point (see the module docstring)."""
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "vbm_learning_rates.json")
    png = os.path.join(args.out, "vbm_learning_rates.png")
    png_betas = os.path.join(args.out, "vbm_learning_rates_betas.png")
    if args.replot:
        with open(json_path) as f:
            result = json.load(f)
        plot(result, png, png_betas)
        return result
    t = time.perf_counter()
    result = run(args)
    result["config"]["total_seconds"] = time.perf_counter() - t
    result["config"]["command"] = "python examples/vbm_learning_rates.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result["config"]["provenance"] = provenance(argv, __file__)
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, png, png_betas)
    print(f"\ntrue parameters: train LL {np.mean(result['true_params_train_ll']):.4f} (mean over trials)")
    print(f"{'scheme':12s} {'method':9s} {'final train LL':>18s} {'final test LL':>18s}")
    for scheme, per in result["table"].items():
        for method, row in per.items():
            tr, te = row["final_train_ll"], row["final_test_ll"]
            print(f"{scheme:12s} {method:9s} {tr['mean']:9.4f} ± {tr['sd']:.4f} {te['mean']:9.4f} ± {te['sd']:.4f}")
    for scheme, s in result["psmc_bridges_summary"].items():
        if s["mean"] is not None:
            print(f"PSMC bridges, {scheme}: mean {s['mean']:.2f}, max {s['max']}, first 10 updates {s['first_10_mean']:.1f}")
    print(f"total {result['config']['total_seconds']:.1f}s; wrote {args.out}/vbm_learning_rates{{.json,.png,_betas.png}}")
    return result


if __name__ == "__main__":
    main()
