"""Trans-SAP and PT-SAP: SAP with tempered kernels reaches the exact MLE; schedules are exact."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest
from test_learn import avg_ll, full_batch, run, sk_problem, theta_of, zero_params

import ugm_infer as ui


@pytest.fixture(scope="module")
def problem():
    return sk_problem()


def test_pt_sap_reaches_the_mle(problem):
    learner = ui.learn.pt_sap(
        problem.model, optax.sgd(ui.learn.robbins_monro(40.0, 100.0)), num_particles=50, betas=np.linspace(0.5, 1.0, 4)
    )
    state, _, _ = run(learner, zero_params(problem.n), full_batch(problem), 1500)
    theta = theta_of(state.params)
    gap = problem.ll_mle - avg_ll(problem, theta)
    ratio = np.abs(theta - problem.theta_mle) / problem.se_mle
    print(f"PT-SAP gap {gap:.5f}; |dtheta|/se max {ratio.max():.3f}")
    assert 0 <= gap < 0.02 and ratio.max() < 1.0
    # the replicas persist across updates: walkers made round trips over 1500 updates
    assert state.kernel_state.position["s"].shape == (50, 4, problem.n)
    assert int(state.kernel_state.round_trips.sum()) > 0
    # the gradient particles are the beta = 1 replicas
    np.testing.assert_array_equal(state.particles["s"], state.kernel_state.position["s"][:, -1])


def test_trans_sap_schedule_and_mle(problem):
    every, start = 7, 20
    learner = ui.learn.trans_sap(
        problem.model,
        optax.sgd(ui.learn.robbins_monro(40.0, 100.0)),
        num_particles=100,
        betas=ui.kernels.tempered_transitions.uniform_ladder(5, 0.8),
        gibbs_per_tt=every,
        tt_start=start,
    )
    state = learner.init(jax.random.key(0), zero_params(problem.n))
    batch = full_batch(problem)(0)

    @jax.jit
    def go(state, key):
        def body(state, k):
            state, info = learner.step(k, state, batch)
            return state, (info.kernel_info.extra_ran, info.kernel_info.extra.acceptance_probability.mean())

        return jax.lax.scan(body, state, jax.random.split(key, 1500))

    state, (ran, acceptance) = go(state, jax.random.key(1))
    ran = np.asarray(ran)
    steps = np.arange(1500)
    np.testing.assert_array_equal(ran, (steps >= start) & ((steps - start) % every == 0))
    assert np.all(np.asarray(acceptance)[~ran] == 0) and np.asarray(acceptance)[ran].mean() > 0.05
    theta = theta_of(state.params)
    gap = problem.ll_mle - avg_ll(problem, theta)
    print(f"Trans-SAP gap {gap:.5f}; TT acceptance {np.asarray(acceptance)[ran].mean():.3f}")
    assert 0 <= gap < 0.02


def test_tempered_learners_bad_input(problem):
    with pytest.raises(ValueError, match="gibbs_per_tt"):
        ui.learn.trans_sap(problem.model, gibbs_per_tt=0)
    with pytest.raises(ValueError, match="tt_start"):
        ui.learn.trans_sap(problem.model, tt_start=-1)
    with pytest.raises(ValueError, match="increasing"):
        ui.learn.pt_sap(problem.model, betas=[1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="Alternate.every"):
        ui.learn.sap(problem.model, ui.learn.Alternate(None, None, 0))
    with pytest.raises(ValueError, match="Persistent"):
        learner = ui.learn.sap(
            problem.model, ui.learn.Alternate(ui.learn.parallel_tempering_kernel(problem.model, [0.5, 1.0]), None, 3)
        )
        learner.init(jax.random.key(0), zero_params(problem.n))
