"""Persistent sequential Monte Carlo (PSMC) and standard-SMC learners.

**PSMC** (Xiong, Szedmak and Piater 2016, section 5) treats learning as one long SMC
run over the sequence of models :math:`p(x;\\theta_0), p(x;\\theta_1), \\ldots`.  At
every update, after the gradient step from :math:`\\theta_t` to
:math:`\\theta_{t+1}`, a random half of the particles of :math:`p(x;\\theta_t)` is
kept and the other half is re-initialised uniformly (``reinit_fraction``; the paper's
Fig. 1b).  The two groups then go through one shared sequence
:math:`0 = \\beta_0 < \\beta_1 < \\cdots < \\beta_H = 1`:

* the **kept** particles along the bridges between successive models (eq. 27)

  .. math::  p_h(x) \\propto p(x;\\theta_t)^{1-\\beta_h}\\, p(x;\\theta_{t+1})^{\\beta_h},
     \\qquad w \\propto \\exp(-(E_{t+1}(x) - E_t(x))\\,\\Delta\\beta_h) \\quad \\text{(eq. 30)};

* the **fresh** particles along tempering from the uniform :math:`U` (eq. 28, the
  sequence of standard SMC)

  .. math::  q_h(x) \\propto U(x)^{1-\\beta_h}\\, p(x;\\theta_{t+1})^{\\beta_h},
     \\qquad w \\propto \\exp(-E_{t+1}(x)\\,\\Delta\\beta_h).

At each :math:`\\beta_h` the step :math:`\\Delta\\beta_h \\le 1 - \\beta_{h-1}` is the
largest that keeps the ESS (eq. 31) of *each* group at or above
:math:`\\sigma^*` times its size (bisection on :math:`\\log \\Delta\\beta`, the paper's
Algorithm 4 searches the same step; :math:`\\sigma^* = ` ``ess_threshold``, 0.9 in the
paper); then each group is resampled within itself (``blackjax.smc.resampling``) and
every particle makes one kernel step leaving its own :math:`p_h` or :math:`q_h`
invariant.  At :math:`\\beta_H = 1` both groups target :math:`p(x;\\theta_{t+1})` and
are pooled with equal weights: the particles of the next gradient.  The number of
bridges is thus set by the harder of the two sequences, in practice the tempering of
the fresh half from the uniform: about as many as a standard SMC run (the paper
reports about 10 for a 10-spin VBM whatever the learning rate, and about 100 for an
MNIST RBM with 10 hidden units, in both cases similar to standard SMC), and every
particle makes that many kernel steps per update (the paper's PCD-H, PT and TT get
``H`` set to this number for equal computation).  With ``reinit_fraction=0`` only the
bridges between successive models remain; small parameter steps then need a single
bridge and PSMC is PCD with one importance-resampling step per update.

The loop is a ``lax.while_loop``; at the ``max_bridges``-th bridge the remaining
:math:`\\Delta\\beta = 1 - \\beta` is taken whatever the ESS (reported in
``PSMCInfo.capped``).  All weights are in log space, so energy differences of any size
neither overflow nor give NaN.

*Why the fresh particles are tempered.*  A uniform draw is not a draw of
:math:`p(x;\\theta_t)`: counting it as one biased the learned model towards the
uniform by 0.28 nats/sample on a 10-spin Boltzmann machine.  Weighting the fresh draws
by :math:`e^{-E(x;\\theta_t)}` as an importance sample of :math:`p(x;\\theta_t)` is
consistent but, on any peaked model, leaves one or two fresh particles with all the
weight: half the population is discarded at every update, the kept half is
duplicated, and the population keeps the modes it started with (an earlier version
of this module did that; ``tests/test_psmc_bridges.py`` shows the difference against
exact enumeration).  Tempered from the uniform, the fresh half is an SMC sample of
:math:`p(x;\\theta_{t+1})` that explores every mode, which is the point of
re-initialising.  The gradient is taken at the start of an update, on the equally
weighted pooled particles of :math:`p(x;\\theta_t)`; at ``init`` (unless
``init_particles`` are given) all particles are tempered from the uniform to
:math:`p(x;\\theta_0)` the same way, so the first gradient uses draws of
:math:`p(x;\\theta_0)` too, not uniform ones.

**Standard SMC** (:func:`smc_learner`): at every update, a fresh adaptive tempered
SMC run (``blackjax.adaptive_tempered_smc``) from the uniform distribution to
:math:`p(x;\\theta_t)`, the gradient's model term being the weighted mean over its
final particles -- the baseline PSMC is compared with.

References
----------
Xiong, H., Szedmak, S. and Piater, J. (2016). Learning undirected graphical models
using persistent sequential Monte Carlo. Machine Learning 103(2), 239-260: bridges
eq. 27, tempering eq. 28, weights eq. 30, ESS eq. 31 with :math:`\\sigma^* = 0.9`,
half of the particles re-initialised uniformly (section 5, Fig. 1).
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

from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.learn.base import Learner, check_fraction, check_positive_int, global_norm
from ugm_infer.learn.particles import (
    ess_of,
    normalize_log_weights,
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
    return _bisect(lambda delta: conditional_ess(log_weights, increments, delta) >= target_ess, remaining)


def _bisect(ok: Callable, remaining: jax.Array) -> jax.Array:
    """Largest ``delta`` in ``(0, remaining]`` with ``ok(delta)`` (bisection on ``log delta``, see :func:`bisect_delta`)."""
    hi0 = jnp.log(remaining)
    lo0 = hi0 - _LOG_DELTA_RANGE

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        good = ok(jnp.exp(mid))
        return jnp.where(good, mid, lo), jnp.where(good, hi, mid)

    lo, _ = jax.lax.fori_loop(0, _BISECTION_STEPS, body, (lo0, hi0))
    return jnp.where(ok(remaining), remaining, jnp.exp(lo))


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
        Smallest ESS reached after a reweighting (before resampling) in the bridges, as
        a fraction of its group's size times ``num_particles`` (so that it compares
        with ``ess_threshold * num_particles``; with ``reinit_fraction=0`` the plain ESS).
    capped
        Whether ``max_bridges`` forced a last step that broke the ESS target.
    fresh_ess
        Diagnostic: the ESS of the re-initialised particles' self-normalised weights
        :math:`e^{-E(x;\\theta_t)}`, i.e. how many of them a plain importance sample of
        :math:`p(x;\\theta_t)` would be worth (0 with ``reinit_fraction=0``).
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
    max_bridges: int = 1000,
    resampling: Any = "systematic",
) -> Learner:
    """Persistent SMC learner (see the module docstring for the algorithm).

    The kernel moves the particles at the bridges: it receives the bridge log-density
    :math:`-((1-\\beta)E_t + \\beta E_{t+1})` for a kept particle and
    :math:`-\\beta E_{t+1}` for a re-initialised one. Without ``init_particles`` the
    particles of the first gradient are an SMC sample of :math:`p(x;\\theta_0)`, tempered
    from the uniform like the re-initialised half.

    Parameters
    ----------
    ess_threshold
        :math:`\\sigma^*` in ``(0, 1]``: each bridge keeps the ESS of each group at or
        above ``ess_threshold`` times the group's size.
    reinit_fraction
        Fraction in ``[0, 1)`` of particles re-initialised uniformly at every update
        (``round(reinit_fraction * num_particles)`` slots, at most ``num_particles - 1``).
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
    num_reinit = min(int(round(reinit_fraction * s.num_particles)), s.num_particles - 1)
    num_kept = s.num_particles - num_reinit
    bridges = _bridges(s, ess_threshold, num_kept, max_bridges, resample_fn)
    from_uniform = _bridges(s, ess_threshold, 0, max_bridges, resample_fn)

    def init(rng_key, params, data) -> PSMCState:
        fresh = start(s, rng_key, params, data)
        particles = fresh.particles
        if s.init_particles is None:  # draws of p(x; theta_0) for the first gradient: tempered from the uniform
            params0 = jax.lax.stop_gradient(params)
            particles = from_uniform(fold_in_key(fresh.particle_key, 1), particles, params0, params0)[0]
        return PSMCState(params, fresh.opt_state, particles, fresh.aux_state, initial_step())

    def step(rng_key, state: PSMCState, batch) -> tuple[PSMCState, PSMCInfo]:
        key_bridges, key_positive, key_reinit, key_slots = split_key(rng_key, 4)
        params = state.params
        # the gradient at theta_t from the equally weighted particles of p(x; theta_t)
        negative_grad = jax.grad(negative)(params, state.particles)
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        old = jax.lax.stop_gradient(params)
        particles, fresh_ess = _reinitialise(model, key_slots, key_reinit, state.particles, old, num_kept)
        # kept: p_t^{1 - beta} p_{t+1}^beta; fresh: U^{1 - beta} p_{t+1}^beta; pooled at beta = 1
        particles, count, min_ess, capped = bridges(key_bridges, particles, old, jax.lax.stop_gradient(new.params))
        info = PSMCInfo(global_norm(new.direction), count, min_ess, capped, fresh_ess)
        return PSMCState(new.params, new.opt_state, particles, new.aux_state, state.step + 1), info

    return build(s, "psmc", init, step)


def _reinitialise(model, key_slots, key_reinit, particles: dict, params, num_kept: int):
    """``(particles, fresh_ess)``: a random ``num_kept`` of the particles first, then uniform draws.

    ``fresh_ess`` is the diagnostic of :class:`PSMCInfo`: the ESS of the draws'
    self-normalised weights :math:`e^{-E(x;\\theta_t)}` (0 when nothing is redrawn).
    """
    num_particles = jax.tree.leaves(particles)[0].shape[0]
    num_reinit = num_particles - num_kept
    if num_reinit == 0:
        return particles, jnp.zeros(())
    kept = jax.random.permutation(key_slots, num_particles)[:num_kept]
    fresh = model.random_state(key_reinit, num_reinit)
    particles = jax.tree.map(lambda x, f: jnp.concatenate([x[kept], f.astype(x.dtype)]), particles, fresh)
    return particles, ess_of(normalize_log_weights(-model.energies(params, fresh)))


def _bridges(s, ess_threshold: float, num_kept: int, max_bridges: int, resample_fn: Callable) -> Callable:
    """``bridges(rng_key, particles, params_old, params_new) -> (particles, count, min_ess, capped)``.

    The first ``num_kept`` particles follow :math:`p_t^{1-\\beta} p_{t+1}^{\\beta}`, the
    others :math:`U^{1-\\beta} p_{t+1}^{\\beta}`.  A ``lax.while_loop`` over bridges:
    reweight both groups by the largest step that keeps each group's ESS at
    ``ess_threshold`` of its size, resample each group within itself, move every
    particle by one kernel step at its own bridge density.
    """
    model, num_particles = s.model, s.num_particles
    groups = [(a, b) for a, b in ((0, num_kept), (num_kept, num_particles)) if b > a]
    # weight of E_t in a particle's base energy: 1 for the kept group, 0 (the uniform) for the fresh one
    base = jnp.concatenate([jnp.ones(num_kept), jnp.zeros(num_particles - num_kept)])

    def group_ess(inc, delta):
        """ESS of each group's reweighting by ``exp(delta * inc)``, as a fraction of the group's size."""
        return jnp.stack([conditional_ess(uniform_log_weights(b - a), inc[a:b], delta) / (b - a) for a, b in groups])

    def bridges(rng_key, particles, params_old, params_new):
        init_fn, kernel_fn = s.kernel.get(params_old)

        def cond(carry):
            return carry[2] < 1.0

        def body(carry):
            key, particles, beta, count, min_ess, capped = carry
            key, key_resample, key_move = split_key(key, 3)
            inc = -(model.energies(params_new, particles) - base * model.energies(params_old, particles))
            remaining = 1.0 - beta
            last = count + 1 >= max_bridges
            delta = jnp.where(last, remaining, _bisect(lambda d: jnp.all(group_ess(inc, d) >= ess_threshold), remaining))
            new_beta = jnp.where(delta >= remaining, 1.0, beta + delta)
            ess = group_ess(inc, delta)
            keys = split_key(key_resample, len(groups))
            idx = [
                a + resample_fn(k, jnp.exp(normalize_log_weights(delta * inc[a:b])), b - a)
                for k, (a, b) in zip(keys, groups, strict=False)
            ]
            idx = jnp.concatenate(idx)  # each group resampled within itself
            particles = jax.tree.map(lambda x: x[idx], particles)

            def move(key, x, g):
                def logdensity(y):
                    return -((1.0 - new_beta) * g * model.energy(params_old, y) + new_beta * model.energy(params_new, y))

                return kernel_fn(key, init_fn(x, logdensity), logdensity)[0].position

            particles = jax.vmap(move)(split_key(key_move, num_particles), particles, base)
            capped = capped | (last & jnp.any(ess < ess_threshold))
            return key, particles, new_beta, count + 1, jnp.minimum(min_ess, num_particles * jnp.min(ess)), capped

        zero = initial_step()
        carry = (rng_key, particles, jnp.zeros(()), zero, jnp.float32(num_particles), jnp.zeros((), bool))
        _, particles, _, count, min_ess, capped = jax.lax.while_loop(cond, body, carry)
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
        key_init, key_run = split_key(rng_key)
        smc_state = smc.init(model.random_state(key_init, s.num_particles))
        smc_state = smc_state._replace(tempering_param=jnp.asarray(smc_state.tempering_param, jnp.float32))

        def cond(carry):
            return (carry[1].tempering_param < 1.0) & (carry[2] < max_bridges)

        def body(carry):
            key, st, count, log_z = carry
            key, sub = split_key(key)
            st, info = smc.step(sub, st)
            return key, st, count + 1, log_z + info.log_likelihood_increment

        _, st, count, log_z = jax.lax.while_loop(cond, body, (key_run, smc_state, initial_step(), jnp.zeros(())))
        return st.particles, st.weights, count, log_z + log_num_states, st.tempering_param < 1.0

    def step(rng_key, state: SMCLearnerState, batch) -> tuple[SMCLearnerState, SMCLearnerInfo]:
        key_smc, key_positive = split_key(rng_key)
        params = state.params
        particles, weights, count, log_z, capped = run_smc(key_smc, jax.lax.stop_gradient(params))
        log_w = normalize_log_weights(jnp.log(weights))
        negative_grad = jax.grad(weighted)(params, particles, jnp.exp(log_w))
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        info = SMCLearnerInfo(global_norm(new.direction), count, ess_of(log_w), log_z, capped)
        return SMCLearnerState(new.params, new.opt_state, particles, log_w, new.aux_state, state.step + 1), info

    return build(s, "smc", init, step)
