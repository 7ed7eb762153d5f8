"""Tests of :mod:`ugm_infer.exact` against closed forms and independent numpy brute force.

Ground truth is computed in float64 numpy from energies re-written in numpy (not the
jitted float32 energies under test): every configuration is listed with
``itertools.product`` in the order of ``stat_utils.state_index``.  Closed forms:
independent spins (``log Z = sum log 2 cosh h``), the periodic Ising chain (transfer
matrix), and RBM free energies.  Samples are checked with a chi-square test against the
exact distribution (``alpha = 1e-6``); the same draws are shown to reject a slightly
wrong distribution (power).
"""

from __future__ import annotations

import itertools
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index  # noqa: E402

import ugm_infer as ui  # noqa: E402
from ugm_infer import exact  # noqa: E402


# --------------------------------------------------------------------------------------
# numpy brute force
# --------------------------------------------------------------------------------------
def np_all_states(variables: dict) -> dict:
    """Every configuration, mixed radix, first variable's first site most significant."""
    sites = []
    for name, d in variables.items():
        sites += [(name, d)] * d.size
    rows = np.array(list(itertools.product(*[range(d.num_states) for _, d in sites])), dtype=np.int64)
    rows = rows.reshape(-1, len(sites))
    out, pos = {}, 0
    for name, d in variables.items():
        out[name] = d.values[rows[:, pos : pos + d.size]].reshape((rows.shape[0],) + d.shape)
        pos += d.size
    return out


def np_logsumexp(x, axis=None):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def np_as(params):
    return {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}


# --------------------------------------------------------------------------------------
# inline models (energies written twice: jnp for the model, numpy float64 for the truth)
# --------------------------------------------------------------------------------------
def mixed_features(state, xp):
    """Features of a model mixing all three domains: spins, bits and a one-hot categorical."""
    s = state["s"].reshape(state["s"].shape[:-2] + (4,))
    c = state["c"]
    onehot = (c[..., None] == xp.arange(3)).astype(s.dtype)
    onehot = onehot.reshape(onehot.shape[:-2] + (6,))
    return xp.concatenate([s, state["b"].astype(s.dtype), onehot], axis=-1)


def mixed_energy(params, state):
    phi = mixed_features({**state, "s": state["s"].astype(jnp.float32), "b": state["b"].astype(jnp.float32)}, jnp)
    return -(phi @ params["J"] @ phi) - params["h"] @ phi


def np_mixed_energy(params, states):
    p = np_as(params)
    phi = mixed_features(states, np)
    return -np.einsum("ni,ij,nj->n", phi, p["J"], phi) - phi @ p["h"]


MIXED_VARIABLES = {"s": ui.Spin((2, 2)), "b": ui.Binary(3), "c": ui.Categorical(2, 3)}


def mixed_params(seed=0, scale=0.6):
    rng = np.random.default_rng(seed)
    J = np.triu(scale * rng.normal(size=(13, 13)), 1)
    J[7:10, 7:10] = 0.0  # one-hot entries of one categorical site never co-occur
    J[10:13, 10:13] = 0.0
    return {"J": jnp.asarray(J, jnp.float32), "h": jnp.asarray(0.5 * rng.normal(size=13), jnp.float32)}


MIXED = ui.EnergyModel(mixed_energy, MIXED_VARIABLES)  # shared: probed and compiled once


def mixed_model():
    return MIXED


def rbm_energy(params, state):
    v, h = state["v"].astype(jnp.float32), state["h"].astype(jnp.float32)
    return -(v @ params["W"] @ h) - params["b"] @ v - params["c"] @ h


def rbm_visible_sum(params, rest):
    """Visible layer summed out: ``F(h) = -c.h - sum_i softplus(b_i + W_i h)``."""
    h = rest["h"].astype(jnp.float32)
    return -(params["c"] @ h) - jnp.sum(jax.nn.softplus(params["b"] + params["W"] @ h))


_MODELS: dict = {}  # models shared between tests: probed and compiled once


def rbm_model(nv, nh, *, free_energy=False, declare=False):
    key = ("rbm", nv, nh, free_energy, declare)
    if key not in _MODELS:
        _MODELS[key] = _new_rbm_model(nv, nh, free_energy=free_energy, declare=declare)
    return _MODELS[key]


def _new_rbm_model(nv, nh, *, free_energy=False, declare=False):
    return ui.EnergyModel(
        rbm_energy,
        {"v": ui.Binary(nv), "h": ui.Binary(nh)},
        blocks=[{"v": True}, {"h": True}] if declare else None,
        multilinear=True if declare else None,
        free_energy_fns={"v": rbm_visible_sum} if free_energy else None,
    )


def rbm_params(nv, nh, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return {
        "W": jnp.asarray(scale * rng.normal(size=(nv, nh)), jnp.float32),
        "b": jnp.asarray(0.5 * rng.normal(size=nv), jnp.float32),
        "c": jnp.asarray(0.5 * rng.normal(size=nh), jnp.float32),
    }


def np_rbm_energy(params, states):
    p = np_as(params)
    v, h = states["v"], states["h"]
    return -np.einsum("ni,ij,nj->n", v, p["W"], h) - v @ p["b"] - h @ p["c"]


def potts_bipartite_energy(params, state):
    """Categorical bipartite model: ``E = -sum_ij J[i, j, a_i, b_j] - f_a[i, a_i] - f_b[j, b_j]``."""
    na, nb = params["fa"].shape[0], params["fb"].shape[0]
    a, b = state["a"].astype(jnp.int32), state["b"].astype(jnp.int32)
    ja = params["J"][jnp.arange(na)[:, None], jnp.arange(nb)[None, :], a[:, None], b[None, :]]
    return -jnp.sum(ja) - jnp.sum(params["fa"][jnp.arange(na), a]) - jnp.sum(params["fb"][jnp.arange(nb), b])


def np_potts_bipartite_energy(params, states):
    p = np_as(params)
    a, b = states["a"].astype(int), states["b"].astype(int)
    na, nb = a.shape[1], b.shape[1]
    ja = p["J"][np.arange(na)[None, :, None], np.arange(nb)[None, None, :], a[:, :, None], b[:, None, :]]
    return -ja.sum((1, 2)) - p["fa"][np.arange(na), a].sum(1) - p["fb"][np.arange(nb), b].sum(1)


def potts_bipartite(na=4, nb=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    params = {
        "J": jnp.asarray(0.8 * rng.normal(size=(na, nb, k, k)), jnp.float32),
        "fa": jnp.asarray(0.5 * rng.normal(size=(na, k)), jnp.float32),
        "fb": jnp.asarray(0.5 * rng.normal(size=(nb, k)), jnp.float32),
    }
    key = ("potts", na, nb, k)
    if key not in _MODELS:
        _MODELS[key] = ui.EnergyModel(potts_bipartite_energy, {"a": ui.Categorical(na, k), "b": ui.Categorical(nb, k)})
    return _MODELS[key], params


def chain_energy(params, state):
    s = state["s"].astype(jnp.float32)
    return -params["K"] * jnp.sum(s * jnp.roll(s, 1)) - params["h"] * jnp.sum(s)


def split_chain_energy(params, state):
    """The same periodic chain with even sites in ``a`` and odd sites in ``b`` (each non-interacting)."""
    s = jnp.concatenate([state["a"][:, None], state["b"][:, None]], axis=1).reshape(-1).astype(jnp.float32)
    return chain_energy(params, {"s": s})


CHAIN = ui.EnergyModel(chain_energy, {"s": ui.Spin(12)})
SPLIT_CHAIN = ui.EnergyModel(split_chain_energy, {"a": ui.Spin(6), "b": ui.Spin(6)})


def chain_log_z(n, K, h):
    """Transfer matrix: ``Z = lambda_+^n + lambda_-^n``."""
    root = math.sqrt(math.exp(2 * K) * math.sinh(h) ** 2 + math.exp(-2 * K))
    lp, lm = math.exp(K) * math.cosh(h) + root, math.exp(K) * math.cosh(h) - root
    return n * math.log(lp) + math.log1p((lm / lp) ** n)


def truth(model, params, np_energy):
    states = np_all_states(model.variables)
    logw = -np_energy(params, states)
    log_z = np_logsumexp(logw)
    return states, np.exp(logw - log_z), log_z


def np_marginals(model, states, probs):
    out = {}
    for name, d in model.variables.items():
        x = states[name].reshape(len(probs), d.size)
        out[name] = np.stack([probs @ (x == v) for v in d.values], axis=-1).reshape(d.shape + (d.num_states,))
    return out


# --------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------
def test_independent_spins_closed_form():
    h = np.array([[0.3, -1.2, 0.0], [2.0, -0.4, 0.7]])
    model = ui.EnergyModel(lambda p, s: -jnp.sum(p["h"] * s["s"]), {"s": ui.Spin((2, 3))})
    params = {"h": jnp.asarray(h, jnp.float32)}
    expected = np.sum(np.log(2 * np.cosh(h)))
    plan = exact.enumeration_plan(model, params)
    assert plan.summed == "s" and plan.enumerated == () and plan.num_configurations == 1
    for sum_out in ("auto", None):
        np.testing.assert_allclose(exact.log_partition(model, params, sum_out=sum_out), expected, rtol=1e-6)
        m = exact.marginals(model, params, sum_out=sum_out)["s"]
        assert m.shape == (2, 3, 2)
        np.testing.assert_allclose(m[..., 1], 1 / (1 + np.exp(-2 * h)), atol=1e-6)
        np.testing.assert_allclose(m[..., 0], 1 / (1 + np.exp(2 * h)), atol=1e-6)


@pytest.mark.parametrize(
    "K,h",
    [(0.7, 0.3), pytest.param(-0.5, -0.8, marks=pytest.mark.slow)],  # the second: left out of CI for time
)
def test_periodic_chain_transfer_matrix(K, h):
    n = 12
    params = {"K": jnp.float32(K), "h": jnp.float32(h)}
    expected = chain_log_z(n, K, h)
    chain, split = CHAIN, SPLIT_CHAIN
    assert exact.enumeration_plan(chain, params).summed is None  # neighbours interact
    np.testing.assert_allclose(exact.log_partition(chain, params), expected, rtol=1e-6)
    np.testing.assert_allclose(exact.log_partition(chain, params, chunk_size=7), expected, rtol=1e-6)
    # even / odd sublattices: each non-interacting, one summed analytically (gradient path)
    plan = exact.enumeration_plan(split, params, chunk_size=8)
    assert plan.summed == "a" and plan.method == "gradient" and plan.num_chunks == 8
    np.testing.assert_allclose(exact.log_partition(split, params, chunk_size=8), expected, rtol=1e-6)
    # magnetisation by translation invariance: every site has the same marginal
    m = exact.marginals(split, params, chunk_size=8)
    np.testing.assert_allclose(m["a"], m["b"], atol=1e-6)
    m_full = exact.marginals(chain, params)["s"]
    # float32 energies of size ~15 round to ~1e-6 relative, and 4096 weights are summed:
    # the two routes agree to a few 1e-6, not to 1e-7
    np.testing.assert_allclose(m_full, np.broadcast_to(m["a"][:1], m_full.shape), atol=2e-5)


# --------------------------------------------------------------------------------------
# brute force on mixed domains, chunking and ordering
# --------------------------------------------------------------------------------------
@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_mixed_model_against_brute_force():
    model, params = mixed_model(), mixed_params()
    states, probs, log_z = truth(model, params, np_mixed_energy)
    assert len(probs) == 16 * 8 * 9
    for chunk in (5, 65536):
        np.testing.assert_allclose(exact.log_partition(model, params, chunk_size=chunk), log_z, rtol=1e-6)
    got_states, got_probs = exact.distribution(model, params, chunk_size=64)
    np.testing.assert_array_equal(state_index(got_states, model), np.arange(len(probs)))
    for name in model.variables:
        np.testing.assert_array_equal(np.asarray(got_states[name]), states[name])
        assert got_states[name].dtype == model.variables[name].dtype
    np.testing.assert_allclose(got_probs, probs, rtol=1e-4, atol=1e-9)
    want = np_marginals(model, states, probs)
    got = exact.marginals(model, params, chunk_size=32)
    for name in model.variables:
        np.testing.assert_allclose(got[name], want[name], atol=2e-6)
    # log_prob of full states, batched and single
    lp = exact.log_prob(model, params, {n: x[:7] for n, x in states.items()})
    np.testing.assert_allclose(lp, np.log(probs[:7]), atol=2e-5)
    lp1 = exact.log_prob(model, params, {n: x[100] for n, x in states.items()})
    assert lp1.shape == ()
    np.testing.assert_allclose(lp1, np.log(probs[100]), atol=2e-5)


def test_expectation_and_gradient_of_log_partition():
    model, params = mixed_model(), mixed_params(seed=3)
    states, probs, _ = truth(model, params, np_mixed_energy)

    def stats(state):
        return {"sum_s": jnp.sum(state["s"]), "c": state["c"], "pair": state["s"][0, 0] * state["b"][1]}

    got = exact.expectation(model, params, stats, chunk_size=16)
    np.testing.assert_allclose(got["sum_s"], probs @ states["s"].reshape(-1, 4).sum(1), atol=1e-5)
    np.testing.assert_allclose(got["c"], probs @ states["c"], atol=1e-5)
    np.testing.assert_allclose(got["pair"], probs @ (states["s"][:, 0, 0] * states["b"][:, 1]), atol=1e-5)
    # grad log Z = E[-dE/dtheta] = E[phi phi^T] (upper part) for J
    grad = jax.grad(lambda p: exact.log_partition(model, p, chunk_size=64))(params)
    phi = mixed_features(states, np)
    np.testing.assert_allclose(grad["J"], np.einsum("n,ni,nj->ij", probs, phi, phi), atol=2e-4)
    np.testing.assert_allclose(grad["h"], probs @ phi, atol=2e-4)
    # log_partition under jit, with traced params, gives the same value
    np.testing.assert_allclose(
        jax.jit(lambda p: exact.log_partition(model, p))(params), exact.log_partition(model, params), rtol=1e-6
    )


def test_configuration_indices_beyond_int32():
    """Decoding never forms the index: chunk digits and offset digits are decoded separately."""
    model = ui.EnergyModel(lambda p, s: -jnp.sum(s["x"]) * p, {"x": ui.Categorical(21, 3)})
    plan = exact._make_plan(model, 0.0, ("x",), sum_out=None, conditionals=False, chunk_size=1000, max_configurations=3**21)
    assert plan.num_configurations == 3**21 > 2**33 and plan.chunk == 729
    rng = np.random.default_rng(0)
    index = np.concatenate([[0, 3**21 - 1, 2**31, 2**31 + 12345], rng.integers(0, 3**21, 20)]).astype(object)
    chunk_ids = jnp.asarray([int(i) // plan.chunk for i in index], jnp.int32)
    offsets = jnp.asarray([int(i) % plan.chunk for i in index], jnp.int32)
    states, digits = exact._decode(model, plan, chunk_ids, offsets)
    expected = np.array([[(int(i) // 3 ** (20 - j)) % 3 for j in range(21)] for i in index])
    np.testing.assert_array_equal(np.asarray(digits), expected)
    np.testing.assert_array_equal(np.asarray(states["x"]), expected)


# --------------------------------------------------------------------------------------
# analytic summation
# --------------------------------------------------------------------------------------
@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_rbm_analytic_summation_matches_full_enumeration():
    nv, nh = 10, 6
    params = rbm_params(nv, nh, seed=1)
    model = rbm_model(nv, nh)  # structure probed, no free energy declared
    states, probs, log_z = truth(model, params, np_rbm_energy)
    plan = exact.enumeration_plan(model, params)
    assert (plan.summed, plan.method, plan.enumerated) == ("v", "gradient", ("h",))
    for sum_out in ("auto", "h", None):
        np.testing.assert_allclose(exact.log_partition(model, params, sum_out=sum_out, chunk_size=16), log_z, rtol=1e-6)
    with_fe = rbm_model(nv, nh, free_energy=True)
    assert exact.enumeration_plan(with_fe, params).method == "free_energy"
    np.testing.assert_allclose(exact.log_partition(with_fe, params, chunk_size=8), log_z, rtol=1e-6)
    # marginals with either layer summed (conditionals of the summed layer averaged)
    want = np_marginals(model, states, probs)
    for sum_out in ("v", "h"):
        got = exact.marginals(model, params, sum_out=sum_out, chunk_size=8)
        for name in ("v", "h"):
            np.testing.assert_allclose(got[name], want[name], atol=3e-6)


def test_gradient_summation_exact_for_quadratic_sites():
    """Midpoint gradients stay exact when a site enters squared (a BM whose W got a diagonal)."""
    nv, nh = 6, 4
    params = {**rbm_params(nv, nh, seed=6), "d": jnp.asarray(np.linspace(-1.5, 2.0, nv), jnp.float32)}

    def energy(p, s):
        v = s["v"].astype(jnp.float32)
        return rbm_energy(p, s) - jnp.sum(p["d"] * v * v)

    model = ui.EnergyModel(
        energy, {"v": ui.Binary(nv), "h": ui.Binary(nh)}, blocks=[{"v": True}, {"h": True}], multilinear=True
    )
    assert exact.enumeration_plan(model, params).method == "gradient"
    _, probs, log_z = truth(model, params, lambda p, st: np_rbm_energy(p, st) - st["v"] ** 2 @ np_as(p)["d"])
    np.testing.assert_allclose(exact.log_partition(model, params), log_z, rtol=1e-6)
    np.testing.assert_allclose(exact.log_partition(model, params, sum_out=None), log_z, rtol=1e-6)


@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_categorical_single_site_summation():
    model, params = potts_bipartite()
    states, probs, log_z = truth(model, params, np_potts_bipartite_energy)
    plan = exact.enumeration_plan(model, params)
    assert (plan.summed, plan.method) == ("a", "single_site")  # 4 sites of 3 states beat 3 sites
    for sum_out in ("auto", "b", None):
        np.testing.assert_allclose(exact.log_partition(model, params, sum_out=sum_out, chunk_size=4), log_z, rtol=1e-6)
    want = np_marginals(model, states, probs)
    got = exact.marginals(model, params, chunk_size=4)
    for name in model.variables:
        np.testing.assert_allclose(got[name], want[name], atol=3e-6)
    # likelihood of `b` with `a` latent (summed analytically) and of `a` with `b` latent
    for obs, lat in (("b", "a"), ("a", "b")):
        data = {obs: states[obs][::97]}
        got_ll = exact.log_likelihood(model, params, data, chunk_size=4)
        na = model.variables[lat].size
        k = model.variables[lat].num_states
        lat_states = np.array(list(itertools.product(range(k), repeat=na)), dtype=np.float64)
        want_ll = []
        for x in data[obs]:
            full = {obs: np.broadcast_to(x, (len(lat_states),) + x.shape), lat: lat_states}
            want_ll.append(np_logsumexp(-np_potts_bipartite_energy(params, full)) - log_z)
        np.testing.assert_allclose(got_ll, want_ll, atol=2e-5)


def test_log_likelihood_with_latent_variables():
    model, params = mixed_model(), mixed_params(seed=5)
    states, probs, log_z = truth(model, params, np_mixed_energy)
    joint = probs.reshape(16, 8, 9)  # (s, b, c) configurations
    idx = np.random.default_rng(0).integers(0, len(probs), 25)
    s_i, b_i, c_i = np.unravel_index(idx, (16, 8, 9))
    cases = {
        ("s",): np.log(joint.sum((1, 2))[s_i]),
        ("b", "c"): np.log(joint.sum(0)[b_i, c_i]),
        ("c",): np.log(joint.sum((0, 1))[c_i]),
        ("s", "b", "c"): np.log(probs[idx]),
    }
    for observed, want in cases.items():
        data = {n: states[n][idx] for n in observed}
        got = exact.log_likelihood(model, params, data, chunk_size=4)
        assert got.shape == (25,)
        np.testing.assert_allclose(got, want, atol=3e-5, err_msg=str(observed))
    np.testing.assert_allclose(
        exact.average_log_likelihood(model, params, {"s": states["s"][idx]}, chunk_size=4), np.mean(cases[("s",)]), atol=3e-5
    )
    single = exact.log_likelihood(model, params, {"c": states["c"][idx[0]]}, chunk_size=4)
    assert single.shape == ()
    np.testing.assert_allclose(single, cases[("c",)][0], atol=3e-5)


def test_rbm_log_likelihood_with_hidden_summed():
    nv, nh = 10, 6
    params = rbm_params(nv, nh, seed=4)
    model = rbm_model(nv, nh, free_energy=True, declare=True)
    p = np_as(params)
    v = np.random.default_rng(1).integers(0, 2, (40, nv)).astype(np.float64)
    # closed form: F(v) = -b.v - sum_j softplus(c_j + v W_j); log Z from the hidden side
    free_v = -(v @ p["b"]) - np.sum(np.logaddexp(0, p["c"] + v @ p["W"]), axis=1)
    h_all = np.array(list(itertools.product([0.0, 1.0], repeat=nh)))
    log_z = np_logsumexp(h_all @ p["c"] + np.sum(np.logaddexp(0, p["b"] + h_all @ p["W"].T), axis=1))
    want = -free_v - log_z
    for sum_out in ("auto", None):
        np.testing.assert_allclose(exact.log_likelihood(model, params, {"v": v}, sum_out=sum_out), want, atol=3e-5)
    assert exact.enumeration_plan(model, params, observed=("v",)).summed == "h"


def grouped_rbm_params(nv, nh, groups, seed):
    """784 visibles whose (W row, bias) pairs take only ``groups`` distinct values, so the
    float64 numpy reference needs ``groups`` softplus terms per hidden state, not 784
    (log Z is invariant to permuting visibles, so nothing is lost for its check)."""
    rng = np.random.default_rng(seed)
    W = 0.1 * rng.normal(size=(groups, nh))
    b = 0.3 * rng.normal(size=groups)
    c = 0.3 * rng.normal(size=nh)
    g = np.arange(nv) % groups
    params = {"W": jnp.asarray(W[g], jnp.float32), "b": jnp.asarray(b[g], jnp.float32), "c": jnp.asarray(c, jnp.float32)}
    counts = np.bincount(g, minlength=groups).astype(np.float64)
    Wg, bg = np.asarray(params["W"], np.float64)[:groups], np.asarray(params["b"], np.float64)[:groups]
    return params, (Wg, bg, np.asarray(params["c"], np.float64), counts)


def np_grouped_hidden_log_weights(ref, nh, block=1 << 14):
    """log of exp(-F(h)) = exp(c.h + sum_i softplus(b_i + W_i h)) for all h (2^nh, float64)."""
    Wg, bg, c, counts = ref
    out = np.empty(2**nh)
    bits = 1 << np.arange(nh - 1, -1, -1)
    for start in range(0, 2**nh, block):
        h = ((np.arange(start, start + block)[:, None] & bits) > 0).astype(np.float64)
        out[start : start + block] = h @ c + np.logaddexp(0, bg + h @ Wg.T) @ counts
    return out


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_rbm_784x20_log_partition():
    nv, nh = 784, 20
    params, ref = grouped_rbm_params(nv, nh, groups=8, seed=0)
    model = rbm_model(nv, nh, free_energy=True, declare=True)
    plan = exact.enumeration_plan(model, params)
    assert (plan.summed, plan.enumerated, plan.num_configurations) == ("v", ("h",), 2**20)
    got = float(exact.log_partition(model, params))
    want = np_logsumexp(np_grouped_hidden_log_weights(ref, nh))
    assert np.isfinite(got) and want > 500
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_rbm_784_visible_marginals_and_sample():
    """Marginals and sampling at full visible width (h drawn from its exact marginal, then v | h)."""
    nv, nh = 784, 14
    params, ref = grouped_rbm_params(nv, nh, groups=8, seed=1)
    model = rbm_model(nv, nh, declare=True)
    logw = np_grouped_hidden_log_weights(ref, nh)
    p_h = np.exp(logw - np_logsumexp(logw))
    Wg, bg, _, _ = ref
    bits = 1 << np.arange(nh - 1, -1, -1)
    h_all = ((np.arange(2**nh)[:, None] & bits) > 0).astype(np.float64)
    want_h = p_h @ h_all
    want_v = p_h @ (1 / (1 + np.exp(-(bg + h_all @ Wg.T))))  # p(v_i = 1) per group
    m = exact.marginals(model, params)
    np.testing.assert_allclose(m["h"][:, 1], want_h, atol=2e-5)
    np.testing.assert_allclose(m["v"][:, 1], want_v[np.arange(nv) % 8], atol=2e-5)
    # samples: h configurations by chi-square against the exact p(h); v | h by group frequencies
    n = 4000
    draws = exact.sample(jax.random.key(11), model, params, n, chunk_size=1024)
    assert draws["v"].shape == (n, nv) and draws["h"].shape == (n, nh)
    hidden_only = ui.EnergyModel(lambda p, s: 0.0, {"h": ui.Binary(nh)})
    assert_distribution_matches(state_index({"h": draws["h"]}, hidden_only), p_h, label="h")
    # per draw, the mean of the 98 visibles of a group; its exact variance given the law of h:
    # Var = Var_h(sigma_g(h)) + E_h[sigma_g(h)(1 - sigma_g(h))] / 98
    group_means = np.asarray(draws["v"]).reshape(n, nv // 8, 8).mean(axis=1)
    sig = 1 / (1 + np.exp(-(bg + h_all @ Wg.T)))
    var = p_h @ (sig - want_v) ** 2 + p_h @ (sig * (1 - sig)) / (nv // 8)
    z = (group_means.mean(axis=0) - want_v) / np.sqrt(var / n)
    assert np.all(np.abs(z) < 5.3), z  # two-sided, 8 groups: family-wise alpha ~ 1e-6


# --------------------------------------------------------------------------------------
# exact sampling
# --------------------------------------------------------------------------------------
def test_sample_matches_distribution_mixed():
    model, params = mixed_model(), mixed_params(seed=7)
    states, probs = exact.distribution(model, params)
    draws = exact.sample(jax.random.key(0), model, params, 30000, chunk_size=50)
    for name, d in model.variables.items():
        assert draws[name].shape == (30000,) + d.shape and draws[name].dtype == d.dtype
    idx = state_index(draws, model)
    assert_distribution_matches(idx, probs, label="mixed")
    wrong = exact.distribution(model, {**params, "h": params["h"].at[0].add(0.15)})[1]
    assert_distribution_differs(idx, wrong, label="mixed, field +0.15")


@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_sample_with_analytic_summation():
    # RBM: v summed (gradient conditionals); Potts: a summed (single-site conditionals)
    nv, nh = 10, 6
    rbm_p = rbm_params(nv, nh, seed=9, scale=0.7)
    potts, potts_p = potts_bipartite(seed=2)
    for model, params, n in ((rbm_model(nv, nh), rbm_p, 60000), (potts, potts_p, 30000)):
        plan = exact.enumeration_plan(model, params, conditionals=True, chunk_size=4)
        assert plan.summed is not None and plan.num_chunks > 1
        _, probs = exact.distribution(model, params)
        draws = exact.sample(jax.random.key(3), model, params, n, chunk_size=4)
        idx = state_index(draws, model)
        assert_distribution_matches(idx, probs, label=repr(model))
        flat = jax.tree.map(lambda x: x * 0.9, params)
        assert_distribution_differs(idx, exact.distribution(model, flat)[1], label="params * 0.9")


# --------------------------------------------------------------------------------------
# built-in models (optional: written concurrently)
# --------------------------------------------------------------------------------------
def test_builtin_rbm_if_available():
    models = pytest.importorskip("ugm_infer.models")
    if not hasattr(models, "rbm"):
        pytest.skip("ui.models.rbm not available")
    nv, nh = 9, 5
    model = models.rbm(nv, nh)
    params = rbm_params(nv, nh, seed=12)
    _, _, log_z = truth(model, params, np_rbm_energy)
    np.testing.assert_allclose(exact.log_partition(model, params), log_z, rtol=1e-6)
    np.testing.assert_allclose(exact.log_partition(model, params, sum_out=None), log_z, rtol=1e-6)
    v = np.random.default_rng(0).integers(0, 2, (5, nv)).astype(np.float32)
    np.testing.assert_allclose(
        exact.log_likelihood(model, params, {"v": v}),
        exact.log_likelihood(model, params, {"v": v}, sum_out=None),
        atol=2e-5,
    )


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------
def test_too_large():
    n = 40
    params = {"K": jnp.float32(0.3), "h": jnp.float32(0.1)}
    chain = ui.EnergyModel(chain_energy, {"s": ui.Spin(n)})
    with pytest.raises(ValueError, match="too large to enumerate.*use AIS/SMC"):
        exact.log_partition(chain, params)
    with pytest.raises(ValueError, match="too large to enumerate"):
        exact.distribution(ui.EnergyModel(chain_energy, {"s": ui.Spin(24)}), params)
    # an RBM whose smaller layer is still too large
    model = rbm_model(40, 30, free_energy=True, declare=True)
    with pytest.raises(ValueError, match=r"1073741824 configurations after summing 'v' analytically"):
        exact.log_partition(model, rbm_params(40, 30))
    with pytest.raises(ValueError, match="too large"):
        exact.expectation(rbm_model(10, 20, declare=True), rbm_params(10, 20), lambda s: s["v"])


def test_bad_inputs():
    model, params = mixed_model(), mixed_params()
    states = np_all_states(model.variables)
    with pytest.raises(ValueError, match=r"`data` has unknown variable\(s\) \['z'\]"):
        exact.log_likelihood(model, params, {"z": np.zeros(3)})
    with pytest.raises(ValueError, match=r"`data\['b'\]` has shape \(5, 4\)"):
        exact.log_likelihood(model, params, {"b": np.zeros((5, 4))})
    with pytest.raises(ValueError, match="disagree on the number of examples"):
        exact.log_likelihood(model, params, {"b": states["b"][:5], "c": states["c"][:4]})
    with pytest.raises(ValueError, match=r"`data\['s'\]` has 1 value\(s\) outside the domain"):
        exact.log_likelihood(model, params, {"s": np.where(np.arange(4).reshape(2, 2) == 3, 0.0, 1.0)[None]})
    with pytest.raises(ValueError, match=r"`data\['c'\]` has .* outside the domain"):
        exact.log_likelihood(model, params, {"c": np.array([[0, 3]])})
    with pytest.raises(ValueError, match="at least one"):
        exact.log_likelihood(model, params, {})
    with pytest.raises(ValueError, match="contains NaN"):
        exact.log_partition(model, {**params, "h": params["h"].at[2].set(jnp.nan)})
    with pytest.raises(ValueError, match="contains NaN"):
        exact.sample(jax.random.key(0), model, {**params, "J": params["J"].at[0, 1].set(jnp.inf)}, 10)
    with pytest.raises(ValueError, match=r"`state\['b'\]` has shape"):
        exact.log_prob(model, params, {"s": states["s"][0], "b": np.zeros(2), "c": states["c"][0]})
    with pytest.raises(ValueError, match="missing variable"):
        exact.log_prob(model, params, {"s": states["s"][0]})
    with pytest.raises(ValueError, match="`chunk_size` must be a positive int"):
        exact.log_partition(model, params, chunk_size=0)
    with pytest.raises(ValueError, match="`max_configurations` must be a positive int"):
        exact.log_partition(model, params, max_configurations=2.5)
    with pytest.raises(ValueError, match="`num_samples` must be a positive int"):
        exact.sample(jax.random.key(0), model, params, -1)
    with pytest.raises(TypeError, match="`rng_key` must be a JAX PRNG key"):
        exact.sample(0, model, params, 10)
    with pytest.raises(ValueError, match="`sum_out` names unknown variable 'q'"):
        exact.log_partition(model, params, sum_out="q")
    with pytest.raises(ValueError, match="cannot sum 's' analytically"):
        exact.marginals(model, params, sum_out="s")
    with pytest.raises(TypeError, match="`fn` must be callable"):
        exact.expectation(model, params, "mean")
    with pytest.raises(TypeError, match="`model` must be a ui.EnergyModel"):
        exact.log_partition(lambda p, s: 0.0, params)
    # NaN at x = (0, 0, 0) only: finite where the energy contract probes it, so exact's own check speaks
    nan_energy = ui.EnergyModel(lambda p, s: jnp.log(jnp.sum(s["x"]) - 0.5 * p), {"x": ui.Binary(3)})
    with pytest.raises(ValueError, match="log Z is NaN"):
        exact.log_partition(nan_energy, jnp.float32(1.0), sum_out=None)


# --------------------------------------------------------------------------------------
# non-finite results, the float32 range, the energy's shape, sizes checked from shapes
# --------------------------------------------------------------------------------------
def _pair(J, dtype=jnp.float32):
    """Two spins coupled by J: E(s) = -J s1 s2, log Z = log(2 e^J + 2 e^-J), p(+1, +1) -> 1/2 as J grows."""
    model = ui.models.ising(2)
    return model, {"W": jnp.array([[0.0, J], [J, 0.0]], dtype), "h": jnp.zeros(2, dtype)}


def test_overflowing_energies_raise_instead_of_returning_inf():
    model, params = _pair(3e38)  # 0.5 * (W01 + W10) overflows float32: the energies are -inf / +inf
    up = {"s": jnp.array([1.0, 1.0])}
    calls = {
        "log_partition": lambda: exact.log_partition(model, params),
        "log_prob": lambda: exact.log_prob(model, params, up),
        "log_likelihood": lambda: exact.log_likelihood(model, params, up),
        "marginals": lambda: exact.marginals(model, params),
        "expectation": lambda: exact.expectation(model, params, lambda s: s["s"]),
        "sample": lambda: exact.sample(jax.random.key(0), model, params, 5),
        "distribution": lambda: exact.distribution(model, params),
    }
    for name, call in calls.items():
        # the energy contract (at first use) or exact's own check on the result, whichever sees it first
        overflow = (
            r"(is (\+inf|NaN) for model|the energy is -?inf at a random configuration)"
            r".*params\['W'\] \(\|value\| up to 3e\+38\)"
        )
        with pytest.raises(ValueError, match=overflow) as err:
            call()
        assert "jax_enable_x64" in str(err.value), name


def test_all_configurations_forbidden_raise_but_one_forbidden_state_is_allowed():
    # energy +inf for every configuration: the energy contract refuses the model at first use
    nothing = ui.EnergyModel(lambda p, s: jnp.inf * (1.0 + p * jnp.sum(s["x"])), {"x": ui.Binary(2)})
    with pytest.raises(ValueError, match=r"the energy is inf at a random configuration"):
        exact.log_partition(nothing, jnp.float32(0.0), sum_out=None)
    # energy -inf for one configuration, x = (1, 0) (not the contract's probe, x = (1, 1)): log Z = +inf
    one_zero = lambda s: (s["x"][0] == 1) & (s["x"][1] == 0)  # noqa: E731
    infinite = ui.EnergyModel(lambda p, s: jnp.where(one_zero(s), -jnp.inf, p), {"x": ui.Binary(2)})
    with pytest.raises(ValueError, match=r"log Z is \+inf"):
        exact.log_partition(infinite, jnp.float32(0.0), sum_out=None)
    # energy +inf for one configuration, x = (0, 0) (a forbidden state): probability 0, the rest uniform
    model = ui.EnergyModel(lambda p, s: jnp.where(jnp.sum(s["x"]) == 0, jnp.inf, p), {"x": ui.Binary(2)})
    p = jnp.float32(0.0)
    assert float(exact.log_partition(model, p, sum_out=None)) == pytest.approx(np.log(3.0), abs=1e-6)
    lp = np.asarray(exact.log_prob(model, p, {"x": jnp.array([[0.0, 0.0], [0.0, 1.0]])}, sum_out=None))
    assert lp[0] == -np.inf and lp[1] == pytest.approx(-np.log(3.0), abs=1e-6)
    marg = np.asarray(exact.marginals(model, p, sum_out=None)["x"])
    np.testing.assert_allclose(marg, [[1 / 3, 2 / 3], [1 / 3, 2 / 3]], atol=1e-6)
    states, probs = exact.distribution(model, p)
    forbidden = np.all(np.asarray(states["x"]) == 0, axis=-1)
    np.testing.assert_allclose(probs, np.where(forbidden, 0.0, 1 / 3), atol=1e-12)


def test_float32_range_as_documented_and_float64_extends_it():
    """The module docstring's figures: float32 keeps log p to ~6e-8 (|E| + |log Z|) nats, so about
    1e-3 at |E| = 1e4 and nothing at |E| = 1e8; float64 keeps 1e-16 relative."""
    up = {"s": jnp.array([1.0, 1.0])}
    exact_value = -np.log(1.0 + np.exp(-2e4))  # log p(+1, +1) = -log 2 - log(1 + e^{-2J}) at J = 1e4
    model, params = _pair(1e4)
    got = float(exact.log_prob(model, params, up))
    assert abs(got - (exact_value - np.log(2.0))) <= 6e-8 * 2 * 2e4
    model, params = _pair(1e8)
    assert float(exact.log_prob(model, params, up)) == 0.0  # no correct digit left: the documented limit
    with jax.enable_x64(True):
        model, params = _pair(1e8, jnp.float64)
        assert float(exact.log_prob(model, params, up)) == pytest.approx(-np.log(2.0), abs=1e-7)
        model, params = _pair(1e300, jnp.float64)
        assert np.isfinite(float(exact.log_partition(model, params)))


def test_energy_must_return_a_scalar():
    vector = ui.EnergyModel(lambda p, s: p * s["s"], {"s": ui.Spin(3)})  # one energy per site: wrong
    with pytest.raises(ValueError, match=r"must return a (real )?scalar for one configuration, got shape \(3,\)"):
        exact.log_partition(vector, jnp.float32(1.0), sum_out=None)
    with pytest.raises(ValueError, match="must return a (real )?scalar"):
        exact.marginals(vector, jnp.float32(1.0))


class _Untouchable:
    """A parameter leaf that fails loudly if anything reads its values."""

    shape = (10**6, 10**5)
    dtype = np.dtype(np.float32)

    def __array__(self, *args, **kwargs):
        raise AssertionError("the parameter values were read before the size check")


def test_size_is_checked_from_shapes_before_params_are_read():
    model = ui.models.rbm(10**6, 10**5)  # 10^11 weights: never allocated here
    params = {"W": _Untouchable(), "b": _Untouchable(), "c": _Untouchable()}
    for call in (
        lambda: exact.enumeration_plan(model, params),
        lambda: exact.log_partition(model, params),
        lambda: exact.sample(jax.random.key(0), model, params, 3),
    ):
        with pytest.raises(ValueError, match=r"too large to enumerate: at least ~10\^30103\.0 configurations"):
            call()
    with pytest.raises(ValueError, match=r"at least ~10\^331133\.0 configurations > max_configurations"):
        exact.distribution(model, params)
    # the bound is a lower bound: what it lets through, the plan still checks exactly
    small = ui.models.rbm(3, 2)
    assert exact.enumeration_plan(small, small.init_params(jax.random.key(0)), max_configurations=4).num_configurations == 4
