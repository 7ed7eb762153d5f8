"""What :func:`ugm_infer.fit` returns and raises: results, progress, divergence, interruption."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._idata import KIND_ATTR
from ugm_infer.domains import Binary, Categorical, Spin

__all__ = ["FitDiverged", "FitInterrupted", "FitProgress", "FitResult", "path_name"]


class FitProgress(NamedTuple):
    """What a callback of :func:`fit` receives between jitted chunks.

    step
        Number of learner steps done so far (over all resumed runs).
    epoch
        ``step / steps_per_epoch`` (completed epochs, fractional mid-epoch).
    state
        The current learner state (``state.params`` are the current parameters).
    metrics
        The metrics evaluated at this step, or ``None`` if no evaluation ran here.
    history
        The history so far (same layout as :attr:`FitResult.history`), as read-only
        views that are valid during the call (copy what you keep).
    """

    step: int
    epoch: float
    state: Any
    metrics: dict | None
    history: dict


class FitResult(NamedTuple):
    """Output of :func:`fit`.

    params
        The final parameters (``state.params``).
    history
        A dict of dicts of numpy arrays:

        ``history["evaluations"]``
            one entry per evaluation: ``step`` (learner steps done), ``epoch``
            (``step / steps_per_epoch``), ``wall_time`` (training seconds so far,
            excluding compilation, evaluation and checkpointing), ``eval_seconds``
            and one array per metric (``train_log_likelihood``,
            ``eval_log_likelihood``, ``train_pseudo_log_likelihood``, ... or the
            keys returned by a user ``eval_fn``).
        ``history["steps"]``
            one entry per learner step: ``step`` (1, 2, ...), ``epoch_index``
            (0-based epoch of that step) and every learner info field (e.g.
            ``grad_norm``; non-scalar fields are averaged over their extra axes,
            nested fields are joined with ``.``).
        ``history["epochs"]``
            one entry per completed epoch: ``epoch`` (1, 2, ...), ``step``,
            ``wall_time`` and ``<field>_mean`` of every info field over the epoch.
        ``history["timing"]``
            ``compile_seconds``, ``train_seconds``, ``eval_seconds``,
            ``checkpoint_seconds`` (floats, summed over resumed runs except
            ``compile_seconds``, which is this run's).
    state
        The final learner state (persistent particles included, if the learner has
        any).
    model
        The learner's :class:`~ugm_infer.EnergyModel`.
    learner_name
        The learner's name.
    """

    params: Any
    history: dict
    state: Any
    model: Any
    learner_name: str

    def to_arviz(self, raw_particles: bool = False):
        """The learning history (and persistent particles) as :class:`arviz.InferenceData`.

        Groups
        ------
        ``learning_history``
            the evaluations, dim ``evaluation`` (variables ``step``, ``epoch``,
            ``wall_time``, ``eval_seconds`` and the metrics).
        ``learner_stats``
            per-step learner infos on dim ``step`` (coordinate = step number) and
            per-epoch means on dim ``epoch`` (coordinate = epoch number, variables
            ``<field>_mean``, ``epoch_step``, ``epoch_wall_time``).
        ``learned_params``
            the final parameters, one variable per leaf (path joined with ``.``).
        ``posterior`` (only if the state has a ``particles`` field)
            summary statistics of the persistent particles with dims ``(chain=1,
            draw=particle)``: ``energy`` (at the final parameters, when the particles
            hold every model variable) and ``mean_<var>`` (mean over the variable's
            sites); with ``raw_particles=True`` also the configurations.  The
            particles are treated as one "chain" of exchangeable draws from the
            learned model, so ArviZ summaries (mean, sd, quantiles) are meaningful but
            R-hat is not; ESS over particles only says how diverse they are.

        Saves to netCDF with ``idata.to_netcdf(path)`` (h5netcdf) and reloads with
        ``arviz.from_netcdf``.
        """
        import arviz as az
        import xarray as xr

        groups: dict[str, xr.Dataset] = {}
        ev = self.history.get("evaluations", {})
        n_eval = len(ev.get("step", ()))
        groups["learning_history"] = xr.Dataset(
            {k: ("evaluation", _netcdf_safe(v)) for k, v in ev.items()},
            coords={"evaluation": np.arange(n_eval)},
        )
        st = self.history.get("steps", {})
        ep = self.history.get("epochs", {})
        data_vars = {}
        coords = {}
        if len(st.get("step", ())):
            coords["step"] = np.asarray(st["step"])
            for k, v in st.items():
                if k != "step":
                    data_vars[k] = ("step", _netcdf_safe(v))
        if len(ep.get("epoch", ())):
            coords["epoch"] = np.asarray(ep["epoch"])
            for k, v in ep.items():
                if k == "epoch":
                    continue
                name = k if k.endswith("_mean") else f"epoch_{k}"
                data_vars[name] = ("epoch", _netcdf_safe(v))
        groups["learner_stats"] = xr.Dataset(data_vars, coords=coords)
        pvars = {}
        for path, leaf in jax.tree_util.tree_flatten_with_path(self.params)[0]:
            name = path_name(path) or "params"
            arr = _netcdf_safe(np.asarray(leaf))
            pvars[name] = ([f"{name}_dim_{i}" for i in range(arr.ndim)], arr)
        groups["learned_params"] = xr.Dataset(pvars)

        # the kind tells ui.diagnostics.diagnose to check a learner (its particles are no Markov chain)
        attrs = {"learner": str(self.learner_name), "model": str(getattr(self.model, "name", "")), KIND_ATTR: "fit"}
        posterior = _particle_summaries(self, raw_particles)
        with warnings.catch_warnings():
            # custom group names are not in the InferenceData schema; they round-trip
            warnings.filterwarnings("ignore", message=".*not defined in the InferenceData scheme.*")
            if posterior is not None:
                idata = az.from_dict(posterior=posterior, attrs=attrs)
            else:
                idata = az.InferenceData(attrs=attrs)
            idata.add_groups(groups)
        return idata


class FitDiverged(RuntimeError):
    """Training diverged: parameters or a reported quantity of the learner became NaN or infinite.

    Raised by :func:`ugm_infer.fit` (see its ``check_finite`` argument).  No checkpoint
    holding non-finite values is ever written; the last checkpoint on disk (if any) is
    one of the finite steps before.

    Attributes
    ----------
    step
        The last step whose parameters were finite (``0`` = the initial parameters).
    params
        The parameters after that step (the last finite ones).
    result
        A :class:`FitResult` up to that step (state, history), or ``None``.
    """

    def __init__(self, message: str, step: int, params: Any, result: FitResult | None = None):
        super().__init__(message)
        self.step = int(step)
        self.params = params
        self.result = result


class FitInterrupted(KeyboardInterrupt):
    """Training was interrupted (Ctrl-C) and stopped at a consistent step.

    Raised by :func:`ugm_infer.fit` on ``KeyboardInterrupt``.  With a
    ``checkpoint_dir`` a checkpoint of the last completed step has been written first,
    so calling :func:`ugm_infer.fit` again with the same arguments resumes from it and
    finishes exactly as an uninterrupted run would.  A subclass of
    ``KeyboardInterrupt``: code that handles Ctrl-C keeps working.

    Attributes
    ----------
    step
        The last completed step (the one saved in the checkpoint).
    result
        A :class:`FitResult` up to that step.
    checkpoint_dir
        Where the checkpoint was written, or ``None`` when the fit had no ``checkpoint_dir``.
    """

    def __init__(self, message: str, step: int, result: FitResult | None, checkpoint_dir: str | None):
        super().__init__(message)
        self.step = int(step)
        self.result = result
        self.checkpoint_dir = checkpoint_dir


def path_name(path) -> str:
    """A pytree path as a dotted name (``kernel_info.acceptance_rate``)."""
    parts = []
    for p in path:
        if isinstance(p, jax.tree_util.DictKey):
            parts.append(str(p.key))
        elif isinstance(p, jax.tree_util.GetAttrKey):
            parts.append(str(p.name))
        elif isinstance(p, jax.tree_util.SequenceKey):
            parts.append(str(p.idx))
        else:
            parts.append(str(p).strip(".[]'\""))
    return ".".join(parts)


def _netcdf_safe(v: Any) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype == bool:
        return arr.astype(np.int8)
    return arr


def _particle_summaries(result: FitResult, raw: bool) -> dict | None:
    particles = getattr(result.state, "particles", None)
    if not isinstance(particles, Mapping) or not particles:
        return None
    model = result.model
    leaves = {n: np.asarray(v) for n, v in particles.items()}
    num = next(iter(leaves.values())).shape[0]
    out: dict[str, np.ndarray] = {}
    if set(leaves) >= set(model.variables):
        energies = np.asarray(model.energies(result.params, {n: jnp.asarray(leaves[n]) for n in model.variables}))
        out["energy"] = energies.reshape(1, num)
    for n, v in leaves.items():
        out[f"mean_{n}"] = v.reshape(num, -1).astype(np.float64).mean(axis=1).reshape(1, num)
        if raw:
            d = model.variables.get(n)
            arr = v.reshape((1,) + v.shape)
            if isinstance(d, (Binary, Spin, Categorical)) and np.issubdtype(arr.dtype, np.floating):
                arr = arr.astype(np.int8)
            out[n] = arr
    return out
