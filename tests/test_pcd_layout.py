"""SAP/PCD with block Gibbs on a lattice keeps its particles in the sweep's own layout.

The learner state's ``kernel_state`` holds the particles as lattice chains (words for
``lattice_ising``, sub-lattices for ``lattice_potts``), chains last from 8 particles
on; ``particles`` is their configuration after each move.  Checked here: the same
draws and parameters, bit for bit, as re-initialising the kernel from ``particles``
at every update (the path a state with ``kernel_state=()`` takes); the particles'
distribution against enumeration; checkpoint and resume through ``ui.fit``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import brute_force
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels.gibbs import is_layout_state


def _model(kind: str):
    if kind == "ising":
        model = ui.models.lattice_ising(4, 6, periodic=True)
        return model, model.init_params(J=0.35, h=0.1)
    model = ui.models.lattice_potts(4, 4, 3, periodic=True)
    return model, model.init_params(jax.random.key(11))


def _run(learner, state, batch, num_updates):
    def body(s, k):
        s, info = learner.step(k, s, batch)
        return s, info

    return jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.key(7), num_updates)))(state)


@pytest.mark.parametrize(
    "kind, num_particles, steps_per_update",
    [
        ("ising", 16, 1),
        ("ising", 4, 1),
        ("ising", 16, 2),
        ("potts", 16, 1),
        pytest.param("potts", 4, 2, marks=pytest.mark.slow),
    ],
)
def test_kept_layout_equals_reinitialising_every_update(kind, num_particles, steps_per_update):
    model, params = _model(kind)
    learner = ui.learn.sap(
        model, optimizer=optax.sgd(0.05), num_particles=num_particles, num_steps_per_update=steps_per_update
    )
    state = learner.init(jax.random.key(0), params)
    assert is_layout_state(state.kernel_state)
    chain_axis = -1 if num_particles >= 8 else 0
    assert all(x.shape[chain_axis] == num_particles for x in jax.tree.leaves(state.kernel_state))
    batch = model.random_state(jax.random.key(1), 8)
    kept, kept_infos = _run(learner, state, batch, 6)
    again, again_infos = _run(learner, state._replace(kernel_state=()), batch, 6)
    assert again.kernel_state == ()  # the re-initialising path stays on it
    for a, b in zip(jax.tree.leaves((kept.params, kept.particles)), jax.tree.leaves((again.params, again.particles))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(kept_infos), jax.tree.leaves(again_infos)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the particles are the configuration of the kept chains
    positions = jax.vmap(lambda s: s.position)(ui.kernels._common.chains_first(kept.kernel_state))
    for name in kept.particles:
        np.testing.assert_array_equal(np.asarray(positions[name]), np.asarray(kept.particles[name]))
    assert not np.array_equal(np.asarray(kept.particles[name]), np.asarray(state.particles[name]))


def test_kept_particles_sample_the_model():
    """With a zero learning rate the kept chains are block-Gibbs chains: their final states follow p exactly."""
    model = ui.models.lattice_ising(2, 4, periodic=False)
    params = model.init_params(J=0.45, h=0.2)
    learner = ui.learn.pcd(model, optimizer=optax.sgd(0.0), num_particles=4096)
    state = learner.init(jax.random.key(3), params)
    assert is_layout_state(state.kernel_state)
    final, _ = _run(learner, state, model.random_state(jax.random.key(4), 8), 40)
    idx = state_index(final.particles, model)
    assert_distribution_matches(idx, brute_force(model, params), label="PCD particles, 2x4 open lattice")
    # the same draws against the lattice at another coupling: the test can tell them apart
    assert_distribution_differs(idx, brute_force(model, model.init_params(J=0.25, h=0.2)), label="J = 0.25")


def test_fit_resumes_kept_lattice_particles_bit_for_bit(tmp_path):
    model, params = _model("ising")
    data = model.random_state(jax.random.key(5), 40)
    learner = ui.learn.pcd(model, optimizer=optax.sgd(0.02), num_particles=16)
    kw = dict(params=params, num_epochs=3, batch_size=10, progress=False, eval_fn=None, checkpoint_every=1)
    full = ui.fit(learner, jax.random.key(6), data, checkpoint_dir=tmp_path / "full", **kw)
    assert is_layout_state(full.state.kernel_state)
    part = ui.fit(learner, jax.random.key(6), data, checkpoint_dir=tmp_path / "part", max_steps=5, **kw)
    assert int(part.state.step) == 5
    resumed = ui.fit(learner, jax.random.key(6), data, checkpoint_dir=tmp_path / "part", **kw)
    assert jax.tree.structure(full.state) == jax.tree.structure(resumed.state)
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        a, b = np.asarray(a), np.asarray(b)
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = np.asarray(jax.random.key_data(a)), np.asarray(jax.random.key_data(b))
        np.testing.assert_array_equal(a, b)
