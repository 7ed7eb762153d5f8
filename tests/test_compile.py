"""The drivers' compiler options (``ugm_infer._compile``): the CPU vector width, and results that do not depend on it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer import _compile, sampling


def test_the_vector_width_follows_the_cpu_and_the_environment(monkeypatch):
    monkeypatch.delenv(_compile.ENV_VECTOR_WIDTH, raising=False)
    for has, expected in ((True, 512), (False, None)):
        monkeypatch.setattr(_compile, "_has_avx512", lambda has=has: has)
        assert _compile.cpu_vector_width() == expected
        options = _compile.compiler_options()
        assert options == (None if expected is None else {"xla_cpu_prefer_vector_width": 512})
    monkeypatch.setenv(_compile.ENV_VECTOR_WIDTH, "256")
    assert _compile.compiler_options() == {"xla_cpu_prefer_vector_width": 256}
    monkeypatch.setenv(_compile.ENV_VECTOR_WIDTH, "300")
    with pytest.raises(ValueError, match="UGM_INFER_CPU_VECTOR_WIDTH must be one of 128, 256, 512"):
        _compile.cpu_vector_width()


@pytest.mark.parametrize("chains", [1, 16])
def test_lattice_samples_are_the_same_bits_at_every_vector_width(monkeypatch, chains):
    # the sweep is integer arithmetic: the vector width changes the code, not one bit of the draws
    model = ui.models.lattice_ising(8, 8, dtype=jnp.int8)
    params = {"J": jnp.float32(0.4), "h": jnp.float32(0.1)}
    x0 = model.random_state(jax.random.key(1), chains)
    runs = {}
    for width in ("256", "512"):
        monkeypatch.setenv(_compile.ENV_VECTOR_WIDTH, width)
        sampling._RUN_CACHE.clear()  # runs are built, with their options, on first use
        res = ui.sample(jax.random.key(0), ui.kernels.gibbs(model, params), x0, 20, model=model, params=params)
        runs[width] = jax.tree.map(np.asarray, (res.states, res.energies, res.infos))
    sampling._RUN_CACHE.clear()
    for a, b in zip(jax.tree.leaves(runs["256"]), jax.tree.leaves(runs["512"]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_driver_called_inside_a_jit_is_a_plain_nested_jit(monkeypatch):
    monkeypatch.setenv(_compile.ENV_VECTOR_WIDTH, "512")
    double = _compile.jit(lambda x: 2 * x)
    assert float(double(jnp.float32(1.5))) == 3.0  # top level: compiled with the options
    assert float(jax.jit(lambda x: double(x) + 1)(jnp.float32(1.5))) == 4.0  # nested: no options, no error
    assert float(jax.vmap(double)(jnp.ones(2))[0]) == 2.0
    assert "dot" not in double.lower(jnp.float32(1.0)).as_text()
