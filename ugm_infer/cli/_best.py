"""The kept model of a training run: the parameters and chains of its best held-out evaluation.

A stochastic-approximation learner's held-out log-likelihood goes up and down from one
evaluation to the next; the last parameters are rarely the best ones.  With held-out
data, :class:`KeepBest` (a callback of :func:`ugm_infer.fit`) saves the parameters and
the persistent chains at every evaluation that beats all earlier ones, into
``CHECKPOINT/best/`` next to the run's checkpoint, so a resumed run keeps the best
model of the whole run.  Without held-out data the last model is kept.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ugm_infer.kernels.gibbs import is_layout_state

BEST = "best"
_CHAINS = "chains.npz"
_STEP = "best.json"
_REPLICA = "replicas."


class Kept(NamedTuple):
    """The kept model: its step, parameters and chains (``None`` where unknown)."""

    step: int
    params: Any
    particles: dict | None
    replicas: dict | None


def selection_metric(evaluations: dict) -> str | None:
    """The held-out metric models are selected by (``None`` without held-out data)."""
    return next((k for k in ("eval_log_likelihood", "eval_pseudo_log_likelihood") if k in evaluations), None)


def chains_of(state) -> tuple[dict | None, dict | None]:
    particles = getattr(state, "particles", None)
    kernel_state = getattr(state, "kernel_state", None)
    # a persistent kernel's replicas (parallel tempering), not lattice chains kept in their sweep's layout
    replicas = None if is_layout_state(kernel_state) else getattr(kernel_state, "position", None)
    as_np = lambda d: {k: np.asarray(v) for k, v in d.items()} if isinstance(d, dict) and d else None  # noqa: E731
    return as_np(particles), as_np(replicas)


class KeepBest:
    """Callback of :func:`ugm_infer.fit`: save the model at every new best held-out value.

    ``folder`` is ``CHECKPOINT/best``; ``family`` and ``kwargs`` name the model for
    :func:`ugm_infer.save_model`.  The metric is :func:`selection_metric`; ties keep the
    earlier model.
    """

    def __init__(self, folder: Path, family: str, kwargs: dict):
        self.folder = Path(folder)
        self.family, self.kwargs = family, kwargs

    def __call__(self, progress) -> None:
        from ugm_infer.io import _replace_atomically, save_model

        metric = selection_metric(progress.metrics or {})
        if metric is None:
            return
        value = float(progress.metrics[metric])
        ev = progress.history["evaluations"]
        steps = np.asarray(ev["step"])
        earlier = np.asarray(ev[metric], np.float64)[steps < progress.step]
        earlier = earlier[np.isfinite(earlier)]
        if not math.isfinite(value) or (earlier.size and value <= earlier.max()):
            return
        save_model(self.folder, self.family, self.kwargs, progress.state.params)
        particles, replicas = chains_of(progress.state)
        arrays = dict(particles or {})
        arrays.update({_REPLICA + k: v for k, v in (replicas or {}).items()})
        _replace_atomically(str(self.folder / _CHAINS), lambda tmp: np.savez(tmp, **arrays))
        text = json.dumps({"step": int(progress.step), metric: value})
        _replace_atomically(str(self.folder / _STEP), lambda tmp: Path(tmp).write_text(text))


def clear(folder: Path) -> None:
    """Remove the kept model of an earlier run (a fresh run starts without one)."""
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)


def kept_model(folder: Path, result, initial_params) -> Kept:
    """The model to keep from a finished ``ui.fit`` run (``result``).

    The first best held-out evaluation decides: its saved files, the initial parameters
    when it is the evaluation before training, or the final state when it is the last.
    Without held-out data, the final state.
    """
    import ugm_infer as ui

    ev = result.history.get("evaluations", {})
    last = int(np.asarray(ev["step"])[-1]) if len(ev.get("step", ())) else int(getattr(result.state, "step", 0))
    final = Kept(last, result.params, *chains_of(result.state))
    metric = selection_metric(ev)
    if metric is None:
        return final
    values = np.asarray(ev[metric], np.float64)
    if not np.any(np.isfinite(values)):
        return final
    best = int(np.asarray(ev["step"])[int(np.nanargmax(values))])
    if best == final.step:
        return final
    if best == 0:
        return Kept(0, initial_params, None, None)
    try:
        with open(folder / _STEP) as f:
            saved_step = int(json.load(f)["step"])
        if saved_step != best:
            return final
        _, params = ui.load_model(folder)
        with np.load(folder / _CHAINS) as z:
            particles = {k: z[k] for k in z.files if not k.startswith(_REPLICA)} or None
            replicas = {k[len(_REPLICA) :]: z[k] for k in z.files if k.startswith(_REPLICA)} or None
    except (OSError, ValueError, KeyError, TypeError):
        return final
    return Kept(best, params, particles, replicas)
