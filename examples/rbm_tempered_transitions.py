"""RBM with 10 hidden units on MNIST: SAP vs Trans-SAP vs exact ML, pseudo-likelihood and MCMC-MLE.

Reproduces the first experiment of Salakhutdinov (2009), *Learning in Markov random
fields using tempered transitions*, NIPS 22, section 4.1, at the paper's settings: a
restricted Boltzmann machine small enough (10 hidden units, :math:`2^{10}` hidden
configurations) that the exact log-likelihood :math:`\\log p(v) = -F(v) - \\log Z` is
computable (``ui.exact`` enumerates the hidden states and sums the 784 visible units
analytically), trained on binarized MNIST by

* **SAP** (``ui.learn.pcd``): 100 persistent chains, one block-Gibbs sweep per update;
* **Trans-SAP** (``ui.learn.trans_sap``): SAP plus, in the last ``--tt-gibbs`` Gibbs
  steps only (the paper: the last 50,000), one tempered-transitions run of every chain
  after every 200 Gibbs updates, 50 inverse temperatures uniform from 0.9 to 1;
  parameters are updated after each Gibbs update, never during a TT run;
* **exact ML** (``ui.learn.exact_ml``): the exact gradient of the minibatch
  log-likelihood ("exactly the same learning schedule");
* **PL**: maximum pseudo-likelihood of the visible marginal :math:`p(v) \\propto
  e^{-F(v)}` (the hidden layer summed out): :math:`\\sum_i \\log \\sigma(F(v^{(i)}) -
  F(v))` with :math:`v^{(i)}` = ``v`` with pixel ``i`` flipped, all 784 flips of a
  minibatch at once (checked against ``ui.learn.pseudo_log_likelihood`` of the
  free-energy model at start-up);
* **MCMC-MLE** (``ui.learn.mcmc_mle``): importance-weighted particles re-sampled by 10
  Gibbs sweeps at the start of each round, a round ending after 100 updates (or when
  the L1 norm of the gradient is below 1e-3) -- the settings Asuncion et al. (2010)
  use for their MNIST RBM; the paper does not state its own.

Settings the paper states and we follow: minibatches of 100, 100 sample particles, one
Gibbs update per parameter update, learning rate 0.01 for the first 10,000 updates then
:math:`10 / (1000 + t)`, a budget of 100,000 Gibbs steps, TT only in the last 50,000
Gibbs steps, 200 Gibbs updates per TT run, 50 betas from 1 to 0.9, comparison at equal
numbers of Gibbs steps (Trans-SAP therefore makes fewer parameter updates: a TT run of
50 betas is 98 Gibbs sweeps here, so 83,536 updates; the paper counts 100 per run and
gets 83,333), 50,000 training images (the paper holds 10,000 of MNIST's 60,000 out for
validation; the file here has the same 50,000 / 10,000 / 10,000 split).  Settings we
chose: ``t`` restarts at the switch (so the schedule is continuous, 10/1000 = 0.01),
the initialisation (``W ~ N(0, 0.01^2)``, hidden biases 0, visible biases the logits of
the smoothed pixel marginals), and the MCMC-MLE settings above.  All learners share the
initial parameters and the minibatch order (the same ``ui.fit`` key).

Gibbs steps: SAP ``= updates``; Trans-SAP ``= updates + 2 (S - 1)`` per TT run (``S``
betas); MCMC-MLE ``= 10 x`` rounds; exact ML and PL use none (their x-axis is updates).
The summary numbers are the final evaluation and the mean over the evaluations in the
last 10% of each method's Gibbs steps (exact ML, PL: of its updates).

Every method checkpoints (``ui.fit(checkpoint_dir=...)``) every ``--eval-every``
updates into ``--out/ckpt_<method>`` and writes ``--out/<method>.json`` when it is
done; re-running the same command resumes an interrupted method and skips finished
ones (bit-identical to an uninterrupted run).  ``--quick`` (CI): 2k train / 500 test
images, a 600-step budget.  Writes ``rbm_tempered_transitions.json`` and ``.png`` into
``--out``; ``examples/rbm_tempered_transitions_summary.py`` combines seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.fit import fit
from ugm_infer.kernels.tempered_transitions import uniform_ladder
from ugm_infer.learn.base import Learner, apply_ascent, global_norm
from ugm_infer.models.rbm import rbm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_MNIST, load_binarized_mnist, provenance, tt_runs_before, updates_within_budget  # noqa: E402

NUM_VISIBLE = 784
DEFAULT_DATA = DEFAULT_MNIST
METHODS = ("exact ML", "SAP", "Trans-SAP", "PL", "MCMC-MLE")
SLUGS = {"exact ML": "exact_ml", "SAP": "sap", "Trans-SAP": "trans_sap", "PL": "pl", "MCMC-MLE": "mcmc_mle"}
SAMPLERS = ("SAP", "Trans-SAP", "MCMC-MLE")
NAME = "rbm_tempered_transitions"


def load_mnist(path: str, num_train: int | None, num_test: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Binarized MNIST as float32 ``(N, 784)`` arrays; random subsets (fixed seed) if asked."""
    train, test = load_binarized_mnist(path)
    rng = np.random.default_rng(seed)
    if num_train is not None and num_train < len(train):
        train = train[np.sort(rng.choice(len(train), num_train, replace=False))]
    if num_test is not None and num_test < len(test):
        test = test[np.sort(rng.choice(len(test), num_test, replace=False))]
    return train, test


# ----------------------------------------------------------------------------------
# pseudo-likelihood of the visible marginal of an RBM
# ----------------------------------------------------------------------------------
def rbm_pseudo_log_likelihood(params: dict, v: jax.Array) -> jax.Array:
    """``sum_i log p(v_i | v_-i)`` under :math:`p(v) \\propto e^{-F(v)}`, per row of ``v`` ``(B, n)``.

    Flipping pixel ``i`` (direction ``s_i = 1 - 2 v_i``) moves the hidden inputs
    ``a = v W + c`` by ``s_i W_i``, so
    :math:`F(v^{(i)}) - F(v) = -s_i b_i - \\sum_j [\\mathrm{softplus}(a_j + s_i W_{ij})
    - \\mathrm{softplus}(a_j)]` and :math:`\\log p(v_i \\mid v_{-i}) =
    -\\mathrm{softplus}(F(v) - F(v^{(i)}))`.
    """
    w, b, c = params["W"], params["b"], params["c"]
    a = v @ w + c
    s = 1.0 - 2.0 * v
    a_flip = a[:, None, :] + s[:, :, None] * w[None]
    delta = -(s * b) - jnp.sum(jax.nn.softplus(a_flip) - jax.nn.softplus(a)[:, None, :], axis=-1)
    return -jnp.sum(jax.nn.softplus(-delta), axis=-1)


class PLState(NamedTuple):
    """State of :func:`rbm_pseudo_likelihood`."""

    params: Any
    opt_state: Any
    step: jax.Array


class PLInfo(NamedTuple):
    """grad_norm: norm of the ascent direction; pseudo_log_likelihood: batch mean before the update."""

    grad_norm: jax.Array
    pseudo_log_likelihood: jax.Array


def rbm_pseudo_likelihood(model, optimizer) -> Learner:
    """Maximum pseudo-likelihood of an RBM's visible marginal (a :class:`ui.learn.Learner`)."""

    def objective(params, batch):
        return jnp.mean(rbm_pseudo_log_likelihood(params, batch["v"]))

    def init(rng_key, params, data=None):
        del rng_key, data
        return PLState(params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def step(rng_key, state, batch):
        del rng_key
        value, ascent = jax.value_and_grad(objective)(state.params, batch)
        params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, state.params)
        return PLState(params, opt_state, state.step + 1), PLInfo(global_norm(ascent), value)

    return Learner(init, step, model, "rbm_pseudo_likelihood", ("v",))


def check_pseudo_likelihood_against_library() -> float:
    """Max abs difference between :func:`rbm_pseudo_log_likelihood` and the library's generic PL."""
    small = rbm(7, 3)
    params = small.init_params(jax.random.key(0), 1.0)
    free_model = ui.EnergyModel(lambda p, x: small.free_energy(p, x["v"]), {"v": ui.Binary((7,))})
    v = jnp.asarray(np.random.default_rng(0).integers(0, 2, (6, 7)), jnp.float32)
    ref = ui.learn.pseudo_log_likelihood(free_model, params, {"v": v})
    err = float(jnp.max(jnp.abs(ref - rbm_pseudo_log_likelihood(params, v))))
    if not err < 1e-4:
        raise RuntimeError(f"pseudo-likelihood check failed: max abs difference {err}")
    return err


# ----------------------------------------------------------------------------------
# budgets in Gibbs steps
# ----------------------------------------------------------------------------------
def tt_sweeps(args) -> int:
    """Gibbs sweeps of one TT run: down and up through the ``S - 1`` tempered rungs."""
    return 2 * (args.num_betas - 1)


def trans_sap_updates(args) -> int:
    """Largest number of Trans-SAP updates whose Gibbs steps (updates + TT sweeps) fit the budget."""
    return updates_within_budget(args.gibbs_budget, args.tt_start, args.gibbs_per_tt, tt_sweeps(args))


def num_updates(name: str, args) -> int:
    return trans_sap_updates(args) if name == "Trans-SAP" else args.gibbs_budget


def gibbs_steps(name: str, updates: np.ndarray, steps: dict, args) -> list | None:
    """Gibbs steps spent after each entry of ``updates`` (``None`` for methods that do not sample)."""
    u = np.asarray(updates, np.int64)
    if name == "SAP":
        return u.tolist()
    if name == "Trans-SAP":
        return (u + tt_sweeps(args) * tt_runs_before(u, args.tt_start, args.gibbs_per_tt)).tolist()
    if name == "MCMC-MLE":
        resampled = np.asarray(steps["resampled"], np.int64)  # one entry per update
        cum = np.concatenate([[0], np.cumsum(resampled)]) * args.mcmc_steps
        return cum[u].tolist()
    return None


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


# ----------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------
def make_learner(name: str, model, args):
    opt = optax.sgd(ui.learn.constant_then_robbins_monro(args.lr, args.constant_updates, 10.0, 1000.0))
    if name == "exact ML":
        return ui.learn.exact_ml(model, opt, visible="v")
    if name == "SAP":
        return ui.learn.pcd(model, opt, num_particles=args.num_chains, num_sweeps=1, visible="v")
    if name == "Trans-SAP":
        return ui.learn.trans_sap(
            model,
            opt,
            num_particles=args.num_chains,
            betas=uniform_ladder(args.num_betas, args.beta_min),
            gibbs_per_tt=args.gibbs_per_tt,
            tt_start=args.tt_start,
            visible="v",
        )
    if name == "PL":
        return rbm_pseudo_likelihood(model, opt)
    if name == "MCMC-MLE":
        return ui.learn.mcmc_mle(
            model,
            None,
            opt,
            num_particles=args.num_chains,
            num_mcmc_steps=args.mcmc_steps,
            max_inner_steps=args.mcmc_max_inner,
            visible="v",
        )
    raise ValueError(f"unknown method {name!r}")


def run_method(name: str, model, params0, train, test, args) -> dict:
    """Train one method (resuming its checkpoint if any) and return its curve and summary."""
    slug = SLUGS[name]
    steps_per_epoch = len(train) // args.batch_size
    updates = num_updates(name, args)
    eval_every = max(1, args.eval_every // steps_per_epoch)
    t = time.perf_counter()
    res = fit(
        make_learner(name, model, args),
        jax.random.key(args.seed + 1000),
        {"v": train},
        params=params0,
        num_epochs=math.ceil(updates / steps_per_epoch),
        batch_size=args.batch_size,
        eval_every=eval_every,
        eval_data={"v": test},
        max_steps=updates,
        progress=args.progress,
        checkpoint_dir=os.path.join(args.out, f"ckpt_{slug}"),
        checkpoint_every=eval_every * steps_per_epoch,
        step_info=True,  # every update's info: the counts below use all of them
    )
    ev = res.history["evaluations"]
    steps = res.history["steps"]
    curve = {
        "step": np.asarray(ev["step"]).tolist(),
        "gibbs_steps": gibbs_steps(name, ev["step"], steps, args),
        "train_ll": np.asarray(ev["train_log_likelihood"]).tolist(),
        "test_ll": np.asarray(ev["eval_log_likelihood"]).tolist(),
        "wall_time": np.asarray(ev["wall_time"]).tolist(),
    }
    x = np.asarray(curve["gibbs_steps"] if curve["gibbs_steps"] is not None else curve["step"], np.float64)
    # the last 10% of the method's own x-axis: the Gibbs-step budget for SAP and Trans-SAP, the
    # updates for exact ML and PL; MCMC-MLE spends only 10 sweeps per round, far less than the budget
    tail = x >= 0.9 * x[-1]
    out = {
        "curve": curve,
        "final": {
            "train_ll": curve["train_ll"][-1],
            "test_ll": curve["test_ll"][-1],
            "train_ll_tail_mean": float(np.mean(np.asarray(curve["train_ll"])[tail])),
            "test_ll_tail_mean": float(np.mean(np.asarray(curve["test_ll"])[tail])),
            "tail_evaluations": int(tail.sum()),
            "updates": int(curve["step"][-1]),
            "gibbs_steps": None if curve["gibbs_steps"] is None else int(curve["gibbs_steps"][-1]),
        },
        "timing": {
            "train_seconds": float(res.history["timing"]["train_seconds"]),
            "compile_seconds": float(res.history["timing"]["compile_seconds"]),
            "eval_seconds": float(res.history["timing"]["eval_seconds"]),
            "this_call_seconds": time.perf_counter() - t,
        },
        "tt_acceptance": tt_acceptance(steps) if name == "Trans-SAP" else None,
    }
    if name == "MCMC-MLE":
        out["mcmc_mle_rounds"] = int(np.sum(steps["resampled"]))
    return out


def run(args, argv=None) -> dict:
    train, test = load_mnist(args.data, args.num_train, args.num_test, args.seed)
    model = rbm(NUM_VISIBLE, args.num_hidden)
    params0 = model.init_params(jax.random.key(args.seed), 0.01, data=train)
    config = {
        "data": os.path.abspath(args.data),
        "num_train": len(train),
        "num_test": len(test),
        "num_hidden": args.num_hidden,
        "gibbs_budget": args.gibbs_budget,
        "updates": {m: num_updates(m, args) for m in args.methods},
        "batch_size": args.batch_size,
        "num_chains": args.num_chains,
        "learning_rate": f"{args.lr} for T={args.constant_updates} updates, then 10 / (1000 + t - T)",
        "tt_start": args.tt_start,
        "tt_gibbs": args.tt_gibbs,
        "gibbs_per_tt": args.gibbs_per_tt,
        "tt_sweeps_per_run": tt_sweeps(args),
        "betas": f"{args.num_betas} uniform in [{args.beta_min}, 1]",
        "mcmc_mle": f"{args.mcmc_steps} Gibbs sweeps per round, rounds of at most {args.mcmc_max_inner} updates",
        "eval_every_updates": max(1, args.eval_every // (len(train) // args.batch_size)) * (len(train) // args.batch_size),
        "seed": args.seed,
        "quick": args.quick,
        "methods": list(args.methods),
        "pl_check_max_abs_error": check_pseudo_likelihood_against_library(),
        **provenance(argv, __file__),
    }
    curves, finals, timing, extra, acceptance = {}, {}, {}, {}, None
    for name in args.methods:
        path = os.path.join(args.out, f"{SLUGS[name]}.json")
        if os.path.isfile(path):
            with open(path) as f:
                done = json.load(f)
            if done["config_key"] != config_key(args, name):
                raise SystemExit(f"error: {path} was made with other settings; use another --out or delete it")
            print(f"{name}: already done ({path})", flush=True)
        else:
            done = run_method(name, model, params0, train, test, args)
            done["config_key"] = config_key(args, name)
            done["commit"] = config["commit"]
            with open(path + ".tmp", "w") as f:
                json.dump(done, f)
            os.replace(path + ".tmp", path)
        curves[name], finals[name], timing[name] = done["curve"], done["final"], done["timing"]
        if name == "Trans-SAP":
            acceptance = done["tt_acceptance"]
        if "mcmc_mle_rounds" in done:
            extra["mcmc_mle_rounds"] = done["mcmc_mle_rounds"]
        c = done["curve"]
        print(
            f"{name:10s} train LL {c['train_ll'][0]:9.3f} -> {c['train_ll'][-1]:9.3f}  test LL -> {c['test_ll'][-1]:9.3f}"
            f"  ({done['timing']['train_seconds']:.0f}s training, commit {done.get('commit', '?')})",
            flush=True,
        )
    gaps = {}
    if "exact ML" in finals:
        for name in finals:
            if name != "exact ML":
                gaps[name] = {
                    k: finals[name][k] - finals["exact ML"][k]
                    for k in ("train_ll", "test_ll", "train_ll_tail_mean", "test_ll_tail_mean")
                }
    config.update(extra)
    return {
        "config": config,
        "curves": curves,
        "final": finals,
        "gap_to_exact_ml": gaps,
        "tt_acceptance": acceptance,
        "timing": timing,
    }


def config_key(args, name: str) -> dict:
    """The settings a finished method's result depends on (a rerun must match them)."""
    keys = ("seed", "gibbs_budget", "num_train", "num_test", "num_hidden", "batch_size", "num_chains", "lr")
    keys += ("constant_updates", "eval_every")
    if name == "Trans-SAP":
        keys += ("tt_start", "gibbs_per_tt", "num_betas", "beta_min")
    if name == "MCMC-MLE":
        keys += ("mcmc_steps", "mcmc_max_inner")
    return {k: getattr(args, k) for k in keys}


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = {"exact ML": "k", "SAP": "C0", "Trans-SAP": "C3", "PL": "C2", "MCMC-MLE": "C4"}
    for name, c in result["curves"].items():
        x = c["gibbs_steps"] if c.get("gibbs_steps") is not None else c["step"]
        for ax, key in zip(axes, ("train_ll", "test_ll")):
            ax.plot(x, c[key], color=colours.get(name, "C5"), lw=1.5, label=name)
    cfg = result["config"]
    lows = [np.percentile(c[k], 10) for c in result["curves"].values() for k in ("train_ll", "test_ll")]
    highs = [max(c[k]) for c in result["curves"].values() for k in ("train_ll", "test_ll")]
    for ax, what in zip(axes, ("training", "test")):
        ax.axvline(cfg["gibbs_budget"] - cfg["tt_gibbs"], color="C3", ls=":", lw=1, label="TT starts")
        ax.set_xlabel("Gibbs steps (exact ML, PL: parameter updates)")
        ax.set_ylabel(f"average {what} log-likelihood (exact), nats")
        if lows and highs:
            ax.set_ylim(min(lows) - 2.0, max(highs) + 2.0)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    acc = result.get("tt_acceptance")
    acc_txt = f", TT acceptance {acc['mean']:.2f}" if acc and acc["num_runs"] else ""
    fig.suptitle(
        f"RBM 784-{cfg['num_hidden']} on binarized MNIST ({cfg['num_train']} train / {cfg['num_test']} test), "
        f"seed {cfg['seed']}{acc_txt}, commit {cfg.get('commit', '?')}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI setting: 2k train / 500 test images, a 600-step budget")
    p.add_argument("--data", default=DEFAULT_DATA, help=f"binarized MNIST .npz (default {DEFAULT_DATA})")
    p.add_argument("--out", default=os.path.join("out", NAME))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-train", type=int, default=None, help="training images (default: all 50k; quick 2k)")
    p.add_argument("--num-test", type=int, default=None, help="test images (default all 10k; quick 500)")
    p.add_argument(
        "--gibbs-budget", "--updates", type=int, default=None, help="Gibbs steps (= SAP updates; default 100000; quick 600)"
    )
    p.add_argument("--eval-every", type=int, default=None, help="updates between evaluations (rounded to epochs)")
    p.add_argument("--num-hidden", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--num-chains", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--constant-updates", type=int, default=None, help="updates at --lr (default budget // 10)")
    p.add_argument("--tt-gibbs", type=int, default=None, help="Gibbs steps at the end with TT (default budget // 2)")
    p.add_argument("--tt-start", type=int, default=None, help="first TT update (default budget - tt_gibbs)")
    p.add_argument("--gibbs-per-tt", type=int, default=None, help="Gibbs updates per TT run (default 200; quick 100)")
    p.add_argument("--num-betas", type=int, default=50)
    p.add_argument("--beta-min", type=float, default=0.9)
    p.add_argument("--mcmc-steps", type=int, default=10, help="MCMC-MLE: Gibbs sweeps per round")
    p.add_argument("--mcmc-max-inner", type=int, default=100, help="MCMC-MLE: most updates per round")
    p.add_argument("--methods", nargs="*", default=list(METHODS), help=f"subset of {list(METHODS)}")
    p.add_argument("--progress", default="off", choices=["auto", "on", "off"])
    p.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON in --out")
    args = p.parse_args(argv)
    if args.num_train is None:
        args.num_train = 2000 if args.quick else None
    if args.num_test is None:
        args.num_test = 500 if args.quick else None
    args.gibbs_budget = args.gibbs_budget or (600 if args.quick else 100_000)
    if args.gibbs_budget < 2:
        p.error("--gibbs-budget must be >= 2")
    if args.gibbs_per_tt is None:
        args.gibbs_per_tt = 100 if args.quick else 200
    if args.eval_every is None:
        args.eval_every = 60 if args.quick else 2500
    if args.constant_updates is None:
        args.constant_updates = args.gibbs_budget // 10
    if args.tt_gibbs is None:
        args.tt_gibbs = args.gibbs_budget // 2
    if args.tt_start is None:
        args.tt_start = args.gibbs_budget - args.tt_gibbs
    else:
        args.tt_gibbs = args.gibbs_budget - args.tt_start
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
    result = run(args, argv)
    result["config"]["total_seconds"] = time.perf_counter() - t
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, png_path)
    print(f"\n{'method':10s} {'train LL':>10s} {'test LL':>10s} {'gap train':>10s} {'gap test':>10s}  (last 10% of budget)")
    for name, row in result["final"].items():
        g = result["gap_to_exact_ml"].get(name, {})
        print(
            f"{name:10s} {row['train_ll_tail_mean']:10.3f} {row['test_ll_tail_mean']:10.3f} "
            f"{g.get('train_ll_tail_mean', float('nan')):+10.3f} {g.get('test_ll_tail_mean', float('nan')):+10.3f}"
        )
    acc = result["tt_acceptance"]
    if acc is not None:
        print(f"TT acceptance: {acc['mean']:.3f} over {acc['num_runs']} runs (x {args.num_chains} chains)")
    print(f"total {result['config']['total_seconds']:.1f}s; wrote {png_path} and .json")
    return result


if __name__ == "__main__":
    main()
