"""Summarise several runs of ``examples/rbm_tempered_transitions.py`` (one folder per seed).

Each run folder holds one ``rbm_tempered_transitions.json`` (one seed, one or more
methods).  For every seed and method: the final average train / test log-likelihood and
its mean over the evaluations in the last 10% of the Gibbs-step budget (``*_tail_mean``,
written by the example), and the gap to exact ML of the same seed.  Across seeds: the
mean gap with its standard deviation, the paired difference Trans-SAP - SAP with its
standard error, and the TT acceptance.  Prints markdown tables; writes ``summary.json``
and ``summary.png`` (train LL minus exact ML's versus Gibbs steps; thin lines seeds,
bold the mean; exact ML interpolated at the other method's Gibbs steps, which for SAP
are its own updates).

    python examples/rbm_tempered_transitions_summary.py RUN_DIR [RUN_DIR ...] --out OUT
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics

import numpy as np

NAME = "rbm_tempered_transitions"
STOCHASTIC = ("SAP", "Trans-SAP")
ORDER = ("exact ML", "SAP", "Trans-SAP", "PL", "MCMC-MLE")


def load_runs(dirs: list[str]) -> dict[int, dict[str, dict]]:
    """``{seed: {method: {"final", "curve", "tt_acceptance", "config"}}}`` from run folders."""
    runs: dict[int, dict[str, dict]] = {}
    for d in dirs:
        path = os.path.join(d, f"{NAME}.json")
        if not os.path.isfile(path):
            raise SystemExit(f"error: {path!r} not found (expected a run folder of {NAME}.py)")
        with open(path) as f:
            result = json.load(f)
        seed = int(result["config"]["seed"])
        for method, final in result["final"].items():
            runs.setdefault(seed, {})[method] = {
                "final": final,
                "curve": result["curves"][method],
                "tt_acceptance": result["tt_acceptance"] if method == "Trans-SAP" else None,
                "config": result["config"],
            }
    return runs


def mean_sd(x):
    return [statistics.mean(x), statistics.stdev(x) if len(x) > 1 else float("nan")]


def summarise(runs: dict[int, dict[str, dict]]) -> dict:
    rows, gaps = [], {}
    for seed in sorted(runs):
        by = runs[seed]
        if "exact ML" not in by:
            continue
        ref = by["exact ML"]["final"]
        row = {"seed": seed}
        for m in ORDER:
            if m not in by:
                continue
            f = by[m]["final"]
            row[m] = {k: f[k] for k in ("train_ll", "test_ll", "train_ll_tail_mean", "test_ll_tail_mean")}
            if m != "exact ML":
                g = {k: f[k] - ref[k] for k in ("train_ll", "test_ll", "train_ll_tail_mean", "test_ll_tail_mean")}
                row[m]["gap"] = g
                for k, v in g.items():
                    gaps.setdefault(m, {}).setdefault(k, []).append(v)
        if "Trans-SAP" in by and by["Trans-SAP"]["tt_acceptance"]:
            row["tt_acceptance"] = by["Trans-SAP"]["tt_acceptance"]["mean"]
        rows.append(row)
    if not rows:
        raise SystemExit("error: no seed has exact ML")
    paired = {}
    both = [r for r in rows if "SAP" in r and "Trans-SAP" in r]
    for k in ("train_ll", "test_ll", "train_ll_tail_mean", "test_ll_tail_mean"):
        d = [r["Trans-SAP"][k] - r["SAP"][k] for r in both]
        if d:
            se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
            paired[k] = {"mean": statistics.mean(d), "se": se, "n": len(d), "per_seed": d}
    return {
        "seeds": [r["seed"] for r in rows],
        "rows": rows,
        "gap_mean_sd": {m: {k: mean_sd(v) for k, v in g.items()} for m, g in gaps.items()},
        "trans_sap_minus_sap": paired,
        "tt_acceptance_per_seed": [r.get("tt_acceptance") for r in rows],
        "commits": sorted({c["config"].get("commit", "?") for by in runs.values() for c in by.values()}),
    }


def plot(runs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colors = {"SAP": "tab:blue", "Trans-SAP": "tab:red", "PL": "tab:green", "MCMC-MLE": "tab:purple"}
    tt_start = None
    for m in ("SAP", "Trans-SAP", "MCMC-MLE", "PL"):
        grid, all_gaps = None, []
        for seed in sorted(runs):
            by = runs[seed]
            if "exact ML" not in by or m not in by:
                continue
            ref, cur = by["exact ML"]["curve"], by[m]["curve"]
            x = np.asarray(cur["gibbs_steps"] if cur.get("gibbs_steps") is not None else cur["step"], float)
            # exact ML at the same number of updates as this method's evaluations
            ref_at = np.interp(np.asarray(cur["step"], float), np.asarray(ref["step"], float), np.asarray(ref["train_ll"]))
            gap = np.asarray(cur["train_ll"]) - ref_at
            ax.plot(x, gap, color=colors[m], lw=0.6, alpha=0.35)
            all_gaps.append(gap)
            grid = x
            cfg = by[m]["config"]
            tt_start = cfg.get("gibbs_budget", 0) - cfg.get("tt_gibbs", 0)
        if all_gaps:
            n = min(len(g) for g in all_gaps)
            mean = np.mean([g[:n] for g in all_gaps], axis=0)
            ax.plot(grid[:n], mean, color=colors[m], lw=2, label=f"{m} (mean of {len(all_gaps)} seeds)")
    ax.axhline(0, color="k", lw=0.8)
    if tt_start:
        ax.axvline(tt_start, color="tab:red", ls=":", lw=1, label="TT starts")
    ax.set_ylim(-5, 2)
    ax.set_xlabel("Gibbs steps (PL: updates)")
    ax.set_ylabel("train LL minus exact ML's at the same update (nats)")
    ax.set_title("RBM 784-10 on MNIST: gap to exact ML")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run folders of rbm_tempered_transitions.py")
    p.add_argument("--out", default=os.path.join("out", f"{NAME}_summary"))
    args = p.parse_args(argv)
    runs = load_runs(args.runs)
    summary = summarise(runs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(runs, os.path.join(args.out, "summary.png"))
    methods = [m for m in ORDER if any(m in r for r in summary["rows"])]
    print("| seed | " + " | ".join(f"{m} train / test" for m in methods) + " | TT acceptance |")
    print("|---:|" + "---:|" * (len(methods) + 1))
    for r in summary["rows"]:
        cells = []
        for m in methods:
            if m not in r:
                cells.append("-")
            elif m == "exact ML":
                cells.append(f"{r[m]['train_ll_tail_mean']:.3f} / {r[m]['test_ll_tail_mean']:.3f}")
            else:
                g = r[m]["gap"]
                cells.append(f"{g['train_ll_tail_mean']:+.3f} / {g['test_ll_tail_mean']:+.3f}")
        acc = r.get("tt_acceptance")
        print(f"| {r['seed']} | " + " | ".join(cells) + f" | {'-' if acc is None else f'{acc:.3f}'} |")
    for m, g in summary["gap_mean_sd"].items():
        tr, te = g["train_ll_tail_mean"], g["test_ll_tail_mean"]
        print(f"{m}: mean gap (last 10%) train {tr[0]:+.3f} (sd {tr[1]:.3f}), test {te[0]:+.3f} (sd {te[1]:.3f})")
    for k, v in summary["trans_sap_minus_sap"].items():
        print(f"Trans-SAP minus SAP ({k}): {v['mean']:+.3f} +- {v['se']:.3f} (standard error over {v['n']} seeds)")
    return summary


if __name__ == "__main__":
    main()
