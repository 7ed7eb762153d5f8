"""The fast block-Gibbs path of ``ui.models.lattice_ising``: closed-form site logits and compact uniforms.

``LatticeIsing.logdensity_fn`` returns a ``SiteLogitsLogDensity`` whose ``site_logits``
the block Gibbs kernel uses instead of a gradient at the masked midpoint state, and the
kernel draws one uniform per pair of sites (``compact_factor`` / ``block_uniforms``).
Checked here:

* the site logits equal the conditional log-odds computed from two energy evaluations
  per site, at random states, for every boundary case (periodic even, periodic odd with
  3 colours, open, spin and binary, int8 storage, ``beta != 1``);
* no two sites of a block share a uniform (the uniforms of a block are independent);
* the kernel's draws match the exact distribution (brute-force enumeration, chi-square
  at alpha = 1e-6, ``stat_utils``) on a 3x3 torus (3 colours, spins, field, beta = 0.8)
  and a 3x4 open binary lattice, 20,000 independent chains each; the same draws reject
  the target with beta ignored (power).
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force, run_chains
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels._common import temper
from ugm_infer.kernels._updates import SiteLogitsLogDensity, block_uniforms, compact_factor

gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")

SHAPES = [
    (4, 6, True, "spin", jnp.float32),
    (5, 3, True, "spin", jnp.int8),  # odd torus: 3 colours
    (3, 5, False, "binary", jnp.int8),
    (1, 5, True, "binary", jnp.float32),  # a ring
]


@pytest.mark.parametrize("height,width,periodic,domain,dtype", SHAPES)
def test_site_logits_equal_energy_differences(height, width, periodic, domain, dtype):
    model = ui.models.lattice_ising(height, width, periodic=periodic, domain=domain, dtype=dtype)
    J, h, beta = 0.7, -0.3, 0.6
    params = model.init_params(J=J, h=h)
    ld = model.logdensity_fn(params, beta)
    assert isinstance(ld, SiteLogitsLogDensity)
    hi, lo = (1.0, -1.0) if domain == "spin" else (1.0, 0.0)
    states = np.asarray(model.random_state(jax.random.key(3), 4)["s"], dtype=np.float64).reshape(4, -1)
    edges = model.edges()

    def energy(x):  # numpy, from the edge list: independent of the model's rolls
        return -J * np.sum(x[edges[:, 0]] * x[edges[:, 1]]) - h * np.sum(x)

    expected = np.empty_like(states)
    for c, x in enumerate(states):
        for i in range(x.size):
            up, down = x.copy(), x.copy()
            up[i], down[i] = hi, lo
            expected[c, i] = -beta * (energy(up) - energy(down))
    got = jax.jit(jax.vmap(lambda s: ld.site_logits({"s": s})["s"]))(jnp.asarray(states.reshape(4, height, width), dtype))
    np.testing.assert_allclose(np.asarray(got).reshape(4, -1), expected, rtol=1e-5, atol=1e-5)
    # the density itself is unchanged
    x0 = jnp.asarray(states[0].reshape(height, width), dtype)
    np.testing.assert_allclose(float(ld({"s": x0})), -beta * energy(states[0]), rtol=1e-5)
    # tempering (parallel tempering, tempered transitions) keeps the closed form, scaled
    hot = temper(ld, 0.5)
    assert isinstance(hot, SiteLogitsLogDensity)
    hot_logits = np.asarray(hot.site_logits({"s": x0})["s"]).reshape(-1)
    np.testing.assert_allclose(hot_logits, 0.5 * expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(hot({"s": x0})), -0.5 * beta * energy(states[0]), rtol=1e-5)


@pytest.mark.parametrize("height,width,periodic", [(4, 6, True), (5, 3, True), (3, 5, False), (7, 7, True), (1, 5, True)])
def test_block_sites_get_distinct_uniforms(height, width, periodic):
    model = ui.models.lattice_ising(height, width, periodic=periodic)
    size = height * width
    for block in model.blocks:
        idx = block.indices["s"]
        m = compact_factor([idx], size)
        assert m >= 2 or len(idx) == size
        assert len(np.unique(idx // m)) == len(idx)
        u = np.asarray(block_uniforms(jax.random.key(0), (height, width), m)).reshape(-1)
        assert len(np.unique(u[idx])) == len(idx)  # every block site reads its own draw
        assert np.all((u >= 0) & (u < 1))
    # a set covering the variable cannot be compacted
    assert compact_factor([np.arange(size)], size) == 1


def test_compact_factor_is_the_largest_factor_with_distinct_buckets():
    """The linear check (sorted neighbours) against the definition, on random unsorted index sets."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        size = int(rng.integers(1, 120))
        sets = [rng.choice(size, int(rng.integers(1, size + 1)), replace=False) for _ in range(int(rng.integers(1, 3)))]
        m = compact_factor(sets, size)
        assert all(len(np.unique(s // m)) == len(s) for s in sets)
        largest = max(len(s) for s in sets)
        for bigger in range(m + 1, max(2, size // largest) + 1):
            assert not all(len(np.unique(s // bigger)) == len(s) for s in sets)


def _draws(model, params, beta, key, num_chains, num_sweeps):
    kernel = gibbs_module.build_kernel(model, "block")
    start = model.random_state(jax.random.fold_in(key, 1), num_chains)
    return run_chains(kernel, gibbs_module.init, model.logdensity_fn(params, beta), start, key, num_sweeps)


def test_odd_torus_three_colours_matches_enumeration():
    model = ui.models.lattice_ising(3, 3, dtype=jnp.int8)
    assert len(model.blocks) == 3
    params = model.init_params(J=0.5, h=0.2)
    x = _draws(model, params, 0.8, jax.random.key(11), 20000, 30)
    idx = state_index(x, model)
    assert_distribution_matches(idx, brute_force(model, params, 0.8), label="3x3 torus, beta 0.8")
    assert_distribution_differs(idx, brute_force(model, params, 1.0), label="beta ignored")


def test_open_binary_lattice_matches_enumeration():
    model = ui.models.lattice_ising(3, 4, periodic=False, domain="binary")
    params = model.init_params(J=1.2, h=-0.5)
    x = _draws(model, params, 1.0, jax.random.key(12), 20000, 30)
    assert_distribution_matches(state_index(x, model), brute_force(model, params), label="3x4 open binary")
