"""Tests of ``ui.learn``: every learner against exact maximum likelihood by enumeration.

Ground truth is computed here, independently of the library: all ``2^n`` spin
configurations are listed with numpy, the exact average log-likelihood of a fully
visible Boltzmann machine in its natural parameters ``theta = (J_{i<j}, h_i)``,

    ll(theta) = theta . phibar - log Z(theta),   phi(s) = (s_i s_j, s_i),

is evaluated in float64, the data are drawn exactly from the enumerated distribution
(``numpy.random.Generator.choice``), and the MLE is found by L-BFGS on ``-ll`` (a
concave problem).  Its sampling standard errors ``se_k = sqrt((F^-1)_kk / N)`` (``F``
the Fisher information at the MLE) set the scale for "parameters close to the MLE":
a learner's optimisation error must be a small fraction of the MLE's own statistical
error.  All learning runs are one jitted ``lax.scan`` over updates with fixed seeds.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize

import ugm_infer as ui


# ----------------------------------------------------------------------------------
# models and exact ground truth
# ----------------------------------------------------------------------------------
def bm_energy(params, state):
    """``E(s) = -1/2 s^T W s - h^T s`` (``W`` symmetric, zero diagonal), spins."""
    s = state["s"].astype(jnp.float32)
    return -0.5 * s @ params["W"] @ s - params["h"] @ s


def dense_bm(n: int) -> ui.EnergyModel:
    return ui.EnergyModel(bm_energy, {"s": ui.Spin(n)}, blocks=[{"s": np.array([i])} for i in range(n)], multilinear=True)


class Problem(NamedTuple):
    n: int
    model: ui.EnergyModel
    data: np.ndarray  # (N, n) spins
    phibar: np.ndarray  # empirical mean of phi
    features: np.ndarray  # phi of all 2^n configurations
    theta_mle: np.ndarray
    ll_mle: float
    se_mle: np.ndarray  # standard errors of the MLE


def spin_configs(n: int) -> np.ndarray:
    return np.array(list(itertools.product([-1.0, 1.0], repeat=n)))


def features_of(states: np.ndarray) -> np.ndarray:
    n = states.shape[1]
    iu = np.triu_indices(n, 1)
    return np.concatenate([states[:, iu[0]] * states[:, iu[1]], states], axis=1)


def log_z(features: np.ndarray, theta: np.ndarray) -> float:
    a = features @ theta
    m = a.max()
    return float(m + np.log(np.exp(a - m).sum()))


def avg_ll(problem: Problem, theta: np.ndarray) -> float:
    return float(theta @ problem.phibar - log_z(problem.features, theta))


def theta_of(params) -> np.ndarray:
    w = np.asarray(params["W"], np.float64)
    return np.concatenate([w[np.triu_indices(w.shape[0], 1)], np.asarray(params["h"], np.float64)])


def params_of(theta: np.ndarray, n: int) -> dict:
    npair = n * (n - 1) // 2
    w = np.zeros((n, n))
    w[np.triu_indices(n, 1)] = theta[:npair]
    return {"W": jnp.asarray(w + w.T, jnp.float32), "h": jnp.asarray(theta[npair:], jnp.float32)}


def zero_params(n: int) -> dict:
    return {"W": jnp.zeros((n, n), jnp.float32), "h": jnp.zeros((n,), jnp.float32)}


@functools.cache
def bm_problem(n: int, coupling_mean: float, coupling_sd: float, field_mean: float, field_sd: float, seed: int):
    """500 exact draws from a random BM and the exact MLE of a BM fitted to them."""
    rng = np.random.default_rng(seed)
    npair = n * (n - 1) // 2
    theta_true = np.concatenate(
        [coupling_mean + coupling_sd * rng.normal(size=npair), field_mean + field_sd * rng.normal(size=n)]
    )
    configs = spin_configs(n)
    features = features_of(configs)
    a = features @ theta_true
    p = np.exp(a - a.max())
    p /= p.sum()
    data = configs[rng.choice(len(configs), size=500, p=p)]
    phibar = features_of(data).mean(0)

    def negative_ll(theta):
        lz = log_z(features, theta)
        q = np.exp(features @ theta - lz)
        return -(theta @ phibar - lz), -(phibar - features.T @ q)

    res = scipy.optimize.minimize(
        negative_ll, np.zeros(len(theta_true)), jac=True, method="L-BFGS-B", options=dict(maxiter=5000, ftol=1e-15)
    )
    theta = res.x
    for _ in range(5):  # polish with Newton steps (the Hessian of -ll is the Fisher information)
        q = np.exp(features @ theta - log_z(features, theta))
        mean = features.T @ q
        fisher = (features * q[:, None]).T @ features - np.outer(mean, mean)
        theta = theta + np.linalg.solve(fisher, phibar - mean)
    assert np.abs(phibar - mean).max() < 1e-9, "the exact MLE did not converge (data on the boundary?)"
    se = np.sqrt(np.diag(np.linalg.inv(fisher)) / len(data))
    ll = float(theta @ phibar - log_z(features, theta))
    return Problem(n, dense_bm(n), data, phibar, features, theta, ll, se)


def sk_problem():
    """12 spins, couplings N(0, 1) / sqrt(n - 1) (Sherrington-Kirkpatrick scale), fields N(0, 0.5^2).

    The SK scale keeps the MLE finite: with unscaled N(0, 1) couplings on 12 spins the
    500 draws (seed 0) hit only 29 distinct configurations, a pair correlation reaches
    0.988 and L-BFGS drifts to |theta| > 16 without converging (the MLE is at infinity).
    """
    return bm_problem(12, 0.0, 1.0 / np.sqrt(11), 0.0, 0.5, 0)


def weak_problem():
    """10 spins, weak couplings N(0, 0.1^2), fields N(0, 0.3^2)."""
    return bm_problem(10, 0.0, 0.1, 0.0, 0.3, 1)


def bimodal_problem():
    """8 spins, strong ferromagnet J = 0.3 + N(0, 0.1^2) (J (n-1) ~ 2.1), small field 0.05: two modes."""
    return bm_problem(8, 0.3, 0.1, 0.05, 0.1, 0)


def run(learner, params, batch_fn, num_steps: int, seed: int = 0, record_every: int | None = None):
    """Run ``num_steps`` updates in one jitted scan; optionally record params every ``record_every``."""
    state = learner.init(jax.random.key(seed), params)

    @jax.jit
    def go(state, key):
        def body(state, inp):
            t, k = inp
            state, info = learner.step(k, state, batch_fn(t))
            return state, (state.params if record_every else None, info.grad_norm)

        return jax.lax.scan(body, state, (jnp.arange(num_steps), jax.random.split(key, num_steps)))

    state, (trace, grad_norms) = go(state, jax.random.key(seed + 1))
    if record_every:
        trace = jax.tree.map(lambda x: x[record_every - 1 :: record_every], trace)
    return state, trace, grad_norms


def full_batch(problem: Problem):
    batch = {"s": jnp.asarray(problem.data, jnp.float32)}
    return lambda t: batch


def minibatches(problem: Problem, size: int):
    data = jnp.asarray(problem.data, jnp.float32)
    num = data.shape[0] // size

    def batch(t):
        return {"s": jax.lax.dynamic_slice_in_dim(data, (t % num) * size, size)}

    return batch


# ----------------------------------------------------------------------------------
# exact maximum likelihood: the reference learner
# ----------------------------------------------------------------------------------
def test_exact_ml_gradient_and_optimum():
    problem = sk_problem()
    model, n = problem.model, problem.n
    learner = ui.learn.exact_ml(model, optax.sgd(0.5, momentum=0.9))
    # gradient at random parameters equals phibar - E[phi] (in W-space: half the pair terms)
    theta = np.random.default_rng(5).normal(scale=0.3, size=problem.theta_mle.size)
    state = learner.init(jax.random.key(0), params_of(theta, n))
    batch = full_batch(problem)(0)
    _, info = jax.jit(learner.step)(jax.random.key(1), state, batch)
    q = np.exp(problem.features @ theta - log_z(problem.features, theta))
    grad = problem.phibar - problem.features.T @ q
    npair = n * (n - 1) // 2
    grad_w = np.concatenate([0.5 * grad[:npair], grad[npair:]])  # d/dW_ij with W_ij = W_ji free entries
    assert abs(float(info.log_likelihood) - avg_ll(problem, theta)) < 1e-4
    assert abs(float(info.grad_norm) - np.sqrt(2 * np.sum(grad_w[:npair] ** 2) + np.sum(grad_w[npair:] ** 2))) < 1e-4
    # run to the optimum: same parameters and log-likelihood as L-BFGS in float64
    state, _, grad_norms = run(learner, zero_params(n), full_batch(problem), 600)
    theta_ml = theta_of(state.params)
    assert float(grad_norms[-1]) < 1e-4
    assert np.abs(theta_ml - problem.theta_mle).max() < 2e-3
    assert avg_ll(problem, theta_ml) > problem.ll_mle - 1e-6


# ----------------------------------------------------------------------------------
# SAP / PCD
# ----------------------------------------------------------------------------------
def test_sap_gibbs_reaches_the_mle():
    """PCD = SAP with Gibbs (systematic scan), 100 particles, steps 40 / (100 + t), 2000 updates.

    Measured: gap 0.0027 nats/sample, max |dtheta| / se 0.40, rms 0.14.
    """
    problem = sk_problem()
    learner = ui.learn.pcd(
        problem.model, optax.sgd(ui.learn.robbins_monro(40.0, 100.0)), num_particles=100, scan="systematic"
    )
    assert learner.name == "pcd" and learner.visible == ("s",)
    state, _, _ = run(learner, zero_params(problem.n), full_batch(problem), 2000)
    theta = theta_of(state.params)
    gap = problem.ll_mle - avg_ll(problem, theta)
    ratio = np.abs(theta - problem.theta_mle) / problem.se_mle
    rms = np.sqrt(np.mean(ratio**2))
    print(f"SAP/PCD gap to the exact MLE {gap:.5f} nats/sample; |dtheta|/se max {ratio.max():.3f} rms {rms:.3f}")
    assert 0 <= gap < 0.02
    # the optimisation error is below the MLE's own sampling error for every parameter
    assert ratio.max() < 1.0 and rms < 0.3
    assert state.particles["s"].shape == (100, problem.n)
    assert int(state.step) == 2000


class MHState(NamedTuple):
    position: dict
    logdensity: jax.Array


class MHInfo(NamedTuple):
    acceptance_rate: jax.Array


def mh_init(position, logdensity_fn):
    return MHState(position, logdensity_fn(position))


def mh_kernel(rng_key, state, logdensity_fn):
    """A hand-written single-site Metropolis sweep (spin flips, systematic order) on variable ``s``."""
    n = state.position["s"].shape[0]

    def site(carry, inp):
        s, logdensity = carry
        i, key = inp
        proposal = s.at[i].multiply(-1)
        proposal_logdensity = logdensity_fn({"s": proposal})
        accept = jnp.log(jax.random.uniform(key)) < proposal_logdensity - logdensity
        return (jnp.where(accept, proposal, s), jnp.where(accept, proposal_logdensity, logdensity)), accept

    (s, logdensity), accepted = jax.lax.scan(
        site, (state.position["s"], state.logdensity), (jnp.arange(n), jax.random.split(rng_key, n))
    )
    return MHState({"s": s}, logdensity), MHInfo(jnp.mean(accepted))


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_sap_with_a_user_kernel():
    """SAP accepts any (init_fn, kernel_fn) pair; the cached log-density is refreshed every update."""
    problem = weak_problem()
    learner = ui.learn.sap(
        problem.model, (mh_init, mh_kernel), optax.sgd(ui.learn.robbins_monro(40.0, 100.0)), num_particles=100
    )
    state, _, _ = run(learner, zero_params(problem.n), full_batch(problem), 1000)
    theta = theta_of(state.params)
    gap = problem.ll_mle - avg_ll(problem, theta)
    ratio = np.abs(theta - problem.theta_mle) / problem.se_mle
    print(f"SAP (user Metropolis kernel) gap {gap:.5f}; |dtheta|/se max {ratio.max():.3f}")
    assert 0 <= gap < 0.01
    assert ratio.max() < 1.0
    _, info = jax.jit(learner.step)(jax.random.key(3), state, full_batch(problem)(0))
    assert info.kernel_info.acceptance_rate.shape == (100,)
    assert 0.2 < float(jnp.mean(info.kernel_info.acceptance_rate)) < 1.0


# ----------------------------------------------------------------------------------
# pseudo-likelihood
# ----------------------------------------------------------------------------------
def potts_energy(params, state):
    x = state["x"]
    k = params["h"].shape[-1]
    onehot = jax.nn.one_hot(x, k, dtype=jnp.float32)
    return -0.5 * jnp.einsum("ia,ijab,jb->", onehot, params["J"], onehot) - jnp.sum(onehot * params["h"])


def test_pseudo_log_likelihood_matches_enumeration():
    """Generic conditionals (every value of every site) on a categorical model, against numpy."""
    n, k = 4, 3
    rng = np.random.default_rng(3)
    J = rng.normal(size=(n, n, k, k))
    J = 0.5 * (J + J.transpose(1, 0, 3, 2))
    J[np.arange(n), np.arange(n)] = 0.0
    params = {"J": jnp.asarray(J, jnp.float32), "h": jnp.asarray(rng.normal(size=(n, k)), jnp.float32)}
    model = ui.EnergyModel(potts_energy, {"x": ui.Categorical((n,), k)})
    data = rng.integers(0, k, size=(7, n))

    def energy(x):
        return -0.5 * sum(J[i, j, x[i], x[j]] for i in range(n) for j in range(n)) - sum(
            params["h"][i, x[i]] for i in range(n)
        )

    expected = []
    for x in data:
        total = 0.0
        for i in range(n):
            e = np.array([energy(np.concatenate([x[:i], [v], x[i + 1 :]])) for v in range(k)], np.float64)
            total += -e[x[i]] - np.log(np.sum(np.exp(-e)))
        expected.append(total)
    got = ui.learn.pseudo_log_likelihood(model, params, {"x": data})
    np.testing.assert_allclose(np.asarray(got), np.array(expected), atol=1e-4)


def test_pseudo_likelihood_close_to_mle_on_weak_couplings():
    problem = weak_problem()
    learner = ui.learn.pseudo_likelihood(problem.model, optax.sgd(0.5, momentum=0.9))
    state, _, grad_norms = run(learner, zero_params(problem.n), full_batch(problem), 400)
    assert float(grad_norms[-1]) < 1e-4  # converged to the maximum pseudo-likelihood estimate
    theta = theta_of(state.params)
    ratio = np.abs(theta - problem.theta_mle) / problem.se_mle
    gap = problem.ll_mle - avg_ll(problem, theta)
    print(f"MPLE vs MLE (weak couplings): |dtheta|/se max {ratio.max():.3f}; log-likelihood gap {gap:.5f}")
    assert ratio.max() < 0.25
    assert 0 <= gap < 0.005


# ----------------------------------------------------------------------------------
# CD-1 bias
# ----------------------------------------------------------------------------------
def test_cd1_bias_on_a_bimodal_model():
    """CD-1 cannot move probability between distant modes (MacKay 2001; Carreira-Perpinan & Hinton 2005).

    Data: 500 exact draws from an 8-spin ferromagnet (J ~ 0.3, J (n-1) ~ 2.1) with a small
    field, so most draws lie near all-up (~70%) or all-down.  A one-sweep chain started
    at a datum stays in its mode, so CD-1's negative statistics reproduce the data's mode
    weights whatever the model's: the field that sets the balance of the two modes gets
    no signal and stays near 0, while the MLE has sum(h) clearly positive.  Its exact
    log-likelihood stays below the MLE's by far more than the Monte-Carlo fluctuation of
    the iterates.  Exact ML with the same schedule gets within 0.01.
    """
    problem = bimodal_problem()
    n = problem.n
    npair = n * (n - 1) // 2
    gibbs = ui.kernels.gibbs
    kernel = (gibbs.init, gibbs.build_kernel(problem.model, "systematic"))
    optimizer = optax.sgd(ui.learn.robbins_monro(20.0, 100.0))
    learner = ui.learn.cd(problem.model, 1, optimizer, kernel)
    assert learner.name == "cd"
    _, trace, _ = run(learner, zero_params(n), minibatches(problem, 100), 1500, record_every=50)
    thetas = [theta_of(jax.tree.map(lambda x, i=i: x[i], trace)) for i in range(30)]
    gaps = np.array([problem.ll_mle - avg_ll(problem, t) for t in thetas[-10:]])  # last 500 updates
    final = thetas[-1]
    reference, _, _ = run(ui.learn.exact_ml(problem.model, optimizer), zero_params(n), full_batch(problem), 1500)
    exact_gap = problem.ll_mle - avg_ll(problem, theta_of(reference.params))
    print(
        f"CD-1 gap {gaps.mean():.4f} (sd over the last iterates {gaps.std():.4f}); exact-ML gap {exact_gap:.4f}; "
        f"sum h: CD-1 {final[npair:].sum():.3f}, MLE {problem.theta_mle[npair:].sum():.3f}; "
        f"mean J: CD-1 {final[:npair].mean():.3f}, MLE {problem.theta_mle[:npair].mean():.3f}"
    )
    assert exact_gap < 0.01
    assert gaps.min() > 0.05 and gaps.mean() > 10 * gaps.std()
    assert problem.theta_mle[npair:].sum() > 0.3 and abs(final[npair:].sum()) < 0.5 * problem.theta_mle[npair:].sum()


# ----------------------------------------------------------------------------------
# latent variables: an RBM with 3 hidden units
# ----------------------------------------------------------------------------------
NV, NH = 8, 3


def rbm_energy(params, state):
    v, h = state["v"].astype(jnp.float32), state["h"].astype(jnp.float32)
    return -v @ params["W"] @ h - params["b"] @ v - params["c"] @ h


def rbm_free_energy(params, rest):
    v = rest["v"].astype(jnp.float32)
    return -params["b"] @ v - jnp.sum(jax.nn.softplus(params["c"] + v @ params["W"]))


def inline_rbm(free_energy: bool = True) -> ui.EnergyModel:
    return ui.EnergyModel(
        rbm_energy,
        {"v": ui.Binary(NV), "h": ui.Binary(NH)},
        blocks=[{"v": True}, {"h": True}],
        multilinear=True,
        free_energy_fns={"h": rbm_free_energy} if free_energy else None,
    )


VISIBLE_CONFIGS = np.array(list(itertools.product([0.0, 1.0], repeat=NV)))


def rbm_avg_ll(params, data: np.ndarray) -> float:
    """Exact average log-likelihood of binary data under an RBM (numpy, float64)."""
    W, b, c = (np.asarray(params[k], np.float64) for k in ("W", "b", "c"))

    def neg_free_energy(v):
        return v @ b + np.sum(np.logaddexp(0.0, c + v @ W), axis=-1)

    a = neg_free_energy(VISIBLE_CONFIGS)
    lz = a.max() + np.log(np.exp(a - a.max()).sum())
    return float(np.mean(neg_free_energy(data)) - lz)


@functools.cache
def rbm_data() -> np.ndarray:
    """500 exact draws of v from a random RBM with strong weights (W ~ N(0, 2^2))."""
    rng = np.random.default_rng(7)
    params = {"W": 2.0 * rng.normal(size=(NV, NH)), "b": rng.normal(size=NV) - 0.5, "c": rng.normal(size=NH)}
    W, b, c = params["W"], params["b"], params["c"]
    a = VISIBLE_CONFIGS @ b + np.sum(np.logaddexp(0.0, c + VISIBLE_CONFIGS @ W), axis=-1)
    p = np.exp(a - a.max())
    p /= p.sum()
    return VISIBLE_CONFIGS[rng.choice(len(p), size=500, p=p)]


def rbm_init_params():
    rng = np.random.default_rng(11)
    return {
        "W": jnp.asarray(0.1 * rng.normal(size=(NV, NH)), jnp.float32),
        "b": jnp.zeros(NV, jnp.float32),
        "c": jnp.zeros(NH, jnp.float32),
    }


def test_rbm_learners_improve_the_exact_likelihood():
    """PCD (free-energy positive phase), SAP with the Monte-Carlo E-step, and CD-1, against exact ML."""
    data = rbm_data()
    batch = {"v": jnp.asarray(data, jnp.float32)}
    params0 = rbm_init_params()
    ll0 = rbm_avg_ll(params0, data)
    optimizer = optax.sgd(ui.learn.robbins_monro(20.0, 100.0))
    steps = 500
    results = {}
    learners = {
        "exact_ml": ui.learn.exact_ml(inline_rbm(), optimizer),
        "pcd": ui.learn.pcd(inline_rbm(), optimizer, num_particles=100),
        "sap_mc": ui.learn.sap(inline_rbm(free_energy=False), None, optimizer, 100, visible="v"),
        "cd1": ui.learn.cd(inline_rbm(), 1, optimizer),
    }
    for name, learner in learners.items():
        assert learner.visible == ("v",)
        state, _, _ = run(learner, params0, lambda t: batch, steps)
        results[name] = rbm_avg_ll(state.params, data)
    print(
        f"RBM {NV}-{NH} exact average log-likelihood: init {ll0:.4f}, "
        + ", ".join(f"{k} {v:.4f}" for k, v in results.items())
    )
    assert results["exact_ml"] > ll0 + 0.5
    for name in ("pcd", "sap_mc", "cd1"):
        assert results[name] > ll0 + 0.4, name
    assert results["pcd"] > results["exact_ml"] - 0.05
    assert results["sap_mc"] > results["exact_ml"] - 0.05


def test_exact_ml_latent_paths_agree():
    """Free energy from free_energy_fns vs exact enumeration of the latents given each datum."""
    data = rbm_data()[:50]
    batch = {"v": jnp.asarray(data, jnp.float32)}
    params = rbm_init_params()
    params = {**params, "b": params["b"] + 0.3, "c": params["c"] - 0.2}
    out = []
    for model in (inline_rbm(True), inline_rbm(False)):
        learner = ui.learn.exact_ml(model, optax.sgd(1.0), visible="v")
        state = learner.init(jax.random.key(0), params)
        new_state, info = jax.jit(learner.step)(jax.random.key(1), state, batch)
        out.append((float(info.log_likelihood), new_state.params))
        assert abs(float(info.log_likelihood) - rbm_avg_ll(params, data)) < 1e-4
    assert abs(out[0][0] - out[1][0]) < 1e-5
    for leaf_a, leaf_b in zip(jax.tree.leaves(out[0][1]), jax.tree.leaves(out[1][1])):
        np.testing.assert_allclose(np.asarray(leaf_a), np.asarray(leaf_b), atol=1e-5)
    value = ui.learn.exact_average_log_likelihood(inline_rbm(False), params, batch, visible="v")
    assert abs(float(value) - rbm_avg_ll(params, data)) < 1e-4


def test_mc_positive_phase_is_unbiased_for_an_rbm():
    """With conditionally independent latents one clamped sweep is an exact draw of p(h | v)."""
    model = inline_rbm(free_energy=False)
    data = rbm_data()[:8]
    batch = {"v": jnp.asarray(data, jnp.float32)}
    params = rbm_init_params()
    params = {**params, "W": 3.0 * params["W"], "c": params["c"] + 0.5}
    exact = ui.learn.free_energy_positive_phase(inline_rbm(), "v")
    mc = ui.learn.mc_positive_phase(model, "v", num_sweeps=1)
    mc.init(jax.random.key(0), params, None)
    reference, _ = exact.update(jax.random.key(0), params, batch, ())
    num = 2000
    estimates = jax.jit(jax.vmap(lambda k: mc.update(k, params, batch, ())[0]))(jax.random.split(jax.random.key(1), num))
    for name in ("W", "b", "c"):
        mean = np.asarray(estimates[name]).mean(0)
        se = np.asarray(estimates[name]).std(0) / np.sqrt(num) + 1e-7
        z = np.abs(mean - np.asarray(reference[name])) / se
        # |z| < 5 for ~30 entries: a false alarm has probability ~2e-5
        assert z.max() < 5.0, (name, z.max())
    assert float(np.abs(np.asarray(estimates["W"]).std(0)).max()) > 0.01  # the estimate is stochastic


def test_rbm_from_ui_models():
    """The built-in RBM (free energies for both layers) needs visible='v'; exact ML agrees with the inline one."""
    models = pytest.importorskip("ugm_infer.models")
    if not hasattr(models, "rbm"):
        pytest.skip("ui.models.rbm not available")
    model = models.rbm(NV, NH)
    data = rbm_data()[:50]
    batch = {"v": jnp.asarray(data, jnp.float32)}
    params = rbm_init_params()
    if getattr(model, "visible", None) is None:
        with pytest.raises(ValueError, match="visible"):
            ui.learn.exact_ml(model)
    learner = ui.learn.exact_ml(model, visible="v")
    _, info = jax.jit(learner.step)(jax.random.key(1), learner.init(jax.random.key(0), params), batch)
    assert abs(float(info.log_likelihood) - rbm_avg_ll(params, data)) < 1e-4
    state = ui.learn.pcd(model, num_particles=10, visible="v").init(jax.random.key(3), params)
    assert state.particles["v"].shape == (10, NV) and state.particles["h"].shape == (10, NH)


# ----------------------------------------------------------------------------------
# contract: jit without recompilation, checkpointable states, schedules, bad input
# ----------------------------------------------------------------------------------
def test_learners_jit_once_and_checkpoint_with_numpy():
    model = dense_bm(4)
    rng = np.random.default_rng(0)
    batch = {"s": jnp.asarray(rng.choice([-1.0, 1.0], size=(16, 4)), jnp.float32)}
    params = params_of(0.1 * rng.normal(size=10), 4)
    for learner in (
        ui.learn.sap(model, num_particles=8),
        ui.learn.pcd(model, num_particles=8, scan="random", num_sweeps=2),
        ui.learn.cd(model, 2),
        ui.learn.exact_ml(model),
        ui.learn.pseudo_likelihood(model),
    ):
        step = jax.jit(learner.step)
        state = learner.init(jax.random.key(0), params)
        state1, info1 = step(jax.random.key(1), state, batch)
        state2, _ = step(jax.random.key(2), state1, batch)
        assert step._cache_size() == 1, learner.name  # no recompilation
        assert int(state2.step) == 2 and np.isfinite(float(info1.grad_norm)) and float(info1.grad_norm) > 0
        assert jax.tree.structure(state1) == jax.tree.structure(state2)
        # a numpy round trip of the state (a checkpoint) continues identically
        restored = jax.tree.map(np.asarray, state1)
        again, _ = step(jax.random.key(2), restored, batch)
        for a, b in zip(jax.tree.leaves(state2), jax.tree.leaves(again)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_schedules():
    rm = ui.learn.robbins_monro(10.0, 1000.0)
    np.testing.assert_allclose([float(rm(t)) for t in (0, 1000, 9000)], [0.01, 0.005, 0.001], rtol=1e-6)
    restart = ui.learn.constant_then_robbins_monro(0.01, 100, 10.0, 1000.0)
    np.testing.assert_allclose([float(restart(t)) for t in (0, 99, 100, 1100)], [0.01, 0.01, 0.01, 0.005], rtol=1e-6)
    glob = ui.learn.constant_then_robbins_monro(0.02, 100, 10.0, 1000.0, restart=False)
    np.testing.assert_allclose([float(glob(t)) for t in (99, 100, 1000)], [0.02, 10 / 1100, 0.005], rtol=1e-6)
    jitted = jax.jit(restart)
    assert abs(float(jitted(jnp.int32(1100))) - 0.005) < 1e-8
    # inside optax: the count starts at 0 and sgd steps by -lr * gradient
    opt = optax.sgd(rm)
    params = {"x": jnp.zeros(2)}
    state = opt.init(params)
    updates, state = opt.update({"x": jnp.ones(2)}, state, params)
    np.testing.assert_allclose(np.asarray(updates["x"]), [-0.01, -0.01], rtol=1e-6)
    # sgd helper: weight decay adds wd * params to the minimised gradient
    opt = ui.learn.sgd(0.1, momentum=0.5, weight_decay=0.01)
    params = {"x": jnp.array([1.0, -2.0])}
    state = opt.init(params)
    updates, _ = opt.update({"x": jnp.array([0.5, 0.5])}, state, params)
    np.testing.assert_allclose(np.asarray(updates["x"]), [-0.1 * (0.5 + 0.01), -0.1 * (0.5 - 0.02)], rtol=1e-6)
    for bad in (
        lambda: ui.learn.robbins_monro(0.0, 1.0),
        lambda: ui.learn.robbins_monro(1.0, -1.0),
        lambda: ui.learn.constant_then_robbins_monro(0.01, -1, 1.0, 1.0),
        lambda: ui.learn.sgd(0.1, momentum=1.0),
    ):
        with pytest.raises(ValueError):
            bad()


def test_bad_input():
    model = dense_bm(4)
    params = zero_params(4)
    rbm = inline_rbm()
    with pytest.raises(ValueError, match="fully visible"):
        ui.learn.pseudo_likelihood(rbm)
    with pytest.raises(ValueError, match="fully visible"):
        ui.learn.pseudo_likelihood(inline_rbm(free_energy=False), visible="v")
    for bad in (0, -3):
        with pytest.raises(ValueError, match="num_particles"):
            ui.learn.sap(model, num_particles=bad)
    with pytest.raises(TypeError, match="num_particles"):
        ui.learn.sap(model, num_particles=2.5)
    with pytest.raises(ValueError, match="num_steps_per_update"):
        ui.learn.sap(model, num_steps_per_update=0)
    with pytest.raises(ValueError, match="k"):
        ui.learn.cd(model, k=0)
    with pytest.raises(ValueError, match="unknown variable"):
        ui.learn.sap(model, visible=("s", "x"))
    with pytest.raises(ValueError, match="unknown variable"):
        ui.learn.exact_ml(rbm, visible="hidden")
    with pytest.raises(ValueError, match="free energy"):
        ui.learn.sap(inline_rbm(free_energy=False), visible="v", positive_phase="free_energy")
    with pytest.raises(ValueError, match="positive_phase"):
        ui.learn.sap(model, positive_phase="magic")
    with pytest.raises(TypeError, match="kernel"):
        ui.learn.sap(model, kernel=ui.kernels.gibbs(model, params))
    with pytest.raises(TypeError, match="optimizer"):
        ui.learn.sap(model, optimizer=0.01)
    with pytest.raises(ValueError, match="init_particles"):
        ui.learn.sap(model, num_particles=5, init_particles={"s": np.ones((4, 4))})
    with pytest.raises(ValueError, match="init_particles"):
        ui.learn.sap(model, num_particles=4, init_particles={"s": 2 * np.ones((4, 4))})
    learner = ui.learn.sap(model, num_particles=4)
    with pytest.raises(TypeError, match="floating"):
        learner.init(jax.random.key(0), {"W": jnp.zeros((4, 4), jnp.int32), "h": jnp.zeros(4)})
    state = learner.init(jax.random.key(0), params)
    good = np.ones((3, 4))
    with pytest.raises(ValueError, match="not visible"):
        learner.step(jax.random.key(1), state, {"s": good, "h": good})
    with pytest.raises(ValueError, match="missing"):
        learner.step(jax.random.key(1), state, {})
    with pytest.raises(ValueError, match="shape"):
        learner.step(jax.random.key(1), state, {"s": np.ones((3, 5))})
    with pytest.raises(ValueError, match="outside the domain"):
        learner.step(jax.random.key(1), state, {"s": np.zeros((3, 4))})
    pcd_rbm = ui.learn.pcd(rbm, num_particles=4)
    rbm_state = pcd_rbm.init(jax.random.key(0), rbm_init_params())
    with pytest.raises(ValueError, match="latent"):
        pcd_rbm.step(jax.random.key(1), rbm_state, {"v": np.ones((2, NV)), "h": np.ones((2, NH))})
    with pytest.raises(ValueError, match="pcd|scan"):
        ui.learn.pcd(model, scan="diagonal")
