"""Argument checks of :func:`ugm_infer.fit`, all on the host before anything is traced."""

from __future__ import annotations

import inspect
import os
import re
import sys
import weakref
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.fit._chunk import batch_index_key

__all__ = [
    "DEFAULT_INFO_EVERY",
    "as_key",
    "check_check_finite",
    "check_int",
    "check_learner",
    "check_optimizer",
    "resolve_info_every",
    "resolve_progress",
]

#: ``step_info="auto"`` records the info of every this many steps (fewer when an epoch is shorter)
DEFAULT_INFO_EVERY = 10


def check_int(value: Any, name: str, minimum: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an int >= {minimum}{' or None' if allow_none else ''}, got {value!r}")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}")
    return int(value)


def check_learner(learner: Any) -> None:
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


def as_key(rng_key: Any) -> jax.Array:
    if isinstance(rng_key, jax.Array) and jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        if rng_key.shape != ():
            raise ValueError(f"`rng_key` must be a single key, got a key array of shape {rng_key.shape}")
        return rng_key
    arr = np.asarray(rng_key) if not isinstance(rng_key, jax.Array) else rng_key
    if getattr(arr, "dtype", None) == np.uint32 and tuple(arr.shape) == (2,):
        return jax.random.wrap_key_data(jnp.asarray(arr))
    raise TypeError(f"`rng_key` must be a jax.random.key(...) or a PRNGKey (uint32 of shape (2,)), got {rng_key!r}")


def resolve_progress(progress: Any) -> bool:
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


def check_check_finite(value: Any) -> str | None:
    """``"chunk"`` (or ``True``), ``"step"`` or ``False`` -> ``"chunk"``, ``"step"`` or ``None``."""
    if value is True or value == "chunk":
        return "chunk"
    if value == "step":
        return "step"
    if value is False:
        return None
    raise ValueError(f"`check_finite` must be 'chunk', 'step' or False, got {value!r}")


def resolve_info_every(value: Any, steps_per_epoch: int) -> int:
    """``step_info`` -> every how many steps the learner's info is recorded (0: never).

    ``True``: every step; ``False``: never; an int ``k >= 1``: steps ``k, 2k, ...``;
    ``"auto"``: every :data:`DEFAULT_INFO_EVERY` steps, or every ``steps_per_epoch``
    steps when an epoch is shorter (so every epoch records at least one step).
    """
    if value is True:
        return 1
    if value is False:
        return 0
    if isinstance(value, str) and value == "auto":
        return min(DEFAULT_INFO_EVERY, steps_per_epoch)
    if isinstance(value, (int, np.integer)) and value >= 1:
        return int(value)
    raise ValueError(f"`step_info` must be True, False, 'auto' or an int >= 1 (every how many steps), got {value!r}")


def learner_optimizer(learner: Any) -> Any:
    """The optax optimizer a learner updates its parameters with, when it can be found.

    A learner may expose it as ``learner.step.optimizer`` (or ``learner.optimizer``);
    otherwise the ``optimizer`` its ``step`` closes over is used (the ``ui.learn``
    learners build ``step`` as a closure over it).  ``None`` when neither exists.
    """
    for owner in (getattr(learner, "step", None), learner):
        opt = getattr(owner, "optimizer", None)
        if opt is not None:
            return opt
    try:
        opt = inspect.getclosurevars(learner.step).nonlocals.get("optimizer")
    except (TypeError, ValueError):
        return None
    return opt if hasattr(opt, "init") and hasattr(opt, "update") else None


# learner.step -> {id(optimizer): (optimizer, {parameter signatures whose probe passed})}
_PROBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_optimizer(learner: Any, params: Any) -> None:
    """Reject an optimizer whose learning rate is NaN, infinite or negative, when a probe can tell.

    The probe is one update from zero parameters with unit gradients (one eager optax
    call): a NaN/inf update means a NaN/inf learning rate, an update that moves every
    parameter *up* the gradient means a negative one.  Optimizers that cannot be
    probed this way (extra arguments, schedules that start at zero, ...) pass.  A probe
    depends only on the optimizer and the parameters' shapes and dtypes, so one that
    passed is not repeated for the same learner.
    """
    optimizer = learner_optimizer(learner)
    if optimizer is None:
        return
    leaves, treedef = jax.tree.flatten(params)
    signature = (treedef, tuple((np.shape(x), jnp.result_type(x)) for x in leaves))
    try:
        per_step = _PROBED.setdefault(learner.step, {})
    except TypeError:  # not weak-referenceable: probe every time
        per_step = {}
    passed = per_step.setdefault(id(optimizer), (optimizer, set()))[1]
    if signature in passed:
        return
    _probe_optimizer(optimizer, params)
    passed.add(signature)


# an update that needs more arguments than (updates, state, params): the probe does not fit it
_ARGUMENT_MISMATCH = re.compile(r"missing \d+ required|unexpected keyword argument|positional argument")


def _probe_optimizer(optimizer: Any, params: Any) -> None:
    try:
        zeros = jax.tree.map(jnp.zeros_like, params)
        ones = jax.tree.map(jnp.ones_like, params)
        updates, _ = optimizer.update(ones, optimizer.init(zeros), zeros)
        leaves = [np.asarray(u, dtype=np.float64) for u in jax.tree.leaves(updates)]
    except (TypeError, ValueError) as err:
        # the learners call update(updates, state, params) as the probe does, so this fails there too, deep
        # inside the compiled step: say here which argument is wrong
        if isinstance(err, TypeError) and _ARGUMENT_MISMATCH.search(str(err)):
            return
        raise TypeError(
            f"`optimizer`: its update fails on parameters of these shapes ({type(err).__name__}: {err}); check "
            "its hyperparameters (a learning rate must be a number or an optax schedule)"
        ) from err
    except Exception:  # noqa: BLE001 - an optimizer the probe does not fit is not an error
        return
    if not leaves:
        return
    if not all(np.all(np.isfinite(u)) for u in leaves):
        raise ValueError(
            "`optimizer`: its first update is NaN or infinite (is the learning rate NaN or inf?); "
            "use a finite positive learning rate"
        )
    if all(np.all(u >= 0) for u in leaves) and any(np.any(u > 0) for u in leaves):
        raise ValueError(
            "`optimizer`: its first update moves every parameter up the gradient (is the learning rate "
            "negative?); optax minimises, so use a positive learning rate"
        )
