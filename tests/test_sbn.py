"""Sigmoid belief networks and Saul et al.'s mean-field bound, against exact enumeration.

All tests use one network shape (5 visible, 3 + 2 hidden: 32 hidden configurations,
1024 joint ones) so that every jitted function compiles once; random networks differ
only in their parameter values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_chains
from stat_utils import assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels.gibbs import build_kernel as gibbs_build_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.learn.phases import conditional_model
from ugm_infer.learn.sbn_meanfield import mean_field_bound, mean_field_learner
from ugm_infer.models.sbn import sigmoid_belief_net

SIZES = (5, 3, 2)


@pytest.fixture(scope="module")
def model():
    return sigmoid_belief_net(SIZES)


def random_params(model, seed: int, scale: float) -> dict:
    """Weights and biases i.i.d. N(0, scale^2) (biases too, so units are not all at 1/2)."""
    rng = np.random.default_rng(seed)
    return {
        k: jnp.asarray(rng.normal(0.0, scale, np.shape(x)), jnp.float32)
        for k, x in model.init_params(jax.random.key(0)).items()
    }


def all_visibles(n: int) -> jnp.ndarray:
    return jnp.asarray(((np.arange(2**n)[:, None] >> np.arange(n)[::-1]) & 1).astype(np.float32))


def test_log_partition_is_zero(model):
    for seed in range(3):
        params = random_params(model, seed, 2.0)
        assert abs(float(ui.exact.log_partition(model, params))) < 1e-5
        assert abs(float(ui.exact.log_partition(model, params, sum_out=None))) < 1e-5
        # the likelihoods of all 32 visible vectors sum to one
        ll = np.asarray(ui.exact.log_likelihood(model, params, {"v": all_visibles(5)}), np.float64)
        assert abs(np.exp(ll).sum() - 1.0) < 1e-5


def test_declared_blocks_are_conditionally_independent(model):
    params = random_params(model, 0, 1.0)
    probe = ui.EnergyModel(model.energy_fn, model.variables, multilinear=False)
    edges = probe.interaction_edges(params)
    for block in model.blocks:
        sites = set()
        for name, idx in block.indices.items():
            sites.update(model.layout.offsets[model.layout.names.index(name)] + np.asarray(idx))
        inside = [e for e in edges.tolist() if e[0] in sites and e[1] in sites]
        assert not inside, f"block {block.indices} has interacting sites {inside}"


def test_bound_below_exact_log_likelihood(model):
    """L(v; mu, xi) <= ln P(v) for every datum of many random nets, weak to strong weights."""
    v = all_visibles(5)
    worst = -np.inf
    for seed in range(12):
        scale = (0.5, 1.5, 3.0)[seed % 3]
        params = random_params(model, seed, scale)
        res = mean_field_bound(model, params, v)
        exact = np.asarray(ui.exact.log_likelihood(model, params, {"v": v}))
        gap = exact - np.asarray(res.bound)
        worst = max(worst, float(-gap.min()))
        assert np.all(gap >= -2e-5), f"seed {seed}: bound exceeds ln P(v) by {-gap.min():.3g}"
        assert np.all(np.isfinite(res.bound))
        for name, mu in res.mu.items():
            assert mu.shape == (32, model.variables[name].size) and np.all((mu > 0) & (mu < 1))
        for xi in res.xi.values():
            assert np.all((xi >= 0) & (xi <= 1))


def test_bound_close_for_weak_weights(model):
    v = all_visibles(5)
    for seed in range(3):
        params = random_params(model, 100 + seed, 0.1)
        res = mean_field_bound(model, params, v)
        gap = np.asarray(ui.exact.log_likelihood(model, params, {"v": v})) - np.asarray(res.bound)
        assert np.all(gap >= -2e-5) and np.all(gap < 0.05), f"gap range [{gap.min():.3g}, {gap.max():.3g}]"


def test_gibbs_samples_the_posterior(model, key):
    """Gibbs (systematic scan, non-multilinear updates) with v clamped against the exact p(h | v)."""
    params = random_params(model, 7, 2.0)
    v = {"v": jnp.asarray([1.0, 0.0, 1.0, 1.0, 0.0])}
    cond = conditional_model(model, ("v",), params)
    cparams = (params, v)
    states, probs = ui.exact.distribution(cond, cparams)
    kernel = gibbs_build_kernel(cond, "systematic", 1)
    start = cond.random_state(jax.random.fold_in(key, 1), 4000)
    x = run_chains(kernel, gibbs_init, cond.logdensity_fn(cparams), start, jax.random.fold_in(key, 2), 12)
    assert_distribution_matches(state_index(x, cond), probs, label="SBN posterior p(h|v), systematic-scan Gibbs")
    # exact posterior = joint / marginal: P(h | v) from the model's energy
    joint = np.exp(-np.asarray(jax.vmap(lambda h: model.energy(params, {**v, **h}))(states)), dtype=np.float64)
    np.testing.assert_allclose(probs, joint / joint.sum(), rtol=1e-4, atol=1e-7)


def test_ancestral_sampling_matches_joint(model, key):
    params = random_params(model, 3, 1.5)
    _, probs = ui.exact.distribution(model, params)
    x = model.sample(jax.random.fold_in(key, 5), params, 20000)
    assert_distribution_matches(state_index(x, model), probs, label="SBN ancestral sampling")


def test_learner_increases_bound(model):
    """A few steps of bound maximisation raise the mean bound and the exact likelihood."""
    teacher = random_params(model, 11, 2.0)
    data = {"v": model.sample(jax.random.key(3), teacher, 32)["v"]}
    import optax

    learner = mean_field_learner(model, optax.adam(0.05), num_iterations=5, xi_iterations=8)
    params = model.init_params(jax.random.key(4), scale=0.1)
    state = learner.init(jax.random.key(5), params)
    step = jax.jit(learner.step)
    first = None
    for i in range(20):
        state, info = step(jax.random.key(i), state, data)
        first = float(info.bound) if first is None else first
    _, info = step(jax.random.key(99), state, data)
    assert float(info.bound) > first + 0.3
    before = float(ui.exact.average_log_likelihood(model, params, data))
    after = float(ui.exact.average_log_likelihood(model, state.params, data))
    assert after > before + 0.3
    assert float(info.bound) <= after + 2e-5


def test_bad_input(model):
    params = random_params(model, 0, 1.0)
    with pytest.raises(ValueError, match="layer_sizes"):
        sigmoid_belief_net([5])
    with pytest.raises(TypeError, match="layer_sizes"):
        sigmoid_belief_net(5)
    with pytest.raises(ValueError, match=r"layer_sizes\[1\]"):
        sigmoid_belief_net([5, 0])
    with pytest.raises(ValueError, match="W1"):
        model.validate_params({**params, "W1": jnp.zeros((3, 5))})
    with pytest.raises(ValueError, match="missing"):
        model.validate_params({k: x for k, x in params.items() if k != "b2"})
    with pytest.raises(ValueError, match="outside the domain"):
        mean_field_bound(model, params, jnp.full((5,), 0.5))
    with pytest.raises(ValueError, match="shape"):
        mean_field_bound(model, params, jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="num_iterations"):
        mean_field_bound(model, params, jnp.zeros(5), num_iterations=0)
    with pytest.raises(TypeError, match="sigmoid belief net"):
        mean_field_bound(ui.models.rbm(5, 3), params, jnp.zeros(5))
    with pytest.raises(ValueError, match="mu_init"):
        mean_field_bound(model, params, jnp.zeros(5), mu_init={"h1": jnp.zeros(3)})
    with pytest.raises(ValueError, match="num_samples"):
        model.sample(jax.random.key(0), params, 0)
    with pytest.raises(ValueError, match="NaN"):
        model.sample(jax.random.key(0), {**params, "b0": jnp.full((5,), jnp.nan)}, 3)
