"""The report's figures, each with the one-line reading printed under it.

Every function returns ``(figure, reading)``: the figure is drawn with
:mod:`ugm_infer.plots` (matplotlib, ArviZ for traces) and the reading is computed
from the same numbers, so the sentence cannot disagree with the picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ugm_infer.cli._page import fmt, fmt_count

SET_WORDS = {"train": "train", "eval": "held-out"}
#: chains drawn in a trace plot (the diagnosis uses all of them)
TRACE_CHAINS = 6
#: images per panel of the samples figure
GRID_IMAGES = 36


def _figure(width: float, height: float, rows: int = 1, cols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, np.atleast_2d(fig.subplots(rows, cols, squeeze=False))


# ----------------------------------------------------------------------------------
# learning curves
# ----------------------------------------------------------------------------------
def learning_curves(runs: Sequence[Any], reference: dict, kind: str, sites_word: str = "sites"):
    """Train and held-out (pseudo-)log-likelihood of every run against epochs, the baseline, the kept points.

    ``runs`` have ``label``, ``history`` (a :attr:`FitResult.history`) and ``kept``
    (``{"epoch", "metrics"}`` of the kept model, or ``None``).
    """
    from ugm_infer.plots import plot_learning_curves

    sets = [s for s in ("train", "eval") if all(f"{s}_{kind}" in r.history["evaluations"] for r in runs)]
    fig, axes = _figure(5.2 * len(sets), 3.6, 1, len(sets))
    label = "pseudo-log-likelihood" if kind.startswith("pseudo") else "log-likelihood"
    for ax, set_name in zip(axes[0], sets):
        metric = f"{set_name}_{kind}"
        plot_learning_curves([(r.label, r.history) for r in runs], x="epoch", metric=metric, ax=ax)
        for line, r in zip(ax.lines, runs):
            if r.kept is not None and metric in r.kept["metrics"]:
                ax.plot(r.kept["epoch"], r.kept["metrics"][metric], "*", ms=13, color=line.get_color(), mec="k", zorder=5)
        base = reference["independent_sites"][set_name]
        ax.axhline(base, color="0.35", ls="--", lw=1.2, label=f"independent {sites_word}")
        ax.set_title(f"{SET_WORDS[set_name]} data")
        ax.set_ylabel(f"{label} (nats per example)")
        ax.legend(fontsize="small", loc="lower right")
    return fig, _curves_reading(runs, reference, kind, sets[-1], sites_word)


def _curves_reading(runs, reference, kind: str, set_name: str, sites_word: str) -> str:
    metric = f"{set_name}_{kind}"
    base = reference["independent_sites"][set_name]
    parts = []
    for r in runs:
        ev = r.history["evaluations"]
        values = np.asarray(ev[metric], np.float64)
        best = int(np.nanargmax(values))
        end = "" if best == len(values) - 1 else f", {fmt(values[best] - values[-1])} lower at the end"
        parts.append(f"{r.label} {fmt(values[best])} at epoch {fmt(ev['epoch'][best], 0)}{end}")
    kept = [r for r in runs if r.kept is not None]
    tail = " The stars mark the kept model" + ("s." if len(kept) > 1 else ".") if kept else ""
    best_value = max(float(np.nanmax(np.asarray(r.history["evaluations"][metric], np.float64))) for r in runs)
    return (
        f"Best {SET_WORDS[set_name]} {'pseudo-' if kind.startswith('pseudo') else ''}log-likelihood: "
        + "; ".join(parts)
        + f". Independent {sites_word}: {fmt(base)} ({fmt(best_value - base, signed=True)} for the best)."
        + tail
    )


# ----------------------------------------------------------------------------------
# data and samples
# ----------------------------------------------------------------------------------
def samples_vs_data(data: np.ndarray | None, samples: Sequence[tuple[str, np.ndarray]], image_shape: tuple[int, int]):
    """Training examples beside the last state of every chain of each model, as images."""
    from ugm_infer.plots import plot_sample_grid

    panels = ([("data (training set)", data)] if data is not None else []) + list(samples)
    fig, axes = _figure(3.0 * len(panels), 3.3, 1, len(panels))
    for ax, (title, x) in zip(axes[0], panels):
        plot_sample_grid(np.asarray(x)[:GRID_IMAGES], image_shape, ax=ax, num_columns=6)
        ax.set_title(title, fontsize="medium")
    return fig, _samples_reading(data, samples)


def _ones(x) -> np.ndarray:
    """Configurations as ``(N, sites)`` of 0/1 (spins -1/+1 mapped to 0/1)."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return (x + 1.0) / 2.0 if x.min(initial=0.0) < 0 else x


def _samples_reading(data, samples) -> str:
    flat = [(label, _ones(x)) for label, x in samples]
    parts = [f"{label} {fmt(x.mean(), 3)}" for label, x in flat]
    if data is None:
        return f"Share of ones over all {len(flat[0][1])} chains: " + ", ".join(parts) + "."
    d = _ones(data)
    diffs = [f"{label} {fmt(np.abs(x.mean(0) - d.mean(0)).mean(), 3)}" for label, x in flat]
    return (
        f"Share of ones: data {fmt(d.mean(), 3)}, " + ", ".join(parts) + f" (all {len(flat[0][1])} chains). "
        "Mean absolute difference between the per-site frequencies of the chains and of the data: "
        + ", ".join(diffs) + "."
    )  # fmt: skip


# ----------------------------------------------------------------------------------
# ArviZ traces of the chains
# ----------------------------------------------------------------------------------
def chain_traces(runs: Sequence[tuple[str, Any]], var: str = "energy"):
    """``arviz.plot_trace`` of ``var`` for each ``(label, ChainRun)``, one row per run."""
    from ugm_infer.plots import plot_trace

    fig, axes = _figure(10.0, 2.4 * len(runs), len(runs), 2)
    for row, (label, run) in zip(axes, runs):
        idata = run.idata
        shown = min(TRACE_CHAINS, idata.posterior.sizes["chain"])
        plot_trace(idata.isel(chain=slice(0, shown)), var_names=[var], axes=row[None, :], legend=False)
        row[0].set_title(f"{label}: {var} of {shown} of {idata.posterior.sizes['chain']} chains", fontsize="medium")
        row[1].set_title(f"{label}: trace (draws after warm-up)", fontsize="medium")
    return fig, _traces_reading(runs, var)


def _traces_reading(runs, var: str) -> str:
    parts = []
    for label, run in runs:
        row = run.diagnosis.table.get(var, {})
        parts.append(
            f"{label} R-hat {fmt(row.get('rhat'), 3)}, bulk ESS {fmt_count(row.get('ess_bulk'))}, "
            f"tail ESS {fmt_count(row.get('ess_tail'))}"
        )
    post = runs[0][1].idata.posterior
    text = f"{var.capitalize()} over {post.sizes['chain']} chains x {post.sizes['draw']} draws: " + "; ".join(parts) + "."
    if len(runs) == 2:
        (la, a), (lb, b) = runs
        ea, eb = a.diagnosis.table.get(var, {}).get("ess_bulk"), b.diagnosis.table.get(var, {}).get("ess_bulk")
        if ea and eb and np.isfinite(ea) and np.isfinite(eb):
            hi, lo = (lb, la) if eb >= ea else (la, lb)
            ratio = fmt(max(ea, eb) / min(ea, eb), 1)
            text += f" {hi}'s chains give {ratio}x the bulk ESS of {lo}'s for the same number of draws."
    return text


# ----------------------------------------------------------------------------------
# the ladder
# ----------------------------------------------------------------------------------
def ladder(label: str, run: Any):
    """The inverse temperatures with the measured swap rate of every adjacent pair."""
    import ugm_infer as ui
    from ugm_infer.plots import plot_ladder

    fig = plot_ladder(run.idata)
    fig.set_size_inches(7.0, 3.0)
    fig.axes[0].set_title(f"{label}: ladder of {len(run.betas)} inverse temperatures")
    rates = ui.diagnostics.swap_rates(run.idata)
    low = int(np.nanargmin(rates))
    b = run.betas
    trips = run.diagnosis.table.get("round_trips")
    draws = run.idata.posterior.sizes["draw"]
    trips_text = ""
    if trips is not None:
        trips_text = (
            f" {fmt_count(np.sum(trips))} round trips hottest-coldest-hottest in {len(trips)} chains x {draws} steps."
        )
    return fig, (
        "Swap rate per pair, hot to cold: " + ", ".join(fmt(r, 2) for r in rates)
        + f"; the lowest, {fmt(rates[low], 2)}, between beta {fmt(b[low], 3)} and {fmt(b[low + 1], 3)} "
        + f"({'above' if rates[low] >= ui.diagnostics.MIN_SWAP_RATE else 'below'} the "
        + f"{fmt(ui.diagnostics.MIN_SWAP_RATE, 1)} the diagnosis asks for)." + trips_text
    )  # fmt: skip
