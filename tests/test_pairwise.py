"""Single-site Gibbs updates from incrementally maintained fields (``ugm_infer.kernels.pairwise``).

Dense Boltzmann machines and semi-RBMs (one block per unit) return a
``CouplingLogDensity``; the block Gibbs kernel then takes one gradient per run of
single-site blocks and updates the fields by the coupling column after each unit.
Checked against brute-force enumeration (chi-square at alpha = 1e-6, fixed seeds) for
spins and binary units, forward and reversed scans, tempered densities, runs split
into chunks with a padded tail, and against the path it replaces (the same density as a
plain function, one gradient per unit): a two-sample chi-square.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force, run_chains
from stat_utils import assert_distribution_matches, state_index
from test_checkerboard import _assert_same_distribution

import ugm_infer as ui
from ugm_infer.kernels import pairwise
from ugm_infer.kernels._common import temper

gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")
CHAINS, SWEEPS = 20000, 25


def _draws(model, logdensity_fn, seed, reverse=False):
    kernel = gibbs_module.build_kernel(model, "block", reverse=reverse)
    start = model.random_state(jax.random.key(seed + 50), CHAINS)
    return run_chains(kernel, gibbs_module.init, logdensity_fn, start, jax.random.key(seed), SWEEPS)


def test_dense_models_declare_their_couplings():
    model = ui.models.ising(5)
    params = model.init_params(jax.random.key(0))
    ld = model.logdensity_fn(params, 0.5)
    assert isinstance(ld, pairwise.CouplingLogDensity)
    W = np.asarray(params["W"])
    np.testing.assert_allclose(ld.couplings()["s"], 0.5 * (W + W.T) / 2 * (1 - np.eye(5)), rtol=1e-6)
    hot = temper(ld, 0.5)
    np.testing.assert_allclose(hot.couplings()["s"], 0.5 * np.asarray(ld.couplings()["s"]), rtol=1e-6)
    x = model.random_state(jax.random.key(1))
    np.testing.assert_allclose(float(hot(x)), 0.5 * float(ld(x)), rtol=1e-6)
    # edge lists keep the plain density (their blocks are colour classes)
    sparse = ui.models.ising(4, edges=[[0, 1], [1, 2]])
    assert not isinstance(sparse.logdensity_fn(sparse.init_params(jax.random.key(0))), pairwise.CouplingLogDensity)


def test_runs_of_single_sites():
    model = ui.models.semi_rbm(4, 3)
    segments = pairwise.single_site_runs(model.blocks, model.variables)
    assert [s[0] for s in segments] == ["run", "block"]
    np.testing.assert_array_equal(segments[0][2], np.arange(4))


@pytest.mark.parametrize("domain,reverse,beta", [("binary", False, 1.0), ("spin", True, 0.7)])
def test_dense_ising_matches_enumeration(domain, reverse, beta):
    model = ui.models.ising(8, domain=domain)
    params = model.init_params(jax.random.key(3), scale=1.2, field_scale=0.4)
    x = _draws(model, model.logdensity_fn(params, beta), 7, reverse=reverse)
    assert_distribution_matches(state_index(x, model), brute_force(model, params, beta), label=f"dense {domain}")


def test_semi_rbm_matches_enumeration_and_the_generic_path():
    model = ui.models.semi_rbm(5, 3)
    params = model.init_params(jax.random.key(0), scale=1.0, lateral_scale=1.0)
    ld = model.logdensity_fn(params)
    fast = state_index(_draws(model, ld, 8), model)
    assert_distribution_matches(fast, brute_force(model, params), label="semi-RBM")
    generic = state_index(_draws(model, lambda x: ld(x), 9), model)  # one gradient per visible unit
    _assert_same_distribution(fast, generic)


def test_chunks_with_a_padded_tail():
    # 7 units in chunks of 3 (3 + 3 + 1 padded), visited in a scrambled order
    model = ui.models.boltzmann_machine(7)
    params = model.init_params(jax.random.key(5), scale=1.5, field_scale=0.5)
    order = np.array([3, 0, 6, 1, 5, 2, 4], np.int32)
    update = pairwise.sequential_update("s", model.variables["s"], order, chunk=3)
    ld = model.logdensity_fn(params)

    @jax.jit
    def run(key, x):
        def chain(k, pos):
            return jax.lax.scan(lambda p, kk: (update(kk, p, ld), None), pos, jax.random.split(k, SWEEPS))[0]

        return jax.vmap(chain)(jax.random.split(key, CHAINS), x)

    x = run(jax.random.key(11), model.random_state(jax.random.key(12), CHAINS))
    assert_distribution_matches(state_index(x, model), brute_force(model, params), label="chunked, scrambled order")


def test_pcd_on_a_dense_machine_learns():
    import optax

    model = ui.models.boltzmann_machine(6)
    data = jax.random.bernoulli(jax.random.key(0), 0.3, (64, 6)).astype(jnp.float32)
    learner = ui.learn.pcd(model, optax.sgd(0.05), num_particles=32)
    state = learner.init(jax.random.key(1), model.init_params(jax.random.key(2), scale=0.1))
    step = jax.jit(learner.step)
    for t in range(30):
        state, info = step(jax.random.key(t), state, {"s": data})
    assert np.all(np.isfinite(np.asarray(state.params["W"])))
    # the learned biases move toward the data's log-odds (all units have mean 0.3 < 0.5)
    assert float(jnp.mean(state.params["h"])) < 0.0


@pytest.mark.parametrize("tempered", [False, True])
def test_batched_sweep_equals_one_chain_at_a_time(tempered):
    # under jax.vmap the sweep runs units-major on all chains at once (shared couplings) or
    # per chain (per-chain couplings, e.g. one temperature each); either way the chains get
    # exactly the values of the unbatched sweep run on each chain in turn (jax.lax.map)
    for model, sites, chunk in [
        (ui.models.boltzmann_machine(16), np.arange(16, dtype=np.int32), 32),
        (ui.models.ising(7, domain="spin"), np.array([3, 0, 6, 1, 5, 2, 4], np.int32), 3),
    ]:
        params = model.init_params(jax.random.key(5), scale=1.5, field_scale=0.5)
        update = pairwise.sequential_update("s", model.variables["s"], sites, chunk=chunk)
        x = model.random_state(jax.random.key(12), 40)
        keys = jax.random.split(jax.random.key(11), 40)
        betas = jnp.linspace(0.3, 1.0, 40) if tempered else jnp.ones(40)

        def one(key, position, beta):
            ld = model.logdensity_fn(params, beta) if tempered else model.logdensity_fn(params)
            return update(key, position, ld)

        batched = jax.jit(jax.vmap(one))(keys, x, betas)
        looped = jax.jit(lambda k, p, b: jax.lax.map(lambda a: one(*a), (k, p, b)))(keys, x, betas)
        np.testing.assert_array_equal(np.asarray(batched["s"]), np.asarray(looped["s"]))
        assert not np.array_equal(np.asarray(batched["s"]), np.asarray(x["s"]))  # the sweep moved the chains
    if tempered:  # nested, as in parallel tempering: temperatures (outer vmap) x chains (inner vmap, the rule)
        temps = jnp.array([0.5, 1.0])

        def replica(beta):
            return jax.vmap(lambda k, p: update(k, p, model.logdensity_fn(params, beta)))(keys, x)

        nested = jax.jit(jax.vmap(replica))(temps)
        one_by_one = jax.jit(
            lambda t: jax.lax.map(
                lambda beta: jax.lax.map(lambda kp: update(kp[0], kp[1], model.logdensity_fn(params, beta)), (keys, x)), t
            )
        )(temps)
        np.testing.assert_array_equal(np.asarray(nested["s"]), np.asarray(one_by_one["s"]))


def test_dense_energies_match_the_energy_of_each_state():
    for model in (ui.models.boltzmann_machine(9), ui.models.ising(9)):
        params = model.init_params(jax.random.key(0), scale=1.3, field_scale=0.7)
        x = model.random_state(jax.random.key(1), 33)
        one_by_one = jax.vmap(lambda s: model.energy(params, s))(x)
        np.testing.assert_allclose(np.asarray(model.energies(params, x)), np.asarray(one_by_one), rtol=1e-5, atol=1e-5)
        grad = jax.grad(lambda p: jnp.mean(model.energies(p, x)))(params)
        expected = jax.grad(lambda p: jnp.mean(jax.vmap(lambda s: model.energy(p, s))(x)))(params)
        for name in params:
            np.testing.assert_allclose(np.asarray(grad[name]), np.asarray(expected[name]), rtol=1e-5, atol=1e-6)
