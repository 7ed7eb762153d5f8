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

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.smc import resampling as smc_resampling

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
from ugm_infer.learn.mcmc_mle import (
    check_fraction,
    check_positive_float,
    ess_of,
    normalize_log_weights,
    validate_init_particles,
    weighted_negative_phase,
    zeros_like_shape,
)
from ugm_infer.learn.phases import resolve_negative_phase, resolve_positive_phase

__all__ = ["PFState", "PFInfo", "pf_mcmc_mle", "RESAMPLING"]

RESAMPLING = {
    "systematic": smc_resampling.systematic,
    "stratified": smc_resampling.stratified,
    "multinomial": smc_resampling.multinomial,
    "residual": smc_resampling.residual,
}


def resolve_resampling(resampling: Any):
    if callable(resampling):
        return resampling
    if resampling not in RESAMPLING:
        raise ValueError(f"`resampling` must be one of {sorted(RESAMPLING)} or a callable, got {resampling!r}")
    return RESAMPLING[resampling]


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


def pf_mcmc_mle(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    ess_threshold: float = 0.9,
    num_rejuvenation_steps: int = 1,
    weight_temperature: float = 1.0,
    resampling: Any = "systematic",
    unit_weights: bool = False,
    visible: Any = None,
    positive_phase: Any = "auto",
    negative_phase: str = "auto",
    init_particles: dict | None = None,
    num_burnin_steps: int | None = None,
    max_updates_between_rejuvenation: int | None = None,
    max_param_distance: float | None = None,
) -> Learner:
    """Particle-filtered MCMC-MLE learner (Asuncion et al. 2010, Algorithm 2).

    Parameters
    ----------
    model
        The :class:`~ugm_infer.EnergyModel` to fit.
    kernel
        Rejuvenation kernel (forms of :func:`~ugm_infer.learn.sap`; default block Gibbs).
    optimizer
        optax transformation; default ``optax.sgd(0.01)``.
    num_particles
        Number of particles ``S``.
    ess_threshold
        Resample when ``ESS < ess_threshold * S`` (in ``(0, 1]``).
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
    visible, positive_phase, negative_phase, init_particles
        As in :func:`~ugm_infer.learn.sap`.  Given ``init_particles`` are taken as
        draws from :math:`p(x;\\theta_0)` as they are.  Without them (and without
        ``unit_weights``), ``init`` draws the particles uniformly and moves them by
        ``num_burnin_steps`` kernel steps at :math:`\\theta_0` (Alg. 2, line 1).
    num_burnin_steps
        Kernel steps of that initial run; default ``num_rejuvenation_steps``.
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
    check_model(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    ess_threshold = check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False)
    num_rejuvenation_steps = check_positive_int(num_rejuvenation_steps, "num_rejuvenation_steps")
    num_burnin_steps = (
        num_rejuvenation_steps if num_burnin_steps is None else check_positive_int(num_burnin_steps, "num_burnin_steps")
    )
    weight_temperature = check_positive_float(weight_temperature, "weight_temperature")
    if max_updates_between_rejuvenation is not None:
        max_updates_between_rejuvenation = check_positive_int(
            max_updates_between_rejuvenation, "max_updates_between_rejuvenation"
        )
    if max_param_distance is not None:
        max_param_distance = check_positive_float(max_param_distance, "max_param_distance")
    resample_fn = resolve_resampling(resampling)
    if not isinstance(unit_weights, bool):
        raise TypeError(f"`unit_weights` must be a bool, got {unit_weights!r}")
    visible = resolve_visible(model, visible)
    optimizer = resolve_optimizer(optimizer)
    positive = resolve_positive_phase(model, visible, positive_phase)
    weighted = weighted_negative_phase(model, visible, negative_phase)
    unweighted = resolve_negative_phase(model, visible, negative_phase)
    kernel = LazyKernel(model, kernel)
    init_particles = validate_init_particles(model, init_particles, num_particles)
    log_uniform = -jnp.log(jnp.float32(num_particles))

    def init(rng_key, params, data=None) -> PFState:
        check_params(model, params)
        data = check_data(model, visible, data)
        key_particles, key_aux = jax.random.split(rng_key)
        kernel.get(params)
        if init_particles is None:
            particles = model.random_state(key_particles, num_particles)
        else:
            particles = dict(init_particles)
        if unit_weights:
            log_w = jnp.zeros((num_particles,))
        else:
            if init_particles is None:
                # Alg. 2 line 1: the particles start as MCMC draws from p(x; theta_0), not
                # as uniform draws (those are draws of p(x; theta_0) only for a flat theta_0)
                particles, _ = advance(
                    kernel,
                    jax.random.fold_in(key_particles, 1),
                    particles,
                    model.logdensity_fn(params),
                    params,
                    num_burnin_steps,
                )
            log_w = jnp.full((num_particles,), log_uniform)
        aux = positive.init(key_aux, params, data)
        zero = jnp.zeros((), jnp.int32)
        return PFState(params, optimizer.init(params), particles, log_w, aux, zero, zero, zero, params)

    def step(rng_key, state: PFState, batch) -> tuple[PFState, PFInfo]:
        batch = check_batch(model, visible, batch)
        # same split as sap: the move key is handed to `advance` unchanged
        key_move, key_positive = jax.random.split(rng_key)
        params = state.params
        fixed = jax.lax.stop_gradient(params)
        logdensity_fn = model.logdensity_fn(fixed)
        positive_grad, aux_state = positive.update(key_positive, params, batch, state.aux_state)
        check_same_structure(params, positive_grad, "the positive phase's gradient")
        if unit_weights:
            particles, kernel_info = advance(kernel, key_move, state.particles, logdensity_fn, fixed, num_rejuvenation_steps)
            negative_grad = jax.grad(unweighted)(params, particles)
            ascent = jax.tree.map(jnp.add, positive_grad, negative_grad)
            new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
            info = PFInfo(global_norm(ascent), jnp.float32(num_particles), jnp.ones((), bool), kernel_info)
            new_state = PFState(
                new_params,
                opt_state,
                particles,
                state.log_weights,
                aux_state,
                state.step + 1,
                state.num_resampled + 1,
                jnp.ones((), jnp.int32),
                fixed,
            )
            return new_state, info

        ess = ess_of(state.log_weights)
        due = ess < ess_threshold * num_particles
        # staleness safeguards (ours; see the module docstring): Python-level options,
        # so with both None the traced computation is exactly Alg. 2's
        if max_updates_between_rejuvenation is not None:
            due = due | (state.updates_since_rejuvenation >= max_updates_between_rejuvenation)
        if max_param_distance is not None:
            drift = jax.tree.map(jnp.subtract, fixed, jax.lax.stop_gradient(state.anchor_params))
            due = due | (global_norm(drift) > max_param_distance)
        key_resample = jax.random.fold_in(key_move, 1)

        def rejuvenate(operand):
            particles, log_w = operand
            idx = resample_fn(key_resample, jnp.exp(log_w), num_particles)
            particles = jax.tree.map(lambda x: x[idx], particles)
            particles, info = advance(kernel, key_move, particles, logdensity_fn, fixed, num_rejuvenation_steps)
            return particles, jnp.full_like(log_w, log_uniform), info

        info_shape = jax.eval_shape(lambda o: rejuvenate(o)[2], (state.particles, state.log_weights))
        particles, log_w, kernel_info = jax.lax.cond(
            due, rejuvenate, lambda o: (*o, zeros_like_shape(info_shape)), (state.particles, state.log_weights)
        )
        negative_grad = jax.grad(weighted)(params, particles, jnp.exp(log_w))
        ascent = jax.tree.map(jnp.add, positive_grad, negative_grad)
        new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
        # eq. 10 / 14: reweight along the parameter trail theta_t -> theta_{t+1}
        delta = model.energies(jax.lax.stop_gradient(new_params), particles) - model.energies(fixed, particles)
        log_w = normalize_log_weights(log_w - delta / weight_temperature)
        info = PFInfo(global_norm(ascent), ess, due, kernel_info)
        since = jnp.where(due, 1, state.updates_since_rejuvenation + 1).astype(jnp.int32)
        anchor = jax.tree.map(lambda a, p: jnp.where(due, p, a), state.anchor_params, fixed)
        new_state = PFState(
            new_params,
            opt_state,
            particles,
            log_w,
            aux_state,
            state.step + 1,
            state.num_resampled + due.astype(jnp.int32),
            since,
            anchor,
        )
        return new_state, info

    return Learner(init, step, model, "pcd" if unit_weights else "pf_mcmc_mle", visible)
