"""Plots for runs and learning: ``ui.plots``.

Every function returns a :class:`matplotlib.figure.Figure` (created without
``pyplot`` when no ``ax`` is given, so nothing accumulates in pyplot's figure manager
and the functions work under the ``Agg`` backend) and accepts an ``ax=`` to draw into an
existing axes where a single panel makes sense.  Trace and autocorrelation plots wrap
ArviZ (``arviz.plot_trace``, ``arviz.plot_autocorr``).  matplotlib is imported lazily,
so ``import ugm_infer.plots`` is cheap.

=================================  =============================================================
:func:`plot_learning_curves`       metric vs learner steps or wall time, one line per run
:func:`plot_sample_grid`           configurations (e.g. RBM samples) as a grid of images
:func:`plot_trace`                 ArviZ trace plot of posterior statistics (energy, means...)
:func:`plot_autocorr`              ArviZ autocorrelation plot
:func:`plot_ladder`                inverse-temperature ladder with the swap rate of every pair
:func:`plot_smc_diagnostics`       ESS and number of betas over SMC steps or learner updates
=================================  =============================================================
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "plot_autocorr",
    "plot_learning_curves",
    "plot_ladder",
    "plot_sample_grid",
    "plot_smc_diagnostics",
    "plot_trace",
]

#: evaluation metrics tried, in order, when ``metric`` is not given
DEFAULT_METRICS = (
    "eval_log_likelihood",
    "train_log_likelihood",
    "eval_pseudo_log_likelihood",
    "train_pseudo_log_likelihood",
)


def _new_axes(ax: Any = None, figsize: tuple[float, float] = (5.0, 3.5)):
    """``(figure, axes)``: the given axes and its figure, or a fresh pyplot-free figure."""
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):
            raise TypeError(f"`ax` must be a matplotlib Axes or None, got {type(ax).__name__}")
        return ax.figure, ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


# --------------------------------------------------------------------------------------
# learning curves
# --------------------------------------------------------------------------------------
def _history_of(run: Any) -> dict:
    history = getattr(run, "history", run)
    if not isinstance(history, Mapping) or not any(k in history for k in ("evaluations", "steps")):
        raise TypeError(
            f"expected a ui.FitResult or its history dict (with 'evaluations' / 'steps'), got {type(run).__name__}"
        )
    return history


def _runs(results: Any) -> list[tuple[str, dict]]:
    if isinstance(results, Sequence) and not isinstance(results, (str, bytes)) and not hasattr(results, "history"):
        runs = []
        for i, item in enumerate(results):
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"`results[{i}]` must be a (label, FitResult or history) pair, got {item!r:.80}")
            runs.append((item[0], _history_of(item[1])))
        if not runs:
            raise ValueError("`results` is empty")
        return runs
    return [("", _history_of(results))]


def plot_learning_curves(
    results: Any,
    *,
    x: str = "steps",
    metric: str | None = None,
    ax: Any = None,
    logx: bool = False,
):
    """Plot a learning metric of one or several :func:`ui.fit` runs.

    Parameters
    ----------
    results
        A :class:`~ugm_infer.FitResult`, its ``history`` dict, or a list of
        ``(label, FitResult or history)`` pairs (one line each).
    x
        ``"steps"`` (learner updates), ``"wall_time"`` (training seconds, excluding
        compilation and evaluation) or ``"epoch"``.
    metric
        An evaluation metric (``history["evaluations"]``, e.g.
        ``"train_log_likelihood"``) or a per-step learner info field
        (``history["steps"]``, e.g. ``"grad_norm"``; ``x="steps"`` only).  Default: the
        first of :data:`DEFAULT_METRICS` that every run recorded.
    ax
        Axes to draw into (default: a new figure).
    logx
        Logarithmic x axis.
    """
    if x not in ("steps", "wall_time", "epoch"):
        raise ValueError(f"`x` must be 'steps', 'wall_time' or 'epoch', got {x!r}")
    runs = _runs(results)
    if metric is None:
        common = [m for m in DEFAULT_METRICS if all(m in h.get("evaluations", {}) for _, h in runs)]
        if not common:
            have = sorted(set().union(*(h.get("evaluations", {}).keys() for _, h in runs)))
            raise ValueError(f"no default metric recorded by every run; pass `metric` (evaluations have {have})")
        metric = common[0]
    fig, ax = _new_axes(ax)
    for label, history in runs:
        ev = history.get("evaluations", {})
        st = history.get("steps", {})
        if metric in ev:
            key = {"steps": "step", "wall_time": "wall_time", "epoch": "epoch"}[x]
            xs, ys = np.asarray(ev[key], np.float64), np.asarray(ev[metric], np.float64)
        elif metric in st:
            if x != "steps":
                raise ValueError(f"per-step field {metric!r} is only recorded against steps; use x='steps'")
            xs, ys = np.asarray(st["step"], np.float64), np.asarray(st[metric], np.float64)
        else:
            raise ValueError(
                f"metric {metric!r} not in run {label!r} (evaluations: {sorted(ev)}, per-step fields: {sorted(st)})"
            )
        ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, ms=3, label=label or None)
    ax.set_xlabel({"steps": "learner steps", "wall_time": "training time (s)", "epoch": "epoch"}[x])
    ax.set_ylabel(metric.replace("_", " "))
    if logx:
        ax.set_xscale("log")
    if any(label for label, _ in runs):
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return fig


# --------------------------------------------------------------------------------------
# sample grid
# --------------------------------------------------------------------------------------
def plot_sample_grid(
    samples: Any,
    image_shape: tuple[int, int],
    *,
    variable: str | None = None,
    num_columns: int | None = None,
    max_images: int = 100,
    ax: Any = None,
    cmap: str = "gray",
    title: str | None = None,
):
    """Show configurations as a grid of images (e.g. samples of an MNIST RBM).

    Parameters
    ----------
    samples
        ``(N, *shape)`` array, or a state dict ``{name: (N, *shape)}`` (``variable``
        picks the entry; default the only one, or ``"v"``).  Spins ``-1/+1`` are shown
        as ``0/1``.  Extra leading axes (e.g. ``(chain, draw, ...)``) are flattened.
    image_shape
        ``(height, width)`` with ``height * width`` sites per configuration.
    num_columns
        Images per row (default ``ceil(sqrt(N))``).
    max_images
        Show at most this many (the first ones).
    """
    if isinstance(samples, Mapping):
        if variable is None:
            if len(samples) == 1:
                variable = next(iter(samples))
            elif "v" in samples:
                variable = "v"
            else:
                raise ValueError(f"`samples` has several variables {sorted(samples)}; pass `variable`")
        if variable not in samples:
            raise ValueError(f"`variable` {variable!r} not in samples (have {sorted(samples)})")
        samples = samples[variable]
    arr = np.asarray(samples, np.float64)
    if (
        not isinstance(image_shape, Sequence)
        or len(image_shape) != 2
        or not all(isinstance(d, (int, np.integer)) and d > 0 for d in image_shape)
    ):
        raise ValueError(f"`image_shape` must be (height, width) of positive ints, got {image_shape!r}")
    h, w = int(image_shape[0]), int(image_shape[1])
    if arr.size == 0 or arr.size % (h * w):
        raise ValueError(f"`samples` of shape {arr.shape} do not split into images of `image_shape` {h}x{w} = {h * w} sites")
    arr = arr.reshape(-1, h * w)[:max_images]
    if arr.min() < 0:  # spins
        arr = (arr + 1.0) / 2.0
    num = arr.shape[0]
    cols = num_columns or int(np.ceil(np.sqrt(num)))
    if not isinstance(cols, (int, np.integer)) or cols < 1:
        raise ValueError(f"`num_columns` must be a positive int, got {num_columns!r}")
    rows = int(np.ceil(num / cols))
    pad = 1
    canvas = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad), np.nan)
    for k in range(num):
        r, c = divmod(k, cols)
        top, left = pad + r * (h + pad), pad + c * (w + pad)
        canvas[top : top + h, left : left + w] = arr[k].reshape(h, w)
    fig, ax = _new_axes(ax, figsize=(max(2.0, 0.5 * cols), max(2.0, 0.5 * rows * h / w)))
    ax.imshow(canvas, cmap=cmap, vmin=0.0, vmax=max(1.0, float(np.nanmax(canvas))), interpolation="nearest")
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return fig


# --------------------------------------------------------------------------------------
# ArviZ wrappers
# --------------------------------------------------------------------------------------
def _as_idata(data: Any):
    import arviz as az

    if isinstance(data, az.InferenceData):
        return data
    from ugm_infer.diagnostics import to_arviz

    try:
        return to_arviz(data)
    except TypeError as err:
        raise TypeError(f"expected arviz.InferenceData or a run ui.diagnostics.to_arviz accepts: {err}") from err


@contextlib.contextmanager
def _quiet_arviz():
    """ArviZ 0.23 calls a matplotlib >= 3.11 API that is deprecated; not the user's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*alias_mapping to normalize_kwargs is deprecated.*")
        warnings.filterwarnings("ignore", message="Your data appears to have a single value")  # a stuck chain
        yield


def _figure_of(axes: Any):
    return np.asarray(axes).ravel()[0].figure


def _posterior_to_plot(idata: Any, var_names: Any) -> tuple[Any, Any]:
    """The InferenceData of ``idata`` and its variables to plot (default: all but the raw state variables)."""
    idata = _as_idata(idata)
    if "posterior" not in idata.groups():
        raise ValueError("`idata` has no posterior group to plot")
    if var_names is None:
        raw = set(filter(None, str(idata.posterior.attrs.get("raw_variables", "")).split(",")))
        var_names = [n for n in idata.posterior.data_vars if n not in raw]
    return idata, var_names


def plot_trace(idata: Any, var_names: Any = None, **kwargs):
    """ArviZ trace plot (``arviz.plot_trace``) of posterior statistics; returns the figure.

    ``idata`` is an ``InferenceData`` from :func:`ugm_infer.diagnostics.to_arviz` (or a
    run it converts without a model).  ``var_names`` default: every non-raw statistic.
    Chains are told apart by colour (with a legend).  Extra keyword arguments go to
    ``arviz.plot_trace`` (e.g. ``figsize``); plot a window of draws with
    ``plot_trace(idata.isel(draw=slice(0, 300)))``.
    """
    import arviz as az

    idata, var_names = _posterior_to_plot(idata, var_names)
    kwargs.setdefault("compact", True)
    kwargs.setdefault("chain_prop", "color")  # one colour per chain: disagreeing chains stand out
    kwargs.setdefault("legend", True)
    with _quiet_arviz():
        axes = az.plot_trace(idata, var_names=var_names, **kwargs)
    fig = _figure_of(axes)
    fig.set_layout_engine("constrained")
    return fig


def plot_autocorr(idata: Any, var_names: Any = None, *, max_lag: int = 100, combined: bool = True, **kwargs):
    """ArviZ autocorrelation plot (``arviz.plot_autocorr``); returns the figure."""
    import arviz as az

    idata, var_names = _posterior_to_plot(idata, var_names)
    max_lag = min(int(max_lag), idata.posterior.sizes["draw"] - 1)
    with _quiet_arviz():
        axes = az.plot_autocorr(idata, var_names=var_names, max_lag=max_lag, combined=combined, **kwargs)
    return _figure_of(axes)


# --------------------------------------------------------------------------------------
# ladder
# --------------------------------------------------------------------------------------
def plot_ladder(betas: Any, swap_rates: Any = None, *, ax: Any = None, threshold: float | None = None):
    """Inverse-temperature ladder with the swap (or acceptance) rate of every adjacent pair.

    Parameters
    ----------
    betas
        ``(R,)`` ascending inverse temperatures, or an ``InferenceData`` of a parallel
        tempering run with ``constant_data.betas`` (then ``swap_rates`` default to the
        measured per-pair rates, :func:`ugm_infer.diagnostics.swap_rates`).
    swap_rates
        ``(R - 1,)`` rate of pair ``(beta_h, beta_{h+1})``, drawn as a bar spanning the
        pair (``None``: only the ladder).
    threshold
        Draw a dashed line at this rate (default ``ugm_infer.diagnostics.MIN_SWAP_RATE``
        when rates are given); bars below it are highlighted.
    """
    import arviz as az

    from ugm_infer import diagnostics

    if isinstance(betas, az.InferenceData):
        idata = betas
        if "constant_data" not in idata.groups() or "betas" not in idata.constant_data:
            raise ValueError("the InferenceData has no constant_data.betas: pass betas= to to_arviz")
        betas = idata.constant_data["betas"].values
        if swap_rates is None:
            swap_rates = diagnostics.swap_rates(idata)
    b = np.asarray(betas, np.float64)
    if b.ndim != 1 or b.size < 2 or np.any(np.diff(b) <= 0):
        raise ValueError(f"`betas` must be a strictly increasing 1-D array of >= 2 values, got {betas!r}")
    fig, ax = _new_axes(ax, figsize=(6.0, 3.0))
    if swap_rates is not None:
        rates = np.asarray(swap_rates, np.float64)
        if rates.shape != (b.size - 1,):
            raise ValueError(f"`swap_rates` must have shape ({b.size - 1},) (one per adjacent pair), got {rates.shape}")
        if threshold is None:
            threshold = diagnostics.MIN_SWAP_RATE
        colors = ["tab:red" if (np.isfinite(r) and r < threshold) else "tab:blue" for r in rates]
        ax.bar(b[:-1], np.nan_to_num(rates), width=np.diff(b), align="edge", color=colors, alpha=0.6, edgecolor="k")
        ax.axhline(threshold, color="tab:red", ls="--", lw=1, label=f"threshold {threshold:g}")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("swap rate of pair")
        ax.legend(fontsize="small", loc="best")
    else:
        ax.set_ylim(0, 1)
        ax.set_yticks([])
    ax.plot(b, np.full_like(b, 1.02 if swap_rates is not None else 0.5), "v", color="k", ms=5, clip_on=False)
    ax.set_xlabel(r"inverse temperature $\beta$")
    ax.set_title(f"ladder of {b.size} betas")
    return fig


# --------------------------------------------------------------------------------------
# SMC diagnostics
# --------------------------------------------------------------------------------------
def _smc_series(source: Any) -> tuple[str, np.ndarray, np.ndarray, np.ndarray | None, str, str]:
    """``(x label, x, ess (lines, x), count or lambda (lines, x) or None, ess label, second label)``."""
    import arviz as az

    from ugm_infer.smc import TemperedSMCResult

    if isinstance(source, TemperedSMCResult):
        ess = np.asarray(source.ess, np.float64)
        lam = np.asarray(source.tempering_params, np.float64)
        return "SMC step", np.arange(1, ess.shape[1] + 1), ess, lam, "ESS / N", r"tempering parameter $\lambda$"
    if isinstance(source, az.InferenceData):
        if "smc" in source.groups() and "ess" in source["smc"]:
            smc = source["smc"]
            ess = np.asarray(smc["ess"].values, np.float64)
            lam = np.asarray(smc["tempering_param"].values, np.float64)
            return "SMC step", np.arange(1, ess.shape[1] + 1), ess, lam, "ESS / N", r"tempering parameter $\lambda$"
        if "learner_stats" in source.groups():
            st = {k: source["learner_stats"][k].values for k in source["learner_stats"].data_vars}
            st["step"] = source["learner_stats"]["step"].values
            return _learner_series(st)
        raise ValueError("the InferenceData has neither an smc group nor learner_stats")
    history = getattr(source, "history", source)
    if isinstance(history, Mapping) and "steps" in history:
        return _learner_series(history["steps"])
    raise TypeError(
        "`source` must be a ui.smc.TemperedSMCResult, a ui.FitResult (or history) of an SMC/PF learner, "
        f"or an InferenceData from ui.diagnostics.to_arviz; got {type(source).__name__}"
    )


def _learner_series(steps: Mapping) -> tuple:
    field = next((f for f in ("min_ess", "ess") if f in steps), None)
    if field is None:
        raise ValueError(f"the learner recorded no ESS (per-step fields: {sorted(steps)}); use psmc, smc or pf_mcmc_mle")
    x = np.asarray(steps["step"], np.float64)
    ess = np.asarray(steps[field], np.float64)[None]
    second, label = None, ""
    if "num_bridges" in steps:
        second, label = np.asarray(steps["num_bridges"], np.float64)[None], "number of betas (bridges)"
    elif "resampled" in steps:
        second, label = np.asarray(steps["resampled"], np.float64)[None], "resampled"
    return "learner step", x, ess, second, f"ESS ({field})", label


def plot_smc_diagnostics(source: Any, *, axes: Any = None):
    """ESS and number of betas over SMC steps (tempered SMC) or learner updates (PSMC, SMC, PF).

    Parameters
    ----------
    source
        A :class:`~ugm_infer.smc.TemperedSMCResult` (ESS / N and the tempering
        parameter against the SMC step, one line per replicate; the number of betas is
        the length of each line), an ``InferenceData`` of one (``smc`` group) or of a
        learner (``learner_stats``), or a :class:`~ugm_infer.FitResult` / history of
        ``psmc`` / ``smc`` (``min_ess`` or ``ess`` and ``num_bridges`` per update) or
        ``pf_mcmc_mle`` (``ess`` and ``resampled``).
    axes
        Two axes to draw into (default: a new figure with two panels).
    """
    xlabel, x, ess, second, ess_label, second_label = _smc_series(source)
    if axes is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.5, 3.0), layout="constrained")
        axes = fig.subplots(1, 2)
    else:
        axes = list(np.asarray(axes, dtype=object).ravel())
        if len(axes) != 2:
            raise ValueError(f"`axes` must be two matplotlib Axes, got {len(axes)}")
        fig = axes[0].figure
    a0, a1 = axes[0], axes[1]
    for line in ess:
        a0.plot(x, line, lw=1)
    a0.set_xlabel(xlabel)
    a0.set_ylabel(ess_label)
    a0.set_ylim(bottom=0)
    a0.grid(alpha=0.3)
    if second is not None:
        for line in second:
            a1.plot(x, line, lw=1, drawstyle="steps-post" if "resampled" in second_label else "default")
        a1.set_ylabel(second_label)
        if xlabel == "SMC step":
            counts = np.sum(np.isfinite(second), axis=1)
            a1.set_title(f"betas per replicate: {int(counts.min())}-{int(counts.max())}", fontsize="small")
    else:
        a1.set_axis_off()
    a1.set_xlabel(xlabel)
    a1.grid(alpha=0.3)
    return fig
