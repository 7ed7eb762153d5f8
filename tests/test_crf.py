"""CRFs: kernels sample p(y | x) exactly, learners reach the exact conditional MLE, MAP / MPM prediction.

Ground truth is brute-force enumeration of the label space (tiny CRFs: 3 to 6 binary
labels).  Statistical bounds come from the sample sizes (see each test).
"""

from __future__ import annotations

import functools

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import all_states, brute_force
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer import predict
from ugm_infer.kernels.gibbs import build_kernel as gibbs_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.learn import conditional as cl
from ugm_infer.models.crf import crf, difference_features, grid_crf, multilabel_crf, pairwise_crf

THETA = {"node": jnp.array([-0.4, 1.1], jnp.float32), "edge": jnp.array([0.9, -0.7], jnp.float32)}


def grid_inputs(seed: int, num: int, h: int = 2, w: int = 3):
    model = grid_crf(h, w)
    clean = jax.random.bernoulli(jax.random.key(seed), 0.5, (num, h, w)).astype(jnp.float32)
    noisy = clean + jax.random.normal(jax.random.key(seed + 1), clean.shape)
    return model, difference_features(noisy, model.edges)


def take(tree, i):
    return jax.tree.map(lambda a: a[i], tree)


# ----------------------------------------------------------------------------------
# the kernel samples p(y | x) of each input exactly
# ----------------------------------------------------------------------------------
def test_gibbs_samples_each_conditional_exactly():
    model, x = grid_inputs(0, 2)
    num_chains, num_sweeps = 4000, 20
    kernel = gibbs_kernel(model, "block")

    @jax.jit
    def draws(key, xi):
        logdensity_fn = model.logdensity_fn(model.condition(THETA, xi))

        def chain(k):
            k0, k1 = jax.random.split(k)
            state = gibbs_init(model.random_state(k0), logdensity_fn)
            state, _ = jax.lax.scan(lambda s, kk: kernel(kk, s, logdensity_fn), state, jax.random.split(k1, num_sweeps))
            return state.position

        return jax.vmap(chain)(jax.random.split(key, num_chains))

    probs = [brute_force(model, model.condition(THETA, take(x, i))) for i in range(2)]
    assert 0.5 * np.abs(probs[0] - probs[1]).sum() > 0.2  # the two inputs give different conditionals
    for i in range(2):
        idx = state_index(draws(jax.random.key(10 + i), take(x, i)), model)
        assert_distribution_matches(idx, probs[i], label=f"p(y | x_{i})")
        assert_distribution_differs(idx, probs[1 - i], label=f"p(y | x_{i}) vs p(y | x_{1 - i})")


# ----------------------------------------------------------------------------------
# prediction: ICM, simulated annealing, max-marginals
# ----------------------------------------------------------------------------------
@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_icm_sa_and_max_marginals():
    model, x = grid_inputs(3, 3)
    ys = all_states(model)
    cps = jax.vmap(lambda xi: model.condition(THETA, xi))(x)
    energies = np.asarray(jax.jit(jax.vmap(lambda cp: model.energies(cp, ys)))(cps))
    starts = {"y": jnp.stack([jnp.zeros((2, 3)), jnp.ones((2, 3))])}

    @jax.jit
    def run_icm(cp, start):
        return predict.icm(model, cp, start)

    res = jax.vmap(lambda cp: jax.vmap(lambda s: run_icm(cp, s))(starts))(cps)
    assert bool(np.all(res.converged))
    # ICM ends at a local optimum: no single-site change lowers the energy
    index = state_index(jax.tree.map(lambda a: a.reshape((-1, 2, 3)), res.state), model).reshape(3, 2)
    site_bits = 1 << np.arange(5, -1, -1)  # state_index: the first site is the most significant digit
    for i in range(3):
        for j in range(2):
            e = energies[i, index[i, j]]
            assert e <= float(model.energy(take(cps, i), take(starts, j))) + 1e-5
            neighbours = index[i, j] ^ site_bits
            assert np.all(energies[i, neighbours] >= e - 1e-5), (i, j)
    betas = predict.geometric_betas(0.05, 20.0, 60)
    sa = jax.jit(jax.vmap(lambda k, cp: predict.simulated_annealing(k, model, cp, take(starts, 0), betas)))(
        jax.random.split(jax.random.key(5), 3), cps
    )
    np.testing.assert_allclose(np.asarray(sa.energy), energies.min(axis=1), atol=1e-4)
    # max-marginals: 4000 independent chains, one draw each after 20 sweeps; binomial sd
    cp = take(cps, 0)
    n = 4000
    mm = jax.jit(
        lambda key: predict.max_marginals(key, model, cp, take(starts, 0), num_samples=1, num_burnin=20, num_chains=n)
    )(jax.random.key(7))
    exact = np.asarray(ui.exact.marginals(model, cp)["y"])
    sd = np.sqrt(exact * (1 - exact) / n)
    np.testing.assert_array_less(np.abs(np.asarray(mm.marginals["y"]) - exact), 5 * sd + 1e-6)
    clear = np.abs(exact[..., 1] - 0.5) > 5 * sd[..., 1]  # sites whose mode the sample size can resolve
    np.testing.assert_array_equal(np.asarray(mm.state["y"])[clear], (exact[..., 1] > 0.5)[clear])


# ----------------------------------------------------------------------------------
# learners reach the exact conditional MLE
# ----------------------------------------------------------------------------------
@functools.cache
def chain_problem():
    """3 labels on a path, 16 inputs, labels drawn from a CRF; the exact CML maximiser is finite."""
    model = pairwise_crf((3,), [[0, 1], [1, 2]], 2, 2)
    n = 16
    k = jax.random.split(jax.random.key(1), 3)
    x = {
        "node": jnp.concatenate([jnp.ones((n, 3, 1)), jax.random.normal(k[0], (n, 3, 1))], -1),
        "edge": jnp.concatenate([jnp.ones((n, 2, 1)), jnp.abs(jax.random.normal(k[1], (n, 2, 1)))], -1),
    }
    true = {"node": jnp.array([-0.3, 0.8]), "edge": jnp.array([0.5, -0.4])}
    ys = all_states(model)
    logits = jax.vmap(lambda xi: -model.energies(model.condition(true, xi), ys))(x)
    y = ys["y"][jax.random.categorical(k[2], logits)]
    return model, {"x": x, "y": y}, jax.jit(functools.partial(_exact_grad_and_noise, model, ys))


def _exact_grad_and_noise(model, ys, theta, data):
    """Exact CML gradient, per-input ``Cov_n(phi) / N^2`` (phi = -dE/dtheta) and log-likelihood by enumeration."""
    x, y = data["x"], data["y"]
    n = y.shape[0]

    def phi(xi, yi):
        return jax.flatten_util.ravel_pytree(jax.grad(lambda t: -model.conditional_energy(t, xi, yi))(theta))[0]

    def one(xi, yi):
        logp = jax.nn.log_softmax(-model.energies(model.condition(theta, xi), ys))
        p = jnp.exp(logp)
        f = jax.vmap(lambda yy: phi(xi, yy))(ys)
        mu = p @ f
        own = jnp.sum(jnp.where(jnp.all(ys["y"] == yi, axis=1), logp, 0.0))
        return phi(xi, {"y": yi}) - mu, (p[:, None] * (f - mu)).T @ (f - mu), own

    g, cov, ll = jax.vmap(one)(x, y)
    return g.mean(0), cov / n**2, ll.mean()


@pytest.mark.parametrize("which", ["pcd", "mcmc_mle", "pf"])
def test_learner_reaches_exact_conditional_mle(which):
    """The average of the iterates has a near-zero exact CML gradient.

    The model term of input ``n``, averaged over ``K_n`` independent particle sets of
    effective size ``M``, has covariance ``Cov_n(phi) / (M K_n)`` (``Cov_n`` exact, by
    enumeration), so the averaged gradient noise has per-component sd
    ``sqrt(sum_n Cov_n,ii / (N^2 M K_n))``; near the optimum the exact gradient at the
    averaged iterate carries that noise, and we require ``|g_i| <= 5 sd_i``.  ``K_n``
    counts the particle sets of input ``n`` used in the averaging window: updates for
    PCD (one block sweep of a 3-site path each), rounds for MCMC-MLE (each re-sampled by
    3 sweeps), resample-and-rejuvenate events for PF (plus the set in use when the
    window opens).  ``M`` is the smallest effective sample size of the weights (``M``
    for PCD, the recorded minimum ESS for MCMC-MLE, ``ess_threshold * M`` for PF).
    """
    model, data, exact = chain_problem()
    m, steps, burn = 20, 600, 200
    theta0 = {"node": jnp.array([0.5, -0.5]), "edge": jnp.array([-0.5, 0.5])}
    if which == "pcd":
        learner = cl.conditional_pcd(model, optax.sgd(0.1), m)
    elif which == "mcmc_mle":
        learner = cl.conditional_mcmc_mle(
            model, None, optax.sgd(0.5), m, num_mcmc_steps=3, max_inner_steps=10, grad_threshold=1e-4
        )
    else:
        learner = cl.conditional_pf_mcmc_mle(model, None, optax.sgd(0.1), m, ess_threshold=0.99, num_rejuvenation_steps=2)
    state = learner.init(jax.random.key(3), theta0, data)

    def body(state, key):
        state, info = learner.step(key, state, data)
        n = data["y"].shape[0]
        if which == "pcd":
            events, ess = jnp.full((n,), state.step), jnp.float32(m)
        elif which == "mcmc_mle":
            events, ess = jnp.full((n,), state.round), info.min_ess
        else:
            events, ess = state.num_resampled, jnp.float32(0.99 * m)
        return state, (state.params, events, ess)

    _, (path, events, ess) = jax.jit(lambda s, keys: jax.lax.scan(body, s, keys))(
        state, jax.random.split(jax.random.key(4), steps)
    )
    avg = jax.tree.map(lambda a: a[burn:].mean(0), path)
    k_n = np.asarray(events[-1] - events[burn - 1]) + (0 if which == "pcd" else 1)
    m_eff = float(np.min(np.asarray(ess)[burn:]))
    g, cov, _ = exact(avg, data)
    var = np.einsum("nii->ni", np.asarray(cov))  # (N, P): Cov_n,ii / N^2
    bound = 5 * np.sqrt(np.sum(var / (m_eff * k_n[:, None]), axis=0))
    g0, _, _ = exact(theta0, data)
    assert np.max(np.abs(g0) / bound) > 5  # the start is far from the optimum: the test can fail
    assert np.all(np.abs(g) <= bound), f"{which}: exact gradient {g} at the averaged iterate exceeds {bound}"


def test_exact_ml_and_log_likelihood():
    model, data, exact = chain_problem()
    learner = cl.conditional_exact_ml(model, optax.adam(0.05))
    state = learner.init(None, model.init_params(jax.random.key(0)), data)
    state, _ = jax.jit(lambda s: jax.lax.scan(lambda s, _: learner.step(None, s, data), s, None, length=300))(state)
    g, _, ll_brute = exact(state.params, data)
    np.testing.assert_allclose(np.asarray(g), 0.0, atol=2e-3)
    ll = float(cl.exact_conditional_log_likelihood(model, state.params, data))
    assert ll == pytest.approx(float(ll_brute), abs=1e-4)


def test_sap_minibatch_moves_only_its_sets():
    model, data, _ = chain_problem()
    learner = cl.conditional_pcd(model, optax.sgd(0.1), 4)
    state = learner.init(jax.random.key(0), model.init_params(jax.random.key(0)), data)
    idx = jnp.array([3, 5, 7])
    batch = {"x": take(data["x"], idx), "y": data["y"][idx], "index": idx}
    new, _ = jax.jit(learner.step)(jax.random.key(1), state, batch)
    changed = np.any(np.asarray(new.particles["y"] != state.particles["y"]), axis=(1, 2))
    assert set(np.nonzero(changed)[0]) <= {3, 5, 7} and changed[[3, 5, 7]].any()
    with pytest.raises(ValueError, match="index"):
        learner.step(jax.random.key(1), state, {"x": batch["x"], "y": batch["y"]})


# ----------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------
def test_bad_input():
    model, x = grid_inputs(0, 2)
    with pytest.raises(ValueError, match="reserved"):
        crf(lambda t, x, y: 0.0, {"x": ui.Binary(2)}, (2,))
    with pytest.raises(ValueError, match="x"):
        model.condition(THETA, {"node": jnp.zeros((6, 3)), "edge": jnp.zeros((7, 2))})
    with pytest.raises(ValueError, match="theta"):
        model.condition({"node": jnp.zeros(2)}, take(x, 0))
    with pytest.raises(ValueError, match="NaN"):
        model.condition({"node": jnp.array([jnp.nan, 0.0]), "edge": jnp.zeros(2)}, take(x, 0))
    with pytest.raises(ValueError, match="height"):
        grid_crf(0, 3)
    with pytest.raises(ValueError, match="edge_potential"):
        grid_crf(2, 2, edge_potential="potts")
    with pytest.raises(ValueError, match="edges"):
        pairwise_crf((3,), [[0, 3]], 2, 2)
    with pytest.raises(ValueError, match="num_labels"):
        multilabel_crf(1, 3)
    learner = cl.conditional_pcd(model, num_particles=2)
    theta = model.init_params(jax.random.key(0))
    y = jnp.zeros((2, 2, 3))
    with pytest.raises(ValueError, match="data"):
        learner.init(jax.random.key(0), theta)
    with pytest.raises(ValueError, match="labellings"):
        learner.init(jax.random.key(0), theta, {"x": x, "y": y[:1]})
    with pytest.raises(ValueError, match="outside the domain"):
        learner.init(jax.random.key(0), theta, {"x": x, "y": y + 2})
    with pytest.raises(TypeError, match="CRF"):
        cl.conditional_pcd(ui.models.ising(3))
    with pytest.raises(ValueError, match="ess_threshold"):
        cl.conditional_pf_mcmc_mle(model, ess_threshold=0.0)
    cp = model.condition(THETA, take(x, 0))
    with pytest.raises(ValueError, match="max_sweeps"):
        predict.icm(model, cp, {"y": y[0]}, max_sweeps=0)
    with pytest.raises(ValueError, match="betas"):
        predict.simulated_annealing(jax.random.key(0), model, cp, {"y": y[0]}, jnp.array([-1.0, 1.0]))
    with pytest.raises(ValueError, match="init_state"):
        predict.icm(model, cp, {"y": jnp.zeros((3, 2))})
