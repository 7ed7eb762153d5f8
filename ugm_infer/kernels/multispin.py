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
   differ.  The planes are drawn in a ``lax.while_loop`` that stops when every lane of
   the colour is decided (after at most 32 planes; a lane with ``U == T`` is "not
   less").  So ``P(up) = T_n / 2^32`` exactly: the comparison is as exact as comparing
   32-bit integers, finer than a float32 uniform (24 bits), and only about
   ``log2(#lanes) + 2`` random words per site are drawn instead of 32 uniforms.

Only the random planes of one colour (half the sites) are drawn per half-sweep.
Restricted to periodic lattices with even height and width (the two-colour
checkerboard; every site has 4 neighbours).

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

__all__ = ["pack", "unpack", "build_sweep", "check_lattice"]

LANES = 32
_ONES = np.uint32(0xFFFFFFFF)


def check_lattice(model) -> None:
    """Raise unless ``model`` is a periodic ``lattice_ising`` with even sizes."""
    from ugm_infer.models.lattice import LatticeIsing

    if not isinstance(model, LatticeIsing):
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
    p = jax.nn.sigmoid(logit.astype(jnp.float32))
    # split into two 16-bit halves so the fixed-point value is exact for the float32 p
    scaled = p * 65536.0
    hi = jnp.floor(scaled)
    lo = jnp.round((scaled - hi) * 65536.0)
    t = hi.astype(jnp.uint32) * jnp.uint32(65536) + jnp.minimum(lo, 65535.0).astype(jnp.uint32)
    return jnp.where(p >= 1.0, jnp.uint32(_ONES), t)


def _neighbour_count(s):
    """Bit-sliced number of up neighbours (three planes ``(c0, c1, c2)``, n = c0 + 2 c1 + 4 c2)."""
    a, b = jnp.roll(s, 1, axis=-1), jnp.roll(s, -1, axis=-1)
    c, d = jnp.roll(s, 1, axis=-2), jnp.roll(s, -1, axis=-2)
    ab, cd = a ^ b, c ^ d
    carry_ab, carry_cd = a & b, c & d
    c0 = ab ^ cd
    carry = ab & cd
    c1 = carry_ab ^ carry_cd ^ carry
    c2 = (carry_ab & carry_cd) | (carry_ab & carry) | (carry_cd & carry)
    return c0, c1, c2


def _colour_masks(height: int, width: int) -> np.ndarray:
    parity = np.add.outer(np.arange(height), np.arange(width)) % 2
    return np.stack([np.where(parity == c, _ONES, np.uint32(0)) for c in (0, 1)]).astype(np.uint32)


def build_sweep(model, early_exit: bool = True, planes_per_draw: int = 1):
    """One bit-packed checkerboard sweep for a periodic :func:`~ugm_infer.models.lattice_ising`.

    Returns ``sweep(rng_key, words, params, beta=1.0) -> (words, num_planes)`` acting
    on ``(groups, H, W)`` uint32 words (:func:`pack`), 32 chains per group;
    ``num_planes`` is the number of random planes the two colours drew (at most 64).
    ``early_exit=False`` always draws all 32 planes per colour (a fixed-length loop: no
    device-side loop condition, which can be cheaper on a GPU; the same distribution).
    ``planes_per_draw`` (a divisor of 32) random planes are drawn per loop iteration:
    fewer, larger draws and iterations at the price of up to ``planes_per_draw - 1``
    planes beyond the last one needed.
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
    chunk = int(planes_per_draw)
    spin = model.domain == "spin"
    height, width = model.height, model.width
    masks = jnp.asarray(_colour_masks(height, width))
    bit_positions = jnp.arange(31, -1, -1, dtype=jnp.uint32)

    def half(key, s, colour, table):
        c0, c1, c2 = _neighbour_count(s)
        eq = (
            ~c0 & ~c1 & ~c2,  # n = 0
            c0 & ~c1 & ~c2,
            ~c0 & c1,  # n = 2 (c2 = 0 whenever c1 = 1)
            c0 & c1,
            c2,  # n = 4
        )
        groups = s.shape[0]

        def cond(carry):
            j, _, undecided = carry
            return (j < LANES) & jnp.any(undecided != 0)

        def body(carry):
            j, less, undecided = carry
            # planes j .. j + chunk - 1: one random bit per lane each, drawn for the
            # colour's half of the sites only
            planes = jax.random.bits(jax.random.fold_in(key, j), (chunk, groups, height, width // 2), jnp.uint32)
            for i in range(chunk):
                r = jnp.repeat(planes[i], 2, axis=-1)
                bits = (table >> bit_positions[j + i]) & jnp.uint32(1)  # bit j + i (MSB first) of each T_n
                t = jnp.zeros_like(s)
                for k in range(5):
                    t = t | (eq[k] & (jnp.uint32(0) - bits[k]))
                less = less | (undecided & ~r & t)
                undecided = undecided & ~(r ^ t)
            return j + chunk, less, undecided

        undecided0 = jnp.broadcast_to(masks[colour], s.shape)
        init = (jnp.int32(0), jnp.zeros_like(s), undecided0)
        if early_exit:
            j, less, _ = jax.lax.while_loop(cond, body, init)
        else:
            j, less, _ = jax.lax.fori_loop(0, LANES // chunk, lambda _, carry: body(carry), init)
        return (s & ~masks[colour]) | (less & masks[colour]), j

    def sweep(rng_key, words, params, beta=1.0):
        table = _thresholds(params["J"], params["h"], beta, spin)
        k0, k1 = jax.random.split(rng_key)
        words, n0 = half(k0, words, 0, table)
        words, n1 = half(k1, words, 1, table)
        return words, n0 + n1

    return sweep
