"""PF versus PCD versus MCMC-MLE on the ERGM triad model (Asuncion et al. 2010, section 4.2).

Setting (Asuncion, Liu, Ihler and Smyth 2010, *Particle filtered MCMC-MLE with
connections to contrastive divergence*, ICML, section 4.2):

* undirected graphs on 10 nodes (45 dyads), the triad model
  ``ergm(10, ("edges", "kstar2", "triangles"))``;
* true :math:`\\theta \\sim \\mathcal N(0, I_3)`, **rejected if degenerate**.
  Criterion: 500 chains of the edge-toggle Gibbs sampler, half started from the
  empty graph and half from the complete graph, ``--burn-in`` sweeps each; the
  draw is rejected when the mean density lies outside [0.05, 0.95] or when the two
  halves' mean densities differ by more than 0.05 (the chains have not forgotten
  their start: a bimodal, near-degenerate model), or when the MPLE of the
  training graphs does not exist;
* 500 training graphs: the final states of those 500 long chains (independent);
* three learners, each starting at the MPLE (:func:`ugm_infer.applications.ergm.ergm_mple`),
  with the same ``S`` initial particles (``--particle-burn-in`` toggle sweeps at the
  MPLE from the empty graph: draws at :math:`\theta_0`, Alg. 2 line 1), moved by the O(n) edge-toggle Gibbs kernel
  (:data:`ugm_infer.applications.ergm.ergm_toggle`), full-batch updates through
  :func:`ugm_infer.fit` with the same optax optimizer (Adam, step
  ``lr * b / (b + t)``):

  - **PF** (``ui.learn.pf_mcmc_mle``, Alg. 2): importance weights along the
    parameter trail; resample and rejuvenate (``--sweeps`` sweeps) only when the
    ESS falls below ``ess_threshold * S``;
  - **PF-capped**: the same, plus our staleness safeguard (not in the paper):
    also resample and rejuvenate after at most ``--pf-max-updates`` reweighting
    updates (``max_updates_between_rejuvenation``, default 20) and when theta has
    moved more than ``--pf-max-distance`` (L2, default 0.1) since the last
    rejuvenation (``max_param_distance``);
  - **PCD** (``ui.learn.sap`` with the toggle Gibbs kernel, = Alg. 3):
    ``--sweeps`` sweeps at every update;
  - **MCMC-MLE** (``ui.learn.mcmc_mle``, Alg. 1): ``--mle-sweeps`` sweeps at the
    anchor, then importance-weighted updates until the L1 gradient norm is below a
    threshold or ``--max-inner`` updates are done;

* metric: the L1 parameter error :math:`\\lVert\\hat\\theta - \\theta^*\\rVert_1`
  versus training wall time (compilation and evaluation excluded), the median over
  ``--trials`` true models.  The paper's finding: PF reaches a low error fastest.

Run ``python examples/ergm_triad.py`` (full: 5 true models, 400 updates, all four
learners), ``--paper`` (the paper's settings, 40,000 updates; see ``--help``) or
``--quick`` (1 model, 60 updates, PF-capped, PCD and MCMC-MLE).  Writes
``ergm_triad.{json,png}`` into ``--out`` (default ``out/ergm_triad``).  Every learner's
curve on every true model is saved in ``--out/done`` when it finishes; re-running the
same command resumes from there (the data of a true model are regenerated from the seed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.applications.ergm import ergm, ergm_mple, ergm_simulate, ergm_toggle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import provenance  # noqa: E402

METHODS = ("PF", "PF-capped", "PCD", "MCMC-MLE")
QUICK_METHODS = ("PF-capped", "PCD", "MCMC-MLE")
NUM_NODES = 10


def draw_true_model(model, key, args):
    """theta ~ N(0, I) until not degenerate; returns (theta, training graphs, diagnostics, rejected)."""
    rejected = []
    for attempt in range(200):
        key, key_theta, key_sim = jax.random.split(key, 3)
        theta = np.asarray(jax.random.normal(key_theta, (model.num_terms,)), np.float64)
        half = args.num_train // 2
        init = np.concatenate(
            [np.zeros((half, model.num_dyads), np.int8), np.ones((args.num_train - half, model.num_dyads), np.int8)]
        )
        sim = ergm_simulate(
            model, key_sim, model.params_from_theta(theta), 1, num_chains=args.num_train, burn_in=args.burn_in, init=init
        )
        graphs = sim["y"][:, -1]
        dens = graphs.mean(1)
        d_all, d_empty, d_full = float(dens.mean()), float(dens[:half].mean()), float(dens[half:].mean())
        reason = None
        if not 0.05 <= d_all <= 0.95:
            reason = f"mean density {d_all:.3f} outside [0.05, 0.95]"
        elif abs(d_empty - d_full) > 0.05:
            reason = f"chains from empty / complete graphs disagree: density {d_empty:.3f} vs {d_full:.3f}"
        else:
            try:
                mple = ergm_mple(model, graphs)
            except ValueError as err:
                reason = f"MPLE does not exist ({err})"
        if reason is None:
            info = {"attempts": attempt + 1, "density": d_all, "density_from_empty": d_empty, "density_from_full": d_full}
            return theta, graphs, mple, info, rejected
        rejected.append({"theta": theta.tolist(), "reason": reason})
    raise RuntimeError("no non-degenerate theta in 200 draws")


def make_learner(name, model, args, init_particles):
    schedule = ui.learn.robbins_monro(args.lr * args.decay_b, args.decay_b)
    opt = optax.adam(schedule) if args.optimizer == "adam" else optax.sgd(schedule)
    s, n = args.num_particles, args.sweeps
    if name in ("PF", "PF-capped"):
        capped = name == "PF-capped"
        return ui.learn.pf_mcmc_mle(
            model,
            ergm_toggle,
            opt,
            s,
            ess_threshold=args.ess_threshold,
            weight_temperature=args.weight_temperature,
            num_rejuvenation_steps=n,
            init_particles=init_particles,
            max_updates_between_rejuvenation=args.pf_max_updates if capped and args.pf_max_updates > 0 else None,
            max_param_distance=args.pf_max_distance if capped and args.pf_max_distance > 0 else None,
        )
    if name == "PCD":
        return ui.learn.sap(model, ergm_toggle, opt, s, num_steps_per_update=n, init_particles=init_particles)
    if name == "MCMC-MLE":
        return ui.learn.mcmc_mle(
            model,
            ergm_toggle,
            opt,
            s,
            num_mcmc_steps=args.mle_sweeps,
            grad_threshold=args.grad_threshold,
            max_inner_steps=args.max_inner,
            init_particles=init_particles,
        )
    raise ValueError(f"unknown method {name!r}")


def _settings(args) -> dict:
    """The arguments that determine a learner's curve on a trial (not the output folder or the list of methods)."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in ("out", "methods", "trials", "quick")}


def _load_done(path, args):
    """A finished learner's curve saved by an earlier run with the same settings, else None."""
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    return saved["curve"] if saved.get("settings") == json.loads(json.dumps(_settings(args))) else None


def run(args) -> dict:
    model = ergm(NUM_NODES, ("edges", "kstar2", "triangles"))
    key = jax.random.key(args.seed)
    trials = []
    for trial in range(args.trials):
        key, key_true, key_fit = jax.random.split(key, 3)
        t0 = time.perf_counter()
        theta, graphs, mple, info, rejected = draw_true_model(model, key_true, args)
        data = {"y": graphs}
        print(
            f"trial {trial}: theta* = {np.round(theta, 3).tolist()} (after {len(rejected)} rejected), "
            f"density {info['density']:.3f}, MPLE {np.round(mple.theta, 3).tolist()} "
            f"(L1 error {np.abs(mple.theta - theta).sum():.3f}); data {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        init_params = model.params_from_theta(mple.theta)
        # every learner starts from the same particles: draws at the MPLE (Alg. 2, line 1)
        key_fit, key_particles = jax.random.split(key_fit)
        start = ergm_simulate(
            model, key_particles, init_params, 1, num_chains=args.num_particles, burn_in=args.particle_burn_in
        )
        init_particles = {"y": start["y"][:, -1]}

        def eval_fn(params, theta=theta):
            return {"l1_error": float(np.abs(np.asarray(params["theta"], np.float64) - theta).sum())}

        curves = {}
        for name in args.methods:
            done_path = os.path.join(args.out, "done", f"trial{trial}_{name}.json")
            done = _load_done(done_path, args)
            if done is not None:  # resume: this learner finished on this trial in an earlier run with these settings
                curves[name] = done
                print(f"  {name:9s} loaded from {done_path}", flush=True)
                continue
            learner = make_learner(name, model, args, init_particles)
            res = ui.fit(
                learner,
                key_fit,
                data,
                params=init_params,
                num_epochs=args.updates,
                batch_size=args.num_train,
                shuffle=False,
                eval_every=args.eval_every,
                steps_per_jit=args.eval_every,  # one chunk length: one compilation
                eval_fn=eval_fn,
                progress=False,
                step_info=True,  # every update's info: the counts below use all of them
            )
            ev = res.history["evaluations"]
            steps = res.history["steps"]
            extra = {}
            if name in ("PF", "PF-capped"):
                extra["resample_fraction"] = float(np.mean(steps["resampled"]))
            if name == "MCMC-MLE":
                extra["rounds"] = int(np.sum(steps["resampled"]))
            curves[name] = {
                "wall_time": np.asarray(ev["wall_time"]).tolist(),
                "step": np.asarray(ev["step"]).tolist(),
                "l1_error": np.asarray(ev["l1_error"]).tolist(),
                "final_theta": np.asarray(res.params["theta"], np.float64).tolist(),
                "compile_seconds": float(res.history["timing"]["compile_seconds"]),
                **extra,
            }
            os.makedirs(os.path.dirname(done_path), exist_ok=True)
            with open(done_path, "w") as f:
                json.dump({"settings": _settings(args), "curve": curves[name]}, f)
            print(
                f"  {name:9s} final L1 error {curves[name]['l1_error'][-1]:.3f} after {curves[name]['wall_time'][-1]:.2f} s "
                f"training ({curves[name]['compile_seconds']:.1f} s compile) {extra}",
                flush=True,
            )
        trials.append(
            {
                "theta_true": theta.tolist(),
                "rejected": rejected,
                "data": info,
                "mple": mple.theta.tolist(),
                "mple_l1_error": float(np.abs(mple.theta - theta).sum()),
                "curves": curves,
            }
        )
    return {
        "experiment": "Asuncion et al. (2010) section 4.2: ERGM triad model, 10 nodes",
        "args": vars(args),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "load_average": list(os.getloadavg())},
        "trials": trials,
        "summary": summarise(trials, args.methods),
    }


BUDGETS = (0.25, 0.5, 1.0, 2.0)


def error_at(curve, budget):
    """L1 error of the last evaluation within ``budget`` training seconds (the final one if it finished earlier)."""
    t, e = np.asarray(curve["wall_time"]), np.asarray(curve["l1_error"])
    return float(e[np.flatnonzero(t <= budget)[-1]])


def summarise(trials, methods):
    out = {}
    for name in methods:
        curves = [t["curves"][name] for t in trials]
        out[name] = {
            "median_final_l1_error": float(np.median([c["l1_error"][-1] for c in curves])),
            "median_min_l1_error": float(np.median([min(c["l1_error"]) for c in curves])),
            "median_train_seconds": float(np.median([c["wall_time"][-1] for c in curves])),
            "median_l1_error_at_budget": {f"{b:g}s": float(np.median([error_at(c, b) for c in curves])) for b in BUDGETS},
            "final_l1_error_per_trial": [c["l1_error"][-1] for c in curves],
        }
        if name in ("PF", "PF-capped"):
            out[name]["resample_fraction_per_trial"] = [c["resample_fraction"] for c in curves]
        if "PF" in methods:
            # the paper's Figure 2(b): every learner's error at the training time PF took for all its updates
            pf_times = [t["curves"]["PF"]["wall_time"][-1] for t in trials]
            per_trial = [error_at(c, b) for c, b in zip(curves, pf_times)]
            out[name]["l1_error_at_pf_time_per_trial"] = per_trial
            out[name]["median_l1_error_at_pf_time"] = float(np.median(per_trial))
    out["MPLE"] = {"median_l1_error": float(np.median([t["mple_l1_error"] for t in trials]))}
    return out


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"PF": "C0", "PF-capped": "C3", "PCD": "C1", "MCMC-MLE": "C2"}
    methods = list(result["trials"][0]["curves"])
    for k, t in enumerate(result["trials"]):
        for name, c in t["curves"].items():
            ax.plot(c["wall_time"], c["l1_error"], color=colors.get(name), alpha=0.7, label=name if k == 0 else None)
        ax.axhline(t["mple_l1_error"], color="grey", ls=":", lw=0.8, label="MPLE" if k == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("training wall time (s, compilation and evaluation excluded)")
    ax.set_ylabel(r"L1 error $\|\hat\theta - \theta^*\|_1$")
    ax.set_title("every true model")
    ax.legend()
    # median over the true models, evaluation by evaluation (same update counts)
    for name in methods:
        times = np.median([t["curves"][name]["wall_time"] for t in result["trials"]], axis=0)
        errs = np.median([t["curves"][name]["l1_error"] for t in result["trials"]], axis=0)
        ax2.plot(times, errs, color=colors.get(name), label=name)
    ax2.axhline(np.median([t["mple_l1_error"] for t in result["trials"]]), color="grey", ls=":", lw=0.8, label="MPLE")
    ax2.set_yscale("log")
    ax2.set_xlabel("median training wall time (s)")
    ax2.set_ylabel("median L1 error over the true models")
    ax2.set_title("median over the true models")
    ax2.legend()
    fig.suptitle("ERGM triad model, 10 nodes, 500 graphs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI setting: 1 true model, 60 updates")
    p.add_argument("--out", default="out/ergm_triad")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=None, help="true models (default 5, quick 1, --paper 30)")
    p.add_argument("--updates", type=int, default=None, help="full-batch updates (default 400, quick 60)")
    p.add_argument("--eval-every", type=int, default=None, help="updates between evaluations (default updates/40)")
    p.add_argument("--num-train", type=int, default=500)
    p.add_argument("--burn-in", type=int, default=None, help="sweeps of the data chains (default 1000, quick 100)")
    p.add_argument("--num-particles", type=int, default=100, help="S")
    p.add_argument("--particle-burn-in", type=int, default=20, help="sweeps at the MPLE for the initial particles")
    p.add_argument("--sweeps", type=int, default=1, help="PF rejuvenation / PCD sweeps per update")
    p.add_argument("--ess-threshold", type=float, default=0.9, help="PF resamples when ESS < this * S")
    p.add_argument("--weight-temperature", type=float, default=1.0, help="PF: T of eq. 14 (1: plain importance weights)")
    p.add_argument("--mle-sweeps", type=int, default=20, help="MCMC-MLE: sweeps at the start of a round")
    p.add_argument("--max-inner", type=int, default=20)
    p.add_argument("--grad-threshold", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--decay-b", type=float, default=100.0, help="lr_t = lr * b / (b + t)")
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd"], help="optax.adam or plain optax.sgd")
    p.add_argument(
        "--paper",
        action="store_true",
        help="Asuncion et al.'s settings: plain gradient ascent from 0.005, decreasing as 0.005 b / (b + t) with "
        "b = 10,000 (our choice), 40,000 updates, 10 sweeps for the initial particles and per MCMC-MLE round, "
        "rounds of at most 100 updates, S = 100, n = 1, ESS threshold 0.9 S, weight temperature T = 1; PF-capped "
        "becomes the paper's VBM variant (a forced rejuvenation every 100 updates, no distance trigger); "
        "an evaluation every 200 updates, 30 true models (the paper: 100)",
    )
    p.add_argument(
        "--pf-max-updates",
        type=int,
        default=None,
        help="PF-capped: rejuvenate after at most this many updates (max_updates_between_rejuvenation; 0: off; "
        "default 20, --paper 100)",
    )
    p.add_argument(
        "--pf-max-distance",
        type=float,
        default=None,
        help="PF-capped: also rejuvenate when theta moved more than this (L2) since the last rejuvenation (0: off; "
        "default 0.1, --paper off)",
    )
    p.add_argument("--methods", nargs="*", default=None, help=f"default {METHODS}; quick {QUICK_METHODS}")
    args = p.parse_args(argv)
    if args.paper:
        args.optimizer, args.lr, args.decay_b, args.particle_burn_in = "sgd", 0.005, 10_000.0, 10
        args.mle_sweeps, args.max_inner = 10, 100
        args.num_particles, args.sweeps, args.ess_threshold, args.weight_temperature = 100, 1, 0.9, 1.0
        args.updates = args.updates or 40_000
        args.eval_every = args.eval_every or 200
        args.trials = args.trials or 30  # the paper runs 100 true models; 30 fit in about an hour on one core
        args.pf_max_updates = 100 if args.pf_max_updates is None else args.pf_max_updates
        args.pf_max_distance = 0.0 if args.pf_max_distance is None else args.pf_max_distance
    args.pf_max_updates = 20 if args.pf_max_updates is None else args.pf_max_updates
    args.pf_max_distance = 0.1 if args.pf_max_distance is None else args.pf_max_distance
    args.methods = args.methods or list(QUICK_METHODS if args.quick else METHODS)
    args.trials = args.trials or (1 if args.quick else 5)
    args.updates = args.updates or (60 if args.quick else 400)
    args.eval_every = args.eval_every or max(1, args.updates // (20 if args.quick else 40))
    args.burn_in = args.burn_in or (100 if args.quick else 1000)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    result = run(args)
    result["total_seconds"] = time.perf_counter() - t0
    result["provenance"] = provenance(argv, __file__)
    with open(os.path.join(args.out, "ergm_triad.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(args.out, "ergm_triad.png"))
    print(json.dumps(result["summary"], indent=1))
    print(f"total {result['total_seconds']:.1f} s; wrote {args.out}/ergm_triad.json and .png", file=sys.stderr)


if __name__ == "__main__":
    main()
