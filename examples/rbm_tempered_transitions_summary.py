"""Summarise several runs of ``examples/rbm_tempered_transitions.py`` (seeds x methods).

Each run folder holds one ``rbm_tempered_transitions.json`` (one or more methods).
Runs are grouped by seed; for every seed the gap of SAP and Trans-SAP to exact ML is
the difference of their mean log-likelihoods over the last evaluations (the
``*_tail_mean`` values the example writes).  Prints a markdown table, the mean gap
with its standard deviation over seeds, the paired difference Trans-SAP - SAP with its
standard error, and the TT acceptance; writes ``summary.json`` and ``summary.png``
(gap to exact ML versus updates, one thin line per seed, the mean in bold).

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


def load_runs(dirs: list[str]) -> dict[int, dict[str, dict]]:
    """``{seed: {method: {"final": ..., "curve": ..., "tt_acceptance": ...}}}`` from run folders."""
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


def summarise(runs: dict[int, dict[str, dict]]) -> dict:
    rows, gaps = [], {m: {"train": [], "test": []} for m in STOCHASTIC}
    for seed in sorted(runs):
        by = runs[seed]
        if "exact ML" not in by or not all(m in by for m in STOCHASTIC):
            continue
        ref = by["exact ML"]["final"]
        row = {"seed": seed, "exact ML": [ref["train_ll_tail_mean"], ref["test_ll_tail_mean"]]}
        for m in STOCHASTIC:
            f = by[m]["final"]
            g = [f["train_ll_tail_mean"] - ref["train_ll_tail_mean"], f["test_ll_tail_mean"] - ref["test_ll_tail_mean"]]
            gaps[m]["train"].append(g[0])
            gaps[m]["test"].append(g[1])
            row[m] = [f["train_ll_tail_mean"], f["test_ll_tail_mean"]]
            row[f"{m} gap"] = g
        row["tt_acceptance"] = by["Trans-SAP"]["tt_acceptance"]["mean"]
        rows.append(row)
    n = len(rows)
    if n == 0:
        raise SystemExit("error: no seed has all three methods (exact ML, SAP, Trans-SAP)")

    def mean_sd(x):
        return [statistics.mean(x), statistics.stdev(x) if len(x) > 1 else float("nan")]

    paired = {split: [t - s for t, s in zip(gaps["Trans-SAP"][split], gaps["SAP"][split])] for split in ("train", "test")}
    return {
        "seeds": n,
        "rows": rows,
        "gap_mean_sd": {m: {k: mean_sd(v) for k, v in gaps[m].items()} for m in STOCHASTIC},
        "trans_sap_minus_sap": {
            k: [statistics.mean(v), (statistics.stdev(v) / math.sqrt(n)) if n > 1 else float("nan")]
            for k, v in paired.items()
        },
        "tt_acceptance_per_seed": [r["tt_acceptance"] for r in rows],
    }


def plot(runs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"SAP": "tab:blue", "Trans-SAP": "tab:red"}
    for m in STOCHASTIC:
        all_gaps = []
        for seed in sorted(runs):
            by = runs[seed]
            if "exact ML" not in by or m not in by:
                continue
            ref, cur = by["exact ML"]["curve"], by[m]["curve"]
            steps = np.asarray(cur["step"])
            gap = np.asarray(cur["train_ll"]) - np.asarray(ref["train_ll"])
            all_gaps.append(gap)
            ax.plot(steps, gap, color=colors[m], lw=0.6, alpha=0.4)
        ax.plot(steps, np.mean(all_gaps, axis=0), color=colors[m], lw=2, label=f"{m} (mean of {len(all_gaps)} seeds)")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylim(-4, 1)
    ax.set_xlabel("parameter updates (Gibbs updates)")
    ax.set_ylabel("train LL minus exact-ML train LL (nats)")
    ax.set_title("RBM 784x10 on MNIST: gap to exact ML")
    ax.legend(loc="lower right")
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
    print("| seed | exact ML train / test | SAP gap train / test | Trans-SAP gap train / test | TT acceptance |")
    print("|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        e, gs, gt = r["exact ML"], r["SAP gap"], r["Trans-SAP gap"]
        print(
            f"| {r['seed']} | {e[0]:.3f} / {e[1]:.3f} | {gs[0]:+.3f} / {gs[1]:+.3f} | {gt[0]:+.3f} / {gt[1]:+.3f} "
            f"| {r['tt_acceptance']:.3f} |"
        )
    for m, g in summary["gap_mean_sd"].items():
        tr, te = g["train"], g["test"]
        print(f"{m}: mean gap train {tr[0]:+.3f} (sd {tr[1]:.3f}), test {te[0]:+.3f} (sd {te[1]:.3f})")
    for k, (mu, se) in summary["trans_sap_minus_sap"].items():
        print(f"Trans-SAP minus SAP ({k}): {mu:+.3f} +- {se:.3f} (standard error over {summary['seeds']} seeds)")
    return summary


if __name__ == "__main__":
    main()
