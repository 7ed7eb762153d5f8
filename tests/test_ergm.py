"""ERGMs: change statistics, the edge-toggle kernel, MPLE and MCMC-MLE.

Ground truth is independent of the code under test where it matters: change
statistics are checked against differences of full energies; the kernel against the
Boltzmann distribution of all 64 graphs on 4 nodes (chi-square, alpha = 1e-6 from
``stat_utils``); the MPLE against scipy's BFGS on a design matrix built from energy
differences; MCMC-MLE against the closed form of the edges-only model.
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

sys.path.insert(0, os.path.dirname(__file__))

from stat_utils import assert_distribution_differs, assert_distribution_matches  # noqa: E402

from ugm_infer.models.ergm import (  # noqa: E402
    ergm,
    ergm_mcmc_mle,
    ergm_mple,
    ergm_toggle,
    from_adjacency,
    to_adjacency,
)

ALL_TERMS = ("edges", "kstar2", "kstar3", "triangles", ("gwesp", 0.5), ("gwd", 0.7), ("gwesp", 0.0))


def _toggled(y, k):
    yp, ym = y.copy(), y.copy()
    yp[k], ym[k] = 1, 0
    return yp, ym


def test_statistics_known_graph():
    # a triangle 0-1-2 with a pendant 2-3: 4 edges, 2-stars 1+1+3+0 = 5, 1 triangle
    model = ergm(4, ("edges", "kstar2", "triangles", ("gwesp", 0.5), ("gwd", 0.5)))
    A = np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]])
    g = np.asarray(model.statistics(from_adjacency(A)), np.float64)
    r = 1 - np.exp(-0.5)
    # edges 01, 02, 12 have one shared partner each, 23 none; degrees 2, 2, 3, 1
    gwesp = np.exp(0.5) * 3 * (1 - r)
    gwd = np.exp(0.5) * ((1 - r**2) * 2 + (1 - r**3) + (1 - r))
    np.testing.assert_allclose(g, [4, 5, 1, gwesp, gwd], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(to_adjacency(from_adjacency(A))), A)


def test_change_stats_equal_energy_differences():
    """delta_ij g(y) from change_stats == energy differences of the toggled graphs, over random graphs."""
    n = 7
    model = ergm(n, ALL_TERMS)
    rng = np.random.default_rng(0)
    theta = rng.normal(size=model.num_terms)
    params = model.params_from_theta(theta, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    energies = jax.jit(model.energies)
    statistics = jax.jit(lambda y: model.statistics(y))
    change = jax.jit(model.change_stats)
    change_lin = jax.jit(lambda A, i, j: model.change_stats(params, A, i, j))
    dyads = model.dyads
    for trial in range(40):
        density = rng.uniform(0.1, 0.9)
        y = (rng.uniform(size=model.num_dyads) < density).astype(np.int8)
        k = int(rng.integers(model.num_dyads))
        i, j = (int(v) for v in dyads[k])
        if trial % 2:
            i, j = j, i  # either orientation
        yp, ym = _toggled(y, k)
        stats = np.asarray(statistics(jnp.asarray(np.stack([yp, ym]))), np.float64)
        A = np.asarray(to_adjacency(jnp.asarray(y)))
        delta = np.asarray(change(None, A, i, j), np.float64)
        np.testing.assert_allclose(delta, stats[0] - stats[1], atol=1e-4, err_msg=f"trial {trial}")
        e = np.asarray(energies(params, {"y": jnp.asarray(np.stack([yp, ym]))}), np.float64)
        np.testing.assert_allclose(float(change_lin(A, i, j)), e[1] - e[0], atol=1e-3 * (1 + abs(e[1] - e[0])))


def _exact_probs(model, theta, beta=1.0):
    m = model.num_dyads
    ys = ((np.arange(2**m)[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.int8)
    g = np.asarray(model.statistics(jnp.asarray(ys)), np.float64)
    logp = beta * g @ np.asarray(theta, np.float64)
    p = np.exp(logp - logp.max())
    return p / p.sum()


def _index(ys):
    m = ys.shape[-1]
    return (np.asarray(ys, np.int64) * (2 ** np.arange(m - 1, -1, -1))).sum(-1)


def test_toggle_kernel_exact_against_enumeration():
    """4 nodes, 64 graphs: final states of 4000 independent chains match the exact law."""
    model = ergm(4, ("edges", "kstar2", "triangles", ("gwesp", 0.5), ("gwd", 0.3)))
    theta = np.array([-0.3, 0.4, -0.8, 0.9, -0.6])
    params = model.params_from_theta(theta)
    probs = _exact_probs(model, theta)
    beta = 0.7
    probs_beta = _exact_probs(model, theta, beta)
    num_chains, num_steps = 4000, 8

    def run(init_fn, kernel, logdensity, key):
        def chain(k):
            state = init_fn({"y": jnp.zeros(model.num_dyads, jnp.int8)}, logdensity)
            state, infos = jax.lax.scan(lambda s, kk: kernel(kk, s, logdensity), state, jax.random.split(k, num_steps))
            return state.position["y"], state

        return jax.jit(jax.vmap(chain))(jax.random.split(key, num_chains))

    cases = [
        ("gibbs/systematic", ergm_toggle.build_kernel(model), model.logdensity_fn(params), probs),
        (
            "metropolis/random",
            ergm_toggle.build_kernel(model, "random", "metropolis", 2 * model.num_dyads),
            model.logdensity_fn(params),
            probs,
        ),
        # an arbitrary log-density (not an ERGMLogDensity): the generic path, tempered
        (
            "gibbs/generic logdensity, beta 0.7",
            ergm_toggle.build_kernel(model),
            lambda x: -beta * model.energy(params, x),
            probs_beta,
        ),
    ]
    for c, (label, kernel, logdensity, target) in enumerate(cases):
        ys, state = run(ergm_toggle.init, kernel, logdensity, jax.random.key(c))
        idx = _index(np.asarray(ys))
        assert_distribution_matches(idx, target, label=label)
        # the caches equal what they cache after many toggles
        A = np.asarray(state.adjacency)
        np.testing.assert_array_equal(A, np.asarray(to_adjacency(ys.astype(jnp.int32))))
        np.testing.assert_array_equal(np.asarray(state.degrees), A.sum(-1))
        np.testing.assert_array_equal(np.asarray(state.shared_partners), A @ A)
    # power: the same draws are rejected against the untempered law
    assert_distribution_differs(idx, probs, label="beta 0.7 draws vs beta 1 law")


def _design_by_energy_differences(model, graphs):
    rows = []
    for y in graphs:
        for k in range(model.num_dyads):
            yp, ym = _toggled(y, k)
            g = np.asarray(model.statistics(jnp.asarray(np.stack([yp, ym]))), np.float64)
            rows.append(g[0] - g[1])
    return np.array(rows)


def test_mple_equals_logistic_regression():
    model = ergm(8, ("edges", "kstar2", "triangles", ("gwesp", 0.25)))
    rng = np.random.default_rng(3)
    graphs = (rng.uniform(size=(4, model.num_dyads)) < 0.4).astype(np.int8)
    fit = ergm_mple(model, graphs)
    assert fit.converged
    X = _design_by_energy_differences(model, graphs)
    t = graphs.reshape(-1).astype(np.float64)

    def nll(theta):
        eta = X @ theta
        return np.sum(np.logaddexp(0, eta) - t * eta)

    def grad(theta):
        return X.T @ (1 / (1 + np.exp(-(X @ theta))) - t)

    ref = optimize.minimize(nll, np.zeros(model.num_terms), jac=grad, method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(fit.theta, ref.x, atol=1e-5)
    # Newton reaches BFGS's optimum (BFGS stops on precision loss a hair above it); the two
    # design matrices agree to float32 rounding of the statistics (relative 1e-7)
    assert nll(fit.theta) <= ref.fun * (1 + 1e-6)
    assert abs(fit.log_pseudo_likelihood + nll(fit.theta)) < 1e-6 * ref.fun
    assert np.max(np.abs(grad(fit.theta))) < 1e-4
    # the edges-only MPLE is logit(density) in closed form
    edges_only = ergm(8, ("edges",))
    d = graphs.mean()
    np.testing.assert_allclose(ergm_mple(edges_only, graphs).theta, [np.log(d / (1 - d))], atol=1e-8)


def test_mcmc_mle_edges_only_closed_form():
    """Edges-only: theta_hat = logit(density), se = 1 / sqrt(m p (1 - p))."""
    n = 12
    model = ergm(n, ("edges",))
    m = model.num_dyads
    rng = np.random.default_rng(5)
    y = np.zeros(m, np.int8)
    y[rng.choice(m, 20, replace=False)] = 1
    p = 20 / m
    exact = np.log(p / (1 - p))
    S, t_tol = 2000, 0.1
    # start away from the answer so that the iterations have work to do
    fit = ergm_mcmc_mle(
        model, y, jax.random.key(0), theta0=[exact + 0.5], num_samples=S, num_chains=4, burn_in=20, thin=1, t_tol=t_tol
    )
    assert fit.converged and fit.num_iterations >= 1
    sd = np.sqrt(m * p * (1 - p))
    # converged: |g_obs - mean_sim| < t_tol sd, plus 4 Monte Carlo standard errors of the mean
    bound = (t_tol + 4 / np.sqrt(S)) / sd * 1.2  # 1.2: the mean's slope varies over the interval
    assert abs(fit.theta[0] - exact) < bound, (fit.theta, exact, bound)
    # standard error from the Fisher information (variance estimated from S draws: rel. sd sqrt(2/S))
    np.testing.assert_allclose(fit.stderr[0], 1 / sd, rtol=4 * np.sqrt(2 / S) + 0.05)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="unknown ERGM term"):
        ergm(5, ("edges", "stars"))
    with pytest.raises(ValueError, match="k >= 2"):
        ergm(5, ("kstar1",))
    with pytest.raises(ValueError, match="decay"):
        ergm(5, (("gwesp", -1.0),))
    with pytest.raises(ValueError, match="more than once"):
        ergm(5, ("edges", "edge"))
    with pytest.raises(ValueError, match="num_nodes"):
        ergm(1)
    model = ergm(5, ("edges", "triangles"))
    with pytest.raises(ValueError, match="theta"):
        model.validate_params({"theta": jnp.zeros(3)})
    A = np.zeros((5, 5), int)
    with pytest.raises(ValueError, match="differ"):
        model.change_stats(None, A, 2, 2)
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        model.change_stats(None, A, 0, 7)
    with pytest.raises(ValueError, match="shape"):
        model.change_stats(None, np.zeros((4, 4)), 0, 1)
    bad = np.zeros((5, 5), int)
    bad[0, 1] = 1
    with pytest.raises(ValueError, match="symmetric"):
        from_adjacency(bad)
    with pytest.raises(ValueError, match="only 0 and 1"):
        ergm_mple(model, np.full(10, 2))
    with pytest.raises(ValueError, match="shape"):
        ergm_mple(model, np.zeros(9))
    with pytest.raises(ValueError, match="does not exist"):
        ergm_mple(model, np.zeros(10))  # the empty graph: MPLE at -infinity
    with pytest.raises(TypeError, match="ERGM"):
        ergm_toggle.build_kernel(object())
    with pytest.raises(ValueError, match="scan"):
        ergm_toggle.build_kernel(model, scan="block")
    with pytest.raises(ValueError, match="multiple"):
        ergm_mcmc_mle(model, np.ones(10), jax.random.key(0), num_samples=10, num_chains=3)
