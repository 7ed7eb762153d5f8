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

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.base import SamplingAlgorithm

__all__ = ["Learner", "resolve_visible", "global_norm"]


class Learner(NamedTuple):
    """A learner: ``init``/``step`` pure functions plus what the driver needs to know.

    init
        ``init(rng_key, params, data=None) -> state``; ``state`` is a NamedTuple of
        arrays with at least ``.params`` and ``.step`` (int32).  ``data`` (all the
        training data, visible variables) is optional and only used by learners that
        keep per-datum state.
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


def check_model(model: Any) -> None:
    from ugm_infer.model import EnergyModel

    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


def resolve_visible(model: Any, visible: Any = None) -> tuple[str, ...]:
    """The names of the visible (data) variables, in the model's declaration order.

    ``visible=None`` means: the model's ``visible`` attribute if it has one, otherwise
    every variable that the model does not sum out analytically (the keys of
    ``model.free_energy_fns`` are latent, e.g. ``"h"`` of an RBM), i.e. all variables
    of a fully visible model; a ``ValueError`` when that leaves nothing (a model with
    free energies for every variable).  Pass ``visible=("v",)`` (names or one name)
    to declare latent variables of a model without free energies.
    """
    if visible is None:
        visible = getattr(model, "visible", None)
        if visible is None:
            visible = tuple(n for n in model.variables if n not in model.free_energy_fns)
            if not visible:
                raise ValueError(
                    f"model '{model.name}' has free energies for every variable ({sorted(model.free_energy_fns)}), so "
                    "the visible ones cannot be guessed: pass `visible=` (e.g. visible='v' for an RBM)"
                )
    if isinstance(visible, str):
        visible = (visible,)
    try:
        names = tuple(visible)
    except TypeError as err:
        raise TypeError(f"`visible` must be a variable name or a sequence of names, got {visible!r}") from err
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"`visible` must contain variable names (str), got {n!r}")
    unknown = [n for n in names if n not in model.variables]
    if unknown:
        raise ValueError(f"`visible` names unknown variable(s) {unknown}; the model has {list(model.variables)}")
    if len(set(names)) != len(names):
        raise ValueError(f"`visible` lists a variable more than once: {list(names)}")
    if not names:
        raise ValueError("`visible` must name at least one variable (the data cannot be empty)")
    return tuple(n for n in model.variables if n in names)


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
    when the batch is concrete.
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
    out, size = {}, None
    for n in visible:
        d = model.variables[n]
        x = batch[n]
        shape = tuple(np.shape(x))
        if len(shape) != len(d.shape) + 1 or shape[1:] != d.shape:
            raise ValueError(f"`{argname}['{n}']` has shape {shape}; expected (batch, {', '.join(map(str, d.shape))})")
        if size is None:
            size = shape[0]
        elif shape[0] != size:
            raise ValueError(f"`{argname}` variables disagree on the batch size: '{n}' has {shape[0]}, expected {size}")
        if is_concrete(x):
            arr = np.asarray(x)
            if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
                raise ValueError(f"`{argname}['{n}']` contains NaN or inf")
            bad = ~d.contains(arr)
            if np.any(bad):
                raise ValueError(
                    f"`{argname}['{n}']` has {int(bad.sum())} value(s) outside the domain {d!r} "
                    f"(allowed {d.values.tolist()}), e.g. {arr[bad].reshape(-1)[0]}"
                )
        out[n] = jnp.asarray(x).astype(d.dtype)
    if size == 0:
        raise ValueError(f"`{argname}` is empty (batch size 0)")
    return out


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


def mean_energy(model: Any, params: Any, states: dict) -> jax.Array:
    """Average energy of a batch of configurations (leading axis)."""
    return jnp.mean(model.energies(params, states))


def energy_grad(model: Any, params: Any, states: dict) -> tuple[jax.Array, Any]:
    """``(mean energy, d mean energy / d params)`` over a batch of configurations."""
    return jax.value_and_grad(lambda p: mean_energy(model, p, states))(params)


# ----------------------------------------------------------------------------------
# kernels: ``(init_fn, kernel_fn)`` from what the user passed
# ----------------------------------------------------------------------------------
def _accepts_kwarg(fn: Callable, name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def _builder_type():
    from ugm_infer.learn.tempered import Builder

    return Builder


class LazyKernel:
    """Turns a user's kernel argument into ``(init_fn, kernel_fn)``, built once.

    Accepted forms (see :func:`ugm_infer.learn.sap`):

    * ``None``: block Gibbs, ``ui.kernels.gibbs.build_kernel(model, "block", params=...)``;
    * a kernel module-like object with ``.init`` and ``.build_kernel`` (e.g.
      ``ui.kernels.gibbs``, ``ui.kernels.metropolis``): built as
      ``build_kernel(model, params=params)`` when it takes ``params``, else
      ``build_kernel(model)``;
    * a pair ``(init_fn, kernel_fn)`` used as is.

    Building can need parameters (block detection probes the energy), so it happens
    at the first call with concrete parameters (``learner.init``), or at once when the
    model already knows its structure or a pair was given.
    """

    def __init__(self, model: Any, kernel: Any, default: Callable | None = None):
        self.model = model
        self._built: tuple[Callable, Callable] | None = None
        if kernel is None:
            if default is None:
                from ugm_infer.kernels import gibbs

                def default(params):
                    return gibbs.init, gibbs.build_kernel(model, "block", params=params)

            self._builder = default
        elif isinstance(kernel, _builder_type()):
            self._builder = kernel.build
        elif isinstance(kernel, SamplingAlgorithm):
            raise TypeError(
                "`kernel` is a SamplingAlgorithm, whose step is bound to one log-density; learners hand the kernel "
                "the log-density of the current parameters at every step, so pass the kernel module (e.g. "
                "ui.kernels.gibbs) or a pair (init_fn, kernel_fn) instead"
            )
        elif isinstance(kernel, (tuple, list)):
            if len(kernel) != 2 or not all(callable(f) for f in kernel):
                raise TypeError(
                    "`kernel` as a pair must be (init_fn, kernel_fn): init_fn(position, logdensity_fn) -> state and "
                    f"kernel_fn(rng_key, state, logdensity_fn) -> (state, info); got {kernel!r}"
                )
            self._built = (kernel[0], kernel[1])
            self._builder = None
        elif hasattr(kernel, "init") and hasattr(kernel, "build_kernel"):
            build = kernel.build_kernel
            init_fn = kernel.init
            takes_params = _accepts_kwarg(build, "params")

            def builder(params):
                return init_fn, (build(model, params=params) if takes_params else build(model))

            self._builder = builder
        else:
            raise TypeError(
                "`kernel` must be None (block Gibbs), a kernel module with .init and .build_kernel "
                "(e.g. ui.kernels.gibbs), or a pair (init_fn, kernel_fn); got "
                f"{type(kernel).__name__}"
            )
        if self._built is None and getattr(model, "has_structure", False):
            self.get(None)

    def get(self, params: Any) -> tuple[Callable, Callable]:
        if self._built is None:
            if not self.model.has_structure and (params is None or not is_concrete(params)):
                raise ValueError(
                    f"the kernel for model '{self.model.name}' needs the model's blocks, which are probed from "
                    "concrete parameters: call learner.init(rng_key, params) outside jit first, or declare blocks="
                )
            self._built = self._builder(params)
        return self._built


def advance(kernel: LazyKernel, rng_key, positions: dict, logdensity_fn: Callable, params: Any, num_steps: int):
    """Re-initialise the kernel at ``positions`` for ``logdensity_fn`` and run ``num_steps`` steps.

    ``positions`` has a leading chain axis (vmapped).  Returns the new positions and
    the kernel infos averaged over the steps (leading chain axis kept).
    """
    init_fn, kernel_fn = kernel.get(params)
    num_chains = jax.tree.leaves(positions)[0].shape[0]

    def one_chain(key, position):
        state = init_fn(position, logdensity_fn)

        def body(state, key_step):
            return kernel_fn(key_step, state, logdensity_fn)

        state, infos = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        if not hasattr(state, "position"):
            raise TypeError(
                f"the kernel state {type(state).__name__} has no `.position`; learners read the particles from it"
            )
        return state.position, jax.tree.map(lambda x: jnp.mean(jnp.asarray(x, jnp.float32), axis=0), infos)

    return jax.vmap(one_chain)(jax.random.split(rng_key, num_chains), positions)
