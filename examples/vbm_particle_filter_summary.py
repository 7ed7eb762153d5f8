"""Summarise several runs of ``examples/vbm_particle_filter.py`` (one folder per seed, i.e. per true model).

Each run folder holds one ``vbm_particle_filter.json``: one true model (drawn from the
run's seed) and ``--trials`` initialisations of every method.  An *experiment* is one
(true model, initialisation) pair, as in Asuncion et al. (2010, section 4.1, Figure 1c,
100 experiments).  For every experiment and method the final exact test log-likelihood
and the training time; across experiments:

* per update: how often PF ends above each other method, and the median and
  interquartile range of the paired difference (PF minus the other method) of the final
  test log-likelihood, in nats per case;
* at PF's time (the paper's Figure 1c): PF's final test log-likelihood against the
  other method's evaluation at the last point of its curve not later than PF's
  training time (its start when no evaluation is that early);
* each method's final test log-likelihood minus the true parameters' (median, IQR),
  and per true model the median final test log-likelihood of every method.

Prints markdown tables and writes ``summary.json`` and ``summary.png`` (paired
differences, one dot per experiment) into ``--out``::

    python examples/vbm_particle_filter_summary.py runs/vbm_pf_paper/seed* --out runs/vbm_pf_paper/summary
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

NAME = "vbm_particle_filter"


def load_runs(dirs: list[str]) -> list[dict]:
    """One dict per run folder: ``seed``, ``true_ll``, ``curves`` ``{method: [curve per trial]}``, ``config``."""
    runs = []
    for d in dirs:
        path = os.path.join(d, f"{NAME}.json")
        if not os.path.isfile(path):
            raise SystemExit(f"error: {path!r} not found (expected a run folder of {NAME}.py)")
        with open(path) as f:
            result = json.load(f)
        runs.append(
            {
                "seed": int(result["config"]["seed"]),
                "true_ll": float(result["true_params_test_ll"]),
                "curves": result["curves"],
                "config": result["config"],
            }
        )
    seeds = [r["seed"] for r in runs]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"error: two run folders have the same seed (seeds {sorted(seeds)}): the same true model twice")
    return sorted(runs, key=lambda r: r["seed"])


def at_time(curve: dict, seconds: float) -> float:
    """The curve's test log-likelihood at its last evaluation not later than ``seconds`` of training."""
    times = np.asarray(curve["wall_time"], np.float64)
    ll = np.asarray(curve["test_ll"], np.float64)
    return float(ll[max(int(np.searchsorted(times, seconds, side="right")) - 1, 0)])


def quartiles(x) -> list[float]:
    return [float(v) for v in np.percentile(np.asarray(x, np.float64), [50, 25, 75])]


def summarise(runs: list[dict], reference: str = "PF") -> dict:
    methods = list(runs[0]["curves"])
    if reference not in methods:
        raise SystemExit(f"error: the runs have no {reference!r} method (they have {methods})")
    final = {m: [] for m in methods}
    to_true = {m: [] for m in methods}
    seconds = {m: [] for m in methods}
    at_pf_time = {m: [] for m in methods if m != reference}
    for run in runs:
        trials = len(run["curves"][reference])
        for t in range(trials):
            pf = run["curves"][reference][t]
            pf_seconds = float(pf["wall_time"][-1])
            for m in methods:
                c = run["curves"][m][t]
                final[m].append(float(c["test_ll"][-1]))
                to_true[m].append(float(c["test_ll"][-1]) - run["true_ll"])
                seconds[m].append(float(c["wall_time"][-1]))
                if m != reference:
                    at_pf_time[m].append(at_time(c, pf_seconds))
    per_model = []
    for run in runs:
        row = {"seed": run["seed"], "true_test_ll": run["true_ll"]}
        for m in methods:
            row[m] = float(np.median([c["test_ll"][-1] for c in run["curves"][m]]))
        fractions = [c["resampled_fraction"] for c in run["curves"][reference] if "resampled_fraction" in c]
        row["pf_resampled_fraction"] = float(np.mean(fractions)) if fractions else None
        per_model.append(row)
    pf_final = np.asarray(final[reference])
    versus = {}
    for m in at_pf_time:
        diff = pf_final - np.asarray(final[m])
        diff_time = pf_final - np.asarray(at_pf_time[m])
        versus[m] = {
            "pf_ahead_per_update": int(np.sum(diff > 0)),
            "difference_per_update_median_iqr": quartiles(diff),
            "pf_ahead_at_pf_time": int(np.sum(diff_time > 0)),
            "difference_at_pf_time_median_iqr": quartiles(diff_time),
        }
    return {
        "experiments": len(pf_final),
        "true_models": len(runs),
        "seeds": [r["seed"] for r in runs],
        "versus": versus,
        "final_minus_true_median_iqr": {m: quartiles(v) for m, v in to_true.items()},
        "training_seconds_median": {m: float(np.median(v)) for m, v in seconds.items()},
        "per_model": per_model,
        "final_test_ll": final,
    }


def print_tables(summary: dict) -> None:
    n = summary["experiments"]
    print(f"{n} experiments ({summary['true_models']} true models, seeds {summary['seeds']})\n")
    print(
        "| PF against | PF ahead per update | PF - other per update, median [IQR] "
        "| PF ahead at PF's time | PF - other at PF's time, median [IQR] |"
    )
    print("|---|---|---|---|---|")
    for m, v in summary["versus"].items():
        q, qt = v["difference_per_update_median_iqr"], v["difference_at_pf_time_median_iqr"]
        print(
            f"| {m} | {v['pf_ahead_per_update']} of {n} | {q[0]:+.3f} [{q[1]:+.3f}, {q[2]:+.3f}] "
            f"| {v['pf_ahead_at_pf_time']} of {n} | {qt[0]:+.3f} [{qt[1]:+.3f}, {qt[2]:+.3f}] |"
        )
    print("\n| method | final test LL minus the true parameters', median [IQR] | training s, median |")
    print("|---|---|---|")
    for m, q in summary["final_minus_true_median_iqr"].items():
        print(f"| {m} | {q[0]:+.3f} [{q[1]:+.3f}, {q[2]:+.3f}] | {summary['training_seconds_median'][m]:.2f} |")
    methods = list(summary["final_minus_true_median_iqr"])
    print("\n| seed | true parameters' test LL | " + " | ".join(f"{m}, median final" for m in methods) + " | PF resampled |")
    print("|---|---|" + "---|" * len(methods) + "---|")
    for row in summary["per_model"]:
        fraction = row["pf_resampled_fraction"]
        cells = " | ".join(f"{row[m]:.3f}" for m in methods)
        print(f"| {row['seed']} | {row['true_test_ll']:.3f} | {cells} | {'-' if fraction is None else f'{fraction:.1%}'} |")


def plot(summary: dict, path: str, reference: str = "PF") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = list(summary["versus"])
    pf = np.asarray(summary["final_test_ll"][reference])
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    rng = np.random.default_rng(0)
    for i, m in enumerate(others):
        diff = pf - np.asarray(summary["final_test_ll"][m])
        ax.scatter(i + 0.08 * rng.standard_normal(len(diff)), diff, s=10, alpha=0.6)
        ax.hlines(np.median(diff), i - 0.3, i + 0.3, color="k")
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(others)), [f"{reference} - {m}" for m in others])
    ax.set_ylabel("final test LL difference (nats per case)")
    ax.set_title(f"{summary['experiments']} experiments: above 0, {reference} ends higher")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run folders of vbm_particle_filter.py, one per seed")
    p.add_argument("--out", default="out/vbm_particle_filter_summary")
    args = p.parse_args(argv)
    summary = summarise(load_runs(args.runs))
    print_tables(summary)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(summary, os.path.join(args.out, "summary.png"))
    print(f"\nwrote {args.out}/summary.json and summary.png")
    return summary


if __name__ == "__main__":
    main()
