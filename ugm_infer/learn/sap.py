"""Stochastic approximation procedure (SAP), a.k.a. persistent contrastive divergence.

Younes (1988) / Salakhutdinov (2009, Algorithm 1).  Keep ``M`` persistent particles
:math:`x^{(1..M)}`; at every update :math:`t`

1. move each particle with a transition operator that leaves
   :math:`p(\\cdot \\mid \\theta_t)` invariant:
   :math:`x^{(m)}_{t+1} \\sim T_{\\theta_t}(x^{(m)}_t, \\cdot)` (``num_steps_per_update``
   kernel steps);
2. :math:`\\theta_{t+1} = \\theta_t + \\alpha_t \\big( \\mathbb E_{\\text{data}}
   [-\\partial_\\theta E] - \\frac1M \\sum_m -\\partial_\\theta E(x^{(m)}_{t+1})\\big)`.

With step sizes :math:`\\sum_t \\alpha_t = \\infty`, :math:`\\sum_t \\alpha_t^2 < \\infty`
(e.g. :func:`ugm_infer.learn.robbins_monro`) the iterates converge to a maximum of
the likelihood under regularity conditions (Younes 1988; 1999).  With Gibbs sampling
as :math:`T` this is persistent contrastive divergence (Tieleman 2008), see
:func:`pcd`; with tempered transitions it is Trans-SAP (Salakhutdinov 2009).

Plugging a kernel
-----------------
The ``kernel`` argument of :func:`sap` takes three forms:

* ``None`` (default): block Gibbs,
  ``ui.kernels.gibbs.build_kernel(model, "block", params=<init params>)``;
* a kernel module with ``.init`` and ``.build_kernel`` (``ui.kernels.gibbs``,
  ``ui.kernels.metropolis``, ...), built as ``build_kernel(model, params=...)``
  (or ``build_kernel(model)`` if it takes no ``params``) with its defaults;
* a pair ``(init_fn, kernel_fn)``: ``init_fn(position, logdensity_fn) -> kernel_state``
  and ``kernel_fn(rng_key, kernel_state, logdensity_fn) -> (kernel_state, info)``,
  both for ONE particle (the learner vmaps them), where ``position`` is a state dict
  ``{name: array}`` of all variables, ``kernel_state`` is a NamedTuple with a
  ``.position`` field and ``info`` a NamedTuple of arrays, and the kernel leaves
  ``exp(logdensity_fn(x))`` invariant.  E.g. ``(ui.kernels.gibbs.init,
  ui.kernels.gibbs.build_kernel(model, "systematic", num_sweeps=2))``.

Tempered kernels plug in the same way (:mod:`ugm_infer.learn.particles`:
:class:`~ugm_infer.learn.Persistent` parallel tempering, an
:class:`~ugm_infer.learn.Alternate` schedule of Gibbs and tempered transitions).

References
----------
Younes, L. (1988). Estimation and annealing for Gibbsian fields. Annales de l'IHP
Probabilites et statistiques 24(2), 269-294.
Younes, L. (1999). On the convergence of Markovian stochastic algorithms with rapidly
decreasing ergodicity rates. Stochastics 65, 177-228.
Tieleman, T. (2008). Training restricted Boltzmann machines using approximations to
the likelihood gradient. ICML.
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered transitions.
NIPS 22 (Algorithm 1).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ugm_infer._random import split as split_key
from ugm_infer.kernels.gibbs import is_layout_state
from ugm_infer.learn.base import Learner, check_model, check_positive_int, global_norm
from ugm_infer.learn.particles import (
    Alternate,
    AlternateInfo,
    Persistent,
    advance,
    advance_persistent,
    advance_states,
    check_alternate,
    gibbs_builder,
    layout_states,
    resolve_kernel,
    run_if,
)
from ugm_infer.learn.phases import resolve_negative_phase
from ugm_infer.learn.skeleton import (
    NO_KERNEL,
    ParticleArguments,
    ascend,
    build,
    initial_step,
    particle_learner,
    particle_setup,
    start,
)

__all__ = ["AlternateInfo", "SAPState", "SAPInfo", "sap", "pcd"]


class SAPState(NamedTuple):
    """State of :func:`sap`.

    params
        Current parameters.
    opt_state
        The optax optimizer state.
    particles
        Persistent particles ``{name: (num_particles, *shape)}`` (all variables).
    aux_state
        State of the positive phase (``()`` for the built-in ones).
    step
        Number of updates done (int32).
    kernel_state
        Full kernel states of a :class:`~ugm_infer.learn.Persistent` kernel (parallel
        tempering: every replica of every particle); for block Gibbs on a lattice
        (``lattice_ising``, ``lattice_potts``), the particles in the sweep's own
        layout, moved from update to update (``particles`` is their configuration
        after the move; from 8 particles on their chain axis is the *last* one of every
        leaf); ``()`` for the other kernels, which are re-initialised from
        ``particles`` at every update.
    """

    params: Any
    opt_state: Any
    particles: dict
    aux_state: Any
    step: jax.Array
    kernel_state: Any = ()


class SAPInfo(NamedTuple):
    """Diagnostics of one SAP update.

    grad_norm
        Global L2 norm of the estimated ascent direction.
    particle_energy
        Mean energy of the particles after the move, at the pre-update parameters
        (the mean free energy of their visible part when the negative phase is
        Rao-Blackwellised).
    kernel_info
        The kernel's info averaged over the ``num_steps_per_update`` steps, per
        particle (leading particle axis).
    """

    grad_norm: jax.Array
    particle_energy: jax.Array
    kernel_info: Any


@particle_learner
def sap(args: ParticleArguments, *, num_steps_per_update: int = 1, name: str = "sap") -> Learner:
    """Stochastic approximation learner: turns any MCMC kernel into a maximum-likelihood learner.

    Each update moves the particles by ``num_steps_per_update`` kernel steps at the
    current parameters, then takes one optax step.  A
    :class:`~ugm_infer.learn.Persistent` kernel (parallel tempering) keeps its whole
    state across updates; an :class:`~ugm_infer.learn.Alternate` schedule runs its extra
    kernel before the base steps on the updates it names.

    Parameters
    ----------
    num_steps_per_update
        Kernel steps per parameter update (a positive int).
    name
        The learner's name (``learner.name``).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner`; its state is :class:`SAPState`, its info
    :class:`SAPInfo`.  The particles move first (with the parameters
    :math:`\\theta_t`), then the gradient is taken at :math:`\\theta_t` with the moved
    particles, as in Salakhutdinov (2009, Algorithm 1).

    Examples
    --------
    >>> import jax, optax, ugm_infer as ui
    >>> model = ui.models.ising(8)
    >>> learner = ui.learn.sap(model, optimizer=optax.sgd(ui.learn.robbins_monro(1.0, 100.0)), num_particles=50)
    >>> state = learner.init(jax.random.key(0), model.init_params(jax.random.key(1)))
    >>> data = {"s": model.random_state(jax.random.key(2), 32)["s"]}
    >>> state, info = jax.jit(learner.step)(jax.random.key(3), state, data)
    """
    model, kernel = args.model, args.kernel
    s = particle_setup(args._replace(kernel=NO_KERNEL) if isinstance(kernel, Alternate) else args)
    num_steps = check_positive_int(num_steps_per_update, "num_steps_per_update")
    mover = _mover(model, kernel, s, num_steps)
    step = functools.partial(_step, s, mover, resolve_negative_phase(model, s.visible, args.negative_phase))
    return build(s, name, functools.partial(_init, s, mover), step)


def _init(s, mover: _Mover, rng_key, params, data) -> SAPState:
    """Initial particles (and kernel states of a persistent kernel), positive-phase and optimizer states."""
    fresh = start(s, rng_key, params, data)
    particles, kernel_state = mover.init(params, fresh.particles)
    return SAPState(params, fresh.opt_state, particles, fresh.aux_state, initial_step(), kernel_state)


def _step(s, mover: _Mover, negative: Callable, rng_key, state: SAPState, batch) -> tuple[SAPState, SAPInfo]:
    """One SAP update (Salakhutdinov 2009, Algorithm 1)."""
    key_negative, key_positive = split_key(rng_key)
    params = state.params
    # 1. x_{t+1} ~ T_theta_t(x_t, .): move the particles at the current parameters
    logdensity_fn = s.model.logdensity_fn(jax.lax.stop_gradient(params))
    particles, kernel_info, kernel_state = mover.move(key_negative, state, logdensity_fn)
    # 2. theta_{t+1} = theta_t + alpha_t (data term - model term at the moved particles)
    particle_energy, negative_grad = jax.value_and_grad(negative)(params, particles)
    new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
    info = SAPInfo(global_norm(new.direction), particle_energy, kernel_info)
    return SAPState(new.params, new.opt_state, particles, new.aux_state, state.step + 1, kernel_state), info


class _Mover(NamedTuple):
    """How SAP starts and moves its particles for one kind of kernel argument.

    ``init(params, particles) -> (particles, kernel_state)``;
    ``move(rng_key, state, logdensity_fn) -> (particles, kernel_info, kernel_state)``.
    """

    init: Callable
    move: Callable


def _mover(model, kernel: Any, s, num_steps: int) -> _Mover:
    """The particle moves of :func:`sap` for a plain, :class:`Persistent` or :class:`Alternate` kernel."""
    if isinstance(kernel, Alternate):
        return _alternate_mover(model, kernel, s, num_steps)
    lazy = s.kernel

    def init(params, particles):
        built = lazy.get(params)
        logdensity_fn = model.logdensity_fn(params)
        if not isinstance(built, Persistent):  # lattice chains are kept in their sweep's layout
            return particles, layout_states(lazy, particles, logdensity_fn, params)
        kernel_state = jax.vmap(lambda x: built.init(x, logdensity_fn))(particles)
        return jax.vmap(built.sample)(kernel_state), kernel_state

    def move(rng_key, state, logdensity_fn):
        built = lazy.get(state.params)
        if isinstance(built, Persistent):
            return advance_persistent(built, rng_key, state.kernel_state, logdensity_fn, num_steps)
        if is_layout_state(state.kernel_state):
            return advance_states(lazy, rng_key, state.kernel_state, logdensity_fn, state.params, num_steps)
        particles, info = advance(lazy, rng_key, state.particles, logdensity_fn, state.params, num_steps)
        return particles, info, ()

    return _Mover(init, move)


def _alternate_mover(model, alternate: Alternate, s, num_steps: int) -> _Mover:
    """``extra`` once on updates ``start, start + every, ...``, then ``num_steps`` steps of ``base``."""
    every, first = check_alternate(alternate)
    base = resolve_kernel(model, alternate.base)
    extra = resolve_kernel(model, alternate.extra)

    def init(params, particles):
        if isinstance(base.get(params), Persistent) or isinstance(extra.get(params), Persistent):
            raise ValueError("an Alternate schedule needs position-only kernels, not Persistent ones")
        return particles, ()

    def move(rng_key, state, logdensity_fn):
        params = state.params
        key_extra, key_base = split_key(rng_key)
        due = (state.step >= first) & ((state.step - first) % every == 0)
        particles, extra_info = run_if(
            due, lambda p: advance(extra, key_extra, p, logdensity_fn, params, 1), state.particles
        )
        particles, base_info = advance(base, key_base, particles, logdensity_fn, params, num_steps)
        return particles, AlternateInfo(base_info, extra_info, due), ()

    return _Mover(init, move)


def pcd(
    model,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    scan: str = "block",
    num_sweeps: int = 1,
    visible: Any = None,
    positive_phase: Any = "auto",
    negative_phase: str = "auto",
    init_particles: dict | None = None,
) -> Learner:
    """Persistent contrastive divergence (Tieleman 2008): :func:`sap` with Gibbs sampling.

    ``pcd(model, optimizer, num_particles, scan=..., num_sweeps=k)`` is
    ``sap(model, kernel=(ui.kernels.gibbs.init, ui.kernels.gibbs.build_kernel(model,
    scan, k)), ...)``: ``k`` Gibbs sweeps (``scan`` = ``"block"``, ``"systematic"`` or
    ``"random"``) of every persistent particle per update ("PCD-k").  See :func:`sap`
    for the other arguments.
    """
    check_model(model)
    return sap(
        model,
        gibbs_builder(model, scan, num_sweeps),
        optimizer,
        num_particles,
        visible=visible,
        positive_phase=positive_phase,
        negative_phase=negative_phase,
        init_particles=init_particles,
        name="pcd",
    )
