"""RBM with 10 hidden units on MNIST: SAP vs Trans-SAP vs exact maximum likelihood.

Reproduces the first experiment of Salakhutdinov (2009), *Learning in Markov random
fields using tempered transitions*, NIPS 22, section 4.1: a restricted Boltzmann
machine small enough (10 hidden units, :math:`2^{10}` hidden configurations) that the
exact log-likelihood :math:`\\log p(v) = -F(v) - \\log Z` is computable -- ``ui.exact``
enumerates the hidden states and sums the 784 visible units analytically -- trained
on binarized MNIST by

(a) **SAP** (stochastic approximation / persistent CD, ``ui.learn.pcd``): 100
    persistent chains, one block-Gibbs sweep per parameter update;
(b) **Trans-SAP** (``ui.learn.trans_sap``): the same, plus, in the second half of
    training only (``tt_start = num_updates // 2``), one tempered-transitions run
    of every chain after every 200 Gibbs updates, with 50 inverse temperatures
    uniform in ``[0.9, 1]`` (the paper's ladder);
(c) **exact ML** (``ui.learn.exact_ml``): the exact gradient of the minibatch
    log-likelihood (model term by enumeration) -- the reference the stochastic
    learners try to follow.

All three use the same initial parameters, the same minibatches (100 examples, same
order: same ``ui.fit`` key) and the same step sizes: 0.01 for the first
``--constant-updates`` updates (default: the first half), then :math:`10 / (1000 + t)`
with ``t`` counted from the switch (``ui.learn.constant_then_robbins_monro(0.01, T,
10, 1000)``; continuous at the switch).  Initial parameters: ``W ~ N(0, 0.01^2)``,
hidden biases 0, visible biases the logits of the (add-one smoothed) pixel marginals
of the training set (``RBM.init_params(..., data=train)``).

Settings that the paper states and we follow: 10 hidden units, exact log-likelihood,
Trans-SAP with 50 betas uniform in [0.9, 1], one TT run per 200 Gibbs updates, TT
only in the second half of training, learning rate 0.01 then decreasing as
``10 / (1000 + t)``.  Settings we chose (not checked against the paper's text): 100
persistent chains and minibatches of 100, the switch point of the schedule, the
initialisation, and the (much shorter) number of updates; the paper trains for far
longer on the whole training set (the file here has 50,000 train, 10,000 valid and
10,000 test images; the valid split is not used).

The x-axis is the number of parameter updates (= Gibbs updates of the persistent
chains; TT runs are not counted, as in the paper's figure).  The TT acceptance rate
(the paper reports about 0.8) is the mean of ``acceptance_probability`` over chains
and over the updates on which a TT run happened.

Run ``python examples/rbm_tempered_transitions.py --quick`` (CI, a few minutes on 2
loaded cores) or without ``--quick`` for the medium configuration.  Writes
``rbm_tempered_transitions.png`` and ``.json`` into ``--out`` (default
``out/rbm_tempered_transitions``).  Needs binarized MNIST (``--data``, default
``../shared/data/binarized_mnist.npz`` relative to the repository root, or in the folder
named by ``UGM_DATA``; not shipped with the repository): an ``.npz``
with bit-packed ``train`` and ``test`` arrays of 784 pixels.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import jax
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.fit import fit
from ugm_infer.kernels.tempered_transitions import uniform_ladder
from ugm_infer.models.rbm import rbm

NUM_VISIBLE = 784
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# binarized MNIST is not shipped with the repository: ../shared/data beside the repository root, or $UGM_DATA
DEFAULT_DATA = os.path.join(
    os.environ.get("UGM_DATA", os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))), "binarized_mnist.npz"
)
METHODS = ("exact ML", "SAP", "Trans-SAP")
NAME = "rbm_tempered_transitions"


def load_mnist(path: str, num_train: int | None, num_test: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Binarized MNIST as float32 ``(N, 784)`` arrays; random subsets (fixed seed) if asked.

    Raises ``FileNotFoundError`` with instructions when ``path`` does not exist.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"binarized MNIST not found at {path!r}; pass --data PATH to an .npz with bit-packed "
            "'train' and 'test' arrays of 784 pixels (np.packbits(x, axis=1))"
        )
    d = np.load(path)
    for k in ("train", "test"):
        if k not in d:
            raise ValueError(f"--data {path!r} has no '{k}' array (found {sorted(d.files)})")
    train = np.unpackbits(d["train"], axis=1, count=NUM_VISIBLE).astype(np.float32)
    test = np.unpackbits(d["test"], axis=1, count=NUM_VISIBLE).astype(np.float32)
    rng = np.random.default_rng(seed)
    if num_train is not None and num_train < len(train):
        train = train[np.sort(rng.choice(len(train), num_train, replace=False))]
    if num_test is not None and num_test < len(test):
        test = test[np.sort(rng.choice(len(test), num_test, replace=False))]
    return train, test


def make_learners(model, args) -> dict:
    """The three learners with identical optimizers (fresh schedule state each)."""

    def opt():
        return optax.sgd(ui.learn.constant_then_robbins_monro(args.lr, args.constant_updates, 10.0, 1000.0))

    learners = {
        "exact ML": ui.learn.exact_ml(model, opt(), visible="v"),
        "SAP": ui.learn.pcd(model, opt(), num_particles=args.num_chains, num_sweeps=1, visible="v"),
        "Trans-SAP": ui.learn.trans_sap(
            model,
            opt(),
            num_particles=args.num_chains,
            betas=uniform_ladder(args.num_betas, args.beta_min),
            gibbs_per_tt=args.gibbs_per_tt,
            tt_start=args.tt_start,
            visible="v",
        ),
    }
    return {k: v for k, v in learners.items() if k in args.methods}


def tt_acceptance(steps: dict) -> dict | None:
    """Mean TT acceptance probability over the updates on which a TT run happened."""
    ran_key = "kernel_info.extra_ran"
    acc_key = "kernel_info.extra.acceptance_probability"
    if ran_key not in steps or acc_key not in steps:
        return None
    ran = np.asarray(steps[ran_key]) > 0.5
    acc = np.asarray(steps[acc_key], dtype=np.float64)[ran]
    return {
        "mean": float(acc.mean()) if acc.size else float("nan"),
        "num_runs": int(ran.sum()),
        "steps": np.asarray(steps["step"])[ran].tolist(),
        "per_run": acc.tolist(),
    }


def run(args) -> dict:
    train, test = load_mnist(args.data, args.num_train, args.num_test, args.seed)
    model = rbm(NUM_VISIBLE, args.num_hidden)
    key_params, key_fit = jax.random.split(jax.random.key(args.seed))
    params0 = model.init_params(key_params, 0.01, data=train)
    steps_per_epoch = len(train) // args.batch_size
    num_epochs = math.ceil(args.updates / steps_per_epoch)
    eval_every = max(1, args.eval_every // steps_per_epoch)
    curves, finals, acceptance, timing = {}, {}, None, {}
    for name, learner in make_learners(model, args).items():
        t = time.perf_counter()
        res = fit(
            learner,
            key_fit,
            {"v": train},
            params=params0,
            num_epochs=num_epochs,
            batch_size=args.batch_size,
            eval_every=eval_every,
            eval_data={"v": test},
            max_steps=args.updates,
            progress=args.progress,
        )
        ev = res.history["evaluations"]
        curves[name] = {
            "step": np.asarray(ev["step"]).tolist(),
            "train_ll": np.asarray(ev["train_log_likelihood"]).tolist(),
            "test_ll": np.asarray(ev["eval_log_likelihood"]).tolist(),
            "wall_time": np.asarray(ev["wall_time"]).tolist(),
        }
        # the last 20% of the evaluations (at least one): the stochastic learners'
        # curves are noisy, a single final point would over-interpret that noise
        tail = max(1, len(ev["step"]) // 5)
        finals[name] = {
            "train_ll": float(ev["train_log_likelihood"][-1]),
            "test_ll": float(ev["eval_log_likelihood"][-1]),
            "train_ll_tail_mean": float(np.mean(ev["train_log_likelihood"][-tail:])),
            "test_ll_tail_mean": float(np.mean(ev["eval_log_likelihood"][-tail:])),
            "tail_evaluations": tail,
        }
        timing[name] = {
            "train_seconds": float(res.history["timing"]["train_seconds"]),
            "compile_seconds": float(res.history["timing"]["compile_seconds"]),
            "eval_seconds": float(res.history["timing"]["eval_seconds"]),
            "total_seconds": time.perf_counter() - t,
        }
        if name == "Trans-SAP":
            acceptance = tt_acceptance(res.history["steps"])
        print(
            f"{name:10s} train LL {ev['train_log_likelihood'][0]:9.3f} -> {ev['train_log_likelihood'][-1]:9.3f}  "
            f"test LL -> {ev['eval_log_likelihood'][-1]:9.3f}  ({timing[name]['total_seconds']:.1f}s, "
            f"compile {timing[name]['compile_seconds']:.1f}s)",
            flush=True,
        )
    gaps = {}
    if "exact ML" in finals:
        for name in finals:
            if name != "exact ML":
                gaps[name] = {
                    k: finals[name][k] - finals["exact ML"][k] for k in ("train_ll_tail_mean", "test_ll_tail_mean")
                }
    return {
        "config": {
            "data": os.path.abspath(args.data),
            "num_train": len(train),
            "num_test": len(test),
            "num_hidden": args.num_hidden,
            "updates": args.updates,
            "batch_size": args.batch_size,
            "num_chains": args.num_chains,
            "learning_rate": f"{args.lr} for T={args.constant_updates} updates, then 10 / (1000 + t - T)",
            "tt_start": args.tt_start,
            "gibbs_per_tt": args.gibbs_per_tt,
            "betas": f"{args.num_betas} uniform in [{args.beta_min}, 1]",
            "eval_every_updates": eval_every * steps_per_epoch,
            "seed": args.seed,
            "quick": args.quick,
            "methods": list(args.methods),
            "jax": jax.__version__,
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        },
        "curves": curves,
        "final": finals,
        "gap_to_exact_ml": gaps,
        "tt_acceptance": acceptance,
        "timing": timing,
    }


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = {"exact ML": "k", "SAP": "C0", "Trans-SAP": "C3"}
    for name, c in result["curves"].items():
        for ax, key in zip(axes, ("train_ll", "test_ll")):
            ax.plot(c["step"], c[key], color=colours.get(name, "C2"), lw=1.5, label=name)
    cfg = result["config"]
    lows = [min(c[k][len(c[k]) // 10 :]) for c in result["curves"].values() for k in ("train_ll", "test_ll")]
    highs = [max(c[k]) for c in result["curves"].values() for k in ("train_ll", "test_ll")]
    for ax, what in zip(axes, ("training", "test")):
        ax.axvline(cfg["tt_start"], color="C3", ls=":", lw=1, label="TT starts")
        ax.set_xlabel("parameter updates (= Gibbs updates of the persistent chains)")
        ax.set_ylabel(f"average {what} log-likelihood (exact), nats")
        if lows and highs:
            ax.set_ylim(min(lows) - 2.0, max(highs) + 2.0)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    acc = result.get("tt_acceptance")
    acc_txt = f", TT acceptance {acc['mean']:.2f}" if acc and acc["num_runs"] else ""
    fig.suptitle(
        f"RBM 784-{cfg['num_hidden']} on binarized MNIST ({cfg['num_train']} train / {cfg['num_test']} test), "
        f"{cfg['num_chains']} chains{acc_txt}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI setting: 2k train / 500 test images, 600 updates, TT every 100")
    p.add_argument("--data", default=DEFAULT_DATA, help=f"binarized MNIST .npz (default {DEFAULT_DATA})")
    p.add_argument("--out", default=os.path.join("out", NAME))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-train", type=int, default=None, help="training images (default: all of the train split; quick 2k)")
    p.add_argument("--num-test", type=int, default=None, help="test images (default all 10k; quick 500)")
    p.add_argument("--updates", type=int, default=None, help="parameter updates (default 20000; quick 600)")
    p.add_argument("--eval-every", type=int, default=None, help="updates between evaluations (rounded to epochs)")
    p.add_argument("--num-hidden", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--num-chains", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--constant-updates", type=int, default=None, help="updates at --lr (default updates // 2)")
    p.add_argument("--tt-start", type=int, default=None, help="first TT update (default updates // 2)")
    p.add_argument("--gibbs-per-tt", type=int, default=None, help="Gibbs updates per TT run (default 200; quick 100)")
    p.add_argument("--num-betas", type=int, default=50)
    p.add_argument("--beta-min", type=float, default=0.9)
    p.add_argument("--methods", nargs="*", default=list(METHODS), help="subset of: 'exact ML' SAP Trans-SAP")
    p.add_argument("--progress", default="off", choices=["auto", "on", "off"])
    p.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON in --out")
    args = p.parse_args(argv)
    if args.num_train is None:
        args.num_train = 2000 if args.quick else None
    if args.num_test is None:
        args.num_test = 500 if args.quick else None
    args.updates = args.updates or (600 if args.quick else 20000)
    if args.updates < 2:
        p.error("--updates must be >= 2")
    if args.gibbs_per_tt is None:
        args.gibbs_per_tt = 100 if args.quick else 200
    if args.eval_every is None:
        args.eval_every = max(1, args.updates // 30)
    if args.constant_updates is None:
        args.constant_updates = args.updates // 2
    if args.tt_start is None:
        args.tt_start = args.updates // 2
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        p.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    args.progress = {"auto": "auto", "on": True, "off": False}[args.progress]
    return args


def main(argv=None) -> dict:
    """Command line entry point (see the module docstring); returns the result dict."""
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, f"{NAME}.json")
    png_path = os.path.join(args.out, f"{NAME}.png")
    if args.replot:
        with open(json_path) as f:
            result = json.load(f)
        plot(result, png_path)
        return result
    if not os.path.isfile(args.data):
        raise SystemExit(
            f"error: binarized MNIST not found at {args.data!r}; pass --data PATH (an .npz with "
            "bit-packed 'train' and 'test' arrays of 784 pixels)"
        )
    t = time.perf_counter()
    result = run(args)
    result["config"]["total_seconds"] = time.perf_counter() - t
    result["config"]["command"] = f"python examples/{NAME}.py " + " ".join(argv if argv is not None else sys.argv[1:])
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, png_path)
    tail = next(iter(result["final"].values()))["tail_evaluations"] if result["final"] else 0
    print(f"\n{'method':10s} {'train LL':>10s} {'test LL':>10s}   (mean of the last {tail} evaluations)")
    for name, row in result["final"].items():
        print(f"{name:10s} {row['train_ll_tail_mean']:10.3f} {row['test_ll_tail_mean']:10.3f}")
    acc = result["tt_acceptance"]
    if acc is not None:
        print(f"TT acceptance: {acc['mean']:.3f} over {acc['num_runs']} runs (x {args.num_chains} chains)")
    print(f"total {result['config']['total_seconds']:.1f}s; wrote {png_path} and .json")
    return result


if __name__ == "__main__":
    main()
