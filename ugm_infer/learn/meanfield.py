"""Mean-field persistent contrastive divergence (MF-PCD) and its positive phase.

The naive mean-field E-step (:func:`ugm_infer.latent.mean_field`, re-exported here)
approximates the posterior of the latent units given the visibles by a product of
independent Bernoullis (or spins) :math:`q(h \\mid v) = \\prod_j q_j(h_j)` with
means :math:`\\mu_j`.  For energies affine in each unit (every pairwise/bilinear
model) :math:`\\mathbb E_q[-\\partial_\\theta E(v, h)] = -\\partial_\\theta E(v,
\\mu)`, which :func:`mean_field_positive_phase` uses as the data term.

MF-PCD (Salakhutdinov and Hinton 2009, Algorithm 1) is :func:`~ugm_infer.learn.sap`
with this positive phase and persistent Gibbs chains for the negative phase.  When the
latents are conditionally independent given the visibles (an RBM) one sweep gives the
exact posterior means, and mean-field learning is exact learning.

References
----------
Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS
(section 3.1, eq. 6; Algorithm 1).  The mean-field references are in
:mod:`ugm_infer.latent`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ugm_infer.latent import MeanFieldInfo, mean_field
from ugm_infer.learn.base import Learner, check_model, resolve_visible
from ugm_infer.learn.particles import gibbs_builder
from ugm_infer.learn.phases import PositivePhase
from ugm_infer.learn.sap import sap

__all__ = ["MeanFieldInfo", "mean_field", "mean_field_positive_phase", "mfpcd"]


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
) -> Learner:
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
    check_model(model)
    gibbs = gibbs_builder(model, "block", num_sweeps)
    positive = mean_field_positive_phase(model, visible, damping=damping, tol=tol, max_iterations=max_iterations)
    return sap(
        model,
        gibbs if kernel is None else kernel,
        optimizer,
        num_particles,
        visible=visible,
        positive_phase=positive,
        negative_phase=negative_phase,
        init_particles=init_particles,
        name="mfpcd",
    )
