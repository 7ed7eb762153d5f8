"""ugm_infer._random: the fused uniforms are jax.random's, bit for bit.

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

from ugm_infer import _random

KEYS = {
    "typed": lambda: jax.random.key(3),
    "raw": lambda: jax.random.PRNGKey(7),
    "folded": lambda: jax.random.fold_in(jax.random.key(11), 5),
}
SHAPES = [(), (1,), (7,), (100, 784), (3, 5, 9), (0,), (4, 0)]
# a folded key is a typed key with other words (the same code path): a second check, run with `pytest -m slow`
KINDS = [pytest.param(k, marks=pytest.mark.slow) if k == "folded" else k for k in sorted(KEYS)]
# categorical and randint read their key through the same words as uniform (checked above for every kind):
# CI runs them with a typed key, the other kinds with `pytest -m slow`
DRAW_KINDS = [k if k == "typed" else pytest.param(k, marks=pytest.mark.slow) for k in sorted(KEYS)]


@pytest.mark.parametrize("kind", KINDS)
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


def _key_words(keys) -> np.ndarray:
    return np.asarray(jax.random.key_data(keys) if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else keys)


@pytest.mark.parametrize("kind", KINDS)
def test_split_and_fold_in_are_jax_randoms_bit_for_bit(kind):
    key = KEYS[kind]()
    for num in (1, 2, 3, 100):
        want = jax.random.split(key, num)
        for got in (_random.split(key, num), jax.jit(lambda k, n=num: _random.split(k, n))(key)):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(_key_words(got), _key_words(want))
    for data in (jnp.int32(0), jnp.int32(17), jnp.int32(-5), jnp.uint32(2**32 - 1), 123):
        want = jax.random.fold_in(key, data)
        got = jax.jit(_random.fold_in)(key, data)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(_key_words(got), _key_words(want))


def test_split_and_fold_in_under_vmap_and_in_loops():
    keys = jax.random.split(jax.random.key(0), 5)
    got = jax.jit(jax.vmap(lambda k: _random.split(_random.fold_in(k, 3), 4)))(keys)
    want = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, 3), 4))(keys)
    np.testing.assert_array_equal(_key_words(got), _key_words(want))

    def chain(split, fold_in):
        def body(key, i):
            key, sub = split(fold_in(key, i))
            return key, jax.random.key_data(sub)

        return jax.lax.scan(body, jax.random.key(9), jnp.arange(6))[1]

    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda: chain(_random.split, _random.fold_in))()),
        np.asarray(chain(jax.random.split, jax.random.fold_in)),
    )


def test_split_falls_back_outside_traced_programs_and_for_other_keys():
    key = jax.random.key(1)
    assert not _random._traced_threefry_key(key)  # eager: jax.random itself, no compilation
    rbg = jax.random.key(1, impl="rbg")
    split3, fold2 = jax.jit(lambda k: _random.split(k, 3)), jax.jit(lambda k: _random.fold_in(k, 2))
    np.testing.assert_array_equal(_key_words(split3(rbg)), _key_words(jax.random.split(rbg, 3)))
    np.testing.assert_array_equal(_key_words(fold2(rbg)), _key_words(jax.random.fold_in(rbg, 2)))
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(
            _key_words(jax.jit(lambda k: _random.split(k, 3))(key)), _key_words(jax.random.split(key, 3))
        )


def _hashing_fusions(compiled_text: str) -> int:
    """Fused computations of a compiled program holding a Threefry hash (20 rounds: 20 xors and more)."""
    import re

    bodies = re.split(r"\n(?=%?\S+ \(|ENTRY )", compiled_text)
    return sum(1 for b in bodies if ("fused_computation" in b.split("\n", 1)[0]) and len(re.findall(r" xor\(", b)) >= 20)


def test_computed_once_hashes_a_draw_once_for_several_consumers():
    """A draw read by a product, a count and an output is hashed once, not once per reader."""
    logits = jax.random.normal(jax.random.key(0), (100, 784))
    old = jnp.zeros((100, 784))
    weights = jax.random.normal(jax.random.key(1), (784, 50))

    def draw(lg, key):
        return (_random.uniform(key, lg.shape) < jax.nn.sigmoid(lg)).astype(jnp.float32)

    def program(once):
        def f(key, lg):
            v = _random.computed_once(draw, lg, key) if once else draw(lg, key)
            return v, v @ weights, jnp.sum(v != old), (2.0 * v).sum(0)

        return jax.jit(f)

    key = jax.random.key(2)
    plain, once = program(False), program(True)
    for got, want in zip(once(key, logits), plain(key, logits)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert _hashing_fusions(once.lower(key, logits).compile().as_text()) == 1
    assert _hashing_fusions(plain.lower(key, logits).compile().as_text()) > 1  # what computed_once prevents
    # vmapped over chains (one key each) and NaN logits (the loop's second trip) give the same values
    keys = jax.random.split(key, 100)
    by_chain = jax.jit(jax.vmap(lambda k, lg: _random.computed_once(draw, lg, k)))
    np.testing.assert_array_equal(np.asarray(by_chain(keys, logits)), np.asarray(jax.vmap(draw, (0, 0))(logits, keys)))
    nan_first = logits.at[0, 0].set(jnp.nan)
    np.testing.assert_array_equal(np.asarray(once(key, nan_first)[0]), np.asarray(plain(key, nan_first)[0]))
    # a gradient through a program that draws: the draw is constant in the logits
    g = jax.grad(lambda lg: jnp.sum(lg * _random.computed_once(draw, lg, key)))(logits)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(draw(logits, key)))


@pytest.mark.parametrize("kind", DRAW_KINDS)
def test_categorical_is_jax_random_categorical_bit_for_bit(kind):
    key = KEYS[kind]()
    for shape, axis in [((21,), -1), ((500, 21), -1), ((50, 3), 0), ((7, 4, 5), 1), ((1000, 2), -1)]:
        logits = 3.0 * jax.random.normal(jax.random.key(1), shape)
        logits = logits.at[(0,) * len(shape)].set(-jnp.inf)  # an impossible state stays impossible
        want = np.asarray(jax.random.categorical(key, logits, axis))
        for got in (
            _random.categorical(key, logits, axis),
            jax.jit(lambda k, lg, a=axis: _random.categorical(k, lg, a))(key, logits),
        ):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), want)


def test_categorical_under_vmap_its_frequencies_and_fallbacks():
    keys = jax.random.split(jax.random.key(0), 64)
    logits = jax.random.normal(jax.random.key(1), (64, 21))
    np.testing.assert_array_equal(
        np.asarray(jax.jit(jax.vmap(_random.categorical))(keys, logits)),
        np.asarray(jax.vmap(jax.random.categorical)(keys, logits)),
    )
    # 200,000 draws from (0.5, 0.3, 0.15, 0.05): chi-square with 3 degrees of freedom below its 1e-6 quantile (30.7)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    n = 200_000
    draws = jax.jit(lambda k: _random.categorical(k, jnp.broadcast_to(jnp.log(p), (n, 4))))(jax.random.key(7))
    counts = np.bincount(np.asarray(draws), minlength=4)
    assert np.sum((counts - n * p) ** 2 / (n * p)) < 30.7
    key = jax.random.key(2)
    half = jnp.zeros((6, 3), jnp.float16)
    np.testing.assert_array_equal(np.asarray(_random.categorical(key, half)), np.asarray(jax.random.categorical(key, half)))
    rbg = jax.random.key(2, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(_random.categorical(rbg, logits[0])), np.asarray(jax.random.categorical(rbg, logits[0]))
    )


@pytest.mark.parametrize("kind", DRAW_KINDS)
def test_randint_is_jax_random_randint_bit_for_bit(kind):
    key = KEYS[kind]()
    cases = [((), 1, 21), ((100,), 0, 53), ((7, 3), -5, 5), ((1000,), 0, 2**31 - 1), ((50,), 3, 3), ((50,), 5, 2)]
    for shape, lo, hi in cases + [((10,), -(2**31), 2**31 - 1)]:
        want = np.asarray(jax.random.randint(key, shape, lo, hi))
        static = jax.jit(lambda k, s=shape, a=lo, b=hi: _random.randint(k, s, a, b))(key)
        traced = jax.jit(lambda k, a, b, s=shape: _random.randint(k, s, a, b))(key, jnp.int32(lo), jnp.int32(hi))
        for got in (_random.randint(key, shape, lo, hi), static, traced):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), want)


def test_randint_under_vmap_with_per_chain_bounds_and_its_frequencies():
    keys = jax.random.split(jax.random.key(0), 32)
    highs = jnp.arange(2, 34, dtype=jnp.int32)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(jax.vmap(lambda k, m: _random.randint(k, (), 1, m)))(keys, highs)),
        np.asarray(jax.vmap(lambda k, m: jax.random.randint(k, (), 1, m))(keys, highs)),
    )
    # 120,000 draws on {0, ..., 5}: chi-square with 5 degrees of freedom below its 1e-6 quantile (35.9)
    n = 120_000
    counts = np.bincount(np.asarray(jax.jit(lambda k: _random.randint(k, (n,), 0, 6))(jax.random.key(4))), minlength=6)
    assert np.sum((counts - n / 6) ** 2 / (n / 6)) < 35.9


def _random_state_by_jax_random(model, key, num_chains):
    """What ``model.random_state`` documents: split the key per variable, ``jax.random.randint``, values by index."""
    batch = () if num_chains is None else (num_chains,)
    keys = jax.random.split(key, len(model.variables))
    return {
        n: jnp.take(jnp.asarray(d.values, d.dtype), jax.random.randint(k, batch + d.shape, 0, d.num_states), axis=0)
        for k, (n, d) in zip(keys, model.variables.items())
    }


def test_random_state_is_jax_random_randint_bit_for_bit():
    # one compiled program draws every variable (the fused hash); the values are jax.random's
    import ugm_infer as ui

    cases = [(ui.models.lattice_ising(6, 8), KEYS[kind](), 40) for kind in sorted(KEYS)]  # a batch of lattices: rank 3
    cases += [
        (ui.models.lattice_ising(5, 4, domain="binary", dtype=jnp.int8), KEYS["typed"](), None),
        (ui.models.rbm(7, 3), KEYS["typed"](), 1),  # two variables
        (ui.models.lattice_potts(4, 6, 3), KEYS["folded"](), 40),
    ]
    for model, key, num_chains in cases:
        got, want = model.random_state(key, num_chains), _random_state_by_jax_random(model, key, num_chains)
        assert set(got) == set(want)
        for name in want:
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
            np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]))
    domain, key = ui.domains.Categorical((3, 2), 5), KEYS["raw"]()
    np.testing.assert_array_equal(np.asarray(domain.random(key, (4,))), np.asarray(jax.random.randint(key, (4, 3, 2), 0, 5)))
    with jax.threefry_partitionable(False):  # JAX's other bit layout: jax.random's numbers still
        model, key = ui.models.lattice_ising(6, 8), KEYS["typed"]()
        want = _random_state_by_jax_random(model, key, 40)["s"]
        np.testing.assert_array_equal(np.asarray(model.random_state(key, 40)["s"]), np.asarray(want))


def test_random_state_under_jit_and_vmap_over_keys():
    import ugm_infer as ui

    model = ui.models.lattice_ising(4, 4)
    keys = jax.random.split(jax.random.key(2), 3)
    got = jax.jit(jax.vmap(lambda k: model.random_state(k, 2)))(keys)
    want = jax.vmap(lambda k: _random_state_by_jax_random(model, k, 2))(keys)
    np.testing.assert_array_equal(np.asarray(got["s"]), np.asarray(want["s"]))


def test_drawn_flat_and_categorical_shaped_are_the_shaped_draws_bit_for_bit():
    key, raw = KEYS["typed"](), KEYS["raw"]()
    shape = (4, 2, 3)
    np.testing.assert_array_equal(
        _key_words(_random.drawn_flat(jax.random.split, key, shape)), _key_words(jax.random.split(key, shape))
    )
    np.testing.assert_array_equal(
        np.asarray(_random.drawn_flat(jax.random.split, raw, shape)), np.asarray(jax.random.split(raw, shape))
    )
    np.testing.assert_array_equal(
        np.asarray(_random.drawn_flat(jax.random.bits, key, shape, jnp.uint32)),
        np.asarray(jax.random.bits(key, shape, jnp.uint32)),
    )
    logits = jax.nn.log_softmax(jax.random.normal(jax.random.key(0), (2, 3, 5)))
    want = np.asarray(jax.random.categorical(key, logits, axis=-1, shape=(4, 2, 3)))
    np.testing.assert_array_equal(np.asarray(_random.categorical_shaped(key, logits, (4, 2, 3))), want)
    got = jax.jit(lambda k: _random.categorical_shaped(k, logits, (4, 2, 3)))(key)
    np.testing.assert_array_equal(np.asarray(got), want)
