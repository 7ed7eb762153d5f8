"""Regression test: ``pf_mcmc_mle`` starts from an importance sample of p(x; theta_0).

Before the fix, ``init`` drew the particles uniformly and gave them *uniform* weights,
i.e. treated uniform draws as draws from :math:`p(x;\\theta_0)` whatever
:math:`\\theta_0`.  The ESS of uniform weights is ``S``, so no update resampled or
rejuvenated until the parameter trail itself lowered the ESS, and from a peaked
:math:`\\theta_0 \\sim \\mathcal N(0, 1)` on 15 spins the learner stayed at a test
log-likelihood of -27 for 1000 updates (examples/vbm_particle_filter.py, init 0).
Now the uniform draws carry the importance weights :math:`e^{-E(x;\\theta_0)}`.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.models.ising import ising

N_SPINS = 5


def _peaked_params(seed=0):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.normal(size=(N_SPINS, N_SPINS)), 1)
    return {"W": jnp.asarray(upper + upper.T, jnp.float32), "h": jnp.asarray(rng.normal(size=N_SPINS), jnp.float32)}


def test_initial_weights_are_an_importance_sample_of_p_theta0():
    model = ising(N_SPINS)
    params = _peaked_params()
    num = 20000
    learner = ui.learn.pf_mcmc_mle(model, None, optax.sgd(0.01), num)
    state = learner.init(jax.random.key(0), params)
    x = np.asarray(state.particles["s"], np.float64)
    w = np.exp(np.asarray(state.log_weights, np.float64))
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-4)
    # exact E[x_i] under theta_0 by enumerating the 32 states
    configs = {"s": jnp.asarray(list(itertools.product([-1.0, 1.0], repeat=N_SPINS)), jnp.float32)}
    log_p = -np.asarray(model.energies(params, configs), np.float64)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    exact_mean = p @ np.asarray(configs["s"], np.float64)
    assert np.abs(exact_mean).max() > 0.3  # theta_0 is far from flat: uniform weights would be wrong
    estimate = w @ x
    # self-normalised IS standard error of each coordinate: sqrt(sum_j w_j^2 (x_j - mean)^2)
    se = np.sqrt((w[:, None] ** 2 * (x - estimate) ** 2).sum(0))
    assert np.all(np.abs(estimate - exact_mean) < 5 * se + 1e-6), (estimate, exact_mean, se)
    # the old behaviour (uniform weights) is rejected by the same bound
    uniform_mean = x.mean(0)
    assert np.any(np.abs(uniform_mean - exact_mean) > 5 * se)


def test_first_update_resamples_from_a_peaked_start_but_not_from_a_flat_one():
    model = ising(N_SPINS)
    learner = ui.learn.pf_mcmc_mle(model, None, optax.sgd(1e-4), 200)
    batch = {"s": jnp.ones((4, N_SPINS), jnp.float32)}
    step = jax.jit(learner.step)
    for params, expect in ((_peaked_params(), True), (jax.tree.map(jnp.zeros_like, _peaked_params()), False)):
        state = learner.init(jax.random.key(1), params)
        _, info = step(jax.random.key(2), state, batch)
        assert bool(info.resampled) is expect
        if not expect:
            np.testing.assert_allclose(float(info.ess), 200.0, rtol=1e-4)
