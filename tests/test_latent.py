"""Latent-variable models and learners: DBM, grid with hidden units, mean field, MF-PCD, APCD.

Ground truth is brute-force enumeration (``conftest.brute_force``, numpy float64) on
models with at most 64 joint configurations.  Samplers: chi-square of the final states
of independent chains against the exact distribution (``stat_utils``, alpha = 1e-6).
Mean field: its fixed-point equations, and exactness when the latents are
conditionally independent.  APCD E step: the per-datum running means against the
exact posterior expectations, with a tolerance derived from the step sizes and the
exact posterior variances.  Learners: exact log-likelihood before and after.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import all_states, brute_force, run_chains
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels.gibbs import build_kernel as gibbs_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.learn.apcd import apcd, power_decay
from ugm_infer.learn.meanfield import mean_field, mfpcd
from ugm_infer.learn.phases import conditional_model
from ugm_infer.models.dbm import dbm
from ugm_infer.models.grid_hidden import grid_hidden, random_grid_hidden


def _dbm_params(sizes, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    p = {}
    for k in range(1, len(sizes)):
        p[f"W{k}"] = jnp.asarray(scale * rng.normal(size=(sizes[k - 1], sizes[k])), jnp.float32)
    for k in range(len(sizes)):
        p[f"b{k}"] = jnp.asarray(0.5 * rng.normal(size=(sizes[k],)), jnp.float32)
    return p


def _grid_params(model, jhh, jvh, jvv=0.0, bias=None):
    hm, e = model.hidden_mask, model.edges
    both, one = hm[e[:, 0]] & hm[e[:, 1]], hm[e[:, 0]] | hm[e[:, 1]]
    w = np.where(both, jhh, np.where(one, jvh, jvv)).astype(np.float32)
    b = np.zeros(model.height * model.width, np.float32) if bias is None else np.asarray(bias, np.float32)
    return {"w": jnp.asarray(w), "b": jnp.asarray(b)}


def _posterior(model, params, v, beta=1.0):
    """Exact p(h | v) (at inverse temperature ``beta``) over all latent configurations, and those."""
    latent = [n for n in model.variables if n != "v"]
    doms = [model.variables[n] for n in latent]
    sizes = [d.size for d in doms]
    configs = np.array(list(itertools.product(*[doms[0].values] * sum(sizes))), np.float32)
    hs, off = {}, 0
    for n, s in zip(latent, sizes):
        hs[n] = jnp.asarray(configs[:, off : off + s])
        off += s
    e = np.asarray(jax.vmap(lambda h: model.energy(params, {"v": jnp.asarray(v), **h}))(hs), np.float64)
    p = np.exp(-beta * (e - e.min()))
    return p / p.sum(), hs


# ----------------------------------------------------------------------------------
# models: energies, free energies, block Gibbs against enumeration
# ----------------------------------------------------------------------------------
def test_dbm_energy_free_energies_and_gibbs_exact():
    sizes = (2, 2, 2)
    model = dbm(sizes)
    params = _dbm_params(sizes, 0)
    states = all_states(model)
    x = [np.asarray(states[n], np.float64) for n in model.layer_names]
    ref = -(x[0] * np.asarray(params["b0"])).sum(1) - (x[1] * np.asarray(params["b1"])).sum(1)
    ref -= (x[2] * np.asarray(params["b2"])).sum(1)
    ref -= np.einsum("ni,ij,nj->n", x[0], np.asarray(params["W1"]), x[1])
    ref -= np.einsum("ni,ij,nj->n", x[1], np.asarray(params["W2"]), x[2])
    np.testing.assert_allclose(np.asarray(model.energies(params, states)), ref, rtol=1e-5, atol=1e-5)
    # F_{h1}(v, h2) = -log sum_{h1} exp(-E): brute force over h1
    rest = {"v": jnp.array([1.0, 0.0]), "h2": jnp.array([0.0, 1.0])}
    brute = -np.log(
        sum(
            np.exp(-float(model.energy(params, {**rest, "h1": jnp.array(c, jnp.float32)})))
            for c in [(0, 0), (0, 1), (1, 0), (1, 1)]
        )
    )
    np.testing.assert_allclose(float(model.free_energy_fns["h1"](params, rest)), brute, rtol=1e-5)
    np.testing.assert_allclose(
        float(ui.exact.log_partition(model, params)), float(ui.exact.log_partition(model, params, sum_out=None)), rtol=1e-5
    )
    assert [sorted(b.indices) for b in model.blocks] == [["h2", "v"], ["h1"]]
    # block Gibbs (odd/even layers) against enumeration: 4000 iid chains, 25 sweeps
    probs = brute_force(model, params)
    kernel = gibbs_kernel(model, "block")
    start = model.random_state(jax.random.key(1), 4000)
    final = run_chains(kernel, gibbs_init, model.logdensity_fn(params), start, jax.random.key(2), 25)
    idx = state_index(final, model)
    assert_distribution_matches(idx, probs, label="dbm block Gibbs")
    assert_distribution_differs(idx, brute_force(model, params, beta=0.7), label="dbm power check")


def test_grid_hidden_gibbs_and_clamped_kernel_exact():
    model = grid_hidden(2, 3, [1, 4])  # hidden column in the middle of a 2x3 grid
    assert model.variables["v"].size == 4 and model.variables["h"].size == 2
    params = model.random_params(jax.random.key(0), bias_range=1.0, weight_std=1.0)
    # energy against a numpy loop over the grid's edges
    states = all_states(model)
    grid = np.asarray(model.to_grid(states), np.float64).reshape(-1, 6)
    w, b = np.asarray(params["w"], np.float64), np.asarray(params["b"], np.float64)
    ref = -(grid[:, model.edges[:, 0]] * grid[:, model.edges[:, 1]] * w).sum(1) - grid @ b
    np.testing.assert_allclose(np.asarray(model.energies(params, states)), ref, rtol=1e-5, atol=1e-5)
    probs = brute_force(model, params)
    kernel = gibbs_kernel(model, "block")
    start = model.random_state(jax.random.key(1), 4000)
    final = run_chains(kernel, gibbs_init, model.logdensity_fn(params), start, jax.random.key(2), 25)
    assert_distribution_matches(state_index(final, model), probs, label="grid_hidden block Gibbs")
    # the E-step kernel of APCD: block Gibbs on h with v clamped leaves p(h | v) invariant
    v = jnp.array([1.0, 0.0, 1.0, 1.0])
    cond = conditional_model(model, ("v",), params)
    post, _ = _posterior(model, params, v)
    ckernel = gibbs_kernel(cond, "block")
    h0 = {"h": cond.random_state(jax.random.key(3), 4000)["h"]}
    hfin = run_chains(ckernel, gibbs_init, lambda h: -model.energy(params, {"v": v, **h}), h0, jax.random.key(4), 25)
    assert_distribution_matches(state_index(hfin, cond), post, label="clamped hidden Gibbs")


def test_random_grid_hidden_instance():
    model, params = random_grid_hidden(jax.random.key(0), 4, 5, 0.2)
    assert model.variables["h"].size == 4 and model.variables["v"].size == 16
    b, w = np.asarray(params["b"]), np.asarray(params["w"])
    assert b.shape == (20,) and np.all(np.abs(b) <= 3.0)
    assert w.shape == (len(model.edges),) == (31,)
    model.validate_params(params)


# ----------------------------------------------------------------------------------
# mean field
# ----------------------------------------------------------------------------------
def test_mean_field_fixed_point_and_exact_for_rbm():
    sizes = (4, 3, 3)
    model = dbm(sizes)
    params = _dbm_params(sizes, 3)
    v = jnp.array([1.0, 0.0, 1.0, 1.0])
    mu, info = jax.jit(mean_field(model, damping=0.3, tol=1e-6, max_iterations=500))(params, {"v": v})
    assert bool(info.converged) and int(info.num_iterations) < 500
    # Salakhutdinov & Hinton (2009) eq. 6: mu1 = s(b1 + v W1 + W2 mu2), mu2 = s(b2 + mu1 W2)
    f1 = jax.nn.sigmoid(params["b1"] + v @ params["W1"] + params["W2"] @ mu["h2"])
    f2 = jax.nn.sigmoid(params["b2"] + mu["h1"] @ params["W2"])
    np.testing.assert_allclose(np.asarray(f1), np.asarray(mu["h1"]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(f2), np.asarray(mu["h2"]), atol=1e-5)
    # one hidden layer: the latents are independent given v and mean field is exact
    rbm_like = dbm((4, 3))
    p1 = _dbm_params((4, 3), 4)
    mu1, _ = mean_field(rbm_like)(p1, {"v": v})
    post, hs = _posterior(rbm_like, p1, v)
    exact_mean = post @ np.asarray(hs["h1"], np.float64)
    np.testing.assert_allclose(np.asarray(mu1["h1"]), exact_mean, atol=1e-5)
    # spins on a grid: the generic (gradient-of-the-energy) fields satisfy tanh fixed points
    grid = grid_hidden(3, 3, [3, 4, 5], domain="spin")
    gp = _grid_params(grid, 0.7, 0.5, bias=np.linspace(-0.5, 0.5, 9))
    vg = {"v": jnp.array([1.0, -1.0, 1.0, 1.0, 1.0, -1.0])}
    mug, infog = mean_field(grid, tol=1e-7, max_iterations=500)(gp, vg)
    field = -jax.grad(lambda h: grid.energy(gp, {**vg, "h": h}))(mug["h"])
    np.testing.assert_allclose(np.asarray(jnp.tanh(field)), np.asarray(mug["h"]), atol=1e-5)
    assert bool(infog.converged)


# ----------------------------------------------------------------------------------
# APCD E step: running means -> exact posterior expectations
# ----------------------------------------------------------------------------------
def test_apcd_estep_running_means_converge_to_exact_posterior():
    model = grid_hidden(2, 3, [1, 4], domain="spin")
    params = _grid_params(model, 0.8, 0.6, jvv=0.3, bias=[0.2, -0.3, 0.1, 0.0, 0.4, -0.2])
    rows = jnp.array([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, -1.0], [-1.0, -1.0, 1.0, 1.0]])
    data = {"v": jnp.concatenate([rows, rows])}  # duplicates share one per-datum state
    num_chains, num_steps = 32, 250
    learner = apcd(model, optax.sgd(0.0), 10, num_chains_per_datum=num_chains)  # params frozen
    state = learner.init(jax.random.key(0), params, data)
    assert state.visits.shape == (4,)

    @jax.jit
    def go(state, key):
        return jax.lax.scan(lambda s, k: (learner.step(k, s, data)[0], None), state, jax.random.split(key, num_steps))[0]

    state = go(state, jax.random.key(1))
    # a row twice in one batch is one visit (both copies read the same state; one write lands)
    np.testing.assert_array_equal(np.asarray(state.visits), num_steps)
    ids = np.asarray(state.row_to_unique)
    # exact E[-dE/dtheta | v] per row, and its posterior variance (for the tolerance)
    a_last = float(power_decay()(num_steps))
    worst, power = 0.0, 0.0
    for r in range(4):
        post, hs = _posterior(model, params, rows[r])
        grads = jax.vmap(lambda h, v=rows[r]: jax.grad(lambda p: -model.energy(p, {"v": v, **h}))(params))(hs)
        for key in ("w", "b"):
            g = np.asarray(grads[key], np.float64)
            mean = post @ g
            var = post @ (g - mean) ** 2
            est = np.asarray(state.estimates[key][ids[r]], np.float64)
            # stationary sd of x <- (1-a) x + a * (mean of M draws): sqrt(a/(2-a) * var/M); x3 in
            # variance for the autocorrelation of one Gibbs sweep per visit; 6 sd
            tol = 6 * np.sqrt(3 * a_last / (2 - a_last) * var / num_chains) + 1e-4
            assert np.all(np.abs(est - mean) <= tol), (r, key, est, mean, tol)
            worst = max(worst, float(np.max(np.abs(est - mean) / tol)))
            wrong = _posterior(model, params, rows[r], beta=0.5)[0] @ g  # a sampler at the wrong temperature
            power = max(power, float(np.max(np.abs(est - wrong) / tol)))
    print(f"APCD E step: largest |error| / tolerance = {worst:.2f}; against beta = 0.5: {power:.2f}")
    assert power > 1.0  # the tolerance is tight enough to reject the posterior at beta = 0.5
    # and it is not the mean-field answer where that is off (the grid's hidden pair is coupled)
    mu, _ = mean_field(model)(params, {"v": rows[1]})
    mf_hh = float(mu["h"][0] * mu["h"][1])
    post, hs = _posterior(model, params, rows[1])
    exact_hh = float(post @ np.asarray(hs["h"][:, 0] * hs["h"][:, 1], np.float64))
    assert abs(mf_hh - exact_hh) > 0.05


# ----------------------------------------------------------------------------------
# learners increase the exact likelihood
# ----------------------------------------------------------------------------------
def _run(learner, params, data, num_steps, seed=0):
    state = learner.init(jax.random.key(seed), params, data)

    @jax.jit
    def go(state, key):
        def body(s, k):
            s, info = learner.step(k, s, data)
            return s, info

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    return go(state, jax.random.key(seed + 1))


@pytest.mark.slow  # 1-2 min of compilation and training; run with `pytest -m slow`
def test_h_apcd_on_a_dbm_increases_exact_likelihood():
    sizes = (4, 2, 2)
    model = dbm(sizes)
    true = _dbm_params(sizes, 5, scale=2.0)
    data = {"v": ui.exact.sample(jax.random.key(0), model, true, 200)["v"]}
    p0 = model.init_params(jax.random.key(1), 0.1)

    def ll(p):
        return float(ui.exact.average_log_likelihood(model, p, data))

    start, best = ll(p0), ll(true)
    opt = optax.sgd(ui.learn.robbins_monro(5.0, 50.0))
    learner = apcd(model, opt, 100, statistics="latent", num_chains_per_datum=2, hybrid=True, num_steps=300)
    # through ui.fit: shuffled minibatches of 50 rows, matched to their per-datum state by the hash lookup
    res = ui.fit(learner, jax.random.key(2), data, params=p0, num_epochs=75, batch_size=50, progress=False, eval_every=75)
    w = np.asarray(res.history["steps"]["apcd_weight"])
    assert w.shape == (300,) and np.all(w[:150] == 0) and w[-1] > 0.99 and np.all(np.diff(w) >= 0)
    visits = np.asarray(res.state.visits)
    assert visits.sum() > 0 and visits.max() <= 150  # only the APCD half visits; at most once per step
    # closes at least half of the gap between the start and the data-generating params
    assert ll(res.params) > start + 0.5 * (best - start), (ll(res.params), start, best)


class _ExactState(NamedTuple):
    position: dict


def _exact_kernel(variables):
    """Independence kernel proposing from the target itself (enumeration): invariant, one-step exact."""
    names = list(variables)
    sizes = [variables[n].size for n in names]
    configs = jnp.asarray(np.array(list(itertools.product(variables[names[0]].values, repeat=sum(sizes))), np.float32))

    def split(c):
        out, off = {}, 0
        for n, s in zip(names, sizes):
            out[n] = c[off : off + s].astype(variables[n].dtype)
            off += s
        return out

    def init(position, logdensity_fn):
        del logdensity_fn
        return _ExactState(position)

    def kernel(rng_key, state, logdensity_fn):
        del state
        logp = jax.vmap(lambda c: logdensity_fn(split(c)))(configs)
        return _ExactState(split(configs[jax.random.categorical(rng_key, logp)])), ()

    return init, kernel


@pytest.mark.slow  # 1-2 min of compilation and training; run with `pytest -m slow`
def test_apcd_beats_mfpcd_when_hidden_units_are_strongly_coupled():
    """The case: a 3x3 spin grid whose middle row (3 units) is hidden, zero biases,
    hidden-hidden couplings 4 and visible-hidden couplings 0.8, no visible-visible ones.
    The hidden row is a strongly coupled switch that carries the correlations between
    the top and bottom rows; given v its posterior is bimodal (all +1 or all -1), which
    a factorised q cannot represent.  Mean-field learning climbs the bound
    log p(v) - KL(q || p(h|v)) and lowers the hidden couplings (to about 0.6) to shrink
    the KL; its optimum, found deterministically (Adam on the bound with the exact log Z,
    from small random and from the true parameters alike), has an average LL of -3.587 on
    these data, against -3.460 at the MLE (exact ML).  Both learners use the same
    invariant kernel for every chain -- exact draws by enumeration, so that only the E
    step differs (block Gibbs would not cross between the two modes at this coupling,
    which biases both learners' chains alike) -- and the same optimizer.  Measured
    (1500 updates, 3 seeds): APCD -3.464 / -3.469 / -3.466, MF-PCD -3.578 / -3.588 /
    -3.577.
    """
    model = grid_hidden(3, 3, [3, 4, 5], domain="spin")
    true = _grid_params(model, 4.0, 0.8)
    data = {"v": ui.exact.sample(jax.random.key(100), model, true, 400)["v"]}
    p0 = model.init_params(jax.random.key(7), 0.1)

    def ll(p):
        return float(ui.exact.average_log_likelihood(model, p, data))

    num_steps = 1500
    opt = optax.adam(optax.linear_schedule(0.05, 0.005, num_steps))
    full, latent = _exact_kernel(model.variables), _exact_kernel({"h": model.variables["h"]})
    ll_apcd = ll(_run(apcd(model, opt, 100, kernel=full, latent_kernel=latent), p0, data, num_steps)[0].params)
    ll_mf = ll(_run(mfpcd(model, opt, 100, kernel=full), p0, data, num_steps)[0].params)
    ll_true, ll_start = ll(true), ll(p0)
    assert ll_mf > ll_start + 0.3 and ll_apcd > ll_start + 0.3  # both learn
    assert ll_apcd > ll_true - 0.02, (ll_apcd, ll_true)  # APCD reaches the likelihood of the truth
    assert ll_apcd > ll_mf + 0.05, (ll_apcd, ll_mf)  # mean field stays at its bound's optimum


# ----------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------
def test_bad_input():
    with pytest.raises(ValueError, match="layer_sizes"):
        dbm([3])
    with pytest.raises(TypeError, match="layer_sizes"):
        dbm("34")
    with pytest.raises(ValueError, match=r"layer_sizes\[1\]"):
        dbm([3, 0])
    model = dbm([3, 2])
    with pytest.raises(ValueError, match="W1"):
        model.validate_params({"W1": jnp.zeros((2, 3)), "b0": jnp.zeros(3), "b1": jnp.zeros(2)})
    with pytest.raises(ValueError, match="hidden"):
        grid_hidden(2, 2, np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="hidden"):
        grid_hidden(2, 2, [7])
    with pytest.raises(ValueError, match="hidden_fraction"):
        random_grid_hidden(jax.random.key(0), 3, 3, 1.5)
    with pytest.raises(ValueError, match="damping"):
        mean_field(model, damping=1.0)
    with pytest.raises(ValueError, match="max_iterations"):
        mean_field(model, max_iterations=0)
    with pytest.raises(ValueError, match="statistics"):
        apcd(model, statistics="moments")
    with pytest.raises(ValueError, match="num_steps"):
        apcd(model, hybrid=True)
    with pytest.raises(ValueError, match="estimate_step"):
        apcd(model, estimate_step=1.5)
    with pytest.raises(ValueError, match="power"):
        power_decay(1.0, 0.4)
    with pytest.raises(ValueError, match="latent"):
        apcd(ui.models.ising(3))
    learner = apcd(model)
    with pytest.raises(ValueError, match="data"):
        learner.init(jax.random.key(0), model.init_params(jax.random.key(1)))
    mixed = ui.EnergyModel(
        lambda p, s: jnp.sum(s["v"]) * jnp.sum(s["h"]), {"v": ui.Binary((2,)), "h": ui.Categorical((2,), 3)}
    )
    with pytest.raises(ValueError, match="Binary or Spin"):
        mean_field(mixed, visible="v")
