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
chains), against ``DiscreteHMCGibbs(NUTS(model))`` and ``MixedHMC(HMC(model))``
(chains vectorized with ``chain_method=jax.vmap``, since they refuse ``"vectorized"``).
Every sampler runs in its own process: warm-up, a timing of the steady-state cost of a
draw, then one sampling run with as many draws as fit in its CPU budget (at most
``draws``).  Times are CPU seconds of that process (all its threads): the benchmark
machine is shared, and CPU time is what a sampler costs whatever else runs; wall times
are recorded too.  From the draws the script computes the error of the running
estimate after 10%, 20%, ... of them (against the CPU time at which they were
available) and the bulk ESS (ArviZ, over the chains) of discrete statistics.  A sampler
that exceeds 1.5 x its budget is stopped (``RLIMIT_CPU``) and reported with what it
reached.  With ``--jobs N`` up to ``N`` worker processes run at once: their CPU times
are still each one's own, so only the wall times are affected.

Usage::

    python benchmarks/bench_numpyro_mixed.py                # full run (up to 10 x 450 CPU s)
    python benchmarks/bench_numpyro_mixed.py --quick        # smoke run for CI (small, short budgets)
    python benchmarks/bench_numpyro_mixed.py --problems mixture --samplers ugm_gibbs,discrete_hmc_gibbs
    python benchmarks/bench_numpyro_mixed.py --budget 60 --jobs 3   # reduced budgets, 3 workers at a time

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SAMPLERS = ("ugm_gibbs", "ugm_tempered_transitions", "ugm_parallel_tempering", "discrete_hmc_gibbs", "mixed_hmc")
PROBLEMS = ("spike_slab", "mixture")

FULL = {
    "spike_slab": {"n": 50, "p": 12, "pair_corr": 0.97, "coef": 0.9, "noise": 0.8, "seed": 3},
    "mixture": {"num_points": 10, "centers": [-6.0, 0.0, 6.0], "prior_sd": 5.0, "seed": 0},
    "run": {"chains": 4, "warmup": 500, "draws": 4000, "timing_steps": 50, "budget": 300, "wall_limit": 7200},
}
QUICK = {
    "spike_slab": {"n": 30, "p": 6, "pair_corr": 0.97, "coef": 0.9, "noise": 0.8, "seed": 3},
    "mixture": {"num_points": 6, "centers": [-6.0, 0.0, 6.0], "prior_sd": 5.0, "seed": 0},
    "run": {"chains": 2, "warmup": 10, "draws": 20, "timing_steps": 2, "budget": 20, "wall_limit": 300},
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
# worker: one sampler on one problem
# --------------------------------------------------------------------------------------
def _write(out_path: str, record: dict) -> None:
    with open(out_path, "a") as f:
        f.write(json.dumps(record) + "\n")


class _Clock:
    """Wall and CPU seconds (all threads of this process) since creation."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _per_draw_seconds(mcmc, chain_method, args, steps: int) -> dict:
    """Steady-state cost of one draw (all chains) and the compilation of the step, wall and CPU.

    Times ``steps`` kernel steps from the post-warm-up state in one jitted ``fori_loop``,
    called twice: the second call is the sampling cost alone.
    """
    import jax

    sampler, state = mcmc.sampler, mcmc.post_warmup_state
    if callable(chain_method):  # chain_method=jax.vmap: the kernel steps one chain
        step = jax.vmap(lambda s: sampler.sample(s, args, {}))
    else:
        step = lambda s: sampler.sample(s, args, {})  # noqa: E731
    loop = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda i, x: step(x), s))
    clock = _Clock()
    jax.block_until_ready(loop(state))
    first = clock.read()
    clock = _Clock()
    jax.block_until_ready(loop(state))
    second = clock.read()
    return {
        "wall": second[0] / steps,
        "cpu": second[1] / steps,
        "compile_wall": max(0.0, first[0] - second[0]),
        "compile_cpu": max(0.0, first[1] - second[1]),
    }


def worker(problem: str, sampler: str, cfg: dict, out_path: str) -> None:
    """Warm-up, the cost of a draw, then as many draws as fit in the CPU budget (at most ``draws``).

    Time is CPU time of the worker process (all its threads), because the benchmark
    machine is shared; wall time is recorded next to it.  The time at which draw ``n``
    is available is reconstructed as warm-up + compilation of the sampling loop + ``n``
    times the steady-state cost of a draw (measured apart, :func:`_per_draw_seconds`),
    because ``MCMC.run`` compiles its loop once per call.  The process is killed by
    ``RLIMIT_CPU`` at 1.5 x the budget (a sampler whose warm-up does not fit).
    """
    import resource

    import arviz as az
    import jax
    from numpyro.infer import MCMC

    run = cfg["run"]
    budget = run["budget"]
    resource.setrlimit(resource.RLIMIT_CPU, (int(1.5 * budget) + 1, int(1.5 * budget) + 2))
    model, args, exact, estimate, statistics = build_problem(problem, cfg[problem])
    kernel, chain_method, fields = build_sampler(sampler, model, problem)
    clock = _Clock()
    mcmc = MCMC(
        kernel,
        num_warmup=run["warmup"],
        num_samples=run["draws"],
        num_chains=run["chains"],
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.warmup(jax.random.key(0), *args)
    jax.block_until_ready(mcmc.post_warmup_state)
    warmup_wall, warmup_cpu = clock.read()
    _write(out_path, {"phase": "warmup", "warmup_cpu_s": warmup_cpu, "warmup_wall_s": warmup_wall, "load": _load()})
    per_draw = _per_draw_seconds(mcmc, chain_method, args, run["timing_steps"])
    _write(out_path, {"phase": "timing", **per_draw, "load": _load()})
    remaining = budget - clock.read()[1] - 1.5 * per_draw["compile_cpu"]
    mcmc.num_samples = int(min(run["draws"], max(run["timing_steps"], remaining / per_draw["cpu"])))
    run_clock = _Clock()
    mcmc.run(jax.random.key(1), *args, extra_fields=fields)
    jax.block_until_ready(mcmc.last_state)
    run_wall, run_cpu = run_clock.read()
    draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    infos = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items() if k.startswith("info.")}
    total = mcmc.num_samples
    compile_cpu = max(0.0, run_cpu - total * per_draw["cpu"])
    curve = []
    for frac in np.linspace(0.1, 1.0, 10):
        n = max(2, int(round(frac * total)))
        error = np.abs(estimate({k: v[:, :n] for k, v in draws.items()}) - exact)
        cpu = warmup_cpu + compile_cpu + n * per_draw["cpu"]
        curve.append(
            {"draws_per_chain": n, "cpu_s": cpu, "max_error": float(error.max()), "mean_error": float(error.mean())}
        )
    stats = statistics(draws)
    record = {
        "phase": "done",
        "warmup_cpu_s": warmup_cpu,
        "warmup_wall_s": warmup_wall,
        "run_cpu_s": run_cpu,
        "run_wall_s": run_wall,
        "compile_cpu_s": compile_cpu,
        "sampling_cpu_s": total * per_draw["cpu"],
        "sampling_wall_s": total * per_draw["wall"],
        "per_draw": per_draw,
        "draws_per_chain": total,
        "curve": curve,
        "ess": {k: _finite(az.ess(np.asarray(v, np.float64))) for k, v in stats.items()},
        "rhat": {k: _finite(az.rhat(np.asarray(v, np.float64))) for k, v in stats.items()},
        "means": {k: float(np.mean(v)) for k, v in stats.items()},
        "info": _summarise_infos(infos),
        "load": _load(),
    }
    _write(out_path, record)


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
    """Run one worker process (it stops itself at 1.5 x its CPU budget; the wall limit is a safety net)."""
    out_path = tmp / f"{problem}_{sampler}.jsonl"
    out_path.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--worker", problem, sampler, json.dumps(cfg), str(out_path)]
    budget = cfg["run"]["budget"]
    load_before = _load()
    try:
        proc = subprocess.run(cmd, timeout=cfg["run"]["wall_limit"], capture_output=True, text=True)
        if proc.returncode == 0:
            status = "ok"
        elif proc.returncode in (-24, -9, 152, 137):  # SIGXCPU / SIGKILL from RLIMIT_CPU
            status = f"stopped at {1.5 * budget:.0f} CPU s"
        else:
            status = "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
    except subprocess.TimeoutExpired:
        status = f"stopped at the {cfg['run']['wall_limit']} s wall limit"
    records = [json.loads(line) for line in out_path.read_text().splitlines()] if out_path.exists() else []
    phases = {r["phase"]: r for r in records}
    if "done" not in phases and status.startswith("stopped"):
        if "warmup" in phases:
            status += f" in its sampling run (warm-up took {phases['warmup']['warmup_cpu_s']:.0f} CPU s)"
        else:
            status += " in its warm-up"
    return {"problem": problem, "sampler": sampler, "status": status, "load_before": load_before, "records": records}


def summarise(result: dict) -> dict:
    done = [r for r in result["records"] if r["phase"] == "done"]
    row = {"problem": result["problem"], "sampler": result["sampler"], "status": result["status"]}
    if not done:
        return row
    d = done[0]
    final = d["curve"][-1]
    row.update(
        draws_per_chain=d["draws_per_chain"],
        warmup_cpu_s=round(d["warmup_cpu_s"], 1),
        compile_cpu_s=round(d["compile_cpu_s"], 1),
        sampling_cpu_s=round(d["sampling_cpu_s"], 1),
        sampling_wall_s=round(d["sampling_wall_s"], 1),
        ms_cpu_per_draw=round(1000 * d["per_draw"]["cpu"], 2),
        max_error=round(final["max_error"], 4),
        mean_error=round(final["mean_error"], 4),
        error_curve=[(round(c["cpu_s"], 1), round(c["max_error"], 4)) for c in d["curve"]],
        ess={k: (round(v, 1) if v is not None else None) for k, v in d["ess"].items()},
        ess_per_cpu_s={k: (round(v / d["sampling_cpu_s"], 2) if v is not None else None) for k, v in d["ess"].items()},
        rhat={k: (round(v, 3) if v is not None else None) for k, v in d["rhat"].items()},
        means={k: round(v, 4) for k, v in d["means"].items()},
        info=d["info"],
        load=d["load"],
    )
    return row


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'problem':<11} {'sampler':<25} {'draws':>6} {'warmup':>7} {'compile':>7} {'sample':>7} {'max err':>8}  "
        "ESS per CPU s (ESS, R-hat) of discrete statistics"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if "max_error" not in r:
            print(f"{r['problem']:<11} {r['sampler']:<25} {'-':>6} {'-':>7} {'-':>7} {'-':>7} {'-':>8}  {r['status']}")
            continue
        ess = ", ".join(f"{k} {r['ess_per_cpu_s'][k]} ({r['ess'][k]}, {r['rhat'][k]})" for k in r["ess"])
        print(
            f"{r['problem']:<11} {r['sampler']:<25} {r['draws_per_chain']:>6} {r['warmup_cpu_s']:>7} "
            f"{r['compile_cpu_s']:>7} {r['sampling_cpu_s']:>7} {r['max_error']:>8}  {ess}"
        )
    print("\nmax error against CPU time (CPU s, error) at 10%, 20%, ..., 100% of the draws:")
    for r in rows:
        if "error_curve" in r:
            curve = " ".join(f"({t:.0f}, {e:.3f})" for t, e in r["error_curve"])
            print(f"  {r['problem']:<11} {r['sampler']:<25} {curve}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small problems, few draws, short budgets (CI smoke run)")
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--budget", type=float, default=None, help="CPU-time budget per sampler and problem (s)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes run at once (CPU times are per process)")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    parser.add_argument("--worker", nargs=4, metavar=("PROBLEM", "SAMPLER", "CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out = args.out or str(HERE / "results" / "numpyro_mixed.json")
    if args.quick and args.out == str(HERE / "results" / "numpyro_mixed.json"):
        args.out = args.out.replace(".json", "_quick.json")
    if args.worker:
        problem, sampler, cfg, out = args.worker
        worker(problem, sampler, json.loads(cfg), out)
        return
    cfg = json.loads(json.dumps(QUICK if args.quick else FULL))
    if args.budget is not None:
        cfg["run"]["budget"] = args.budget
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {args.jobs}")
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
    pairs = [(problem, sampler) for problem in problems for sampler in samplers]

    def one(pair):
        result = run_one(*pair, cfg, tmp)
        print(f"  {pair[0]} / {pair[1]}: {result['status']} (load {result['load_before']})", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each task waits on its own worker process
        results = list(pool.map(one, pairs))
    rows = [summarise(result) for result in results]
    print(f"\nload average (1, 5, 15 min): start {load_start}, end {_load()}; command: {' '.join(sys.argv)}\n")
    print_table(rows)
    payload = {
        "command": " ".join(sys.argv),
        "config": cfg,
        "jobs": args.jobs,
        "load_start": load_start,
        "load_end": _load(),
        "summary": rows,
        "runs": results,
    }
    out.write_text(json.dumps(payload, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
