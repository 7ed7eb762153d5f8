"""ugm_infer kernels for the discrete sites of mixed NumPyro models, against NumPyro's own samplers.

Two problems with exact posteriors (``benchmarks/numpyro_mixed_models.py``):

``spike_slab``
    Spike-and-slab regression (conjugate normal-inverse-gamma prior) with predictors 0
    and 1 nearly collinear: the posterior splits between "x0 in" and "x1 in", and
    leaving one mode needs both indicators to change.  Error: the largest absolute
    error of the posterior inclusion probabilities (PIP) against the ``2^p`` exact ones.
``mixture``
    A Gaussian mixture with well-separated components (known noise, Dirichlet weights,
    exchangeable normal priors on the means).  Error: the largest absolute error of the
    co-clustering probabilities ``P(c_i = c_j | y)`` against the ``K^N`` exact ones
    (label-free, so label switching is not an error).

Samplers (4 chains each): ``UGMGibbs(NUTS(model))`` with block Gibbs, with tempered
transitions, and ``ParallelTempering`` of it over power posteriors (vectorized
chains), against ``DiscreteHMCGibbs(NUTS(model))`` and
``MixedHMC(HMC(model))`` (chains vectorized with ``chain_method=jax.vmap``, since they
refuse ``"vectorized"``).  Every sampler runs in its own process with a wall-time budget:
warm-up, then segments of draws continued from the last state; after every segment the
worker records the elapsed time, the error of the running estimate and the bulk ESS
(ArviZ, over the 4 chains) of discrete statistics.  A sampler that exceeds its budget
is stopped and reported with what it reached.

Usage::

    python benchmarks/bench_numpyro_mixed.py                # full run (about an hour on 2 cores)
    python benchmarks/bench_numpyro_mixed.py --quick        # smoke run for CI (small, short budgets)
    python benchmarks/bench_numpyro_mixed.py --problems mixture --samplers ugm_gibbs,discrete_hmc_gibbs

prints a table and writes ``benchmarks/results/numpyro_mixed.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLERS = ("ugm_gibbs", "ugm_tempered_transitions", "ugm_parallel_tempering", "discrete_hmc_gibbs", "mixed_hmc")
PROBLEMS = ("spike_slab", "mixture")

FULL = {
    "spike_slab": {"n": 50, "p": 12, "pair_corr": 0.97, "coef": 0.9, "noise": 0.8, "seed": 3},
    "mixture": {"num_points": 10, "centers": [-6.0, 0.0, 6.0], "prior_sd": 5.0, "seed": 0},
    "run": {"chains": 4, "warmup": 500, "segment": 250, "segments": 8, "budget": 600},
}
QUICK = {
    "spike_slab": {"n": 30, "p": 6, "pair_corr": 0.97, "coef": 0.9, "noise": 0.8, "seed": 3},
    "mixture": {"num_points": 6, "centers": [-6.0, 0.0, 6.0], "prior_sd": 5.0, "seed": 0},
    "run": {"chains": 2, "warmup": 50, "segment": 50, "segments": 2, "budget": 300},
}


def _models():
    spec = importlib.util.spec_from_file_location("numpyro_mixed_models", HERE / "numpyro_mixed_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# --------------------------------------------------------------------------------------
# problems: data, model, exact answer, the estimate and the discrete statistics of a run
# --------------------------------------------------------------------------------------
def build_problem(name: str, cfg: dict):
    """(model, args, exact reference, estimate(draws) -> array, statistics(draws) -> {name: (chain, draw)})."""
    import jax.numpy as jnp
    import numpy as np

    mm = _models()
    rng = np.random.default_rng(cfg["seed"])
    if name == "spike_slab":
        X = mm.collinear_design(rng, cfg["n"], cfg["p"], rho=0.1, pair_corr=cfg["pair_corr"])
        coef = np.zeros(cfg["p"])
        coef[0], coef[2] = cfg["coef"], 0.5
        y = (X @ coef + cfg["noise"] * rng.normal(size=cfg["n"])).astype(np.float32)
        exact = mm.spike_slab_exact(X, y)["inclusion"]

        def estimate(draws):
            return draws["gamma"].reshape(-1, draws["gamma"].shape[-1]).mean(0)

        def statistics(draws):
            g = draws["gamma"]
            return {"gamma0": g[..., 0], "gamma1": g[..., 1], "model_size": g.sum(-1)}

        return mm.spike_slab, (jnp.asarray(X), jnp.asarray(y)), exact, estimate, statistics
    y = mm.mixture_data(rng, cfg["num_points"], cfg["centers"])
    centers = cfg["centers"]
    prior = (np.zeros(len(centers), np.float32), cfg["prior_sd"], 1.0, 1.0)
    exact = mm.mixture_exact(y, *prior)["coclustering"]
    iu = np.triu_indices(len(y), 1)
    # the pair whose co-clustering probability is closest to 1/2 (the hardest one), and the number of clusters
    pair = int(np.argmin(np.abs(exact[iu] - 0.5)))
    i, j = iu[0][pair], iu[1][pair]

    def estimate(draws):
        c = draws["c"].reshape(-1, draws["c"].shape[-1])
        return (c[:, :, None] == c[:, None, :]).mean(0)[iu]

    def statistics(draws):
        c = draws["c"]
        occupied = (c[..., None] == np.arange(len(centers))).any(-2).sum(-1)
        return {f"same_{i}_{j}": (c[..., i] == c[..., j]).astype(float), "num_clusters": occupied.astype(float)}

    return mm.mixture, (jnp.asarray(y), *prior), exact[iu], estimate, statistics


def build_sampler(name: str, model, problem: str):
    import jax
    import numpy as np
    from numpyro.infer import HMC, NUTS, DiscreteHMCGibbs, MixedHMC

    import ugm_infer as ui

    if name == "ugm_gibbs":
        return ui.numpyro.UGMGibbs(NUTS(model), kernel="gibbs"), "vectorized", ("info.num_changed",)
    if name == "ugm_tempered_transitions":
        betas = np.linspace(0.05, 1.0, 8) if problem == "spike_slab" else np.geomspace(0.02, 1.0, 8)
        fields = ("info.acceptance_probability", "info.log_ratio_terms")
        return ui.numpyro.UGMGibbs(NUTS(model), kernel="tempered_transitions", betas=betas), "vectorized", fields
    if name == "ugm_parallel_tempering":
        betas = [0.05, 0.2, 0.5, 1.0] if problem == "spike_slab" else [0.02, 0.1, 0.35, 1.0]
        fields = ("info.swap_acceptance", "info.swap_attempted", "info.round_trips")
        return ui.numpyro.ParallelTempering(ui.numpyro.UGMGibbs(NUTS(model)), betas), "vectorized", fields
    if name == "discrete_hmc_gibbs":
        return DiscreteHMCGibbs(NUTS(model)), jax.vmap, ()
    if name == "mixed_hmc":
        return MixedHMC(HMC(model, trajectory_length=1.2)), jax.vmap, ()
    raise ValueError(f"unknown sampler {name!r}; choose from {SAMPLERS}")


# --------------------------------------------------------------------------------------
# worker: one sampler on one problem, one JSON line per segment
# --------------------------------------------------------------------------------------
def worker(problem: str, sampler: str, cfg: dict, out_path: str) -> None:
    import arviz as az
    import jax
    import numpy as np
    from numpyro.infer import MCMC

    run = cfg["run"]
    model, args, exact, estimate, statistics = build_problem(problem, cfg[problem])
    kernel, chain_method, fields = build_sampler(sampler, model, problem)
    start = time.perf_counter()
    mcmc = MCMC(
        kernel,
        num_warmup=run["warmup"],
        num_samples=run["segment"],
        num_chains=run["chains"],
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.warmup(jax.random.key(0), *args)
    warmup_s = time.perf_counter() - start
    draws, infos = {}, {}
    for segment in range(run["segments"]):
        t = time.perf_counter()
        mcmc.run(jax.random.key(segment + 1), *args, extra_fields=fields)
        jax.block_until_ready(mcmc.last_state)
        segment_s = time.perf_counter() - t
        mcmc.post_warmup_state = mcmc.last_state
        new = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        draws = {k: np.concatenate([draws[k], v], axis=1) if k in draws else v for k, v in new.items()}
        extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items() if k.startswith("info.")}
        infos = {k: np.concatenate([infos[k], v], axis=1) if k in infos else v for k, v in extra.items()}
        error = np.abs(estimate(draws) - exact)
        stats = statistics(draws)
        record = {
            "segment": segment,
            "elapsed_s": time.perf_counter() - start,
            "warmup_s": warmup_s,
            "segment_s": segment_s,
            "draws_per_chain": int(next(iter(draws.values())).shape[1]),
            "max_error": float(error.max()),
            "mean_error": float(error.mean()),
            "ess": {k: _finite(az.ess(np.asarray(v, np.float64))) for k, v in stats.items()},
            "rhat": {k: _finite(az.rhat(np.asarray(v, np.float64))) for k, v in stats.items()},
            "means": {k: float(np.mean(v)) for k, v in stats.items()},
            "info": _summarise_infos(infos),
            "load": _load(),
        }
        with open(out_path, "a") as f:
            f.write(json.dumps(record) + "\n")


def _finite(x) -> float | None:
    x = float(x)
    return x if x == x and abs(x) != float("inf") else None


def _summarise_infos(infos: dict) -> dict:
    import numpy as np

    out = {}
    if "info.swap_acceptance" in infos and "info.swap_attempted" in infos:
        acc, att = infos["info.swap_acceptance"], infos["info.swap_attempted"].astype(float)
        out["swap_rate"] = ((acc * att).sum((0, 1)) / np.maximum(att.sum((0, 1)), 1)).round(3).tolist()
        out["round_trips"] = infos["info.round_trips"][:, -1].tolist()
    if "info.acceptance_probability" in infos:
        out["tt_acceptance"] = round(float(infos["info.acceptance_probability"].mean()), 3)
    if "info.num_changed" in infos:
        out["mean_num_changed"] = round(float(infos["info.num_changed"].mean()), 3)
    return out


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------
def run_one(problem: str, sampler: str, cfg: dict, tmp: Path) -> dict:
    out_path = tmp / f"{problem}_{sampler}.jsonl"
    out_path.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--worker", problem, sampler, json.dumps(cfg), str(out_path)]
    budget = cfg["run"]["budget"]
    load_before = _load()
    try:
        proc = subprocess.run(cmd, timeout=budget, capture_output=True, text=True)
        status = (
            "ok"
            if proc.returncode == 0
            else f"failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}"
        )
    except subprocess.TimeoutExpired:
        status = f"stopped at the {budget} s budget"
    records = [json.loads(line) for line in out_path.read_text().splitlines()] if out_path.exists() else []
    return {"problem": problem, "sampler": sampler, "status": status, "load_before": load_before, "segments": records}


def summarise(result: dict) -> dict:
    records = result["segments"]
    if not records:
        return {"problem": result["problem"], "sampler": result["sampler"], "status": result["status"]}
    last = records[-1]
    sampling_s = sum(r["segment_s"] for r in records)
    ess = {k: v for k, v in last["ess"].items()}
    return {
        "problem": result["problem"],
        "sampler": result["sampler"],
        "status": result["status"],
        "draws_per_chain": last["draws_per_chain"],
        "warmup_s": round(last["warmup_s"], 1),
        "sampling_s": round(sampling_s, 1),
        "total_s": round(last["elapsed_s"], 1),
        "max_error": round(last["max_error"], 4),
        "mean_error": round(last["mean_error"], 4),
        "ess": {k: (round(v, 1) if v is not None else None) for k, v in ess.items()},
        "ess_per_s": {k: (round(v / sampling_s, 2) if v is not None and sampling_s > 0 else None) for k, v in ess.items()},
        "rhat": {k: (round(v, 3) if v is not None else None) for k, v in last["rhat"].items()},
        "info": last["info"],
    }


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'problem':<11} {'sampler':<25} {'draws':>6} {'warmup s':>8} {'sample s':>8} {'max err':>8}  "
        "ESS/s (ESS) of discrete statistics"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if "max_error" not in r:
            print(f"{r['problem']:<11} {r['sampler']:<25} {'-':>6} {'-':>8} {'-':>8} {'-':>8}  {r['status']}")
            continue
        ess = ", ".join(f"{k} {r['ess_per_s'][k]} ({r['ess'][k]})" for k in r["ess"])
        note = "" if r["status"] == "ok" else f"  [{r['status']}]"
        print(
            f"{r['problem']:<11} {r['sampler']:<25} {r['draws_per_chain']:>6} {r['warmup_s']:>8} {r['sampling_s']:>8} "
            f"{r['max_error']:>8}  {ess}{note}"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small problems, few draws, short budgets (CI smoke run)")
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--budget", type=float, default=None, help="wall-time budget per sampler and problem (s)")
    parser.add_argument("--out", default=str(HERE / "results" / "numpyro_mixed.json"))
    parser.add_argument("--worker", nargs=4, metavar=("PROBLEM", "SAMPLER", "CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        problem, sampler, cfg, out = args.worker
        worker(problem, sampler, json.loads(cfg), out)
        return
    cfg = json.loads(json.dumps(QUICK if args.quick else FULL))
    if args.budget is not None:
        cfg["run"]["budget"] = args.budget
    problems = [p for p in args.problems.split(",") if p]
    samplers = [s for s in args.samplers.split(",") if s]
    for name in problems:
        if name not in PROBLEMS:
            raise SystemExit(f"unknown problem {name!r}; choose from {PROBLEMS}")
    for name in samplers:
        if name not in SAMPLERS:
            raise SystemExit(f"unknown sampler {name!r}; choose from {SAMPLERS}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / (out.stem + "_segments")
    tmp.mkdir(exist_ok=True)
    load_start = _load()
    results, rows = [], []
    for problem in problems:
        for sampler in samplers:
            result = run_one(problem, sampler, cfg, tmp)
            results.append(result)
            rows.append(summarise(result))
            print(f"  {problem} / {sampler}: {result['status']} (load {result['load_before']})", flush=True)
    print(f"\nload average (1, 5, 15 min): start {load_start}, end {_load()}; command: {' '.join(sys.argv)}\n")
    print_table(rows)
    payload = {
        "command": " ".join(sys.argv),
        "config": cfg,
        "load_start": load_start,
        "load_end": _load(),
        "summary": rows,
        "runs": results,
    }
    out.write_text(json.dumps(payload, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
