"""The learner contract and the pieces every learner shares.

A learner is an optax-like pair of pure functions bundled with the model it fits::

    learner = ui.learn.sap(model, optimizer=optax.sgd(0.01), num_particles=100)
    state = learner.init(rng_key, params)                  # LearnerState (a NamedTuple)
    state, info = learner.step(rng_key, state, batch)     # jittable, pure
    state.params                                           # current parameters

``batch`` is a dict of the model's *visible* variables (``learner.visible``) with a
leading batch axis; the other variables are latent.  States are NamedTuples of arrays
(checkpoint them with numpy, pass them through ``jit``/``scan``) with at least
``.params`` and ``.step`` (int32 number of updates done); infos are NamedTuples with
at least ``grad_norm``, the global L2 norm of the ascent direction.

Every learner estimates the gradient of the average log-likelihood

.. math::  \\nabla_\\theta \\frac1N \\sum_n \\log p(v_n \\mid \\theta)
   = \\mathbb E_{\\text{data}}\\Big[-\\frac{\\partial E}{\\partial \\theta}\\Big]
   - \\mathbb E_{p_\\theta}\\Big[-\\frac{\\partial E}{\\partial \\theta}\\Big]

(the ascent direction) with :func:`jax.grad` of mean energies, so no sufficient
statistics are written by hand.  Parameters move through an
:class:`optax.GradientTransformation`, which *minimises*: learners hand it the
negated ascent direction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ugm_infer._checked_data import CheckedData  # noqa: F401  (re-exported: learners receive it from ugm_infer.fit)
from ugm_infer.latent import latent_names, resolve_visible

__all__ = ["CheckedData", "Learner", "apply_ascent", "global_norm", "latent_names", "resolve_visible"]


class Learner(NamedTuple):
    """A learner: ``init``/``step`` pure functions plus what the driver needs to know.

    init
        ``init(rng_key, params, data=None) -> state``; ``state`` is a NamedTuple of
        arrays with at least ``.params`` and ``.step`` (int32).  ``data`` (all the
        training data, visible variables) is optional and only used by learners that
        keep per-datum state; :func:`ugm_infer.fit` passes it as a read-only mapping
        (:class:`CheckedData`).
    step
        ``step(rng_key, state, batch) -> (state, info)``: one parameter update from a
        minibatch ``batch = {visible name: (batch, *shape)}``.  Pure and jittable.
    model
        The :class:`~ugm_infer.EnergyModel` being fitted.
    name
        Short name of the algorithm (``"sap"``, ``"pcd"``, ``"cd"``, ...).
    visible
        Names of the variables the data provides; the rest are latent.
    """

    init: Callable
    step: Callable
    model: Any
    name: str
    visible: tuple[str, ...]


# ----------------------------------------------------------------------------------
# argument checks (host side, before any tracing)
# ----------------------------------------------------------------------------------
def is_concrete(tree: Any) -> bool:
    """True when no leaf is a tracer (so host-side validation is possible)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def check_positive_int(value: Any, argname: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{argname}` must be a positive int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"`{argname}` must be a positive int, got {value!r}")
    return int(value)


def check_nonnegative_int(value: Any, argname: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"`{argname}` must be an int >= 0, got {value!r}")
    return int(value)


def _check_number(value: Any, argname: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{argname}` must be {what}, got {type(value).__name__} {value!r}")
    return float(value)


def check_positive_float(value: Any, argname: str) -> float:
    v = _check_number(value, argname, "a positive number")
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{argname}` must be a positive finite number, got {value!r}")
    return v


def check_nonnegative_float(value: Any, argname: str) -> float:
    v = _check_number(value, argname, "a number >= 0")
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"`{argname}` must be a finite number >= 0, got {value!r}")
    return v


def check_fraction(value: Any, argname: str, low: float, high: float, low_open: bool, high_open: bool) -> float:
    """A float in an interval (host side); ``ValueError`` naming the argument otherwise."""
    v = _check_number(value, argname, "a number")
    lo_ok = v > low if low_open else v >= low
    hi_ok = v < high if high_open else v <= high
    if not (np.isfinite(v) and lo_ok and hi_ok):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"`{argname}` must lie in {interval}, got {value!r}")
    return v


def check_bool(value: Any, argname: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"`{argname}` must be a bool, got {value!r}")
    return value


def check_model(model: Any) -> None:
    from ugm_infer.model import EnergyModel

    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


def resolve_optimizer(optimizer: Any) -> optax.GradientTransformation:
    """``None`` -> ``optax.sgd(learning_rate=0.01)``; otherwise any optax transformation."""
    if optimizer is None:
        return optax.sgd(learning_rate=0.01)
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(
            f"`optimizer` must be an optax GradientTransformation (with .init and .update), got {type(optimizer).__name__}"
        )
    return optimizer


def check_params(model: Any, params: Any) -> None:
    """Learnable parameters: float leaves (optax cannot move integers), finite, model-valid."""
    check_float_leaves(params)
    if is_concrete(params):
        model.validate_params(params)


def check_float_leaves(params: Any) -> None:
    """At least one leaf, and every leaf floating point (optax cannot move integers)."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    if not leaves:
        raise ValueError("`params` has no array leaves: there is nothing to learn")
    for path, leaf in leaves:
        dtype = jnp.result_type(leaf)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"`params` leaf {jax.tree_util.keystr(path)} has dtype {dtype}; learnable parameters must be "
                "floating point (optax.apply_updates casts updates to the parameter dtype, so integers never move)"
            )


def check_batch(model: Any, visible: tuple[str, ...], batch: Any, argname: str = "batch") -> dict:
    """Check a minibatch ``{visible name: (batch, *shape)}`` and cast it to the domain dtypes.

    Names and shapes are checked always (they are static under ``jit``); values only
    when the batch is concrete.  A :class:`CheckedData` is returned as it is after the
    names and shapes (its values are checked and in the domain dtypes already).
    """
    if not isinstance(batch, Mapping):
        raise TypeError(f"`{argname}` must be a dict {{name: array}} of the visible variables, got {type(batch).__name__}")
    unknown = sorted(set(batch) - set(visible))
    if unknown:
        latent = [n for n in unknown if n in model.variables]
        hint = f" ({latent} are latent for this learner)" if latent else ""
        raise ValueError(f"`{argname}` has variable(s) {unknown} that are not visible{hint}; visible: {list(visible)}")
    missing = [n for n in visible if n not in batch]
    if missing:
        raise ValueError(f"`{argname}` is missing visible variable(s) {missing}")
    checked = isinstance(batch, CheckedData)
    out, size = {}, None
    for n in visible:
        d = model.variables[n]
        x = None if checked else batch[n]
        shape = batch.shape(n) if checked else tuple(np.shape(x))
        if len(shape) != len(d.shape) + 1 or shape[1:] != d.shape:
            raise ValueError(f"`{argname}['{n}']` has shape {shape}; expected (batch, {', '.join(map(str, d.shape))})")
        if size is None:
            size = shape[0]
        elif shape[0] != size:
            raise ValueError(f"`{argname}` variables disagree on the batch size: '{n}' has {shape[0]}, expected {size}")
        if checked:
            continue
        if is_concrete(x):
            d.check_values(np.asarray(x), f"`{argname}['{n}']`")
        out[n] = jnp.asarray(x).astype(d.dtype)
    if size == 0:
        raise ValueError(f"`{argname}` is empty (batch size 0)")
    return batch if checked else out


def check_data(model: Any, visible: tuple[str, ...], data: Any) -> dict | None:
    return None if data is None else check_batch(model, visible, data, argname="data")


# ----------------------------------------------------------------------------------
# gradients and updates
# ----------------------------------------------------------------------------------
def global_norm(tree: Any) -> jax.Array:
    """Global L2 norm of a pytree of arrays."""
    return optax.tree.norm(tree)


def check_same_structure(params: Any, grads: Any, what: str) -> None:
    """``TypeError`` when a gradient tree does not match the parameter tree."""
    ps, gs = jax.tree.structure(params), jax.tree.structure(grads)
    if ps != gs:
        raise TypeError(f"{what} has tree structure {gs}, but the parameters have {ps}")


def apply_ascent(optimizer: optax.GradientTransformation, ascent: Any, opt_state: Any, params: Any):
    """One optax update along the ascent direction (optax minimises: pass ``-ascent``)."""
    updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, ascent), opt_state, params)
    return optax.apply_updates(params, updates), opt_state
