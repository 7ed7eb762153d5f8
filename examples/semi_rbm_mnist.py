"""Semi-restricted Boltzmann machine on MNIST images: SAP versus Trans-SAP, AIS test log-probability.

The main experiment of Salakhutdinov (2009), *Learning in Markov random fields using
tempered transitions*, section 4.1: a semi-restricted Boltzmann machine (an RBM whose
visible units also form a fully connected pairwise MRF, ``ui.models.semi_rbm``) with
500 hidden units, trained by

* **SAP** (``ui.learn.pcd``): 100 persistent chains, one Gibbs sweep (every visible
  unit in turn, then the hidden layer) per parameter update;
* **Trans-SAP** (``ui.learn.trans_sap``): the same, plus, in the last
  ``--tt-gibbs`` Gibbs steps (the paper: the last 100,000 of 200,000), one
  tempered-transitions run of every chain after every 1,000 Gibbs updates, 500 inverse
  temperatures uniform from 1 to 0.9 (the paper reports an acceptance rate of about 0.7);

both with minibatches of 100, the learning rate 0.05 for 50,000 updates and then
:math:`100 / (2000 + t)` (``t`` restarting at the switch: continuous, 100/2000 = 0.05),
the same initial parameters and minibatch order, and the same budget of Gibbs steps
(a TT run of ``S`` betas is ``2 (S - 1)`` sweeps; Trans-SAP therefore makes fewer
updates).  Evaluation: the average test log-probability
:math:`-F(v) - \\log \\hat Z` with the free energy :math:`F` exact (hidden units summed out)
and :math:`\\log Z` by AIS (``ui.smc.ais_log_likelihood``: base-rate base fitted to the
training images, hidden layer summed out along the path), ``--ais-repeats`` independent
AIS estimates of ``--ais-runs`` runs each for the error bar; AIS is first checked
against the exact ``log Z`` of a small semi-RBM (``check_ais_against_exact``).

**Images only.**  The paper models images *and labels* (and reports -87.12 nats for SAP,
-85.91 for Trans-SAP, and the classification error); the labels are not in the data
folder here, so the model is over the 784 pixels alone and there is no classification
error.  Its log-probabilities are therefore not directly comparable with the paper's
(they omit the label term and are of a different joint distribution).

Each method checkpoints (``ui.fit(checkpoint_dir=...)``) into ``--out/ckpt_<method>``
and writes ``--out/<method>.json``, and each AIS estimate is saved as it finishes;
rerunning resumes; ``kill -STOP``/``-CONT`` are
harmless.  ``--quick`` (CI): 7x7 down-sampled images, 10 hidden units, a 300-step
budget, small AIS.

Usage::

    python examples/semi_rbm_mnist.py --quick --out out/semi_rbm_quick
    python examples/semi_rbm_mnist.py --out out/semi_rbm            # the paper's budget
    python examples/semi_rbm_mnist.py --out out/semi_rbm --gibbs-budget 20000   # a shorter run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.fit import fit
from ugm_infer.kernels.tempered_transitions import uniform_ladder
from ugm_infer.models.rbm import semi_rbm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_MNIST, load_binarized_mnist, provenance, tt_runs_before, updates_within_budget  # noqa: E402

METHODS = ("SAP", "Trans-SAP")
SLUGS = {"SAP": "sap", "Trans-SAP": "trans_sap"}


def downsample(images: np.ndarray, factor: int = 4) -> np.ndarray:
    """28x28 binary images -> (28/factor)^2 pixels (on when any pixel of its block is)."""
    side = 28 // factor
    x = images.reshape(-1, side, factor, side, factor).max(axis=(2, 4))
    return x.reshape(len(images), side * side).astype(np.float32)


def check_ais_against_exact(key, num_visible=12, num_hidden=6, num_runs=64, num_betas=1000) -> dict:
    """AIS log Z of a random small semi-RBM (strong lateral couplings) against ``ui.exact.log_partition``."""
    model = semi_rbm(num_visible, num_hidden)
    k_p, k_d, k_a = jax.random.split(key, 3)
    params = model.init_params(k_p, 0.7, lateral_scale=0.5)
    data = {"v": jax.random.bernoulli(k_d, 0.3, (200, num_visible)).astype(jnp.float32)}
    exact = float(ui.exact.log_partition(model, params))
    res = ui.smc.ais_log_likelihood(k_a, model, params, data, num_runs=num_runs, num_betas=num_betas)
    out = {"exact_log_z": exact, "ais_log_z": float(res.log_Z), "ais_log_z_se": float(res.log_Z_se)}
    out["error_in_se"] = (out["ais_log_z"] - exact) / max(out["ais_log_z_se"], 1e-12)
    if not abs(out["ais_log_z"] - exact) < max(4 * out["ais_log_z_se"], 0.05):
        raise RuntimeError(f"AIS disagrees with the exact log Z of a small semi-RBM: {out}")
    return out


def tt_sweeps(args) -> int:
    return 2 * (args.num_betas - 1)


def num_updates(name, args) -> int:
    if name == "SAP":
        return args.gibbs_budget
    return updates_within_budget(args.gibbs_budget, args.tt_start, args.gibbs_per_tt, tt_sweeps(args))


def make_learner(name, model, args):
    opt = optax.sgd(ui.learn.constant_then_robbins_monro(args.lr, args.constant_updates, args.lr_a, args.lr_b))
    if name == "SAP":
        return ui.learn.pcd(model, opt, num_particles=args.num_chains, num_sweeps=1, visible="v")
    return ui.learn.trans_sap(
        model,
        opt,
        num_particles=args.num_chains,
        betas=uniform_ladder(args.num_betas, args.beta_min),
        gibbs_per_tt=args.gibbs_per_tt,
        tt_start=args.tt_start,
        visible="v",
    )


def train(name, model, params0, train_v, args) -> dict:
    path = os.path.join(args.out, f"{SLUGS[name]}.json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    steps_per_epoch = len(train_v) // args.batch_size
    updates = num_updates(name, args)
    t = time.perf_counter()

    def log(p):
        if p.step % args.log_every == 0 and p.step:
            print(f"  {name} update {p.step}/{updates} ({time.perf_counter() - t:.0f} s)", flush=True)

    res = fit(
        make_learner(name, model, args),
        jax.random.key(args.seed + 1000),
        {"v": train_v},
        params=params0,
        num_epochs=math.ceil(updates / steps_per_epoch),
        batch_size=args.batch_size,
        eval_fn=None,
        max_steps=updates,
        progress=False,
        steps_per_jit=min(args.log_every, args.checkpoint_every),
        checkpoint_dir=os.path.join(args.out, f"ckpt_{SLUGS[name]}"),
        checkpoint_every=args.checkpoint_every,
        callbacks=[log],
        step_info=True,  # every update's info: the counts below use all of them
    )
    steps = res.history["steps"]
    out = {
        "updates": updates,
        "gibbs_steps": int(updates + tt_sweeps(args) * tt_runs_before(updates, args.tt_start, args.gibbs_per_tt))
        if name == "Trans-SAP"
        else updates,
        "timing": {k: float(v) for k, v in res.history["timing"].items() if np.ndim(v) == 0},
        "commit": provenance(None, __file__)["commit"],
    }
    if "kernel_info.extra_ran" in steps:
        ran = np.asarray(steps["kernel_info.extra_ran"]) > 0.5
        acc = np.asarray(steps["kernel_info.extra.acceptance_probability"], np.float64)[ran]
        out["tt_acceptance"] = {"mean": float(acc.mean()) if acc.size else None, "runs": int(ran.sum())}
    np.savez(os.path.join(args.out, f"{SLUGS[name]}_params.npz"), **{k: np.asarray(v) for k, v in res.params.items()})
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return out


def evaluate(name, model, train_v, test_v, args) -> dict:
    with np.load(os.path.join(args.out, f"{SLUGS[name]}_params.npz")) as z:
        params = {k: jnp.asarray(z[k]) for k in z.files}
    estimates, ses, seconds = [], [], 0.0
    for r in range(args.ais_repeats):
        # Each estimate is saved as it finishes, so a rerun resumes at the next one.
        path = os.path.join(args.out, f"{SLUGS[name]}_ais_{r}_{args.ais_runs}x{args.ais_betas}.json")
        if os.path.isfile(path):
            with open(path) as f:
                done = json.load(f)
        else:
            t = time.perf_counter()
            key = jax.random.fold_in(jax.random.key(args.seed + 7), 100 * METHODS.index(name) + r)
            res = ui.smc.ais_log_likelihood(
                key, model, params, {"v": test_v}, base_data={"v": train_v}, num_runs=args.ais_runs, num_betas=args.ais_betas
            )
            done = {
                "log_likelihood": float(res.log_likelihood),
                "log_likelihood_se": float(res.log_likelihood_se),
                "log_Z": float(res.log_Z),
                "log_likelihoods": np.asarray(res.log_likelihoods, np.float64).tolist(),
                "seconds": time.perf_counter() - t,
            }
            with open(path + ".tmp", "w") as f:  # renamed when complete: a killed write leaves no partial file
                json.dump(done, f)
            os.replace(path + ".tmp", path)
        estimates.append(done["log_likelihood"])
        ses.append(done["log_likelihood_se"])
        seconds += done["seconds"]
    free = -np.asarray(done["log_likelihoods"]) - done["log_Z"]  # F(v) per test image
    return {
        "test_log_prob": float(np.mean(estimates)),
        "test_log_prob_se_over_repeats": float(np.std(estimates, ddof=1) / math.sqrt(len(estimates)))
        if len(estimates) > 1
        else None,
        "ais_estimates": estimates,
        "ais_se_within_runs": ses,
        "test_sampling_se": float(np.std(free) / math.sqrt(len(free))),
        "ais_seconds": seconds,
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI: 7x7 images, 10 hidden, a 300-step budget, small AIS")
    p.add_argument("--data", default=DEFAULT_MNIST)
    p.add_argument("--out", default="out/semi_rbm_mnist")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-hidden", type=int, default=None, help="default 500 (quick 10)")
    p.add_argument("--num-train", type=int, default=None, help="training images (default all 50,000; quick 2,000)")
    p.add_argument("--num-test", type=int, default=None, help="test images (default all 10,000; quick 500)")
    p.add_argument("--gibbs-budget", type=int, default=None, help="Gibbs steps (paper 200,000; quick 300)")
    p.add_argument("--constant-updates", type=int, default=None, help="updates at --lr (paper 50,000 = budget / 4)")
    p.add_argument("--tt-gibbs", type=int, default=None, help="Gibbs steps at the end with TT (paper 100,000 = budget / 2)")
    p.add_argument("--gibbs-per-tt", type=int, default=None, help="Gibbs updates per TT run (paper 1,000; quick 50)")
    p.add_argument("--num-betas", type=int, default=None, help="TT inverse temperatures (paper 500; quick 20)")
    p.add_argument("--beta-min", type=float, default=0.9)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lr-a", type=float, default=100.0, help="then lr = a / (b + t)")
    p.add_argument("--lr-b", type=float, default=2000.0)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--num-chains", type=int, default=100)
    p.add_argument("--checkpoint-every", type=int, default=None, help="updates (default 2,000; quick 100)")
    p.add_argument("--log-every", type=int, default=None, help="updates (default 1,000; quick 100)")
    p.add_argument("--ais-runs", type=int, default=None, help="AIS runs per estimate (default 100; quick 16)")
    p.add_argument("--ais-betas", type=int, default=None, help="AIS betas (default 20,000; quick 300)")
    p.add_argument("--ais-repeats", type=int, default=None, help="independent AIS estimates (default 3; quick 2)")
    p.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--phases", nargs="*", default=["check", "train", "evaluate"], choices=["check", "train", "evaluate"])
    args = p.parse_args(argv)
    q = args.quick
    defaults = dict(
        num_hidden=(10, 500),
        num_train=(2000, None),
        num_test=(500, None),
        gibbs_budget=(300, 200_000),
        gibbs_per_tt=(50, 1000),
        num_betas=(20, 500),
        checkpoint_every=(100, 2000),
        log_every=(100, 1000),
        ais_runs=(8, 100),
        ais_betas=(200, 20_000),
        ais_repeats=(2, 3),
    )
    for k, (quick, full) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if q else full)
    args.constant_updates = args.constant_updates if args.constant_updates is not None else args.gibbs_budget // 4
    args.tt_gibbs = args.tt_gibbs if args.tt_gibbs is not None else args.gibbs_budget // 2
    args.tt_start = args.gibbs_budget - args.tt_gibbs
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    result = {"config": {**{k: v for k, v in vars(args).items()}, **provenance(argv, __file__)}, "methods": {}}
    if "check" in args.phases:
        result["ais_check"] = check_ais_against_exact(jax.random.key(args.seed + 11))
        print(f"AIS check on a small semi-RBM: {result['ais_check']}", flush=True)
    train_v, test_v = load_binarized_mnist(args.data)
    rng = np.random.default_rng(args.seed)
    if args.num_train:
        train_v = train_v[np.sort(rng.choice(len(train_v), args.num_train, replace=False))]
    if args.num_test:
        test_v = test_v[np.sort(rng.choice(len(test_v), args.num_test, replace=False))]
    if args.quick:
        train_v, test_v = downsample(train_v), downsample(test_v)
    model = semi_rbm(train_v.shape[1], args.num_hidden)
    params0 = model.init_params(jax.random.key(args.seed), 0.01, data=train_v)
    for name in args.methods:
        if "train" in args.phases:
            result["methods"][name] = train(name, model, params0, train_v, args)
            print(f"{name}: trained ({result['methods'][name]})", flush=True)
        if "evaluate" in args.phases and os.path.isfile(os.path.join(args.out, f"{SLUGS[name]}_params.npz")):
            ev = evaluate(name, model, train_v, test_v, args)
            result["methods"].setdefault(name, {})["evaluation"] = ev
            print(
                f"{name}: AIS test log-probability {ev['test_log_prob']:.3f} "
                f"(se over {args.ais_repeats} AIS repeats {ev['test_log_prob_se_over_repeats']})",
                flush=True,
            )
    result["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "semi_rbm_mnist.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"total {result['seconds']:.0f} s; wrote {args.out}/semi_rbm_mnist.json")
    return result


if __name__ == "__main__":
    main()
