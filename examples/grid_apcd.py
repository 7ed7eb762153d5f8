"""APCD versus MF-PCD (and H-APCD) on random grid MRFs with hidden units.

The APCD paper's section 4.1 at a scale where the test log-likelihood is exact:

1. Draw a random grid instance with ``ui.models.random_grid_hidden`` (binary units,
   biases ``U[-3, 3]``, weights ``N(0, 0.5)``) with 50% or 20% of the sites hidden.
2. Draw training and test sets of the visible units exactly (``ui.exact.sample``:
   enumeration of all ``2^(H W)`` configurations, then the hidden units dropped).
3. Learn the grid's parameters from the visibles alone, starting from zero, with
   ``ui.learn.mfpcd`` (mean-field E step), ``ui.learn.apcd`` (per-datum persistent
   latent chains, two time scales) and ``ui.learn.apcd(hybrid=True)`` (H-APCD), all with
   the same optimizer, the same persistent block-Gibbs model chains and minibatches.
4. Every ``--eval-every`` updates, the exact average test log-likelihood
   (``ui.exact.log_likelihood``: hidden units summed by enumeration).

Writes ``results.json`` and ``grid_apcd.png`` (test LL against updates) into ``--out``.
``--quick`` (< 90 s on 2 loaded CPU cores): one 4x4 instance with 50% hidden,
MF-PCD and APCD, 200 updates.

Usage::

    python examples/grid_apcd.py --quick --out out/grid_apcd_quick
    python examples/grid_apcd.py --out out/grid_apcd
"""

from __future__ import annotations

import argparse
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
from ugm_infer.models.grid_hidden import random_grid_hidden


def mean_field_gap(model, params, v):
    """Average ``log p(v) - ELBO_MF(v)`` = ``KL(q_MF || p(h | v))`` (exact), in nats per datum.

    Measures how far the mean-field E step is from the exact posterior at ``params``:
    when it is ~0 the two learners' data terms coincide.
    """
    solve = jax.vmap(lambda vv: mean_field(model)(params, {"v": vv})[0])
    mu = solve(jnp.asarray(v))["h"]
    m = jnp.clip(mu, 1e-7, 1 - 1e-7)
    ent = -jnp.sum(m * jnp.log(m) + (1 - m) * jnp.log1p(-m), -1)
    energy = jax.vmap(lambda vv, mm: model.energy(params, {"v": vv, "h": mm}))(jnp.asarray(v), mu)
    elbo = -energy + ent - ui.exact.log_partition(model, params)
    exact = ui.exact.log_likelihood(model, params, {"v": jnp.asarray(v)})
    return float(jnp.mean(exact - elbo))


def make_learner(name, model, num_updates, args):
    lr = optax.linear_schedule(args.learning_rate, 0.1 * args.learning_rate, num_updates)
    opt = optax.adam(lr)
    if name == "mfpcd":
        return mfpcd(model, opt, args.particles)
    if name == "apcd":
        return apcd(model, opt, args.particles, num_chains_per_datum=args.chains_per_datum)
    if name == "h_apcd":
        return apcd(
            model, opt, args.particles, num_chains_per_datum=args.chains_per_datum, hybrid=True, num_steps=num_updates
        )
    raise ValueError(f"unknown learner {name!r}")


def train(key, model, init_params, train_v, test_v, learner, args):
    """Minibatch training in jitted ``lax.scan`` segments; exact test LL after each segment."""
    data = jnp.asarray(train_v)
    n = data.shape[0]
    key_init, key_run = jax.random.split(key)
    state = learner.init(key_init, init_params, {"v": data})
    seg = args.eval_every

    @jax.jit
    def segment(state, key):
        def body(state, k):
            k_batch, k_step = jax.random.split(k)
            idx = jax.random.choice(k_batch, n, (args.batch_size,), replace=False)
            state, _ = learner.step(k_step, state, {"v": data[idx]})
            return state, None

        return jax.lax.scan(body, state, jax.random.split(key, seg))[0]

    def test_ll(params):
        return float(jnp.mean(ui.exact.log_likelihood(model, params, {"v": test_v})))

    curve = [(0, test_ll(init_params))]
    for s, k in enumerate(jax.random.split(key_run, args.updates // seg)):
        state = segment(state, k)
        curve.append(((s + 1) * seg, test_ll(state.params)))
    train_ll = float(jnp.mean(ui.exact.log_likelihood(model, state.params, {"v": train_v})))
    return curve, train_ll, state.params


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one 4x4 instance, 50%% hidden, 200 updates (< 90 s)")
    p.add_argument("--out", default="out/grid_apcd")
    p.add_argument("--size", type=int, default=4, help="grid side (4: 2^16 states; 5: 2^25, slow)")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.2])
    p.add_argument("--seeds", type=int, default=2, help="random instances per fraction")
    p.add_argument("--train", type=int, default=500, help="training examples")
    p.add_argument("--test", type=int, default=2000, help="test examples")
    p.add_argument("--updates", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--chains-per-datum", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--learners", nargs="+", default=["mfpcd", "apcd", "h_apcd"])
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.updates, args.eval_every, args.test = 1, 200, 100, 500
        args.fractions = [0.5]
        args.learners = ["mfpcd", "apcd"]
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    runs = []
    for frac in args.fractions:
        for seed in range(args.seeds):
            key = jax.random.key(1000 * seed + int(100 * frac))
            k_inst, k_data, k_train = jax.random.split(key, 3)
            model, true_params = random_grid_hidden(k_inst, args.size, args.size, frac)
            draws = ui.exact.sample(k_data, model, true_params, args.train + args.test)
            train_v, test_v = draws["v"][: args.train], draws["v"][args.train :]
            true_test = float(jnp.mean(ui.exact.log_likelihood(model, true_params, {"v": test_v})))
            true_train = float(jnp.mean(ui.exact.log_likelihood(model, true_params, {"v": train_v})))
            zero = jax.tree.map(jnp.zeros_like, true_params)
            run = {
                "fraction": frac,
                "seed": seed,
                "hidden": int(model.variables["h"].size),
                "true_test_ll": true_test,
                "true_train_ll": true_train,
                "mf_gap_true_params": mean_field_gap(model, true_params, test_v),
                "learners": {},
            }
            print(f"frac {frac} seed {seed}: mean-field gap at the true params {run['mf_gap_true_params']:.4f} nats")
            for name in args.learners:
                t1 = time.time()
                learner = make_learner(name, model, args.updates, args)
                curve, train_ll, curve_params = train(k_train, model, zero, train_v, test_v, learner, args)
                run["learners"][name] = {"curve": curve, "train_ll": train_ll, "seconds": time.time() - t1}
                if name == "mfpcd":
                    run["mf_gap_mfpcd_params"] = mean_field_gap(model, curve_params, test_v)
                print(
                    f"frac {frac} seed {seed} {name:7s} test LL {curve[-1][1]:.4f} (truth {true_test:.4f}) "
                    f"train LL {train_ll:.4f}  {time.time() - t1:.1f}s",
                    flush=True,
                )
            runs.append(run)
    out = {"args": vars(args), "runs": runs, "seconds": time.time() - t0}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    plot(runs, args, os.path.join(args.out, "grid_apcd.png"))
    print(f"total {time.time() - t0:.1f}s; wrote {args.out}/results.json and grid_apcd.png")


def plot(runs, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fracs = sorted({r["fraction"] for r in runs}, reverse=True)
    fig, axes = plt.subplots(1, len(fracs), figsize=(5 * len(fracs), 3.6), squeeze=False)
    colors = {"mfpcd": "C0", "apcd": "C3", "h_apcd": "C2"}
    for ax, frac in zip(axes[0], fracs):
        for r in (r for r in runs if r["fraction"] == frac):
            truth = r["true_test_ll"]
            for name, res in r["learners"].items():
                c = np.asarray(res["curve"])
                label = name if r["seed"] == 0 else None
                ax.plot(c[1:, 0], c[1:, 1] - truth, color=colors.get(name), label=label, alpha=0.8)
        ax.axhline(0.0, color="k", lw=0.8, ls="--")
        ax.set_title(f"{args.size}x{args.size} grid, {int(100 * frac)}% hidden")
        ax.set_xlabel("updates")
        ax.set_ylabel("test LL - true params' test LL (nats)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    main()
