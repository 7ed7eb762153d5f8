"""APCD versus MF-PCD (and H-APCD) on random grid MRFs with hidden units.

The APCD paper's section 4.1 with an exact test log-likelihood:

1. Draw a random grid instance with ``ui.models.random_grid_hidden`` (binary units,
   biases ``U[-3, 3]``, weights ``N(0, 0.5)``, open boundaries) with 50% or 20% of the
   sites hidden.
2. Draw training and test sets of the visible units by long Gibbs runs (one
   independent block-Gibbs chain per example, ``--burn-in`` sweeps from a uniform
   start, hidden units dropped).
3. Learn the grid's parameters from the visibles alone, starting from zero, with
   ``ui.learn.mfpcd`` (mean-field E step), ``ui.learn.apcd`` (per-datum persistent
   latent chains, two time scales) and ``ui.learn.apcd(hybrid=True)`` (H-APCD), all with
   the same optimizer, the same persistent block-Gibbs model chains and minibatches.
4. Every ``--eval-every`` updates, the **exact** average test log-likelihood by the
   column transfer matrix ``ui.models.grid_hidden.grid_log_likelihood`` (``log Z`` and
   ``log Z(v)`` with the visibles clamped; ``2^size`` frontier states, so a 10x10 grid
   is exact and cheap).  Grids whose shorter side exceeds ~20 (the paper's 30x30) are
   out of its reach; this script does not estimate them (see
   docs/results/grid_apcd.md).

Writes ``results.json`` and ``grid_apcd.png`` (test LL against updates) into ``--out``.
``--quick`` (< 90 s on 2 loaded CPU cores): one 10x10 instance with 50% hidden,
MF-PCD and APCD, 60 updates, 300 training / 300 test vectors.

Usage::

    python examples/grid_apcd.py --quick --out out/grid_apcd_quick
    python examples/grid_apcd.py --out out/grid_apcd           # 10x10, 50% and 20% hidden
    python examples/grid_apcd.py --size 4 --out out/grid_apcd4 # the earlier 4x4 run

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
from ugm_infer.kernels.gibbs import build_kernel as gibbs_kernel
from ugm_infer.learn.apcd import apcd
from ugm_infer.learn.meanfield import mean_field, mfpcd
from ugm_infer.models.grid_hidden import grid_log_likelihood, grid_log_partition, random_grid_hidden


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
    elbo = -energy + ent - grid_log_partition(model, params)
    exact = grid_log_likelihood(model, params, {"v": jnp.asarray(v)})
    return float(jnp.mean(exact - elbo))


def gibbs_draws(key, model, params, num, burn_in):
    """``num`` independent draws of the visibles: one block-Gibbs chain each, ``burn_in`` sweeps."""
    kernel = gibbs_kernel(model, "block", burn_in, params=params)
    logdensity = model.logdensity_fn(params)
    key_init, key_run = jax.random.split(key)
    x0 = model.random_state(key_init, num)
    run = jax.jit(jax.vmap(lambda k, x: kernel(k, ui.kernels.gibbs.init(x), logdensity)[0].position))
    return run(jax.random.split(key_run, num), x0)["v"]


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
        return float(jnp.mean(grid_log_likelihood(model, params, {"v": test_v})))

    curve = [(0, test_ll(init_params))]
    for s, k in enumerate(jax.random.split(key_run, args.updates // seg)):
        state = segment(state, k)
        curve.append(((s + 1) * seg, test_ll(state.params)))
    train_ll = float(jnp.mean(grid_log_likelihood(model, state.params, {"v": train_v})))
    return curve, train_ll, state.params


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one 10x10 instance, 50%% hidden, 60 updates (< 90 s)")
    p.add_argument("--out", default="out/grid_apcd")
    p.add_argument("--size", type=int, default=10, help="grid side (exact transfer matrix: 2^size frontier states)")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="instance seeds")
    p.add_argument("--burn-in", type=int, default=1000, help="Gibbs sweeps per drawn example")
    p.add_argument("--train", type=int, default=1000, help="training examples")
    p.add_argument("--test", type=int, default=2000, help="test examples")
    p.add_argument("--updates", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--chains-per-datum", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--learners", nargs="+", default=["mfpcd", "apcd", "h_apcd"])
    p.add_argument("--summarize", metavar="RESULTS_JSON", help="print the table and redraw the figure of a (partial) run")
    args = p.parse_args(argv)
    if args.summarize:
        with open(args.summarize) as f:
            done = json.load(f)
        summarize(done["runs"])
        plot(
            done["runs"], argparse.Namespace(**done["args"]), os.path.join(os.path.dirname(args.summarize), "grid_apcd.png")
        )
        return
    if args.quick:
        args.seeds, args.updates, args.eval_every, args.train, args.test = [0], 60, 30, 300, 300
        args.burn_in = 200
        args.fractions = [0.5]
        args.learners = ["mfpcd", "apcd"]
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    runs = []
    for seed in args.seeds:  # seed outermost: an interrupted run still has both fractions
        for frac in args.fractions:
            key = jax.random.key(1000 * seed + int(100 * frac))
            k_inst, k_data, k_train = jax.random.split(key, 3)
            model, true_params = random_grid_hidden(k_inst, args.size, args.size, frac)
            draws = gibbs_draws(k_data, model, true_params, args.train + args.test, args.burn_in)
            train_v, test_v = draws[: args.train], draws[args.train :]
            true_test = float(jnp.mean(grid_log_likelihood(model, true_params, {"v": test_v})))
            true_train = float(jnp.mean(grid_log_likelihood(model, true_params, {"v": train_v})))
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
            finals = {}
            print(f"frac {frac} seed {seed}: mean-field gap at the true params {run['mf_gap_true_params']:.4f} nats")
            for name in args.learners:
                t1 = time.time()
                learner = make_learner(name, model, args.updates, args)
                curve, train_ll, curve_params = train(k_train, model, zero, train_v, test_v, learner, args)
                final = np.asarray(grid_log_likelihood(model, curve_params, {"v": test_v}), np.float64)
                finals[name] = final
                run["learners"][name] = {
                    "curve": curve,
                    "train_ll": train_ll,
                    "seconds": time.time() - t1,
                    "params": {k: np.asarray(x).tolist() for k, x in curve_params.items()},
                }
                if name != args.learners[0]:  # paired over the test vectors against the first learner
                    diff = final - finals[args.learners[0]]
                    run["learners"][name]["minus_" + args.learners[0]] = {
                        "mean": float(diff.mean()),
                        "se": float(diff.std(ddof=1) / np.sqrt(diff.size)),
                    }
                if name == "mfpcd":
                    run["mf_gap_mfpcd_params"] = mean_field_gap(model, curve_params, test_v)
                paired = run["learners"][name].get("minus_" + args.learners[0])
                print(
                    f"frac {frac} seed {seed} {name:7s} test LL {curve[-1][1]:.4f} (truth {true_test:.4f}) "
                    f"train LL {train_ll:.4f}  {time.time() - t1:.1f}s"
                    + (f"  minus {args.learners[0]}: {paired['mean']:+.4f} +- {paired['se']:.4f}" if paired else ""),
                    flush=True,
                )
            runs.append(run)
            with open(os.path.join(args.out, "results.json"), "w") as f:  # partial results as we go
                json.dump({"args": vars(args), "runs": runs, "seconds": time.time() - t0}, f, indent=1)
    out = {"args": vars(args), "runs": runs, "seconds": time.time() - t0}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    plot(runs, args, os.path.join(args.out, "grid_apcd.png"))
    print(f"total {time.time() - t0:.1f}s; wrote {args.out}/results.json and grid_apcd.png")


def summarize(runs):
    """Markdown table: final test LL minus the truth's, and paired differences to the first learner."""
    names = list(runs[0]["learners"])
    first = names[0]
    head = (
        "| hidden | seed | truth | MF gap at truth | MF gap at MF-PCD's | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{n} - {first}" for n in names[1:])
    )
    print(head + " |")
    print("|" + "---|" * (5 + 2 * len(names) - 1))
    for r in sorted(runs, key=lambda r: (-r["fraction"], r["seed"])):
        cells = [f"{int(100 * r['fraction'])}% ({r['hidden']})", str(r["seed"]), f"{r['true_test_ll']:.4f}"]
        cells.append(f"{r['mf_gap_true_params']:.4f}")
        cells.append(f"{r['mf_gap_mfpcd_params']:.4f}" if "mf_gap_mfpcd_params" in r else "")
        cells += [f"{r['learners'][n]['curve'][-1][1] - r['true_test_ll']:+.4f}" for n in names if n in r["learners"]]
        for n in names[1:]:
            d = r["learners"].get(n, {}).get("minus_" + first)
            cells.append(f"{d['mean']:+.4f} ± {d['se']:.4f}" if d else "")
        print("| " + " | ".join(cells) + " |")
    for frac in sorted({r["fraction"] for r in runs}, reverse=True):
        sub = [r for r in runs if r["fraction"] == frac]
        for n in names[1:]:
            diffs = np.array([r["learners"][n]["minus_" + first]["mean"] for r in sub if n in r["learners"]])
            if diffs.size:
                se = diffs.std(ddof=1) / np.sqrt(diffs.size) if diffs.size > 1 else float("nan")
                print(
                    f"{int(100 * frac)}% hidden, {n} - {first} over {diffs.size} instances: {diffs.mean():+.4f} ± {se:.4f}"
                )


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
