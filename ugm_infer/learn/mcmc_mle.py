"""MCMC maximum likelihood (Geyer & Thompson 1992; Asuncion et al. 2010, Algorithm 1).

Sample particles :math:`x^{(1..S)}` from :math:`p(x \\mid \\theta_0)` with an MCMC
kernel, then maximise the importance-sampling approximation of the average
log-likelihood around :math:`\\theta_0` (Asuncion et al. 2010, eqs. 5-6)

.. math::  \\ell(\\theta) \\approx -\\mathbb E_{\\text{data}}[E(v;\\theta)]
   - \\log \\sum_s \\exp\\big(-(E(x_s;\\theta) - E(x_s;\\theta_0))\\big) + \\text{const},

whose gradient has the model term :math:`\\sum_s w_s(\\theta)\\,\\partial_\\theta
E(x_s;\\theta)`, with self-normalised weights :math:`\\log w_s = -(E(x_s;\\theta) -
E(x_s;\\theta_0))` (normalised with a log-sum-exp, so energy differences of any size
neither overflow nor produce NaN).  A *round* ends when the L1 norm of that
approximate gradient falls below ``grad_threshold`` or after ``max_inner_steps``
inner updates; then :math:`\\theta_0` is reset to the current estimate and the
particles are re-sampled by ``num_mcmc_steps`` kernel steps at :math:`\\theta_0`,
starting from where they are (the chains persist across rounds).

References
----------
Geyer, C. J. and Thompson, E. A. (1992). Constrained Monte Carlo maximum likelihood
for dependent data. JRSS B 54(3), 657-699.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE
with connections to contrastive divergence. ICML (Algorithm 1, eqs. 5-6).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer._random import split as split_key
from ugm_infer.learn.base import Learner, check_nonnegative_float, check_positive_int, global_norm
from ugm_infer.learn.particles import ess_of, maybe_advance, normalize_log_weights
from ugm_infer.learn.phases import weighted_negative_phase
from ugm_infer.learn.skeleton import ParticleArguments, ascend, build, initial_step, particle_learner, particle_setup, start

__all__ = ["MCMCMLEState", "MCMCMLEInfo", "mcmc_mle"]


class MCMCMLEState(NamedTuple):
    """State of :func:`mcmc_mle`.

    params, opt_state
        Current parameters :math:`\\theta` and the optax state.
    particles
        The particles ``{name: (num_particles, *shape)}`` drawn at the anchor.
    anchor_energies
        :math:`E(x_s; \\theta_0)` of the particles at the anchor parameters (joint
        energies, ``(num_particles,)``).
    aux_state
        State of the positive phase.
    step
        Number of updates done (int32).
    inner_step
        Inner updates done in the current round (int32).
    round
        Number of rounds started (int32): how many times the particles were sampled.
    resample_due
        Whether the next ``step`` starts a new round (bool; ``True`` after ``init``,
        so the first step samples at :math:`\\theta_0`).
    """

    params: Any
    opt_state: Any
    particles: dict
    anchor_energies: jax.Array
    aux_state: Any
    step: jax.Array
    inner_step: jax.Array
    round: jax.Array
    resample_due: jax.Array


class MCMCMLEInfo(NamedTuple):
    """Per-update diagnostics of :func:`mcmc_mle`.

    grad_norm
        Global L2 norm of the approximate ascent direction.
    grad_l1
        Its L1 norm (compared with ``grad_threshold``).
    ess
        Effective sample size of the importance weights at the current parameters.
    resampled
        Whether this update started a new round (re-sampled the particles).
    kernel_info
        Kernel infos of the re-sampling run (zeros when no round started).
    """

    grad_norm: jax.Array
    grad_l1: jax.Array
    ess: jax.Array
    resampled: jax.Array
    kernel_info: Any


@particle_learner
def mcmc_mle(
    args: ParticleArguments,
    *,
    num_mcmc_steps: int = 10,
    grad_threshold: float = 1e-3,
    max_inner_steps: int = 100,
) -> Learner:
    """MCMC-MLE learner (Geyer & Thompson 1992; Asuncion et al. 2010, Algorithm 1).

    The kernel samples the particles at the start of each round; the optimizer makes
    the inner updates.

    Parameters
    ----------
    num_mcmc_steps
        Kernel steps run at :math:`\\theta_0` at the start of each round (the chains
        continue from their previous positions).
    grad_threshold
        A round ends when the L1 norm of the approximate gradient is below this.
    max_inner_steps
        ... or after this many inner updates.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` with state :class:`MCMCMLEState` and info
    :class:`MCMCMLEInfo`.  Each ``step`` is one inner update; when the previous step
    ended a round (``state.resample_due``), the step first re-anchors
    :math:`\\theta_0 = \\theta` and re-samples (a ``lax.cond``: no kernel cost inside
    a round).  Importance log weights are :math:`-(E(x_s;\\theta) - E(x_s;\\theta_0))`
    on the joint energies, normalised in log space.
    """
    model = args.model
    s = particle_setup(args)
    num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
    max_inner_steps = check_positive_int(max_inner_steps, "max_inner_steps")
    grad_threshold = check_nonnegative_float(grad_threshold, "grad_threshold")
    negative = weighted_negative_phase(model, s.visible, args.negative_phase)

    def init(rng_key, params, data) -> MCMCMLEState:
        fresh = start(s, rng_key, params, data)
        zero = initial_step()
        anchor_energies = model.energies(params, fresh.particles)
        return MCMCMLEState(
            params, fresh.opt_state, fresh.particles, anchor_energies, fresh.aux_state, zero, zero, zero, jnp.ones((), bool)
        )

    def step(rng_key, state: MCMCMLEState, batch) -> tuple[MCMCMLEState, MCMCMLEInfo]:
        key_move, key_positive = split_key(rng_key)
        params = state.params
        fixed = jax.lax.stop_gradient(params)
        due = state.resample_due
        # a new round: theta_0 = theta, particles re-sampled by num_mcmc_steps kernel steps at theta_0
        logdensity_fn = model.logdensity_fn(fixed)
        particles, kernel_info = maybe_advance(
            due, s.kernel, key_move, state.particles, logdensity_fn, fixed, num_mcmc_steps
        )
        anchor, log_w = importance_log_weights(due, model.energies(fixed, particles), state.anchor_energies)
        negative_grad = jax.grad(negative)(params, particles, jnp.exp(log_w))
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, negative_grad)
        round_ = end_of_round(due, new.direction, state.inner_step, grad_threshold, max_inner_steps)
        info = MCMCMLEInfo(global_norm(new.direction), round_.grad_l1, ess_of(log_w), due, kernel_info)
        new_state = MCMCMLEState(
            new.params,
            new.opt_state,
            particles,
            anchor,
            new.aux_state,
            state.step + 1,
            round_.inner_step,
            state.round + due.astype(jnp.int32),
            round_.resample_due,
        )
        return new_state, info

    return build(s, "mcmc_mle", init, step)


def importance_log_weights(due: jax.Array, energies: jax.Array, anchor_energies: jax.Array):
    """``(anchor energies, normalised log weights)`` of particles drawn at the anchor (eqs. 5-6).

    On a new round (``due``) the anchor moves to the current parameters, so the weights
    are uniform; otherwise :math:`\\log w_s = -(E(x_s;\\theta) - E(x_s;\\theta_0))`,
    normalised in log space.
    """
    anchor = jnp.where(due, energies, anchor_energies)
    return anchor, normalize_log_weights(-(energies - anchor))


class RoundEnd(NamedTuple):
    """``grad_l1`` of the ascent direction, ``inner_step`` count of the round, ``resample_due`` next step."""

    grad_l1: jax.Array
    inner_step: jax.Array
    resample_due: jax.Array


def end_of_round(due, direction, inner_step, grad_threshold: float, max_inner_steps: int) -> RoundEnd:
    """A round ends when the L1 norm of the approximate gradient is below ``grad_threshold``
    or after ``max_inner_steps`` inner updates (Asuncion et al. 2010, Alg. 1)."""
    grad_l1 = sum(jnp.sum(jnp.abs(g)) for g in jax.tree.leaves(direction))
    inner = jnp.where(due, 0, inner_step) + 1
    return RoundEnd(grad_l1, inner, (grad_l1 < grad_threshold) | (inner >= max_inner_steps))
