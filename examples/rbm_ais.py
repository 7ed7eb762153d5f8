"""AIS test log-likelihood of an RBM on binarized MNIST, checked against the exact value.

1. Train a 784 x 20 binary RBM on binarized MNIST with persistent contrastive
   divergence (``ui.learn.pcd``: 100 persistent block-Gibbs particles, one sweep per
   update, the exact free-energy positive phase), in a jitted ``lax.scan`` per epoch.
2. Exact average test log-likelihood: ``ui.exact`` sums the 784 visibles in closed form
   and enumerates the 2^20 hidden configurations, so ``log Z`` is exact.
3. AIS (``ui.smc.ais_log_likelihood``): base-rate base fitted to the training pixels
   (Laplace-smoothed, Salakhutdinov & Murray 2008), hidden units summed analytically
   along the path, one block-Gibbs sweep per beta, linear and SM08-shaped schedules,
   for several numbers of betas and of runs; every estimate is compared with the
   exact value.

Writes ``results.json`` and ``ais_vs_exact.png`` into ``--out`` (default
``out/rbm_ais``), plus the trained ``params.npz``.  ``--quick`` (< 3 min on 2 CPU
cores) trains on 20,000 images for 2 epochs and tries fewer AIS settings; the full
run (10 epochs on 50,000 images, up to 14,501 betas and 1,024 runs) takes ~15 min.

Data: ``../shared/data/binarized_mnist.npz`` beside the repository root (or ``--data``), the fixed
binarization of Larochelle & Murray (2011); pixels are packed with ``np.packbits``.

Usage::

    python examples/rbm_ais.py --quick
    python examples/rbm_ais.py --out out/rbm_ais
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
from ugm_infer import exact, models

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_MNIST, provenance  # noqa: E402

DEFAULT_DATA = DEFAULT_MNIST


def load_mnist(path: str) -> tuple[np.ndarray, np.ndarray]:
    d = np.load(path)
    train, test = (np.unpackbits(d[k], axis=1, count=784).astype(np.float32) for k in ("train", "test"))
    return train, test


def train_rbm(key, model, train, *, epochs, batch_size, learning_rate, num_particles):
    """PCD-1 with ``ui.learn.pcd``; one jitted ``lax.scan`` over the minibatches of an epoch."""
    key_init, key_params, key_train = jax.random.split(key, 3)
    params = model.init_params(key_params, scale=0.01, data=train)
    steps_per_epoch = train.shape[0] // batch_size
    total = epochs * steps_per_epoch
    # constant, then linearly decayed to 10% over the second half (a stable PCD recipe)
    schedule = optax.join_schedules(
        [optax.constant_schedule(learning_rate), optax.linear_schedule(learning_rate, 0.1 * learning_rate, total // 2)],
        [total - total // 2],
    )
    learner = ui.learn.pcd(model, optax.sgd(schedule, momentum=0.5), num_particles=num_particles, visible="v")
    state = learner.init(key_init, params)
    data = jnp.asarray(train)

    @jax.jit
    def epoch(state, key):
        key_perm, key_steps = jax.random.split(key)
        perm = jax.random.permutation(key_perm, data.shape[0])[: steps_per_epoch * batch_size]
        batches = data[perm].reshape(steps_per_epoch, batch_size, -1)

        def body(state, inp):
            k, batch = inp
            state, info = learner.step(k, state, {"v": batch})
            return state, info.grad_norm

        return jax.lax.scan(body, state, (jax.random.split(key_steps, steps_per_epoch), batches))

    for e, k in enumerate(jax.random.split(key_train, epochs)):
        t = time.time()
        state, norms = epoch(state, k)
        print(f"  epoch {e + 1}/{epochs}: mean grad norm {float(norms.mean()):.3f} ({time.time() - t:.1f} s)", flush=True)
    return state.params


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (< 3 min on 2 cores)")
    parser.add_argument("--out", default="out/rbm_ais")
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--hidden", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    key = jax.random.key(args.seed)
    key_train, key_ais = jax.random.split(key)

    train, test = load_mnist(args.data)
    if args.quick:
        train = train[:20000]
        epochs, betas_grid, runs_grid, runs_fixed, betas_fixed = 2, [100, 300, 1000], [16, 256], 64, 300
    else:
        epochs, betas_grid, runs_grid, runs_fixed = 10, [300, 1000, 3000, 10000, 14501], [16, 64, 1024], 256
        betas_fixed = 3000
    model = models.rbm(784, args.hidden)
    print(f"training rbm(784, {args.hidden}) with ui.learn.pcd on {train.shape[0]} images, {epochs} epochs", flush=True)
    t = time.time()
    params = train_rbm(key_train, model, train, epochs=epochs, batch_size=100, learning_rate=0.05, num_particles=100)
    t_train = time.time() - t
    np.savez(os.path.join(args.out, "params.npz"), **{k: np.asarray(v) for k, v in params.items()})

    t = time.time()
    log_z = float(exact.log_partition(model, params))
    ll_exact = float(jnp.mean(exact.log_likelihood(model, params, {"v": test})))
    t_exact = time.time() - t
    print(f"exact: log Z = {log_z:.4f}, average test log-likelihood = {ll_exact:.4f} nats ({t_exact:.1f} s)", flush=True)

    runs = []

    def estimate(num_betas, num_runs, schedule, key):
        t = time.time()
        res = ui.smc.ais_log_likelihood(
            key,
            model,
            params,
            {"v": test},
            base_data={"v": train},
            num_runs=num_runs,
            num_betas=num_betas,
            schedule=schedule,
        )
        jax.block_until_ready(res.log_Z)
        row = dict(
            num_betas=num_betas,
            num_runs=num_runs,
            schedule=schedule,
            log_Z=float(res.log_Z),
            log_Z_se=float(res.log_Z_se),
            log_Z_error=float(res.log_Z) - log_z,
            test_ll=float(res.log_likelihood),
            test_ll_error=float(res.log_likelihood) - ll_exact,
            ess=float(res.ais.ess),
            seconds=time.time() - t,
        )
        runs.append(row)
        print(
            f"  AIS {schedule:6s} betas={num_betas:6d} runs={num_runs:5d}: "
            f"log Z {row['log_Z']:.4f} +- {row['log_Z_se']:.4f} "
            f"(error {row['log_Z_error']:+.4f} = {row['log_Z_error'] / max(row['log_Z_se'], 1e-12):+.1f} se), "
            f"ESS {row['ess']:.2f}, {row['seconds']:.1f} s",
            flush=True,
        )

    keys = iter(jax.random.split(key_ais, 64))
    print(f"AIS vs number of betas ({runs_fixed} runs), linear and SM08-shaped schedules:", flush=True)
    for nb in betas_grid:
        for schedule in ("linear", "sm08"):
            estimate(nb, runs_fixed, schedule, next(keys))
    print(f"AIS vs number of runs ({betas_fixed} betas, SM08-shaped schedule):", flush=True)
    for nr in runs_grid:
        estimate(betas_fixed, nr, "sm08", next(keys))

    base_ll = float(
        np.mean(
            test @ np.log((train.sum(0) + 1) / (train.shape[0] + 2))
            + (1 - test) @ np.log1p(-(train.sum(0) + 1) / (train.shape[0] + 2))
        )
    )
    out = dict(
        command="python examples/rbm_ais.py" + (" --quick" if args.quick else "") + f" --out {args.out}",
        quick=args.quick,
        num_hidden=args.hidden,
        num_train=int(train.shape[0]),
        num_test=int(test.shape[0]),
        epochs=epochs,
        exact_log_Z=log_z,
        exact_test_ll=ll_exact,
        base_rate_test_ll=base_ll,
        ais=runs,
        seconds=dict(train=t_train, exact=t_exact, total=time.time() - t_start),
        backend=jax.default_backend(),
    )
    out["provenance"] = provenance(argv, __file__)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(out, f, indent=2)
    plot(out, os.path.join(args.out, "ais_vs_exact.png"), runs_fixed, betas_fixed)
    print(f"wrote {args.out}/results.json and ais_vs_exact.png ({time.time() - t_start:.0f} s total)")
    return out


def plot(out, path, runs_fixed, betas_fixed):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rows = out["ais"]
    for ax, key, fixed, label in (
        (axes[0], "num_betas", ("num_runs", runs_fixed), "number of betas"),
        (axes[1], "num_runs", ("num_betas", betas_fixed), "number of AIS runs"),
    ):
        for sched, marker in (("linear", "o"), ("sm08", "s")):
            sel = [r for r in rows if r[fixed[0]] == fixed[1] and r["schedule"] == sched]
            if key == "num_runs":  # the runs sweep uses the sm08 schedule
                sel = [r for r in rows if r["num_betas"] == fixed[1] and r["schedule"] == sched]
            if not sel:
                continue
            sel.sort(key=lambda r: r[key])
            ax.errorbar(
                [r[key] for r in sel],
                [r["log_Z"] for r in sel],
                yerr=[3 * r["log_Z_se"] for r in sel],
                marker=marker,
                capsize=3,
                linestyle="-",
                alpha=0.8,
                label=f"AIS ({sched} schedule, +-3 se)",
            )
        ax.axhline(out["exact_log_Z"], color="k", linestyle="--", label="exact log Z")
        ax.set_xscale("log")
        ticks = sorted({r[key] for r in rows if (r[fixed[0]] == fixed[1]) == (key == "num_betas") or key == "num_runs"})
        ax.minorticks_off()
        ax.set_xticks(ticks, [str(t) for t in ticks], rotation=35, fontsize=8)
        ax.set_xlabel(label + f" ({fixed[0].replace('num_', '')} = {fixed[1]})")
        ax.set_ylabel("log Z")
        ax.legend(fontsize=8)
    fig.suptitle(f"RBM 784x{out['num_hidden']} on binarized MNIST: exact test LL {out['exact_test_ll']:.2f} nats")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
