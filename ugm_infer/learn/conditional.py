"""Learners for conditional random fields: maximum conditional likelihood from (x, y) pairs.

For a :class:`~ugm_infer.models.crf.CRF` and training pairs :math:`(x_n, y_n)`,
:math:`n = 1..N`, the average conditional log-likelihood and its gradient are

.. math::  \\ell(\\theta) = \\frac1N \\sum_n \\big[-E(\\theta, x_n, y_n) - \\log Z(\\theta, x_n)\\big],
   \\qquad
   \\nabla \\ell = \\frac1N \\sum_n \\Big(-\\partial_\\theta E(\\theta, x_n, y_n)
   + \\mathbb E_{y \\sim p(\\cdot \\mid x_n, \\theta)}[\\partial_\\theta E(\\theta, x_n, y)]\\Big).

Every input has its own partition function, so the model term needs samples of
:math:`p(y \\mid x_n, \\theta)` **for every input**: these learners keep a particle
set ``{name: (N, M, *shape)}`` per training input (Asuncion et al. 2010, sec. 4.3) and
run the unconditional machinery of :mod:`ugm_infer.learn` on each set, vmapped over
inputs: the kernel moves (:func:`ugm_infer.learn.base.advance`), the weighted
negative phase (:func:`ugm_infer.learn.mcmc_mle.weighted_negative_phase`), log-space
weight normalisation and ESS (:func:`~ugm_infer.learn.mcmc_mle.normalize_log_weights`,
:func:`~ugm_infer.learn.mcmc_mle.ess_of`, i.e. BlackJAX's), BlackJAX resampling and
the optax update (:func:`~ugm_infer.learn.base.apply_ascent`).

* :func:`conditional_sap` / :func:`conditional_pcd` -- SAP / PCD with per-input
  persistent particles (Asuncion et al. 2010, Alg. 3: PF with unit weights);
* :func:`conditional_mcmc_mle` -- MCMC-MLE (Alg. 1) with per-input importance weights;
* :func:`conditional_pf_mcmc_mle` -- particle-filtered MCMC-MLE (Alg. 2): per-input
  weights (eq. 10), per-input ESS (eq. 11) and per-input resample + rejuvenate;
* :func:`conditional_exact_ml` -- exact gradient by enumeration (tiny label spaces).

Data: ``data = {"x": inputs (N, ...), <label name>: (N, *shape), ...}``.  ``init``
needs the training data (it creates the particle sets); ``step`` takes the whole
training set (``N`` pairs in the same order).  :func:`conditional_sap` also accepts a
minibatch carrying ``"index"`` (the ``(B,)`` positions of its pairs in the training
set), whose particle sets alone are moved.

Per-input importance weights are normalised within each input's set (estimating each
:math:`\\log Z(\\theta, x_n)` separately), which keeps the effective sample size from
collapsing as it would for weights on the product space of all inputs.

References
----------
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE
with connections to contrastive divergence. ICML (Algorithms 1-3, eqs. 10, 11, 14;
sec. 4.3, CRFs).
Lafferty, J., McCallum, A. and Pereira, F. (2001). Conditional random fields. ICML.
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
    check_float_leaves,
    check_positive_int,
    global_norm,
    resolve_optimizer,
)
from ugm_infer.learn.mcmc_mle import (
    check_fraction,
    check_positive_float,
    ess_of,
    normalize_log_weights,
    weighted_negative_phase,
    zeros_like_shape,
)
from ugm_infer.learn.pf_mcmc_mle import resolve_resampling

__all__ = [
    "ConditionalSAPState",
    "ConditionalSAPInfo",
    "ConditionalMCMCMLEState",
    "ConditionalMCMCMLEInfo",
    "ConditionalPFState",
    "ConditionalPFInfo",
    "ConditionalExactMLState",
    "ConditionalExactMLInfo",
    "conditional_sap",
    "conditional_pcd",
    "conditional_mcmc_mle",
    "conditional_pf_mcmc_mle",
    "conditional_exact_ml",
    "exact_conditional_log_likelihood",
]


# ----------------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------------
def _check_crf(model) -> None:
    from ugm_infer.models.crf import CRF

    if not isinstance(model, CRF):
        raise TypeError(f"`model` must be a CRF (ui.models.crf / grid_crf / multilabel_crf), got {type(model).__name__}")


def _check_theta(model, theta) -> None:
    check_float_leaves(theta)
    model.validate_theta(theta, argname="params")


def _positive_grad(model, theta, x, labels):
    """Data term :math:`\\frac1N\\sum_n -\\partial_\\theta E(\\theta, x_n, y_n)`."""
    return jax.grad(lambda th: -jnp.mean(model.pair_energies(th, x, labels)))(theta)


def _conditioned_logdensity(model, theta, x):
    return model.logdensity_fn(model.condition(jax.lax.stop_gradient(theta), x))


def _move(kernel: LazyKernel, model, rng_key, particles, theta, x, num_steps: int):
    """Advance every input's particle set at :math:`p(y \\mid x_n, \\theta)` (``advance`` vmapped over inputs)."""
    fixed = jax.lax.stop_gradient(theta)

    def one(key, parts, xi):
        cp = model.condition(fixed, xi)
        return advance(kernel, key, parts, model.logdensity_fn(cp), cp, num_steps)

    n = model.num_inputs(x)
    return jax.vmap(one)(jax.random.split(rng_key, n), particles, x)


def _weighted_negative(model, negative, theta, x, particles, weights):
    """:math:`\\frac1N\\sum_n \\sum_m w_{nm} E(\\theta, x_n, y_{nm})` (the unconditional weighted phase, vmapped)."""
    vals = jax.vmap(lambda xi, p, w: negative(model.condition(theta, xi), p, w))(x, particles, weights)
    return jnp.mean(vals)


def _init_particles(model, rng_key, n: int, m: int):
    keys = jax.random.split(rng_key, n)
    return jax.vmap(lambda k: model.random_state(k, m))(keys)


def _first_input(x):
    return jax.tree.map(lambda a: a[0], x)


def _check_full(model, x, num_inputs: int, learner: str):
    n = model.num_inputs(x)
    if n != num_inputs:
        raise ValueError(
            f"`batch` has {n} pairs but {learner} was initialised with {num_inputs} training inputs: pass the whole "
            "training set (in the order given to init)"
            + (", or a minibatch with its 'index'" if learner == "conditional_sap" else "")
        )


# ----------------------------------------------------------------------------------
# SAP / PCD (Asuncion et al. 2010, Alg. 3)
# ----------------------------------------------------------------------------------
class ConditionalSAPState(NamedTuple):
    """State of :func:`conditional_sap`.

    params, opt_state
        Current :math:`\\theta` and the optax state.
    particles
        Persistent particle sets ``{name: (N, M, *shape)}``, one per training input.
    step
        Number of updates done (int32).
    """

    params: Any
    opt_state: Any
    particles: dict
    step: jax.Array


class ConditionalSAPInfo(NamedTuple):
    """Diagnostics: ``grad_norm``; ``particle_energy`` (mean over moved sets); per-set kernel infos."""

    grad_norm: jax.Array
    particle_energy: jax.Array
    kernel_info: Any


def conditional_sap(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 10,
    *,
    num_steps_per_update: int = 1,
    name: str = "conditional_sap",
) -> Learner:
    """SAP / PCD for a CRF with one persistent particle set per training input.

    At every update each input's ``M`` particles move by ``num_steps_per_update``
    kernel steps targeting :math:`p(y \\mid x_n, \\theta_t)` (the kernel of
    :func:`ugm_infer.learn.sap`, any of its forms, vmapped over inputs), then

    .. math::  \\theta_{t+1} = \\theta_t + \\alpha_t \\frac1B \\sum_{n \\in \\text{batch}}
       \\Big(-\\partial_\\theta E(x_n, y_n) + \\frac1M \\sum_m \\partial_\\theta E(x_n, y_{nm})\\Big).

    This is Asuncion et al. (2010) Algorithm 3 (PF with unit weights) for CRFs, and
    Younes' (1988) stochastic approximation.  ``init(rng_key, params, data)`` needs the
    training data; ``step(rng_key, state, batch)`` takes all pairs, or a minibatch
    with ``batch["index"]`` (positions in the training set) whose sets alone move.
    """
    _check_crf(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    num_steps_per_update = check_positive_int(num_steps_per_update, "num_steps_per_update")
    optimizer = resolve_optimizer(optimizer)
    kernel = LazyKernel(model, kernel)
    visible = tuple(model.variables)
    store: dict[str, int] = {}

    def init(rng_key, params, data=None) -> ConditionalSAPState:
        if data is None:
            raise ValueError("`data` is required: conditional learners keep one particle set per training input")
        _check_theta(model, params)
        x, _ = model.validate_data(data)
        store["num_inputs"] = model.num_inputs(x)
        kernel.get(model.condition(params, _first_input(x)))
        particles = _init_particles(model, rng_key, store["num_inputs"], num_particles)
        return ConditionalSAPState(params, optimizer.init(params), particles, jnp.zeros((), jnp.int32))

    def step(rng_key, state: ConditionalSAPState, batch) -> tuple[ConditionalSAPState, ConditionalSAPInfo]:
        x, labels = model.validate_data(batch, argname="batch")
        theta = state.params
        index = batch.get("index") if hasattr(batch, "get") else None
        if index is None:
            if "num_inputs" in store:
                _check_full(model, x, store["num_inputs"], "conditional_sap")
            parts = state.particles
        else:
            index = jnp.asarray(index, jnp.int32)
            if index.shape != (model.num_inputs(x),):
                raise ValueError(f"`batch['index']` must have shape ({model.num_inputs(x)},), got {index.shape}")
            parts = jax.tree.map(lambda p: p[index], state.particles)
        parts, kernel_info = _move(kernel, model, rng_key, parts, theta, x, num_steps_per_update)
        positive = _positive_grad(model, theta, x, labels)
        energy, negative = jax.value_and_grad(lambda th: jnp.mean(model.particle_energies(th, x, parts)))(theta)
        ascent = jax.tree.map(jnp.add, positive, negative)
        new_theta, opt_state = apply_ascent(optimizer, ascent, state.opt_state, theta)
        if index is None:
            particles = parts
        else:
            particles = jax.tree.map(lambda full, p: full.at[index].set(p), state.particles, parts)
        info = ConditionalSAPInfo(global_norm(ascent), energy, kernel_info)
        return ConditionalSAPState(new_theta, opt_state, particles, state.step + 1), info

    return Learner(init, step, model, name, visible)


def conditional_pcd(
    model, optimizer: Any = None, num_particles: int = 10, *, scan: str = "block", num_sweeps: int = 1
) -> Learner:
    """PCD-k for a CRF: :func:`conditional_sap` with ``num_sweeps`` Gibbs sweeps (``scan`` order) per update."""
    from ugm_infer.kernels import gibbs

    _check_crf(model)
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    if scan not in ("block", "systematic", "random"):
        raise ValueError(f"`scan` must be 'block', 'systematic' or 'random', got {scan!r}")

    class _Gibbs:
        init = staticmethod(gibbs.init)

        @staticmethod
        def build_kernel(model, params=None):
            return gibbs.build_kernel(model, scan, num_sweeps, params=params)

    return conditional_sap(model, _Gibbs, optimizer, num_particles, name="conditional_pcd")


# ----------------------------------------------------------------------------------
# MCMC-MLE (Alg. 1) with per-input weights
# ----------------------------------------------------------------------------------
class ConditionalMCMCMLEState(NamedTuple):
    """State of :func:`conditional_mcmc_mle` (per-input version of :class:`~ugm_infer.learn.MCMCMLEState`).

    particles
        ``{name: (N, M, *shape)}`` drawn at the anchor :math:`\\theta_0`.
    anchor_energies
        ``(N, M)`` energies :math:`E(\\theta_0, x_n, y_{nm})`.
    step, inner_step, round, resample_due
        As in :func:`ugm_infer.learn.mcmc_mle`.
    """

    params: Any
    opt_state: Any
    particles: dict
    anchor_energies: jax.Array
    step: jax.Array
    inner_step: jax.Array
    round: jax.Array
    resample_due: jax.Array


class ConditionalMCMCMLEInfo(NamedTuple):
    """Diagnostics: ``grad_norm``, ``grad_l1``, ``min_ess`` (smallest per-input ESS), ``resampled``, ``kernel_info``."""

    grad_norm: jax.Array
    grad_l1: jax.Array
    min_ess: jax.Array
    resampled: jax.Array
    kernel_info: Any


def conditional_mcmc_mle(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 10,
    *,
    num_mcmc_steps: int = 10,
    grad_threshold: float = 1e-3,
    max_inner_steps: int = 100,
    negative_phase: str = "auto",
) -> Learner:
    """MCMC-MLE (Geyer & Thompson 1992; Asuncion et al. 2010, Alg. 1) for a CRF.

    Each round samples every input's particle set by ``num_mcmc_steps`` kernel steps
    at the anchor :math:`\\theta_0` (the chains continue from where they are), then
    ascends the importance-sampled conditional likelihood with per-input
    self-normalised weights :math:`\\log w_{nm} = -(E(\\theta, x_n, y_{nm}) -
    E(\\theta_0, x_n, y_{nm}))` (normalised within input ``n``).  A round ends when the
    L1 norm of the approximate gradient is below ``grad_threshold`` or after
    ``max_inner_steps`` updates, as in :func:`ugm_infer.learn.mcmc_mle` (same state
    machine, per-input weights).  ``step`` takes all training pairs.
    """
    _check_crf(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
    max_inner_steps = check_positive_int(max_inner_steps, "max_inner_steps")
    if isinstance(grad_threshold, bool) or not isinstance(grad_threshold, (int, float, np.integer, np.floating)):
        raise TypeError(f"`grad_threshold` must be a number >= 0, got {grad_threshold!r}")
    if not (np.isfinite(grad_threshold) and grad_threshold >= 0):
        raise ValueError(f"`grad_threshold` must be a finite number >= 0, got {grad_threshold!r}")
    grad_threshold = float(grad_threshold)
    optimizer = resolve_optimizer(optimizer)
    kernel = LazyKernel(model, kernel)
    visible = tuple(model.variables)
    negative = weighted_negative_phase(model, visible, negative_phase)
    store: dict[str, int] = {}

    def init(rng_key, params, data=None) -> ConditionalMCMCMLEState:
        if data is None:
            raise ValueError("`data` is required: conditional learners keep one particle set per training input")
        _check_theta(model, params)
        x, _ = model.validate_data(data)
        n = store["num_inputs"] = model.num_inputs(x)
        kernel.get(model.condition(params, _first_input(x)))
        particles = _init_particles(model, rng_key, n, num_particles)
        zero = jnp.zeros((), jnp.int32)
        return ConditionalMCMCMLEState(
            params,
            optimizer.init(params),
            particles,
            model.particle_energies(params, x, particles),
            zero,
            zero,
            zero,
            jnp.ones((), bool),
        )

    def step(rng_key, state: ConditionalMCMCMLEState, batch):
        x, labels = model.validate_data(batch, argname="batch")
        if "num_inputs" in store:
            _check_full(model, x, store["num_inputs"], "conditional_mcmc_mle")
        theta = state.params
        fixed = jax.lax.stop_gradient(theta)
        due = state.resample_due

        def run(p):
            return _move(kernel, model, rng_key, p, fixed, x, num_mcmc_steps)

        info_shape = jax.eval_shape(lambda p: run(p)[1], state.particles)
        particles, kernel_info = jax.lax.cond(due, run, lambda p: (p, zeros_like_shape(info_shape)), state.particles)
        energies = model.particle_energies(fixed, x, particles)
        anchor = jnp.where(due, energies, state.anchor_energies)
        log_w = jax.vmap(normalize_log_weights)(-(energies - anchor))
        positive = _positive_grad(model, theta, x, labels)
        negative_grad = jax.grad(lambda th: _weighted_negative(model, negative, th, x, particles, jnp.exp(log_w)))(theta)
        ascent = jax.tree.map(jnp.add, positive, negative_grad)
        new_theta, opt_state = apply_ascent(optimizer, ascent, state.opt_state, theta)
        grad_l1 = sum(jnp.sum(jnp.abs(g)) for g in jax.tree.leaves(ascent))
        inner = jnp.where(due, 0, state.inner_step) + 1
        resample_due = (grad_l1 < grad_threshold) | (inner >= max_inner_steps)
        min_ess = jnp.min(jax.vmap(ess_of)(log_w))
        info = ConditionalMCMCMLEInfo(global_norm(ascent), grad_l1, min_ess, due, kernel_info)
        new_state = ConditionalMCMCMLEState(
            new_theta, opt_state, particles, anchor, state.step + 1, inner, state.round + due.astype(jnp.int32), resample_due
        )
        return new_state, info

    return Learner(init, step, model, "conditional_mcmc_mle", visible)


# ----------------------------------------------------------------------------------
# particle-filtered MCMC-MLE (Alg. 2) with per-input weights, ESS and resampling
# ----------------------------------------------------------------------------------
class ConditionalPFState(NamedTuple):
    """State of :func:`conditional_pf_mcmc_mle`.

    particles
        ``{name: (N, M, *shape)}``.
    log_weights
        ``(N, M)`` log weights, normalised within each input.
    num_resampled
        ``(N,)`` resample-and-rejuvenate events per input (int32).
    """

    params: Any
    opt_state: Any
    particles: dict
    log_weights: jax.Array
    step: jax.Array
    num_resampled: jax.Array


class ConditionalPFInfo(NamedTuple):
    """Diagnostics: ``grad_norm``; ``ess`` ``(N,)`` tested this update; ``resampled`` ``(N,)`` bool; ``kernel_info``."""

    grad_norm: jax.Array
    ess: jax.Array
    resampled: jax.Array
    kernel_info: Any


def conditional_pf_mcmc_mle(
    model,
    kernel: Any = None,
    optimizer: Any = None,
    num_particles: int = 10,
    *,
    ess_threshold: float = 0.5,
    num_rejuvenation_steps: int = 1,
    num_burnin_steps: int | None = None,
    weight_temperature: float = 1.0,
    resampling: Any = "systematic",
    negative_phase: str = "auto",
    rejuvenation_chunk: int | None = None,
) -> Learner:
    """Particle-filtered MCMC-MLE (Asuncion et al. 2010, Alg. 2) for a CRF, one filter per input.

    Each input's particle set is a particle filter following
    :math:`p(y \\mid x_n, \\theta_t)`: after every update its log weights grow by
    :math:`-(E(\\theta_{t+1}, x_n, y) - E(\\theta_t, x_n, y)) / T` (eqs. 10, 14),
    normalised within the input; before an update, every input whose ESS (eq. 11) is
    below ``ess_threshold * M`` is resampled (BlackJAX resampling) and rejuvenated by
    ``num_rejuvenation_steps`` kernel steps at :math:`\\theta_t`; the others keep
    their particles and weights.  The kernel runs only on the inputs that are due:
    they are gathered in chunks of ``rejuvenation_chunk`` inputs (default
    ``ceil(N / 8)``) processed by a ``lax.while_loop``, so an update costs kernel
    time in proportion to the number of due inputs (rounded up to whole chunks), and
    nothing when none is due.  ``init`` moves the uniform initial particles by
    ``num_burnin_steps`` kernel steps at :math:`\\theta_0` (Alg. 2, line 1; default
    ``num_rejuvenation_steps``).  ``step`` takes all training pairs.
    """
    _check_crf(model)
    num_particles = check_positive_int(num_particles, "num_particles")
    ess_threshold = check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False)
    num_rejuvenation_steps = check_positive_int(num_rejuvenation_steps, "num_rejuvenation_steps")
    num_burnin_steps = (
        num_rejuvenation_steps if num_burnin_steps is None else check_positive_int(num_burnin_steps, "num_burnin_steps")
    )
    weight_temperature = check_positive_float(weight_temperature, "weight_temperature")
    if rejuvenation_chunk is not None:
        rejuvenation_chunk = check_positive_int(rejuvenation_chunk, "rejuvenation_chunk")
    resample_fn = resolve_resampling(resampling)
    optimizer = resolve_optimizer(optimizer)
    kernel = LazyKernel(model, kernel)
    visible = tuple(model.variables)
    negative = weighted_negative_phase(model, visible, negative_phase)
    log_uniform = -jnp.log(jnp.float32(num_particles))
    store: dict[str, int] = {}

    def init(rng_key, params, data=None) -> ConditionalPFState:
        if data is None:
            raise ValueError("`data` is required: conditional learners keep one particle set per training input")
        _check_theta(model, params)
        x, _ = model.validate_data(data)
        n = store["num_inputs"] = model.num_inputs(x)
        kernel.get(model.condition(params, _first_input(x)))
        key_init, key_burn = jax.random.split(rng_key)
        particles = _init_particles(model, key_init, n, num_particles)
        particles, _ = _move(kernel, model, key_burn, particles, params, x, num_burnin_steps)
        log_w = jnp.full((n, num_particles), log_uniform)
        return ConditionalPFState(
            params, optimizer.init(params), particles, log_w, jnp.zeros((), jnp.int32), jnp.zeros((n,), jnp.int32)
        )

    def step(rng_key, state: ConditionalPFState, batch):
        x, labels = model.validate_data(batch, argname="batch")
        if "num_inputs" in store:
            _check_full(model, x, store["num_inputs"], "conditional_pf_mcmc_mle")
        theta = state.params
        fixed = jax.lax.stop_gradient(theta)
        n = model.num_inputs(x)
        key_move, key_resample = jax.random.split(rng_key)
        ess = jax.vmap(ess_of)(state.log_weights)
        due = ess < ess_threshold * num_particles

        chunk = min(n, rejuvenation_chunk or -(-n // 8))
        num_slots = -(-n // chunk) * chunk
        # due inputs first (stable), padded to whole chunks; slots past num_due are ignored
        order = jnp.concatenate([jnp.argsort(~due, stable=True), jnp.zeros((num_slots - n,), jnp.int32)])
        num_due = jnp.sum(due.astype(jnp.int32))
        info_shape = jax.eval_shape(
            lambda p: _move(kernel, model, key_move, p, fixed, x, num_rejuvenation_steps)[1], state.particles
        )

        def rejuvenate_chunk(c, carry):
            particles, log_w, infos = carry
            slot = c * chunk + jnp.arange(chunk)
            idx = jax.lax.dynamic_slice(order, (c * chunk,), (chunk,))
            target = jnp.where(slot < num_due, idx, n)  # n: out of range, the write is dropped
            sub = jax.tree.map(lambda p: p[idx], particles)
            sub_x = jax.tree.map(lambda a: a[idx], x)
            key_c = jax.random.fold_in(key_resample, c)
            ridx = jax.vmap(lambda k, lw: resample_fn(k, jnp.exp(lw), num_particles))(
                jax.random.split(key_c, chunk), log_w[idx]
            )
            sub = jax.tree.map(lambda p: jax.vmap(lambda a, i: a[i])(p, ridx), sub)
            moved, info = _move(kernel, model, jax.random.fold_in(key_move, c), sub, fixed, sub_x, num_rejuvenation_steps)
            particles = jax.tree.map(lambda full, m: full.at[target].set(m, mode="drop"), particles, moved)
            infos = jax.tree.map(lambda full, i: full.at[target].set(i.astype(full.dtype), mode="drop"), infos, info)
            log_w = log_w.at[target].set(log_uniform, mode="drop")
            return particles, log_w, infos

        num_chunks = (num_due + chunk - 1) // chunk
        particles, log_w, kernel_info = jax.lax.fori_loop(
            0,
            num_chunks,
            rejuvenate_chunk,
            (state.particles, state.log_weights, zeros_like_shape(info_shape)),
        )
        positive = _positive_grad(model, theta, x, labels)
        negative_grad = jax.grad(lambda th: _weighted_negative(model, negative, th, x, particles, jnp.exp(log_w)))(theta)
        ascent = jax.tree.map(jnp.add, positive, negative_grad)
        new_theta, opt_state = apply_ascent(optimizer, ascent, state.opt_state, theta)
        # eqs. 10 / 14: reweight every input's set along theta_t -> theta_{t+1}
        delta = model.particle_energies(jax.lax.stop_gradient(new_theta), x, particles) - model.particle_energies(
            fixed, x, particles
        )
        log_w = jax.vmap(normalize_log_weights)(log_w - delta / weight_temperature)
        info = ConditionalPFInfo(global_norm(ascent), ess, due, kernel_info)
        new_state = ConditionalPFState(
            new_theta, opt_state, particles, log_w, state.step + 1, state.num_resampled + due.astype(jnp.int32)
        )
        return new_state, info

    return Learner(init, step, model, "conditional_pf_mcmc_mle", visible)


# ----------------------------------------------------------------------------------
# exact conditional maximum likelihood (enumeration)
# ----------------------------------------------------------------------------------
class ConditionalExactMLState(NamedTuple):
    """State of :func:`conditional_exact_ml`: ``params``, ``opt_state``, ``step``."""

    params: Any
    opt_state: Any
    step: jax.Array


class ConditionalExactMLInfo(NamedTuple):
    """Diagnostics: ``grad_norm`` and the exact average conditional log-likelihood before the update."""

    grad_norm: jax.Array
    log_likelihood: jax.Array


def _exact_cll(model, theta, x, labels):
    from ugm_infer import exact

    log_z = jax.vmap(lambda xi: exact.log_partition(model, model.condition(theta, xi)))(x)
    return -jnp.mean(model.pair_energies(theta, x, labels)) - jnp.mean(log_z)


def exact_conditional_log_likelihood(model, params: Any, data: dict) -> jax.Array:
    """Exact average conditional log-likelihood :math:`\\frac1N\\sum_n \\log p(y_n \\mid x_n, \\theta)` by enumeration.

    ``data = {"x": (N, ...), <label name>: (N, *shape)}``.  Traceable and
    differentiable in ``params`` (``jax.grad`` gives the exact CML gradient).
    """
    _check_crf(model)
    x, labels = model.validate_data(data)
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(params)):
        model.validate_theta(params, argname="params")
        from ugm_infer import exact

        exact.log_partition(model, model.condition(params, _first_input(x)))  # size check / structure, host side
    return _exact_cll(model, params, x, labels)


def conditional_exact_ml(model, optimizer: Any = None) -> Learner:
    """Exact conditional maximum likelihood: the gradient of :func:`exact_conditional_log_likelihood`.

    :math:`\\log Z(\\theta, x_n)` by enumeration (:func:`ugm_infer.exact.log_partition`,
    vmapped over inputs) -- the baseline for small label spaces (e.g. ``L <= 16``
    labels).  ``step`` takes any batch of pairs (no per-input state).
    """
    _check_crf(model)
    optimizer = resolve_optimizer(optimizer)

    def init(rng_key, params, data=None) -> ConditionalExactMLState:
        del rng_key
        _check_theta(model, params)
        if data is not None:
            exact_conditional_log_likelihood(model, params, data)
        return ConditionalExactMLState(params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def step(rng_key, state: ConditionalExactMLState, batch):
        del rng_key
        x, labels = model.validate_data(batch, argname="batch")
        ll, ascent = jax.value_and_grad(lambda th: _exact_cll(model, th, x, labels))(state.params)
        new_theta, opt_state = apply_ascent(optimizer, ascent, state.opt_state, state.params)
        return ConditionalExactMLState(new_theta, opt_state, state.step + 1), ConditionalExactMLInfo(global_norm(ascent), ll)

    return Learner(init, step, model, "conditional_exact_ml", tuple(model.variables))
