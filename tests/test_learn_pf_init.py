"""Regression test: ``pf_mcmc_mle`` starts from MCMC draws of p(x; theta_0) (Alg. 2, line 1).

Before the fix, ``init`` drew the particles uniformly and gave them uniform weights,
i.e. treated uniform draws as draws from :math:`p(x;\\theta_0)` whatever
:math:`\\theta_0`.  The ESS of uniform weights is ``S``, so no update rejuvenated until
the parameter trail itself lowered the ESS; from a peaked
:math:`\\theta_0 \\sim \\mathcal N(0, 1)` on 15 spins the learner stayed at a test
log-likelihood of -27 for 1000 updates (examples/vbm_particle_filter.py, init 0).
Now ``init`` moves the uniform draws by ``num_burnin_steps`` kernel steps at
:math:`\\theta_0`: with enough steps the particles are independent draws of
:math:`p(x;\\theta_0)`, which a chi-square test against exact enumeration checks.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.models.ising import ising

N_SPINS = 5


def _peaked_params(seed=0):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.normal(size=(N_SPINS, N_SPINS)), 1)
    return {"W": jnp.asarray(upper + upper.T, jnp.float32), "h": jnp.asarray(rng.normal(size=N_SPINS), jnp.float32)}


def _exact_probs(model, params):
    configs = {"s": jnp.asarray(list(itertools.product([-1.0, 1.0], repeat=N_SPINS)), jnp.float32)}
    log_p = -np.asarray(model.energies(params, configs), np.float64)
    p = np.exp(log_p - log_p.max())
    probs = np.zeros(2**N_SPINS)
    probs[state_index(configs, model)] = p / p.sum()
    return probs


def test_initial_particles_are_draws_of_p_theta0():
    model = ising(N_SPINS)
    params = _peaked_params()
    num = 4000
    # 400 block-Gibbs sweeps of 4000 independent chains (this theta_0 mixes slowly: after
    # 30 sweeps the chi-square test still rejects; after 200 it no longer does)
    learner = ui.learn.pf_mcmc_mle(model, None, optax.sgd(0.01), num, num_burnin_steps=400)
    state = learner.init(jax.random.key(0), params)
    np.testing.assert_allclose(np.asarray(state.log_weights), -np.log(num), rtol=1e-6)
    probs = _exact_probs(model, params)
    assert_distribution_matches(state_index(state.particles, model), probs, label="PF initial particles")
    # the old initial particles (uniform draws, uniform weights) are rejected by the same test
    uniform = model.random_state(jax.random.key(0), num)
    assert_distribution_differs(state_index(uniform, model), probs, label="uniform draws")


def test_init_particles_and_unit_weights_are_left_alone():
    model = ising(N_SPINS)
    params = _peaked_params()
    given = model.random_state(jax.random.key(3), 16)
    state = ui.learn.pf_mcmc_mle(model, None, None, 16, init_particles=given).init(jax.random.key(1), params)
    np.testing.assert_array_equal(np.asarray(state.particles["s"]), np.asarray(given["s"]))
    # unit weights (Alg. 3, PCD) keep sap's initial particles: uniform draws, no burn-in
    pcd = ui.learn.pf_mcmc_mle(model, None, None, 16, unit_weights=True).init(jax.random.key(1), params)
    sap = ui.learn.pcd(model, None, 16).init(jax.random.key(1), params)
    np.testing.assert_array_equal(np.asarray(pcd.particles["s"]), np.asarray(sap.particles["s"]))
    for bad in (0, -1, 2.5):
        with pytest.raises((ValueError, TypeError), match="num_burnin_steps"):
            ui.learn.pf_mcmc_mle(model, num_burnin_steps=bad)
