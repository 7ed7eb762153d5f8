"""PSMC's particles against exact enumeration: the re-initialised half is tempered from the uniform.

Xiong, Szedmak and Piater (2016, section 5) keep half of the particles of
:math:`p(x;\\theta_t)` and re-initialise the other half uniformly at every update.
``ui.learn.psmc`` carries the kept half along the bridges
:math:`p_t^{1-\\beta} p_{t+1}^{\\beta}` (eq. 27) and the fresh half along
:math:`U^{1-\\beta} p_{t+1}^{\\beta}` (eq. 28, tempering from the uniform), with one
ESS-chosen sequence of :math:`\\beta` for both; at :math:`\\beta = 1` both halves
target :math:`p(x;\\theta_{t+1})` and are pooled.

The test: a bimodal 8-spin Boltzmann machine (couplings 0.3 between all pairs, no
fields; single-site block Gibbs rarely crosses between the all-up and all-down
halves), a zero learning rate (the model stays put), 32 particles all started in the
all-up configuration.  After 8 updates a uniformly chosen particle of each of 1000
independent runs is an iid draw of the law of PSMC's particles; a Pearson chi-square
test (``stat_utils``, alpha = 1e-6, cells pooled below 5 expected) checks it against
the exact distribution (measured: 12.0 against the threshold 61.9, 18 degrees of
freedom; half of the draws in the all-down half).  The earlier implementation (the
fresh draws weighted by :math:`e^{-E(x;\\theta_t)}` as an importance sample of
:math:`p(x;\\theta_t)`, no tempering, one bridge per update) left 38% of the draws
in the all-down half after 8 updates; the same test rejects it (chi-square 108.9,
TV 0.16).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.models.ising import ising

N_SPINS = 8
COUPLING = 0.3
NUM_RUNS = 1000
NUM_PARTICLES = 32
NUM_UPDATES = 8


def _params():
    w = np.full((N_SPINS, N_SPINS), COUPLING) - COUPLING * np.eye(N_SPINS)
    return {"W": jnp.asarray(w, jnp.float32), "h": jnp.zeros(N_SPINS, jnp.float32)}


def _exact_probs(model, params):
    """Exact probabilities in the order of ``stat_utils.state_index``."""
    return ui.exact.distribution(model, params)[1]


def _runs(learner, params, num_updates, seed=0):
    """``num_updates`` PSMC updates in each of ``NUM_RUNS`` independent runs; one random particle per run."""
    batch = {"s": jnp.ones((4, N_SPINS), jnp.float32)}  # the data term is irrelevant at a zero learning rate

    def one(key):
        key_init, key_run, key_pick = jax.random.split(key, 3)
        state = learner.init(key_init, params)

        def body(state, k):
            return learner.step(k, state, batch)

        state, info = jax.lax.scan(body, state, jax.random.split(key_run, num_updates))
        pick = jax.random.randint(key_pick, (), 0, NUM_PARTICLES)
        return jax.tree.map(lambda x: x[pick], state.particles), info.num_bridges

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), NUM_RUNS))


def test_psmc_particles_match_exact_distribution_from_one_mode():
    model = ising(N_SPINS)
    params = _params()
    probs = _exact_probs(model, params)
    all_up = {"s": jnp.ones((NUM_PARTICLES, N_SPINS), jnp.float32)}
    learner = ui.learn.psmc(model, None, optax.sgd(0.0), NUM_PARTICLES, init_particles=all_up)
    draws, bridges = _runs(learner, params, NUM_UPDATES)
    index = state_index(draws, model)
    magnet = np.asarray(draws["s"]).sum(-1)
    print(f"fraction in the all-down half {np.mean(magnet < 0):.3f}; bridges per update {np.asarray(bridges).mean():.2f}")
    assert_distribution_matches(index, probs, label="PSMC particles after 8 updates")
    # the fresh half is tempered from the uniform: more than one bridge per update on this peaked model
    assert float(np.asarray(bridges).mean()) > 2.0
    # power: the starting configuration alone (the law the particles start from) is rejected
    assert_distribution_differs(np.full(NUM_RUNS, int(state_index(jax.tree.map(lambda x: x[:1], all_up), model)[0])), probs)


@pytest.mark.slow
def test_psmc_without_reinitialisation_stays_in_its_mode():
    """reinit_fraction=0: only the kept particles, bridged between identical models (one bridge, one Gibbs
    sweep per update): they stay in the all-up half, and the same chi-square test rejects them."""
    model = ising(N_SPINS)
    params = _params()
    probs = _exact_probs(model, params)
    all_up = {"s": jnp.ones((NUM_PARTICLES, N_SPINS), jnp.float32)}
    learner = ui.learn.psmc(model, None, optax.sgd(0.0), NUM_PARTICLES, reinit_fraction=0.0, init_particles=all_up)
    draws, bridges = _runs(learner, params, NUM_UPDATES)
    np.testing.assert_array_equal(np.asarray(bridges), 1)  # identical models: the whole step at once
    assert np.mean(np.asarray(draws["s"]).sum(-1) < 0) < 0.05
    assert_distribution_differs(state_index(draws, model), probs, label="PSMC without re-initialisation")


def test_psmc_initial_particles_are_draws_of_p_theta0():
    """Without ``init_particles`` the first gradient's particles are tempered from the uniform to p(x; theta_0)."""
    model = ising(N_SPINS)
    params = _params()
    probs = _exact_probs(model, params)
    learner = ui.learn.psmc(model, None, optax.sgd(0.0), NUM_PARTICLES)

    def one(key):
        key_init, key_pick = jax.random.split(key)
        particles = learner.init(key_init, params).particles
        return jax.tree.map(lambda x: x[jax.random.randint(key_pick, (), 0, NUM_PARTICLES)], particles)

    draws = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(5), NUM_RUNS))
    assert_distribution_matches(state_index(draws, model), probs, label="PSMC initial particles")
    # uniform draws (what init returned before) are rejected by the same test
    uniform = model.random_state(jax.random.key(5), NUM_RUNS)
    assert_distribution_differs(state_index(uniform, model), probs, label="uniform draws")
