"""Naive mean-field E-step and mean-field persistent contrastive divergence (MF-PCD).

Mean field (Peterson and Anderson 1987; Welling and Hinton 2002; Salakhutdinov and
Hinton 2009, section 3.1) approximates the posterior of the latent units given the
visibles by a product of independent Bernoullis (or spins),
:math:`q(h \\mid v) = \\prod_j q_j(h_j)` with means :math:`\\mu_j`, and maximises the
variational lower bound on :math:`\\log p(v)`.  Its stationarity conditions are the
fixed-point equations

.. math::  \\mu_j = \\sigma\\big(-\\partial E / \\partial h_j \\,|_{(v, \\mu)}\\big)
           \\quad \\text{(binary)}, \\qquad
           \\mu_j = \\tanh\\big(-\\partial E / \\partial h_j \\,|_{(v, \\mu)}\\big)
           \\quad \\text{(spins)},

where the "field" :math:`-\\partial E / \\partial h_j` is evaluated at the means.  For
energies affine in each unit (every pairwise/bilinear model: RBMs, DBMs, grids) this
field equals :math:`\\mathbb E_q[E(h_j = 0) - E(h_j = 1)]` exactly, so the update is
the exact coordinate ascent of the bound.  For a DBM it is Salakhutdinov and Hinton's
layer-wise update :math:`\\mu_l \\leftarrow \\sigma(b_l + \\mu_{l-1}^\\top W_l + W_{l+1}
\\mu_{l+1})` (2009, eq. 6).  Units of one block of the model (conditionally
independent given the rest) are updated together, blocks in turn (a Gauss-Seidel
sweep); one sweep of damped updates
:math:`\\mu \\leftarrow (1 - \\lambda) \\mu + \\lambda\\, \\mu^{\\text{new}}` with
``damping`` :math:`= 1 - \\lambda` is repeated until the largest change of a mean is
below ``tol`` or ``max_iterations`` sweeps are done.

When the latents are conditionally independent given the visibles (an RBM) one sweep
gives the exact posterior means, and mean-field learning is exact learning.

MF-PCD (Salakhutdinov and Hinton 2009, Algorithm 1) is :func:`~ugm_infer.learn.sap`
with this E-step as the positive phase (the data term
:math:`-\\partial_\\theta E(v, \\mu)`, which equals :math:`\\mathbb E_q[-\\partial_\\theta
E]` for multilinear energies) and persistent Gibbs chains for the negative phase.

References
----------
Peterson, C. and Anderson, J. R. (1987). A mean field theory learning algorithm for
neural networks. Complex Systems 1, 995-1019.
Welling, M. and Hinton, G. E. (2002). A new learning algorithm for mean field
Boltzmann machines. ICANN.
Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS
(section 3.1, eq. 6; Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Spin
from ugm_infer.learn.base import check_model, check_positive_int, resolve_visible
from ugm_infer.learn.phases import PositivePhase, latent_names

__all__ = ["MeanFieldInfo", "mean_field", "mean_field_positive_phase", "mfpcd"]


class MeanFieldInfo(NamedTuple):
    """Diagnostics of a mean-field solve (per datum when batched).

    num_iterations
        Sweeps done (int32).
    max_change
        Largest absolute change of a mean in the last sweep.
    converged
        ``max_change < tol``.
    """

    num_iterations: jax.Array
    max_change: jax.Array
    converged: jax.Array


def _check_float(value: Any, argname: str, low: float, high: float, *, closed_high: bool) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{argname}` must be a float, got {type(value).__name__}") from err
    ok = low <= out < high or (closed_high and out == high)
    if not np.isfinite(out) or not ok:
        bracket = "]" if closed_high else ")"
        raise ValueError(f"`{argname}` must be in [{low}, {high}{bracket}, got {value!r}")
    return out


def _latent_blocks(model, latent: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """The model's blocks restricted to the latent variables (boolean masks per variable)."""
    if not model.has_structure:
        raise ValueError(
            f"model '{model.name}' has no declared blocks: call model.detect_structure(params) first "
            "(mean field updates the units of one block together)"
        )
    out = []
    for block in model.blocks:
        sel = {n: np.asarray(block.masks[n]) for n in latent if n in block.masks}
        if sel:
            out.append(sel)
    return out


def mean_field(
    model,
    visible: Any = None,
    *,
    damping: float = 0.0,
    tol: float = 1e-5,
    max_iterations: int = 100,
) -> Callable:
    """Naive mean-field fixed point :math:`q(h \\mid v)` (see the module docstring).

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel` with ``multilinear=True`` and known blocks,
        latent variables Binary or Spin.
    visible
        The observed variables (default ``model.visible``, see
        :func:`~ugm_infer.learn.base.resolve_visible`).
    damping
        Fraction of the old mean kept at each update, in ``[0, 1)`` (0: plain
        fixed-point iteration).
    tol
        Convergence threshold on the largest change of a mean in one sweep (> 0).
    max_iterations
        Maximum number of sweeps (a positive int).

    Returns
    -------
    ``solve(params, v, init_means=None) -> (means, MeanFieldInfo)`` for ONE datum
    ``v = {visible name: array}`` (vmap it over a batch).  ``means`` is
    ``{latent name: array}`` (probabilities of 1 for binary units, expected spins for
    spins); ``init_means`` defaults to 0.5 (binary) / 0 (spins).
    """
    check_model(model)
    visible = resolve_visible(model, visible)
    latent = latent_names(model, visible)
    if not latent:
        raise ValueError(f"model '{model.name}' has no latent variables given visible={list(visible)}")
    for n in latent:
        if not isinstance(model.variables[n], (Binary, Spin)):
            raise ValueError(f"mean field needs Binary or Spin latent variables; '{n}' is {model.variables[n]!r}")
    blocks = _latent_blocks(model, latent)
    if not model.multilinear:
        raise ValueError(f"mean field needs an energy affine in each unit (multilinear=True); model '{model.name}' is not")
    damping = _check_float(damping, "damping", 0.0, 1.0, closed_high=False)
    tol = _check_float(tol, "tol", 0.0, np.inf, closed_high=False)
    if tol <= 0:
        raise ValueError(f"`tol` must be > 0, got {tol}")
    max_iterations = check_positive_int(max_iterations, "max_iterations")
    is_spin = {n: isinstance(model.variables[n], Spin) for n in latent}

    def default_means(v):
        dt = jnp.result_type(jnp.asarray(jax.tree.leaves(v)[0]).dtype, jnp.float32)
        return {n: jnp.full(model.variables[n].shape, 0.0 if is_spin[n] else 0.5, dt) for n in latent}

    def solve(params, v, init_means=None):
        means = default_means(v) if init_means is None else {n: jnp.asarray(init_means[n]) for n in latent}
        dt = jax.tree.leaves(means)[0].dtype
        means = {n: x.astype(dt) for n, x in means.items()}
        v = {n: jnp.asarray(v[n]) for n in visible}
        lam = 1.0 - damping

        def field(mu):
            return jax.tree.map(jnp.negative, jax.grad(lambda m: model.energy(params, {**v, **m}))(mu))

        def sweep(mu):
            for blk in blocks:
                f = field(mu)
                new = {}
                for n in latent:
                    if n not in blk:
                        new[n] = mu[n]
                        continue
                    target = jnp.tanh(f[n]) if is_spin[n] else jax.nn.sigmoid(f[n])
                    upd = (1.0 - lam) * mu[n] + lam * target.astype(dt)
                    new[n] = jnp.where(blk[n], upd, mu[n])
                mu = new
            return mu

        def cond(carry):
            _, it, change = carry
            return (it < max_iterations) & (change >= tol)

        def body(carry):
            mu, it, _ = carry
            new = sweep(mu)
            change = jnp.max(jnp.stack([jnp.max(jnp.abs(new[n] - mu[n])) for n in latent]))
            return new, it + 1, change

        mu, it, change = jax.lax.while_loop(cond, body, (means, jnp.int32(0), jnp.asarray(jnp.inf, dt)))
        return mu, MeanFieldInfo(it, change, change < tol)

    return solve


def mean_field_positive_phase(
    model,
    visible: Any = None,
    *,
    damping: float = 0.0,
    tol: float = 1e-5,
    max_iterations: int = 100,
) -> PositivePhase:
    """Positive phase from the mean-field posterior: :math:`-\\partial_\\theta \\frac1B \\sum_b E(v_b, \\mu_b)`.

    A :class:`~ugm_infer.learn.PositivePhase` for :func:`~ugm_infer.learn.sap`; its
    ``aux_state`` is the :class:`MeanFieldInfo` of the last batch, summarised over
    its data (most sweeps, largest final change, whether all converged), so
    convergence can be read from ``state.aux_state``.  Arguments as in
    :func:`mean_field`.
    """
    visible = resolve_visible(model, visible)
    solve = mean_field(model, visible, damping=damping, tol=tol, max_iterations=max_iterations)

    def batch_means(params, batch):
        params = jax.lax.stop_gradient(params)
        return jax.vmap(lambda v: solve(params, v))(batch)

    def summary(info):
        return MeanFieldInfo(jnp.max(info.num_iterations), jnp.max(info.max_change), jnp.all(info.converged))

    def init(rng_key, params, data):
        del rng_key, data
        dummy = {n: jnp.zeros((1,) + model.variables[n].shape, model.variables[n].dtype) for n in visible}
        info = jax.eval_shape(lambda p, b: summary(batch_means(p, b)[1]), params, dummy)
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info)

    def update(rng_key, params, batch, aux_state):
        del rng_key, aux_state
        means, info = batch_means(params, batch)
        full = {**batch, **means}

        def mean_energy(p):
            return jnp.mean(jax.vmap(lambda s: model.energy(p, s))(full))

        grad = jax.grad(lambda p: -mean_energy(p))(params)
        return grad, summary(info)

    return PositivePhase(init, update, f"mean_field(damping={damping}, tol={tol}, max_iterations={max_iterations})")


def mfpcd(
    model,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    num_sweeps: int = 1,
    damping: float = 0.0,
    tol: float = 1e-5,
    max_iterations: int = 100,
    visible: Any = None,
    negative_phase: str = "energy",
    init_particles: dict | None = None,
    kernel: Any = None,
):
    """Mean-field persistent contrastive divergence (Salakhutdinov and Hinton 2009, Algorithm 1).

    Each update: (1) the mean-field E-step :func:`mean_field` on the minibatch gives
    :math:`\\mu_b \\approx \\mathbb E[h \\mid v_b]`; (2) ``num_particles`` persistent
    chains take ``num_sweeps`` block-Gibbs sweeps at the current parameters; (3) the
    parameters take an optax step along
    :math:`-\\partial_\\theta \\overline{E(v_b, \\mu_b)} + \\partial_\\theta
    \\overline{E(x^{(m)})}`.

    Parameters
    ----------
    model
        A multilinear :class:`~ugm_infer.EnergyModel` with latent Binary/Spin variables
        (:func:`~ugm_infer.models.dbm`, :func:`~ugm_infer.models.grid_hidden`,
        :func:`~ugm_infer.models.rbm` with ``visible="v"``).
    optimizer, num_particles, visible, negative_phase, init_particles
        As in :func:`~ugm_infer.learn.sap` (``negative_phase`` defaults to the joint
        energy of the particles, which every model has).
    num_sweeps
        Block-Gibbs sweeps of the persistent chains per update.
    damping, tol, max_iterations
        Mean-field solver settings (:func:`mean_field`).
    kernel
        Optional transition operator of the persistent chains in any form
        :func:`~ugm_infer.learn.sap` accepts (then ``num_sweeps`` is unused); default
        block Gibbs with ``num_sweeps`` sweeps.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` named ``"mfpcd"`` (state
    :class:`~ugm_infer.learn.SAPState`; ``state.aux_state`` holds the last batch's
    :class:`MeanFieldInfo`).

    Notes
    -----
    The mean-field data term is biased when the latent units are strongly coupled given
    the visibles (a factorised :math:`q` cannot represent their correlations); the
    learner then climbs the variational bound, not the likelihood.  Compare
    :func:`ugm_infer.learn.apcd`.
    """
    from ugm_infer.kernels.gibbs import build_kernel
    from ugm_infer.kernels.gibbs import init as gibbs_init
    from ugm_infer.learn.sap import sap

    check_model(model)
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    positive = mean_field_positive_phase(model, visible, damping=damping, tol=tol, max_iterations=max_iterations)

    class _Gibbs:
        init = staticmethod(gibbs_init)

        @staticmethod
        def build_kernel(model, params=None):
            return build_kernel(model, "block", num_sweeps, params=params)

    return sap(
        model,
        _Gibbs if kernel is None else kernel,
        optimizer,
        num_particles,
        visible=visible,
        positive_phase=positive,
        negative_phase=negative_phase,
        init_particles=init_particles,
        name="mfpcd",
    )
