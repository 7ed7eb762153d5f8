"""Adiabatic persistent contrastive divergence (APCD) and its hybrid with mean field (H-APCD).

APCD (the APCD paper, Algorithm 1) estimates *both* expectations of the likelihood
gradient of a model with latent variables with incomplete Markov chains, on two time
scales.  For data :math:`v^1, \\dots, v^N`:

E step (data term)
    for every datum :math:`v^n`, ``M`` persistent latent chains
    :math:`h^{n,1..M}` clamped at :math:`v^n` take ``l`` transitions of a kernel that
    leaves :math:`p_\\theta(h \\mid v^n)` invariant (block Gibbs on the latent blocks),
    and a per-datum running estimate of the expected sufficient statistics moves by
    step :math:`a(t)`:

    .. math::  \\hat\\phi^n \\leftarrow (1 - a(t))\\, \\hat\\phi^n
               + a(t)\\, \\frac1M \\sum_m \\phi(v^n, h^{n,m}),
               \\qquad \\phi = -\\partial_\\theta E ;
M step (model term and update)
    persistent model chains :math:`x^{1..K}` take Gibbs transitions at
    :math:`\\theta_t`, and

    .. math::  \\theta_{t+1} = \\theta_t + b(t) \\Big(\\frac1{|B|} \\sum_{n \\in B}
               \\hat\\phi^n - \\frac1K \\sum_k \\phi(x^k)\\Big).

With :math:`\\sum a = \\sum b = \\infty`, :math:`\\sum (a^2 + b^2) < \\infty` and
:math:`b/a \\to 0` (or :math:`\\infty`) the iterates converge (the paper's two-time-scale
stochastic approximation argument).  Defaults: :math:`a(k) = k^{-2/3}` with ``k`` the
number of visits of the datum (so the first visit replaces the zero initial estimate),
and ``b`` the optimizer's learning rate (e.g. :func:`ugm_infer.learn.robbins_monro`,
:math:`\\propto 1/t`).

Per-datum state and memory
    ``N x M x (latent size)`` latent chain states, ``N`` visit counters, and ``N x S``
    running statistics, where ``S`` is

    * ``statistics="gradient"`` (default): the size of ``params`` -- the running mean
      of :math:`-\\partial_\\theta E` itself, exact for every model (grids, small DBMs);
    * ``statistics="latent"``: the latent size -- the running mean :math:`\\bar h^n`
      of the latent *values*; the data term is
      :math:`\\phi(v^n, \\bar h^n) + \\frac{M}{M-1}\\big(\\frac1M \\sum_m \\phi(v^n, h^{n,m})
      - \\phi(v^n, \\tfrac1M \\sum_m h^{n,m})\\big)`: exact in expectation for energies
      affine in the latents jointly (RBM), and for pairwise latent-latent terms (DBM,
      grid) the correction adds the current chains' covariance (``M >= 2``; with
      ``M = 1`` it is dropped).  Use it when ``N x |params|`` does not fit (a DBM on
      MNIST: 60000 x 1500 floats instead of 60000 x 900k).

    Data are de-duplicated at ``init`` (identical vectors share their state, which is
    correct: they have the same posterior).  A minibatch finds its rows' state by
    ``"_index"``, the ``(B,)`` row indices into the ``data`` given to ``init``: the
    learner's ``step`` declares ``step.batch_index_key = "_index"``, so
    :func:`ugm_infer.fit` passes them (see :func:`ugm_infer.fit.batch_index_key`).
    In a hand-written loop, pass ``batch["_index"]`` too; without it the rows are
    matched by an exact hash lookup built at ``init`` (hashes of the distinct rows are
    verified distinct on the host), and every batch row must then be a row of that
    ``data``.

H-APCD (``hybrid=True``)
    the data term is :math:`(1 - w_t)\\,\\text{mean field} + w_t\\,\\text{APCD}` with
    :math:`w_t = \\mathrm{clip}(2t/T - 1, 0, 1)`: mean field only for the first half
    of ``num_steps = T`` updates, then a linear shift to APCD.  Latent chains of a
    datum visited for the first time by APCD start from a draw of the mean-field
    posterior.

References
----------
Adiabatic persistent contrastive divergence learning (the APCD paper): Algorithm 1,
two-time-scale conditions, H-APCD; section 4 (grids with hidden units, DBM on MNIST).
Borkar, V. S. (1997). Stochastic approximation with two time scales. Systems &
Control Letters 29, 291-294.
Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ugm_infer._random import split as split_key
from ugm_infer._random import uniform
from ugm_infer.kernels import gibbs
from ugm_infer.latent import mean_field
from ugm_infer.learn.base import Learner, apply_ascent, check_positive_int, global_norm, is_concrete
from ugm_infer.learn.particles import advance, gibbs_builder, initial_particles
from ugm_infer.learn.phases import conditional_model, latent_names, resolve_negative_phase
from ugm_infer.learn.schedules import robbins_monro
from ugm_infer.learn.skeleton import build, initial_step, setup

__all__ = ["APCDInfo", "APCDState", "apcd", "power_decay"]

_INDEX_KEY = "_index"


class APCDState(NamedTuple):
    """State of :func:`apcd`.

    params, opt_state
        Parameters and optax state.
    particles
        Persistent model chains ``{name: (num_particles, *shape)}`` (M step).
    latent_chains
        Per-datum latent chains ``{latent name: (N, M, *shape)}`` (E step).
    estimates
        Per-datum running statistics (leading axis ``N``): a pytree like ``params``
        (``statistics="gradient"``) or ``{latent name: (N, *shape)}`` (``"latent"``).
    visits
        ``(N,)`` int32: APCD E-step visits of every distinct datum.
    row_to_unique
        ``(num rows of data,)`` int32: distinct-datum id of each row given to ``init``.
    hash_table
        ``(sorted hashes (N,) uint32, ids (N,) int32, multipliers (D,) uint32)``.
    step
        Number of updates done (int32).
    """

    params: Any
    opt_state: Any
    particles: dict
    latent_chains: dict
    estimates: Any
    visits: jax.Array
    row_to_unique: jax.Array
    hash_table: tuple
    step: jax.Array


class APCDInfo(NamedTuple):
    """Diagnostics of one APCD update.

    grad_norm
        Global norm of the ascent direction.
    particle_energy
        Mean energy of the model chains after their move.
    estimate_step
        Mean E-step step size :math:`a` over the batch.
    apcd_weight
        Weight :math:`w_t` of the APCD data term (1 unless ``hybrid``).
    latent_energy
        Mean energy of the batch's latent chains (visibles clamped) after the E step.
    """

    grad_norm: jax.Array
    particle_energy: jax.Array
    estimate_step: jax.Array
    apcd_weight: jax.Array
    latent_energy: jax.Array


def power_decay(scale: float = 1.0, power: float = 2.0 / 3.0, offset: float = 0.0) -> Callable:
    """Step sizes :math:`a(k) = \\mathrm{scale} / (k + \\mathrm{offset})^{\\mathrm{power}}`.

    With ``1/2 < power <= 1``: :math:`\\sum a = \\infty`, :math:`\\sum a^2 < \\infty`.
    ``k`` counts from 1 (the first visit of a datum has ``a = scale / (1 + offset)^power``).
    """
    scale, power, offset = float(scale), float(power), float(offset)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"`scale` must be > 0, got {scale}")
    if not 0.5 < power <= 1.0:
        raise ValueError(f"`power` must be in (0.5, 1] (so that sum a = inf and sum a^2 < inf), got {power}")
    if not np.isfinite(offset) or offset < 0:
        raise ValueError(f"`offset` must be >= 0, got {offset}")

    def schedule(k):
        return jnp.minimum(scale / (jnp.asarray(k, jnp.float32) + offset) ** power, 1.0)

    return schedule


# ----------------------------------------------------------------------------------
# exact row lookup by hashing
# ----------------------------------------------------------------------------------
def _codes(model, visible, batch) -> jax.Array:
    """``(B, D)`` uint32 value indices of the visible variables of a batch."""
    cols = []
    for n in visible:
        d = model.variables[n]
        x = jnp.asarray(batch[n])
        cols.append(d.to_index(x.reshape(x.shape[0], -1)).astype(jnp.uint32))
    return jnp.concatenate(cols, axis=1)


def _hash(codes: jax.Array, multipliers: jax.Array) -> jax.Array:
    # linear hash modulo 2^32 (uint32 arithmetic wraps); ``+ 1`` so value 0 counts too
    return jnp.sum((codes + jnp.uint32(1)) * multipliers, axis=1, dtype=jnp.uint32)


def _build_table(model, visible, data: dict, seed: int = 0):
    codes = np.asarray(_codes(model, visible, data))
    uniq, row_to_unique = np.unique(codes, axis=0, return_inverse=True)
    row_to_unique = row_to_unique.reshape(-1).astype(np.int32)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        mult = rng.integers(1, 2**32, size=codes.shape[1], dtype=np.uint64).astype(np.uint32) | np.uint32(1)
        h = np.asarray(_hash(jnp.asarray(uniq), jnp.asarray(mult)))
        if len(np.unique(h)) == len(h):
            order = np.argsort(h, kind="stable")
            table = (jnp.asarray(h[order]), jnp.asarray(order.astype(np.int32)), jnp.asarray(mult))
            return uniq, row_to_unique, table
    raise ValueError("could not build a collision-free hash of the data rows (more than ~2^16 distinct rows?)")


def _lookup(table, codes: jax.Array) -> jax.Array:
    hashes, ids, mult = table
    h = _hash(codes, mult)
    pos = jnp.clip(jnp.searchsorted(hashes, h), 0, hashes.shape[0] - 1)
    return ids[pos]


# ----------------------------------------------------------------------------------
def apcd(
    model,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    num_chains_per_datum: int = 1,
    num_latent_steps: int = 1,
    num_sweeps: int = 1,
    estimate_step: Any = None,
    statistics: str = "gradient",
    hybrid: bool = False,
    num_steps: int | None = None,
    hybrid_weight: Callable | None = None,
    mean_field_kwargs: dict | None = None,
    visible: Any = None,
    negative_phase: str = "energy",
    init_particles: dict | None = None,
    kernel: Any = None,
    latent_kernel: Any = None,
) -> Learner:
    """Adiabatic persistent contrastive divergence (APCD Algorithm 1; H-APCD with ``hybrid=True``).

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel` with latent variables and known blocks
        (:func:`~ugm_infer.models.grid_hidden`, :func:`~ugm_infer.models.dbm`,
        :func:`~ugm_infer.models.rbm`).
    optimizer
        optax transformation; its learning rate is the M-step size :math:`b(t)`.
        Default ``optax.sgd(robbins_monro(1.0, 10.0))`` (:math:`b = 1/(10 + t)`).
    num_particles
        Persistent model chains (M step).
    num_chains_per_datum
        ``M``: latent chains per datum (E step).
    num_latent_steps
        ``l``: block-Gibbs sweeps of the latent chains per visit.
    num_sweeps
        Block-Gibbs sweeps of the model chains per update.
    estimate_step
        :math:`a(k)`: a float (constant) or a callable of the per-datum visit count
        ``k >= 1``; default :func:`power_decay` ``(1, 2/3)``: :math:`a = k^{-2/3}`.
    statistics
        ``"gradient"`` or ``"latent"`` (see the module docstring: memory
        ``N x |params|`` vs ``N x latent size``).
    hybrid
        H-APCD: mean field for the first half of ``num_steps``, then a linear shift to
        APCD (needs ``num_steps``; the model must suit :func:`~ugm_infer.learn.mean_field`).
    num_steps
        Planned number of updates (``hybrid`` only).
    hybrid_weight
        Optional ``step -> w`` in [0, 1] replacing the default H-APCD weight
        :math:`\\mathrm{clip}(2t/T - 1, 0, 1)`.
    mean_field_kwargs
        ``damping``, ``tol``, ``max_iterations`` for the mean-field part.
    visible, negative_phase, init_particles
        As in :func:`~ugm_infer.learn.sap`.
    kernel
        Transition operator of the model chains, any form :func:`~ugm_infer.learn.sap`
        accepts; default block Gibbs with ``num_sweeps`` sweeps.
    latent_kernel
        ``None`` (block Gibbs on the latent blocks, ``num_latent_steps`` sweeps) or a
        pair ``(init_fn, kernel_fn)`` for ONE latent configuration and the log-density
        :math:`h \\mapsto -E(v, h)`, leaving :math:`p(h \\mid v)` invariant (vmapped over
        data and chains, run ``num_latent_steps`` times).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` named ``"apcd"`` / ``"h_apcd"``: state
    :class:`APCDState`, info :class:`APCDInfo`.  ``init(rng_key, params, data)``
    **requires** ``data`` (all training rows), which sizes the per-datum state.
    """
    model_gibbs = gibbs_builder(model, "block", num_sweeps)
    s = setup(
        model,
        optax.sgd(robbins_monro(1.0, 10.0)) if optimizer is None else optimizer,
        visible=visible,
        kernel=model_gibbs if kernel is None else kernel,
        num_particles=num_particles,
        init_particles=init_particles,
    )
    latent = latent_names(model, s.visible)
    if not latent:
        raise ValueError(f"apcd needs latent variables; model '{model.name}' has none given visible={list(s.visible)}")
    num_chains = check_positive_int(num_chains_per_datum, "num_chains_per_datum")
    chains = _latent_chains(model, s.visible, latent_kernel, check_positive_int(num_latent_steps, "num_latent_steps"))
    if statistics not in ("gradient", "latent"):
        raise ValueError(f"`statistics` must be 'gradient' or 'latent', got {statistics!r}")
    stats = _running_statistics(model, latent, statistics, num_chains, _resolve_estimate_step(estimate_step))
    mf_term = _mean_field_term(model, s.visible, hybrid, num_steps, hybrid_weight, mean_field_kwargs)
    negative = resolve_negative_phase(model, s.visible, negative_phase)
    cfg = _Config(s, latent, num_chains, chains, stats, mf_term, negative)
    return build(
        s,
        "apcd" if mf_term is None else "h_apcd",
        functools.partial(_init, cfg),
        functools.partial(_step, cfg),
        requires_data="apcd keeps per-datum state: `init(rng_key, params, data)` needs all the training data",
        index_key=_INDEX_KEY,
    )


class _Config(NamedTuple):
    """What :func:`apcd` resolved from its arguments."""

    s: Any  # the learner setup (model, visible, optimizer, model-chain kernel, particles)
    latent: tuple[str, ...]
    num_chains: int  # M, latent chains per datum
    chains: Any  # _LatentChains
    stats: Any  # _RunningStatistics
    mf_term: Any  # _MeanFieldTerm or None
    negative: Callable


def _init(cfg: _Config, rng_key, params, data) -> APCDState:
    """Model chains, ``M`` latent chains per distinct datum, zero estimates and the row lookup."""
    s, model = cfg.s, cfg.s.model
    if not is_concrete(data):
        raise ValueError("apcd.init needs concrete `data` (it builds the per-datum lookup on the host)")
    cfg.chains.get(params)
    _, row_to_unique, table = _build_table(model, s.visible, data)
    num = int(table[0].shape[0])
    key_particles, key_chains = split_key(rng_key)
    particles = initial_particles(model, key_particles, s.num_particles, s.init_particles)
    keys = split_key(key_chains, len(cfg.latent))
    latent_chains = {n: model.variables[n].random(k, (num, cfg.num_chains)) for k, n in zip(keys, cfg.latent)}
    return APCDState(
        params,
        s.optimizer.init(params),
        particles,
        latent_chains,
        cfg.stats.zeros(params, num),
        jnp.zeros((num,), jnp.int32),
        jnp.asarray(row_to_unique),
        table,
        initial_step(),
    )


def _step(cfg: _Config, rng_key, state: APCDState, batch, index) -> tuple[APCDState, APCDInfo]:
    """One update: the model chains move (M step, model term), the batch's E step (data term), one optax step."""
    s, model = cfg.s, cfg.s.model
    ids = _row_ids(model, s.visible, state, batch, index)
    key_negative, key_positive = split_key(rng_key)
    params = state.params
    frozen = jax.lax.stop_gradient(params)
    # M step, model term: the persistent chains take a transition at theta_t
    particles, _ = advance(s.kernel, key_negative, state.particles, model.logdensity_fn(frozen), params, 1)
    particle_energy, negative_grad = jax.value_and_grad(cfg.negative)(params, particles)
    # E step, data term: per-datum running estimates (two time scales)
    e, w = _data_term(cfg, key_positive, state, frozen, batch, ids)
    direction = jax.tree.map(jnp.add, e.positive, negative_grad)
    new_params, opt_state = apply_ascent(s.optimizer, direction, state.opt_state, params)
    new_state = APCDState(
        new_params,
        opt_state,
        particles,
        e.latent_chains,
        e.estimates,
        e.visits,
        state.row_to_unique,
        state.hash_table,
        state.step + 1,
    )
    return new_state, APCDInfo(global_norm(direction), particle_energy, e.estimate_step, w, e.latent_energy)


def _data_term(cfg: _Config, rng_key, state: APCDState, params, batch, ids) -> tuple[_EStep, jax.Array]:
    """The APCD E step, mixed with the mean-field data term by :math:`w_t` under H-APCD."""
    if cfg.mf_term is None:
        return _e_step(cfg, rng_key, state, params, batch, ids, None), jnp.float32(1.0)
    w = jnp.asarray(cfg.mf_term.weight(state.step), jnp.float32)
    mf_grad, mf_means = cfg.mf_term.positive(params, batch)
    skipped = _EStep(jax.tree.map(jnp.zeros_like, mf_grad), state.latent_chains, state.estimates, state.visits, 0.0, 0.0)
    out = _cond_like(w > 0, lambda m: _e_step(cfg, rng_key, state, params, batch, ids, m), skipped, mf_means)
    positive = jax.tree.map(lambda g1, g2: (1 - w) * g1 + w * g2, mf_grad, out.positive)
    return out._replace(positive=positive), w


def _e_step(cfg: _Config, rng_key, state: APCDState, params, batch, ids, mf_means) -> _EStep:
    """Advance the batch's latent chains at :math:`\\theta_t` and move their running estimates by :math:`a(k)`."""
    model, latent, stats = cfg.s.model, cfg.latent, cfg.stats
    key_move, key_mf = split_key(rng_key)
    hs = {n: state.latent_chains[n][ids] for n in latent}  # (B, M, ...)
    if mf_means is not None:  # H-APCD: a first visit starts from a draw of q_MF(h | v)
        hs = _start_from_mean_field(model, key_mf, hs, mf_means, state.visits[ids] == 0)
    hs = cfg.chains.move(key_move, params, batch, hs)
    visits = state.visits[ids] + 1
    a = stats.step_size(visits)
    new = stats.mix(stats.fresh(params, batch, hs), jax.tree.map(lambda e: e[ids], state.estimates), a)
    return _EStep(
        stats.data_term(params, batch, new, hs),
        {n: state.latent_chains[n].at[ids].set(hs[n]) for n in latent},
        jax.tree.map(lambda e, x: e.at[ids].set(x), state.estimates, new),
        state.visits.at[ids].set(visits),
        jnp.mean(a),
        jnp.mean(jax.vmap(lambda v, h: jax.vmap(lambda hh: model.energy(params, {**v, **hh}))(h))(batch, hs)),
    )


class _EStep(NamedTuple):
    """What the E step of one update returns (the per-datum fields of the new state and two infos)."""

    positive: Any
    latent_chains: dict
    estimates: Any
    visits: jax.Array
    estimate_step: jax.Array
    latent_energy: jax.Array


def _cond_like(pred, fn: Callable, otherwise: Any, operand: Any) -> Any:
    """``fn(operand)`` if ``pred`` else ``otherwise`` (cast to ``fn``'s output types), as a ``lax.cond``."""
    shape = jax.eval_shape(fn, operand)
    skip = jax.tree.map(lambda sd, x: jnp.asarray(x).astype(sd.dtype), shape, otherwise)
    return jax.lax.cond(pred, fn, lambda o: skip, operand)


def _row_ids(model, visible, state: APCDState, batch: dict, index) -> jax.Array:
    """Distinct-datum ids of the batch rows: from their row indices, else by hash lookup."""
    if index is None:
        return _lookup(state.hash_table, _codes(model, visible, batch))
    return state.row_to_unique[jnp.asarray(index, jnp.int32)]


def _resolve_estimate_step(estimate_step: Any) -> Callable:
    """:math:`a(k)`: default :func:`power_decay`, a constant in (0, 1], or a callable."""
    if estimate_step is None:
        return power_decay(1.0, 2.0 / 3.0)
    if callable(estimate_step):
        return estimate_step
    try:
        const = float(estimate_step)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`estimate_step` must be a float in (0, 1] or a callable, got {estimate_step!r}") from err
    if not 0.0 < const <= 1.0:
        raise ValueError(f"`estimate_step` must be in (0, 1], got {estimate_step!r}")
    return lambda k: jnp.full(jnp.shape(k), const, jnp.float32)


class _LatentChains(NamedTuple):
    """``get(params) -> (init_fn, kernel_fn)`` on one latent configuration; ``move(key, params, batch, hs)``."""

    get: Callable
    move: Callable


def _latent_chains(model, visible, latent_kernel: Any, num_latent_steps: int) -> _LatentChains:
    """The transition of the latent chains clamped at their datum: ``num_latent_steps`` block-Gibbs
    sweeps on the latent blocks, or a user pair run ``num_latent_steps`` times."""
    built: dict[str, Any] = {}
    if latent_kernel is not None:
        if not (isinstance(latent_kernel, (tuple, list)) and len(latent_kernel) == 2 and all(map(callable, latent_kernel))):
            raise TypeError(
                "`latent_kernel` must be None or a pair (init_fn, kernel_fn) acting on one latent configuration; "
                f"got {latent_kernel!r}"
            )
        built["pair"] = tuple(latent_kernel)
    repeats = 1 if latent_kernel is None else num_latent_steps

    def get(params):
        if "pair" not in built:
            cond = conditional_model(model, visible, params, "block")
            built["pair"] = (gibbs.init, gibbs.build_kernel(cond, "block", num_latent_steps))
        return built["pair"]

    def move(rng_key, params, batch, hs):
        """Every chain of every datum of the batch (``hs``: ``(B, M, ...)``) takes its transitions."""
        init_fn, kernel_fn = get(params)

        def move_one(key, v, h):
            def logdensity(hh):
                return -model.energy(params, {**v, **hh})

            def body(ks, k):
                return kernel_fn(k, ks, logdensity)[0], None

            ks, _ = jax.lax.scan(body, init_fn(h, logdensity), split_key(key, repeats))
            return ks.position

        size, num_chains = jax.tree.leaves(hs)[0].shape[:2]
        keys = split_key(rng_key, size * num_chains).reshape(size, num_chains)
        return jax.vmap(lambda ks, v, h: jax.vmap(lambda k, hh: move_one(k, v, hh))(ks, h))(keys, batch, hs)

    if model.has_structure:
        get(None)
    return _LatentChains(get, move)


class _RunningStatistics(NamedTuple):
    """The per-datum running estimates :math:`\\hat\\phi^n` and the data term read from them.

    zeros(params, num)
        Initial estimates of ``num`` distinct data.
    step_size(visits)
        :math:`a(k)` of the visit counts.
    fresh(params, batch, hs)
        This visit's statistics from the chains.
    mix(fresh, old, a)
        :math:`(1 - a)\\, \\text{old} + a\\, \\text{fresh}`.
    data_term(params, batch, estimates, hs)
        The ascent direction's data term from the batch's new estimates.
    """

    zeros: Callable
    step_size: Callable
    fresh: Callable
    mix: Callable
    data_term: Callable


def _running_statistics(model, latent, statistics: str, num_chains: int, estimate_step: Callable) -> _RunningStatistics:
    """Running means of :math:`-\\partial_\\theta E` (``"gradient"``) or of the latent values (``"latent"``)."""

    def mean_energy(p, v, hs):
        return jnp.mean(jax.vmap(lambda h: model.energy(p, {**v, **h}))(hs))

    def zeros(params, num):
        if statistics == "gradient":
            return jax.tree.map(lambda x: jnp.zeros((num,) + jnp.shape(x), jnp.result_type(x)), params)
        dt = jnp.result_type(jax.tree.leaves(params)[0], jnp.float32)
        return {n: jnp.zeros((num,) + model.variables[n].shape, dt) for n in latent}

    def fresh(params, batch, hs):
        if statistics == "gradient":  # (1/M) sum_m -dE/dtheta (v, h^m), per datum
            return jax.vmap(lambda v, h: jax.grad(lambda p: -mean_energy(p, v, h))(params))(batch, hs)
        return {n: jnp.mean(hs[n].astype(jnp.float32), axis=1) for n in latent}

    def mix(new, old, a):
        def one(o, f):
            aa = a.reshape((a.shape[0],) + (1,) * (o.ndim - 1)).astype(o.dtype)
            return (1 - aa) * o + aa * f.astype(o.dtype)

        return jax.tree.map(one, old, new)

    def latent_surrogate(p, batch, hbar, hs):
        """phi(v, hbar) plus M/(M-1) times the chains' spread around their mean (see the module docstring)."""

        def one(v, hb, h):
            at_mean = model.energy(p, {**v, **hb})
            if num_chains == 1:
                return at_mean
            mean_h = {n: jnp.mean(h[n].astype(hb[n].dtype), axis=0) for n in latent}
            corr = mean_energy(p, v, h) - model.energy(p, {**v, **mean_h})
            return at_mean + num_chains / (num_chains - 1) * corr

        return jnp.mean(jax.vmap(one)(batch, hbar, hs))

    def data_term(params, batch, estimates, hs):
        if statistics == "gradient":
            return jax.tree.map(lambda x: jnp.mean(x, axis=0), estimates)
        return jax.grad(lambda p: -latent_surrogate(p, batch, estimates, hs))(params)

    def step_size(visits):
        return estimate_step(visits).astype(jnp.float32)

    return _RunningStatistics(zeros, step_size, fresh, mix, data_term)


class _MeanFieldTerm(NamedTuple):
    """H-APCD: ``weight(step) -> w_t`` and ``positive(params, batch) -> (mean-field data term, means)``."""

    weight: Callable
    positive: Callable


def _mean_field_term(model, visible, hybrid: bool, num_steps, hybrid_weight, mean_field_kwargs) -> _MeanFieldTerm | None:
    """The mean-field half of H-APCD (``None`` without ``hybrid``)."""
    if not isinstance(hybrid, bool):
        raise TypeError(f"`hybrid` must be a bool, got {hybrid!r}")
    if not hybrid:
        if mean_field_kwargs is not None or hybrid_weight is not None:
            raise ValueError("`mean_field_kwargs` and `hybrid_weight` only apply with hybrid=True")
        return None
    if hybrid_weight is None:
        if num_steps is None:
            raise ValueError("`hybrid=True` needs `num_steps` (the planned number of updates) or `hybrid_weight`")
        total = check_positive_int(num_steps, "num_steps")

        def hybrid_weight(t):
            return jnp.clip(2.0 * jnp.asarray(t, jnp.float32) / total - 1.0, 0.0, 1.0)

    elif not callable(hybrid_weight):
        raise TypeError(f"`hybrid_weight` must be a callable step -> weight, got {type(hybrid_weight).__name__}")
    solve = mean_field(model, visible, **(mean_field_kwargs or {}))

    def positive(params, batch):
        means, _ = jax.vmap(lambda v: solve(params, v))(batch)

        def mean_energy(p):
            return jnp.mean(jax.vmap(lambda v, m: model.energy(p, {**v, **m}))(batch, means))

        return jax.grad(lambda p: -mean_energy(p))(params), means

    return _MeanFieldTerm(hybrid_weight, positive)


def _start_from_mean_field(model, rng_key, hs: dict, means: dict, first: jax.Array) -> dict:
    """Chains of data visited for the first time restart from a draw of :math:`q_{MF}(h \\mid v)`."""
    out = {}
    size = first.shape[0]
    for n, key in zip(hs, split_key(rng_key, len(hs))):
        mu = means[n][:, None]
        u = uniform(key, hs[n].shape, mu.dtype)
        if model.variables[n].values[0] < 0:  # spins: E[s] = mu -> p(+1) = (1 + mu) / 2
            draw = jnp.where(u < (1 + mu) / 2, 1.0, -1.0)
        else:
            draw = (u < mu).astype(jnp.float32)
        mask = first.reshape((size,) + (1,) * (hs[n].ndim - 1))
        out[n] = jnp.where(mask, draw.astype(hs[n].dtype), hs[n])
    return out
