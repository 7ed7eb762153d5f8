"""The learners' particles: resolving their kernel, starting, moving, weighting and resampling them.

A learner hands its kernel the log-density of the *current* parameters at every
update, so a kernel is given in a form that can be built before the parameters are
known (see :func:`resolve_kernel`):

* ``None``: block Gibbs, ``ui.kernels.gibbs.build_kernel(model, "block", params=...)``;
* a kernel module with ``.init`` and ``.build_kernel`` (``ui.kernels.gibbs``,
  ``ui.kernels.metropolis``, ...);
* a pair ``(init_fn, kernel_fn)`` for ONE particle (the learner vmaps it);
* a :class:`Builder` ``params -> (init_fn, kernel_fn)`` or ``params -> Persistent``;
* for :func:`~ugm_infer.learn.sap`, an :class:`Alternate` schedule of two of these.

Two ways of plugging tempering into SAP (no special learner code beyond the schedule
of updates):

:class:`Persistent`
    a kernel whose state is more than one configuration (parallel tempering keeps one
    replica per temperature).  SAP keeps the whole kernel state of every particle
    across updates, reads the particle used in the gradient with ``sample(state)``
    (PT: the ``beta = 1`` replica) and never re-initialises it: the kernel must not
    cache anything that depends on the parameters (PT does not).
:class:`Alternate`
    run ``extra`` (e.g. one tempered-transitions run) before the base step on every
    ``every``-th update from update ``start`` on.  Parameters are updated once per SAP
    update, i.e. after each base (Gibbs) step and never during the extra run: exactly
    the Trans-SAP schedule of Salakhutdinov (2009): 200 Gibbs updates : 1 TT run.
    The choice is made on the learner's (unbatched) step counter with ``lax.cond``,
    so the extra kernel costs nothing on the other updates.

Importance-weighted particle sets keep normalised log weights (log-sum-exp 0), so
energy differences of any size neither overflow nor give NaN; their effective sample
size and resampling come from BlackJAX (``blackjax.smc.ess``,
``blackjax.smc.resampling``).

References
----------
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered
transitions. NIPS 22.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE
with connections to contrastive divergence. ICML (eq. 11, the ESS).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm
from blackjax.smc import ess as smc_ess

from ugm_infer._random import split as split_key
from ugm_infer._resampling import RESAMPLING, resolve_resampling
from ugm_infer.kernels import gibbs
from ugm_infer.kernels._common import chains_first, chains_last
from ugm_infer.kernels.gibbs import SCANS, is_layout_state
from ugm_infer.learn.base import check_nonnegative_int, check_positive_int, is_concrete

__all__ = [
    "Alternate",
    "AlternateInfo",
    "Builder",
    "LazyKernel",
    "Persistent",
    "RESAMPLING",
    "advance",
    "advance_states",
    "ess_of",
    "gibbs_builder",
    "initial_particles",
    "layout_states",
    "normalize_log_weights",
    "resolve_kernel",
    "resolve_resampling",
]


class Persistent(NamedTuple):
    """A kernel whose full state persists across SAP updates.

    init
        ``init(position, logdensity_fn) -> state`` from ONE configuration.
    step
        ``step(rng_key, state, logdensity_fn) -> (state, info)``.
    sample
        ``sample(state) -> position``: the configuration that enters the gradient.
    """

    init: Callable
    step: Callable
    sample: Callable


class Alternate(NamedTuple):
    """Run ``extra`` before ``base`` on updates ``start, start + every, ...``.

    ``base`` and ``extra`` take any form :func:`~ugm_infer.learn.sap` accepts for a
    kernel (``None`` = block Gibbs, a kernel module, an ``(init, kernel)`` pair, or a
    builder ``params -> (init, kernel)`` wrapped in :class:`Builder`).
    """

    base: Any
    extra: Any
    every: int
    start: int = 0


class AlternateInfo(NamedTuple):
    """Kernel info of an :class:`Alternate` schedule.

    base
        Info of the base kernel (every update).
    extra
        Info of the extra kernel (zeros on updates where it did not run).
    extra_ran
        Whether the extra kernel ran on this update.
    """

    base: Any
    extra: Any
    extra_ran: jax.Array


class Builder(NamedTuple):
    """A kernel built from example parameters: ``build(params) -> (init_fn, kernel_fn)``."""

    build: Callable


def gibbs_builder(model: Any, scan: str = "block", num_sweeps: int = 1) -> Builder:
    """``num_sweeps`` Gibbs sweeps (``scan`` order) per kernel step, built from example parameters."""
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    if scan not in SCANS:
        raise ValueError(f"`scan` must be 'block', 'systematic' or 'random', got {scan!r}")
    return Builder(lambda params: (gibbs.init, gibbs.build_kernel(model, scan, num_sweeps, params=params)))


# ----------------------------------------------------------------------------------
# resolving the kernel
# ----------------------------------------------------------------------------------
def _accepts_kwarg(fn: Callable, name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def _module_builder(model: Any, kernel: Any) -> Callable:
    build, init_fn = kernel.build_kernel, kernel.init
    takes_params = _accepts_kwarg(build, "params")
    return lambda params: (init_fn, build(model, params=params) if takes_params else build(model))


def _pair(kernel: Any) -> tuple[Callable, Callable]:
    if len(kernel) != 2 or not all(callable(f) for f in kernel):
        raise TypeError(
            "`kernel` as a pair must be (init_fn, kernel_fn): init_fn(position, logdensity_fn) -> state and "
            f"kernel_fn(rng_key, state, logdensity_fn) -> (state, info); got {kernel!r}"
        )
    return kernel[0], kernel[1]


class LazyKernel:
    """A user's kernel argument as ``(init_fn, kernel_fn)`` (or a :class:`Persistent`), built once.

    Building can need parameters (block detection probes the energy), so it happens
    at the first call with concrete parameters (``learner.init``), or at once when the
    model already knows its structure or a pair was given.
    """

    def __init__(self, model: Any, kernel: Any, default: Builder | None = None):
        self.model = model
        self._built: Any = None
        self._builder: Callable | None = None
        if kernel is None:
            self._builder = (default or gibbs_builder(model)).build
        elif isinstance(kernel, Builder):
            self._builder = kernel.build
        elif isinstance(kernel, SamplingAlgorithm):
            raise TypeError(
                "`kernel` is a SamplingAlgorithm, whose step is bound to one log-density; learners hand the kernel "
                "the log-density of the current parameters at every step, so pass the kernel module (e.g. "
                "ui.kernels.gibbs) or a pair (init_fn, kernel_fn) instead"
            )
        elif isinstance(kernel, (tuple, list)):
            self._built = _pair(kernel)
        elif hasattr(kernel, "init") and hasattr(kernel, "build_kernel"):
            self._builder = _module_builder(model, kernel)
        else:
            raise TypeError(
                "`kernel` must be None (block Gibbs), a kernel module with .init and .build_kernel "
                "(e.g. ui.kernels.gibbs), or a pair (init_fn, kernel_fn); got "
                f"{type(kernel).__name__}"
            )
        if self._built is None and getattr(model, "has_structure", False):
            self.get(None)

    def get(self, params: Any) -> Any:
        if self._built is None:
            if not self.model.has_structure and (params is None or not is_concrete(params)):
                raise ValueError(
                    f"the kernel for model '{self.model.name}' needs the model's blocks, which are probed from "
                    "concrete parameters: call learner.init(rng_key, params) outside jit first, or declare blocks="
                )
            self._built = self._builder(params)
        return self._built


def resolve_kernel(model: Any, kernel: Any, default: Builder | None = None) -> LazyKernel:
    """The :class:`LazyKernel` of a kernel argument (any form of the module docstring but :class:`Alternate`)."""
    return LazyKernel(model, kernel, default)


# ----------------------------------------------------------------------------------
# starting and moving particles
# ----------------------------------------------------------------------------------
def check_init_particles(model: Any, init_particles: Any, num_particles: int) -> dict | None:
    """``None``, or ``init_particles`` validated as ``num_particles`` states of the model."""
    if init_particles is None:
        return None
    init_particles = model.validate_state(init_particles, batch_ndim=1, argname="init_particles")
    size = jax.tree.leaves(init_particles)[0].shape[0]
    if size != num_particles:
        raise ValueError(f"`init_particles` has {size} particles but `num_particles` is {num_particles}")
    return init_particles


def initial_particles(model: Any, rng_key: jax.Array, num_particles: int, given: dict | None = None) -> dict:
    """``given`` if any, else ``num_particles`` uniformly random states."""
    return model.random_state(rng_key, num_particles) if given is None else dict(given)


def _mean_over_steps(infos: Any) -> Any:
    return jax.tree.map(lambda x: jnp.mean(jnp.asarray(x, jnp.float32), axis=0), infos)


def _step_states(kernel_fn: Callable, keys, states, axis: int, logdensity_fn: Callable, num_steps: int):
    """``num_steps`` steps of every chain (``axis``: where ``states`` keep the chains); infos per step, chains second."""
    step = jax.vmap(lambda key, state: kernel_fn(key, state, logdensity_fn), in_axes=(0, axis), out_axes=(axis, 0))
    if num_steps == 1:  # the chain's key is the step's key: no split, no scan
        states, info = step(keys, states)
        return states, jax.tree.map(lambda x: jnp.asarray(x)[None], info)
    # each chain splits its key into its steps' keys
    step_keys = jnp.swapaxes(jax.vmap(lambda key: split_key(key, num_steps))(keys), 0, 1)
    return jax.lax.scan(lambda s, k: step(k, s), states, step_keys)


def _chain_axis(states) -> int:
    return -1 if getattr(type(states), "chains_last", False) else 0


def advance(kernel: LazyKernel, rng_key, positions: dict, logdensity_fn: Callable, params: Any, num_steps: int):
    """Re-initialise the kernel at ``positions`` for ``logdensity_fn`` and run ``num_steps`` steps.

    ``positions`` has a leading chain axis (vmapped).  Returns the new positions and
    the kernel infos averaged over the steps (leading chain axis kept).  One key split
    per call gives every chain its key; a chain splits it again only to run more than
    one step.
    """
    init_fn, kernel_fn = kernel.get(params)
    num_chains = jax.tree.leaves(positions)[0].shape[0]
    keys = split_key(rng_key, num_chains)
    states = jax.vmap(lambda position: init_fn(position, logdensity_fn))(positions)
    if not hasattr(type(states), "position") and not hasattr(states, "position"):
        raise TypeError(f"the kernel state {type(states).__name__} has no `.position`; learners read the particles from it")
    # several steps, carried by a scan, run on the chains in the layout the kernel's batched step prefers (a
    # lattice state: chains last); a single step stays chains-first (see kernels._common.chains_last)
    states, axis = chains_last(states, num_chains, carried=num_steps > 1)
    states, infos = _step_states(kernel_fn, keys, states, axis, logdensity_fn, num_steps)
    positions = jax.vmap(lambda state: state.position)(chains_first(states))
    return positions, _mean_over_steps(infos)


def layout_states(kernel: LazyKernel, positions: dict, logdensity_fn: Callable, params: Any):
    """The particles as lattice chains in their sweep's layout, for a learner to keep between updates; else ``()``.

    A kernel whose state holds the configuration in a lattice sweep's own layout
    (:func:`ugm_infer.kernels.gibbs.is_layout_state`: block Gibbs on ``lattice_ising``
    or ``lattice_potts``) gets its particles converted once, in the layout of
    :func:`~ugm_infer.kernels._common.chains_last` (chains on the trailing axis from
    :data:`~ugm_infer.kernels._common.MIN_CHAINS_LAST` chains on), and
    :func:`advance_states` then moves them without converting them at every update.
    Such a state is the configuration and nothing else, so keeping it gives the same
    draws as re-initialising the kernel from the positions at every update.
    """
    init_fn, _ = kernel.get(params)
    states = jax.vmap(lambda position: init_fn(position, logdensity_fn))(positions)
    if not is_layout_state(states):
        return ()
    return chains_last(states, jax.tree.leaves(positions)[0].shape[0])[0]


def advance_states(kernel: LazyKernel, rng_key, states, logdensity_fn: Callable, params: Any, num_steps: int):
    """:func:`advance` for particles kept as kernel states (:func:`layout_states`): ``(positions, infos, states)``.

    The states are loop-carried between updates, so even a single step runs the
    sweep of many chains in its chains-last form (a step whose words flowed from a
    conversion straight into the next would have XLA's CPU compiler recompute the
    sweep in every reader of its words).
    """
    _, kernel_fn = kernel.get(params)
    axis = _chain_axis(states)
    keys = split_key(rng_key, jax.tree.leaves(states)[0].shape[axis])
    states, infos = _step_states(kernel_fn, keys, states, axis, logdensity_fn, num_steps)
    positions = jax.vmap(lambda state: state.position)(chains_first(states))
    return positions, _mean_over_steps(infos), states


def advance_persistent(kernel: Persistent, rng_key, kernel_states, logdensity_fn, num_steps: int):
    """Run a :class:`Persistent` kernel ``num_steps`` steps on every particle (vmapped).

    Returns ``(positions, infos averaged over the steps, kernel_states)``.
    """
    num = jax.tree.leaves(kernel_states)[0].shape[0]

    def one_chain(key, kernel_state):
        def body(ks, key_step):
            return kernel.step(key_step, ks, logdensity_fn)

        kernel_state, infos = jax.lax.scan(body, kernel_state, split_key(key, num_steps))
        return kernel_state, _mean_over_steps(infos)

    kernel_states, infos = jax.vmap(one_chain)(split_key(rng_key, num), kernel_states)
    return jax.vmap(kernel.sample)(kernel_states), infos, kernel_states


def run_if(due: jax.Array, fn: Callable, operand: Any) -> tuple[Any, Any]:
    """``fn(operand) -> (operand, info)`` when ``due``, else ``(operand, zero info)``: a ``lax.cond``.

    The skipped branch costs nothing, so a kernel that runs only on some updates
    (a rejuvenation, a new round, a tempered-transitions run) is paid only then.
    """
    info_shape = jax.eval_shape(lambda o: fn(o)[1], operand)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info_shape)
    return jax.lax.cond(due, fn, lambda o: (o, zeros), operand)


def maybe_advance(due, kernel: LazyKernel, rng_key, particles: dict, logdensity_fn, params, num_steps: int):
    """:func:`advance` under ``lax.cond(due, ...)``; zero infos (and unchanged particles) when not due."""
    return run_if(due, lambda p: advance(kernel, rng_key, p, logdensity_fn, params, num_steps), particles)


# ----------------------------------------------------------------------------------
# importance weights and resampling
# ----------------------------------------------------------------------------------
def normalize_log_weights(log_weights: jax.Array) -> jax.Array:
    """Log weights shifted so that they log-sum-exp to 0 (finite for any finite input)."""
    return log_weights - jax.scipy.special.logsumexp(log_weights)


def uniform_log_weights(num_particles: int, shape: tuple[int, ...] = ()) -> jax.Array:
    """``-log num_particles`` everywhere, shape ``shape + (num_particles,)``."""
    return jnp.full(shape + (num_particles,), -jnp.log(jnp.float32(num_particles)))


def ess_of(log_weights: jax.Array) -> jax.Array:
    """Effective sample size :math:`1 / \\sum_s \\bar w_s^2` from log weights (Asuncion et al. 2010, eq. 11)."""
    return jnp.exp(smc_ess.log_ess(log_weights))


def reweight(log_weights: jax.Array, energies_new: jax.Array, energies_old: jax.Array, temperature: float = 1.0):
    """Normalised :math:`\\log w - (E_{\\text{new}} - E_{\\text{old}}) / T` (Asuncion et al. 2010, eqs. 10, 14)."""
    return normalize_log_weights(log_weights - (energies_new - energies_old) / temperature)


def resample(rng_key, resample_fn: Callable, particles: dict, log_weights: jax.Array) -> dict:
    """Draw ``len(log_weights)`` particles by their normalised weights (BlackJAX resampling)."""
    idx = resample_fn(rng_key, jnp.exp(log_weights), log_weights.shape[0])
    return jax.tree.map(lambda x: x[idx], particles)


def check_alternate(alternate: Alternate) -> tuple[int, int]:
    """``(every, start)`` of an :class:`Alternate` schedule, checked."""
    return check_positive_int(alternate.every, "Alternate.every"), check_nonnegative_int(alternate.start, "Alternate.start")
