"""Persistent sequential Monte Carlo (PSMC) and standard-SMC learners.

**PSMC** treats learning as one long SMC run over the sequence of models
:math:`p(x;\\theta_0), p(x;\\theta_1), \\ldots`.  Between :math:`\\theta_t` and
:math:`\\theta_{t+1}` it inserts geometric bridges

.. math::  p_h(x) \\propto p(x;\\theta_t)^{1-\\beta_h}\\, p(x;\\theta_{t+1})^{\\beta_h},
   \\qquad 0 = \\beta_0 < \\beta_1 < \\cdots < \\beta_H = 1,

and at each bridge (i) multiplies the importance weights by
:math:`\\exp(-(E_{t+1}(x) - E_t(x))\\,\\Delta\\beta_h)` with the largest
:math:`\\Delta\\beta_h \\le 1 - \\beta_{h-1}` that keeps
:math:`\\mathrm{ESS} \\ge \\sigma^* N` (bisection on :math:`\\log \\Delta\\beta`, ESS
from ``blackjax.smc.ess``; :math:`\\sigma^* = ` ``ess_threshold``, 0.9 in the paper),
(ii) resamples (``blackjax.smc.resampling``) and (iii) moves every particle by one
kernel step leaving :math:`p_h` invariant.  The loop is a ``lax.while_loop``; at the
``max_bridges``-th bridge the remaining :math:`\\Delta\\beta = 1 - \\beta` is taken
whatever the ESS (reported in ``PSMCInfo.capped``), so every update ends at
:math:`\\beta = 1` with uniformly weighted particles for :math:`\\theta_{t+1}`.  All
weights are in log space, so energy differences of any size neither overflow nor give
NaN.  Large parameter steps get many bridges; small ones a single bridge (then PSMC is
PCD with one importance-resampling step per update).

*Re-initialised particles.*  At the start of every update a fraction
``reinit_fraction`` of the particle slots (chosen uniformly at random) is replaced by
configurations drawn uniformly at random, as in the paper (which re-initialises half
of the particles).  **Exact treatment here** (the paper treats them as fresh particles
from the uniform; a fresh particle cannot simply be counted as a draw from
:math:`p(x;\\theta_t)` -- doing so biased the learned model towards the uniform by
0.28 nats/sample on a 10-spin Boltzmann machine): the fresh particles are an
importance sample from the uniform for :math:`p(x;\\theta_t)`, with self-normalised
weights :math:`\\tilde w_j \\propto e^{-E(x_j;\\theta_t)}` and effective size
:math:`\\mathrm{ESS}_f = 1/\\sum_j \\tilde w_j^2`; the kept particles (``n_k`` of
them, equally weighted) are the other estimate of :math:`p(x;\\theta_t)`.  The two
consistent estimates are mixed in proportion to their effective sizes: a kept
particle has weight :math:`1/(n_k + \\mathrm{ESS}_f)`, a fresh one
:math:`\\mathrm{ESS}_f\\, \\tilde w_j / (n_k + \\mathrm{ESS}_f)`.  The first bridge
then starts from these non-uniform weights, and its step is chosen with the
*conditional* ESS of the incremental weights (Zhou, Johansen & Aston 2016), which
equals the ordinary ESS once the weights are uniform.  Fresh particles in
high-probability regions survive the resampling (new modes enter the population); the
rest are discarded.  ``reinit_fraction=0`` turns re-initialisation off.  The gradient
is taken before re-initialisation, on the equally weighted particles that came out of
the previous update's bridges.

**Standard SMC** (:func:`smc_learner`): at every update, a fresh adaptive tempered
SMC run (``blackjax.adaptive_tempered_smc``) from the uniform distribution to
:math:`p(x;\\theta_t)`, the gradient's model term being the weighted mean over its
final particles -- the baseline PSMC is compared with.

References
----------
Xiong, H., Szedmak, S. and Piater, J. (2016). Efficient learning of Markov random
fields with persistent sequential Monte Carlo (PSMC): bridges
:math:`p_t^{1-\\beta} p_{t+1}^{\\beta}`, ESS-driven steps with
:math:`\\sigma^* = 0.9`, half of the particles re-initialised uniformly.
Zhou, Y., Johansen, A. M. and Aston, J. A. D. (2016). Toward automatic model
comparison: an adaptive sequential Monte Carlo approach. JCGS 25(3) (conditional ESS).
Del Moral, P., Doucet, A. and Jasra, A. (2006). Sequential Monte Carlo samplers.
JRSS B 68(3), 411-436.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp

from ugm_infer.learn.base import Learner, check_fraction, check_positive_int, global_norm
from ugm_infer.learn.particles import (
    ess_of,
    normalize_log_weights,
    resample,
    resolve_resampling,
    uniform_log_weights,
)
from ugm_infer.learn.phases import resolve_negative_phase, weighted_negative_phase
from ugm_infer.learn.skeleton import ParticleArguments, ascend, build, initial_step, particle_learner, particle_setup, start

__all__ = ["PSMCState", "PSMCInfo", "psmc", "SMCLearnerState", "SMCLearnerInfo", "smc_learner", "bisect_delta"]

_BISECTION_STEPS = 40
_LOG_DELTA_RANGE = 40.0  # smallest step tried: (1 - beta) * exp(-40)


def conditional_ess(log_weights: jax.Array, increments: jax.Array, delta: jax.Array) -> jax.Array:
    """Conditional ESS (Zhou, Johansen & Aston 2016) of a reweighting by ``exp(delta * inc)``.

    :math:`N (\\sum_i W_i w_i)^2 / \\sum_i W_i w_i^2` with :math:`W` the normalised
    current weights (``log_weights``, log-sum-exp 0) and :math:`w_i = e^{\\delta\\,
    \\mathrm{inc}_i}`: the ESS of the *incremental* weights, which equals the ordinary
    ESS when the current weights are uniform.  Computed with log-sum-exps.
    """
    lse = jax.scipy.special.logsumexp
    num = log_weights.shape[0]
    return num * jnp.exp(2 * lse(log_weights + delta * increments) - lse(log_weights + 2 * delta * increments))


def bisect_delta(increments: jax.Array, log_weights: jax.Array, remaining: jax.Array, target_ess: jax.Array):
    """Largest ``delta`` in ``(0, remaining]`` with ``conditional_ess(log_w, inc, delta) >= target_ess``.

    Bisection on :math:`\\log \\delta` over ``[log remaining - 40, log remaining]``
    (``_BISECTION_STEPS`` halvings, jittable); returns ``remaining`` when the full step
    keeps the ESS, and the smallest step tried when even it does not.  ``increments``
    are per-particle log-weight increments per unit of :math:`\\beta` (finite);
    ``log_weights`` are normalised.
    """

    def ess_at(log_delta):
        return conditional_ess(log_weights, increments, jnp.exp(log_delta))

    hi0 = jnp.log(remaining)
    lo0 = hi0 - _LOG_DELTA_RANGE

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        ok = ess_at(mid) >= target_ess
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    lo, _ = jax.lax.fori_loop(0, _BISECTION_STEPS, body, (lo0, hi0))
    return jnp.where(ess_at(hi0) >= target_ess, remaining, jnp.exp(lo))


class PSMCState(NamedTuple):
    """State of :func:`psmc`: ``params``, ``opt_state``, equally weighted ``particles``
    for the current parameters, ``aux_state`` (positive phase), ``step`` (int32)."""

    params: Any
    opt_state: Any
    particles: dict
    aux_state: Any
    step: jax.Array


class PSMCInfo(NamedTuple):
    """Per-update diagnostics of :func:`psmc`.

    grad_norm
        Global L2 norm of the ascent direction.
    num_bridges
        Number of bridges (inverse temperatures :math:`\\beta_h > 0`) used between
        :math:`\\theta_t` and :math:`\\theta_{t+1}`.
    min_ess
        Smallest ESS reached after a reweighting (before resampling) in the bridges.
    capped
        Whether ``max_bridges`` forced a last step that broke the ESS target.
    fresh_ess
        ESS of the re-initialised particles' self-normalised weights for
        :math:`p(x;\\theta_t)` (0 with ``reinit_fraction=0``).
    """

    grad_norm: jax.Array
    num_bridges: jax.Array
    min_ess: jax.Array
    capped: jax.Array
    fresh_ess: jax.Array


@particle_learner
def psmc(
    args: ParticleArguments,
    *,
    ess_threshold: float = 0.9,
    reinit_fraction: float = 0.5,
    max_bridges: int = 100,
    resampling: Any = "systematic",
) -> Learner:
    """Persistent SMC learner (see the module docstring for the algorithm).

    The kernel moves the particles at the bridges: it receives the bridge log-density
    :math:`-((1-\\beta)E_t + \\beta E_{t+1})`.

    Parameters
    ----------
    ess_threshold
        :math:`\\sigma^*` in ``(0, 1]``: each bridge keeps ``ESS >= ess_threshold * num_particles``.
    reinit_fraction
        Fraction in ``[0, 1)`` of particles re-initialised uniformly at every update
        (``round(reinit_fraction * num_particles)`` slots).
    max_bridges
        Cap on the bridges per update.
    resampling
        As in :func:`~ugm_infer.learn.pf_mcmc_mle`.
    """
    model = args.model
    s = particle_setup(args)
    ess_threshold = check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False)
    reinit_fraction = check_fraction(reinit_fraction, "reinit_fraction", 0.0, 1.0, False, True)
    max_bridges = check_positive_int(max_bridges, "max_bridges")
    resample_fn = resolve_resampling(resampling)
    negative = resolve_negative_phase(model, s.visible, args.negative_phase)
    num_reinit = int(round(reinit_fraction * s.num_particles))
    bridges = _bridges(s, ess_threshold * s.num_particles, max_bridges, resample_fn)

    def init(rng_key, params, data) -> PSMCState:
        fresh = start(s, rng_key, params, data)
        return PSMCState(params, fresh.opt_state, fresh.particles, fresh.aux_state, initial_step())

    def step(rng_key, state: PSMCState, batch) -> tuple[PSMCState, PSMCInfo]:
        key_bridges, key_positive, key_reinit, key_slots = jax.random.split(rng_key, 4)
        params = state.params
        # the gradient at theta_t from the equally weighted particles of p(x; theta_t)
        negative_grad = jax.grad(negative)(params, state.particles)
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        fixed = jax.lax.stop_gradient(params)
        particles, log_w, fresh_ess = _reinitialise(model, key_slots, key_reinit, state.particles, fixed, num_reinit)
        # bridges p_t^{1 - beta} p_{t+1}^beta from theta_t to theta_{t+1}
        particles, count, min_ess, capped = bridges(key_bridges, particles, log_w, fixed, jax.lax.stop_gradient(new.params))
        info = PSMCInfo(global_norm(new.direction), count, min_ess, capped, fresh_ess)
        return PSMCState(new.params, new.opt_state, particles, new.aux_state, state.step + 1), info

    return build(s, "psmc", init, step)


def _reinitialise(model, key_slots, key_reinit, particles: dict, params, num_reinit: int):
    """Replace ``num_reinit`` random slots by uniform draws; ``(particles, log weights, ESS of the fresh group)``.

    The fresh group is a self-normalised importance sample from the uniform for
    :math:`p(x;\\theta_t)`; the two groups are mixed in proportion to their effective
    sizes (``n_kept`` vs ``ESS_fresh``, see the module docstring).
    """
    num_particles = jax.tree.leaves(particles)[0].shape[0]
    if num_reinit == 0:
        return particles, uniform_log_weights(num_particles), jnp.zeros(())
    slots = jax.random.permutation(key_slots, num_particles)[:num_reinit]
    fresh = model.random_state(key_reinit, num_reinit)
    particles = jax.tree.map(lambda x, f: x.at[slots].set(f.astype(x.dtype)), particles, fresh)
    log_fresh = normalize_log_weights(-model.energies(params, fresh))
    fresh_ess = ess_of(log_fresh)
    log_total = jnp.log(num_particles - num_reinit + fresh_ess)
    log_w = jnp.full((num_particles,), -log_total).at[slots].set(jnp.log(fresh_ess) - log_total + log_fresh)
    return particles, log_w, fresh_ess


def _bridges(s, target_ess: float, max_bridges: int, resample_fn: Callable) -> Callable:
    """``bridges(rng_key, particles, log_weights, params_old, params_new) -> (particles, count, min_ess, capped)``.

    A ``lax.while_loop`` over bridges: reweight by the largest step keeping the
    (conditional) ESS, resample, move every particle by one kernel step at the bridge.
    """
    model, num_particles = s.model, s.num_particles

    def bridges(rng_key, particles, log_weights, params_old, params_new):
        init_fn, kernel_fn = s.kernel.get(params_old)
        log_uniform = uniform_log_weights(num_particles)

        def cond(carry):
            return carry[3] < 1.0

        def body(carry):
            key, particles, log_w0, beta, count, min_ess, capped = carry
            key, key_resample, key_move = jax.random.split(key, 3)
            inc = -(model.energies(params_new, particles) - model.energies(params_old, particles))
            remaining = 1.0 - beta
            last = count + 1 >= max_bridges
            delta = jnp.where(last, remaining, bisect_delta(inc, log_w0, remaining, target_ess))
            new_beta = jnp.where(delta >= remaining, 1.0, beta + delta)
            log_w = normalize_log_weights(log_w0 + delta * inc)
            particles = resample(key_resample, resample_fn, particles, log_w)

            def bridge_logdensity(x):
                return -((1.0 - new_beta) * model.energy(params_old, x) + new_beta * model.energy(params_new, x))

            def move(key, x):
                return kernel_fn(key, init_fn(x, bridge_logdensity), bridge_logdensity)[0].position

            particles = jax.vmap(move)(jax.random.split(key_move, num_particles), particles)
            capped = capped | (last & (conditional_ess(log_w0, inc, delta) < target_ess))
            return key, particles, log_uniform, new_beta, count + 1, jnp.minimum(min_ess, ess_of(log_w)), capped

        zero = initial_step()
        carry = (rng_key, particles, log_weights, jnp.zeros(()), zero, jnp.float32(num_particles), jnp.zeros((), bool))
        _, particles, _, _, count, min_ess, capped = jax.lax.while_loop(cond, body, carry)
        return particles, count, min_ess, capped

    return bridges


# ----------------------------------------------------------------------------------
# standard SMC learner
# ----------------------------------------------------------------------------------
class SMCLearnerState(NamedTuple):
    """State of :func:`smc_learner`: ``params``, ``opt_state``, the last run's
    ``particles`` and normalised ``log_weights``, ``aux_state``, ``step``."""

    params: Any
    opt_state: Any
    particles: dict
    log_weights: jax.Array
    aux_state: Any
    step: jax.Array


class SMCLearnerInfo(NamedTuple):
    """``grad_norm``; ``num_bridges`` (tempering steps of the run); ``ess`` of the final
    weights; ``log_normalizer`` (the run's estimate of :math:`\\log Z(\\theta_t)`,
    uniform prior included); ``capped`` (the run stopped at ``max_bridges`` before
    :math:`\\lambda = 1`)."""

    grad_norm: jax.Array
    num_bridges: jax.Array
    ess: jax.Array
    log_normalizer: jax.Array
    capped: jax.Array


@particle_learner(init_particles=False)
def smc_learner(
    args: ParticleArguments,
    *,
    ess_threshold: float = 0.9,
    num_mcmc_steps: int = 1,
    max_bridges: int = 100,
    resampling: Any = "systematic",
) -> Learner:
    """Standard-SMC learner: an adaptive tempered SMC run from scratch at every update.

    At every update, ``blackjax.adaptive_tempered_smc`` with the uniform prior and
    log-likelihood :math:`-E(x;\\theta_t)` (tempering :math:`\\lambda` from 0 to 1, the
    next :math:`\\lambda` keeping ``ESS = ess_threshold * num_particles``,
    ``num_mcmc_steps`` kernel steps at each temperature) produces weighted particles for
    :math:`p(x;\\theta_t)`; the model term is their weighted mean of
    :math:`-\\partial_\\theta E`.  No particle persists between updates.

    Parameters
    ----------
    ess_threshold, max_bridges, resampling
        As in :func:`psmc`.
    num_mcmc_steps
        Kernel steps at each temperature.
    """
    model = args.model
    s = particle_setup(args)
    ess_threshold = check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False)
    num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
    max_bridges = check_positive_int(max_bridges, "max_bridges")
    resample_fn = resolve_resampling(resampling)
    weighted = weighted_negative_phase(model, s.visible, args.negative_phase)
    log_num_states = sum(d.size * jnp.log(float(d.num_states)) for d in model.variables.values())

    def init(rng_key, params, data) -> SMCLearnerState:
        fresh = start(s, rng_key, params, data)
        log_w = uniform_log_weights(s.num_particles)
        return SMCLearnerState(params, fresh.opt_state, fresh.particles, log_w, fresh.aux_state, initial_step())

    def run_smc(rng_key, params):
        """Adaptive tempered SMC from the uniform to p(x; theta): particles, weights, steps, log Z, capped."""
        init_fn, kernel_fn = s.kernel.get(params)
        smc = blackjax.adaptive_tempered_smc(
            lambda x: jnp.zeros(()),
            lambda x: -model.energy(params, x),
            kernel_fn,
            init_fn,
            {},
            resample_fn,
            target_ess=ess_threshold,
            num_mcmc_steps=num_mcmc_steps,
        )
        key_init, key_run = jax.random.split(rng_key)
        smc_state = smc.init(model.random_state(key_init, s.num_particles))
        smc_state = smc_state._replace(tempering_param=jnp.asarray(smc_state.tempering_param, jnp.float32))

        def cond(carry):
            return (carry[1].tempering_param < 1.0) & (carry[2] < max_bridges)

        def body(carry):
            key, st, count, log_z = carry
            key, sub = jax.random.split(key)
            st, info = smc.step(sub, st)
            return key, st, count + 1, log_z + info.log_likelihood_increment

        _, st, count, log_z = jax.lax.while_loop(cond, body, (key_run, smc_state, initial_step(), jnp.zeros(())))
        return st.particles, st.weights, count, log_z + log_num_states, st.tempering_param < 1.0

    def step(rng_key, state: SMCLearnerState, batch) -> tuple[SMCLearnerState, SMCLearnerInfo]:
        key_smc, key_positive = jax.random.split(rng_key)
        params = state.params
        particles, weights, count, log_z, capped = run_smc(key_smc, jax.lax.stop_gradient(params))
        log_w = normalize_log_weights(jnp.log(weights))
        negative_grad = jax.grad(weighted)(params, particles, jnp.exp(log_w))
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        info = SMCLearnerInfo(global_norm(new.direction), count, ess_of(log_w), log_z, capped)
        return SMCLearnerState(new.params, new.opt_state, particles, log_w, new.aux_state, state.step + 1), info

    return build(s, "smc", init, step)
