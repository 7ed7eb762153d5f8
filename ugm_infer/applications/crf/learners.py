"""Learners for conditional random fields: maximum conditional likelihood from (x, y) pairs.

For a :class:`~ugm_infer.models.crf.CRF` and training pairs :math:`(x_n, y_n)`,
:math:`n = 1..N`, the average conditional log-likelihood and its gradient are

.. math::  \\ell(\\theta) = \\frac1N \\sum_n \\big[-E(\\theta, x_n, y_n) - \\log Z(\\theta, x_n)\\big],
   \\qquad
   \\nabla \\ell = \\frac1N \\sum_n \\Big(-\\partial_\\theta E(\\theta, x_n, y_n)
   + \\mathbb E_{y \\sim p(\\cdot \\mid x_n, \\theta)}[\\partial_\\theta E(\\theta, x_n, y)]\\Big).

Every input has its own partition function, so the model term needs samples of
:math:`p(y \\mid x_n, \\theta)` **for every input**: these learners keep a particle
set ``{name: (N, M, *shape)}`` per training input (Asuncion et al. 2010, sec. 4.3).
They are built with the learner skeleton of :mod:`ugm_infer.learn.skeleton` (their own
input checks and data term, the shared optax step) and run the unconditional
machinery on each set, vmapped over inputs: the kernel moves
(:func:`ugm_infer.learn.particles.advance`), the weighted negative phase
(:func:`ugm_infer.learn.phases.weighted_negative_phase`), log-space weights, ESS and
resampling (:mod:`ugm_infer.learn.particles`, i.e. BlackJAX's), and the round logic
of MCMC-MLE (:func:`ugm_infer.learn.mcmc_mle.end_of_round`).

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

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer import exact
from ugm_infer.learn.base import (
    Learner,
    check_float_leaves,
    check_fraction,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    global_norm,
    is_concrete,
)
from ugm_infer.learn.mcmc_mle import end_of_round, importance_log_weights
from ugm_infer.learn.particles import (
    LazyKernel,
    advance,
    ess_of,
    gibbs_builder,
    resample,
    resolve_resampling,
    reweight,
    run_if,
    uniform_log_weights,
)
from ugm_infer.learn.phases import PositivePhase, weighted_negative_phase
from ugm_infer.learn.skeleton import Inputs, ObjectiveState, ascend, build, initial_step, objective_learner, setup

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

_NEEDS_DATA = "`data` is required: conditional learners keep one particle set per training input"


# ----------------------------------------------------------------------------------
# what the CRF learners share: inputs, data term, per-input particle sets
# ----------------------------------------------------------------------------------
class Batch(NamedTuple):
    """A checked batch of pairs: inputs ``x``, ``labels`` and (minibatches of
    :func:`conditional_sap`) the ``index`` of its pairs in the training set."""

    x: Any
    labels: dict
    index: jax.Array | None = None


def _check_crf(model) -> None:
    from ugm_infer.models.crf import CRF

    if not isinstance(model, CRF):
        raise TypeError(f"`model` must be a CRF (ui.models.crf / grid_crf / multilabel_crf), got {type(model).__name__}")


def _first_input(x):
    return jax.tree.map(lambda a: a[0], x)


def _crf_inputs(model, learner: str, *, whole: bool, minibatch_index: bool = False) -> Inputs:
    """Inputs of a CRF learner: data ``{"x": inputs, <label name>: labels}`` split into :class:`Batch`.

    ``whole``: ``step`` must get the whole training set given to ``init`` (per-input
    state), unless ``minibatch_index`` lets a minibatch name its pairs by ``"index"``.
    """
    seen: dict[str, int] = {}

    def check_params(theta):
        check_float_leaves(theta)
        model.validate_theta(theta, argname="params")

    def check_data(data):
        if data is None:
            return None
        x, labels = model.validate_data(data)
        seen["num_inputs"] = model.num_inputs(x)
        return Batch(x, labels)

    def check_batch(batch):
        x, labels = model.validate_data(batch, argname="batch")
        index = batch.get("index") if minibatch_index and hasattr(batch, "get") else None
        if index is not None:
            index = jnp.asarray(index, jnp.int32)
            if index.shape != (model.num_inputs(x),):
                raise ValueError(f"`batch['index']` must have shape ({model.num_inputs(x)},), got {index.shape}")
        elif whole and "num_inputs" in seen and model.num_inputs(x) != seen["num_inputs"]:
            raise ValueError(
                f"`batch` has {model.num_inputs(x)} pairs but {learner} was initialised with {seen['num_inputs']} "
                "training inputs: pass the whole training set (in the order given to init)"
                + (", or a minibatch with its 'index'" if minibatch_index else "")
            )
        return Batch(x, labels, index)

    def kernel_params(theta, data):
        return model.condition(theta, _first_input(data.x))

    return Inputs(check_params, check_data, check_batch, kernel_params)


def _crf_setup(model, optimizer, learner: str, *, kernel: Any = None, num_particles=None, whole=True, index=False):
    """:func:`~ugm_infer.learn.skeleton.setup` for a CRF: its inputs and the data term of the pairs."""
    _check_crf(model)

    def positive(rng_key, theta, batch: Batch, aux_state):
        """Data term :math:`\\frac1N\\sum_n -\\partial_\\theta E(\\theta, x_n, y_n)`."""
        del rng_key
        return jax.grad(lambda th: -jnp.mean(model.pair_energies(th, batch.x, batch.labels)))(theta), aux_state

    return setup(
        model,
        optimizer,
        visible=tuple(model.variables),
        positive_phase=PositivePhase(lambda key, theta, data: (), positive, "pairs"),
        kernel=kernel,
        num_particles=num_particles,
        inputs=_crf_inputs(model, learner, whole=whole, minibatch_index=index),
    )


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
    """Diagnostics: ``grad_norm``; ``particle_energy`` (mean over moved sets); ``kernel_info`` per set."""

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
    s = _crf_setup(model, optimizer, "conditional_sap", kernel=kernel, num_particles=num_particles, index=True)
    num_steps = check_positive_int(num_steps_per_update, "num_steps_per_update")

    def init(rng_key, params, data: Batch) -> ConditionalSAPState:
        particles = _init_particles(model, rng_key, model.num_inputs(data.x), s.num_particles)
        return ConditionalSAPState(params, s.optimizer.init(params), particles, initial_step())

    def step(rng_key, state: ConditionalSAPState, batch: Batch) -> tuple[ConditionalSAPState, ConditionalSAPInfo]:
        theta = state.params
        sets = state.particles if batch.index is None else jax.tree.map(lambda p: p[batch.index], state.particles)
        # 1. every set moves at p(y | x_n, theta_t)
        sets, kernel_info = _move(s.kernel, model, rng_key, sets, theta, batch.x, num_steps)
        # 2. theta_{t+1} = theta_t + alpha_t (data term - model term at the moved sets)
        energy, negative_grad = jax.value_and_grad(lambda th: jnp.mean(model.particle_energies(th, batch.x, sets)))(theta)
        new = ascend(s, rng_key, theta, state.opt_state, (), batch, negative_grad)
        if batch.index is None:
            particles = sets
        else:
            particles = jax.tree.map(lambda full, p: full.at[batch.index].set(p), state.particles, sets)
        info = ConditionalSAPInfo(global_norm(new.direction), energy, kernel_info)
        return ConditionalSAPState(new.params, new.opt_state, particles, state.step + 1), info

    return build(s, name, init, step, requires_data=_NEEDS_DATA)


def conditional_pcd(
    model, optimizer: Any = None, num_particles: int = 10, *, scan: str = "block", num_sweeps: int = 1
) -> Learner:
    """PCD-k for a CRF: :func:`conditional_sap` with ``num_sweeps`` Gibbs sweeps (``scan`` order) per update."""
    _check_crf(model)
    return conditional_sap(model, gibbs_builder(model, scan, num_sweeps), optimizer, num_particles, name="conditional_pcd")


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
    s = _crf_setup(model, optimizer, "conditional_mcmc_mle", kernel=kernel, num_particles=num_particles)
    num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
    max_inner_steps = check_positive_int(max_inner_steps, "max_inner_steps")
    grad_threshold = check_nonnegative_float(grad_threshold, "grad_threshold")
    negative = weighted_negative_phase(model, s.visible, negative_phase)

    def init(rng_key, params, data: Batch) -> ConditionalMCMCMLEState:
        particles = _init_particles(model, rng_key, model.num_inputs(data.x), s.num_particles)
        anchor_energies = model.particle_energies(params, data.x, particles)
        zero = initial_step()
        return ConditionalMCMCMLEState(
            params, s.optimizer.init(params), particles, anchor_energies, zero, zero, zero, jnp.ones((), bool)
        )

    def step(rng_key, state: ConditionalMCMCMLEState, batch: Batch):
        theta = state.params
        fixed = jax.lax.stop_gradient(theta)
        due = state.resample_due
        # a new round: theta_0 = theta, every set re-sampled at theta_0
        particles, kernel_info = run_if(
            due, lambda p: _move(s.kernel, model, rng_key, p, fixed, batch.x, num_mcmc_steps), state.particles
        )
        energies = model.particle_energies(fixed, batch.x, particles)
        anchor, log_w = jax.vmap(importance_log_weights, in_axes=(None, 0, 0))(due, energies, state.anchor_energies)
        weights = jnp.exp(log_w)
        negative_grad = jax.grad(lambda th: _weighted_negative(model, negative, th, batch.x, particles, weights))(theta)
        new = ascend(s, rng_key, theta, state.opt_state, (), batch, negative_grad)
        round_ = end_of_round(due, new.direction, state.inner_step, grad_threshold, max_inner_steps)
        min_ess = jnp.min(jax.vmap(ess_of)(log_w))
        info = ConditionalMCMCMLEInfo(global_norm(new.direction), round_.grad_l1, min_ess, due, kernel_info)
        new_state = ConditionalMCMCMLEState(
            new.params,
            new.opt_state,
            particles,
            anchor,
            state.step + 1,
            round_.inner_step,
            state.round + due.astype(jnp.int32),
            round_.resample_due,
        )
        return new_state, info

    return build(s, "conditional_mcmc_mle", init, step, requires_data=_NEEDS_DATA)


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
    s = _crf_setup(model, optimizer, "conditional_pf_mcmc_mle", kernel=kernel, num_particles=num_particles)
    ess_threshold = check_fraction(ess_threshold, "ess_threshold", 0.0, 1.0, True, False)
    num_rejuvenation_steps = check_positive_int(num_rejuvenation_steps, "num_rejuvenation_steps")
    num_burnin_steps = (
        num_rejuvenation_steps if num_burnin_steps is None else check_positive_int(num_burnin_steps, "num_burnin_steps")
    )
    weight_temperature = check_positive_float(weight_temperature, "weight_temperature")
    if rejuvenation_chunk is not None:
        rejuvenation_chunk = check_positive_int(rejuvenation_chunk, "rejuvenation_chunk")
    resample_fn = resolve_resampling(resampling)
    negative = weighted_negative_phase(model, s.visible, negative_phase)
    num_particles = s.num_particles

    def init(rng_key, params, data: Batch) -> ConditionalPFState:
        n = model.num_inputs(data.x)
        key_init, key_burn = jax.random.split(rng_key)
        particles = _init_particles(model, key_init, n, num_particles)
        # Alg. 2 line 1: every set starts as MCMC draws from p(y | x_n, theta_0)
        particles, _ = _move(s.kernel, model, key_burn, particles, params, data.x, num_burnin_steps)
        log_w = uniform_log_weights(num_particles, (n,))
        return ConditionalPFState(
            params, s.optimizer.init(params), particles, log_w, initial_step(), jnp.zeros((n,), jnp.int32)
        )

    rejuvenate = functools.partial(_rejuvenate_due_inputs, s, resample_fn, rejuvenation_chunk, num_rejuvenation_steps)

    def step(rng_key, state: ConditionalPFState, batch: Batch):
        theta = state.params
        fixed = jax.lax.stop_gradient(theta)
        ess = jax.vmap(ess_of)(state.log_weights)
        due = ess < ess_threshold * num_particles
        keys = jax.random.split(rng_key)
        particles, log_w, kernel_info = rejuvenate(keys, state.particles, state.log_weights, due, fixed, batch.x)
        weights = jnp.exp(log_w)
        negative_grad = jax.grad(lambda th: _weighted_negative(model, negative, th, batch.x, particles, weights))(theta)
        new = ascend(s, rng_key, theta, state.opt_state, (), batch, negative_grad)
        # eqs. 10 / 14: reweight every input's set along theta_t -> theta_{t+1}
        energies_new = model.particle_energies(jax.lax.stop_gradient(new.params), batch.x, particles)
        energies_old = model.particle_energies(fixed, batch.x, particles)
        log_w = jax.vmap(reweight, in_axes=(0, 0, 0, None))(log_w, energies_new, energies_old, weight_temperature)
        info = ConditionalPFInfo(global_norm(new.direction), ess, due, kernel_info)
        num_resampled = state.num_resampled + due.astype(jnp.int32)
        return ConditionalPFState(new.params, new.opt_state, particles, log_w, state.step + 1, num_resampled), info

    return build(s, "conditional_pf_mcmc_mle", init, step, requires_data=_NEEDS_DATA)


def _rejuvenate_due_inputs(s, resample_fn, rejuvenation_chunk, num_steps: int, keys, particles, log_w, due, theta, x):
    """Resample and rejuvenate the inputs that are ``due``, chunk by chunk.

    The due inputs are gathered in chunks of ``rejuvenation_chunk`` inputs (default
    ``ceil(N / 8)``) processed by a ``fori_loop`` over the due chunks only, so the
    kernel costs time in proportion to the number of due inputs.  Returns
    ``(particles, log_weights, kernel_infos)`` (zero infos for the inputs not due).
    """
    model, num_particles = s.model, s.num_particles
    key_move, key_resample = keys
    n = model.num_inputs(x)
    chunk = min(n, rejuvenation_chunk or -(-n // 8))
    num_slots = -(-n // chunk) * chunk
    # due inputs first (stable), padded to whole chunks; slots past num_due are ignored
    order = jnp.concatenate([jnp.argsort(~due, stable=True), jnp.zeros((num_slots - n,), jnp.int32)])
    num_due = jnp.sum(due.astype(jnp.int32))
    info_shape = jax.eval_shape(lambda p: _move(s.kernel, model, key_move, p, theta, x, num_steps)[1], particles)

    def one_chunk(c, carry):
        particles, log_w, infos = carry
        slot = c * chunk + jnp.arange(chunk)
        idx = jax.lax.dynamic_slice(order, (c * chunk,), (chunk,))
        target = jnp.where(slot < num_due, idx, n)  # n: out of range, the write is dropped
        keys_c = jax.random.split(jax.random.fold_in(key_resample, c), chunk)
        sub = jax.tree.map(lambda p: p[idx], particles)
        sub = jax.vmap(lambda k, p, lw: resample(k, resample_fn, p, lw))(keys_c, sub, log_w[idx])
        sub_x = jax.tree.map(lambda a: a[idx], x)
        moved, info = _move(s.kernel, model, jax.random.fold_in(key_move, c), sub, theta, sub_x, num_steps)
        particles = jax.tree.map(lambda full, m: full.at[target].set(m, mode="drop"), particles, moved)
        infos = jax.tree.map(lambda full, i: full.at[target].set(i.astype(full.dtype), mode="drop"), infos, info)
        log_w = log_w.at[target].set(uniform_log_weights(num_particles), mode="drop")
        return particles, log_w, infos

    zeros = jax.tree.map(lambda sd: jnp.zeros(sd.shape, sd.dtype), info_shape)
    return jax.lax.fori_loop(0, (num_due + chunk - 1) // chunk, one_chunk, (particles, log_w, zeros))


# ----------------------------------------------------------------------------------
# exact conditional maximum likelihood (enumeration)
# ----------------------------------------------------------------------------------
ConditionalExactMLState = ObjectiveState  # the state of :func:`conditional_exact_ml`: params, opt_state, step


class ConditionalExactMLInfo(NamedTuple):
    """Diagnostics: ``grad_norm`` and ``log_likelihood``, the exact average conditional log-likelihood before the update."""

    grad_norm: jax.Array
    log_likelihood: jax.Array


def _exact_cll(model, theta, x, labels):
    log_z = jax.vmap(lambda xi: exact.log_partition(model, model.condition(theta, xi)))(x)
    return -jnp.mean(model.pair_energies(theta, x, labels)) - jnp.mean(log_z)


def exact_conditional_log_likelihood(model, params: Any, data: dict) -> jax.Array:
    """Exact average conditional log-likelihood :math:`\\frac1N\\sum_n \\log p(y_n \\mid x_n, \\theta)` by enumeration.

    ``data = {"x": (N, ...), <label name>: (N, *shape)}``.  Traceable and
    differentiable in ``params`` (``jax.grad`` gives the exact CML gradient).
    """
    _check_crf(model)
    x, labels = model.validate_data(data)
    if is_concrete(params):
        model.validate_theta(params, argname="params")
        exact.log_partition(model, model.condition(params, _first_input(x)))  # size check / structure, host side
    return _exact_cll(model, params, x, labels)


def conditional_exact_ml(model, optimizer: Any = None) -> Learner:
    """Exact conditional maximum likelihood: the gradient of :func:`exact_conditional_log_likelihood`.

    :math:`\\log Z(\\theta, x_n)` by enumeration (:func:`ugm_infer.exact.log_partition`,
    vmapped over inputs) -- the baseline for small label spaces (e.g. ``L <= 16``
    labels).  ``step`` takes any batch of pairs (no per-input state).
    """
    s = _crf_setup(model, optimizer, "conditional_exact_ml", whole=False)

    def prepare(params, data):
        if data is not None:  # size check and structure, host side
            exact.log_partition(model, model.condition(params, _first_input(data.x)))

    def objective(params, batch: Batch):
        return _exact_cll(model, params, batch.x, batch.labels)

    return objective_learner(s, "conditional_exact_ml", objective, ConditionalExactMLState, ConditionalExactMLInfo, prepare)
