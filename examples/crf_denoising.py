"""CRF denoising of an X-shaped image: PCD versus PF versus MCMC-MLE (per-input particle sets).

The CRF experiment of Asuncion, Liu, Ihler and Smyth (2010), *Particle filtered
MCMC-MLE with connections to contrastive divergence*, ICML, section 4.3, with the
potentials we use stated explicitly (the paper's exact parametrisation was not
available to us):

* clean image: an X-shaped ``32 x 32`` binary image ``y`` (labels in {0, 1});
* 15 noisy copies ``o = (2 y - 1) + N(0, 1)`` per pixel; 10 for training, 5 for
  testing;
* CRF ``ui.models.grid_crf(32, 32)`` on the open 4-neighbour grid, input features
  from ``ui.models.difference_features(o)``: node ``[1, o_i]``, edge
  ``[1, |o_i - o_j|]``; energy
  :math:`E = -\\sum_i y_i\\,\\theta_n^\\top [1, o_i] - \\sum_{ij} [y_i = y_j]\\,
  \\theta_e^\\top [1, |o_i - o_j|]` (4 parameters, shared by all pixels / edges);
* learners with ``S`` particles **per training image** (block-Gibbs moves), all from
  :math:`\\theta = 0` with the same SGD step sizes :math:`a_t = \\mathrm{lr}/(1 + t/b)`
  on the per-pixel gradient:

  - **PCD** (``ui.learn.conditional.conditional_pcd``, Alg. 3): one sweep of every
    set at every update;
  - **PF** (``conditional_pf_mcmc_mle``, Alg. 2): per-image importance weights,
    resample + rejuvenate an image's set only when its ESS < ``ess_threshold * S``;
  - **MCMC-MLE** (``conditional_mcmc_mle``, Alg. 1): ``m`` sweeps at the anchor, then
    importance-weighted updates until ``max_inner`` updates, then a new round;

* metric: per-pixel error rate on the 5 test images of the MAP labelling found by
  ICM (``ui.predict.icm``, started from the node-potential labelling), versus training
  wall time (compilation and evaluation excluded); baseline: thresholding ``o > 0``.
  For the final parameters also the error of simulated annealing
  (``ui.predict.simulated_annealing``) and of the max-marginal labelling
  (``ui.predict.max_marginals``, the per-pixel modes of Gibbs-estimated marginals).

Run ``python examples/crf_denoising.py`` (full: 32x32, 400 updates per learner) or
``--quick`` (CI: 16x16 image, 40 updates; < 90 s).  Both write ``crf_denoising.{json,png}``
into ``--out`` (default ``out/crf_denoising``).  Results:
``docs/results/crf_denoising.md``.
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

from ugm_infer.applications.crf import difference_features, grid_crf, predict
from ugm_infer.learn import conditional as cl

METHODS = ("PCD", "PF", "MCMC-MLE")


def x_image(size: int) -> np.ndarray:
    """An X: the two diagonals, about size/8 pixels thick, as a {0, 1} image."""
    r, c = np.indices((size, size))
    width = max(1, size // 8)
    return ((np.abs(r - c) < width) | (np.abs(r + c - (size - 1)) < width)).astype(np.float32)


def make_data(seed: int, size: int, num_train: int, num_test: int):
    clean = x_image(size)
    rng = np.random.default_rng(seed)
    noisy = (2 * clean - 1)[None] + rng.standard_normal((num_train + num_test, size, size)).astype(np.float32)
    return clean, noisy[:num_train], noisy[num_train:]


def random_site_kernel(num_updates: int):
    """``(init, kernel)``: ``num_updates`` heat-bath updates of uniformly random pixels (random-scan Gibbs).

    Asuncion et al. (2010, sec. 4.3) rejuvenate with 100 random-scan steps (a tenth of a
    sweep of the 1,024 pixels) and re-sample MCMC-MLE's particles with 3 x 1,024.  Each
    update evaluates the log-density at both labels of the pixel.
    """
    from ugm_infer.kernels.gibbs import GibbsInfo, GibbsState, init

    def kernel(rng_key, state, logdensity_fn):
        y0 = state.position["y"]

        def body(flat, k):
            k_site, k_u = jax.random.split(k)
            i = jax.random.randint(k_site, (), 0, flat.size)
            l0 = logdensity_fn({"y": flat.at[i].set(0).reshape(y0.shape)})
            l1 = logdensity_fn({"y": flat.at[i].set(1).reshape(y0.shape)})
            return flat.at[i].set((jax.random.uniform(k_u) < jax.nn.sigmoid(l1 - l0)).astype(flat.dtype)), None

        flat, _ = jax.lax.scan(body, y0.reshape(-1), jax.random.split(rng_key, num_updates))
        y = flat.reshape(y0.shape)
        return GibbsState({"y": y}), GibbsInfo(jnp.sum(y != y0))

    return init, kernel


def build_learner(name: str, model, args, num_pixels: int):
    lr = optax.scale_by_schedule(lambda t: -args.lr / num_pixels / (1.0 + t / args.decay_b))
    opt = optax.chain(lr)
    kernel = random_site_kernel(args.scan_updates) if args.scan_updates else None
    if name == "PCD":
        if kernel is not None:
            return cl.conditional_sap(model, kernel, opt, args.num_particles, name="conditional_pcd")
        return cl.conditional_pcd(model, opt, args.num_particles)
    if name == "PF":
        return cl.conditional_pf_mcmc_mle(
            model,
            kernel,
            opt,
            args.num_particles,
            ess_threshold=args.ess_threshold,
            num_rejuvenation_steps=args.sweeps,
            num_burnin_steps=args.burnin,
        )
    return cl.conditional_mcmc_mle(
        model,
        random_site_kernel(args.mle_scan_updates) if args.mle_scan_updates else None,
        opt,
        args.num_particles,
        num_mcmc_steps=args.mle_sweeps,
        max_inner_steps=args.max_inner,
        grad_threshold=args.grad_threshold,
    )


def run(args) -> dict:
    size = args.size
    model = grid_crf(size, size)
    clean, train_o, test_o = make_data(args.seed, size, args.num_train, args.num_test)
    x_train = difference_features(train_o, model.edges)
    x_test = difference_features(test_o, model.edges)
    y_train = jnp.broadcast_to(jnp.asarray(clean), (args.num_train, size, size))
    data = {"x": x_train, "y": y_train}
    num_pixels = size * size

    @jax.jit
    def test_error_with(theta, x_test):
        def one(xi):
            cp = model.condition(theta, xi)
            node = xi["node"] @ theta["node"]
            start = {"y": (node > 0).astype(jnp.float32).reshape(size, size)}
            return predict.icm(model, cp, start, max_sweeps=50).state["y"]

        pred = jax.vmap(one)(x_test)
        return jnp.mean(pred != clean[None])

    def test_error(theta):
        return test_error_with(theta, x_test)

    @jax.jit
    def final_errors_with(key, theta, x_test):
        """Test error of simulated annealing (then ICM) and of the max-marginal (MPM) labelling."""
        betas = predict.geometric_betas(0.1, 10.0, args.sa_stages)

        def one(k, xi):
            cp = model.condition(theta, xi)
            start = {"y": jnp.zeros((size, size))}
            k1, k2 = jax.random.split(k)
            sa = predict.simulated_annealing(k1, model, cp, start, betas).state["y"]
            mpm = predict.max_marginals(k2, model, cp, start, num_samples=args.mpm_samples, num_burnin=20).state["y"]
            return sa, mpm

        sa, mpm = jax.vmap(one)(jax.random.split(key, args.num_test), x_test)
        return jnp.mean(sa != clean[None]), jnp.mean(mpm != clean[None])

    def final_errors(key, theta):
        return final_errors_with(key, theta, x_test)

    baseline = float(np.mean((test_o > 0) != clean[None]))
    results = {"threshold_error": baseline, "methods": {}}
    theta0 = model.init_params(jax.random.key(0))
    for name in args.methods:
        learner = build_learner(name, model, args, num_pixels)
        state = learner.init(jax.random.key(args.seed + 1), theta0, data)

        def chunk_with(s, keys, d, learner=learner):
            def body(s, k):
                s, info = learner.step(k, s, d)
                return s, None

            return jax.lax.scan(body, s, keys)[0]

        chunk_with = jax.jit(chunk_with)

        def chunk(s, keys, chunk_with=chunk_with):
            return chunk_with(s, keys, data)

        every = args.eval_every
        keys = jax.random.split(jax.random.key(args.seed + 2), args.updates).reshape(-1, every)
        # compile outside the clock
        jax.block_until_ready(chunk(state, keys[0]))
        test_error(state.params).block_until_ready()

        def sweeps_done(state, name=name):
            """Gibbs sweeps per particle so far (the kernel work, independent of machine load)."""
            per = args.scan_updates / num_pixels if args.scan_updates else 1.0  # sweeps per kernel step
            if name == "PCD":
                return float(state.step) * per
            if name == "PF":
                return float(args.burnin + args.sweeps * np.mean(np.asarray(state.num_resampled))) * per
            mle_per = args.mle_scan_updates / num_pixels if args.mle_scan_updates else 1.0
            return float(args.mle_sweeps * int(state.round)) * mle_per

        elapsed, times, errors, updates = 0.0, [0.0], [float(test_error(state.params))], [0]
        sweeps = [sweeps_done(state)]
        for c in range(keys.shape[0]):
            t0 = time.perf_counter()
            state = jax.block_until_ready(chunk(state, keys[c]))
            elapsed += time.perf_counter() - t0
            times.append(elapsed)
            errors.append(float(test_error(state.params)))
            updates.append((c + 1) * every)
            sweeps.append(sweeps_done(state))
        extra = {}
        if name == "PF":
            extra["resample_fraction"] = float(np.mean(np.asarray(state.num_resampled)) / args.updates)
        if name == "MCMC-MLE":
            extra["rounds"] = int(state.round)
        sa_err, mpm_err = final_errors(jax.random.key(args.seed + 3), state.params)
        extra["final_sa_error"] = float(sa_err)
        extra["final_mpm_error"] = float(mpm_err)
        results["methods"][name] = {
            "time_s": times,
            "updates": updates,
            "sweeps": sweeps,
            "test_error": errors,
            "final_theta": jax.tree.map(lambda a: np.asarray(a).tolist(), state.params),
            **extra,
        }
        print(
            f"{name:9s} final test error {errors[-1]:.4f}  min {min(errors):.4f}  train time {elapsed:.2f}s  "
            + " ".join(f"{k}={v}" for k, v in extra.items()),
            flush=True,
        )
    print(f"threshold o > 0 baseline error {baseline:.4f}")
    return results


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in results["methods"].items():
        ax.plot(r["time_s"], r["test_error"], marker="o", ms=3, label=name)
    ax.axhline(results["threshold_error"], color="gray", ls=":", label="threshold o > 0")
    ax.set_xlabel("training wall time (s, compilation and evaluation excluded)")
    ax.set_ylabel("per-pixel test error of the ICM MAP image")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("CRF denoising (Asuncion et al. 2010, sec. 4.3)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def summarize(dirs: list[str], out: str) -> dict:
    """Combine the JSONs of several runs (e.g. seeds): a table of final numbers and one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for d in dirs:
        with open(os.path.join(d, "crf_denoising.json")) as f:
            runs.append(json.load(f))
    names = list(runs[0]["methods"])
    table = {}
    for name in names:
        rows = [r["methods"][name] for r in runs]
        table[name] = {
            key: [float(v) for v in vals]
            for key, vals in {
                "final_icm_error": [x["test_error"][-1] for x in rows],
                "min_icm_error": [min(x["test_error"]) for x in rows],
                "final_sa_error": [x["final_sa_error"] for x in rows],
                "final_mpm_error": [x["final_mpm_error"] for x in rows],
                "train_time_s": [x["time_s"][-1] for x in rows],
                "time_to_0.06_s": [
                    next((t for t, e in zip(x["time_s"], x["test_error"]) if e <= 0.06), float("nan")) for x in rows
                ],
                "updates_to_0.06": [
                    next((u for u, e in zip(x["updates"], x["test_error"]) if e <= 0.06), float("nan")) for x in rows
                ],
                "sweeps_to_0.06": [
                    next((u for u, e in zip(x.get("sweeps", []), x["test_error"]) if e <= 0.06), float("nan")) for x in rows
                ],
                "total_sweeps": [x.get("sweeps", [float("nan")])[-1] for x in rows],
            }.items()
        }
        if "resample_fraction" in rows[0]:
            table[name]["resample_fraction"] = [x["resample_fraction"] for x in rows]
    table["threshold"] = {"error": [r["threshold_error"] for r in runs]}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    colors = dict(zip(names, ["C0", "C1", "C2"]))
    for r in runs:
        for name in names:
            m = r["methods"][name]
            lab = name if r is runs[0] else None
            axes[0].plot(m["time_s"], m["test_error"], color=colors[name], alpha=0.7, marker="o", ms=2, label=lab)
            axes[1].plot(m["updates"], m["test_error"], color=colors[name], alpha=0.7, marker="o", ms=2, label=lab)
            if "sweeps" in m:
                axes[2].plot(m["sweeps"], m["test_error"], color=colors[name], alpha=0.7, marker="o", ms=2, label=lab)
    for ax in axes:
        ax.axhline(np.mean(table["threshold"]["error"]), color="gray", ls=":", label="threshold o > 0")
        ax.set_yscale("log")
        ax.set_ylabel("per-pixel test error (ICM MAP)")
    axes[0].set_xlabel("training wall time (s)")
    axes[1].set_xlabel("updates")
    axes[2].set_xlabel("Gibbs sweeps per particle (kernel work)")
    axes[2].set_xscale("symlog", linthresh=10)
    axes[2].set_xlim(left=0)
    axes[0].set_xscale("symlog", linthresh=1)
    axes[0].set_xlim(left=0)
    axes[0].legend()
    fig.suptitle(f"CRF denoising, {len(runs)} runs (Asuncion et al. 2010, sec. 4.3)")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "crf_denoising_summary.png"), dpi=80)
    with open(os.path.join(out, "crf_denoising_summary.json"), "w") as f:
        json.dump(table, f, indent=1)
    for name, row in table.items():
        print(name, {k: [round(v, 4) for v in vals] for k, vals in row.items()})
    return table


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI: 16x16 image, 40 updates")
    p.add_argument("--out", default="out/crf_denoising")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=None, help="image side (default 32, quick 16)")
    p.add_argument("--num-train", type=int, default=10)
    p.add_argument("--num-test", type=int, default=5)
    p.add_argument("--updates", type=int, default=None, help="updates per learner (default 400, quick 40)")
    p.add_argument("--eval-every", type=int, default=None, help="updates between evaluations (default 20, quick 10)")
    p.add_argument("--num-particles", type=int, default=10, help="S, particles per training image")
    p.add_argument("--sweeps", type=int, default=1, help="PF: Gibbs sweeps of a rejuvenation")
    p.add_argument("--burnin", type=int, default=5, help="PF: Gibbs sweeps at theta_0 before the first update")
    p.add_argument("--ess-threshold", type=float, default=0.5, help="PF resamples an image when ESS < this * S")
    p.add_argument("--mle-sweeps", type=int, default=5, help="MCMC-MLE: Gibbs sweeps at the start of a round")
    p.add_argument("--max-inner", type=int, default=10, help="MCMC-MLE: updates per round")
    p.add_argument("--grad-threshold", type=float, default=1e-3, help="MCMC-MLE: L1 gradient norm ending a round")
    p.add_argument("--lr", type=float, default=1.0, help="step size on the per-pixel gradient")
    p.add_argument("--decay-b", type=float, default=100.0, help="lr_t = lr / (1 + t / b)")
    p.add_argument("--sa-stages", type=int, default=200, help="simulated annealing: inverse temperatures")
    p.add_argument("--mpm-samples", type=int, default=200, help="max-marginals: Gibbs draws per test image")
    p.add_argument("--scan-updates", type=int, default=0, help="PCD/PF kernel step: this many random-pixel updates")
    p.add_argument("--mle-scan-updates", type=int, default=0, help="MCMC-MLE kernel step: this many random-pixel updates")
    p.add_argument(
        "--paper",
        action="store_true",
        help="Asuncion et al.'s settings: S=100, ESS threshold 0.95 S, 100 random-pixel updates per rejuvenation, "
        "3 x 1024 per MCMC-MLE round (rounds of at most 100 updates), constant step 0.001 (per image)",
    )
    p.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--summarize", nargs="*", default=None, help="only combine the JSONs in these run folders")
    args = p.parse_args(argv)
    if args.paper:
        args.num_particles, args.ess_threshold, args.scan_updates, args.sweeps, args.burnin = 100, 0.95, 100, 1, 1
        args.mle_scan_updates, args.mle_sweeps, args.max_inner = 3 * 1024, 1, 100
        args.lr, args.decay_b = 0.001 * 1024, float("inf")  # 0.001 on the per-image gradient = 1.024 per pixel
    if args.summarize:
        return summarize(args.summarize, args.out)
    args.size = args.size or (16 if args.quick else 32)
    args.updates = args.updates or (40 if args.quick else 400)
    args.eval_every = args.eval_every or (10 if args.quick else 20)
    if args.updates % args.eval_every:
        p.error("--updates must be a multiple of --eval-every")
    t0 = time.time()
    results = run(args)
    results["config"] = {k: v for k, v in vars(args).items()}
    results["platform"] = {"python": sys.version.split()[0], "jax": jax.__version__, "machine": platform.machine()}
    results["total_wall_s"] = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "crf_denoising.json"), "w") as f:
        json.dump(results, f, indent=1)
    plot(results, os.path.join(args.out, "crf_denoising.png"))
    print(f"wrote {args.out}/crf_denoising.json and .png")
    print(f"total {results['total_wall_s']:.1f}s")
    return results


if __name__ == "__main__":
    main()
