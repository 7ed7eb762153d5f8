"""Multi-spin-coded (bit-packed) checkerboard heat bath for the periodic lattice Ising model.

Thirty-two independent chains share one ``uint32`` word per site: bit ``k`` of word
``(g, r, c)`` is site ``(r, c)`` of chain ``32 g + k`` (1 = up / +1 for spins, 1 for
binary).  A checkerboard sweep updates all 32 chains of a site with word-wide logic
(multi-spin coding, Jacobs and Rebbi 1981; Bhanot, Duke and Salvador 1986):

1. the number of up neighbours ``n in {0, ..., 4}`` of every site is added up
   bit-sliced (a carry-save adder of the four neighbour words: three bit planes);
2. the heat-bath probability of up depends on ``n`` only,
   ``p_n = sigmoid(2 beta (J (2 n - 4) + h))`` for spins and
   ``sigmoid(beta (J n + h))`` for binary sites, a table of five thresholds
   ``T_n = p_n`` rounded to 32-bit fixed point;
3. each lane compares a uniform 32-bit integer ``U`` with its threshold, ``up = U <
   T_n``, bit-sliced from the most significant bit down: plane ``j`` is one random
   word per site, and a lane is decided at the first bit where ``U`` and ``T``
   differ.  By default 7 planes are drawn for every site of the colour; the few
   lanes still undecided (probability 1/128 each) are then finished one per word
   per round, each with the remaining 25 bits of ``U`` drawn as one fresh random word
   (see :func:`build_sweep`: about 12 random words per site in all).  Alternatively
   (``tail_after=None``) planes are drawn in a ``lax.while_loop`` until every lane
   of the colour is decided (at most 32 planes; about ``log2(#lanes) + 2``).  Either
   way ``P(up) = T_n / 2^32`` exactly (a lane with ``U == T`` is "not less"): the
   comparison is as exact as comparing 32-bit integers, finer than a float32
   uniform (24 bits).

The sweep works on the two colours stored apart, ``(groups, H, W / 2)`` each
(``_split_colours``), so each half-sweep computes and draws for the sites it updates
only.  Restricted to periodic lattices with even height and width (the two-colour
checkerboard; every site has 4 neighbours).  :func:`energy` gives every packed
chain's energy from per-lane bit counts (:func:`lane_counts`), which
:func:`ugm_infer.smc.multispin_ais` uses for annealed importance sampling.

References
----------
Jacobs, L. and Rebbi, C. (1981). Multi-spin coding: a very efficient technique for
Monte Carlo simulations of spin systems. J. Comput. Phys. 41, 203-210.
Bhanot, G., Duke, D. and Salvador, R. (1986). A fast algorithm for the Cray 1 and
multispin coding of the Ising model. J. Stat. Phys. 44, 985-1002.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.kernels.checkerboard import key_pair, probability_thresholds, threefry2x32

__all__ = ["pack", "unpack", "build_sweep", "build_chain_kernel", "check_lattice", "lane_counts", "energy"]

LANES = 32
_ONES = np.uint32(0xFFFFFFFF)
_COUNT_CHUNK = 128  # sites summed per byte counter in lane_counts (< 256: no carry between bytes)


def check_lattice(model) -> None:
    """Raise unless ``model`` is a periodic ``lattice_ising`` with even sizes."""
    if not getattr(model, "is_uniform_lattice_ising", False):  # ui.models.LatticeIsing
        raise TypeError(f"`model` must be a ui.models.lattice_ising(...) model, got {type(model).__name__}")
    if not model.periodic or model.height % 2 or model.width % 2 or model.height < 4 or model.width < 4:
        raise ValueError(
            "the multi-spin kernel needs a periodic lattice with even height and width >= 4, got "
            f"{model.height}x{model.width} {'periodic' if model.periodic else 'open'}"
        )


def pack(states: jax.Array, domain: str = "spin") -> jax.Array:
    """Pack ``(chains, H, W)`` spin/binary states into ``(ceil(chains / 32), H, W)`` uint32 words.

    Chain ``32 g + k`` is bit ``k`` of group ``g``; missing chains of the last group are
    filled with down spins (and should be ignored by :func:`unpack`'s ``num_chains``).
    """
    if domain not in ("spin", "binary"):
        raise ValueError(f"`domain` must be 'spin' or 'binary', got {domain!r}")
    x = jnp.asarray(states)
    if x.ndim != 3:
        raise ValueError(f"`states` must have shape (chains, height, width), got {x.shape}")
    up = (x > 0).astype(jnp.uint32)
    pad = (-x.shape[0]) % LANES
    up = jnp.concatenate([up, jnp.zeros((pad,) + x.shape[1:], jnp.uint32)]) if pad else up
    up = up.reshape((-1, LANES) + x.shape[1:])
    shifts = jnp.arange(LANES, dtype=jnp.uint32).reshape((1, LANES, 1, 1))
    return jnp.sum(up << shifts, axis=1, dtype=jnp.uint32)


def unpack(words: jax.Array, num_chains: int, domain: str = "spin", dtype: Any = jnp.float32) -> jax.Array:
    """Inverse of :func:`pack`: ``(num_chains, H, W)`` states in ``{-1, +1}`` or ``{0, 1}``."""
    if domain not in ("spin", "binary"):
        raise ValueError(f"`domain` must be 'spin' or 'binary', got {domain!r}")
    w = jnp.asarray(words, jnp.uint32)
    shifts = jnp.arange(LANES, dtype=jnp.uint32).reshape((1, LANES, 1, 1))
    bits = ((w[:, None] >> shifts) & jnp.uint32(1)).reshape((-1,) + w.shape[1:])[:num_chains]
    return (2 * bits.astype(jnp.int32) - 1).astype(dtype) if domain == "spin" else bits.astype(dtype)


def _thresholds(J, h, beta, spin: bool) -> jax.Array:
    """``T_n = round(p_n 2^32)`` (clipped to [0, 2^32 - 1]) for ``n = 0..4`` up neighbours, uint32."""
    n = jnp.arange(5, dtype=jnp.float32)
    logit = 2.0 * beta * (J * (2.0 * n - 4.0) + h) if spin else beta * (J * n + h)
    return probability_thresholds(jax.nn.sigmoid(logit.astype(jnp.float32)))


def _random_words(key, stream, count: int, shape: tuple) -> jax.Array:
    """``count`` independent uniform ``uint32`` words per entry of ``shape``: ``(count,) + shape``.

    Threefry-2x32 with the key's data and counters ``(stream, pair * size + entry)``,
    written elementwise (:func:`ugm_infer.kernels.checkerboard.threefry2x32`) so XLA
    fuses it with the bit logic; each evaluation gives two words.
    """
    k1, k2 = key_pair(key)
    size = int(np.prod(shape, dtype=np.int64))
    pairs = -(-count // 2)
    entry = jax.lax.iota(jnp.uint32, size).reshape(shape)
    words = []
    for p in range(pairs):
        a, b = threefry2x32(k1, k2, jnp.asarray(stream, jnp.uint32), entry + jnp.uint32(p * size))
        words += [a, b]
    return jnp.stack(words[:count])


def _count_planes(a, b, c, d):
    """Bit-sliced sum of four neighbour words: planes ``(c0, c1, c2)``, n = c0 + 2 c1 + 4 c2."""
    ab, cd = a ^ b, c ^ d
    carry_ab, carry_cd = a & b, c & d
    c0 = ab ^ cd
    carry = ab & cd
    c1 = carry_ab ^ carry_cd ^ carry
    c2 = (carry_ab & carry_cd) | (carry_ab & carry) | (carry_cd & carry)
    return c0, c1, c2


def _neighbour_count(s):
    """Bit-sliced number of up neighbours of every site of ``(groups, H, W)`` words."""
    return _count_planes(
        jnp.roll(s, 1, axis=-1), jnp.roll(s, -1, axis=-1), jnp.roll(s, 1, axis=-2), jnp.roll(s, -1, axis=-2)
    )


def _split_colours(words, odd_rows):
    """``(groups, H, W)`` -> the two checkerboard colours, ``(groups, H, W / 2)`` each.

    Colour 0 (``(r + c)`` even) of row ``r`` sits at columns ``2 j + r % 2``, colour 1 at
    ``2 j + 1 - r % 2``; entry ``(r, j)`` of a colour array is its ``j``-th site in row ``r``.
    """
    even_cols, odd_cols = words[..., 0::2], words[..., 1::2]
    return jnp.where(odd_rows, odd_cols, even_cols), jnp.where(odd_rows, even_cols, odd_cols)


def _merge_colours(colour0, colour1, odd_rows):
    even_cols = jnp.where(odd_rows, colour1, colour0)
    odd_cols = jnp.where(odd_rows, colour0, colour1)
    return jnp.stack([even_cols, odd_cols], axis=-1).reshape(colour0.shape[:-1] + (2 * colour0.shape[-1],))


def _colour_neighbours(other, odd_rows, colour: int):
    """The four neighbour words of every site of one colour, read from the other colour's array.

    Up and down are ``other[r -/+ 1, j]``, one side is ``other[r, j]``, and the other side
    is ``other[r, j - 1]`` or ``other[r, j + 1]`` depending on the colour and the row's
    parity (colour 0: ``j - 1`` on even rows; colour 1: ``j + 1`` on even rows).
    """
    left, right = jnp.roll(other, 1, axis=-1), jnp.roll(other, -1, axis=-1)
    if colour == 0:
        side = jnp.where(odd_rows, right, left)
    else:
        side = jnp.where(odd_rows, left, right)
    return jnp.roll(other, 1, axis=-2), jnp.roll(other, -1, axis=-2), other, side


def build_sweep(model, early_exit: bool = True, planes_per_draw: int = 1, tail_after: int | None = 7):
    # Long because the half-sweep and its plane loops are nested closures over the checked options.
    """One bit-packed checkerboard sweep for a periodic :func:`~ugm_infer.models.lattice_ising`.

    Returns ``sweep(rng_key, words, params, beta=1.0) -> (words, num_planes)`` acting
    on ``(groups, H, W)`` uint32 words (:func:`pack`), 32 chains per group;
    ``num_planes`` is the number of random words per site the two colours drew.

    By default (``early_exit=True``, ``tail_after=7``) each colour draws 7 random planes
    for all its lanes; a lane still undecided then (its ``U`` agrees with its threshold
    in the top 7 bits, probability 1/128) is finished on its own: in each further
    round every word takes one fresh random word and decides its lowest undecided lane
    by comparing the remaining 25 bits of ``U`` (taken from that word) with the
    threshold's, until no word has an undecided lane (about 4-6 rounds; the chance
    that a word holds ``k`` undecided lanes falls like ``128^-k``).  So about 12 random
    words per site instead of ``log2(#lanes) + 2`` (about 20) for the plane-by-plane
    loop (``tail_after=None``), with the same comparison ``U < T_n`` of a 32-bit
    uniform.  ``early_exit=False`` always draws all 32 planes per colour (a
    fixed-length loop: no device-side loop condition, which can be cheaper on a GPU;
    the same distribution; ``tail_after`` is then ignored).  ``planes_per_draw`` (a
    divisor of 32) planes are drawn per iteration of the plane loops: fewer, larger
    draws at the price of up to ``planes_per_draw - 1`` planes beyond the last one
    needed.
    The same transition as ``ui.kernels.gibbs.build_kernel(model, "block")`` on each of
    the 32 chains of a word (up to the threshold rounding of ``2^-32``), and the chains
    are independent.
    """
    check_lattice(model)
    if not isinstance(early_exit, (bool, np.bool_)):
        raise TypeError(f"`early_exit` must be True or False, got {early_exit!r}")
    if isinstance(planes_per_draw, bool) or not isinstance(planes_per_draw, (int, np.integer)) or planes_per_draw < 1:
        raise ValueError(f"`planes_per_draw` must be a positive int dividing 32, got {planes_per_draw!r}")
    if LANES % planes_per_draw:
        raise ValueError(f"`planes_per_draw` must divide 32, got {planes_per_draw}")
    if tail_after is not None and (
        isinstance(tail_after, bool) or not isinstance(tail_after, (int, np.integer)) or not 1 <= tail_after <= 31
    ):
        raise ValueError(f"`tail_after` must be None or an int in [1, 31], got {tail_after!r}")
    chunk = int(planes_per_draw)
    spin = model.domain == "spin"
    odd_rows = jnp.asarray((np.arange(model.height) % 2 == 1)[:, None])
    bit_positions = jnp.arange(31, -1, -1, dtype=jnp.uint32)

    def half(key, other, colour, table):
        """New words of one colour (``(groups, H, W / 2)``) given the other colour's words."""
        c0, c1, c2 = _count_planes(*_colour_neighbours(other, odd_rows, colour))
        eq = (
            ~c0 & ~c1 & ~c2,  # n = 0
            c0 & ~c1 & ~c2,
            ~c0 & c1,  # n = 2 (c2 = 0 whenever c1 = 1)
            c0 & c1,
            c2,  # n = 4
        )
        shape = other.shape

        def cond(carry):
            j, _, undecided = carry
            return (j < LANES) & jnp.any(undecided != 0)

        def body(carry):
            j, less, undecided = carry
            # planes j .. j + chunk - 1: one random bit per lane each
            planes = _random_words(key, j, chunk, shape)
            for i in range(chunk):
                r = planes[i]
                bits = (table >> bit_positions[j + i]) & jnp.uint32(1)  # bit j + i (MSB first) of each T_n
                t = jnp.zeros_like(r)
                for k in range(5):
                    t = t | (eq[k] & (jnp.uint32(0) - bits[k]))
                less = less | (undecided & ~r & t)
                undecided = undecided & ~(r ^ t)
            return j + chunk, less, undecided

        init = (jnp.int32(0), jnp.zeros(shape, jnp.uint32), jnp.full(shape, _ONES, jnp.uint32))
        if early_exit and tail_after is not None:
            return _tail(key, shape, table, eq, body_planes=int(tail_after))
        if early_exit:
            j, less, _ = jax.lax.while_loop(cond, body, init)
        else:
            j, less, _ = jax.lax.fori_loop(0, LANES // chunk, lambda _, carry: body(carry), init)
        return less, j

    def _tail(key, shape, table, eq, body_planes):
        """``body_planes`` planes for every lane, then one undecided lane per word per round."""
        planes = _random_words(key, 0, body_planes, shape)
        less = jnp.zeros(shape, jnp.uint32)
        undecided = jnp.full(shape, _ONES, jnp.uint32)
        for i in range(body_planes):
            bits = (table >> bit_positions[i]) & jnp.uint32(1)
            t = jnp.zeros(shape, jnp.uint32)
            for k in range(5):
                t = t | (eq[k] & (jnp.uint32(0) - bits[k]))
            less = less | (undecided & ~planes[i] & t)
            undecided = undecided & ~(planes[i] ^ t)
        low_mask = jnp.uint32((1 << (32 - body_planes)) - 1)
        table_low = table & low_mask

        def cond(carry):
            _, _, undecided = carry
            return jnp.any(undecided != 0)

        def body(carry):
            j, less, undecided = carry
            lane = undecided & (jnp.uint32(0) - undecided)  # lowest undecided lane of each word (0 if none)
            t_low = jnp.zeros(shape, jnp.uint32)
            for k in range(5):
                t_low = t_low + jnp.where((eq[k] & lane) != 0, table_low[k], jnp.uint32(0))
            u_low = _random_words(key, j + 1, 1, shape)[0] & low_mask
            less = less | jnp.where(u_low < t_low, lane, jnp.uint32(0))
            return j + 1, less, undecided & ~lane

        rounds, less, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), less, undecided))
        return less, rounds + body_planes

    def sweep(rng_key, words, params, beta=1.0):
        table = _thresholds(params["J"], params["h"], beta, spin)
        k0, k1 = split_key(rng_key)
        colour0, colour1 = _split_colours(words, odd_rows)
        colour0, n0 = half(k0, colour1, 0, table)
        colour1, n1 = half(k1, colour0, 1, table)
        return _merge_colours(colour0, colour1, odd_rows), n0 + n1

    return sweep


def lane_counts(words: jax.Array) -> jax.Array:
    """Number of set bits of every lane summed over the sites: ``(groups, 32)`` int32.

    ``words`` has shape ``(groups, ...)``; entry ``(g, k)`` counts the sites whose bit
    ``k`` is set in group ``g``, i.e. a per-chain population count.  Counted SWAR-style
    (SIMD within a register): ``(w >> j) & 0x01010101`` holds the bits of lanes ``j``,
    ``j + 8``, ``j + 16``, ``j + 24`` in separate bytes, so summing it over up to 255
    sites counts four lanes at once without carries between bytes; eight shifts per
    word instead of 32.
    """
    w = jnp.asarray(words, jnp.uint32)
    w = w.reshape(w.shape[0], -1)
    pad = (-w.shape[1]) % _COUNT_CHUNK
    if pad:
        w = jnp.concatenate([w, jnp.zeros((w.shape[0], pad), jnp.uint32)], axis=1)
    w = w.reshape(w.shape[0], -1, _COUNT_CHUNK)
    shifts = jnp.arange(8, dtype=jnp.uint32)
    byte_sums = jnp.sum((w[..., None] >> shifts) & jnp.uint32(0x01010101), axis=2, dtype=jnp.uint32)
    per_lane = (byte_sums[..., None] >> (8 * jnp.arange(4, dtype=jnp.uint32))) & jnp.uint32(0xFF)
    counts = jnp.sum(per_lane.astype(jnp.int32), axis=1)  # (groups, j, byte): lane j + 8 * byte
    return jnp.swapaxes(counts, 1, 2).reshape(w.shape[0], LANES)


def energy(words: jax.Array, params: Any, domain: str = "spin") -> jax.Array:
    r"""Energy of every packed chain of a periodic lattice Ising model, ``(groups * 32,)`` float32.

    :math:`E = -J \sum_{\langle ij \rangle} s_i s_j - h \sum_i s_i` as
    ``ui.models.lattice_ising`` defines it, from bond and site counts of the packed
    words: for spins ``s_i s_j = 1 - 2 (b_i \oplus b_j)`` and ``s_i = 2 b_i - 1``; for
    binary sites the products are ``b_i \wedge b_j``.  The counts are exact integers;
    chains ``32 g + k`` follow the layout of :func:`pack` (including any padding chains).
    """
    if domain not in ("spin", "binary"):
        raise ValueError(f"`domain` must be 'spin' or 'binary', got {domain!r}")
    w = jnp.asarray(words, jnp.uint32)
    right, down = jnp.roll(w, -1, axis=-1), jnp.roll(w, -1, axis=-2)
    num_sites = w.shape[-1] * w.shape[-2]
    up = lane_counts(w).astype(jnp.float32)
    J = jnp.asarray(params["J"], jnp.float32)
    h = jnp.asarray(params["h"], jnp.float32)
    if domain == "spin":
        disagree = lane_counts(jnp.concatenate([w ^ right, w ^ down], axis=-1)).astype(jnp.float32)
        e = -J * (2.0 * num_sites - 2.0 * disagree) - h * (2.0 * up - num_sites)
    else:
        both = lane_counts(jnp.concatenate([w & right, w & down], axis=-1)).astype(jnp.float32)
        e = -J * both - h * up
    return e.reshape(-1)


def build_chain_kernel(model, num_sweeps: int = 1):
    """The bit-packed sweep as a one-chain step ``step(rng_key, spins, J, h, beta) -> spins``.

    ``spins`` is one chain's ``(H, W)`` state (the model's values and dtype).  Applied
    to one chain it packs the chain into one lane of a word.  Under ``jax.vmap`` over
    chains (``ui.sample``, learners, SMC) a batching rule packs the whole batch, 32
    chains per word, runs ``num_sweeps`` sweeps and unpacks, so the chains share the
    word-wide logic; the packed sweeps draw from one key made from all the chains' keys
    (so a chain's draws depend on the whole batch, not on its own key alone).  When
    ``J``, ``h`` or ``beta`` differ between chains (parallel tempering's replicas) the
    chains are run one by one.  Used by ``ui.kernels.gibbs(..., method="multispin")``.
    """
    check_lattice(model)
    sweep = build_sweep(model)
    domain = model.domain

    def packed(key_data, spins, J, h, beta):
        """``num_sweeps`` sweeps of ``(N, H, W)`` chains packed into words."""
        words = pack(spins, domain)
        params = {"J": J, "h": h}

        def body(i, words):
            key = fold_in_key(jax.random.wrap_key_data(key_data), i)
            return sweep(key, words, params, beta)[0]

        words = jax.lax.fori_loop(0, num_sweeps, body, words)
        return unpack(words, spins.shape[0], domain, spins.dtype)

    @jax.custom_batching.custom_vmap
    def step(key_data, spins, J, h, beta):
        return packed(key_data, spins[None], J, h, beta)[0]

    @step.def_vmap
    def _batched(axis_size, in_batched, key_data, spins, J, h, beta):
        key_batched, spins_batched, *target_batched = in_batched
        if any(target_batched):  # one table per word: chains with different targets run one by one
            args = [
                x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
                for x, b in zip((key_data, spins, J, h, beta), in_batched)
            ]
            return jax.lax.map(lambda a: step(*a), tuple(args)), True
        if key_batched:  # one key for the packed words, made from every chain's key
            key_data = jax.lax.reduce(key_data, jnp.uint32(0), jax.lax.bitwise_xor, (0,))
        if not spins_batched:
            spins = jnp.broadcast_to(spins, (axis_size,) + spins.shape)
        return packed(key_data, spins, J, h, beta), True

    def chain_step(rng_key, spins, J, h, beta):
        k1, k2 = key_pair(rng_key)
        key_data = jnp.stack([k1, k2])
        return step(
            key_data, spins, jnp.asarray(J, jnp.float32), jnp.asarray(h, jnp.float32), jnp.asarray(beta, jnp.float32)
        )

    return chain_step
