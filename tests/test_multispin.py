"""The bit-packed (multi-spin-coded) checkerboard heat bath, ``ugm_infer.kernels.multispin``.

Exactness: 20,000 independent chains (625 words of 32) on a 4x4 torus are run for 30
sweeps from uniformly random states and their final states compared with the exact
Boltzmann distribution from brute-force enumeration (``conftest.brute_force``; chi-square
at alpha = 1e-6 with pooled cells, ``stat_utils``), for spins with a field at beta = 0.8
(early-exit plane loop, one plane per draw) and for binary sites (fixed 32-plane loop,
four planes per draw); the spin draws must
also reject the target with beta ignored.  The
float block-Gibbs kernel on the same lattice mixes to within 3e-4 total variation in 25
sweeps (``tests/test_kernels.py``); the multi-spin kernel is the same transition.
Building blocks (packing, the bit-sliced neighbour count, the thresholds) are checked
directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels import multispin


def test_pack_unpack_roundtrip_and_neighbour_count():
    x = jax.random.rademacher(jax.random.key(0), (70, 4, 6)).astype(jnp.float32)
    words = multispin.pack(x)
    assert words.shape == (3, 4, 6) and words.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(multispin.unpack(words, 70)), np.asarray(x))
    b = (x > 0).astype(jnp.int8)
    np.testing.assert_array_equal(np.asarray(multispin.unpack(multispin.pack(b, "binary"), 70, "binary", jnp.int8)), b)
    c0, c1, c2 = multispin._neighbour_count(words)
    count = sum(multispin.unpack(c, 70, "binary", jnp.int32) * w for c, w in ((c0, 1), (c1, 2), (c2, 4)))
    up = np.asarray(x > 0, np.int32)
    expected = sum(np.roll(up, s, axis=a) for s in (1, -1) for a in (1, 2))
    np.testing.assert_array_equal(np.asarray(count), expected)


def test_thresholds_are_the_heat_bath_probabilities():
    cases = [(True, 0.44, 0.0, 1.0), (True, -0.7, 0.3, 0.5), (False, 1.5, -2.0, 1.0), (True, 30.0, 0.0, 1.0)]
    for spin, J, h, beta in cases:
        t = np.asarray(multispin._thresholds(J, h, beta, spin), np.float64) / 2.0**32
        n = np.arange(5)
        logit = 2 * beta * (J * (2 * n - 4) + h) if spin else beta * (J * n + h)
        np.testing.assert_allclose(t, 1 / (1 + np.exp(-logit)), atol=1e-7)


def test_rejects_unsupported_lattices():
    with pytest.raises(ValueError, match="periodic lattice with even"):
        multispin.build_sweep(ui.models.lattice_ising(5, 4))
    with pytest.raises(ValueError, match="periodic lattice with even"):
        multispin.build_sweep(ui.models.lattice_ising(4, 4, periodic=False))
    with pytest.raises(TypeError, match="lattice_ising"):
        multispin.build_sweep(ui.models.ising(4))
    with pytest.raises(ValueError, match="planes_per_draw"):
        multispin.build_sweep(ui.models.lattice_ising(4, 4), planes_per_draw=3)
    with pytest.raises(ValueError, match="domain"):
        multispin.pack(jnp.ones((2, 4, 4)), "potts")


def _draws(model, params, beta, key, num_chains, num_sweeps, early_exit=True):
    # the fixed-length loop also draws its planes four at a time
    sweep = multispin.build_sweep(model, early_exit=early_exit, planes_per_draw=1 if early_exit else 4)
    start = model.random_state(jax.random.fold_in(key, 1), num_chains)["s"]

    @jax.jit
    def run(k, words):
        def body(w, kk):
            w, planes = sweep(kk, w, params, beta)
            return w, planes

        return jax.lax.scan(body, words, jax.random.split(k, num_sweeps))

    words, planes = run(key, multispin.pack(start, model.domain))
    assert np.all(np.asarray(planes) <= 64) and np.all(np.asarray(planes) >= 2)
    if not early_exit:
        assert np.all(np.asarray(planes) == 64)
    return {"s": multispin.unpack(words, num_chains, model.domain)}


@pytest.mark.parametrize("domain,J,h,beta,early_exit", [("spin", 0.5, 0.2, 0.8, True), ("binary", 1.2, -0.5, 1.0, False)])
def test_multispin_matches_enumeration(domain, J, h, beta, early_exit):
    model = ui.models.lattice_ising(4, 4, domain=domain)
    params = model.init_params(J=J, h=h)
    x = _draws(model, params, beta, jax.random.key(21), 20000, 30, early_exit)
    idx = state_index(x, model)
    assert_distribution_matches(idx, brute_force(model, params, beta), label=f"multispin 4x4 {domain}")
    if beta != 1.0:
        assert_distribution_differs(idx, brute_force(model, params, 1.0), label="beta ignored")
