"""``ui.sample``'s start: continuing from a ``final_state``, and the checks of a starting batch.

* A run continued from ``result.final_state`` is the run started from that state's
  positions (the same draws bit for bit), on the lattice's packed path and on the
  generic path; a kernel state of another algorithm is refused with a TypeError.
* The starting values are checked in one compiled pass (bad values still raise the
  detailed host-side errors, ``tests/test_bad_input.py``); a valid JAX array in the
  domain's dtype is used as it is (no copy); a built-in lattice, whose energy is finite
  at every state for finite parameters, skips evaluating the starting energies, a user
  model does not.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer.kernels import checkerboard

sampling = importlib.import_module("ugm_infer.sampling")


def _same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("model", [ui.models.lattice_ising(6, 8), ui.models.boltzmann_machine(5)], ids=["lattice", "dense"])
def test_continuing_from_final_state_equals_starting_from_its_positions(model):
    params = model.init_params(jax.random.key(0))
    gibbs = ui.kernels.gibbs(model, params)
    first = ui.sample(jax.random.key(1), gibbs, model.random_state(jax.random.key(2), 3), 4)
    state = first.final_state
    if model.name.startswith("lattice"):
        assert isinstance(state, checkerboard.LatticeGibbsState)  # the packed words, not positions
    go_on = ui.sample(jax.random.key(3), gibbs, state, 5, model=model, params=params)
    restart = ui.sample(jax.random.key(3), gibbs, state.position, 5, model=model, params=params)
    _same(go_on.states, restart.states)
    _same(go_on.energies, restart.energies)
    _same(go_on.infos, restart.infos)
    _same(go_on.final_state.position, restart.final_state.position)


def test_a_kernel_state_of_another_algorithm_is_refused():
    model = ui.models.lattice_ising(6, 8)
    params = model.init_params(J=0.3)
    state = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), model.random_state(jax.random.key(2), 2), 2)
    other = ui.models.lattice_ising(4, 4)
    with pytest.raises(TypeError, match="`initial_position`"):
        ui.sample(jax.random.key(3), ui.kernels.gibbs(other, other.init_params(J=0.3)), state.final_state, 2)
    dense = ui.models.boltzmann_machine(4)
    with pytest.raises(TypeError, match="`initial_position`"):
        ui.sample(jax.random.key(3), ui.kernels.gibbs(dense, dense.init_params(jax.random.key(0))), state.final_state, 2)


def test_a_valid_start_is_used_as_it_is():
    model = ui.models.lattice_ising(6, 8)
    params = model.init_params(J=0.3)
    x0 = model.random_state(jax.random.key(0), 4)
    assert sampling._validate_start(model, params, x0)["s"] is x0["s"]
    as_int8 = {"s": x0["s"].astype(jnp.int8)}  # cast to the domain's dtype, values unchanged
    cast = sampling._validate_start(model, params, as_int8)["s"]
    assert cast.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(cast), np.asarray(x0["s"]))


def test_starting_energies_are_evaluated_unless_the_model_guarantees_them(monkeypatch):
    lattice = ui.models.lattice_ising(6, 8)
    params = lattice.init_params(J=0.3)
    assert lattice.finite_energy_on_domain(params)
    assert not lattice.finite_energy_on_domain({"J": jnp.float32(3e38), "h": jnp.float32(0.0)})
    evaluated = []
    real = sampling._check_initial_energies
    monkeypatch.setattr(sampling, "_check_initial_energies", lambda *a: evaluated.append(a) or real(*a))
    x0 = lattice.random_state(jax.random.key(0), 2)
    ui.sample(jax.random.key(1), ui.kernels.gibbs(lattice, params), x0, 2, model=lattice, params=params)
    assert not evaluated

    # a user energy that is infinite at some states: its starting energies are evaluated and refused
    def energy(p, x):  # infinite only with every site up (not at the contract check's random configuration)
        return jnp.where(jnp.all(x["s"] > 0), jnp.inf, -p["J"] * jnp.sum(x["s"]))

    user = ui.EnergyModel(energy, {"s": ui.Spin((12,))})
    up = {"s": jnp.ones((2, 12), jnp.float32)}
    with pytest.raises(ValueError, match="energy of model"):
        ui.sample(jax.random.key(1), ui.kernels.gibbs(user, {"J": 0.5}), up, 2, model=user, params={"J": 0.5})
    assert evaluated


def test_energies_are_recorded_only_at_the_kernels_own_params():
    model = ui.models.lattice_ising(4, 4)
    params = {"J": jnp.float32(0.3), "h": jnp.float32(0.0)}
    gibbs = ui.kernels.gibbs(model, params)
    x0 = model.random_state(jax.random.key(1), 2)
    same = {"J": np.float32(0.3), "h": np.float32(0.0)}  # equal values in another container are the same params
    run = ui.sample(jax.random.key(2), gibbs, x0, 3, model=model, params=same)
    np.testing.assert_allclose(run.energies, jax.vmap(jax.vmap(lambda s: model.energy(params, {"s": s})))(run.states["s"]))
    with pytest.raises(ValueError, match="`params` differ from the parameters `algorithm` was built with"):
        ui.sample(jax.random.key(2), gibbs, x0, 3, model=model, params={"J": jnp.float32(0.3), "h": jnp.float32(2.0)})
    ui.sample(jax.random.key(2), gibbs, x0, 3, model=model)  # no params: no energies, nothing to compare
