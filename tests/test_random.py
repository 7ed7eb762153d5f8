"""ugm_infer.kernels._random: the fused uniforms are jax.random's, bit for bit.

The kernels draw through these functions, so every sampler's output must stay what
``jax.random`` would have given: the comparisons are exact, on typed and raw keys,
under ``jit`` and ``vmap``, and the fallbacks (other dtypes, other key
implementations, batches of keys) must hand the call to ``jax.random`` itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ugm_infer.kernels import _random

KEYS = {
    "typed": lambda: jax.random.key(3),
    "raw": lambda: jax.random.PRNGKey(7),
    "folded": lambda: jax.random.fold_in(jax.random.key(11), 5),
}
SHAPES = [(), (1,), (7,), (100, 784), (3, 5, 9), (0,), (4, 0)]


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_uniform_is_jax_random_uniform_bit_for_bit(kind):
    key = KEYS[kind]()
    for shape in SHAPES:
        want = np.asarray(jax.random.uniform(key, shape))
        for got in (_random.uniform(key, shape), jax.jit(lambda k, s=shape: _random.uniform(k, s))(key)):
            assert got.dtype == jnp.float32 and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), want)


def test_uniform_under_vmap_over_keys_and_its_range():
    keys = jax.random.split(jax.random.key(0), 100)
    got = jax.jit(jax.vmap(lambda k: _random.uniform(k, (784,))))(keys)
    want = jax.vmap(lambda k: jax.random.uniform(k, (784,)))(keys)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert float(got.min()) >= 0.0 and float(got.max()) < 1.0
    # 78,400 uniforms: the mean within 5 standard errors of 1/2 (sd of U(0,1) = 1/sqrt(12))
    assert abs(float(got.mean()) - 0.5) < 5 / np.sqrt(12 * got.size)


def test_fallbacks_hand_the_call_to_jax_random():
    key = jax.random.key(1)
    for dtype in (jnp.float16, jnp.bfloat16):
        got, want = _random.uniform(key, (6,), dtype), jax.random.uniform(key, (6,), dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    rbg = jax.random.key(1, impl="rbg")
    np.testing.assert_array_equal(np.asarray(_random.uniform(rbg, (9,))), np.asarray(jax.random.uniform(rbg, (9,))))
    assert not _random._is_threefry_key(jax.random.split(key, 3))  # a batch of keys is not one key


def test_the_original_threefry_bit_layout_falls_back_to_jax_random():
    """With ``jax_threefry_partitionable`` off, JAX lays its bits out differently: same numbers still."""
    key = jax.random.key(3)
    with jax.threefry_partitionable(False):
        for shape in [(5,), (7, 3)]:
            want = np.asarray(jax.random.uniform(key, shape))
            np.testing.assert_array_equal(np.asarray(_random.uniform(key, shape)), want)
            np.testing.assert_array_equal(np.asarray(jax.jit(lambda k, s=shape: _random.uniform(k, s))(key)), want)
