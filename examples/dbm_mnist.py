"""A 2-layer deep Boltzmann machine on binarized MNIST: MF-PCD versus H-APCD.

The APCD paper's DBM experiment (784-500-1000, all 60,000 digits, AIS test
log-likelihoods -84.31 for MF-PCD and -83.93 for H-APCD) at a scale that runs on two
shared CPU cores, with an **exact** test log-likelihood:

1. Train ``ui.models.dbm([784, n1, n2])`` on a subset of the binarized MNIST training
   digits with ``ui.learn.mfpcd`` (Salakhutdinov and Hinton 2009, Algorithm 1: mean-field
   E step, persistent block-Gibbs model chains) and with H-APCD
   (``ui.learn.apcd(hybrid=True, statistics="latent")``: mean field for the first half of
   the updates, then a linear shift to per-datum persistent latent chains), from the same
   initial parameters, with the same optimizer, minibatches and number of model chains.
2. Evaluate exactly.  In a 2-layer DBM ``v`` and ``h2`` are conditionally independent
   given ``h1``, so with a small middle layer (``n1 <= 20``) enumerating the ``2^n1``
   configurations of ``h1`` gives ``log Z`` and every ``log p(v)`` exactly::

       log p*(h1)   = b1.h1 + sum softplus(b0 + W1 h1) + sum softplus(b2 + h1 W2)
       log p*(v)    = b0.v + logsumexp_h1 [h1.(b1 + v W1) + sum softplus(b2 + h1 W2)]

   (checked against ``ui.exact.log_likelihood`` on a tiny DBM at start-up).  We also
   report the mean-field variational lower bound (the quantity MF-PCD climbs) with the
   exact ``log Z``, and, on ``--ais-test`` test digits, the two AIS estimates below
   against the exact values.
3. Models too large to enumerate (``n1 > 20``): Salakhutdinov and Hinton's (2009)
   evaluation, ``ui.smc.ais.ais_latent_log_likelihood``: ``log Z`` by AIS (base-rate
   base fitted to the training digits, ``v`` summed in closed form, ``--ais-runs`` runs
   over ``--ais-betas`` betas) and, per test digit, either the mean-field bound
   ``-F_MF(v) <= log Z(v)`` (``estimator="mean_field"``: a lower bound on
   ``log p(v)`` when ``log Z`` is exact -- the number the papers report) on all test
   digits, or AIS on the clamped model ``p(h1, h2 | v)`` (``estimator="ais"``: an
   estimate, not a bound; ``--cond-runs`` x ``--cond-betas`` per digit) on the first
   ``--ais-test`` of them.  The learning curve then has only its final point.

Writes ``results.json`` and ``dbm_mnist.png`` (test LL against updates) into ``--out``.
``--quick`` (< 90 s): 784-8-16 on 300 digits, 200 updates.  The paper's full
configuration (784-500-1000; not run here, see docs/results/dbm_mnist.md) is::

    python examples/dbm_mnist.py --sizes 784 500 1000 --train 50000 --test 10000 \\
        --updates 100000 --eval-every 100000 --batch-size 100 --particles 100 \\
        --ais-runs 100 --ais-betas 20000 --ais-test 500 --out out/dbm_mnist_full

(the file has 50,000 training digits; the paper used 60,000; H-APCD keeps
``statistics="latent"`` per-datum state, 50000 x 2 x 1500 chain units plus 50000 x 1500
running means).

Usage::

    python examples/dbm_mnist.py --quick --out out/dbm_mnist_quick
    python examples/dbm_mnist.py --out out/dbm_mnist
    python examples/dbm_mnist.py --sizes 784 100 200 --out out/dbm_mnist_ais   # AIS evaluation
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.learn.apcd import apcd
from ugm_infer.learn.meanfield import mean_field, mfpcd
from ugm_infer.models.dbm import dbm
from ugm_infer.smc.ais import ais_latent_log_likelihood

# binarized MNIST is not shipped with the repository: ../shared/data beside the repository root, or $UGM_DATA
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(
    os.environ.get("UGM_DATA", os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))), "binarized_mnist.npz"
)


def load_mnist(path):
    if not os.path.isfile(path):
        raise SystemExit(
            f"error: {path} not found; binarized MNIST is not part of the repository: put binarized_mnist.npz in "
            "../shared/data beside the repository root, set UGM_DATA to the folder holding it, or pass --data PATH"
        )
    d = np.load(path)
    return tuple(np.unpackbits(d[k], axis=1, count=784).astype(np.float32) for k in ("train", "test"))


# ----------------------------------------------------------------------------------
# exact evaluation by enumerating the middle layer
# ----------------------------------------------------------------------------------
def h1_configs(n1):
    return jnp.asarray(np.array(list(itertools.product([0.0, 1.0], repeat=n1)), np.float32))


@jax.jit
def exact_log_z(params, configs):
    def chunk(c):
        return (
            c @ params["b1"]
            + jnp.sum(jax.nn.softplus(params["b0"] + c @ params["W1"].T), -1)
            + jnp.sum(jax.nn.softplus(params["b2"] + c @ params["W2"]), -1)
        )

    n = configs.shape[0]
    size = min(n, 4096)
    vals = jax.lax.map(chunk, configs.reshape(n // size, size, -1))
    return jax.nn.logsumexp(vals)


@jax.jit
def exact_log_unnorm(params, v, configs):
    """log p*(v) = log sum_{h1, h2} exp(-E) for a batch ``v`` (N, n0)."""
    s2 = jnp.sum(jax.nn.softplus(params["b2"] + configs @ params["W2"]), -1)  # (C,)

    def one(vv):
        return vv @ params["b0"] + jax.nn.logsumexp(configs @ (params["b1"] + vv @ params["W1"]) + s2)

    return jax.lax.map(one, v)


def exact_test_ll(params, v, configs):
    return float(jnp.mean(exact_log_unnorm(params, v, configs)) - exact_log_z(params, configs))


def check_exact_against_library():
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
    ours = exact_test_ll(params, v, h1_configs(3))
    ref = float(jnp.mean(ui.exact.log_likelihood(model, params, {"v": v})))
    assert abs(ours - ref) < 1e-4, (ours, ref)


def mean_field_bound(model, params, v, log_z):
    """Average variational lower bound -E_q[E] + H(q) - log Z with the mean-field q(h | v)."""
    solve = mean_field(model, tol=1e-5, max_iterations=100)

    @jax.jit
    def bound(params, v):
        def one(vv):
            mu, _ = solve(params, {"v": vv})
            ent = 0.0
            for m in mu.values():
                m = jnp.clip(m, 1e-7, 1 - 1e-7)
                ent = ent - jnp.sum(m * jnp.log(m) + (1 - m) * jnp.log1p(-m))
            return -model.energy(params, {"v": vv, **mu}) + ent  # energy is multilinear: E_q[E] = E(v, mu)

        return jnp.mean(jax.lax.map(one, v))

    return float(bound(params, v)) - float(log_z)


# ----------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------
def make_learner(name, model, args):
    total = args.updates
    sched = optax.join_schedules(
        [
            optax.constant_schedule(args.learning_rate),
            optax.linear_schedule(args.learning_rate, 0.1 * args.learning_rate, total - total // 2),
        ],
        [total // 2],
    )
    opt = optax.sgd(sched, momentum=0.5)
    if name == "mfpcd":
        return mfpcd(model, opt, args.particles)
    if name == "h_apcd":
        return apcd(
            model,
            opt,
            args.particles,
            num_chains_per_datum=args.chains_per_datum,
            statistics="latent",
            hybrid=True,
            num_steps=total,
        )
    raise ValueError(f"unknown learner {name!r}")


def train(key, model, params0, train_v, test_v, configs, learner, args):
    data = jnp.asarray(train_v)
    n = data.shape[0]
    key_init, key_run = jax.random.split(key)
    state = learner.init(key_init, params0, {"v": data})
    seg = args.eval_every

    @jax.jit
    def segment(state, key):
        def body(state, k):
            k_batch, k_step = jax.random.split(k)
            idx = jax.random.choice(k_batch, n, (args.batch_size,), replace=False)
            state, _ = learner.step(k_step, state, {"v": data[idx]})
            return state, None

        return jax.lax.scan(body, state, jax.random.split(key, seg))[0]

    def evaluate(params):  # exact when the middle layer is enumerable, else left to the final AIS
        return exact_test_ll(params, test_v, configs) if configs is not None else float("nan")

    curve = [(0, evaluate(params0))]
    for s, k in enumerate(jax.random.split(key_run, args.updates // seg)):
        state = segment(state, k)
        curve.append(((s + 1) * seg, evaluate(state.params)))
        print(f"  update {(s + 1) * seg}: test LL {curve[-1][1]:.3f}", flush=True)
    return state.params, curve


def ais_evaluation(key, model, params, train_v, test_v, args):
    """Salakhutdinov & Hinton (2009) evaluation: AIS log Z; MF bound on all test digits, per-datum AIS on a subset."""
    k_mf, k_cond = jax.random.split(key)
    common = dict(num_runs=args.ais_runs, num_betas=args.ais_betas, base_data={"v": jnp.asarray(train_v)})
    t = time.time()
    mf = ais_latent_log_likelihood(k_mf, model, params, {"v": jnp.asarray(test_v)}, **common)
    out = {
        "ais_log_z": float(mf.log_Z),
        "ais_log_z_se": float(mf.log_Z_se),
        "ais_ess": float(mf.ais.ess),
        "ais_analytic": mf.ais.analytic,
        "ais_mf_test_ll": float(mf.log_likelihood),  # mean-field bound with AIS log Z
        "ais_mf_log_z_v": np.asarray(mf.log_Z_v),
        "ais_mf_seconds": time.time() - t,
    }
    if args.ais_test > 0:
        t = time.time()
        sub = jnp.asarray(test_v[: args.ais_test])
        est = ais_latent_log_likelihood(
            k_cond,
            model,
            params,
            {"v": sub},
            estimator="ais",
            conditional_runs=args.cond_runs,
            conditional_betas=args.cond_betas,
            **common,
        )
        out.update(
            ais_cond_test_ll=float(est.log_likelihood),  # per-datum AIS for log Z(v), same subset
            ais_cond_test_ll_se=float(est.log_likelihood_se),
            ais_cond_log_z_v=np.asarray(est.log_Z_v),
            ais_cond_log_z=float(est.log_Z),
            ais_mf_test_ll_subset=float(jnp.mean(mf.log_likelihoods[: args.ais_test])),
            ais_cond_seconds=time.time() - t,
        )
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="784-8-16 on 300 digits, 200 updates (< 90 s)")
    p.add_argument("--out", default="out/dbm_mnist")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--sizes", type=int, nargs=3, default=[784, 16, 32], help="n_v n_h1 n_h2 (n_h1 <= 20 for exact)")
    p.add_argument("--train", type=int, default=5000, help="training digits (first N)")
    p.add_argument("--test", type=int, default=2000, help="test digits (a fixed random subset)")
    p.add_argument("--updates", type=int, default=4000)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--chains-per-datum", type=int, default=2)
    p.add_argument("--learning-rate", type=float, default=0.02)
    p.add_argument("--ais-runs", type=int, default=64, help="AIS runs for log Z")
    p.add_argument("--ais-betas", type=int, default=3000, help="AIS betas for log Z")
    p.add_argument("--ais-test", type=int, default=100, help="test digits with a per-datum AIS log Z(v)")
    p.add_argument("--cond-runs", type=int, default=16, help="per-datum AIS runs")
    p.add_argument("--cond-betas", type=int, default=1000, help="per-datum AIS betas")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.train, args.test = [784, 8, 16], 300, 300
        args.updates, args.eval_every, args.ais_betas, args.ais_runs = 200, 200, 200, 16
        args.ais_test = 0  # the per-datum AIS estimator is covered by tests/test_latent2.py
    n0, n1, n2 = args.sizes
    exact = n1 <= 20  # enumerate the 2^n1 middle-layer configurations; else AIS only
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    check_exact_against_library()
    train_all, test_all = load_mnist(args.data)
    # the test split is ordered by digit class (its first 1,000 are mostly zeros): take a fixed random subset
    train_v = train_all[: args.train]
    test_v = test_all[np.random.default_rng(0).permutation(test_all.shape[0])[: args.test]]
    configs = h1_configs(n1) if exact else None
    model = dbm([n0, n1, n2])
    key = jax.random.key(args.seed)
    k_params, k_train, k_ais = jax.random.split(key, 3)
    params0 = model.init_params(k_params, scale=0.01)
    marg = np.clip(train_v.mean(0), 1e-3, 1 - 1e-3)
    params0["b0"] = jnp.asarray(np.log(marg) - np.log1p(-marg), jnp.float32)
    results = {"args": vars(args), "learners": {}}
    for name in ("mfpcd", "h_apcd"):
        t1 = time.time()
        print(f"{name}:", flush=True)
        learner = make_learner(name, model, args)
        params, curve = train(k_train, model, params0, train_v, test_v, configs, learner, args)
        entry = {"curve": curve, "train_seconds": time.time() - t1}
        ais_out = ais_evaluation(k_ais, model, params, train_v, test_v, args)
        if exact:
            log_z = float(exact_log_z(params, configs))
            test_log_z_v = np.asarray(exact_log_unnorm(params, jnp.asarray(test_v), configs))
            bound = mean_field_bound(model, params, jnp.asarray(test_v), log_z)
            entry.update(
                test_ll=curve[-1][1],
                train_ll=float(jnp.mean(exact_log_unnorm(params, jnp.asarray(train_v), configs))) - log_z,
                test_mf_bound=bound,
                log_z=log_z,
                # the AIS estimators against the exact values on the same digits
                ais_mf_test_ll_exact_log_z=float(np.mean(ais_out["ais_mf_log_z_v"])) - log_z,
            )
            if args.ais_test > 0:
                entry["exact_test_ll_subset"] = float(np.mean(test_log_z_v[: args.ais_test])) - log_z
                entry["ais_cond_log_z_v_max_abs_error"] = float(
                    np.max(np.abs(ais_out["ais_cond_log_z_v"] - test_log_z_v[: args.ais_test]))
                )
        ais_out = {k: v for k, v in ais_out.items() if not isinstance(v, np.ndarray)}
        entry.update(ais_out)
        results["learners"][name] = entry
        summary = (
            f"exact test LL {entry['test_ll']:.3f} (log Z {entry['log_z']:.3f}), MF bound {entry['test_mf_bound']:.3f}, "
            if exact
            else ""
        )
        cond = (
            f", per-datum AIS on {args.ais_test} digits {entry['ais_cond_test_ll']:.3f} +- "
            f"{entry['ais_cond_test_ll_se']:.3f} (MF bound on them {entry['ais_mf_test_ll_subset']:.3f})"
            if args.ais_test > 0
            else ""
        )
        print(
            f"{name}: {summary}AIS log Z {entry['ais_log_z']:.3f} +- {entry['ais_log_z_se']:.3f}, "
            f"MF bound with AIS log Z {entry['ais_mf_test_ll']:.3f}{cond} ({time.time() - t1:.1f}s)",
            flush=True,
        )
    results["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    plot(results, args, os.path.join(args.out, "dbm_mnist.png"))
    print(f"total {results['seconds']:.1f}s; wrote {args.out}/results.json and dbm_mnist.png")


def plot(results, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, color in (("mfpcd", "C0"), ("h_apcd", "C2")):
        entry = results["learners"][name]
        c = np.asarray(entry["curve"], np.float64)
        if np.all(np.isnan(c[1:, 1])):  # AIS evaluation: only the final point
            c = np.array([[c[-1, 0], entry["ais_mf_test_ll"]]])
            ax.plot(c[:, 0], c[:, 1], "s", color=color, label=f"{name} (MF bound, AIS log Z)")
            continue
        ax.plot(c[1:, 0], c[1:, 1], "o-", color=color, label=name, ms=3)
    ax.axvline(args.updates / 2, color="k", lw=0.8, ls=":", label="H-APCD starts shifting")
    ax.set_xlabel("updates")
    ax.set_ylabel("test log-likelihood (nats)")
    ax.set_title(f"DBM {'-'.join(map(str, args.sizes))}, {args.train} MNIST digits")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    main()
