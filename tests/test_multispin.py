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
    with pytest.raises(ValueError, match="tail_after"):
        multispin.build_sweep(ui.models.lattice_ising(4, 4), tail_after=32)
    with pytest.raises(ValueError, match="domain"):
        multispin.pack(jnp.ones((2, 4, 4)), "potts")


def _draws(model, params, beta, key, num_chains, num_sweeps, early_exit=True, tail_after=7):
    # the fixed-length loop also draws its planes four at a time
    sweep = multispin.build_sweep(
        model, early_exit=early_exit, planes_per_draw=1 if early_exit else 4, tail_after=tail_after
    )
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


@pytest.mark.parametrize(
    "domain,J,h,beta,early_exit,tail_after",
    [
        ("spin", 0.5, 0.2, 0.8, True, 2),  # lane-by-lane tail after 2 planes: many tail rounds
        ("spin", -0.35, 0.3, 1.0, True, None),  # the plane-by-plane loop, antiferromagnet
        ("binary", 1.2, -0.5, 1.0, False, 7),  # fixed 32 planes (tail_after ignored)
    ],
)
def test_multispin_matches_enumeration(domain, J, h, beta, early_exit, tail_after):
    model = ui.models.lattice_ising(4, 4, domain=domain)
    params = model.init_params(J=J, h=h)
    x = _draws(model, params, beta, jax.random.key(21), 20000, 30, early_exit, tail_after)
    idx = state_index(x, model)
    assert_distribution_matches(idx, brute_force(model, params, beta), label=f"multispin 4x4 {domain}")
    if beta != 1.0:
        assert_distribution_differs(idx, brute_force(model, params, 1.0), label="beta ignored")


def test_colour_layout_matches_the_full_lattice():
    # the sweep works on the two checkerboard colours as (groups, H, W/2) arrays; on a
    # 6x8 torus (W/2 = 4, so left and right neighbours differ) the neighbour counts read
    # from the other colour must equal the full-lattice counts at that colour's sites
    words = jax.random.bits(jax.random.key(3), (3, 6, 8), jnp.uint32)
    odd_rows = jnp.asarray((np.arange(6) % 2 == 1)[:, None])
    colours = multispin._split_colours(words, odd_rows)
    np.testing.assert_array_equal(np.asarray(multispin._merge_colours(*colours, odd_rows)), np.asarray(words))
    parity = np.add.outer(np.arange(6), np.arange(8)) % 2
    np.testing.assert_array_equal(np.asarray(colours[0]), np.asarray(words)[:, parity == 0].reshape(3, 6, 4))
    full = multispin._neighbour_count(words)
    for colour in (0, 1):
        planes = multispin._count_planes(*multispin._colour_neighbours(colours[1 - colour], odd_rows, colour))
        for plane, ref in zip(planes, full):
            np.testing.assert_array_equal(
                np.asarray(plane), np.asarray(multispin._split_colours(ref, odd_rows)[colour]), err_msg=f"colour {colour}"
            )


def test_lane_counts_and_energy():
    lane_counts = jax.jit(multispin.lane_counts)
    energy = jax.jit(multispin.energy, static_argnums=2)
    for shape in ((3, 4, 6), (2, 300), (1, 1)):  # 300 sites: more than one 128-site byte counter
        w = np.array(jax.random.bits(jax.random.key(4), shape, jnp.uint32))
        if shape == (2, 300):
            w[0] = 0xFFFFFFFF  # every lane counts every site: the byte counters must not carry
        ref = ((w.reshape(shape[0], -1)[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).sum(axis=1)
        np.testing.assert_array_equal(np.asarray(lane_counts(w)), ref)
    for domain in ("spin", "binary"):
        model = ui.models.lattice_ising(6, 8, domain=domain)
        params = model.init_params(J=0.7, h=-0.3)
        s = model.random_state(jax.random.key(5), 70)["s"]
        e = energy(multispin.pack(s, domain), params, domain)
        assert e.shape == (96,)
        e_ref = jax.vmap(lambda x: model.energy(params, {"s": x}))(s)
        np.testing.assert_allclose(np.asarray(e[:70]), np.asarray(e_ref), rtol=1e-6, atol=1e-4)
    with pytest.raises(ValueError, match="domain"):
        multispin.energy(w, params, "potts")
