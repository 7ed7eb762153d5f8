"""``jax.random.uniform``, ``split`` and ``fold_in``, bit for bit, with the Threefry hash written as array operations.

On the CPU, ``jax.random`` runs the Threefry-2x32 hash (Salmon et al. 2011) as a loop
over whole arrays: the counters, both words of every round and the bits are written
to memory five times per draw, the loop's carry is copied at every iteration, and XLA
cannot fuse the hash with the comparison that consumes it.  :func:`uniform` computes
the same numbers from the same key with the 20 rounds as plain elementwise operations
(:func:`threefry2x32`), which XLA fuses into the comparison: a Gibbs update's uniforms
are never written out.  XLA counts these integer operations as cheap, so it would also
fuse a draw into each further consumer of the sampled values (a gradient, a count of
changed sites) and hash those sites again there; :func:`computed_once` makes a value
a loop's output, hashed and written once.  :func:`split` and :func:`fold_in` give
``jax.random``'s keys the same way: a learner step splits its key, then one key per
chain, and each ``jax.random`` call would be a loop of five iterations of small
operations.

Each reproduces its ``jax.random`` counterpart exactly when JAX draws as its default
configuration does (a Threefry key, ``jax_threefry_partitionable`` on: the bits of
element ``i`` are the hash of the counter pair ``(0, i)``) and falls back to
``jax.random`` otherwise, so switching between the two never changes a result.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "categorical",
    "categorical_shaped",
    "computed_once",
    "drawn_flat",
    "fold_in",
    "key_pair",
    "randint",
    "split",
    "threefry2x32",
    "uniform",
]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))

_ONE_BITS = np.uint32(np.array(1.0, np.float32).view(np.uint32))  # the bits of 1.0f: exponent 0, empty mantissa


def threefry2x32(k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 hash (20 rounds) of counters ``(x1, x2)`` under key ``(k1, k2)``, elementwise.

    Bit-identical to ``jax.extend.random.threefry2x32_p``; all arguments ``uint32``
    and broadcastable.  Written as plain array operations (the CPU lowering of the
    primitive is a loop over whole arrays, which XLA cannot fuse with its consumers).
    """
    ks = (k1, k2, k1 ^ k2 ^ jnp.uint32(0x1BD11BDA))
    a, b = x1 + ks[0], x2 + ks[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            a = a + b
            b = ((b << jnp.uint32(r)) | (b >> jnp.uint32(32 - r))) ^ a
        a = a + ks[(block + 1) % 3]
        b = b + ks[(block + 2) % 3] + jnp.uint32(block + 1)
    return a, b


def key_pair(rng_key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two ``uint32`` words from one PRNG key (its data for Threefry keys, else two random words)."""
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(rng_key)) == "threefry2x32":
            data = jax.random.key_data(rng_key)
        else:
            data = jax.random.bits(rng_key, (2,), jnp.uint32)
    else:  # a raw uint32[2] key (jax.random.PRNGKey)
        data = jnp.asarray(rng_key, jnp.uint32)
    return data[..., 0], data[..., 1]


def _is_threefry_key(rng_key: jax.Array) -> bool:
    """One Threefry-2x32 key: a typed scalar key of that implementation, or a raw ``uint32[2]`` under it."""
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return rng_key.ndim == 0 and str(jax.random.key_impl(rng_key)) == "threefry2x32"
    return rng_key.dtype == jnp.uint32 and rng_key.shape == (2,) and jax.config.jax_default_prng_impl == "threefry2x32"


# jitted: called eagerly (outside a compiled program) the 20 rounds would dispatch one by one
@functools.partial(jax.jit, static_argnums=1)
def _fused_uniform(rng_key: jax.Array, shape: tuple) -> jax.Array:
    k1, k2 = key_pair(rng_key)
    counter = jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(shape)  # flat index: low word; high word 0
    a, b = threefry2x32(k1, k2, jnp.uint32(0), counter)
    mantissa = ((a ^ b) >> jnp.uint32(32 - 23)) | _ONE_BITS  # in [1, 2)
    return jnp.maximum(jnp.float32(0), jax.lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1))


def uniform(rng_key: jax.Array, shape: tuple = (), dtype=jnp.float32) -> jax.Array:
    """``jax.random.uniform(rng_key, shape, dtype)`` on ``[0, 1)``: the same values, computed fused.

    Only a single key (no leading key axis; ``jax.vmap`` over keys works) and float32
    take the fused path; anything else is drawn by ``jax.random.uniform`` itself.
    """
    shape = tuple(int(d) for d in shape)
    fused = _is_threefry_key(rng_key) and jnp.dtype(dtype) == jnp.float32 and math.prod(shape) < 2**32
    if not (fused and jax.config.jax_threefry_partitionable):
        return jax.random.uniform(rng_key, shape, dtype)
    return _fused_uniform(rng_key, shape)


def _unknown_flag(x: jax.Array) -> jax.Array:
    """A boolean XLA cannot evaluate at compile time, False for nearly every ``x`` (only the loop count reads it)."""
    first = x.reshape(-1)[0]
    if jnp.issubdtype(first.dtype, jnp.inexact):
        return first != first  # NaN
    return first.astype(jnp.uint32) == jnp.uint32(0x9E3779B9)


def computed_once(fn, first: jax.Array, *args):
    """``fn(first, *args)``, written to memory once, however many operations read it.

    XLA counts the hash's integer operations as cheap and fuses a draw into every
    elementwise consumer of the sampled values: a Gibbs update whose new values feed
    the next state, a matrix product and a count of changed sites hashes its sites three
    times, and keys split for many chains are hashed again for every uniform drawn
    from them.  Computed as the body of a ``lax.while_loop`` whose trip count XLA cannot
    see at compile time, the values are the loop's output: hashed once, written once,
    read by every consumer.  The loop runs once, twice when ``first``'s first element is
    NaN (or, for integers, one value in 2**32); ``fn`` returns the same values either
    time.  Under ``jax.vmap`` the loop stays one loop.  A float ``first`` is read through
    ``stop_gradient`` (sampled values are piecewise constant in it), so a surrounding
    ``jax.grad`` never differentiates the loop.
    """
    if jnp.issubdtype(first.dtype, jnp.inexact):
        first = jax.lax.stop_gradient(first)
    trips = jnp.where(_unknown_flag(first), 2, 1)
    shape = jax.eval_shape(fn, first, *args)
    initial = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)

    def body(carry):
        trip, _ = carry
        return trip + 1, fn(first, *args)

    return jax.lax.while_loop(lambda carry: carry[0] < trips, body, (jnp.int32(0), initial))[1]


def _split_words(k1: jax.Array, k2: jax.Array, num: int) -> jax.Array:
    a, b = threefry2x32(k1, k2, jnp.uint32(0), jax.lax.iota(jnp.uint32, num))
    return jnp.stack([a, b], axis=-1)


#: splits into at most this many keys are written as plain fused operations: a
#: :func:`computed_once` loop costs more than hashing a few keys again in a consumer
#: (a learner's PCD step on a dense 16-unit BM ran 6-10 % faster without the loop)
SMALL_SPLIT = 2


@functools.partial(jax.jit, static_argnums=1)
def _fused_split(rng_key: jax.Array, num: int) -> jax.Array:
    k1, k2 = key_pair(rng_key)
    if num <= SMALL_SPLIT:
        words = _split_words(k1, k2, num)
    else:
        words = computed_once(lambda k: _split_words(k[0], k[1], num), jnp.stack([k1, k2]))
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(words, impl="threefry2x32")
    return words


def split(rng_key: jax.Array, num: int = 2) -> jax.Array:
    """``jax.random.split(rng_key, num)``: the same keys, hashed as fused array operations, once.

    ``jax.random.split`` runs the hash as a loop of five iterations on the CPU: a
    learner step that splits its key, then one key per chain, pays ten loop iterations
    of small operations.  More than :data:`SMALL_SPLIT` keys are hashed inside
    :func:`computed_once` (not again in every consumer); fewer are plain fused
    operations, cheaper than that loop.  Falls back to ``jax.random.split`` where :func:`uniform` does,
    and outside a traced program (``jax.jit``, ``jax.vmap``, a loop).
    """
    num = int(num)
    if not (_traced_threefry_key(rng_key) and jax.config.jax_threefry_partitionable and 0 < num < 2**32):
        return jax.random.split(rng_key, num)
    return _fused_split(rng_key, num)


@jax.jit
def _fused_fold_in(rng_key: jax.Array, data: jax.Array) -> jax.Array:
    k1, k2 = key_pair(rng_key)
    words = computed_once(lambda k: jnp.stack(threefry2x32(k[0], k[1], jnp.uint32(0), k[2])), jnp.stack([k1, k2, data]))
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(words, impl="threefry2x32")
    return words


def fold_in(rng_key: jax.Array, data) -> jax.Array:
    """``jax.random.fold_in(rng_key, data)`` (``data`` a 32-bit integer scalar), fused and hashed once like :func:`split`."""
    data = jnp.asarray(data)
    fused = _traced_threefry_key(rng_key) and data.shape == () and data.dtype in (jnp.int32, jnp.uint32)
    if not fused:
        return jax.random.fold_in(rng_key, data)
    return _fused_fold_in(rng_key, data.astype(jnp.uint32))


def _traced_threefry_key(rng_key: jax.Array) -> bool:
    """A Threefry key inside a traced program (eager calls keep ``jax.random``: nothing to fuse, nothing to compile)."""
    return isinstance(rng_key, jax.core.Tracer) and _is_threefry_key(rng_key)


_TINY = np.float32(np.finfo(np.float32).tiny)


def categorical(rng_key: jax.Array, logits: jax.Array, axis: int = -1) -> jax.Array:
    """``jax.random.categorical(rng_key, logits, axis)``: the same draws, from the fused uniforms.

    The Gumbel-max draw ``argmax(logits + g)``, ``g = -log(-log(u))`` with ``u`` the
    uniforms of :func:`uniform` floored at the smallest normal float, as JAX's default
    (``"low"``) Gumbel mode computes them.  Float32 logits and one Threefry key take the
    fused path; anything else (and the high-dynamic-range mode) is ``jax.random.categorical``.
    """
    logits = jnp.asarray(logits)
    fused = (
        _is_threefry_key(rng_key)
        and logits.dtype == jnp.float32
        and logits.ndim > 0
        and jax.config.jax_threefry_partitionable
        and not jax.config.jax_high_dynamic_range_gumbel
        and math.prod(logits.shape) < 2**32
    )
    if not fused:
        return jax.random.categorical(rng_key, logits, axis)
    u = jnp.maximum(_TINY, _fused_uniform(rng_key, logits.shape) + _TINY)  # jax.random's uniform on [tiny, 1)
    return jnp.argmax(-jnp.log(-jnp.log(u)) + logits, axis=axis)


def _bits(k1: jax.Array, k2: jax.Array, shape: tuple) -> jax.Array:
    """``jax.random.bits(key, shape, uint32)`` of the key with words ``(k1, k2)``."""
    a, b = threefry2x32(k1, k2, jnp.uint32(0), jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(shape))
    return a ^ b


def _halves(words: jax.Array) -> jax.Array:
    """The words of ``split(key)`` (two keys) from ``key``'s words."""
    return _split_words(words[0], words[1], 2)


def randint(rng_key: jax.Array, shape: tuple, minval, maxval) -> jax.Array:
    """``jax.random.randint(rng_key, shape, minval, maxval)`` (``int32``): the same integers, from fused hashes.

    As JAX draws them: two words per integer from the two halves of ``split(rng_key)``,
    reduced modulo the span ``maxval - minval`` (1 where ``maxval <= minval``) without
    overflow.  ``minval`` and ``maxval`` are 32-bit integers (scalars or broadcastable
    arrays) inside a traced program; anything else falls back to ``jax.random.randint``.
    """
    shape = tuple(int(d) for d in shape)
    lo, hi = jnp.asarray(minval), jnp.asarray(maxval)
    fused = (
        _traced_threefry_key(rng_key)
        and jax.config.jax_threefry_partitionable
        and lo.dtype == jnp.int32
        and hi.dtype == jnp.int32
        and 0 < math.prod(shape) < 2**32
    )
    if not fused:
        return jax.random.randint(rng_key, shape, minval, maxval)
    k1, k2 = key_pair(rng_key)
    words = jnp.stack([k1, k2])
    # the two halves' hash, fused into every integer's, would be computed again for each
    halves = computed_once(_halves, words) if math.prod(shape) >= 256 else _halves(words)
    higher = _bits(halves[0, 0], halves[0, 1], shape)
    lower = _bits(halves[1, 0], halves[1, 1], shape)
    lo, hi = jnp.broadcast_to(lo, shape), jnp.broadcast_to(hi, shape)
    span = jnp.where(hi <= lo, jnp.uint32(1), (hi - lo).astype(jnp.uint32))
    multiplier = jnp.uint32(2**16) % span
    multiplier = (multiplier * multiplier) % span
    offset = ((higher % span) * multiplier + lower % span) % span
    return lo + offset.astype(jnp.int32)


def drawn_flat(draw, rng_key: jax.Array, shape: tuple, *args) -> jax.Array:
    """``draw(rng_key, shape, *args)``, bit for bit, drawn flat and reshaped.

    For the ``jax.random`` draws whose numbers follow the row-major index of the shape
    (``split``, ``bits``, ``uniform``, ``randint``, ...).  XLA's CPU compiler takes
    several times longer over ``jax.random``'s hash loop on a rank-3 array (a batch of
    lattices, keys per draw, step and chain) than on the same numbers drawn flat.
    """
    shape = tuple(int(d) for d in shape)
    out = draw(rng_key, (math.prod(shape),), *args)
    return out.reshape(shape + out.shape[1:])


def categorical_shaped(rng_key: jax.Array, logits: jax.Array, shape: tuple) -> jax.Array:
    """``jax.random.categorical(rng_key, logits, axis=-1, shape=shape)``, bit for bit, as a rank-2 draw.

    The logits are broadcast to ``shape`` and flattened to ``(draws, states)`` (see
    :func:`drawn_flat` for why), then drawn by :func:`categorical`.
    """
    shape = tuple(int(d) for d in shape)
    flat = jnp.broadcast_to(logits, shape + logits.shape[-1:]).reshape(-1, logits.shape[-1])
    return categorical(rng_key, flat, axis=-1).reshape(shape)
