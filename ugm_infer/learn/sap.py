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

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.learn.base import (
    LazyKernel,
    Learner,
    advance,
    apply_ascent,
    check_batch,
    check_data,
    check_model,
    check_params,
    check_positive_int,
    check_same_structure,
    global_norm,
    resolve_optimizer,
    resolve_visible,
)
from ugm_infer.learn.phases import resolve_negative_phase, resolve_positive_phase
from ugm_infer.learn.tempered import Alternate, Persistent

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
        tempering: every replica of every particle); ``()`` for the other kernels,
        which are re-initialised from ``particles`` at every update.
    """

    params: Any
    opt_state: Any
    particles: dict
    aux_state: Any
    step: jax.Array
    kernel_state: Any = ()


class AlternateInfo(NamedTuple):
    """Kernel info of an :class:`~ugm_infer.learn.Alternate` schedule.

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


def sap(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    num_steps_per_update: int = 1,
    visible: Any = None,
    positive_phase: Any = "auto",
    negative_phase: str = "auto",
    init_particles: dict | None = None,
    name: str = "sap",
) -> Learner:
    """Stochastic approximation learner: turns any MCMC kernel into a maximum-likelihood learner.

    Parameters
    ----------
    model
        The :class:`~ugm_infer.EnergyModel` to fit.
    kernel
        The transition operator of the persistent particles, in any of three forms:

        * ``None`` (default): block Gibbs,
          ``ui.kernels.gibbs.build_kernel(model, "block", params=<init params>)``;
        * a kernel module with ``.init`` and ``.build_kernel`` (``ui.kernels.gibbs``,
          ``ui.kernels.metropolis``, ...), built as ``build_kernel(model, params=...)``
          (or ``build_kernel(model)`` if it takes no ``params``) with its defaults;
        * a pair ``(init_fn, kernel_fn)`` -- **how to plug your own kernel**:
          ``init_fn(position, logdensity_fn) -> kernel_state`` and
          ``kernel_fn(rng_key, kernel_state, logdensity_fn) -> (kernel_state, info)``,
          both for ONE particle (the learner vmaps them), where ``position`` is a
          state dict ``{name: array}`` of all variables, ``kernel_state`` is a
          NamedTuple with a ``.position`` field and ``info`` a NamedTuple of arrays,
          and the kernel leaves ``exp(logdensity_fn(x))`` invariant.  E.g.
          ``(ui.kernels.gibbs.init, ui.kernels.gibbs.build_kernel(model, "systematic",
          num_sweeps=2))``.

        Each update re-initialises the kernel state with
        ``init_fn(position, logdensity_fn)`` for the **current** parameters (so
        cached log-densities are never stale; only positions persist) and runs
        ``num_steps_per_update`` kernel steps.
    optimizer
        An optax ``GradientTransformation``; default ``optax.sgd(learning_rate=0.01)``.
        Use a decreasing schedule (:func:`ugm_infer.learn.robbins_monro`) for
        convergence; momentum / weight decay: :func:`ugm_infer.learn.sgd`.
    num_particles
        Number of persistent particles ``M`` (a positive int).
    num_steps_per_update
        Kernel steps per parameter update (a positive int).
    visible
        Names of the variables the data provides (see
        :func:`ugm_infer.learn.base.resolve_visible`); default: all variables except
        those the model sums out in ``free_energy_fns``.
    positive_phase
        The data term (see :mod:`ugm_infer.learn.phases`):

        * ``"auto"`` (default): exact ``-grad mean F(v)`` when the model is fully
          visible or its one latent variable has ``free_energy_fns``; otherwise the
          Monte-Carlo E-step of :func:`~ugm_infer.learn.mc_positive_phase` (5 Gibbs
          sweeps of the latents clamped at the data, started from random latents at
          every step);
        * ``"free_energy"`` / ``"mc"``: force one of those;
        * a callable ``(rng_key, params, batch, aux_state) -> (positive_grad,
          aux_state)`` returning :math:`\\mathbb E_{\\text{batch}}[-\\partial E /
          \\partial \\theta]` (a pytree like ``params``), or a
          :class:`~ugm_infer.learn.PositivePhase` ``(init, update)`` whose
          ``init(rng_key, params, data)`` creates ``aux_state``.  This is the seam for
          adiabatic PCD (persistent latent chains) and mean-field PCD (variational
          E-step).
    negative_phase
        ``"auto"`` (default), ``"energy"`` or ``"free_energy"``: how the particles
        enter the model term.  ``"energy"`` differentiates their mean joint energy;
        ``"free_energy"`` the mean free energy of their visible part (latents summed
        out analytically -- same expectation, lower variance).  ``"auto"`` uses the
        free energy when the model has latents and it is analytic.
    init_particles
        Optional initial particles ``{name: (num_particles, *shape)}`` (all
        variables); default uniformly random.

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
    check_model(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    num_steps_per_update = check_positive_int(num_steps_per_update, "num_steps_per_update")
    visible = resolve_visible(model, visible)
    optimizer = resolve_optimizer(optimizer)
    positive = resolve_positive_phase(model, visible, positive_phase)
    negative = resolve_negative_phase(model, visible, negative_phase)
    alternate = kernel if isinstance(kernel, Alternate) else None
    if alternate is not None:
        every = check_positive_int(alternate.every, "Alternate.every")
        start = alternate.start
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
            raise ValueError(f"`Alternate.start` must be an int >= 0, got {start!r}")
        kernel = LazyKernel(model, alternate.base)
        extra_kernel = LazyKernel(model, alternate.extra)
    else:
        kernel = LazyKernel(model, kernel)
    if init_particles is not None:
        init_particles = model.validate_state(init_particles, batch_ndim=1, argname="init_particles")
        size = jax.tree.leaves(init_particles)[0].shape[0]
        if size != num_particles:
            raise ValueError(f"`init_particles` has {size} particles but `num_particles` is {num_particles}")

    def init(rng_key, params, data=None) -> SAPState:
        check_params(model, params)
        data = check_data(model, visible, data)
        key_particles, key_aux = jax.random.split(rng_key)
        built = kernel.get(params)
        if alternate is not None:
            if isinstance(built, Persistent) or isinstance(extra_kernel.get(params), Persistent):
                raise ValueError("an Alternate schedule needs position-only kernels, not Persistent ones")
        if init_particles is None:
            particles = model.random_state(key_particles, num_particles)
        else:
            particles = dict(init_particles)
        kernel_state = ()
        if isinstance(built, Persistent):
            logdensity_fn = model.logdensity_fn(params)
            kernel_state = jax.vmap(lambda x: built.init(x, logdensity_fn))(particles)
            particles = jax.vmap(built.sample)(kernel_state)
        aux_state = positive.init(key_aux, params, data)
        return SAPState(params, optimizer.init(params), particles, aux_state, jnp.zeros((), jnp.int32), kernel_state)

    def move(rng_key, state: SAPState, logdensity_fn):
        """Advance the particles with the kernel (schedule) at the current parameters."""
        params = state.params
        built = kernel.get(params)
        if isinstance(built, Persistent):
            return _advance_persistent(built, rng_key, state.kernel_state, logdensity_fn, num_steps_per_update)
        if alternate is None:
            particles, info = advance(kernel, rng_key, state.particles, logdensity_fn, params, num_steps_per_update)
            return particles, info, ()
        key_extra, key_base = jax.random.split(rng_key)

        def run_extra(particles):
            return advance(extra_kernel, key_extra, particles, logdensity_fn, params, 1)

        extra_shape = jax.eval_shape(lambda p: run_extra(p)[1], state.particles)
        due = (state.step >= start) & ((state.step - start) % every == 0)
        particles, extra_info = jax.lax.cond(
            due,
            run_extra,
            lambda p: (p, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), extra_shape)),
            state.particles,
        )
        particles, base_info = advance(kernel, key_base, particles, logdensity_fn, params, num_steps_per_update)
        return particles, AlternateInfo(base_info, extra_info, due), ()

    def step(rng_key, state: SAPState, batch) -> tuple[SAPState, SAPInfo]:
        batch = check_batch(model, visible, batch)
        key_negative, key_positive = jax.random.split(rng_key)
        params = state.params
        logdensity_fn = model.logdensity_fn(jax.lax.stop_gradient(params))
        particles, kernel_info, kernel_state = move(key_negative, state, logdensity_fn)
        positive_grad, aux_state = positive.update(key_positive, params, batch, state.aux_state)
        check_same_structure(params, positive_grad, "the positive phase's gradient")
        particle_energy, negative_grad = jax.value_and_grad(negative)(params, particles)
        ascent = jax.tree.map(jnp.add, positive_grad, negative_grad)
        new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
        info = SAPInfo(global_norm(ascent), particle_energy, kernel_info)
        return SAPState(new_params, opt_state, particles, aux_state, state.step + 1, kernel_state), info

    return Learner(init, step, model, name, visible)


def _advance_persistent(kernel: Persistent, rng_key, kernel_states, logdensity_fn, num_steps: int):
    """Run a persistent kernel ``num_steps`` steps on every particle (vmapped)."""
    num = jax.tree.leaves(kernel_states)[0].shape[0]

    def one_chain(key, kernel_state):
        def body(ks, key_step):
            return kernel.step(key_step, ks, logdensity_fn)

        kernel_state, infos = jax.lax.scan(body, kernel_state, jax.random.split(key, num_steps))
        return kernel_state, jax.tree.map(lambda x: jnp.mean(jnp.asarray(x, jnp.float32), axis=0), infos)

    kernel_states, infos = jax.vmap(one_chain)(jax.random.split(rng_key, num), kernel_states)
    return jax.vmap(kernel.sample)(kernel_states), infos, kernel_states


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
    from ugm_infer.kernels import gibbs

    check_model(model)
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    if scan not in ("block", "systematic", "random"):
        raise ValueError(f"`scan` must be 'block', 'systematic' or 'random', got {scan!r}")

    class _Gibbs:
        init = staticmethod(gibbs.init)

        @staticmethod
        def build_kernel(model, params=None):
            return gibbs.build_kernel(model, scan, num_sweeps, params=params)

    return sap(
        model,
        _Gibbs,
        optimizer,
        num_particles,
        visible=visible,
        positive_phase=positive_phase,
        negative_phase=negative_phase,
        init_particles=init_particles,
        name="pcd",
    )
