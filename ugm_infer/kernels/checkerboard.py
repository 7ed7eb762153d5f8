r"""Four-sub-lattice checkerboard heat bath for the uniform 2D lattice Ising model.

The block-Gibbs sweep of :func:`~ugm_infer.models.lattice_ising` (even height and
width), written so that each colour does work only for the sites it updates.

Layout
    A lattice of height ``H = 2h`` and width ``W = 2w`` splits into four sub-lattices
    ``A = (2i, 2j)``, ``B = (2i, 2j+1)``, ``C = (2i+1, 2j)``, ``D = (2i+1, 2j+1)``, each
    ``(h, w)``.  The checkerboard colours are ``{A, D}`` (``r + c`` even) and ``{B, C}``.
    One chain is stored as two ``(h, w)`` arrays of ``uint16`` words, one per colour:
    ``even[i, j]`` holds ``A(i, j)`` in bit 0 and ``D(i, j)`` in bit 8, ``odd[i, j]``
    holds ``B(i, j)`` in bit 0 and ``C(i, j)`` in bit 8 (a set bit is +1 for spins, 1 for
    binary sites); two bytes per pair of sites.
Neighbours
    The colour being updated reads the other colour's words at ``(i, j)`` (two
    neighbours of each of its sites at once) and at one horizontal and one vertical
    offset: for the low site ``Q[i, j + s]`` and ``Q[i - 1, j]``, for the high site
    ``Q[i, j - s]`` and ``Q[i + 1, j]``, with ``s = -1`` for colour 0 and ``+1`` for
    colour 1 (offsets wrap around on a torus; on an open lattice a missing neighbour is
    absent).  A shifted read is a padded slice with the wrapped edge selected in, so
    XLA fuses it into the update.  The number of up neighbours ``n`` decides the
    conditional.
Heat bath
    With ``d`` neighbours, ``p(up | rest) = sigmoid(2 beta (J (2n - d) + h))`` for spins
    and ``sigmoid(beta (J n + h))`` for binary sites: at most nine values, turned once
    per call into 32-bit fixed-point thresholds ``T = round(2^32 p)``
    (:func:`probability_thresholds`); a site goes up when a uniform 32-bit integer
    ``U < T``, so ``P(up) = T / 2^32``, within ``2^-33`` of ``p`` (finer than a float32
    uniform).  No exponential, no float uniform per site.
Random numbers
    One Threefry-2x32 evaluation (Salmon et al. 2011; the hash behind
    ``jax.random``'s default keys, :func:`threefry2x32`) per pair of sites: its two
    output words decide the low and the high site of a word.  The key is the chain's
    key; the counter is ``(c, i w + j)`` with ``c = 2 * sweep + colour`` the half-sweep
    index, so every draw of a call has its own counter and chains are independent
    (a chain's draws depend only on its own key, whatever else is in the batch).
    The hash is written with ``jax.numpy`` so that XLA fuses it with the neighbour
    count and the comparison into one loop per colour.
Program structure
    Half-sweep ``t`` (``0, 1, 2, ...``) updates the first colour for even ``t`` and
    the other for odd ``t``, hashing with counter ``t``.  One chain's sweep (and a
    batch vectorised by ``jax.vmap``) runs the ``2 num_sweeps`` half-sweeps in a
    ``lax.fori_loop`` that carries both colours' words (a ``lax.switch`` gives each
    half-sweep its static colour: only the shifted reads it needs), so each
    half-sweep's new words are written once and read by the next.  Written as straight-line code,
    XLA's CPU compiler fuses the first colour's update into every consumer that reads
    its words (the second colour's four shifted reads and, when the caller unpacks the
    lattice right after, the unpacking), computing each hash many times over: a pack,
    one sweep and an unpack in a loop (a learner's step, parallel tempering) ran about
    50 times slower than the sweep.  (``lax.optimization_barrier`` does not prevent
    it: the CPU compiler removes barriers before fusing.)  The chains-last batching
    rule (``chains_last=True``) writes the two colours as straight-line code (no
    conditional, which copies the colour it passes through): its drivers
    (``ui.sample``, AIS, a learner's multi-step update) use it only where a loop
    carries every step's words (:func:`ugm_infer.kernels._common.chains_last`).  The
    same drivers sweep fewer chains, kept chains-first, with straight-line colours
    too where a loop carries them (``build_sweep(..., straight=True)``, chosen by the
    state type :meth:`LatticeGibbsState.as_carried` makes): the program is about half
    the size of the loop of half-sweeps, and ``ui.sample``'s first call on one chain
    traces and compiles in about 0.15 s less.

Exact: each half-sweep draws every site of a colour from its full conditional given
the other colour (the sites of a colour do not interact), the same transition as the
block-Gibbs kernel's generic path.

References
----------
Salmon, J. K., Moraes, M. A., Dror, R. O. and Shaw, D. E. (2011). Parallel random
numbers: as easy as 1, 2, 3. SC '11.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._random import key_pair, threefry2x32
from ugm_infer.kernels._updates import SiteLogitsLogDensity

__all__ = [
    "LatticeLayout",
    "LatticeLogDensity",
    "LatticeGibbsState",
    "threefry2x32",
    "key_pair",
    "uniform",
    "probability_thresholds",
    "build_sweep",
    "state_type",
    "count_changed",
    "count_flags",
    "pair_and_total",
]

_LOW, _HIGH = 0, 8  # bit of the low / high site of a word (code relies on _LOW == 0)
_FLAG = 1  # change flags sit _FLAG bits above the values (bits 1 and 9), see build_sweep(track_changes=True)
_VALUES = np.uint16((1 << _LOW) | (1 << _HIGH))
_FLAGS = np.uint16(_VALUES << _FLAG)


def uniform(rng_key: jax.Array, shape: tuple, stream: int = 0) -> jax.Array:
    """float32 uniforms on ``[0, 1)`` (24 random bits each) from the fused hash, one key per call.

    The same numbers for the same key and ``stream``; different streams are independent.
    Unlike ``jax.random.uniform`` on CPU (a loop over whole arrays), the hash fuses with
    its consumer, which matters when a kernel draws a few numbers per site many times.
    """
    return uniform_of_words(*key_pair(rng_key), shape, stream)


def uniform_of_words(k1: jax.Array, k2: jax.Array, shape: tuple, stream: int = 0) -> jax.Array:
    """:func:`uniform` of the key words ``(k1, k2)``; words of shape ``keys`` give ``shape + keys`` (one draw per key)."""
    size = int(np.prod(shape, dtype=np.int64))
    half = -(-size // 2)
    counter = jax.lax.iota(jnp.uint32, half).reshape((half,) + (1,) * jnp.ndim(k1))
    a, b = threefry2x32(k1, k2, jnp.uint32(stream), counter)
    bits = jnp.concatenate([a, b])[:size].reshape(tuple(shape) + jnp.shape(k1))
    return (bits >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def probability_thresholds(p: jax.Array) -> jax.Array:
    """``round(p 2^32)`` as ``uint32`` (``2^32 - 1`` for ``p >= 1``), exact for a float32 ``p``.

    A uniform 32-bit integer ``U`` satisfies ``P(U < T) = T / 2^32``.  The product is
    split into two 16-bit halves so no float32 rounding enters.
    """
    p = jnp.asarray(p, jnp.float32)
    scaled = p * 65536.0
    hi = jnp.floor(scaled)
    lo = jnp.round((scaled - hi) * 65536.0)
    t = hi.astype(jnp.uint32) * jnp.uint32(65536) + jnp.minimum(lo, 65535.0).astype(jnp.uint32)
    return jnp.where(p >= 1.0, jnp.uint32(0xFFFFFFFF), t)


class LatticeLayout(NamedTuple):
    """Static description of a lattice the four-sub-lattice sweep applies to (hashable)."""

    height: int
    width: int
    periodic: bool
    domain: str  # "spin" or "binary"
    dtype: str  # the position dtype, e.g. "float32"
    name: str = "s"

    @property
    def spin(self) -> bool:
        return self.domain == "spin"

    @property
    def num_thresholds(self) -> int:
        """9 for spins on an open lattice (index ``2n - d + 4``), else 5 (index ``n``)."""
        return 9 if (self.spin and not self.periodic) else 5

    def thresholds(self, J: Any, h: Any, beta: Any) -> jax.Array:
        """The fixed-point heat-bath thresholds indexed as in :attr:`num_thresholds`."""
        J, h, beta = (jnp.asarray(v, jnp.float32) for v in (J, h, beta))
        if not self.spin:
            logit = beta * (J * jnp.arange(5, dtype=jnp.float32) + h)
        elif self.periodic:
            logit = 2.0 * beta * (J * (2.0 * jnp.arange(5, dtype=jnp.float32) - 4.0) + h)
        else:
            logit = 2.0 * beta * (J * (jnp.arange(9, dtype=jnp.float32) - 4.0) + h)
        return probability_thresholds(jax.nn.sigmoid(logit))

    def pack(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(..., H, W)`` states -> the two colours' ``(..., H/2, W/2)`` uint16 words (module docstring)."""
        up = jnp.asarray(x) > 0
        a, b = up[..., 0::2, 0::2], up[..., 0::2, 1::2]
        c, d = up[..., 1::2, 0::2], up[..., 1::2, 1::2]

        def word(low, high):
            return low.astype(jnp.uint16) | (high.astype(jnp.uint16) << _HIGH)  # _LOW == 0

        return word(a, d), word(b, c)

    def unpack(self, even: jax.Array, odd: jax.Array) -> jax.Array:
        """Inverse of :meth:`pack`: ``(..., H, W)`` in the layout's dtype and domain."""
        even, odd = jnp.asarray(even), jnp.asarray(odd)
        a, d = even & 1, (even >> _HIGH) & 1  # _LOW == 0: no shift (a shift by 0 can defeat vectorisation)
        b, c = odd & 1, (odd >> _HIGH) & 1
        # rows 2i hold a, b alternately and rows 2i + 1 hold c, d: (..., h, 2, w, 2) -> (..., H, W)
        grid = jnp.stack([jnp.stack([a, b], axis=-1), jnp.stack([c, d], axis=-1)], axis=-3)
        x = grid.reshape(grid.shape[:-4] + (self.height, self.width))
        if self.spin:
            return (2 * x.astype(jnp.int8) - 1).astype(self.dtype)
        return x.astype(self.dtype)


def _shifted(q: jax.Array, offset: int, axis: int, periodic: bool) -> jax.Array:
    """``q[..., k + offset, ...]`` along ``axis`` (``offset`` = +-1): wrapped around, or 0 past the edge.

    Written as a padded slice with the wrapped edge selected in (not ``jnp.roll``,
    whose concatenation XLA materialises), so it fuses into the consumer.
    """
    axis = axis % q.ndim
    n = q.shape[axis]
    widths = [(0, 0)] * q.ndim
    if offset == 1:
        widths[axis] = (0, 1)
        inner = jnp.pad(jax.lax.slice_in_dim(q, 1, n, axis=axis), widths)
        edge, at = jax.lax.slice_in_dim(q, 0, 1, axis=axis), n - 1
    else:
        widths[axis] = (1, 0)
        inner = jnp.pad(jax.lax.slice_in_dim(q, 0, n - 1, axis=axis), widths)
        edge, at = jax.lax.slice_in_dim(q, n - 1, n, axis=axis), 0
    if not periodic:
        return inner
    return jnp.where(jax.lax.broadcasted_iota(jnp.int32, q.shape, axis) == at, edge, inner)


def _lookup(table: jax.Array, index: jax.Array, chains_last: bool = False) -> jax.Array:
    """``table[index]`` as a chain of selects (fused elementwise; ``index`` in range).

    ``table`` is ``(n,)``, or one row per chain: ``(..., n)`` against ``(..., h, w)``
    indices, ``(chains, n)`` against ``(h, w, chains)`` with ``chains_last``.
    """

    def entry(k):
        return table[..., k] if chains_last else table[..., k : k + 1, None]

    out = jnp.broadcast_to(entry(0), index.shape)
    for k in range(1, table.shape[-1]):
        out = jnp.where(index >= k, entry(k), out)
    return out


def _update_colour(
    layout: LatticeLayout,
    q: jax.Array,
    colour: int | jax.Array,
    k1,
    k2,
    counter,
    table,
    old=None,
    keep=None,
    chains_last: bool = False,
    second: bool = False,
    last: bool | jax.Array = True,
) -> jax.Array:
    """New words of ``colour`` (0 or 1, an int or traced) given the other colour's words ``q``.

    ``q`` is one chain's ``(h, w)`` words, or ``(h, w, chains)`` with ``chains_last``
    (``k1``, ``k2`` then ``(chains,)`` or scalars).  With ``old`` (this colour's words
    before the update) the new words also carry change flags (see :func:`build_sweep`):
    a site's flag is set when its new value differs from its value at the start of the
    step, read from ``old``'s value and, where ``keep`` (``0x0101`` or 0, uint16) keeps
    it, ``old``'s flag.  ``second`` (the colour updated second in a sweep): the new words
    also count the flags of ``q``'s word at the same index (the first colour's, just
    updated), so that the second colour's words alone count the step's changed sites
    (:func:`count_flags`): in the step's ``last`` sweep, bits 1-2 and 9-10 hold each
    byte's own flag plus the first colour's (0-2, a two-bit number); in an earlier sweep
    of the step, bits 1 and 9 hold the own flag (read by the next sweep's ``keep``) and
    bits 2 and 10 the first colour's.
    """
    h, w = q.shape[:2]
    periodic = layout.periodic

    def grid(a):  # an (h, w) array against the words
        return a[..., None] if chains_last else a

    even = colour == 0  # low site reads q[i, j - 1] and high site q[i, j + 1]; the reverse for colour 1

    def pick(if_even, if_odd):  # a Python int colour selects statically: only the reads it needs
        return (if_even if even else if_odd) if isinstance(even, bool) else jnp.where(even, if_even, if_odd)

    def low(x):
        return (x & 1).astype(jnp.uint32)  # _LOW == 0 (a shift by 0 can defeat vectorisation)

    def high(x):
        return ((x >> _HIGH) & 1).astype(jnp.uint32)

    left, right = _shifted(q, -1, 1, periodic), _shifted(q, 1, 1, periodic)
    centre = low(q) + high(q)
    n_low = centre + low(pick(left, right)) + high(_shifted(q, -1, 0, periodic))
    n_high = centre + high(pick(right, left)) + low(_shifted(q, 1, 0, periodic))
    if layout.num_thresholds == 9:  # open spins: index 2n - d + 4 with d neighbours present
        row = grid(jax.lax.broadcasted_iota(jnp.int32, (h, w), 0))
        col = grid(jax.lax.broadcasted_iota(jnp.int32, (h, w), 1))
        has_left, has_right = (col >= 1).astype(jnp.uint32), (col + 1 < w).astype(jnp.uint32)
        d_low = 2 + pick(has_left, has_right) + (row >= 1).astype(jnp.uint32)
        d_high = 2 + pick(has_right, has_left) + (row + 1 < h).astype(jnp.uint32)
        i_low, i_high = 2 * n_low + 4 - d_low, 2 * n_high + 4 - d_high
    else:
        i_low, i_high = n_low, n_high
    site = jax.lax.broadcasted_iota(jnp.uint32, (h, w), 0) * jnp.uint32(w) + jax.lax.broadcasted_iota(jnp.uint32, (h, w), 1)
    u_low, u_high = threefry2x32(k1, k2, jnp.broadcast_to(counter, q.shape), jnp.broadcast_to(grid(site), q.shape))
    up_low = (u_low < _lookup(table, i_low, chains_last)).astype(jnp.uint16)
    up_high = (u_high < _lookup(table, i_high, chains_last)).astype(jnp.uint16)
    new = up_low | (up_high << _HIGH)  # _LOW == 0
    if old is None:
        return new
    start = old if keep is None else old ^ ((old >> _FLAG) & keep)  # the values at the start of the step
    own = (new ^ start) & _VALUES
    if not second:
        return new | (own << _FLAG)
    # the centre word of q, already read for the neighbour counts, carries the first colour's flags
    summed = new | ((own + ((q >> _FLAG) & _VALUES)) << _FLAG)  # one field per byte: the count reads it as it is
    if last is True:
        return summed
    apart = new | (own << _FLAG) | ((q & _FLAGS) << 1)
    return apart if last is False else jnp.where(last, summed, apart)


def build_sweep(
    layout: LatticeLayout,
    num_sweeps: int = 1,
    reverse: bool = False,
    track_changes: bool = False,
    chains_last: bool = False,
    straight: bool = False,
):
    """``sweep(rng_key, even, odd, table) -> (even, odd)``: ``num_sweeps`` checkerboard sweeps of one chain.

    ``even``, ``odd`` are the colours' ``(h, w)`` uint16 words (:meth:`LatticeLayout.pack`),
    ``table`` the thresholds of :meth:`LatticeLayout.thresholds`.  Colour 0 (``r + c``
    even) is updated first, colour 1 first with ``reverse=True``.  Vectorise over
    chains with ``jax.vmap``.

    ``track_changes=True``: the returned words also carry a change flag per site, one
    bit above its value (bits 1 and 9), set when the site's value differs from its
    value in the words passed in, and the colour updated second adds the first
    colour's flags of the word at the same index to its own (bits 1-2 and 9-10 of its
    words then hold 0-2 changed sites per byte, read by :func:`count_flags` with a
    shift and a mask).  The update computes the flags in the same loop
    as the new value (it reads the colour's old words, and the other colour's word,
    at the same index), so counting the changed sites of a step costs one pass over
    the second colour's words (half the lattice's words: 6-10 % of a sweep of 32 or
    256 chains at 64², against 10-22 % when both colours were read) and no copy of
    the old ones.  Every reader of the words masks the value bits, so flagged words
    are valid states; input flags are ignored.

    ``chains_last=True``: ``sweep(...) -> (even, odd, num_changed)`` (``-1`` without
    ``track_changes``: not counted), and under ``jax.vmap`` a batching rule sweeps all chains at once
    on ``(h, w, chains)`` words (:meth:`LatticeGibbsState.with_chains_last`): the
    neighbour reads shift whole rows of chains, and the arithmetic is vectorised along
    the chains, whatever the lattice's width.  JAX hands the rule its words
    chains-first; it moves the chain axis back to the end, which cancels against the
    transpose JAX inserted when the driver vmaps the sweep over a trailing chain axis
    (``in_axes=-1``).  The changed sites are counted inside the rule.  The draws are
    those of the chains-first sweep, bit for bit.

    ``straight=True`` (chains first): the two colours of a sweep as straight-line code
    instead of a loop of half-sweeps, for words a loop carries from step to step
    (:meth:`LatticeGibbsState.as_carried`): a smaller program, traced and compiled in
    about two thirds of the time, with the same draws.
    """
    if layout.height % 2 or layout.width % 2:
        raise ValueError(f"the four-sub-lattice sweep needs an even height and width, got {layout.height}x{layout.width}")
    first = 1 if reverse else 0

    def run(k1, k2, even, odd, table):
        def sweep(i, words, last=False):
            # static colours (only the shifted reads each needs): for words the caller carries on
            i = jnp.asarray(i, jnp.uint32)
            keep = jnp.where(i == 0, jnp.uint16(0), _VALUES) if track_changes else None
            a, b = words
            a = _update_colour(layout, b, first, k1, k2, 2 * i, table, a if track_changes else None, keep, chains_last)
            b = _update_colour(
                layout, a, 1 - first, k1, k2, 2 * i + 1, table, b if track_changes else None, keep, chains_last, True, last
            )
            return a, b

        def half(t, words):
            # half-sweep t: the first colour for even t, the other for odd t, each static in its branch; the
            # counter and the change mask are computed in the branch, where they fuse into the colour's update
            # (outside it, each was an operation of its own per half-sweep)
            def branch(second):
                colour = 1 - first if second else first

                def update(words):
                    keep = jnp.where(t < 2, jnp.uint16(0), _VALUES) if track_changes else None
                    counter = t.astype(jnp.uint32)
                    last = True if num_sweeps == 1 else t == 2 * num_sweeps - 1
                    a, b = words
                    other, old = (a, b) if second else (b, a)
                    old = old if track_changes else None
                    new = _update_colour(layout, other, colour, k1, k2, counter, table, old, keep, chains_last, second, last)
                    return (a, new) if second else (new, b)

                return update

            return jax.lax.switch(t % 2, (branch(False), branch(True)), words)

        start = (even, odd) if first == 0 else (odd, even)
        if chains_last or straight:
            start = start if num_sweeps == 1 else jax.lax.fori_loop(0, num_sweeps - 1, sweep, start)
            a, b = sweep(num_sweeps - 1, start, last=True)
        else:
            a, b = jax.lax.fori_loop(0, 2 * num_sweeps, half, start)
        return (a, b) if first == 0 else (b, a)

    if not chains_last:

        def sweep(rng_key, even, odd, table):
            k1, k2 = key_pair(rng_key)
            return run(k1, k2, even, odd, table)

        return sweep

    def batched(keys, even, odd, table):  # keys (chains, 2); words (chains, h, w); table (n,) or (chains, n)
        even, odd = jnp.moveaxis(even, 0, -1), jnp.moveaxis(odd, 0, -1)
        even, odd = run(keys[:, 0], keys[:, 1], even, odd, table)
        if track_changes:
            changed = byte_sum_leading(_second_flags(odd if first == 0 else even), 2)
        else:  # not counted
            changed = jnp.full(keys.shape[:1], -1, jnp.int32)
        return jnp.moveaxis(even, -1, 0), jnp.moveaxis(odd, -1, 0), changed

    @jax.custom_batching.custom_vmap
    def step(key_data, even, odd, table):
        return tuple(x[0] for x in batched(key_data[None], even[None], odd[None], table))

    @step.def_vmap
    def _batched(axis_size, in_batched, key_data, even, odd, table):
        keys = key_data if in_batched[0] else jnp.broadcast_to(key_data, (axis_size, 2))
        even, odd = (x if b else jnp.broadcast_to(x, (axis_size,) + x.shape) for x, b in zip((even, odd), in_batched[1:3]))
        return batched(keys, even, odd, table), (True, True, True)

    def chain_sweep(rng_key, even, odd, table):
        k1, k2 = key_pair(rng_key)
        return step(jnp.stack([k1, k2]), even, odd, table)

    return chain_sweep


def largest_divisor(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is at most ``cap`` (at least 1): how many rows or pieces to add at once."""
    return max(d for d in range(1, min(cap, n) + 1) if n % d == 0)


def _byte_sum(words: jax.Array, most: int) -> jax.Array:
    """Sum of both bytes of every ``uint16`` word over the last two axes (int32), each byte at most ``most``.

    The flattened words are cut into ``k <= 16`` equal contiguous pieces that are
    added in ``uint16`` without carries between the bytes (SWAR; ``k most <= 255``):
    a reduction over a short outer axis, which XLA fuses with the words' producer
    and vectorises along the pieces, writing ``1/k`` of the words; only those sums
    are widened and reduced.  (Over more than 16 pieces the reduction is rewritten
    into a windowed one that first writes its whole input out again.)
    """
    lead = words.shape[:-2]
    size = words.shape[-2] * words.shape[-1]
    pieces = largest_divisor(size, min(255 // most, 16))
    sums = jnp.sum(words.reshape(lead + (pieces, size // pieces)), axis=-2, dtype=jnp.uint16)  # bytes <= 255
    return jnp.sum((sums & 0xFF).astype(jnp.int32) + (sums >> 8).astype(jnp.int32), axis=-1)


def _row_byte_sum(words: jax.Array, most: int) -> jax.Array:
    """Sum of both bytes of every ``uint16`` word over the last two axes (int32), each byte at most ``most``.

    The two bytes are added (at most ``2 most``), the rows summed in ``uint16`` (in
    groups of rows small enough not to overflow), and only the row sums widened and
    summed over the columns.  Where the words are computed from shifted reads along
    both axes (:func:`pair_and_total`), this runs about 2.5x faster than
    :func:`_byte_sum`'s contiguous pieces, whose reshape across rows XLA does not fuse
    with the row shifts.
    """
    values = (words & 0xFF) + (words >> 8)
    rows, cols = words.shape[-2:]
    group = largest_divisor(rows, 65535 // (2 * most))
    if group < rows:
        values = values.reshape(words.shape[:-2] + (rows // group, group, cols))
    sums = jnp.sum(values, axis=-2, dtype=jnp.uint16)
    return jnp.sum(sums.reshape(words.shape[:-2] + (-1,)).astype(jnp.int32), axis=-1)


def sum_leading(values: jax.Array) -> jax.Array:
    """Sum over all but the last axis, as ``int32``: ``(h, w, chains) -> (chains,)``.

    Flattened to ``(h w, chains)`` and widened before one reduction over the outer axis,
    the form XLA's CPU code vectorises along the chains; a reduction over two axes, or
    narrow partial sums over an outer axis of pieces, ran several times slower.  XLA
    writes the widened values out for a windowed reduction when there are more than 32
    rows: :func:`byte_sum_leading` first adds small groups of rows in narrow lanes.
    """
    return jnp.sum(values.reshape(-1, values.shape[-1]).astype(jnp.int32), axis=0)


def byte_sum_leading(words: jax.Array, most: int) -> jax.Array:
    """Sum of both bytes of every ``uint16`` word over all but the last axis (int32), each byte at most ``most``.

    ``(h, w, chains) -> (chains,)``: rows of chains are first added in groups of up to 16
    consecutive rows in ``uint16`` without carries between the bytes (SWAR; at most
    ``255`` per byte), a reduction over a short middle axis that XLA fuses with the
    words' producer and vectorises along the chains, writing a sixteenth of the
    words; only those sums are widened and reduced by :func:`sum_leading`.
    """
    chains = words.shape[-1]
    rows = words.reshape(-1, chains)
    group = largest_divisor(rows.shape[0], min(255 // most, 16))
    sums = jnp.sum(rows.reshape(-1, group, chains), axis=1, dtype=jnp.uint16)
    return sum_leading((sums & 0xFF) + (sums >> 8))


def count_changed(old: tuple[jax.Array, jax.Array], new: tuple[jax.Array, jax.Array]) -> jax.Array:
    """Number of sites that differ between two ``(even, odd)`` word pairs (int32; reduces the last two axes).

    The two colours' change bits are added word by word (each byte counts at most 2
    changed sites) and summed by byte lanes: one pass over the four arrays with narrow
    arithmetic.
    """
    mask = jnp.uint16((1 << _LOW) | (1 << _HIGH))
    return _byte_sum(((old[0] ^ new[0]) & mask) + ((old[1] ^ new[1]) & mask), 2)


def _second_flags(words: jax.Array) -> jax.Array:
    """The second colour's changed sites of a step per byte (at most 2): its own flag plus the first colour's."""
    return (words >> _FLAG) & np.uint16(0x0303)


def count_flags(even: jax.Array, odd: jax.Array, reverse: bool = False) -> jax.Array:
    """Number of sites a step of ``build_sweep(..., track_changes=True)`` changed (int32; reduces the last 2 axes).

    Read from the words of the colour the sweep updates second (``odd``, or ``even``
    with ``reverse``), which carry their own change flags and a copy of the other
    colour's: one pass over half the words.
    """
    return _byte_sum(_second_flags(even if reverse else odd), 2)


def _bonds_between_words(e: jax.Array, q: jax.Array, rows: int, cols: int, periodic: bool) -> jax.Array:
    """The bonds with both ends up between neighbouring words, one bit per bond in the byte lanes of ``uint16`` words.

    The bonds are A(i, j) - B(i, j - 1), D(i, j) - C(i, j + 1), A(i, j) - C(i - 1, j) and
    D(i, j) - B(i + 1, j).  A sum over the lattice may shift either end of a bond, so each
    direction pairs a word with the previous one along its axis, one bond's ends in each
    byte (C(i, j) - D(i, j - 1), B(i, j) - D(i - 1, j)): one shifted read per direction,
    which XLA's CPU compiler writes out as a padded copy of the words.
    """
    low_bit, high_bit = jnp.uint16(1 << _LOW), jnp.uint16(1 << _HIGH)
    here_h = (e & low_bit) | (q & high_bit)  # A, C
    before_h = (q & low_bit) | (e & high_bit)  # B, D of the word to the left
    here_v = (e & low_bit) | ((q & low_bit) << _HIGH)  # A, B
    before_v = ((q >> _HIGH) & low_bit) | (e & high_bit)  # C, D of the word above
    return (here_h & _shifted(before_h, -1, cols, periodic)) + (here_v & _shifted(before_v, -1, rows, periodic))


def pair_and_total(
    layout: LatticeLayout, even: jax.Array, odd: jax.Array, chains_last: bool = False
) -> tuple[jax.Array, jax.Array]:
    """``(sum_<ij> s_i s_j, sum_i s_i)`` as int32 from the words (reduces the last two axes).

    Every bond joins a site of colour 0 to one of colour 1: the two inside each pair of
    words, and those between neighbouring words (:func:`_bonds_between_words`).  The
    bonds with both ends up (``AND``, at most 4 per byte of a word) and the up sites are
    summed by byte lanes; for spins
    ``s_i s_j = 4 x_i x_j - 2 x_i - 2 x_j + 1`` with ``x = (s + 1) / 2``, so
    ``pair = 4 AND - 2 sum_i deg_i x_i + bonds``.  Reads the two word arrays once
    instead of unpacking the lattice.  On a torus with a side of 2 a pair of sites
    would count twice (``lattice_ising`` refuses it).  ``chains_last``: words
    ``(h, w, chains)``, reduced over the first two axes.
    """
    periodic, e, q = layout.periodic, even, odd
    rows, cols = (0, 1) if chains_last else (-2, -1)
    mask, low_bit = jnp.uint16(0x0101), jnp.uint16(1 << _LOW)
    swapped = (q >> _HIGH) | (q << _HIGH)  # C | B << 8: the other site of the word against A and D
    both = (e & q & mask) + (e & swapped & mask) + _bonds_between_words(e, q, rows, cols, periodic)

    def byte_sum(words, most):
        return sum_leading((words & 0xFF) + (words >> 8)) if chains_last else _row_byte_sum(words, most)

    bonds_up = byte_sum(both, 4)
    ups = byte_sum((e & mask) + (q & mask), 2)
    if not layout.spin:
        return bonds_up, ups
    height, width = layout.height, layout.width
    if periodic:
        degree_ups, bonds = 4 * ups, 2 * height * width
    else:  # an edge site lacks one neighbour per edge: rows 0 (A, B), H - 1 (C, D), columns 0 (A, C), W - 1 (B, D)

        def edge(x, k, axis):  # row or column k of the words, flattened over the sites of that edge
            return jax.lax.index_in_dim(x, k, axis=axis % x.ndim, keepdims=False)

        def edge_sum(values):  # summed over the edge's sites (the axis left of rows and columns)
            return sum_leading(values) if chains_last else jnp.sum(values.astype(jnp.int32), axis=-1)

        row_first = edge_sum((edge(e, 0, rows) & low_bit) + (edge(q, 0, rows) & low_bit))
        row_last = edge_sum(((edge(e, -1, rows) >> _HIGH) & 1) + ((edge(q, -1, rows) >> _HIGH) & 1))
        col_first = edge_sum((edge(e, 0, cols) & low_bit) + ((edge(q, 0, cols) >> _HIGH) & 1))
        col_last = edge_sum((edge(q, -1, cols) & low_bit) + ((edge(e, -1, cols) >> _HIGH) & 1))
        degree_ups = 4 * ups - row_first - row_last - col_first - col_last
        bonds = height * (width - 1) + width * (height - 1)
    return 4 * bonds_up - 2 * degree_ups + bonds, 2 * ups - height * width


class LatticeGibbsState(NamedTuple):
    """State of one block-Gibbs chain of a lattice Ising model in the four-sub-lattice layout.

    even, odd
        The two colours' ``(H/2, W/2)`` uint16 words (see the module docstring).
    position
        ``{"s": (H, W)}`` in the model's dtype, unpacked from the words when read.
    """

    even: jax.Array
    odd: jax.Array

    #: the batched layout of this state type: ``False`` for ``(chains, H/2, W/2)`` words, ``True`` for
    #: ``(H/2, W/2, chains)`` (see :meth:`with_chains_last`)
    chains_last = False
    #: ``True`` for chains-first words that a driver's loop carries from step to step (:meth:`as_carried`)
    carried = False
    #: ``False`` for words whose steps need not count the changed sites (:meth:`without_counts`)
    counts_changes = True

    @property
    def position(self) -> dict:
        layout = type(self).layout
        return {layout.name: _compiled_unpack(layout)(self.even, self.odd)}

    @classmethod
    def with_chains_last(cls, states: LatticeGibbsState) -> LatticeGibbsState:
        """Batched states ``(chains, h, w)`` -> the same chains as ``(h, w, chains)`` words.

        The layout the sweep of many chains runs fastest on (:func:`build_sweep` with
        ``chains_last``).  A driver that keeps its chains this way steps them with
        ``jax.vmap(step, in_axes=(0, -1), out_axes=(-1, 0))`` and converts back with
        :meth:`with_chains_first` (one transpose each way).
        """
        other = state_type(cls.layout, chains_last=True, counts=cls.counts_changes)
        return other(*(jnp.moveaxis(x, 0, -1) for x in states))

    @classmethod
    def as_carried(cls, states: LatticeGibbsState) -> LatticeGibbsState:
        """The same chains-first words, marked as a loop's carry (few chains; nothing is moved).

        The kernel then sweeps them with the colours as straight-line code
        (:func:`build_sweep` with ``straight``), which only a loop carry makes safe: a
        lone step whose words flow straight into another reader would have the first
        colour's update recomputed by each of its readers.  :meth:`with_chains_first`
        converts back.
        """
        return state_type(cls.layout, carried=True, counts=cls.counts_changes)(*states)

    @classmethod
    def without_counts(cls, states: LatticeGibbsState) -> LatticeGibbsState:
        """The same words (in the same batched layout), marked as not needing the changed sites counted.

        For a driver whose recorded values do not read the step's info: the kernel then
        sweeps them without change flags (:func:`build_sweep` with ``track_changes=False``),
        as the plain sweep does, and reports ``num_changed = -1`` (not counted).  The draws
        are the same.  :meth:`with_chains_first` converts back.
        """
        return state_type(cls.layout, cls.chains_last, cls.carried, counts=False)(*states)

    @classmethod
    def with_chains_first(cls, states: LatticeGibbsState) -> LatticeGibbsState:
        """Inverse of :meth:`with_chains_last`, :meth:`as_carried` and :meth:`without_counts`.

        A no-op for plain chains-first states.
        """
        plain = state_type(cls.layout)
        if cls.chains_last:
            return plain(*(jnp.moveaxis(x, -1, 0) for x in states))
        return states if cls is plain else plain(*states)


@functools.lru_cache(maxsize=64)
def _compiled_unpack(layout: LatticeLayout) -> Callable:
    """``layout.unpack`` compiled: read outside ``jit``, the state is unpacked without full-size temporaries."""
    return jax.jit(layout.unpack)


_STATE_TYPES: dict[tuple[LatticeLayout, bool, bool, bool], type] = {}


def state_type(layout: LatticeLayout, chains_last: bool = False, carried: bool = False, counts: bool = True) -> type:
    """The :class:`LatticeGibbsState` subclass of ``layout``, batched layout and counting (one class each: equal pytrees)."""
    key = (layout, bool(chains_last), bool(carried) and not chains_last, bool(counts))
    cls = _STATE_TYPES.get(key)
    if cls is None:
        attrs = {"layout": layout, "chains_last": key[1], "carried": key[2], "counts_changes": key[3], "__slots__": ()}
        cls = type("LatticeGibbsState", (LatticeGibbsState,), attrs)
        _STATE_TYPES[key] = cls
    return cls


class LatticeLogDensity(SiteLogitsLogDensity):
    """The log-density ``-beta E(J, h, s)`` of a lattice Ising model, carrying ``J``, ``h`` and ``beta``.

    Returned by ``ui.models.lattice_ising(...).logdensity_fn``.  It evaluates and gives
    site logits like any :class:`~ugm_infer.kernels.SiteLogitsLogDensity`; the
    block-Gibbs kernel reads ``J``, ``h``, ``beta``, ``structure`` (height, width,
    periodic, domain) and ``name`` (the variable) to run the four-sub-lattice sweep.  :meth:`tempered` keeps all of
    it (``beta`` multiplied), so parallel tempering and tempered transitions stay on
    the fast path.
    """

    def __init__(self, fn: Callable, site_logits: Callable, J: Any, h: Any, beta: Any, structure: tuple, name: str = "s"):
        super().__init__(fn, site_logits)
        self.J, self.h, self.beta, self.structure, self.name = J, h, beta, structure, name

    def tempered(self, beta: Any) -> LatticeLogDensity:
        """``x -> beta * self(x)``: the same lattice at inverse temperature ``beta * self.beta``."""
        base = super().tempered(beta)
        return LatticeLogDensity(base, base.site_logits, self.J, self.h, beta * self.beta, self.structure, self.name)

    def layout(self, position_dtype: Any) -> LatticeLayout | None:
        """The :class:`LatticeLayout` for positions of ``position_dtype`` (``None`` for odd sizes)."""
        height, width, periodic, domain = self.structure
        if height % 2 or width % 2:
            return None
        return LatticeLayout(height, width, periodic, domain, np.dtype(position_dtype).name, self.name)
