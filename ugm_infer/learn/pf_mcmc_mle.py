"""Particle-filtered MCMC-MLE (Asuncion, Liu, Ihler & Smyth 2010, Algorithms 2 and 3).

The particles follow the trail of parameters :math:`\\theta_0, \\theta_1, \\ldots` as
a particle filter: after every update :math:`\\theta_{t-1} \\to \\theta_t` the
importance log weights grow by (eq. 10, with the weight temperature :math:`T` of
eq. 14)

.. math::  \\log w_s \\mathrel{+}= -\\big(E(x_s;\\theta_t) - E(x_s;\\theta_{t-1})\\big) / T,

and are kept normalised in log space (log-sum-exp), so energy differences of any size
neither overflow nor give NaN.  Before each update the effective sample size
:math:`\\mathrm{ESS} = 1/\\sum_s \\bar w_s^2` (eq. 11, ``blackjax.smc.ess``) is compared
with ``ess_threshold * S``; when below, the particles are resampled
(``blackjax.smc.resampling``), the weights reset to uniform, and ``n`` MCMC
rejuvenation steps at :math:`\\theta_t` move them.  The test is a ``lax.cond``, so an
update with a high ESS costs no kernel step.  The model term of the gradient is the
weighted mean of :math:`-\\partial_\\theta E` over the particles.

**Staleness safeguard (ours, not in the paper).**  In the paper the ESS test is the
only trigger for rejuvenation.  The ESS only sees how the parameter trail changes the
particles' *relative* energies; a statistic that is (almost) constant over the
current particles -- e.g. the triangle count of sparse ERGM graphs, where most
particles hold no triangle -- leaves the weights (almost) uniform however far its
coefficient moves, so the particles are never refreshed and the weighted gradient is
taken from draws of a distribution ever further from :math:`p(x;\\theta_t)`.  Two
optional triggers bound that staleness, in the spirit of the cap ``max_inner_steps``
on the updates of a round of :func:`~ugm_infer.learn.mcmc_mle`: ``max_updates_between_rejuvenation=K`` resamples and
rejuvenates after at most ``K`` reweighting updates, and ``max_param_distance=d``
does so when :math:`\\lVert\\theta_t - \\theta_a\\rVert_2 > d`, with
:math:`\\theta_a` the parameters of the last rejuvenation (or :math:`\\theta_0`).
A rejuvenation is due when *any* trigger fires.  Both default to ``None``: then the
learner is the paper's Algorithm 2, update for update.

With ``unit_weights=True`` this is Algorithm 3 of the paper, persistent contrastive
divergence: weights are always uniform, there is no resampling, and every update
rejuvenates.  Its random keys are used exactly as :func:`ugm_infer.learn.sap` uses
them, so it reproduces ``sap`` with the same kernel (and ``ui.learn.pcd``) update for
update.

References
----------
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE
with connections to contrastive divergence. ICML (Algorithms 2-3, eqs. 10, 11, 14).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.learn.base import (
    Learner,
    check_bool,
    check_fraction,
    check_positive_float,
    check_positive_int,
    global_norm,
)
from ugm_infer.learn.particles import (
    RESAMPLING,
    advance,
    ess_of,
    resample,
    resolve_resampling,
    reweight,
    run_if,
    uniform_log_weights,
)
from ugm_infer.learn.phases import resolve_negative_phase, weighted_negative_phase
from ugm_infer.learn.skeleton import ParticleArguments, ascend, build, initial_step, particle_learner, particle_setup, start

__all__ = ["PFState", "PFInfo", "pf_mcmc_mle", "RESAMPLING"]


class PFState(NamedTuple):
    """State of :func:`pf_mcmc_mle`.

    params, opt_state
        Current parameters and the optax state.
    particles
        ``{name: (num_particles, *shape)}``.
    log_weights
        Normalised log importance weights ``(num_particles,)`` (all ``-log S`` after a
        resampling; zeros throughout with ``unit_weights=True``).
    aux_state
        State of the positive phase.
    step
        Number of updates done (int32).
    num_resampled
        Number of resample-and-rejuvenate events so far (int32).
    updates_since_rejuvenation
        Reweighting updates taken since the particles were last rejuvenated (or
        initialised) (int32); compared with ``max_updates_between_rejuvenation``.
    anchor_params
        Parameters at which the particles were last rejuvenated (initially
        :math:`\\theta_0`); compared with the current ones by ``max_param_distance``.
    """

    params: Any
    opt_state: Any
    particles: dict
    log_weights: jax.Array
    aux_state: Any
    step: jax.Array
    num_resampled: jax.Array
    updates_since_rejuvenation: jax.Array
    anchor_params: Any


class PFInfo(NamedTuple):
    """Per-update diagnostics of :func:`pf_mcmc_mle`.

    grad_norm
        Global L2 norm of the ascent direction.
    ess
        ESS of the weights tested at this update (before any resampling).
    resampled
        Whether the particles were resampled and rejuvenated at this update.
    kernel_info
        Kernel infos of the rejuvenation (zeros when none ran).
    """

    grad_norm: jax.Array
    ess: jax.Array
    resampled: jax.Array
    kernel_info: Any


@particle_learner
def pf_mcmc_mle(
    args: ParticleArguments,
    *,
    ess_threshold: float = 0.9,
    num_rejuvenation_steps: int = 1,
    weight_temperature: float = 1.0,
    resampling: Any = "systematic",
    unit_weights: bool = False,
    num_burnin_steps: int | None = None,
    max_updates_between_rejuvenation: int | None = None,
    max_param_distance: float | None = None,
) -> Learner:
    """Particle-filtered MCMC-MLE learner (Asuncion et al. 2010, Algorithm 2).

    The kernel rejuvenates the particles after a resampling.

    Parameters
    ----------
    ess_threshold
        Resample when ``ESS < ess_threshold * num_particles`` (in ``(0, 1]``).
    num_rejuvenation_steps
        Kernel steps ``n`` after each resampling.
    weight_temperature
        :math:`T` of eq. 14 (``T > 1`` flattens the weights, resampling less often).
    resampling
        ``"systematic"`` (default), ``"stratified"``, ``"multinomial"``,
        ``"residual"`` (``blackjax.smc.resampling``) or a callable
        ``(rng_key, normalised_weights, num_samples) -> indices``.
    unit_weights
        Algorithm 3 (PCD): uniform weights, no resampling, rejuvenation at every
        update (identical to :func:`~ugm_infer.learn.sap` with the same kernel and
        ``num_steps_per_update=num_rejuvenation_steps``).
    num_burnin_steps
        Without ``init_particles`` (and without ``unit_weights``), ``init`` draws the
        particles uniformly and moves them by this many kernel steps at
        :math:`\\theta_0` (Alg. 2, line 1); default ``num_rejuvenation_steps``.  Given
        ``init_particles`` are taken as draws from :math:`p(x;\\theta_0)` as they are.
    max_updates_between_rejuvenation
        Optional positive int ``K`` (our safeguard, not in the paper): resample and
        rejuvenate also when ``K`` reweighting updates have been taken since the last
        rejuvenation, whatever the ESS.  ``K = 1`` rejuvenates at every update.
        ``None`` (default): the ESS test alone decides (Alg. 2).
    max_param_distance
        Optional positive float ``d`` (our safeguard, not in the paper): resample and
        rejuvenate also when the global L2 distance between the current parameters
        and those of the last rejuvenation exceeds ``d``.  ``None`` (default): off.
        Both safeguards have no effect with ``unit_weights=True``.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` with state :class:`PFState` and info
    :class:`PFInfo`.  One update: test the ESS, maybe resample + rejuvenate at
    :math:`\\theta_t`, take the weighted gradient at :math:`\\theta_t`, move to
    :math:`\\theta_{t+1}`, then reweight by eq. 10/14.
    """
    model = args.model
    s = particle_setup(args)
    config = _Config(
        ess_threshold=check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False),
        num_rejuvenation_steps=check_positive_int(num_rejuvenation_steps, "num_rejuvenation_steps"),
        num_burnin_steps=_optional(check_positive_int, num_burnin_steps, "num_burnin_steps", num_rejuvenation_steps),
        weight_temperature=check_positive_float(weight_temperature, "weight_temperature"),
        max_updates=_optional(check_positive_int, max_updates_between_rejuvenation, "max_updates_between_rejuvenation"),
        max_param_distance=_optional(check_positive_float, max_param_distance, "max_param_distance"),
        resample_fn=resolve_resampling(resampling),
    )
    unit_weights = check_bool(unit_weights, "unit_weights")
    if unit_weights:
        step = _pcd_step(s, config, resolve_negative_phase(model, s.visible, args.negative_phase))
    else:
        step = _pf_step(s, config, weighted_negative_phase(model, s.visible, args.negative_phase))

    init = functools.partial(_init, s, config, unit_weights)
    return build(s, "pcd" if unit_weights else "pf_mcmc_mle", init, step)


class _Config(NamedTuple):
    ess_threshold: float
    num_rejuvenation_steps: int
    num_burnin_steps: int
    weight_temperature: float
    max_updates: int | None
    max_param_distance: float | None
    resample_fn: Callable


def _init(s, config: _Config, unit_weights: bool, rng_key, params, data) -> PFState:
    """Particles (Alg. 2 line 1: MCMC draws from :math:`p(x;\\theta_0)`) with uniform weights."""
    fresh = start(s, rng_key, params, data)
    particles = fresh.particles
    if unit_weights:
        log_w = jnp.zeros((s.num_particles,))
    else:
        if s.init_particles is None:
            # uniform draws are draws of p(x; theta_0) only for a flat theta_0: move them first
            key_burnin = fold_in_key(fresh.particle_key, 1)
            logdensity_fn = s.model.logdensity_fn(params)
            particles, _ = advance(s.kernel, key_burnin, particles, logdensity_fn, params, config.num_burnin_steps)
        log_w = uniform_log_weights(s.num_particles)
    zero = initial_step()
    return PFState(params, fresh.opt_state, particles, log_w, fresh.aux_state, zero, zero, zero, params)


def _optional(check: Callable, value: Any, argname: str, default: Any = None) -> Any:
    return default if value is None else check(value, argname)


def _pcd_step(s, config: _Config, negative: Callable) -> Callable:
    """Alg. 3: uniform weights, rejuvenation at every update; keys used as :func:`~ugm_infer.learn.sap` uses them."""
    model = s.model

    def step(rng_key, state: PFState, batch) -> tuple[PFState, PFInfo]:
        key_move, key_positive = split_key(rng_key)
        params = state.params
        fixed = jax.lax.stop_gradient(params)
        logdensity_fn = model.logdensity_fn(fixed)
        num_steps = config.num_rejuvenation_steps
        particles, kernel_info = advance(s.kernel, key_move, state.particles, logdensity_fn, fixed, num_steps)
        negative_grad = jax.grad(negative)(params, particles)
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        info = PFInfo(global_norm(new.direction), jnp.float32(s.num_particles), jnp.ones((), bool), kernel_info)
        new_state = PFState(
            new.params,
            new.opt_state,
            particles,
            state.log_weights,
            new.aux_state,
            state.step + 1,
            state.num_resampled + 1,
            jnp.ones((), jnp.int32),
            fixed,
        )
        return new_state, info

    return step


def _rejuvenation_due(config: _Config, state: PFState, params: Any, ess: jax.Array, num_particles: int) -> jax.Array:
    """ESS below the threshold (Alg. 2), or one of the optional staleness safeguards fired."""
    due = ess < config.ess_threshold * num_particles
    # Python-level options, so with both None the traced computation is exactly Alg. 2's
    if config.max_updates is not None:
        due = due | (state.updates_since_rejuvenation >= config.max_updates)
    if config.max_param_distance is not None:
        drift = jax.tree.map(jnp.subtract, params, jax.lax.stop_gradient(state.anchor_params))
        due = due | (global_norm(drift) > config.max_param_distance)
    return due


def _pf_step(s, config: _Config, weighted: Callable) -> Callable:
    """Alg. 2: test the ESS, maybe resample + rejuvenate, weighted gradient, reweight along the trail."""
    model, num_particles = s.model, s.num_particles

    def step(rng_key, state: PFState, batch) -> tuple[PFState, PFInfo]:
        key_move, key_positive = split_key(rng_key)
        key_resample = fold_in_key(key_move, 1)
        params = state.params
        fixed = jax.lax.stop_gradient(params)
        logdensity_fn = model.logdensity_fn(fixed)
        ess = ess_of(state.log_weights)
        due = _rejuvenation_due(config, state, fixed, ess, num_particles)

        def rejuvenate(operand):
            particles = resample(key_resample, config.resample_fn, *operand)
            num_steps = config.num_rejuvenation_steps
            particles, info = advance(s.kernel, key_move, particles, logdensity_fn, fixed, num_steps)
            return (particles, uniform_log_weights(num_particles)), info

        (particles, log_w), kernel_info = run_if(due, rejuvenate, (state.particles, state.log_weights))
        negative_grad = jax.grad(weighted)(params, particles, jnp.exp(log_w))
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        # eq. 10 / 14: reweight along the parameter trail theta_t -> theta_{t+1}
        energies_new = model.energies(jax.lax.stop_gradient(new.params), particles)
        log_w = reweight(log_w, energies_new, model.energies(fixed, particles), config.weight_temperature)
        info = PFInfo(global_norm(new.direction), ess, due, kernel_info)
        new_state = PFState(
            new.params,
            new.opt_state,
            particles,
            log_w,
            new.aux_state,
            state.step + 1,
            state.num_resampled + due.astype(jnp.int32),
            jnp.where(due, 1, state.updates_since_rejuvenation + 1).astype(jnp.int32),
            jax.tree.map(lambda a, p: jnp.where(due, p, a), state.anchor_params, fixed),
        )
        return new_state, info

    return step
