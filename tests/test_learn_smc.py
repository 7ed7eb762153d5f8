"""Importance-weighted and SMC learners: MCMC-MLE, PF-MCMC-MLE, PSMC, standard SMC.

Ground truth is the exact MLE of a fully visible 10-spin Boltzmann machine fitted to 500
exact draws (``bm_problem(10, 0, 1/3, 0, 0.5, 0)`` of ``test_learn``: enumeration of all
1024 states in float64, L-BFGS + Newton).  The gap is ``ll(MLE) - ll(learned)`` in
nats per sample.  The learners' own Monte-Carlo error sets the tolerance: a learner
whose gradient uses a frozen importance-weighted particle set of effective size ``S``
(MCMC-MLE, PF between resamplings) has an expected gap of about ``d / (2 S)`` with
``d = 55`` parameters (2000 particles: ~0.014 nats); the tolerance is 0.05 for
MCMC-MLE and 0.02 for PF-MCMC-MLE (ESS threshold 0.99: it resamples and rejuvenates
often, so its particle set keeps changing) and PSMC (particles move at every update,
as in PCD).  Measured (seeds as below): MCMC-MLE 0.013, PF-MCMC-MLE 0.006, PSMC 0.0014
(0.28 when the re-initialised particles were naively counted as draws from the
current model, see :mod:`ugm_infer.learn.psmc`; 0.003 when they were weighted as an
importance sample of it instead of tempered from the uniform).  Every run is one
jitted ``lax.scan`` with fixed seeds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_learn import avg_ll, bm_problem, full_batch, log_z, params_of, theta_of, zero_params

import ugm_infer as ui
from ugm_infer.learn.psmc import bisect_delta, conditional_ess


@pytest.fixture(scope="module")
def problem():
    return bm_problem(10, 0.0, 1.0 / 3.0, 0.0, 0.5, 0)


def scan_run(learner, params, batch, num_steps, info_fn, seed=0):
    """``num_steps`` updates in one jitted scan; returns the final state and ``info_fn`` of each info."""
    state = learner.init(jax.random.key(seed), params)

    @jax.jit
    def go(state, key):
        def body(state, k):
            state, info = learner.step(k, state, batch)
            return state, info_fn(info)

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    return go(state, jax.random.key(seed + 1))


def gap_of(problem, params):
    theta = theta_of(params)
    return problem.ll_mle - avg_ll(problem, theta), np.abs(theta - problem.theta_mle) / problem.se_mle


# ----------------------------------------------------------------------------------
# reaching the exact MLE
# ----------------------------------------------------------------------------------
def test_mcmc_mle_reaches_the_mle(problem):
    """2000 particles, 5 block-Gibbs sweeps per round, rounds of <= 50 sgd(0.3) updates."""
    learner = ui.learn.mcmc_mle(
        problem.model, None, optax.sgd(0.3), 2000, num_mcmc_steps=5, grad_threshold=1e-3, max_inner_steps=50
    )
    assert learner.name == "mcmc_mle"
    state, (resampled, ess, l1) = scan_run(
        learner, zero_params(problem.n), full_batch(problem)(0), 500, lambda i: (i.resampled, i.ess, i.grad_l1)
    )
    gap, ratio = gap_of(problem, state.params)
    resampled = np.asarray(resampled)
    print(f"MCMC-MLE gap {gap:.4f}; |dtheta|/se max {ratio.max():.2f}; rounds {int(state.round)}")
    assert 0 <= gap < 0.05
    # a round starts at step 0 and whenever the previous one ended; rounds last <= 50 updates
    assert resampled[0] and int(state.round) == resampled.sum() >= 10
    starts = np.flatnonzero(resampled)
    assert np.all(np.diff(starts) == 50)  # the L1 threshold 1e-3 is never reached here
    # at the start of a round the weights are uniform (ESS = S)
    np.testing.assert_allclose(np.asarray(ess)[resampled], 2000.0, rtol=1e-4)
    assert np.all(np.isfinite(np.asarray(l1)))


def test_pf_mcmc_mle_reaches_the_mle(problem):
    """1000 particles, ESS threshold 0.99, 2 rejuvenation sweeps, steps 40 / (100 + t)."""
    learner = ui.learn.pf_mcmc_mle(
        problem.model,
        None,
        optax.sgd(ui.learn.robbins_monro(40.0, 100.0)),
        1000,
        ess_threshold=0.99,
        num_rejuvenation_steps=2,
    )
    assert learner.name == "pf_mcmc_mle"
    state, (resampled, ess) = scan_run(
        learner, zero_params(problem.n), full_batch(problem)(0), 1000, lambda i: (i.resampled, i.ess)
    )
    gap, ratio = gap_of(problem, state.params)
    resampled, ess = np.asarray(resampled), np.asarray(ess)
    print(f"PF-MCMC-MLE gap {gap:.4f}; |dtheta|/se max {ratio.max():.2f}; resampled {resampled.sum()} times")
    assert 0 <= gap < 0.02
    # resampling happens exactly when the tested ESS is below the threshold
    np.testing.assert_array_equal(resampled, ess < 0.99 * 1000)
    assert int(state.num_resampled) == resampled.sum() > 0
    assert abs(float(jax.scipy.special.logsumexp(state.log_weights))) < 1e-4


# about 30 s: in the default run PSMC is covered by the exact particle-system tests of test_psmc_bridges.py and by
# the quick examples vbm_learning_rates and psmc_rbm, which CI compares with their references
@pytest.mark.slow
def test_psmc_reaches_the_mle(problem):
    """200 particles, half re-initialised every update, sigma* = 0.9, steps 40 / (100 + t)."""
    learner = ui.learn.psmc(problem.model, None, optax.sgd(ui.learn.robbins_monro(40.0, 100.0)), 200)
    assert learner.name == "psmc"
    state, (bridges, fresh_ess, capped) = scan_run(
        learner, zero_params(problem.n), full_batch(problem)(0), 1000, lambda i: (i.num_bridges, i.fresh_ess, i.capped)
    )
    gap, ratio = gap_of(problem, state.params)
    bridges = np.asarray(bridges)
    print(f"PSMC gap {gap:.4f}; |dtheta|/se max {ratio.max():.2f}; bridges mean {bridges.mean():.3f} max {bridges.max()}")
    assert 0 <= gap < 0.02
    assert bridges.min() >= 1 and not np.asarray(capped).any()
    # the re-initialised half is tempered from the uniform: several bridges per update (7.9 measured),
    # about as many temperatures as standard SMC needs on this model
    assert bridges.mean() > 3.0
    assert np.all((np.asarray(fresh_ess) >= 1.0 - 1e-3) & (np.asarray(fresh_ess) <= 100.0 + 1e-3))


def test_smc_learner_log_normalizer_and_gradient(problem):
    """Standard SMC at the exact MLE: log Z estimate close to the exact one, small gradient."""
    learner = ui.learn.smc_learner(problem.model, None, optax.sgd(0.0), 500)
    assert learner.name == "smc"
    params = params_of(problem.theta_mle, problem.n)
    state, (lz, bridges, ess, grad_norm) = scan_run(
        learner, params, full_batch(problem)(0), 4, lambda i: (i.log_normalizer, i.num_bridges, i.ess, i.grad_norm)
    )
    exact = log_z(problem.features, problem.theta_mle)
    print(f"SMC log Z {np.asarray(lz)} exact {exact:.4f}; bridges {np.asarray(bridges)}")
    assert abs(float(np.mean(lz)) - exact) < 0.1
    assert np.all(np.asarray(bridges) > 1) and np.all(np.asarray(ess) > 0.5 * 500)
    # at the MLE the gradient is pure Monte-Carlo noise of ~500 weighted particles (55 params)
    assert float(np.max(grad_norm)) < 0.6


# ----------------------------------------------------------------------------------
# PCD as PF with unit weights (Asuncion et al. 2010, Algorithm 3)
# ----------------------------------------------------------------------------------
def test_pf_with_unit_weights_is_pcd(problem):
    """Same keys -> bit-identical parameters and particles after every one of 25 updates."""
    opt = optax.sgd(ui.learn.robbins_monro(40.0, 100.0))
    pcd = ui.learn.pcd(problem.model, opt, 64)
    pf = ui.learn.pf_mcmc_mle(problem.model, None, opt, 64, unit_weights=True)
    batch = full_batch(problem)(0)

    def trail(learner):
        state = learner.init(jax.random.key(3), zero_params(problem.n))

        @jax.jit
        def go(state, key):
            def body(s, k):
                s, _ = learner.step(k, s, batch)
                return s, (s.params, s.particles)

            return jax.lax.scan(body, state, jax.random.split(key, 25))

        return go(state, jax.random.key(4))[1]

    a, b = trail(pcd), trail(pf)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # and the parameters did move
    assert float(jnp.abs(a[0]["W"][-1]).max()) > 0.05


# ----------------------------------------------------------------------------------
# infos, log-space weights at huge energy scales
# ----------------------------------------------------------------------------------
def test_high_ess_means_no_resampling(problem):
    """A tiny learning rate keeps the weights near uniform: no resampling, no kernel cost."""
    learner = ui.learn.pf_mcmc_mle(problem.model, None, optax.sgd(1e-4), 100)
    state, (resampled, ess, changed) = scan_run(
        learner,
        zero_params(problem.n),
        full_batch(problem)(0),
        10,
        lambda i: (i.resampled, i.ess, i.kernel_info.num_changed),
    )
    assert not np.asarray(resampled).any()
    assert np.all(np.asarray(ess) > 99.0)
    assert np.all(np.asarray(changed) == 0)  # the rejuvenation branch never ran
    assert np.any(np.abs(np.asarray(state.log_weights) + np.log(100.0)) > 1e-6)  # the weights did move


def test_mcmc_mle_rounds():
    """grad_threshold huge: every update ends a round (max_inner_steps: see the MLE test)."""
    problem = bm_problem(10, 0.0, 1.0 / 3.0, 0.0, 0.5, 0)
    batch = full_batch(problem)(0)
    for threshold, every in ((1e9, 1),):
        learner = ui.learn.mcmc_mle(problem.model, None, optax.sgd(0.05), 32, grad_threshold=threshold, max_inner_steps=3)
        state, (resampled, changed) = scan_run(
            learner, zero_params(problem.n), batch, 9, lambda i: (i.resampled, i.kernel_info.num_changed)
        )
        expected = np.arange(9) % every == 0
        np.testing.assert_array_equal(np.asarray(resampled), expected)
        assert np.all(np.asarray(changed)[~expected] == 0) and np.asarray(changed)[expected].sum() > 0
        assert int(state.round) == expected.sum() and int(state.step) == 9


def huge_params(n):
    rng = np.random.default_rng(0)
    w = np.triu(rng.normal(size=(n, n)) * 300.0, 1)
    return {"W": jnp.asarray(w + w.T, jnp.float32), "h": jnp.asarray(rng.normal(size=n) * 1000.0, jnp.float32)}


@pytest.mark.parametrize("which", ["mcmc_mle", "pf", "psmc"])
def test_weights_finite_at_energy_scale_1e4(problem, which):
    """Energies ~1e4 and parameter steps changing them by ~1e4: no overflow, no NaN."""
    opt = optax.sgd(100.0)
    model = problem.model
    if which == "mcmc_mle":
        learner = ui.learn.mcmc_mle(model, None, opt, 50, num_mcmc_steps=1, max_inner_steps=3)
        fn = lambda i: (i.ess, i.grad_norm)  # noqa: E731
    elif which == "pf":
        learner = ui.learn.pf_mcmc_mle(model, None, opt, 50)
        fn = lambda i: (i.ess, i.grad_norm)  # noqa: E731
    else:
        learner = ui.learn.psmc(model, None, opt, 50, max_bridges=8)
        fn = lambda i: (i.min_ess, i.grad_norm)  # noqa: E731
    params = huge_params(problem.n)
    energies = np.asarray(model.energies(params, {"s": jnp.asarray(problem.data[:50], jnp.float32)}))
    assert np.abs(energies).max() > 1e3
    state, (ess, grad_norm) = scan_run(learner, params, full_batch(problem)(0), 6, fn)
    ess = np.asarray(ess)
    assert np.all(np.isfinite(ess)) and np.all(ess >= 1.0 - 1e-3) and np.all(ess <= 50.0 + 1e-3)
    assert np.all(np.isfinite(np.asarray(grad_norm)))
    data = {"s": jnp.asarray(problem.data, jnp.float32)}
    energy_change = np.abs(np.asarray(model.energies(state.params, data) - model.energies(params, data)))
    assert energy_change.max() > 1e3  # the parameter steps moved the energies by thousands
    for leaf in jax.tree.leaves(state.params):
        assert np.all(np.isfinite(np.asarray(leaf)))
    if which == "pf":
        assert np.all(np.isfinite(np.asarray(state.log_weights)))
        assert abs(float(jax.scipy.special.logsumexp(state.log_weights))) < 1e-3


def test_bisection_hits_the_target_ess():
    rng = np.random.default_rng(0)
    inc = jnp.asarray(rng.normal(size=500) * 1e4, jnp.float32)  # huge increments
    log_w = jnp.full((500,), -np.log(500.0), jnp.float32)
    delta = bisect_delta(inc, log_w, jnp.float32(1.0), jnp.float32(450.0))
    assert 0 < float(delta) < 1e-3
    assert abs(float(conditional_ess(log_w, inc, delta)) - 450.0) < 5.0
    # small increments: the whole remaining step is allowed
    assert float(bisect_delta(inc * 1e-8, log_w, jnp.float32(0.25), jnp.float32(450.0))) == 0.25


# ----------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------
def test_bad_input(problem):
    model = problem.model
    for bad in (0.0, 1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="ess_threshold"):
            ui.learn.pf_mcmc_mle(model, ess_threshold=bad)
        with pytest.raises(ValueError, match="ess_threshold"):
            ui.learn.psmc(model, ess_threshold=bad)
        with pytest.raises(ValueError, match="ess_threshold"):
            ui.learn.smc_learner(model, ess_threshold=bad)
    for bad in (1.0, -0.1, 2.0):
        with pytest.raises(ValueError, match="reinit_fraction"):
            ui.learn.psmc(model, reinit_fraction=bad)
    for factory in (ui.learn.mcmc_mle, ui.learn.pf_mcmc_mle, ui.learn.psmc, ui.learn.smc_learner):
        with pytest.raises(ValueError, match="num_particles"):
            factory(model, num_particles=0)
    with pytest.raises(ValueError, match="weight_temperature"):
        ui.learn.pf_mcmc_mle(model, weight_temperature=0.0)
    with pytest.raises(ValueError, match="resampling"):
        ui.learn.pf_mcmc_mle(model, resampling="bogus")
    with pytest.raises(ValueError, match="grad_threshold"):
        ui.learn.mcmc_mle(model, grad_threshold=-1.0)
    with pytest.raises(ValueError, match="max_inner_steps"):
        ui.learn.mcmc_mle(model, max_inner_steps=0)
    with pytest.raises(ValueError, match="max_bridges"):
        ui.learn.psmc(model, max_bridges=0)
    with pytest.raises(TypeError, match="unit_weights"):
        ui.learn.pf_mcmc_mle(model, unit_weights="yes")
    learner = ui.learn.pf_mcmc_mle(model, num_particles=8)
    state = learner.init(jax.random.key(0), zero_params(problem.n))
    with pytest.raises(ValueError, match="batch"):
        learner.step(jax.random.key(1), state, {"s": jnp.zeros((4, 3))})
