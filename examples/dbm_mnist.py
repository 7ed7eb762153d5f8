"""A 2-layer deep Boltzmann machine on binarized MNIST: MF-PCD versus H-APCD (the APCD paper, section 4.2).

The APCD paper trains a 784-500-1000 DBM on MNIST with mean-field PCD (MF-PCD,
Salakhutdinov and Hinton 2009) and with its hybrid H-APCD, and reports AIS test
log-likelihoods of -84.31 (MF-PCD) and -83.93 (H-APCD) nats.  This script runs that
comparison in four resumable phases (each skipped when its output exists):

1. ``pretrain``: greedy layer-wise pre-training (Salakhutdinov and Hinton 2009): a
   784-500 RBM whose bottom-up input is doubled (``p(h1|v) = sigma(2 v W1 + c)``) and a
   500-1000 RBM on its hidden probabilities whose top-down input is doubled, CD-1, then
   ``W1, W2`` and the biases (the middle layer's the mean of the two RBMs') initialise
   the DBM;
2. ``mfpcd``: ``ui.learn.mfpcd`` for ``--epochs`` epochs of minibatches of 100: mean
   field (at most ``--mf-iterations`` iterations) for the data term, 100 persistent
   block-Gibbs model chains (``--model-sweeps`` sweeps per update), plain SGD with the
   learning rate decreasing linearly every epoch from ``--lr-start`` to ``--lr-end``.
   The learner state at half the updates is saved (``mfpcd_branch.npz``);
3. ``h_apcd``: H-APCD as the paper describes it -- MF-PCD for the first half of
   training, then a data term ``(1 - w) mean field + w APCD`` with ``w`` rising
   linearly from 0 to 1 over the second half.  The first half is *the* MF-PCD run (the
   branch state: parameters and model chains), so the two methods share it exactly and
   differ only in the second half; ``ui.learn.apcd(hybrid=True, statistics="latent")``
   with ``--chains-per-datum`` persistent latent chains per training digit,
   ``--latent-sweeps`` block-Gibbs sweeps per visit, and an E-step size decreasing
   linearly per visit from 1 to ``--e-step-end`` (the paper: "starts from a large value
   close to 1, and decreases slowly to 0.05");
4. ``evaluate``: for each final model, ``log Z`` by AIS (``--ais-runs`` x
   ``--ais-betas``, base-rate base from the training digits, ``h2`` summed out along
   the path), the mean-field variational lower bound on every test digit, and AIS on
   the clamped model ``p(h1, h2 | v)`` for ``--ais-test`` random test digits (an
   estimate of ``log p(v)``, the quantity the paper reports; its footnote 3 says it
   measured the true log-likelihood, not the bound), all with the same ``log Z``.
   With a middle layer of at most 20 units everything is also computed exactly (the
   ``2^n1`` configurations of ``h1`` enumerated) and the AIS numbers are compared with
   the exact ones.

Checkpoints (``ui.fit(checkpoint_dir=...)``) every ``--checkpoint-every`` updates;
interrupting (``kill``) and re-running the same command continues bit-identically, and
pausing (``kill -STOP`` / ``-CONT``) is harmless.  Parameter snapshots every
``--snapshot-every`` updates go to ``--out/snapshots``.

The paper's settings that we follow: 784-500-1000, 100 epochs of pre-training, 500
epochs of minibatches of 100, learning rate 0.005 decaying to 0.0001 linearly per
epoch, 100 model chains, 30 mean-field iterations, H-APCD's half-way switch and
shifting weights, its E-step size from about 1 down to 0.05, AIS ``log Z`` from 100
runs.  What we changed to fit two shared CPU cores, and what the paper does not state,
is listed in ``--help`` and in docs/results/dbm_mnist.md.  ``--quick`` (CI, < 1 min):
784-8-16 on 300 digits with exact evaluation.

Usage::

    python examples/dbm_mnist.py --quick --out out/dbm_mnist_quick
    python examples/dbm_mnist.py --out out/dbm_mnist_paper            # the paper's scale (hours)
    python examples/dbm_mnist.py --out out/dbm_mnist_paper --phases evaluate
"""

from __future__ import annotations

import argparse
import itertools
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
from ugm_infer.learn.apcd import apcd
from ugm_infer.learn.meanfield import mean_field, mfpcd
from ugm_infer.models.dbm import dbm
from ugm_infer.smc.ais import ais_latent_log_likelihood

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_MNIST, load_binarized_mnist, provenance  # noqa: E402

DEFAULT_DATA = DEFAULT_MNIST
PHASES = ("pretrain", "mfpcd", "h_apcd", "evaluate", "summarize")
PAPER = {"mfpcd": -84.31, "h_apcd": -83.93}  # the APCD paper, Table 1(a): AIS test log-likelihood, MNIST
METHODS = ("mfpcd", "h_apcd")


# ----------------------------------------------------------------------------------
# exact evaluation by enumerating the middle layer (n1 <= 20)
# ----------------------------------------------------------------------------------
def h1_configs(n1):
    return jnp.asarray(np.array(list(itertools.product([0.0, 1.0], repeat=n1)), np.float32))


@jax.jit
def exact_log_z(params, configs):
    """log Z: ``v`` and ``h2`` are independent given ``h1``, so both are summed in closed form."""

    def chunk(c):
        return (
            c @ params["b1"]
            + jnp.sum(jax.nn.softplus(params["b0"] + c @ params["W1"].T), -1)
            + jnp.sum(jax.nn.softplus(params["b2"] + c @ params["W2"]), -1)
        )

    n = configs.shape[0]
    size = min(n, 4096)
    return jax.nn.logsumexp(jax.lax.map(chunk, configs.reshape(n // size, size, -1)))


@jax.jit
def exact_log_unnorm(params, v, configs):
    """log p*(v) = log sum_{h1, h2} exp(-E) for a batch ``v`` (N, n0)."""
    s2 = jnp.sum(jax.nn.softplus(params["b2"] + configs @ params["W2"]), -1)

    def one(vv):
        return vv @ params["b0"] + jax.nn.logsumexp(configs @ (params["b1"] + vv @ params["W1"]) + s2)

    return jax.lax.map(one, v)


def check_exact_against_library() -> float:
    """Max abs difference of the enumeration above and ``ui.exact.log_likelihood`` on a 6-3-4 DBM."""
    model = dbm([6, 3, 4])
    rng = np.random.default_rng(0)
    params = {
        "W1": jnp.asarray(rng.normal(size=(6, 3)), jnp.float32),
        "W2": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
        "b0": jnp.asarray(rng.normal(size=6), jnp.float32),
        "b1": jnp.asarray(rng.normal(size=3), jnp.float32),
        "b2": jnp.asarray(rng.normal(size=4), jnp.float32),
    }
    v = jnp.asarray(rng.integers(0, 2, size=(5, 6)), jnp.float32)
    configs = h1_configs(3)
    ours = np.asarray(exact_log_unnorm(params, v, configs) - exact_log_z(params, configs))
    ref = np.asarray(ui.exact.log_likelihood(model, params, {"v": v}))
    err = float(np.max(np.abs(ours - ref)))
    if not err < 1e-4:
        raise RuntimeError(f"exact DBM evaluation disagrees with ui.exact by {err}")
    return err


def mean_field_log_z_v(model, params, v, max_iterations=100):
    """Per-digit mean-field bound ``-F_MF(v) <= log Z(v)`` (``E_q[E] = E(v, mu)``: the energy is multilinear)."""
    solve = mean_field(model, tol=1e-5, max_iterations=max_iterations)

    @jax.jit
    def bound(params, v):
        def one(vv):
            mu, _ = solve(params, {"v": vv})
            ent = 0.0
            for m in mu.values():
                m = jnp.clip(m, 1e-7, 1 - 1e-7)
                ent = ent - jnp.sum(m * jnp.log(m) + (1 - m) * jnp.log1p(-m))
            return -model.energy(params, {"v": vv, **mu}) + ent

        return jax.lax.map(one, v)

    return np.asarray(bound(params, v))


# ----------------------------------------------------------------------------------
# phase 1: greedy pre-training (doubled RBMs, CD-1)
# ----------------------------------------------------------------------------------
def pretrain_rbm(key, data, num_hidden, up, down, args):
    """CD-1 on an RBM with ``p(h|x) = sigma(up * x W + c)`` and ``p(x|h) = sigma(down * h W^T + b)``.

    ``up = 2`` is Salakhutdinov and Hinton's (2009) bottom RBM (its input counted twice),
    ``down = 2`` their top RBM.  Momentum 0.5 for 5 epochs, then 0.9; weight decay on ``W``.
    Returns ``{"W", "b", "c"}``.
    """
    n, nv = data.shape
    bs = args.batch_size
    steps = n // bs
    k_w, k_run = jax.random.split(key)
    marg = np.clip(data.mean(0), 1e-3, 1 - 1e-3)
    params = {
        "W": 0.01 * jax.random.normal(k_w, (nv, num_hidden)),
        "b": jnp.asarray(np.log(marg) - np.log1p(-marg), jnp.float32),
        "c": jnp.zeros(num_hidden),
    }
    data = jnp.asarray(data)

    def grads(params, x, key):
        k1, k2 = jax.random.split(key)
        ph = jax.nn.sigmoid(up * x @ params["W"] + params["c"])
        h = jax.random.bernoulli(k1, ph).astype(jnp.float32)
        px = jax.nn.sigmoid(down * h @ params["W"].T + params["b"])
        x1 = jax.random.bernoulli(k2, px).astype(jnp.float32)
        ph1 = jax.nn.sigmoid(up * x1 @ params["W"] + params["c"])
        return {
            "W": (x.T @ ph - x1.T @ ph1) / bs - args.pretrain_weight_decay * params["W"],
            "b": jnp.mean(x - x1, 0),
            "c": jnp.mean(ph - ph1, 0),
        }

    @jax.jit
    def epoch(carry, key, momentum):
        k_perm, k_steps = jax.random.split(key)
        batches = jax.random.permutation(k_perm, n)[: steps * bs].reshape(steps, bs)

        def body(carry, inputs):
            params, vel = carry
            idx, k = inputs
            g = grads(params, data[idx], k)
            vel = jax.tree.map(lambda v, gg: momentum * v + args.pretrain_lr * gg, vel, g)
            return (jax.tree.map(jnp.add, params, vel), vel), None

        return jax.lax.scan(body, carry, (batches, jax.random.split(k_steps, steps)))[0]

    carry = (params, jax.tree.map(jnp.zeros_like, params))
    for e, k in enumerate(jax.random.split(k_run, args.pretrain_epochs)):
        carry = epoch(carry, k, jnp.float32(0.5 if e < 5 else 0.9))
    return carry[0]


def pretrain(key, train_v, args):
    n0, n1, n2 = args.sizes
    k1, k2 = jax.random.split(key)
    rbm1 = pretrain_rbm(k1, train_v, n1, 2.0, 1.0, args)
    h1 = np.asarray(jax.nn.sigmoid(2.0 * jnp.asarray(train_v) @ rbm1["W"] + rbm1["c"]))
    rbm2 = pretrain_rbm(k2, h1, n2, 1.0, 2.0, args)
    return {
        "W1": rbm1["W"],
        "W2": rbm2["W"],
        "b0": rbm1["b"],
        "b1": 0.5 * (rbm1["c"] + rbm2["b"]),
        "b2": rbm2["c"],
    }


# ----------------------------------------------------------------------------------
# phases 2 and 3: MF-PCD and H-APCD
# ----------------------------------------------------------------------------------
def learning_rate(args, steps_per_epoch, offset=0):
    """``lr_start`` decreasing linearly every epoch to ``lr_end`` at the last epoch (count shifted by ``offset``)."""
    last = max(1, args.epochs - 1)

    def schedule(count):
        epoch = jnp.minimum((count + offset) // steps_per_epoch, last).astype(jnp.float32)
        return args.lr_start + (args.lr_end - args.lr_start) * epoch / last

    return schedule


def e_step_size(args, visits_per_datum):
    """a(k): 1 at a datum's first APCD visit, then linearly down to ``e_step_end`` at its last."""
    last = max(1, visits_per_datum - 1)

    def a(k):
        k = jnp.asarray(k, jnp.float32)
        return jnp.clip(1.0 - (1.0 - args.e_step_end) * (k - 1.0) / last, args.e_step_end, 1.0)

    return a


class Progress:
    """``ui.fit`` callback: a log line every ``every`` updates and parameter snapshots."""

    def __init__(self, name, total, every, snapshot_every, snapshot_dir, offset=0):
        self.name, self.total, self.every, self.offset = name, total, every, offset
        self.snapshot_every, self.snapshot_dir = snapshot_every, snapshot_dir
        self.t0, self.first, self.last = time.time(), None, None

    def __call__(self, p):
        step = p.step + self.offset
        if self.first is None:
            self.first, self.last = step, step
            return
        if step // self.every != self.last // self.every:
            rate = (time.time() - self.t0) / max(1, step - self.first)
            eta = (self.total - step) * rate / 3600
            print(f"  {self.name} update {step}/{self.total}: {1000 * rate:.0f} ms/update, ETA {eta:.1f} h", flush=True)
        if self.snapshot_every and step % self.snapshot_every == 0 and step != self.last:
            os.makedirs(self.snapshot_dir, exist_ok=True)
            save_npz(os.path.join(self.snapshot_dir, f"{self.name}_{step:07d}.npz"), {"params": p.state.params})
        self.last = step


def save_npz(path, tree):
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    flat = {"/".join(str(getattr(k, "key", k)) for k in kp): np.asarray(v) for kp, v in leaves}
    np.savez(path + ".tmp.npz", **flat)
    os.replace(path + ".tmp.npz", path)


def load_npz(path, prefix):
    with np.load(path) as z:
        return {k[len(prefix) + 1 :]: jnp.asarray(z[k]) for k in z.files if k.startswith(prefix + "/")}


def train_mfpcd(model, params0, train_v, args):
    steps_per_epoch = len(train_v) // args.batch_size
    total = args.epochs * steps_per_epoch
    half = total // 2
    learner = mfpcd(
        model,
        optax.sgd(learning_rate(args, steps_per_epoch)),
        args.particles,
        num_sweeps=args.model_sweeps,
        max_iterations=args.mf_iterations,
    )
    common = dict(
        params=params0,
        num_epochs=args.epochs,
        batch_size=args.batch_size,
        eval_fn=None,
        progress=False,
        checkpoint_dir=os.path.join(args.out, "ckpt_mfpcd"),
        checkpoint_every=args.checkpoint_every,
        callbacks=[Progress("mfpcd", total, args.log_every, args.snapshot_every, os.path.join(args.out, "snapshots"))],
    )
    key = jax.random.key(args.seed + 1)
    branch = os.path.join(args.out, "mfpcd_branch.npz")
    if not os.path.isfile(branch):
        res = fit(learner, key, {"v": train_v}, max_steps=half, **common)
        save_npz(branch, {"params": res.state.params, "particles": res.state.particles, "step": np.int64(half)})
    res = fit(learner, key, {"v": train_v}, max_steps=total, **common)
    return res, total


def train_h_apcd(model, train_v, args):
    steps_per_epoch = len(train_v) // args.batch_size
    total = args.epochs * steps_per_epoch
    half = total // 2
    branch = os.path.join(args.out, "mfpcd_branch.npz")
    params, particles = load_npz(branch, "params"), load_npz(branch, "particles")
    visits = (total - half) * args.batch_size // len(train_v)
    learner = apcd(
        model,
        optax.sgd(learning_rate(args, steps_per_epoch, offset=half)),
        args.particles,
        num_chains_per_datum=args.chains_per_datum,
        num_latent_steps=args.latent_sweeps,
        num_sweeps=args.model_sweeps,
        estimate_step=e_step_size(args, visits),
        statistics="latent",
        hybrid=True,
        num_steps=total,
        hybrid_weight=lambda t: jnp.clip(2.0 * (t + half) / total - 1.0, 0.0, 1.0),
        mean_field_kwargs={"max_iterations": args.mf_iterations},
        init_particles=particles,
    )
    res = fit(
        learner,
        jax.random.key(args.seed + 2),
        {"v": train_v},
        params=params,
        num_epochs=args.epochs - args.epochs // 2,
        batch_size=args.batch_size,
        eval_fn=None,
        progress=False,
        max_steps=total - half,
        checkpoint_dir=os.path.join(args.out, "ckpt_h_apcd"),
        checkpoint_every=args.checkpoint_every,
        callbacks=[
            Progress("h_apcd", total, args.log_every, args.snapshot_every, os.path.join(args.out, "snapshots"), offset=half)
        ],
    )
    return res, total


def run_training(name, model, params0, train_v, args):
    path = os.path.join(args.out, f"{name}_final.npz")
    if os.path.isfile(path):
        print(f"{name}: already trained ({path})", flush=True)
        return
    t = time.time()
    res, total = train_mfpcd(model, params0, train_v, args) if name == "mfpcd" else train_h_apcd(model, train_v, args)
    save_npz(path, {"params": res.state.params, "particles": res.state.particles})
    timing = {k: float(v) for k, v in res.history["timing"].items() if np.ndim(v) == 0}
    info = {"updates": total, "timing": timing, "this_call_seconds": time.time() - t, **provenance(None, __file__)}
    steps = res.history["steps"]
    for key in ("hybrid_weight", "estimate_step", "latent_energy"):
        if key in steps and len(steps[key]):
            info[f"last_{key}"] = float(np.asarray(steps[key])[-1])
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"{name}: trained {total} updates in {time.time() - t:.0f}s", flush=True)


# ----------------------------------------------------------------------------------
# phase 4: evaluation
# ----------------------------------------------------------------------------------
def evaluate(name, model, train_v, test_v, args):
    path = os.path.join(args.out, f"eval_{name}.json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    params = load_npz(os.path.join(args.out, f"{name}_final.npz"), "params")
    key = jax.random.fold_in(jax.random.key(args.seed + 3), METHODS.index(name))
    k_z, k_cond = jax.random.split(key)
    t = time.time()
    base = {"v": jnp.asarray(train_v)}
    mf = ais_latent_log_likelihood(
        k_z, model, params, {"v": jnp.asarray(test_v)}, num_runs=args.ais_runs, num_betas=args.ais_betas, base_data=base
    )
    log_z = float(mf.log_Z)
    out = {
        "ais_log_z": log_z,
        "ais_log_z_se": float(mf.log_Z_se),
        "ais_ess_fraction": float(mf.ais.ess),
        "mf_bound_test_ll": float(mf.log_likelihood),
        "mf_bound_test_ll_se": float(np.std(np.asarray(mf.log_Z_v)) / np.sqrt(len(test_v))),
        "num_test": len(test_v),
        "log_z_seconds": time.time() - t,
    }
    subset = np.random.default_rng(args.seed).permutation(len(test_v))[: args.ais_test]
    if args.ais_test > 0:
        t = time.time()
        # the per-digit AIS runs; their own log Z run is made tiny and discarded (the one above is used)
        est = ais_latent_log_likelihood(
            k_cond,
            model,
            params,
            {"v": jnp.asarray(test_v[subset])},
            estimator="ais",
            conditional_runs=args.cond_runs,
            conditional_betas=args.cond_betas,
            num_runs=2,
            num_betas=10,
            base_data=base,
        )
        log_z_v = np.asarray(est.log_Z_v, np.float64)
        mf_sub = np.asarray(mf.log_Z_v, np.float64)[subset]
        out.update(
            ais_test_ll=float(np.mean(log_z_v) - log_z),
            ais_test_ll_se_over_digits=float(np.std(log_z_v - mf_sub) / np.sqrt(len(subset))),
            mf_bound_test_ll_same_digits=float(np.mean(mf_sub) - log_z),
            ais_minus_mf_log_z_v=float(np.mean(log_z_v - mf_sub)),
            ais_test_digits=len(subset),
            cond_seconds=time.time() - t,
        )
    if args.sizes[1] <= 20:
        configs = h1_configs(args.sizes[1])
        exact_z = float(exact_log_z(params, configs))
        lu = np.asarray(exact_log_unnorm(params, jnp.asarray(test_v), configs), np.float64)
        out.update(
            exact_log_z=exact_z,
            exact_test_ll=float(np.mean(lu) - exact_z),
            mf_bound_test_ll_exact_log_z=float(np.mean(np.asarray(mf.log_Z_v)) - exact_z),
        )
        if args.ais_test > 0:
            out["exact_test_ll_same_digits"] = float(np.mean(lu[subset]) - exact_z)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return out


def summarize(results: dict) -> str:
    """A markdown table of the evaluation next to the paper's numbers."""
    lines = [
        "| learner | AIS log Z ± se (ESS/M) | mean-field bound, all test digits | AIS estimate of log p(v) "
        "(digits) | paper (AIS) | training updates / hours |",
        "|---|---|---|---|---|---|",
    ]
    for name in METHODS:
        ev = results["learners"].get(name)
        if ev is None:
            continue
        tr = ev.get("training", {})
        hours = tr.get("timing", {}).get("train_seconds", float("nan")) / 3600
        ais = f"{ev['ais_test_ll']:.2f} ({ev['ais_test_digits']})" if "ais_test_ll" in ev else "-"
        lines.append(
            f"| {name} | {ev['ais_log_z']:.2f} ± {ev['ais_log_z_se']:.2f} ({ev['ais_ess_fraction']:.2f}) | "
            f"{ev['mf_bound_test_ll']:.2f} ± {ev['mf_bound_test_ll_se']:.2f} | {ais} | {PAPER[name]} | "
            f"{tr.get('updates', '?')} / {hours:.1f} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="784-8-16 on 300 digits, exact evaluation (CI, < 1 min)")
    p.add_argument("--out", default="out/dbm_mnist")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--phases", nargs="*", default=list(PHASES), choices=PHASES)
    p.add_argument("--sizes", type=int, nargs=3, default=[784, 500, 1000], help="n_v n_h1 n_h2 (paper 784 500 1000)")
    p.add_argument("--train", type=int, default=50000, help="training digits, the first N (the file has 50,000)")
    p.add_argument("--test", type=int, default=10000, help="test digits for the mean-field bound (a random subset)")
    p.add_argument("--epochs", type=int, default=500, help="training epochs (paper 500)")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--particles", type=int, default=100, help="persistent model chains (paper 100)")
    p.add_argument("--model-sweeps", type=int, default=1, help="Gibbs sweeps of the model chains per update (paper 10)")
    p.add_argument("--mf-iterations", type=int, default=30, help="most mean-field iterations per datum (paper 30)")
    p.add_argument("--lr-start", type=float, default=0.005)
    p.add_argument("--lr-end", type=float, default=0.0001)
    p.add_argument("--pretrain-epochs", type=int, default=100, help="epochs of each pre-training RBM (paper 100)")
    p.add_argument("--pretrain-lr", type=float, default=0.05)
    p.add_argument("--pretrain-weight-decay", type=float, default=0.001)
    p.add_argument("--chains-per-datum", type=int, default=2, help="H-APCD latent chains per digit (paper 1)")
    p.add_argument("--latent-sweeps", type=int, default=5, help="H-APCD latent sweeps per visit (paper 100)")
    p.add_argument("--e-step-end", type=float, default=0.05)
    p.add_argument("--checkpoint-every", type=int, default=5000)
    p.add_argument("--snapshot-every", type=int, default=25000)
    p.add_argument("--log-every", type=int, default=1000)
    p.add_argument("--ais-runs", type=int, default=100, help="AIS runs for log Z (paper 100)")
    p.add_argument("--ais-betas", type=int, default=20000, help="AIS betas for log Z")
    p.add_argument("--ais-test", type=int, default=200, help="random test digits with a per-digit AIS log Z(v)")
    p.add_argument("--cond-runs", type=int, default=32, help="per-digit AIS runs (paper 100)")
    p.add_argument("--cond-betas", type=int, default=1000, help="per-digit AIS betas")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.train, args.test, args.epochs, args.pretrain_epochs = [784, 8, 16], 300, 300, 60, 5
        args.checkpoint_every, args.snapshot_every, args.log_every = 90, 0, 90
        args.ais_runs, args.ais_betas, args.ais_test, args.cond_runs, args.cond_betas = 16, 200, 20, 8, 100
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    exact_check = check_exact_against_library()
    train_all, test_all = load_binarized_mnist(args.data)
    train_v = train_all[: args.train]
    # the test split is ordered by digit class: take a fixed random subset
    test_v = test_all[np.random.default_rng(0).permutation(len(test_all))[: args.test]]
    model = dbm(args.sizes)
    pre_path = os.path.join(args.out, "pretrain.npz")
    if "pretrain" in args.phases and not os.path.isfile(pre_path):
        t = time.time()
        params0 = pretrain(jax.random.key(args.seed), train_v, args)
        save_npz(pre_path, {"params": params0})
        print(f"pretrained in {time.time() - t:.0f}s", flush=True)
    for name in METHODS:
        if name in args.phases:
            params0 = load_npz(pre_path, "params")
            run_training(name, model, params0, train_v, args)
    results = {"config": {**vars(args), **provenance(argv, __file__), "exact_check": exact_check}, "learners": {}}
    if "evaluate" in args.phases:
        for name in METHODS:
            if os.path.isfile(os.path.join(args.out, f"{name}_final.npz")):
                t = time.time()
                results["learners"][name] = ev = evaluate(name, model, train_v, test_v, args)
                with open(os.path.join(args.out, f"{name}.json")) as f:
                    ev["training"] = json.load(f)
                line = f"{name}: AIS log Z {ev['ais_log_z']:.3f} +- {ev['ais_log_z_se']:.3f}"
                line += f", MF bound {ev['mf_bound_test_ll']:.3f}"
                if "ais_test_ll" in ev:
                    line += f", AIS test LL ({ev['ais_test_digits']} digits) {ev['ais_test_ll']:.3f}"
                if "exact_test_ll" in ev:
                    line += f"; exact test LL {ev['exact_test_ll']:.3f}, exact log Z {ev['exact_log_z']:.3f}"
                print(line + f" ({time.time() - t:.0f}s)", flush=True)
        results["seconds"] = time.time() - t0
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        print(f"total {results['seconds']:.1f}s; wrote {args.out}/results.json")
    if "summarize" in args.phases and os.path.isfile(os.path.join(args.out, "results.json")):
        with open(os.path.join(args.out, "results.json")) as f:
            print(summarize(json.load(f)))
    return results


if __name__ == "__main__":
    main()
