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

This module also holds the helpers shared by the importance-weighted learners
(:mod:`~ugm_infer.learn.pf_mcmc_mle`, :mod:`~ugm_infer.learn.psmc`).

References
----------
Geyer, C. J. and Thompson, E. A. (1992). Constrained Monte Carlo maximum likelihood
for dependent data. JRSS B 54(3), 657-699.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE
with connections to contrastive divergence. ICML (Algorithm 1, eqs. 5-6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.smc import ess as smc_ess

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
from ugm_infer.learn.phases import latent_names, resolve_positive_phase, visible_free_energy

__all__ = ["MCMCMLEState", "MCMCMLEInfo", "mcmc_mle"]


# ----------------------------------------------------------------------------------
# shared helpers of the importance-weighted learners
# ----------------------------------------------------------------------------------
def check_fraction(value: Any, argname: str, low: float, high: float, low_open: bool, high_open: bool) -> float:
    """A float in an interval (host side); ``ValueError`` naming the argument otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{argname}` must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    lo_ok = v > low if low_open else v >= low
    hi_ok = v < high if high_open else v <= high
    if not (np.isfinite(v) and lo_ok and hi_ok):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"`{argname}` must lie in {interval}, got {value!r}")
    return v


def check_positive_float(value: Any, argname: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{argname}` must be a positive number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{argname}` must be a positive finite number, got {value!r}")
    return v


def weighted_negative_phase(model, visible: tuple[str, ...], negative_phase: str) -> Callable:
    """``value(params, particles, weights)``: weighted sum of per-particle (free) energies.

    Its gradient in ``params`` is :math:`\\sum_s w_s \\partial_\\theta E(x_s)`, the
    negated model term of the ascent direction.  ``"free_energy"`` (the default when
    the model has latents summed out analytically) uses the free energy of the
    visible part of each particle, as :func:`~ugm_infer.learn.sap` does.
    """
    if negative_phase not in ("auto", "energy", "free_energy"):
        raise ValueError(f"`negative_phase` must be 'auto', 'energy' or 'free_energy', got {negative_phase!r}")
    free_energy = visible_free_energy(model, visible)
    latent = latent_names(model, visible)
    if negative_phase == "free_energy" and free_energy is None:
        raise ValueError(
            f"`negative_phase='free_energy'` needs an analytic free energy of {list(visible)}; "
            f"model '{model.name}' sums out {sorted(model.free_energy_fns)} but the latents are {list(latent)}"
        )
    if free_energy is not None and latent and negative_phase in ("auto", "free_energy"):

        def per_particle(params, particles):
            return jax.vmap(lambda v: free_energy(params, v))({n: particles[n] for n in visible})
    else:

        def per_particle(params, particles):
            return model.energies(params, particles)

    def value(params, particles, weights):
        return jnp.sum(jax.lax.stop_gradient(weights) * per_particle(params, particles))

    return value


def normalize_log_weights(log_weights: jax.Array) -> jax.Array:
    """Log weights shifted so that they log-sum-exp to 0 (finite for any finite input)."""
    return log_weights - jax.scipy.special.logsumexp(log_weights)


def ess_of(log_weights: jax.Array) -> jax.Array:
    """Effective sample size :math:`1 / \\sum_s \\bar w_s^2` from log weights (eq. 11)."""
    return jnp.exp(smc_ess.log_ess(log_weights))


def zeros_like_shape(shape_tree: Any) -> Any:
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape_tree)


def maybe_advance(due, kernel: LazyKernel, rng_key, particles: dict, logdensity_fn, params, num_steps: int):
    """``advance`` under ``lax.cond(due, ...)``; zero infos (and unchanged particles) when not due."""

    def run(p):
        return advance(kernel, rng_key, p, logdensity_fn, params, num_steps)

    info_shape = jax.eval_shape(lambda p: run(p)[1], particles)
    return jax.lax.cond(due, run, lambda p: (p, zeros_like_shape(info_shape)), particles)


def validate_init_particles(model, init_particles, num_particles: int):
    if init_particles is None:
        return None
    init_particles = model.validate_state(init_particles, batch_ndim=1, argname="init_particles")
    size = jax.tree.leaves(init_particles)[0].shape[0]
    if size != num_particles:
        raise ValueError(f"`init_particles` has {size} particles but `num_particles` is {num_particles}")
    return init_particles


# ----------------------------------------------------------------------------------
# MCMC-MLE
# ----------------------------------------------------------------------------------
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


def mcmc_mle(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    num_mcmc_steps: int = 10,
    grad_threshold: float = 1e-3,
    max_inner_steps: int = 100,
    visible: Any = None,
    positive_phase: Any = "auto",
    negative_phase: str = "auto",
    init_particles: dict | None = None,
) -> Learner:
    """MCMC-MLE learner (Geyer & Thompson 1992; Asuncion et al. 2010, Algorithm 1).

    Parameters
    ----------
    model
        The :class:`~ugm_infer.EnergyModel` to fit.
    kernel
        MCMC kernel that samples the particles (same forms as :func:`~ugm_infer.learn.sap`;
        default block Gibbs).
    optimizer
        optax transformation for the inner updates; default ``optax.sgd(0.01)``.
    num_particles
        Number of particles ``S``.
    num_mcmc_steps
        Kernel steps run at :math:`\\theta_0` at the start of each round (the chains
        continue from their previous positions).
    grad_threshold
        A round ends when the L1 norm of the approximate gradient is below this.
    max_inner_steps
        ... or after this many inner updates.
    visible, positive_phase, negative_phase, init_particles
        As in :func:`~ugm_infer.learn.sap`.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` with state :class:`MCMCMLEState` and info
    :class:`MCMCMLEInfo`.  Each ``step`` is one inner update; when the previous step
    ended a round (``state.resample_due``), the step first re-anchors
    :math:`\\theta_0 = \\theta` and re-samples (a ``lax.cond``: no kernel cost inside
    a round).  Importance log weights are :math:`-(E(x_s;\\theta) - E(x_s;\\theta_0))`
    on the joint energies, normalised in log space.
    """
    check_model(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
    max_inner_steps = check_positive_int(max_inner_steps, "max_inner_steps")
    if isinstance(grad_threshold, bool) or not isinstance(grad_threshold, (int, float, np.integer, np.floating)):
        raise TypeError(f"`grad_threshold` must be a number >= 0, got {grad_threshold!r}")
    if not (np.isfinite(grad_threshold) and grad_threshold >= 0):
        raise ValueError(f"`grad_threshold` must be a finite number >= 0, got {grad_threshold!r}")
    grad_threshold = float(grad_threshold)
    visible = resolve_visible(model, visible)
    optimizer = resolve_optimizer(optimizer)
    positive = resolve_positive_phase(model, visible, positive_phase)
    negative = weighted_negative_phase(model, visible, negative_phase)
    kernel = LazyKernel(model, kernel)
    init_particles = validate_init_particles(model, init_particles, num_particles)

    def init(rng_key, params, data=None) -> MCMCMLEState:
        check_params(model, params)
        data = check_data(model, visible, data)
        key_particles, key_aux = jax.random.split(rng_key)
        kernel.get(params)
        particles = model.random_state(key_particles, num_particles) if init_particles is None else dict(init_particles)
        return MCMCMLEState(
            params,
            optimizer.init(params),
            particles,
            model.energies(params, particles),
            positive.init(key_aux, params, data),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32),
            jnp.ones((), bool),
        )

    def step(rng_key, state: MCMCMLEState, batch) -> tuple[MCMCMLEState, MCMCMLEInfo]:
        batch = check_batch(model, visible, batch)
        key_move, key_positive = jax.random.split(rng_key)
        params = state.params
        fixed = jax.lax.stop_gradient(params)
        due = state.resample_due
        particles, kernel_info = maybe_advance(
            due, kernel, key_move, state.particles, model.logdensity_fn(fixed), fixed, num_mcmc_steps
        )
        energies = model.energies(fixed, particles)
        anchor = jnp.where(due, energies, state.anchor_energies)
        log_w = normalize_log_weights(-(energies - anchor))
        weights = jnp.exp(log_w)
        positive_grad, aux_state = positive.update(key_positive, params, batch, state.aux_state)
        check_same_structure(params, positive_grad, "the positive phase's gradient")
        negative_grad = jax.grad(negative)(params, particles, weights)
        ascent = jax.tree.map(jnp.add, positive_grad, negative_grad)
        new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
        grad_l1 = sum(jnp.sum(jnp.abs(g)) for g in jax.tree.leaves(ascent))
        inner = jnp.where(due, 0, state.inner_step) + 1
        resample_due = (grad_l1 < grad_threshold) | (inner >= max_inner_steps)
        info = MCMCMLEInfo(global_norm(ascent), grad_l1, ess_of(log_w), due, kernel_info)
        new_state = MCMCMLEState(
            new_params,
            opt_state,
            particles,
            anchor,
            aux_state,
            state.step + 1,
            inner,
            state.round + due.astype(jnp.int32),
            resample_due,
        )
        return new_state, info

    return Learner(init, step, model, "mcmc_mle", visible)
