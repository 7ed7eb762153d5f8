"""Hand-written plain-JAX samplers: the baselines the benchmarks compare ugm_infer with.

Each is what a JAX user who knows the trick would write without the library; none
imports ``ugm_infer``.

Lattice Ising (periodic ``L x L``, ``L`` even, spins, uniform ``J``, ``h``), all taking
and returning the four sub-lattices ``A = (2i, 2j)``, ``B = (2i, 2j+1)``, ``C = (2i+1, 2j)``,
``D = (2i+1, 2j+1)`` in the variant's own storage, with ``run(key, state) -> state``
doing ``num_sweeps`` sweeps of all chains in one jitted call:

``subl_uniform_sweep``
    the four sub-lattices as int8 arrays ``(chains, L/2, L/2)``, one
    ``jax.random.uniform`` per updated site compared with ``sigmoid(2 (J nb + h))``,
    the colour ``{A, D}`` then ``{B, C}`` from ``jnp.roll`` neighbour sums, and the chains
    processed in groups of ``group`` with ``lax.map`` (each group runs all its sweeps
    while it stays in cache).
``packed_sweep``
    the fastest form found: each colour stored as one ``uint16`` word per pair of
    sites (``A`` and ``D`` in bits 0 and 8; ``B`` and ``C``), one Threefry-2x32 hash per
    pair written with ``jax.numpy`` so that XLA fuses it with the neighbour count (both
    output words used), the heat-bath probability of each neighbour count turned into a
    32-bit integer threshold once per call (no ``exp``, no float uniform), shifted
    reads as padded slices with the wrapped edge selected in (fused, unlike
    ``jnp.roll``), and both colours of a sweep in one ``lax.scan`` step.

Every baseline is compiled by :func:`jit`: ``jax.jit`` with 512-bit vector code on a
CPU with AVX-512 (``compiler_options={"xla_cpu_prefer_vector_width": 512}``), the
setting ugm_infer's drivers use there, so that both sides get the best code XLA makes
(``UGM_INFER_CPU_VECTOR_WIDTH`` sets the width for both).
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np


def _vector_width() -> int | None:
    value = os.environ.get("UGM_INFER_CPU_VECTOR_WIDTH", "").strip()
    if value:
        return int(value)
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    return 512 if "avx512f" in flags else None


def jit(fn, **kwargs):
    """``jax.jit`` with the preferred CPU vector width (512 bits with AVX-512; XLA's default otherwise)."""
    width = _vector_width() if jax.default_backend() == "cpu" else None
    if width is None:
        return jax.jit(fn, **kwargs)
    return jax.jit(fn, compiler_options={"xla_cpu_prefer_vector_width": width}, **kwargs)


# --------------------------------------------------------------------------------------
# four int8 sub-lattices, one float uniform per site, chain groups
# --------------------------------------------------------------------------------------
def subl_from_spins(s):
    """``(chains, L, L)`` spins -> the four int8 sub-lattices."""
    s = jnp.asarray(s).astype(jnp.int8)
    return s[:, 0::2, 0::2], s[:, 0::2, 1::2], s[:, 1::2, 0::2], s[:, 1::2, 1::2]


def subl_uniform_sweep(J: float, h: float, num_sweeps: int, group: int = 4):
    def colour(key, nb_x, nb_y):
        kx, ky = jax.random.split(key)
        px = jax.nn.sigmoid(2.0 * (J * nb_x.astype(jnp.float32) + h))
        py = jax.nn.sigmoid(2.0 * (J * nb_y.astype(jnp.float32) + h))
        x = jnp.where(jax.random.uniform(kx, nb_x.shape) < px, 1, -1).astype(jnp.int8)
        y = jnp.where(jax.random.uniform(ky, nb_y.shape) < py, 1, -1).astype(jnp.int8)
        return x, y

    def sweep(state, key):
        a, b, c, d = state
        k0, k1 = jax.random.split(key)
        r = jnp.roll
        a, d = colour(k0, b + r(b, 1, -1) + c + r(c, 1, -2), c + r(c, -1, -1) + b + r(b, -1, -2))
        b, c = colour(k1, a + r(a, -1, -1) + d + r(d, 1, -2), d + r(d, 1, -1) + a + r(a, -1, -2))
        return (a, b, c, d), None

    def sweeps(key, state):
        return jax.lax.scan(sweep, state, jax.random.split(key, num_sweeps))[0]

    @jit
    def run(key, state):
        chains = state[0].shape[0]
        g = min(group, chains)
        if chains % g:
            return sweeps(key, state)
        grouped = tuple(x.reshape((chains // g, g) + x.shape[1:]) for x in state)
        out = jax.lax.map(lambda args: sweeps(*args), (jax.random.split(key, chains // g), grouped))
        return tuple(x.reshape((chains,) + x.shape[2:]) for x in out)

    return run


# --------------------------------------------------------------------------------------
# packed pairs, fused Threefry, integer thresholds
# --------------------------------------------------------------------------------------
def _threefry(k1, k2, x1, x2):
    """Threefry-2x32, 20 rounds (the hash of jax.random's default keys)."""
    ks = (k1, k2, k1 ^ k2 ^ jnp.uint32(0x1BD11BDA))
    a, b = x1 + ks[0], x2 + ks[1]
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    for i in range(5):
        for r in rotations[i % 2]:
            a = a + b
            b = ((b << jnp.uint32(r)) | (b >> jnp.uint32(32 - r))) ^ a
        a = a + ks[(i + 1) % 3]
        b = b + ks[(i + 2) % 3] + jnp.uint32(i + 1)
    return a, b


def packed_from_spins(s):
    """``(chains, L, L)`` spins -> ``(even, odd)`` uint16 words: ``A | D << 8`` and ``B | C << 8``."""
    up = jnp.asarray(s) > 0
    a, b, c, d = up[:, 0::2, 0::2], up[:, 0::2, 1::2], up[:, 1::2, 0::2], up[:, 1::2, 1::2]
    return (a.astype(jnp.uint16) | (d.astype(jnp.uint16) << 8), b.astype(jnp.uint16) | (c.astype(jnp.uint16) << 8))


def _wrap(q, offset, axis):
    """``q[..., k + offset, ...]`` along ``axis`` with wrap-around, as a padded slice plus a select."""
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
    return jnp.where(jax.lax.broadcasted_iota(jnp.int32, q.shape, axis) == at, edge, inner)


def packed_sweep(
    J: float,
    h: float,
    num_sweeps: int,
    chains_last: bool = False,
    halves: bool = False,
    sweep_keys: bool = False,
    group: int | None = None,
):
    """``run(key, (even, odd)) -> (even, odd)``: ``num_sweeps`` checkerboard sweeps of packed ``uint16`` pairs.

    Words ``(chains, h, w)``, or ``(h, w, chains)`` with ``chains_last`` (the neighbour
    reads shift whole rows of chains and the arithmetic is vectorised along the chains:
    the faster form for many chains on narrow lattices).  ``halves``: the half-sweeps
    in a loop of their own, each colour static in a branch of a ``lax.switch`` (faster
    for one chain on large lattices).  ``sweep_keys``: every sweep hashes with its own
    key per chain, split from the call's key before the loop, and the colour as the
    counter (as a kernel called ``step(key, state)`` once per sweep does), instead of
    one key per chain for the call and the half-sweep's index as the counter.
    ``group`` (with ``chains_last``, a divisor of the number of chains): the chains
    run in groups of ``group``, all sweeps of one group before the next (``lax.map``
    over the groups), so that a group's words stay in the caches; the same draws.
    """
    n = np.arange(5)
    p = 1.0 / (1.0 + np.exp(-2.0 * (J * (2 * n - 4) + h)))
    table = [np.uint32(min(round(float(x) * 2.0**32), 2**32 - 1)) for x in p]  # P(U < T) = T / 2^32

    def threshold(count):
        t = jnp.full(count.shape, table[0], jnp.uint32)
        for k in range(1, 5):
            t = jnp.where(count >= k, jnp.uint32(table[k]), t)
        return t

    rows, cols = (0, 1) if chains_last else (1, 2)

    def colour(q, s, k1, k2, counter):
        # q: the other colour's words; s = -1 for {A, D}, +1 for {B, C}
        lo, hi = (q & 1).astype(jnp.uint32), ((q >> 8) & 1).astype(jnp.uint32)
        centre = lo + hi
        n_lo = centre + (_wrap(q, s, cols) & 1).astype(jnp.uint32) + ((_wrap(q, -1, rows) >> 8) & 1).astype(jnp.uint32)
        n_hi = centre + ((_wrap(q, -s, cols) >> 8) & 1).astype(jnp.uint32) + (_wrap(q, 1, rows) & 1).astype(jnp.uint32)
        ww = q.shape[cols]
        site = jax.lax.broadcasted_iota(jnp.uint32, q.shape, rows) * jnp.uint32(ww) + jax.lax.broadcasted_iota(
            jnp.uint32, q.shape, cols
        )
        u_lo, u_hi = _threefry(k1, k2, jnp.broadcast_to(counter, q.shape), site)
        return (u_lo < threshold(n_lo)).astype(jnp.uint16) | ((u_hi < threshold(n_hi)).astype(jnp.uint16) << 8)

    if halves and sweep_keys:
        raise ValueError("`sweep_keys` applies to the straight-line sweep, not to `halves`")

    @jit
    def run(key, state):
        even, odd = state
        chains = even.shape[-1 if chains_last else 0]
        data = jax.random.key_data(jax.random.split(key, chains))
        k1, k2 = (data[:, 0], data[:, 1]) if chains_last else (data[:, 0, None, None], data[:, 1, None, None])

        def sweep(words, t):
            even, odd = words
            even = colour(odd, -1, k1, k2, 2 * t)
            odd = colour(even, 1, k1, k2, 2 * t + 1)
            return (even, odd), None

        def half(t, words):
            even, odd = words
            branches = (
                lambda w: (colour(w[1], -1, k1, k2, t.astype(jnp.uint32)), w[1]),
                lambda w: (w[0], colour(w[0], 1, k1, k2, t.astype(jnp.uint32))),
            )
            return jax.lax.switch(t % 2, branches, (even, odd))

        def keyed_sweep(words, data):  # data (chains, 2): this sweep's key of every chain
            even, odd = words
            k1, k2 = (data[:, 0], data[:, 1]) if chains_last else (data[:, 0, None, None], data[:, 1, None, None])
            even = colour(odd, -1, k1, k2, jnp.uint32(0))
            odd = colour(even, 1, k1, k2, jnp.uint32(1))
            return (even, odd), None

        if group is not None and chains_last and group < chains:
            n = chains // group

            def apart(x):  # (h, w, chains) -> (groups, h, w, group)
                return jnp.moveaxis(x.reshape(x.shape[:2] + (n, group)), 2, 0)

            def run_group(args):
                e, o, a, b = args

                def grouped_sweep(words, t):
                    even, odd = words
                    even = colour(odd, -1, a, b, 2 * t)
                    odd = colour(even, 1, a, b, 2 * t + 1)
                    return (even, odd), None

                return jax.lax.scan(grouped_sweep, (e, o), jnp.arange(num_sweeps, dtype=jnp.uint32))[0]

            e, o = jax.lax.map(run_group, (apart(even), apart(odd), k1.reshape(n, group), k2.reshape(n, group)))
            return tuple(jnp.moveaxis(x, 0, 2).reshape(x.shape[1:3] + (chains,)) for x in (e, o))
        if halves:
            return jax.lax.fori_loop(0, 2 * num_sweeps, half, (even, odd))
        if sweep_keys:
            keys = jax.random.key_data(jax.random.split(key, (num_sweeps, chains)))
            return jax.lax.scan(keyed_sweep, (even, odd), keys)[0]
        return jax.lax.scan(sweep, (even, odd), jnp.arange(num_sweeps, dtype=jnp.uint32))[0]

    return run


# --------------------------------------------------------------------------------------
# dense Boltzmann machine: PCD with sequential single-site Gibbs sweeps
# --------------------------------------------------------------------------------------
def fused_uniform(key, shape):
    """float32 uniforms on [0, 1) (24 bits each) from one key by the fused hash (``_threefry``).

    ``jax.random.uniform`` on the CPU runs the hash as a loop over whole arrays that XLA
    cannot fuse with its consumers; the same hash written as array operations fuses.
    """
    d = jax.random.key_data(key)
    size = math.prod(shape)
    a, b = _threefry(d[0], d[1], jnp.uint32(0), jax.lax.iota(jnp.uint32, -(-size // 2)))
    bits = jnp.concatenate([a, b])[:size].reshape(shape)
    return (bits >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def fused_uniform_rows(key, shape):
    """float32 uniforms on [0, 1) (24 bits each) of a ``(rows, cols)`` shape with ``rows`` even.

    One hash per two numbers, as in :func:`fused_uniform`, with the two words filling
    the top and the bottom half of the rows: joined along the leading axis, the hash
    stays fused with its consumer.  (Joined flat and cut, as :func:`fused_uniform` does,
    XLA writes the words out; on a PCD step of an RBM 784-500 that is slower than
    ``jax.random.uniform``.)
    """
    rows, cols = shape
    d = jax.random.key_data(key)
    a, b = _threefry(d[0], d[1], jnp.uint32(0), jax.lax.iota(jnp.uint32, rows // 2 * cols).reshape(rows // 2, cols))
    return (jnp.concatenate([a, b], axis=0) >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def bm_sweep(W, b, s, u):
    """One systematic single-site heat-bath sweep of a binary BM, all chains at once.

    ``s`` ``(chains, n)`` in {0, 1}; ``u`` ``(n, chains)`` uniforms.  The chains are held
    units-major, ``(n, chains)``, with every unit's field ``W s + b`` computed once and
    updated by a rank-one step after each unit moves (``O(n chains)`` per unit); the loop
    over units runs two units per iteration (the fastest of straight-line code and loops
    unrolled 1, 2, 4 or 8 times on a 16-unit model).
    """
    st = s.T
    fields = W @ st + b[:, None]

    def unit(i, carry):
        st, fields = carry
        new = (u[i] < jax.nn.sigmoid(fields[i])).astype(jnp.float32)
        return st.at[i].set(new), fields + W[:, i][:, None] * (new - st[i])[None, :]

    st, _ = jax.lax.fori_loop(0, s.shape[1], unit, (st, fields), unroll=2)
    return st.T


def bm_pcd(num_units: int, num_particles: int, learning_rate: float):
    """One PCD-1 update of a fully visible binary Boltzmann machine, ``step(carry, (key, batch))``.

    ``carry = (W, b, particles)``: ``W`` symmetric with a zero diagonal, ``b`` the
    biases, ``particles`` ``(num_particles, num_units)`` float32 in {0, 1}.  One sweep
    (:func:`bm_sweep`, uniforms by :func:`fused_uniform`), then plain SGD on the
    log-likelihood gradient ``<s s^T>_data - <s s^T>_particles`` (off-diagonal) and
    ``<s>_data - <s>_particles``.  Use inside ``lax.scan``.
    """
    off_diagonal = 1.0 - jnp.eye(num_units, dtype=jnp.float32)

    def step(carry, inputs):
        W, b, s = carry
        key, batch = inputs
        s = bm_sweep(W, b, s, fused_uniform(key, (num_units, num_particles)))
        data_corr = batch.T @ batch / batch.shape[0]
        model_corr = s.T @ s / num_particles
        W = W + learning_rate * (data_corr - model_corr) * off_diagonal
        b = b + learning_rate * (jnp.mean(batch, 0) - jnp.mean(s, 0))
        return (W, b, s), None

    return step


# --------------------------------------------------------------------------------------
# lattice Potts (periodic H x W, even sizes): per-bond couplings J (2 H W, q, q), fields h (H W, q)
# --------------------------------------------------------------------------------------
def potts_subl_from_sites(x, height: int, width: int, chains_last: bool):
    """``(chains, H * W)`` values -> ``{(p, r): sites (2i + p, 2j + r)}``, int8, ``(h, w, chains)`` or ``(chains, h, w)``."""
    img = jnp.asarray(x).reshape(-1, height, width).astype(jnp.int8)
    return {
        (p, r): (jnp.moveaxis(img[:, p::2, r::2], 0, -1) if chains_last else img[:, p::2, r::2])
        for p in (0, 1)
        for r in (0, 1)
    }


def potts_sweep(height: int, width: int, q: int, num_sweeps: int, chains_last: bool):
    """``run(key, sites, J, h, beta) -> sites``: ``num_sweeps`` checkerboard sweeps of a periodic lattice Potts model.

    Sub-lattices ``(p, r)`` of int8 values; each colour computes the ``q`` logits of its
    own sites only (neighbours by shifted reads of the other colour), one Threefry word
    per site (one hash per pair of sites) and an inverse-CDF draw.  ``chains_last``:
    chains along the trailing axis and each bond's coupling selected by the
    neighbour's value (``q^2`` selects, vectorised over chains: the fastest form for
    many chains); otherwise ``(chains, h, w)`` and the ``q`` couplings gathered from the
    flat ``J`` by computed indices (the fastest form for one chain).
    """
    ww = width // 2
    ai, aj = (0, 1) if chains_last else (1, 2)

    def grid(a):  # (h, w) -> broadcast against the sites
        return a[:, :, None] if chains_last else a[None]

    def colour(S, Jh, Jv, Eh, Ev, fields, J_flat, beta, c, k1, k2, counter):
        sites = ((0, 0), (1, 1)) if c == 0 else ((0, 1), (1, 0))
        shape = S[(0, 0)].shape
        index = jax.lax.broadcasted_iota(jnp.uint32, shape, ai) * jnp.uint32(ww) + jax.lax.broadcasted_iota(
            jnp.uint32, shape, aj
        )
        u_pair = _threefry(k1, k2, jnp.broadcast_to(counter, shape), index)
        out = {}
        for (p, r), u in zip(sites, u_pair):
            o_h, o_v = S[(p, 1 - r)], S[(1 - p, r)]
            nbs = (  # (value, couplings (h, w, q, q), bond index (h, w), site is the bond's first)
                (_wrap(o_h, 1, aj) if r else o_h, Jh[p][r], Eh[p][r], True),
                (
                    o_h if r else _wrap(o_h, -1, aj),
                    Jh[p][0] if r else _wrap(Jh[p][1], -1, 1),
                    Eh[p][0] if r else jnp.roll(Eh[p][1], 1, 1),
                    False,
                ),
                (_wrap(o_v, 1, ai) if p else o_v, Jv[p][r], Ev[p][r], True),
                (
                    o_v if p else _wrap(o_v, -1, ai),
                    Jv[0][r] if p else _wrap(Jv[1][r], -1, 0),
                    Ev[0][r] if p else jnp.roll(Ev[1][r], 1, 0),
                    False,
                ),
            )
            logits = []
            for a in range(q):
                value = grid(fields[p][r][:, :, a])
                for x, Jd, e, first in nbs:
                    if chains_last:
                        for b in range(q):
                            value = value + jnp.where(x == b, grid(Jd[:, :, a, b] if first else Jd[:, :, b, a]), 0.0)
                    else:
                        offset = grid(e * (q * q) + (a * q if first else a))
                        value = value + J_flat[offset + x.astype(jnp.int32) * (1 if first else q)]
                logits.append(beta * value)
            top = logits[0]
            for v in logits[1:]:
                top = jnp.maximum(top, v)
            partial, total = [], jnp.zeros_like(top)
            for v in logits:
                total = total + jnp.exp(v - top)
                partial.append(total)
            target = (u >> 8).astype(jnp.float32) * jnp.float32(2.0**-24) * total
            new = jnp.zeros(shape, jnp.int8)
            for s in partial[:-1]:
                new = new + (s <= target).astype(jnp.int8)
            out[(p, r)] = new
        return out

    @jit
    def run(key, S, J, h, beta):
        chains = S[(0, 0)].shape[-1 if chains_last else 0]
        data = jax.random.key_data(jax.random.split(key, chains))
        k1, k2 = (data[:, 0], data[:, 1]) if chains_last else (data[:, 0, None, None], data[:, 1, None, None])

        def parity(a):
            return [[a[p::2, r::2] for r in (0, 1)] for p in (0, 1)]

        n = height * width
        Jh, Jv = parity(J[:n].reshape(height, width, q, q)), parity(J[n:].reshape(height, width, q, q))
        edges = np.arange(n, dtype=np.int32).reshape(height, width)
        Eh, Ev = parity(jnp.asarray(edges)), parity(jnp.asarray(edges + n))
        fields = parity(h.reshape(height, width, q))
        J_flat = J.reshape(-1)

        def sweep(S, t):
            S = dict(S)
            S.update(colour(S, Jh, Jv, Eh, Ev, fields, J_flat, beta, 0, k1, k2, 2 * t))
            S.update(colour(S, Jh, Jv, Eh, Ev, fields, J_flat, beta, 1, k1, k2, 2 * t + 1))
            return S, None

        return jax.lax.scan(sweep, S, jnp.arange(num_sweeps, dtype=jnp.uint32))[0]

    return run
