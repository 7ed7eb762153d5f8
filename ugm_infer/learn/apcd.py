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

from collections.abc import Callable
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
    check_model,
    check_params,
    check_positive_int,
    global_norm,
    is_concrete,
    resolve_optimizer,
    resolve_visible,
)
from ugm_infer.learn.phases import conditional_model, latent_names, resolve_negative_phase

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
        Transition operator of the latent chains: ``None`` (block Gibbs on the latent
        blocks, ``num_latent_steps`` sweeps) or a pair ``(init_fn, kernel_fn)`` for ONE
        latent configuration ``{latent name: array}`` and the log-density
        :math:`h \\mapsto -E(v, h)` (it must leave :math:`p(h \\mid v)` invariant; the
        learner vmaps it over data and chains and runs it ``num_latent_steps`` times).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` named ``"apcd"`` / ``"h_apcd"``: state
    :class:`APCDState`, info :class:`APCDInfo`.  ``init(rng_key, params, data)``
    **requires** ``data`` (all training rows), which sizes the per-datum state.
    """
    from ugm_infer.kernels.gibbs import build_kernel as gibbs_build_kernel
    from ugm_infer.kernels.gibbs import init as gibbs_init
    from ugm_infer.learn.meanfield import mean_field
    from ugm_infer.learn.schedules import robbins_monro

    check_model(model)
    visible = resolve_visible(model, visible)
    latent = latent_names(model, visible)
    if not latent:
        raise ValueError(f"apcd needs latent variables; model '{model.name}' has none given visible={list(visible)}")
    num_particles = check_positive_int(num_particles, "num_particles")
    num_chains = check_positive_int(num_chains_per_datum, "num_chains_per_datum")
    num_latent_steps = check_positive_int(num_latent_steps, "num_latent_steps")
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    if statistics not in ("gradient", "latent"):
        raise ValueError(f"`statistics` must be 'gradient' or 'latent', got {statistics!r}")
    if estimate_step is None:
        estimate_step = power_decay(1.0, 2.0 / 3.0)
    elif not callable(estimate_step):
        try:
            const = float(estimate_step)
        except (TypeError, ValueError) as err:
            raise TypeError(f"`estimate_step` must be a float in (0, 1] or a callable, got {estimate_step!r}") from err
        if not 0.0 < const <= 1.0:
            raise ValueError(f"`estimate_step` must be in (0, 1], got {estimate_step!r}")

        def estimate_step(k, _c=const):
            return jnp.full(jnp.shape(k), _c, jnp.float32)

    if not isinstance(hybrid, bool):
        raise TypeError(f"`hybrid` must be a bool, got {hybrid!r}")
    if hybrid:
        if hybrid_weight is None:
            if num_steps is None:
                raise ValueError("`hybrid=True` needs `num_steps` (the planned number of updates) or `hybrid_weight`")
            total = check_positive_int(num_steps, "num_steps")

            def hybrid_weight(t):
                return jnp.clip(2.0 * jnp.asarray(t, jnp.float32) / total - 1.0, 0.0, 1.0)

        elif not callable(hybrid_weight):
            raise TypeError(f"`hybrid_weight` must be a callable step -> weight, got {type(hybrid_weight).__name__}")
        mf_solve = mean_field(model, visible, **(mean_field_kwargs or {}))
    elif mean_field_kwargs is not None or hybrid_weight is not None:
        raise ValueError("`mean_field_kwargs` and `hybrid_weight` only apply with hybrid=True")
    optimizer = resolve_optimizer(optimizer if optimizer is not None else _default_optimizer(robbins_monro))
    negative = resolve_negative_phase(model, visible, negative_phase)
    kernel = LazyKernel(
        model,
        kernel,
        default=lambda params: (gibbs_init, gibbs_build_kernel(model, "block", num_sweeps, params=params)),
    )
    built_latent: dict[str, Any] = {}
    if latent_kernel is not None:
        if not (isinstance(latent_kernel, (tuple, list)) and len(latent_kernel) == 2 and all(map(callable, latent_kernel))):
            raise TypeError(
                "`latent_kernel` must be None or a pair (init_fn, kernel_fn) acting on one latent configuration; "
                f"got {latent_kernel!r}"
            )
        built_latent["pair"] = tuple(latent_kernel)

    def get_latent_kernel(params):
        if "pair" not in built_latent:
            cond = conditional_model(model, visible, params, "block")
            built_latent["pair"] = (gibbs_init, gibbs_build_kernel(cond, "block", num_latent_steps))
        return built_latent["pair"]

    if model.has_structure:
        get_latent_kernel(None)
    if init_particles is not None:
        init_particles = model.validate_state(init_particles, batch_ndim=1, argname="init_particles")
        size = jax.tree.leaves(init_particles)[0].shape[0]
        if size != num_particles:
            raise ValueError(f"`init_particles` has {size} particles but `num_particles` is {num_particles}")

    def per_datum_grad(params, v, hs):
        """``(1/M) sum_m -dE/dtheta (v, h^m)`` for one datum (``hs`` has a leading chain axis)."""

        def mean_energy(p):
            return jnp.mean(jax.vmap(lambda h: model.energy(p, {**v, **h}))(hs))

        return jax.grad(lambda p: -mean_energy(p))(params)

    def zero_estimates(params, num):
        if statistics == "gradient":
            return jax.tree.map(lambda x: jnp.zeros((num,) + jnp.shape(x), jnp.result_type(x)), params)
        dt = jnp.result_type(jax.tree.leaves(params)[0], jnp.float32)
        return {n: jnp.zeros((num,) + model.variables[n].shape, dt) for n in latent}

    def init(rng_key, params, data=None) -> APCDState:
        check_params(model, params)
        if data is None:
            raise ValueError("apcd keeps per-datum state: `init(rng_key, params, data)` needs all the training data")
        data = check_batch(model, visible, data, argname="data")
        if not is_concrete(data):
            raise ValueError("apcd.init needs concrete `data` (it builds the per-datum lookup on the host)")
        get_latent_kernel(params)
        kernel.get(params)
        _, row_to_unique, table = _build_table(model, visible, data)
        num = int(table[0].shape[0])
        key_particles, key_chains = jax.random.split(rng_key)
        particles = model.random_state(key_particles, num_particles) if init_particles is None else dict(init_particles)
        keys = jax.random.split(key_chains, len(latent))
        chains = {n: model.variables[n].random(k, (num, num_chains)) for k, n in zip(keys, latent)}
        return APCDState(
            params,
            optimizer.init(params),
            particles,
            chains,
            zero_estimates(params, num),
            jnp.zeros((num,), jnp.int32),
            jnp.asarray(row_to_unique),
            table,
            jnp.zeros((), jnp.int32),
        )

    def e_step(rng_key, state: APCDState, params, batch, ids, mf_means):
        """Advance the batch's latent chains and update their running estimates."""
        lat_init, lat_kernel = get_latent_kernel(params)
        repeats = 1 if latent_kernel is None else num_latent_steps
        chains = {n: state.latent_chains[n][ids] for n in latent}  # (B, M, ...)
        visits = state.visits[ids] + 1
        size = ids.shape[0]
        key_move, key_mf = jax.random.split(rng_key)
        if mf_means is not None:  # H-APCD: first visit starts from a draw of q_MF(h | v)
            first = state.visits[ids] == 0
            draws = {}
            for n, k in zip(latent, jax.random.split(key_mf, len(latent))):
                mu = mf_means[n][:, None]
                d = model.variables[n]
                u = jax.random.uniform(k, chains[n].shape, mu.dtype)
                if d.values[0] < 0:  # spins: E[s] = mu -> p(+1) = (1 + mu) / 2
                    val = jnp.where(u < (1 + mu) / 2, 1.0, -1.0)
                else:
                    val = (u < mu).astype(jnp.float32)
                draws[n] = val.astype(chains[n].dtype)
                mask = first.reshape((size,) + (1,) * (chains[n].ndim - 1))
                chains[n] = jnp.where(mask, draws[n], chains[n])

        def move_one(key, v, h):
            def logdensity(hh):
                return -model.energy(params, {**v, **hh})

            def body(ks, k):
                return lat_kernel(k, ks, logdensity)[0], None

            ks, _ = jax.lax.scan(body, lat_init(h, logdensity), jax.random.split(key, repeats))
            return ks.position

        keys = jax.random.split(key_move, size * num_chains).reshape(size, num_chains)
        chains = jax.vmap(lambda ks, v, hs: jax.vmap(lambda k, h: move_one(k, v, h))(ks, hs))(keys, batch, chains)
        a = estimate_step(visits).astype(jnp.float32)
        if statistics == "gradient":
            fresh = jax.vmap(lambda v, hs: per_datum_grad(params, v, hs))(batch, chains)
        else:
            fresh = {n: jnp.mean(chains[n].astype(jnp.float32), axis=1) for n in latent}
        old = jax.tree.map(lambda e: e[ids], state.estimates)

        def mix(o, f):
            aa = a.reshape((size,) + (1,) * (o.ndim - 1)).astype(o.dtype)
            return (1 - aa) * o + aa * f.astype(o.dtype)

        new = jax.tree.map(mix, old, fresh)
        if statistics == "gradient":
            positive = jax.tree.map(lambda x: jnp.mean(x, axis=0), new)
        else:
            positive = latent_positive(params, batch, new, chains)
        estimates = jax.tree.map(lambda e, x: e.at[ids].set(x), state.estimates, new)
        latent_chains = {n: state.latent_chains[n].at[ids].set(chains[n]) for n in latent}
        energy = jnp.mean(jax.vmap(lambda v, hs: jax.vmap(lambda h: model.energy(params, {**v, **h}))(hs))(batch, chains))
        return positive, latent_chains, estimates, state.visits.at[ids].set(visits), jnp.mean(a), energy

    def latent_positive(params, batch, hbar, chains):
        def surrogate(p):
            def one(v, hb, hs):
                at_mean = model.energy(p, {**v, **hb})
                if num_chains == 1:
                    return at_mean
                mean_h = {n: jnp.mean(hs[n].astype(hb[n].dtype), axis=0) for n in latent}
                avg = jnp.mean(jax.vmap(lambda h: model.energy(p, {**v, **h}))(hs))
                corr = avg - model.energy(p, {**v, **mean_h})
                return at_mean + num_chains / (num_chains - 1) * corr

            return jnp.mean(jax.vmap(one)(batch, hbar, chains))

        return jax.grad(lambda p: -surrogate(p))(params)

    def mf_positive(params, batch):
        means, _ = jax.vmap(lambda v: mf_solve(params, v))(batch)

        def mean_energy(p):
            return jnp.mean(jax.vmap(lambda v, m: model.energy(p, {**v, **m}))(batch, means))

        return jax.grad(lambda p: -mean_energy(p))(params), means

    def step(rng_key, state: APCDState, batch) -> tuple[APCDState, APCDInfo]:
        batch = dict(batch)
        explicit = batch.pop(_INDEX_KEY, None)
        batch = check_batch(model, visible, batch)
        if explicit is None:
            ids = _lookup(state.hash_table, _codes(model, visible, batch))
        else:
            ids = state.row_to_unique[jnp.asarray(explicit, jnp.int32)]
        key_negative, key_positive = jax.random.split(rng_key)
        params = state.params
        frozen = jax.lax.stop_gradient(params)
        particles, _ = advance(kernel, key_negative, state.particles, model.logdensity_fn(frozen), params, 1)
        particle_energy, negative_grad = jax.value_and_grad(negative)(params, particles)

        def run_apcd(operand):
            mf_means = operand
            return e_step(key_positive, state, frozen, batch, ids, mf_means)

        if hybrid:
            w = jnp.asarray(hybrid_weight(state.step), jnp.float32)
            mf_grad, mf_means = mf_positive(frozen, batch)

            def skip(operand):
                del operand
                zeros = jax.tree.map(jnp.zeros_like, mf_grad)
                return zeros, state.latent_chains, state.estimates, state.visits, jnp.float32(0), jnp.float32(0)

            out_shape = jax.eval_shape(run_apcd, mf_means)
            ap_grad, chains, estimates, visits, a_mean, lat_energy = jax.lax.cond(
                w > 0, run_apcd, lambda o: jax.tree.map(lambda s, x: x.astype(s.dtype), out_shape, skip(o)), mf_means
            )
            positive = jax.tree.map(lambda g1, g2: (1 - w) * g1 + w * g2, mf_grad, ap_grad)
        else:
            w = jnp.float32(1.0)
            positive, chains, estimates, visits, a_mean, lat_energy = run_apcd(None)
        ascent = jax.tree.map(jnp.add, positive, negative_grad)
        new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
        new_state = APCDState(
            new_params,
            opt_state,
            particles,
            chains,
            estimates,
            visits,
            state.row_to_unique,
            state.hash_table,
            state.step + 1,
        )
        info = APCDInfo(global_norm(ascent), particle_energy, a_mean, w, lat_energy)
        return new_state, info

    step.batch_index_key = _INDEX_KEY  # ui.fit passes the minibatch's row indices
    return Learner(init, step, model, "h_apcd" if hybrid else "apcd", visible)


def _default_optimizer(robbins_monro):
    import optax

    return optax.sgd(robbins_monro(1.0, 10.0))
