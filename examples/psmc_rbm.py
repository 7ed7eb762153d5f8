"""Persistent SMC versus PCD, PT, TT and standard SMC on an MNIST RBM with an exact likelihood.

The second experiment of Xiong, Szedmak and Piater, *Learning undirected graphical
models using persistent sequential Monte Carlo* (section 6.2): a restricted Boltzmann
machine on binarized MNIST, learned by

* **PSMC** (``ui.learn.psmc``): at each update half of the particles are kept and
  bridged from :math:`p(x;\\theta_t)` to :math:`p(x;\\theta_{t+1})` through
  :math:`p_t^{1-\\beta} p_{t+1}^{\\beta}`, the other half re-initialised uniformly and
  tempered from the uniform to :math:`p(x;\\theta_{t+1})`, the next :math:`\\beta`
  found by bisection so that the ESS of each half stays at ``sigma* = 0.9``;
* **SMC** (``ui.learn.smc_learner``): adaptive tempered SMC from the uniform
  distribution to :math:`p(x;\\theta_{t+1})` at every update (same ESS rule);
* **PCD-1** and **PCD-H** (``ui.learn.pcd``, 1 and ``H`` Gibbs sweeps per update);
* **PT** (``ui.learn.pt_sap``, ``H`` inverse temperatures uniform in (0, 1]);
* **TT** (SAP with a tempered-transitions run of ``H`` temperatures uniform in
  [0.9, 1] at every update);
* **exact ML** (``ui.learn.exact_ml``), the reference.

The paper's "medium-scale" RBM has 10 hidden units, so its log-likelihood is exact
(``ui.exact`` sums the 784 visible units for each of the 1,024 hidden states); we use
that one.  Settings from the paper: minibatches of 200, 200 particles, ``sigma* = 0.9``,
the learning rate :math:`\\eta_t = 1/(100 + t)` (we read ``t`` as the epoch, as in the
paper's full-batch VBM experiment where an epoch is an update; ``--lr-per update``
counts updates instead, which in our short runs leaves the step sizes too small to learn
much), ``H = 100`` for PCD-H, PT and TT (the paper sets ``H`` to PSMC's mean number of
bridges, about 100 for this model, as ours measures; ``--num-betas``).  What we shrank
to fit two shared CPU cores (defaults): 10 epochs of a random 10,000 of the training
images (500 updates; the paper: 1,000 epochs of 60,000, i.e.
300,000 updates) and a random 2,000 of the test images.  Initial parameters (ours):
``W ~ N(0, 0.01^2)``, zero hidden biases, visible biases the logits of the smoothed
pixel marginals; the same for every method, as are the minibatches.

Every method checkpoints into ``--out/ckpt_<method>`` (``ui.fit``) and writes
``--out/<method>.json`` when done; re-running resumes.  ``--quick`` (CI): 1,000
images, 2 epochs, exact ML / PCD-1 / PSMC with ``H = 5``.  Writes ``psmc_rbm.json`` and
``psmc_rbm.png`` into ``--out``.
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

import ugm_infer as ui
from ugm_infer.fit import fit
from ugm_infer.models.rbm import rbm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_MNIST, load_binarized_mnist, provenance  # noqa: E402

METHODS = ("exact ML", "PCD-1", "PCD-H", "PT", "TT", "SMC", "PSMC")
QUICK_METHODS = ("exact ML", "PCD-1", "PSMC")
SLUGS = {m: m.lower().replace(" ", "_").replace("-", "_") for m in METHODS}


def learning_rate(args, steps_per_epoch: int):
    r""":math:`\eta = a / (b + t)` with ``t`` the epoch (``--lr-per update``: the update)."""
    if args.lr_per == "update":
        return ui.learn.robbins_monro(args.lr_a, args.lr_b)

    def schedule(count):
        return args.lr_a / (args.lr_b + (count // steps_per_epoch).astype(jnp.float32))

    return schedule


def make_learner(name: str, model, args, steps_per_epoch: int):
    opt = optax.sgd(learning_rate(args, steps_per_epoch))
    n, h = args.num_particles, args.num_betas
    if name == "exact ML":
        return ui.learn.exact_ml(model, opt, visible="v")
    if name == "PCD-1":
        return ui.learn.pcd(model, opt, num_particles=n, num_sweeps=1, visible="v")
    if name == "PCD-H":
        return ui.learn.pcd(model, opt, num_particles=n, num_sweeps=h, visible="v")
    if name == "PT":
        return ui.learn.pt_sap(model, opt, n, betas=np.linspace(1.0 / h, 1.0, h), visible="v")
    if name == "TT":
        kernel = ui.learn.tempered_transitions_kernel(model, np.linspace(0.9, 1.0, h))
        return ui.learn.sap(model, kernel, opt, n, name="tt_sap", visible="v")
    if name == "SMC":
        return ui.learn.smc_learner(
            model, None, opt, n, ess_threshold=args.ess_threshold, max_bridges=args.max_bridges, visible="v"
        )
    if name == "PSMC":
        return ui.learn.psmc(
            model,
            None,
            opt,
            n,
            ess_threshold=args.ess_threshold,
            max_bridges=args.max_bridges,
            reinit_fraction=0.5,
            visible="v",
        )
    raise ValueError(f"unknown method {name!r}")


def run_method(name, model, params0, train, test, args) -> dict:
    steps_per_epoch = len(train) // args.batch_size
    t = time.perf_counter()
    res = fit(
        make_learner(name, model, args, steps_per_epoch),
        jax.random.key(args.seed + 1000),
        {"v": train},
        params=params0,
        num_epochs=args.epochs,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        eval_data={"v": test},
        progress=False,
        checkpoint_dir=os.path.join(args.out, f"ckpt_{SLUGS[name]}"),
        checkpoint_every=args.eval_every * steps_per_epoch,
        step_info=True,  # every update's info: the counts below use all of them
    )
    ev, steps = res.history["evaluations"], res.history["steps"]
    out = {
        "curve": {
            "epoch": np.asarray(ev["epoch"]).tolist(),
            "train_ll": np.asarray(ev["train_log_likelihood"]).tolist(),
            "test_ll": np.asarray(ev["eval_log_likelihood"]).tolist(),
            "wall_time": np.asarray(ev["wall_time"]).tolist(),
        },
        "train_seconds": float(res.history["timing"]["train_seconds"]),
        "compile_seconds": float(res.history["timing"]["compile_seconds"]),
        "this_call_seconds": time.perf_counter() - t,
    }
    if "num_bridges" in steps:
        nb = np.asarray(steps["num_bridges"], np.float64)
        out["bridges"] = {"mean": float(nb.mean()), "max": int(nb.max()), "per_epoch_mean": []}
        out["bridges"]["per_epoch_mean"] = [
            float(nb[e * steps_per_epoch : (e + 1) * steps_per_epoch].mean()) for e in range(args.epochs)
        ]
        if "capped" in steps:
            out["bridges"]["capped_updates"] = int(np.sum(steps["capped"]))
    return out


def run(args, argv) -> dict:
    train_all, test_all = load_binarized_mnist(args.data)
    rng = np.random.default_rng(args.seed)
    train = train_all[np.sort(rng.choice(len(train_all), args.num_train, replace=False))]
    test = test_all[np.sort(rng.choice(len(test_all), args.num_test, replace=False))]
    model = rbm(784, args.num_hidden)
    params0 = model.init_params(jax.random.key(args.seed), 0.01, data=train)
    result = {
        "config": {**{k: v for k, v in vars(args).items() if k != "data"}, **provenance(argv, __file__)},
        "methods": {},
    }
    for name in args.methods:
        path = os.path.join(args.out, f"{SLUGS[name]}.json")
        if os.path.isfile(path):
            with open(path) as f:
                done = json.load(f)
        else:
            done = run_method(name, model, params0, train, test, args)
            done["commit"] = result["config"]["commit"]
            with open(path + ".tmp", "w") as f:
                json.dump(done, f)
            os.replace(path + ".tmp", path)
        result["methods"][name] = done
        c = done["curve"]
        extra = f", bridges {done['bridges']['mean']:.1f} per update" if "bridges" in done else ""
        print(
            f"{name:9s} train LL {c['train_ll'][0]:9.3f} -> {c['train_ll'][-1]:9.3f}, test {c['test_ll'][-1]:9.3f} "
            f"({done['train_seconds']:.0f}s training{extra})",
            flush=True,
        )
    if "exact ML" in result["methods"]:
        ref = result["methods"]["exact ML"]["curve"]
        result["gap_to_exact_ml"] = {
            m: {k: r["curve"][k][-1] - ref[k][-1] for k in ("train_ll", "test_ll")}
            for m, r in result["methods"].items()
            if m != "exact ML"
        }
    return result


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exact = result["methods"].get("exact ML")
    rows = 2 if exact is not None else 1
    fig, axes = plt.subplots(rows, 2, figsize=(11, 4 * rows), squeeze=False)
    for i, (name, r) in enumerate(result["methods"].items()):
        c = r["curve"]
        style = {"color": "k", "lw": 2} if name == "exact ML" else {"color": f"C{i}"}
        for col, key in enumerate(("train_ll", "test_ll")):
            axes[0, col].plot(c["epoch"], c[key], label=name, **style)
            if exact is not None and len(c[key]) == len(exact["curve"][key]):
                gap = np.asarray(c[key]) - np.asarray(exact["curve"][key])  # same evaluation epochs
                axes[1, col].plot(c["epoch"], gap, label=name, **style)
    for col, what in enumerate(("training", "test")):
        ax = axes[0, col]
        ax.set_ylabel(f"average {what} log-likelihood (exact), nats")
        lows = [np.percentile(r["curve"]["train_ll"], 20) for r in result["methods"].values()]
        highs = [max(r["curve"]["test_ll"] + r["curve"]["train_ll"]) for r in result["methods"].values()]
        ax.set_ylim(min(lows) - 3, max(highs) + 1)
        if rows == 2:
            axes[1, col].set_ylabel(f"{what} log-likelihood minus exact ML's, nats")
        for a in axes[:, col]:
            a.set_xlabel("epoch")
            a.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    cfg = result["config"]
    fig.suptitle(
        f"RBM 784-{cfg['num_hidden']}, {cfg['num_train']} MNIST images, H = {cfg['num_betas']}, "
        f"commit {cfg.get('commit', '?')}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI: 1,000 images, 2 epochs, exact ML / PCD-1 / PSMC, H = 5")
    p.add_argument("--data", default=DEFAULT_MNIST)
    p.add_argument("--out", default="out/psmc_rbm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-hidden", type=int, default=10, help="hidden units (the paper's medium RBM: 10)")
    p.add_argument("--num-train", type=int, default=None, help="training images (default 10,000; paper 60,000)")
    p.add_argument("--num-test", type=int, default=None, help="test images (default 2,000)")
    p.add_argument("--epochs", type=int, default=None, help="epochs (default 10; paper 1,000)")
    p.add_argument("--eval-every", type=int, default=None, help="epochs between evaluations (default 1)")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--num-particles", type=int, default=200)
    p.add_argument("--num-betas", type=int, default=None, help="H for PCD-H, PT, TT (default 100; quick 5)")
    p.add_argument("--max-bridges", type=int, default=None, help="cap on PSMC's and SMC's bridges per update (default 1000)")
    p.add_argument("--ess-threshold", type=float, default=0.9)
    p.add_argument("--lr-a", type=float, default=1.0, help="eta_t = a / (b + t)")
    p.add_argument("--lr-b", type=float, default=100.0)
    p.add_argument("--lr-per", default="epoch", choices=["epoch", "update"], help="what t counts in a / (b + t)")
    p.add_argument("--methods", nargs="*", default=None, help=f"subset of {list(METHODS)}")
    p.add_argument("--replot", action="store_true")
    args = p.parse_args(argv)
    q = args.quick
    args.num_train = args.num_train or (1000 if q else 10_000)
    args.num_test = args.num_test or (300 if q else 2000)
    args.epochs = args.epochs or (2 if q else 10)
    args.eval_every = args.eval_every or 1
    args.num_betas = args.num_betas or (5 if q else 100)
    args.max_bridges = args.max_bridges or 1000
    args.methods = list(args.methods or (QUICK_METHODS if q else METHODS))
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        p.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    if args.epochs % args.eval_every:
        p.error("--epochs must be a multiple of --eval-every")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    json_path, png_path = os.path.join(args.out, "psmc_rbm.json"), os.path.join(args.out, "psmc_rbm.png")
    if args.replot:
        with open(json_path) as f:
            result = json.load(f)
    else:
        t = time.perf_counter()
        result = run(args, argv)
        result["config"]["total_seconds"] = time.perf_counter() - t
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
    plot(result, png_path)
    print(f"wrote {json_path} and {png_path}")
    return result


if __name__ == "__main__":
    main()
