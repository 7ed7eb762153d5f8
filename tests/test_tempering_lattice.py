"""Parallel tempering and tempered transitions on lattices, in the lattice sweeps' own layouts.

With the default block-Gibbs base kernel, parallel tempering keeps the replicas of a
lattice model in the sweep's layout between steps (``ParallelTemperingState.replicas``)
and tempered transitions keeps a run in it; both take the densities of their swap and
acceptance ratios from that layout.  Checked here:

* lattice Ising: the same draws, bit for bit, as the configuration path they replace
  (replicas stored as configurations, converted at every step), for both kernels;
* lattice Ising through ``ui.sample``: the beta = 1 replica and the hottest one against
  the exact joint of (energy, magnetisation) on a 4x4 torus (chi-square at alpha = 1e-6,
  fixed seeds, ``stat_utils``), with power against the wrong beta, and the recorded
  energies are the beta = 1 replica's;
* lattice Potts (densities from the sub-lattices, equal to the energy up to rounding):
  the full joint on an open 2x4 lattice with q = 3 against enumeration, for both kernels;
* tempered SMC keeps its particles in the layout too (default Gibbs move, uniform base):
  ``log Z`` within 3 standard errors of the exact value on a 4x4 torus (fixed schedule)
  and, in the slow set, on the 2x4 Potts lattice (adaptive schedule).
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force, energy_magnetisation_cells
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels import checkerboard, potts_lattice

gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")
pt_module = importlib.import_module("ugm_infer.kernels.parallel_tempering")
tt_module = importlib.import_module("ugm_infer.kernels.tempered_transitions")
CHAINS = 20000
BETAS = np.array([0.4, 0.7, 1.0])


def _steps(kernel, state, logdensity_fn, key, num_steps):
    """``num_steps`` of ``kernel`` on chains batched on the leading axis; the final states and the infos."""

    @jax.jit
    def run(state, key):
        def body(s, k):
            num = jax.tree.leaves(s)[0].shape[0]
            return jax.vmap(kernel, in_axes=(0, 0, None))(jax.random.split(k, num), s, logdensity_fn)

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    return run(state, key)


def test_parallel_tempering_keeps_lattice_replicas_in_the_layout_bit_for_bit():
    model = ui.models.lattice_ising(4, 6, periodic=True)
    params = model.init_params(J=0.5, h=0.2)
    ld = model.logdensity_fn(params)
    x0 = model.random_state(jax.random.key(0), 16)
    kernel = pt_module.build_kernel(model, BETAS, params=params)
    kept = jax.vmap(lambda x: pt_module.init(x, ld, num_replicas=3, keep_layout=True))(x0)
    plain = jax.vmap(lambda x: pt_module.init(x, num_replicas=3))(x0)
    assert isinstance(kept.replicas, checkerboard.LatticeGibbsState) and isinstance(plain.replicas, dict)
    (a, info_a), (b, info_b) = (_steps(kernel, s, ld, jax.random.key(1), 12) for s in (kept, plain))
    assert isinstance(a.replicas, checkerboard.LatticeGibbsState)
    np.testing.assert_array_equal(a.position["s"], b.position["s"])
    np.testing.assert_array_equal(pt_module.target_position(jax.tree.map(lambda x: x[0], a))["s"], b.position["s"][0, -1])
    for x, y in zip(info_a + a[1:], info_b + b[1:]):
        np.testing.assert_array_equal(x, y)
    assert float(jnp.mean(info_a.swap_accepted)) > 0.05  # swaps happen: the permutation of the words is exercised
    with pytest.raises(ValueError, match="keep_layout=True.*logdensity_fn"):
        pt_module.init(x0, num_replicas=3, keep_layout=True)


def test_tempered_transitions_runs_in_the_lattice_layout_bit_for_bit():
    model = ui.models.lattice_ising(4, 6, periodic=False)
    params = model.init_params(J=0.6, h=-0.1)
    ld = model.logdensity_fn(params)
    x0 = model.random_state(jax.random.key(2), 16)
    fast = tt_module.build_kernel(model, BETAS, params=params)
    forward = gibbs_module.build_kernel(model, "block", params=params)
    backward = gibbs_module.build_kernel(model, "block", params=params, reverse=True)
    # the same operators passed in as a custom kernel: the run is converted at every sweep (the path replaced)
    plain = tt_module.build_kernel(
        model, BETAS, base_kernel=forward, reverse_kernel=backward, base_init=gibbs_module.init, params=params
    )
    start = jax.vmap(tt_module.init)(x0)
    (a, info_a), (b, info_b) = (_steps(k, start, ld, jax.random.key(3), 10) for k in (fast, plain))
    np.testing.assert_array_equal(a.position["s"], b.position["s"])
    for x, y in zip(info_a, info_b):
        np.testing.assert_array_equal(x, y)
    assert 0.05 < float(jnp.mean(info_a.is_accepted)) < 1.0


def test_parallel_tempering_on_a_torus_through_sample_matches_enumeration():
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.3, h=0.1)
    pt = ui.kernels.parallel_tempering(model, params, betas=BETAS)
    start = model.random_state(jax.random.key(4), CHAINS)
    out = ui.sample(jax.random.key(5), pt, start, 1, num_warmup=24, model=model, params=params)
    assert isinstance(out.final_state.replicas, checkerboard.LatticeGibbsState)
    replicas = out.states["s"][:, 0]  # (chains, replicas, 4, 4)
    assert replicas.shape == (CHAINS, 3, 4, 4)
    cold, cell = energy_magnetisation_cells(model, params, 1.0)
    idx = cell({"s": replicas[:, -1]})
    assert_distribution_matches(idx, cold, label="PT beta = 1 replica, 4x4 torus")
    hot, hot_cell = energy_magnetisation_cells(model, params, 0.4)  # the same cells, the beta = 0.4 weights
    assert_distribution_differs(idx, hot, label="PT cold replica vs beta 0.4")
    assert_distribution_matches(hot_cell({"s": replicas[:, 0]}), hot, label="PT beta = 0.4 replica, 4x4 torus")
    expected = jax.vmap(lambda s: model.energy(params, {"s": s}))(replicas[:, -1])
    np.testing.assert_allclose(out.energies[:, 0], expected, rtol=1e-6)  # from the words: up to rounding


def _potts_case():
    model = ui.models.lattice_potts(2, 4, 3)
    params = model.init_params(jax.random.key(0), scale=1.2, field_scale=0.5)
    return model, params, model.logdensity_fn(params)


def test_parallel_tempering_on_a_potts_lattice_matches_enumeration():
    model, params, ld = _potts_case()
    kernel = pt_module.build_kernel(model, BETAS, params=params)
    start = model.random_state(jax.random.key(6), CHAINS)
    state = jax.vmap(lambda x: pt_module.init(x, ld, num_replicas=3, keep_layout=True))(start)
    assert isinstance(state.replicas, potts_lattice.PottsLatticeState)
    state, info = _steps(kernel, state, ld, jax.random.key(7), 15)
    assert float(jnp.mean(info.swap_accepted)) > 0.05
    x = state.position["x"]
    idx = state_index({"x": x[:, -1]}, model)
    assert_distribution_matches(idx, brute_force(model, params, 1.0), label="PT Potts beta = 1 replica")
    assert_distribution_differs(idx, brute_force(model, params, 0.4), label="PT Potts cold vs beta 0.4")
    hot = state_index({"x": x[:, 0]}, model)
    assert_distribution_matches(hot, brute_force(model, params, 0.4), label="PT Potts beta = 0.4 replica")


def test_tempered_transitions_on_a_potts_lattice_matches_enumeration():
    model, params, ld = _potts_case()
    kernel = tt_module.build_kernel(model, BETAS, params=params)
    start = jax.vmap(tt_module.init)(model.random_state(jax.random.key(8), CHAINS))
    state, info = _steps(kernel, start, ld, jax.random.key(9), 12)
    assert 0.05 < float(jnp.mean(info.is_accepted)) < 1.0
    idx = state_index(state.position, model)
    assert_distribution_matches(idx, brute_force(model, params, 1.0), label="TT Potts 2x4")
    assert_distribution_differs(idx, brute_force(model, params, 0.4), label="TT Potts vs beta 0.4")


def _check_log_z(result, exact, label):
    err, se = float(result.log_Z) - exact, float(result.log_Z_se)
    assert np.isfinite(se) and 0 < se < 0.02, f"{label}: se {se}"
    assert abs(err) < 3 * se, f"{label}: log Z off the exact value by {err / se:.2f} se (se {se:.4f})"


def test_tempered_smc_keeps_lattice_particles_in_the_layout(monkeypatch):
    # the default Gibbs move from the uniform base: particles resampled, swept and weighted as words or
    # sub-lattices (the log-likelihood read from them), configurations again in the result
    smc_paths = importlib.import_module("ugm_infer.smc._paths")
    kept = []
    original = smc_paths.layout_energy

    def recording(model, params, chain):
        energy = original(model, params, chain)
        kept.append(energy is not None)
        return energy

    monkeypatch.setattr(smc_paths, "layout_energy", recording)
    ising = ui.models.lattice_ising(4, 4)
    params = ising.init_params(J=0.44, h=0.1)
    fixed = ui.smc.tempered_smc(
        jax.random.key(0), ising, params, num_particles=1000, num_replicates=8, schedule=np.linspace(0, 1, 21)
    )
    assert kept == [True]
    assert fixed.particles["s"].shape == (8, 1000, 4, 4) and fixed.particles["s"].dtype == jnp.float32
    _check_log_z(fixed, float(ui.exact.log_partition(ising, params)), "lattice Ising, fixed schedule")


@pytest.mark.slow
def test_tempered_smc_keeps_potts_particles_in_the_layout():
    potts, params = _potts_case()[:2]
    adaptive = ui.smc.tempered_smc(jax.random.key(1), potts, params, num_particles=1000, num_replicates=8)
    assert adaptive.particles["x"].shape == (8, 1000, 8) and adaptive.particles["x"].dtype == jnp.int32
    _check_log_z(adaptive, float(ui.exact.log_partition(potts, params)), "lattice Potts, adaptive schedule")
