"""``ui.fit``: the training driver for any learner, with evaluation, history and checkpoints.

A learner (see :mod:`ugm_infer.learn`) is a pair of pure functions
``init(rng_key, params, data=None) -> state`` and ``step(rng_key, state, batch) ->
(state, info)``.  :func:`fit` runs it over minibatches and epochs:

* **validation first** -- the data (names, shapes, values inside the domains, no NaN),
  the parameters and every argument are checked on the host before anything is
  traced or compiled, and a bad one raises ``ValueError``/``TypeError`` naming it;
* **one compiled program** -- the inner loop is a :func:`jax.lax.scan` over up to
  ``steps_per_jit`` learner steps, compiled once before training (a masked scan: a
  chunk shorter than ``steps_per_jit`` skips the remaining iterations with
  :func:`jax.lax.cond`, so every chunk runs the *same* executable, and chunks may
  span epochs); it is cached per learner, so fitting the same learner again on data
  of the same shapes (other seeds, other initial parameters) does not recompile;
* **reproducible randomness** -- with ``key_init, key_params, key_train =
  jax.random.split(rng_key, 3)``, epoch ``e`` uses ``epoch_key = fold_in(key_train,
  e)``, ``key_perm, key_steps = split(epoch_key)``, the minibatch order
  ``permutation(key_perm, N)`` and, for its ``s``-th step, ``fold_in(key_steps, s)``.
  Every step's randomness is a function of ``(rng_key, epoch, s)`` only, so a run can
  be stopped and resumed at any step;
* **evaluation** every ``eval_every`` epochs (exact average log-likelihood when the
  model is small enough to enumerate, else the pseudo-log-likelihood for fully
  visible models, or a user function), recorded with training wall time;
* **checkpoints** every ``checkpoint_every`` steps, written atomically, from which
  a resumed run reproduces the uninterrupted run *bit for bit*;
* a :class:`FitResult` with the parameters, the final learner state (persistent
  particles included), the history, and :meth:`FitResult.to_arviz`.

Row indices for learners with per-datum state: when ``learner.step`` has a string
attribute ``batch_index_key`` (see :func:`batch_index_key`), every minibatch also
carries that key, holding the ``(batch_size,)`` int32 row indices of the batch into the
``data`` that was given to ``learner.init`` (e.g. :func:`ugm_infer.learn.apcd`, which
then reads its per-datum chains and running statistics by index instead of by hashing
the rows).  Other learners see the same batches as before.

Minibatches keep static shapes: an epoch has ``N // batch_size`` steps and the last
``N % batch_size`` examples of each epoch's permutation are dropped (with
``shuffle=True`` a different subset each epoch; a warning says so once).

References
----------
Robbins, H. and Monro, S. (1951). A stochastic approximation method.
Ann. Math. Statist. 22, 400-407.
Younes, L. (1989). Parametric inference for imperfectly observed Gibbsian fields.
Probab. Theory Related Fields 82, 625-645.
Tieleman, T. (2008). Training restricted Boltzmann machines using approximations to
the likelihood gradient. ICML.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Categorical, Domain, Spin

__all__ = ["FitProgress", "FitResult", "batch_index_key", "fit", "load_checkpoint"]

CHECKPOINT_NPZ = "checkpoint.npz"
CHECKPOINT_JSON = "checkpoint.json"
_FORMAT = "ugm_infer.fit/1"
_SEP = "::"
# largest number of configurations the automatic evaluation enumerates exactly
_MAX_EXACT_CONFIGURATIONS = 2**22
# at most this many examples are used by the automatic pseudo-log-likelihood
_MAX_PLL_EXAMPLES = 2000
_DEFAULT_MAX_STEPS_PER_JIT = 1000


# ----------------------------------------------------------------------------------
# public containers
# ----------------------------------------------------------------------------------
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
        The history so far (same layout as :attr:`FitResult.history`).
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
            name = _path_name(path) or "params"
            arr = _netcdf_safe(np.asarray(leaf))
            pvars[name] = ([f"{name}_dim_{i}" for i in range(arr.ndim)], arr)
        groups["learned_params"] = xr.Dataset(pvars)

        attrs = {"learner": str(self.learner_name), "model": str(getattr(self.model, "name", ""))}
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


# ----------------------------------------------------------------------------------
# argument checking (all on the host, before anything is traced)
# ----------------------------------------------------------------------------------
def _check_int(value: Any, name: str, minimum: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an int >= {minimum}{' or None' if allow_none else ''}, got {value!r}")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}")
    return int(value)


def _check_learner(learner: Any) -> None:
    for attr in ("init", "step", "model", "visible"):
        if not hasattr(learner, attr):
            raise TypeError(
                f"`learner` must be a ui.learn Learner (init, step, model, name, visible); "
                f"{type(learner).__name__} has no `{attr}`"
            )
    if not callable(learner.init) or not callable(learner.step):
        raise TypeError("`learner.init` and `learner.step` must be callable")
    visible = tuple(learner.visible)
    if not visible:
        raise ValueError("`learner.visible` names no variable")
    variables = getattr(learner.model, "variables", None)
    if not isinstance(variables, Mapping):
        raise TypeError("`learner.model` must be an EnergyModel (with `.variables`)")
    for n in visible:
        if n not in variables:
            raise ValueError(f"`learner.visible` names '{n}', which is not a variable of the model ({list(variables)})")
    batch_index_key(learner)


def _as_key(rng_key: Any) -> jax.Array:
    if isinstance(rng_key, jax.Array) and jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        if rng_key.shape != ():
            raise ValueError(f"`rng_key` must be a single key, got a key array of shape {rng_key.shape}")
        return rng_key
    arr = np.asarray(rng_key) if not isinstance(rng_key, jax.Array) else rng_key
    if getattr(arr, "dtype", None) == np.uint32 and tuple(arr.shape) == (2,):
        return jax.random.wrap_key_data(jnp.asarray(arr))
    raise TypeError(f"`rng_key` must be a jax.random.key(...) or a PRNGKey (uint32 of shape (2,)), got {rng_key!r}")


def _validate_data(data: Any, learner: Any, argname: str) -> dict[str, np.ndarray]:
    """Check a dict of visible variables with a leading example axis; return host arrays."""
    visible = tuple(learner.visible)
    variables: dict[str, Domain] = learner.model.variables
    if data is None:
        raise ValueError(f"`{argname}` is required: a dict of the visible variables {list(visible)}")
    if not isinstance(data, Mapping):
        if len(visible) != 1:
            raise ValueError(
                f"`{argname}` must be a dict {{name: array}} of the visible variables {list(visible)} "
                f"(a bare array is only accepted when the learner has one visible variable); got {type(data).__name__}"
            )
        data = {visible[0]: data}
    unknown = [n for n in data if n not in visible]
    if unknown:
        raise ValueError(
            f"`{argname}` has unknown variable(s) {unknown}; the learner's visible variables are {list(visible)}"
        )
    missing = [n for n in visible if n not in data]
    if missing:
        raise ValueError(f"`{argname}` is missing visible variable(s) {missing}")
    out: dict[str, np.ndarray] = {}
    num = None
    for n in visible:
        d = variables[n]
        try:
            arr = np.asarray(data[n])
        except Exception as err:  # noqa: BLE001 - anything that is not array-like
            raise TypeError(f"`{argname}['{n}']` is not array-like: {err}") from err
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"`{argname}['{n}']` must be numeric, got dtype {arr.dtype}")
        if arr.ndim != 1 + len(d.shape) or tuple(arr.shape[1:]) != d.shape:
            raise ValueError(
                f"`{argname}['{n}']` has shape {arr.shape}; expected (num_examples, {', '.join(map(str, d.shape))}) "
                f"for {d!r}"
            )
        if arr.shape[0] == 0:
            raise ValueError(f"`{argname}['{n}']` is empty (0 examples)")
        if num is None:
            num = arr.shape[0]
        elif arr.shape[0] != num:
            raise ValueError(
                f"`{argname}` variables disagree on the number of examples: '{n}' has {arr.shape[0]}, expected {num}"
            )
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            raise ValueError(f"`{argname}['{n}']` contains NaN or inf")
        bad = ~d.contains(arr)
        if np.any(bad):
            raise ValueError(
                f"`{argname}['{n}']` has {int(bad.sum())} value(s) outside the domain {d!r} "
                f"(allowed {d.values.tolist()}), e.g. {arr[bad].reshape(-1)[0]}"
            )
        out[n] = np.ascontiguousarray(arr.astype(np.dtype(d.dtype)))
    return out


def _resolve_progress(progress: Any) -> bool:
    if progress is True or progress is False:
        return progress
    if progress != "auto":
        raise ValueError(f"`progress` must be True, False or 'auto', got {progress!r}")
    if os.environ.get("CI"):
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def _fingerprint(data: dict[str, np.ndarray]) -> str:
    h = hashlib.sha1()
    for n in sorted(data):
        arr = data[n]
        h.update(n.encode())
        h.update(str(arr.shape).encode())
        h.update(str(arr.dtype).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------
def _exact_module():
    try:
        from ugm_infer import exact  # noqa: PLC0415 - optional dependency inside the package
    except ImportError:
        return None
    return exact


def _pll_function():
    try:
        from ugm_infer.learn.pseudo_likelihood import pseudo_log_likelihood  # noqa: PLC0415
    except ImportError:
        return None
    return pseudo_log_likelihood


def _exact_feasible(exact: Any, model: Any, params: Any, visible: tuple[str, ...]) -> bool:
    """Whether ``log Z`` and the likelihood enumerate at most ``2**22`` configurations."""
    try:
        for observed in ((), visible):
            exact.enumeration_plan(model, params, observed, max_configurations=_MAX_EXACT_CONFIGURATIONS)
    except ValueError:
        return False
    return True


def _build_eval(
    eval_fn: Any, learner: Any, params: Any, data: dict, eval_data: dict | None
) -> tuple[Callable[[Any], dict[str, float]] | None, str]:
    """Return (params -> metrics dict, description)."""
    if eval_fn is None:
        return None, "none"
    if callable(eval_fn):

        def user(params):
            out = eval_fn(params)
            if not isinstance(out, Mapping):
                raise TypeError(f"`eval_fn` must return a dict of floats, got {type(out).__name__}")
            res = {}
            for k, v in out.items():
                arr = np.asarray(v)
                if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
                    raise TypeError(f"`eval_fn` returned a non-scalar value for '{k}': {v!r}")
                res[str(k)] = float(arr.reshape(()))
            return res

        return user, "user"
    if eval_fn != "auto":
        raise ValueError(f"`eval_fn` must be 'auto', None or a callable params -> dict, got {eval_fn!r}")
    model = learner.model
    visible = tuple(learner.visible)
    sets = {"train": data} if eval_data is None else {"train": data, "eval": eval_data}
    exact = _exact_module()
    if exact is not None and _exact_feasible(exact, model, params, visible):

        def exact_eval(params):
            return {
                f"{name}_log_likelihood": float(exact.average_log_likelihood(model, params, d)) for name, d in sets.items()
            }

        return exact_eval, "exact"
    pll_fn = _pll_function()
    if pll_fn is not None and set(visible) == set(model.variables):
        subsets = {}
        for name, d in sets.items():
            n = next(iter(d.values())).shape[0]
            if n > _MAX_PLL_EXAMPLES:
                idx = np.linspace(0, n - 1, _MAX_PLL_EXAMPLES).round().astype(np.int64)
                d = {k: v[idx] for k, v in d.items()}
            subsets[name] = {k: jnp.asarray(v) for k, v in d.items()}
        pll = jax.jit(lambda params, d: jnp.mean(pll_fn(model, params, d)))

        def pll_eval(params):
            return {f"{name}_pseudo_log_likelihood": float(pll(params, d)) for name, d in subsets.items()}

        return pll_eval, "pseudo_log_likelihood"
    warnings.warn(
        f"fit: no automatic evaluation for model '{model.name}' (too large to enumerate and not fully visible); "
        "pass eval_fn=callable to record metrics",
        stacklevel=3,
    )
    return None, "none"


# ----------------------------------------------------------------------------------
# keys and the compiled chunk
# ----------------------------------------------------------------------------------
def _epoch_keys(key_train: jax.Array, epoch: jax.Array) -> tuple[jax.Array, jax.Array]:
    key_perm, key_steps = jax.random.split(jax.random.fold_in(key_train, epoch))
    return key_perm, key_steps


def batch_index_key(learner: Any) -> str | None:
    """The batch key under which :func:`fit` passes row indices to ``learner``, or ``None``.

    A learner asks for the indices of its minibatch rows (into the ``data`` given to its
    ``init``) by setting a string attribute ``batch_index_key`` on its ``step``
    function, e.g. ``step.batch_index_key = "_index"``; :func:`fit` then adds
    ``batch[key] = indices`` (``(batch_size,)`` int32) to every minibatch.  The key must
    not be a variable name of the model.
    """
    key = getattr(getattr(learner, "step", None), "batch_index_key", None)
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise TypeError(f"`learner.step.batch_index_key` must be a non-empty str or absent, got {key!r}")
    if key in getattr(learner.model, "variables", {}):
        raise ValueError(f"`learner.step.batch_index_key` {key!r} clashes with a variable of the model")
    return key


def _make_perm_fn(num_examples: int, shuffle: bool):
    def perm_fn(key_train, epoch):
        if not shuffle:
            return jnp.arange(num_examples, dtype=jnp.int32)
        key_perm, _ = _epoch_keys(key_train, epoch)
        return jax.random.permutation(key_perm, num_examples).astype(jnp.int32)

    return perm_fn


def _make_chunk_fn(learner, info_shape, num_examples, batch_size, steps_per_epoch, chunk_len, shuffle):
    """``run(state, data, key_train, perm, start, count) -> (state, perm, infos)``.

    Runs global steps ``start, ..., start + count - 1`` (``count <= chunk_len``) in a
    scan of static length ``chunk_len``; iterations ``i >= count`` are skipped by
    ``lax.cond``.  ``perm`` is the permutation of the epoch containing ``start``; it
    is recomputed in the loop when a new epoch begins.
    """
    perm_fn = _make_perm_fn(num_examples, shuffle)
    zeros_info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info_shape)
    index_key = batch_index_key(learner)

    def run(state, data, key_train, perm, start, count):
        def body(carry, i):
            state, perm = carry
            g = start + i
            epoch = g // steps_per_epoch
            s = g % steps_per_epoch

            def do(operand):
                state, perm = operand
                perm = jax.lax.cond((s == 0) & (i > 0), lambda: perm_fn(key_train, epoch), lambda: perm)
                idx = jax.lax.dynamic_slice(perm, (s * batch_size,), (batch_size,))
                batch = {n: jnp.take(x, idx, axis=0) for n, x in data.items()}
                if index_key is not None:
                    batch[index_key] = idx
                _, key_steps = _epoch_keys(key_train, epoch)
                new_state, info = learner.step(jax.random.fold_in(key_steps, s), state, batch)
                return (new_state, perm), info

            def skip(operand):
                return operand, zeros_info

            return jax.lax.cond(i < count, do, skip, (state, perm))

        (state, perm), infos = jax.lax.scan(body, (state, perm), jnp.arange(chunk_len, dtype=jnp.int32))
        return state, perm, infos

    return run, perm_fn


# learner.step -> {static configuration: (jitted chunk, jitted permutation)}: repeated
# fits of the same learner on data of the same shapes compile once
_CHUNK_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _compiled_chunk(learner, info_shape, num_examples, batch_size, steps_per_epoch, chunk_len, shuffle):
    config = (
        num_examples,
        batch_size,
        steps_per_epoch,
        chunk_len,
        shuffle,
        jax.tree.structure(info_shape),
        tuple((s.shape, s.dtype) for s in jax.tree.leaves(info_shape)),
    )
    try:
        per_learner = _CHUNK_CACHE.setdefault(learner.step, {})
    except TypeError:  # not weak-referenceable: no caching
        per_learner = {}
    if config not in per_learner:
        run, perm_fn = _make_chunk_fn(learner, info_shape, num_examples, batch_size, steps_per_epoch, chunk_len, shuffle)
        per_learner[config] = (jax.jit(run), jax.jit(perm_fn))
    return per_learner[config]


# ----------------------------------------------------------------------------------
# history helpers
# ----------------------------------------------------------------------------------
def _path_name(path) -> str:
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


def _info_fields(infos: Any, count: int) -> dict[str, np.ndarray]:
    """Per-step scalar summaries of the stacked infos of one chunk."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(infos)[0]:
        arr = np.asarray(leaf)[:count]
        if arr.dtype == bool:
            arr = arr.astype(np.float64)
        if not np.issubdtype(arr.dtype, np.number):
            continue
        if arr.ndim > 1:
            arr = arr.reshape(count, -1).astype(np.float64).mean(axis=1)
        name = _path_name(path) or "info"
        out[name] = arr
    return out


def _strong(x: Any) -> Any:
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x
    x = jnp.asarray(x)
    return jax.lax.convert_element_type(x, x.dtype) if x.weak_type else x


def _netcdf_safe(v: Any) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype == bool:
        return arr.astype(np.int8)
    return arr


class _History:
    """Growing history; converted to the public dict-of-arrays layout."""

    def __init__(self):
        self.evaluations: dict[str, list] = {}
        self.steps: dict[str, list] = {}
        self.epochs: dict[str, list] = {}
        self.timing = {"compile_seconds": 0.0, "train_seconds": 0.0, "eval_seconds": 0.0, "checkpoint_seconds": 0.0}

    @staticmethod
    def _append(table: dict[str, list], record: dict[str, Any], length: int) -> None:
        for k in record:
            if k not in table:
                table[k] = [np.nan] * length  # a field that appeared late
        for k in table:
            table[k].append(record.get(k, np.nan))

    def _len(self, table):
        return len(next(iter(table.values()))) if table else 0

    def add_eval(self, record):
        self._append(self.evaluations, record, self._len(self.evaluations))

    def add_steps(self, fields: dict[str, np.ndarray], steps: np.ndarray, epoch_index: np.ndarray):
        n0 = self._len(self.steps)
        for k in fields:
            if k not in self.steps and k not in ("step", "epoch_index"):
                self.steps[k] = [np.nan] * n0
        self.steps.setdefault("step", []).extend(steps.tolist())
        self.steps.setdefault("epoch_index", []).extend(epoch_index.tolist())
        for k in self.steps:
            if k in ("step", "epoch_index"):
                continue
            vals = fields.get(k)
            self.steps[k].extend(vals.tolist() if vals is not None else [np.nan] * len(steps))

    def close_epoch(self, epoch: int, steps_per_epoch: int, wall_time: float):
        """Record epoch ``epoch`` (1-based); its steps are history rows ``(epoch-1)*spe ... epoch*spe - 1``."""
        step = epoch * steps_per_epoch
        rec = {"epoch": epoch, "step": step, "wall_time": wall_time}
        lo, hi = step - steps_per_epoch, step
        if self.steps and len(self.steps["step"]) >= hi and self.steps["step"][lo] == lo + 1:
            for k, v in self.steps.items():
                if k in ("step", "epoch_index"):
                    continue
                vals = np.asarray(v[lo:hi], dtype=np.float64)
                rec[f"{k}_mean"] = float(np.mean(vals))
        self._append(self.epochs, rec, self._len(self.epochs))

    def as_dict(self) -> dict:
        def arrays(table):
            return {k: np.asarray(v) for k, v in table.items()}

        return {
            "evaluations": arrays(self.evaluations),
            "steps": arrays(self.steps),
            "epochs": arrays(self.epochs),
            "timing": dict(self.timing),
        }

    @classmethod
    def from_dict(cls, d: dict) -> _History:
        h = cls()
        h.evaluations = {k: list(np.asarray(v).tolist()) for k, v in d.get("evaluations", {}).items()}
        h.steps = {k: list(np.asarray(v).tolist()) for k, v in d.get("steps", {}).items()}
        h.epochs = {k: list(np.asarray(v).tolist()) for k, v in d.get("epochs", {}).items()}
        h.timing.update({k: float(v) for k, v in d.get("timing", {}).items()})
        return h


# ----------------------------------------------------------------------------------
# checkpoints
# ----------------------------------------------------------------------------------
def _atomic_write(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _save_checkpoint(directory: str, state: Any, meta: dict, history: dict) -> None:
    os.makedirs(directory, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    key_leaves = {}
    for i, leaf in enumerate(jax.tree.leaves(state)):
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            key_leaves[str(i)] = str(jax.random.key_impl(leaf))
            leaf = jax.random.key_data(leaf)
        arrays[f"state{_SEP}{i}"] = np.asarray(leaf)
    for group in ("evaluations", "steps", "epochs"):
        for k, v in history[group].items():
            arrays[f"history{_SEP}{group}{_SEP}{k}"] = np.asarray(v)
    meta = {**meta, "key_leaves": key_leaves, "timing": history["timing"]}
    arrays["meta"] = np.asarray(json.dumps(meta, sort_keys=True))
    _atomic_write(os.path.join(directory, CHECKPOINT_NPZ), lambda f: np.savez(f, **arrays))
    readable = {k: v for k, v in meta.items() if k not in ("state_treedef",)}
    _atomic_write(
        os.path.join(directory, CHECKPOINT_JSON),
        lambda f: f.write(json.dumps(readable, indent=2, sort_keys=True) + "\n"),
        mode="w",
    )


def load_checkpoint(checkpoint_dir: str) -> dict | None:
    """Read the checkpoint in ``checkpoint_dir`` (``None`` if there is none).

    Returns a dict with ``meta`` (the metadata written by :func:`fit`: step, epoch,
    learner name, batch size, data fingerprint, key data, ...), ``state_leaves``
    (the flattened learner state, host arrays; PRNG-key leaves as raw key data) and
    ``history`` (the history so far).
    """
    path = os.path.join(checkpoint_dir, CHECKPOINT_NPZ)
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        leaves = []
        i = 0
        while f"state{_SEP}{i}" in z.files:
            leaves.append(np.array(z[f"state{_SEP}{i}"]))
            i += 1
        history: dict = {"evaluations": {}, "steps": {}, "epochs": {}, "timing": meta.get("timing", {})}
        for name in z.files:
            if name.startswith(f"history{_SEP}"):
                _, group, key = name.split(_SEP, 2)
                history[group][key] = np.array(z[name])
    return {"meta": meta, "state_leaves": leaves, "history": history}


def _restore_state(ckpt: dict, state_shape: Any) -> Any:
    leaves_shape, treedef = jax.tree.flatten(state_shape)
    meta = ckpt["meta"]
    if meta.get("state_treedef") != str(treedef):
        raise ValueError(
            "`checkpoint_dir` holds a learner state of a different structure; "
            f"checkpoint: {meta.get('state_treedef')}, learner: {treedef}. Use another checkpoint_dir or resume=False"
        )
    saved = ckpt["state_leaves"]
    if len(saved) != len(leaves_shape):
        raise ValueError("`checkpoint_dir`: the number of saved state arrays does not match the learner state")
    leaves = []
    for i, (arr, shape) in enumerate(zip(saved, leaves_shape)):
        impl = meta.get("key_leaves", {}).get(str(i))
        if impl is not None:
            leaf = jax.random.wrap_key_data(jnp.asarray(arr), impl=impl)
        else:
            leaf = jnp.asarray(arr, dtype=shape.dtype)
        if leaf.shape != shape.shape or leaf.dtype != shape.dtype:
            raise ValueError(
                f"`checkpoint_dir`: state leaf {i} has shape {leaf.shape} dtype {leaf.dtype}; the learner "
                f"expects {shape.shape} {shape.dtype}"
            )
        leaves.append(leaf)
    return jax.tree.unflatten(treedef, leaves)


# ----------------------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------------------
def fit(
    learner: Any,
    rng_key: jax.Array,
    data: Any,
    *,
    params: Any = None,
    num_epochs: int = 10,
    batch_size: int = 100,
    shuffle: bool = True,
    steps_per_jit: int | None = None,
    eval_every: int | None = None,
    eval_fn: Any = "auto",
    callbacks: Sequence[Callable[[FitProgress], Any]] = (),
    progress: bool | str = "auto",
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = True,
    eval_data: Any = None,
    max_steps: int | None = None,
) -> FitResult:
    """Train ``learner`` on ``data`` by minibatch stochastic approximation.

    Each epoch visits a fresh permutation of the data in ``N // batch_size``
    minibatches of ``batch_size`` examples (the remainder is dropped, see below) and
    calls ``learner.step`` once per minibatch.  Steps run inside one compiled
    :func:`jax.lax.scan` of ``steps_per_jit`` iterations; the host only intervenes
    between chunks (evaluation, checkpoints, callbacks, progress bar).

    Parameters
    ----------
    learner
        A :class:`ugm_infer.learn.Learner` (``init``, ``step``, ``model``, ``name``,
        ``visible``).
    rng_key
        A ``jax.random.key`` (or legacy ``PRNGKey``).  The same key gives the same run;
        see the module docstring for how per-epoch and per-step keys derive from it.
    data
        ``{name: (N, *shape)}`` for every visible variable of the learner, or a bare
        ``(N, *shape)`` array when the learner has exactly one visible variable.
        Values must lie in the variables' domains.
    params
        Initial parameters.  Default: ``learner.model.init_params(key_params)`` if
        the model has ``init_params``; otherwise required.
    num_epochs
        Number of passes over the data (``>= 1``).  A resumed run continues up to
        this many epochs in total.
    batch_size
        Examples per step, ``1 <= batch_size <= N``.  When ``N % batch_size != 0``
        the last ``N % batch_size`` examples of each epoch's permutation are dropped
        (shapes stay static; with ``shuffle=True`` every example is still used over
        the epochs), and a warning says so.
    shuffle
        Permute the data every epoch (from the epoch key); ``False`` visits the
        examples in order.
    steps_per_jit
        Length of the compiled scan: the most steps run between two host
        interventions.  Default ``min(max(steps_per_epoch, 100), 1000)``.  Chunks may
        span epochs; they stop early at evaluations, checkpoints and ``max_steps``.
    eval_every
        Evaluate every ``eval_every`` **epochs** (default 1), always also before the
        first step of a fresh run and after the last step.
    eval_fn
        ``"auto"``: the exact average log-likelihood (:mod:`ugm_infer.exact`) when
        ``log Z`` and the likelihood enumerate at most ``2**22`` configurations (after
        summing one variable analytically, see :func:`ugm_infer.exact.enumeration_plan`);
        otherwise, for fully visible models, the average pseudo-log-likelihood
        (:func:`ugm_infer.learn.pseudo_likelihood.pseudo_log_likelihood`, on at most
        2000 evenly spaced examples of each data set); metric names are prefixed ``train_`` and,
        with ``eval_data``, ``eval_``.  ``None`` disables evaluation.  A callable
        ``eval_fn(params) -> {name: float}`` is used as is.
    callbacks
        Functions ``callback(progress: FitProgress)`` called on the host after every
        chunk (at least once per ``steps_per_jit`` steps and after every
        evaluation).  Returning ``True`` stops training (a final checkpoint is
        written).  An exception propagates and leaves the last checkpoint in place.
    progress
        ``True``/``False`` or ``"auto"``: a tqdm bar when stderr is a terminal and the
        ``CI`` environment variable is not set.
    checkpoint_dir
        Directory for ``checkpoint.npz`` (learner state, history, counters, key
        data, metadata) and a readable ``checkpoint.json``; both written atomically
        (temporary file + rename).  A checkpoint is also written when the run ends.
    checkpoint_every
        Write a checkpoint every this many **steps** (needs ``checkpoint_dir``).
    resume
        If ``checkpoint_dir`` holds a checkpoint, continue from it (its learner name,
        batch size, shuffling, data and key must match; mismatches raise
        ``ValueError``).  ``False`` ignores and overwrites it.  A resumed run gives
        parameters bit-identical to an uninterrupted run with the same arguments.
    eval_data
        Optional held-out data (same format as ``data``) for ``eval_fn="auto"``.
    max_steps
        Stop once this many steps have been done in total (counting resumed runs);
        for step budgets and for testing interruption.

    Returns
    -------
    FitResult

    Raises
    ------
    ValueError, TypeError
        On bad arguments, before anything is compiled.

    Examples
    --------
    >>> result = ui.fit(ui.learn.pcd(model, num_particles=100), jax.random.key(0), data,
    ...                 num_epochs=20, batch_size=100)                      # doctest: +SKIP
    >>> result.history["evaluations"]["train_log_likelihood"]               # doctest: +SKIP
    """
    # ---------------- validation (host only, nothing traced) ----------------
    _check_learner(learner)
    num_epochs = _check_int(num_epochs, "num_epochs", 1)
    batch_size = _check_int(batch_size, "batch_size", 1)
    steps_per_jit = _check_int(steps_per_jit, "steps_per_jit", 1, allow_none=True)
    eval_every = _check_int(eval_every, "eval_every", 1, allow_none=True)
    checkpoint_every = _check_int(checkpoint_every, "checkpoint_every", 1, allow_none=True)
    max_steps = _check_int(max_steps, "max_steps", 1, allow_none=True)
    if not isinstance(shuffle, bool):
        raise ValueError(f"`shuffle` must be True or False, got {shuffle!r}")
    if not isinstance(resume, bool):
        raise ValueError(f"`resume` must be True or False, got {resume!r}")
    show_progress = _resolve_progress(progress)
    if callable(callbacks):
        callbacks = (callbacks,)
    callbacks = tuple(callbacks)
    for i, cb in enumerate(callbacks):
        if not callable(cb):
            raise TypeError(f"`callbacks[{i}]` is not callable: {cb!r}")
    if checkpoint_every is not None and checkpoint_dir is None:
        raise ValueError("`checkpoint_every` needs `checkpoint_dir`")
    if checkpoint_dir is not None:
        checkpoint_dir = os.fspath(checkpoint_dir)
        if os.path.exists(checkpoint_dir) and not os.path.isdir(checkpoint_dir):
            raise ValueError(f"`checkpoint_dir` {checkpoint_dir!r} exists and is not a directory")
    key = _as_key(rng_key)
    train = _validate_data(data, learner, "data")
    num_examples = next(iter(train.values())).shape[0]
    if batch_size > num_examples:
        raise ValueError(f"`batch_size` ({batch_size}) is larger than the number of examples in `data` ({num_examples})")
    held_out = _validate_data(eval_data, learner, "eval_data") if eval_data is not None else None
    model = learner.model
    key_init, key_params, key_train = jax.random.split(key, 3)
    if params is None:
        if not hasattr(model, "init_params"):
            raise ValueError(f"`params` is required: model '{model.name}' has no init_params")
        params = model.init_params(key_params)
    model.validate_params(params)
    evaluate, eval_kind = _build_eval(eval_fn, learner, params, train, held_out)
    steps_per_epoch = num_examples // batch_size
    if num_examples % batch_size:
        warnings.warn(
            f"fit: {num_examples} examples are not a multiple of batch_size={batch_size}; each epoch drops the last "
            f"{num_examples % batch_size} examples of its permutation ({steps_per_epoch} steps per epoch)",
            stacklevel=2,
        )
    total_steps = num_epochs * steps_per_epoch
    if max_steps is not None:
        total_steps = min(total_steps, max_steps)
    chunk_len = steps_per_jit or min(max(steps_per_epoch, 100), _DEFAULT_MAX_STEPS_PER_JIT)
    eval_every_steps = (eval_every or 1) * steps_per_epoch
    fingerprint = _fingerprint(train)
    learner_name = str(getattr(learner, "name", type(learner).__name__))
    key_data = np.asarray(jax.random.key_data(key)).tolist()

    # ---------------- initial state (fresh or resumed) ----------------
    train_dev = {n: jnp.asarray(v) for n, v in train.items()}
    # a concrete init (not eval_shape): learners may probe the model's structure from
    # concrete parameters the first time.  Strong dtypes, exactly as a restored state
    # has them (the compiled chunk is specialised to its argument types).
    state = jax.tree.map(_strong, learner.init(key_init, params, train_dev))
    state_shape = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    state_treedef = str(jax.tree.structure(state_shape))
    ckpt = load_checkpoint(checkpoint_dir) if (checkpoint_dir is not None and resume) else None
    if ckpt is not None:
        meta = ckpt["meta"]
        expected = {
            "learner": learner_name,
            "batch_size": batch_size,
            "shuffle": shuffle,
            "num_examples": num_examples,
            "data_fingerprint": fingerprint,
            "key_data": key_data,
        }
        for k, v in expected.items():
            if meta.get(k) != v:
                raise ValueError(
                    f"cannot resume from `checkpoint_dir` {checkpoint_dir!r}: its {k} is {meta.get(k)!r} but this run has "
                    f"{v!r} (pass resume=False to start over)"
                )
        if meta.get("chunk_len") != chunk_len:
            warnings.warn(
                f"fit: resuming with steps_per_jit={chunk_len} (checkpoint used {meta.get('chunk_len')}); results "
                "may differ from the uninterrupted run in the last bits",
                stacklevel=2,
            )
        state = _restore_state(ckpt, state_shape)
        step = int(meta["step"])
        if step > num_epochs * steps_per_epoch:
            raise ValueError(
                f"the checkpoint in `checkpoint_dir` is at step {step}, beyond num_epochs={num_epochs} "
                f"({num_epochs * steps_per_epoch} steps); raise num_epochs or use resume=False"
            )
        history = _History.from_dict(ckpt["history"])
        history.timing["compile_seconds"] = 0.0
    else:
        step = 0
        history = _History()

    # ---------------- compile the chunk once ----------------
    batch_shape = {n: jax.ShapeDtypeStruct((batch_size,) + v.shape[1:], v.dtype) for n, v in train_dev.items()}
    index_key = batch_index_key(learner)
    if index_key is not None:
        batch_shape[index_key] = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
    info_shape = jax.eval_shape(lambda k, s, b: learner.step(k, s, b)[1], key_init, state, batch_shape)
    run_jit, perm_jit = _compiled_chunk(learner, info_shape, num_examples, batch_size, steps_per_epoch, chunk_len, shuffle)
    t0 = time.perf_counter()
    perm0 = perm_jit(key_train, jnp.int32(step // steps_per_epoch))
    # a zero-length chunk compiles (or fetches from jit's cache) without changing anything
    jax.block_until_ready(run_jit(state, train_dev, key_train, perm0, jnp.int32(step), jnp.int32(0)))
    history.timing["compile_seconds"] = time.perf_counter() - t0

    def meta_now(step_now: int) -> dict:
        return {
            "format": _FORMAT,
            "learner": learner_name,
            "model": str(getattr(model, "name", "")),
            "step": step_now,
            "epoch": step_now // steps_per_epoch,
            "step_in_epoch": step_now % steps_per_epoch,
            "steps_per_epoch": steps_per_epoch,
            "batch_size": batch_size,
            "shuffle": shuffle,
            "num_examples": num_examples,
            "num_epochs": num_epochs,
            "chunk_len": chunk_len,
            "data_fingerprint": fingerprint,
            "key_data": key_data,
            "key_impl": str(jax.random.key_impl(key)),
            "state_treedef": state_treedef,
            "eval_kind": eval_kind,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }

    def checkpoint(step_now: int) -> None:
        t = time.perf_counter()
        _save_checkpoint(checkpoint_dir, state, meta_now(step_now), history.as_dict())
        history.timing["checkpoint_seconds"] += time.perf_counter() - t

    def run_eval(step_now: int) -> dict | None:
        if evaluate is None:
            return None
        t = time.perf_counter()
        metrics = evaluate(state.params)
        dt = time.perf_counter() - t
        history.timing["eval_seconds"] += dt
        history.add_eval(
            {
                "step": step_now,
                "epoch": step_now / steps_per_epoch,
                "wall_time": history.timing["train_seconds"],
                "eval_seconds": dt,
                **metrics,
            }
        )
        return metrics

    bar = None
    if show_progress:
        from tqdm.auto import tqdm  # noqa: PLC0415

        bar = tqdm(total=total_steps, initial=min(step, total_steps), unit="step", desc=learner_name, dynamic_ncols=True)

    try:
        if step == 0:
            metrics = run_eval(0)
            if bar is not None and metrics:
                bar.set_postfix({k: f"{v:.4g}" for k, v in metrics.items()})
        perm = perm0
        stop = False
        while step < total_steps and not stop:
            # next boundary: chunk length, evaluation, checkpoint, end
            end = min(step + chunk_len, total_steps)
            end = min(end, (step // eval_every_steps + 1) * eval_every_steps)
            if checkpoint_every is not None:
                end = min(end, (step // checkpoint_every + 1) * checkpoint_every)
            count = end - step
            if step % steps_per_epoch == 0 and step > 0:
                perm = perm_jit(key_train, jnp.int32(step // steps_per_epoch))
            t = time.perf_counter()
            state, perm, infos = run_jit(state, train_dev, key_train, perm, jnp.int32(step), jnp.int32(count))
            infos = jax.device_get(infos)
            jax.block_until_ready(state)
            history.timing["train_seconds"] += time.perf_counter() - t
            steps = np.arange(step + 1, end + 1)
            history.add_steps(_info_fields(infos, count), steps, (steps - 1) // steps_per_epoch)
            for e in range(step // steps_per_epoch + 1, end // steps_per_epoch + 1):
                history.close_epoch(e, steps_per_epoch, history.timing["train_seconds"])
            # the epoch of the next step starts with a new permutation; `perm` (as
            # returned) is the one of the epoch of step `end - 1`
            step = end
            metrics = None
            if step % eval_every_steps == 0 or step == total_steps:
                metrics = run_eval(step)
            if bar is not None:
                bar.update(count)
                if metrics:
                    bar.set_postfix({k: f"{v:.4g}" for k, v in metrics.items()})
            if callbacks:
                snapshot = history.as_dict()
                for cb in callbacks:
                    if cb(FitProgress(step, step / steps_per_epoch, state, metrics, snapshot)) is True:
                        stop = True
            if stop and metrics is None:
                run_eval(step)
            if checkpoint_dir is not None and (
                stop or step == total_steps or (checkpoint_every is not None and step % checkpoint_every == 0)
            ):
                checkpoint(step)
    finally:
        if bar is not None:
            bar.close()
    return FitResult(state.params, history.as_dict(), state, model, learner_name)


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
