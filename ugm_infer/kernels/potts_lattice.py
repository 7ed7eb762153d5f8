r"""Four-sub-lattice checkerboard heat bath for the 2D lattice Potts model.

The block-Gibbs sweep of :func:`~ugm_infer.models.lattice_potts` (even height and
width), with general per-bond couplings :math:`J_e(a, b)` and per-site fields
:math:`h_i(a)`, written so that each colour computes conditionals only for its own
sites.

Layout
    A lattice of height ``H = 2h`` and width ``W = 2w`` splits into four sub-lattices
    ``A = (2i, 2j)``, ``B = (2i, 2j+1)``, ``C = (2i+1, 2j)``, ``D = (2i+1, 2j+1)``, each
    ``(h, w)`` (sub-lattice ``(p, r)`` holds the sites ``(2i + p, 2j + r)``).  The
    checkerboard colours are ``{A, D}`` (``r + c`` even, the model's first block) and
    ``{B, C}``.  Sites are stored as small integers (``int8`` for ``q <= 127``), one
    ``(h, w)`` array per sub-lattice (the four fields of :class:`PottsLatticeState`);
    under ``jax.vmap`` over chains each is ``(chains, h, w)``, and a batching rule runs
    the sweep of all chains on those arrays as they are, so a step moves no data
    around (no transpose, no stacking).  The couplings and fields are read from
    :func:`sweep_tables`, made once with the density (:class:`PottsLogDensity`), not
    at every step.
Conditionals
    Site :math:`i` at :math:`(R, C)` has the logits :math:`\ell_i(a) = \beta\,[h_i(a) +
    \sum_{e \ni i} J_e(\cdot, \cdot)]`, the coupling of each of its (at most four)
    bonds read with the site's value ``a`` on its own side and the neighbour's current
    value on the other: :math:`J_e(a, x_j)` for the bonds to the right and below (the
    site is the bond's first site in :func:`~ugm_infer.models.lattice_edges` order) and
    :math:`J_e(x_j, a)` for the bonds to the left and above.  Neighbours come from the
    other colour's sub-lattices by a shift of at most one row or column (wrapped on a
    torus; on an open lattice a missing bond contributes nothing).  Bond indices are
    computed from the site's coordinates (horizontal bonds first, then vertical, as in
    ``lattice_edges``).  For ``q <= 6`` each bond's coupling is selected by the
    neighbour's value from the value-major grids of :func:`sweep_tables` (``q^2``
    selects per bond, vectorised along the lattice rows); for larger ``q`` the ``q``
    couplings of the bond are gathered from ``params["J"]`` as given.
Draw
    One uniform per site (24 bits of a Threefry-2x32 word, Salmon et al. 2011, the hash
    of ``jax.random``'s default keys, fused with the rest of the update; the two output
    words of one hash serve the colour's two sub-lattices at ``(i, j)``), turned into a
    value by the inverse CDF of :math:`p(a) \propto \exp(\ell(a) - \max_b \ell(b))`: the
    new value is the number of partial sums below ``u`` times the total.  The counter is
    ``(t, i w + j)`` with ``t = 2 * sweep + colour`` the half-sweep index and the key
    the chain's own key, so every draw of a call has its own counter and a chain's draws
    depend only on its key.

Exact: the sites of a colour share no bond (even sizes), so each half-sweep draws every
site of the colour from its full conditional given the other colour -- the transition
of the generic block-Gibbs update of the same blocks (up to float32 rounding of the
probabilities, about ``2^-24``).

References
----------
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE TPAMI 6, 721-741.
Salmon, J. K., Moraes, M. A., Dror, R. O. and Shaw, D. E. (2011). Parallel random
numbers: as easy as 1, 2, 3. SC '11.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer.kernels.checkerboard import _shifted, key_pair, largest_divisor, sum_leading, threefry2x32

__all__ = [
    "PottsLogDensity",
    "PottsLattice",
    "PottsLatticeState",
    "lattice_of",
    "state_type",
    "sweep_tables",
    "build_step",
    "count_changed",
    "energy_of_sublattices",
]

# up to this q each bond's coupling is selected by the neighbour's value (q^2 selects per bond, vectorised
# along the lattice rows); above it the q couplings of the bond are gathered (at q = 10 the q^2 selects per
# bond make XLA split the update into several loops that recompute the logits: about 10x slower)
MAX_SELECT_STATES = 6
# with the chains on the trailing axis each selected coupling is one value broadcast over the chains, and the
# selects stay in one loop up to larger q
MAX_SELECT_STATES_CHAINS_LAST = 16


class PottsLogDensity:
    """``x -> -beta E(params, x)`` of a Potts model that also tells the fast kernels its parameters.

    Returned by :meth:`ugm_infer.models.Potts.logdensity_fn`.  Calling it evaluates the
    log-density of one configuration ``{"x": (n,)}`` like any ``logdensity_fn``; the
    fast kernels (``potts_gibbs``, and the block-Gibbs kernel's lattice sweep of this
    module) read

    ``beta``
        the inverse temperature (may be traced);
    ``J``
        the couplings as the energy uses them: dense ``(n, n, q, q)`` symmetrised with
        a zero diagonal, or ``(m, q, q)`` for an edge list;
    ``h``
        the fields ``(n, q)``;
    ``structure``
        ``(n, q, edges-or-None)`` of the model, to check the kernel was built for it;
    ``lattice``
        ``(height, width, periodic)`` for :func:`~ugm_infer.models.lattice_potts`, else ``None``;
    ``tables``
        for a lattice with even sizes, ``J`` and ``h`` rearranged for the
        four-sub-lattice sweep (:func:`sweep_tables`), made with the density so that a
        sampler stepping it many times (``ui.sample``'s scan) reads them ready-made
        instead of rearranging the parameters at every step; else ``None``.
    """

    def __init__(
        self,
        fn: Callable,
        J: jax.Array,
        h: jax.Array,
        beta: Any,
        structure: tuple,
        lattice: tuple | None = None,
        tables: tuple | None = None,
    ):
        self._fn = fn
        self.J = J
        self.h = h
        self.beta = beta
        self.structure = structure
        self.lattice = lattice
        if tables is None and lattice is not None and not (lattice[0] % 2 or lattice[1] % 2):
            lat = PottsLattice(lattice[0], lattice[1], structure[1], lattice[2])
            tables = _tables_fn(lat)(J, h)
        self.tables = tables

    def __call__(self, state):
        return self._fn(state)

    def tempered(self, beta: Any) -> PottsLogDensity:
        """``x -> beta * self(x)``, still a :class:`PottsLogDensity` (inverse temperature ``beta * self.beta``).

        For tempering schemes (parallel tempering, tempered transitions) that want to
        keep the fast kernels on their fast path at every temperature.
        """
        fn = self._fn
        scaled = beta * self.beta
        return PottsLogDensity(
            lambda state: beta * fn(state), self.J, self.h, scaled, self.structure, self.lattice, self.tables
        )


class PottsLattice(NamedTuple):
    """Static description of a lattice Potts model the four-sub-lattice sweep applies to (hashable)."""

    height: int
    width: int
    num_states: int
    periodic: bool

    @property
    def site_dtype(self):
        return jnp.int8 if self.num_states <= 127 else jnp.int32

    def split(self, x: jax.Array) -> jax.Array:
        """``(..., H * W)`` values -> ``(..., 4, h, w)`` sub-lattices ``A, B, C, D`` (:attr:`site_dtype`)."""
        img = jnp.asarray(x).astype(self.site_dtype).reshape(x.shape[:-1] + (self.height, self.width))
        return jnp.stack([img[..., p::2, r::2] for p in (0, 1) for r in (0, 1)], axis=-3)

    def join(self, sub: jax.Array, dtype: Any) -> jax.Array:
        """Inverse of :meth:`split`: ``(..., 4, h, w)`` -> ``(..., H * W)`` in ``dtype``."""
        lead, (h, w) = sub.shape[:-3], sub.shape[-2:]
        grid = sub.reshape(lead + (2, 2, h, w))  # (p, r, i, j) -> (i, p, j, r)
        grid = jnp.moveaxis(grid, (-4, -3), (-3, -1))
        return grid.reshape(lead + (self.height * self.width,)).astype(dtype)


def lattice_of(logdensity_fn: Any, model: Any = None) -> PottsLattice | None:
    """The :class:`PottsLattice` of a lattice Potts density with even sizes (and of ``model``, if given), else ``None``."""
    if not isinstance(logdensity_fn, PottsLogDensity) or logdensity_fn.lattice is None:
        return None
    if model is not None and logdensity_fn.structure != getattr(model, "_structure_key", None):
        return None
    height, width, periodic = logdensity_fn.lattice
    if height % 2 or width % 2:
        return None
    return PottsLattice(height, width, logdensity_fn.structure[1], periodic)


class PottsLatticeState(NamedTuple):
    """State of one block-Gibbs chain of a lattice Potts model in the four-sub-lattice layout.

    a, b, c, d
        The sub-lattices ``A, B, C, D`` (module docstring), each ``(H/2, W/2)``
        (``int8`` for ``q <= 127``); under ``jax.vmap`` ``(chains, H/2, W/2)``, the
        layout the batched sweep works on, so a step moves no data around.
    sites
        The four stacked, ``(4, H/2, W/2)``.
    position
        ``{"x": (H * W,)}`` in the model's dtype, joined from the sub-lattices when read.
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    d: jax.Array

    #: the batched layout of this state type: ``False`` for ``(chains, H/2, W/2)`` leaves, ``True`` for
    #: ``(H/2, W/2, chains)`` (see :meth:`with_chains_last`)
    chains_last = False

    @property
    def sites(self) -> jax.Array:
        return jnp.stack(tuple(self), axis=-3)

    @classmethod
    def with_chains_last(cls, states: PottsLatticeState) -> PottsLatticeState:
        """Batched states ``(chains, h, w)`` -> the same chains as ``(h, w, chains)`` leaves.

        The layout the sweep of many chains runs fastest on: every coupling is read once
        for all chains and broadcast along the trailing axis.  A driver that keeps its
        chains this way steps them with ``jax.vmap(step, in_axes=(0, -1), out_axes=(-1, 0))``
        and converts back with :meth:`with_chains_first` (one transpose each way).
        """
        other = state_type(cls.lattice, cls.dtype, chains_last=True)
        return other(*(jnp.moveaxis(x, 0, -1) for x in states))

    @classmethod
    def with_chains_first(cls, states: PottsLatticeState) -> PottsLatticeState:
        """Inverse of :meth:`with_chains_last` (a no-op for states already chains-first)."""
        if not cls.chains_last:
            return states
        other = state_type(cls.lattice, cls.dtype)
        return other(*(jnp.moveaxis(x, -1, 0) for x in states))

    @property
    def position(self) -> dict:
        return {"x": type(self).lattice.join(self.sites, type(self).dtype)}

    @classmethod
    def of(cls, sites: jax.Array):
        """The state of stacked sub-lattices ``(..., 4, h, w)``."""
        return cls(*(sites[..., i, :, :] for i in range(4)))


_STATE_TYPES: dict = {}


def state_type(lat: PottsLattice, dtype: Any, chains_last: bool = False) -> type:
    """The :class:`PottsLatticeState` subclass of ``lat``, position ``dtype`` and batched layout (one per triple)."""
    key = (lat, jnp.dtype(dtype).name, bool(chains_last))
    cls = _STATE_TYPES.get(key)
    if cls is None:
        attrs = {"lattice": lat, "dtype": key[1], "chains_last": key[2], "__slots__": ()}
        cls = type("PottsLatticeState", (PottsLatticeState,), attrs)
        _STATE_TYPES[key] = cls
    return cls


def _neighbours(sub: list, p: int, r: int, axes: tuple):
    """The four ``(value, direction)`` neighbour reads of sub-lattice ``(p, r)`` (site axes ``axes = (row, column)``)."""
    row, col = axes
    right = sub[2 * p + 1 - r] if r == 0 else _shifted(sub[2 * p], 1, col, True)
    left = sub[2 * p + 1 - r] if r == 1 else _shifted(sub[2 * p + 1], -1, col, True)
    down = sub[2 * (1 - p) + r] if p == 0 else _shifted(sub[r], 1, row, True)
    up = sub[2 * (1 - p) + r] if p == 1 else _shifted(sub[2 + r], -1, row, True)
    return (right, "right"), (left, "left"), (down, "down"), (up, "up")


def _bond_index(lat: PottsLattice, p: int, r: int, direction: str, shape: tuple):
    """Edge index (int32) and presence (bool or ``None`` = always) of each site's bond in ``direction``."""
    H, W, periodic = lat.height, lat.width, lat.periodic
    R = 2 * jax.lax.broadcasted_iota(jnp.int32, shape, 0) + p
    C = 2 * jax.lax.broadcasted_iota(jnp.int32, shape, 1) + r
    horizontal_width = W if periodic else W - 1
    if direction in ("left", "up"):
        R, C = (R, C - 1) if direction == "left" else (R - 1, C)
        present = None if periodic else ((C >= 0) if direction == "left" else (R >= 0))
        R, C = R % H, C % W
    else:
        present = None if periodic else ((C < W - 1) if direction == "right" else (R < H - 1))
    if direction in ("left", "right"):
        e = R * horizontal_width + C
    else:
        e = H * horizontal_width + R * W + C
    if present is not None:
        e = jnp.where(present, e, 0)
    return e, present


DIRECTIONS = ("right", "left", "down", "up")


#: entries of :func:`sweep_tables` per layout (16 coupling grids, 4 field grids)
NUM_TABLES = 20


def sweep_tables(lat: PottsLattice, J: jax.Array, h: jax.Array) -> tuple:
    """The couplings and fields of ``lat`` in the sweep's layouts: a flat tuple of ``2 * NUM_TABLES`` arrays.

    Entry ``4 (2p + r) + d`` is the ``(q, q, h, w)`` grid of sub-lattice ``(p, r)``'s
    bond in direction ``DIRECTIONS[d]``: ``[a, b]`` is the coupling ``J_e(a, b)`` with
    ``a`` the value of the sub-lattice's site and ``b`` its neighbour's, zero where a bond
    is absent; entry ``16 + 2p + r`` the ``(q, h, w)`` fields.  Value-major and one array
    per grid, so a value pair's couplings are a contiguous block read in place (the
    chains-first sweep reads them along the lattice rows).  Entries ``NUM_TABLES + k``
    hold the same site-major, ``(h, w, q, q)`` and ``(h, w, q)``: for the chains-last
    sweep, which reads each site's couplings once and broadcasts them over the chains,
    one contiguous block per site and direction (a few memory streams instead of
    ``4 q^2 + q``, which can also collide in the cache when the grids' sizes are
    multiples of its set stride).  A jitted caller keeps only the half it reads.
    """
    H, W, q, periodic = lat.height, lat.width, lat.num_states, lat.periodic
    Jt = jnp.moveaxis(J, 0, -1)  # (q, q, m)
    if periodic:
        horizontal, vertical = Jt[..., : H * W].reshape(q, q, H, W), Jt[..., H * W :].reshape(q, q, H, W)
    else:  # pad the missing last column / row with zero bonds
        horizontal = jnp.pad(Jt[..., : H * (W - 1)].reshape(q, q, H, W - 1), ((0, 0), (0, 0), (0, 0), (0, 1)))
        vertical = jnp.pad(Jt[..., H * (W - 1) :].reshape(q, q, H - 1, W), ((0, 0), (0, 0), (0, 1), (0, 0)))
    # the bond seen from its second site: [a, b] = J_e(b, a)
    horizontal_t, vertical_t = jnp.swapaxes(horizontal, 0, 1), jnp.swapaxes(vertical, 0, 1)
    grids = []
    for p in (0, 1):
        for r in (0, 1):
            left = horizontal_t[:, :, p::2, 0::2] if r == 1 else _shifted(horizontal_t[:, :, p::2, 1::2], -1, 3, True)
            up = vertical_t[:, :, 0::2, r::2] if p == 1 else _shifted(vertical_t[:, :, 1::2, r::2], -1, 2, True)
            grids += [horizontal[:, :, p::2, r::2], left, vertical[:, :, p::2, r::2], up]
    fields = jnp.moveaxis(h.reshape(H, W, q), -1, 0)
    value_major = tuple(grids) + tuple(fields[:, p::2, r::2] for p in (0, 1) for r in (0, 1))
    site_major = tuple(jnp.moveaxis(g, (0, 1), (2, 3)) for g in grids) + tuple(
        h.reshape(H, W, q)[p::2, r::2] for p in (0, 1) for r in (0, 1)
    )
    return value_major + site_major


_TABLE_FNS: dict = {}


def _tables_fn(lat: PottsLattice) -> Callable:
    """``jax.jit(sweep_tables)`` of ``lat`` (one dispatch when called outside a trace)."""
    fn = _TABLE_FNS.get(lat)
    if fn is None:
        fn = _TABLE_FNS.setdefault(lat, jax.jit(lambda J, h: sweep_tables(lat, J, h)))
    return fn


def _colour_update(
    lat: PottsLattice, sub: list, colour: int, J, tables, beta, k1, k2, counter, select: bool, chains_last: bool = False
) -> dict:
    """New values of the two sub-lattices of ``colour`` given the others.

    Arrays ``(chains, h, w)`` (``(h, w, chains)`` with ``chains_last``); ``k1``, ``k2``
    and ``beta`` broadcast against them; ``tables`` from :func:`sweep_tables`.  Written
    for one loop per sub-lattice: the ``q`` logits, their maximum, the exponentials,
    the partial sums and the draw are elementwise in the sites and chains, so XLA fuses
    them with the neighbour reads and the hash.
    """
    q = lat.num_states
    shape = sub[0].shape
    axes = (0, 1) if chains_last else (1, 2)  # rows, columns

    def site_grid(a):  # (h, w) -> broadcast against the chains
        return a[..., None] if chains_last else a[None]

    hh, ww = lat.height // 2, lat.width // 2
    index = jax.lax.broadcasted_iota(jnp.uint32, shape, axes[0]) * jnp.uint32(ww) + jax.lax.broadcasted_iota(
        jnp.uint32, shape, axes[1]
    )
    u_pair = threefry2x32(k1, k2, jnp.broadcast_to(counter, shape), index)
    J_flat = J.reshape(-1)
    out = {}
    for (p, r), u in zip(((0, 0), (1, 1)) if colour == 0 else ((0, 1), (1, 0)), u_pair):
        fields = tables[16 + 2 * p + r]
        logits = [site_grid(fields[..., a] if chains_last else fields[a]) for a in range(q)]
        for value, direction in _neighbours(sub, p, r, axes):
            first = direction in ("right", "down")  # J_e(a, x_j) with the site first, else J_e(x_j, a)
            if select:
                grid = tables[4 * (2 * p + r) + DIRECTIONS.index(direction)]
                for b in range(q):
                    hit = value == b
                    for a in range(q):
                        coupling = site_grid(grid[..., a, b] if chains_last else grid[a, b])
                        logits[a] = logits[a] + jnp.where(hit, coupling, 0.0)
            else:
                e, present = _bond_index(lat, p, r, direction, (hh, ww))
                base = site_grid(e * (q * q)) + value.astype(jnp.int32) * (1 if first else q)
                for a in range(q):
                    coupling = J_flat[base + (a * q if first else a)]
                    logits[a] = logits[a] + (coupling if present is None else jnp.where(site_grid(present), coupling, 0.0))
        logits = [beta * x for x in logits]
        top = logits[0]
        for x in logits[1:]:
            top = jnp.maximum(top, x)
        partial, total = [], jnp.zeros_like(top)
        for x in logits:
            total = total + jnp.exp(x - top)
            partial.append(total)
        target = (u >> 8).astype(top.dtype) * jnp.asarray(2.0**-24, top.dtype) * total
        new = jnp.zeros(shape, lat.site_dtype)
        for s in partial[:-1]:
            new = new + (s <= target).astype(lat.site_dtype)
        out[2 * p + r] = new
    return out


def _sweeps(lat: PottsLattice, num_sweeps: int, reverse: bool, select: bool, chains_last: bool = False):
    """``run(k1, k2, sub, J, tables, beta) -> (sub, flags)`` on the four sub-lattices (layout as in :func:`_colour_update`).

    ``flags`` (``uint8``, the sub-lattices' shape) counts at each position the
    sub-lattices whose site the run changed (0 to 4).  With one sweep every site is
    drawn once, so the flags come out of each colour's update (its old values are at
    hand there: no copy of the old state is kept); with several, the start is compared
    with the end.  Half-sweep ``t`` updates colour ``order[t % 2]`` with counter ``t``.
    Chains first, the half-sweeps run in a ``lax.fori_loop`` (a static colour in each
    branch of a ``lax.switch``) that carries the sub-lattices, so each half-sweep's
    values are written once: written as straight-line code, XLA's CPU compiler fuses
    the first colour's update into every consumer that reads it (the second colour's
    neighbour reads, and the caller's joining of the lattice when it reads the
    position right after: a learner's step, parallel tempering), recomputing the draw
    many times over.  Chains last (the drivers that carry the sub-lattices from step to
    step) the two colours are straight-line code.
    """
    order = (1, 0) if reverse else (0, 1)

    def run(k1, k2, sub, J, tables, beta):
        def colour_step(sub, flags, colour, counter):
            sub = list(sub)
            new = _colour_update(lat, sub, colour, J, tables, beta, k1, k2, counter, select, chains_last)
            for i, value in new.items():
                if flags is not None:
                    flags = flags + (value != sub[i]).astype(jnp.uint8)
                sub[i] = value
            return tuple(sub), flags

        sub = tuple(sub)
        one = num_sweeps == 1
        flags = jnp.zeros(sub[0].shape, jnp.uint8) if one else None
        if chains_last:

            def sweep(t, carry):
                sub, flags = carry
                for c, colour in enumerate(order):
                    sub, flags = colour_step(sub, flags, colour, 2 * jnp.asarray(t, jnp.uint32) + jnp.uint32(c))
                return sub, flags

            new, flags = sweep(0, (sub, flags)) if one else jax.lax.fori_loop(0, num_sweeps, sweep, (sub, None))
        else:

            def half(t, carry):
                def branch(colour):
                    return lambda carry: colour_step(*carry, colour, t.astype(jnp.uint32))

                return jax.lax.switch(t % 2, [branch(colour) for colour in order], carry)

            new, flags = jax.lax.fori_loop(0, 2 * num_sweeps, half, (sub, flags))
        if flags is None:
            flags = sum((x != y).astype(jnp.uint8) for x, y in zip(sub, new))
        return new, flags

    return run


def build_step(lat: PottsLattice, num_sweeps: int = 1, reverse: bool = False, chains_last: bool = False) -> Callable:
    """``step(rng_key, sub, J, tables, beta) -> (a, b, c, d, num_changed)``: ``num_sweeps`` sweeps of one chain.

    ``sub`` holds the chain's four ``(h, w)`` sub-lattices, ``tables`` are
    :func:`sweep_tables` of ``J`` and the fields; ``num_changed`` counts the sites the
    step changed.  Under ``jax.vmap`` over chains a batching rule runs all chains
    together: on the ``(chains, h, w)`` sub-lattices as they are stored, or, with
    ``chains_last``, on ``(h, w, chains)`` arrays (:meth:`PottsLatticeState.with_chains_last`),
    where every coupling is read once for all chains.  JAX hands a batching rule its
    arrays chains-first, so the rule moves the chain axis back to the end, and XLA
    cancels that transpose against the one JAX inserted when the driver vmaps the step
    over a trailing chain axis (``in_axes=-1``): the data stays where it is.  Chains
    with their own couplings or fields run one by one; a batched ``beta`` (parallel
    tempering's replicas) broadcasts over the chains.
    """
    bound = MAX_SELECT_STATES_CHAINS_LAST if chains_last else MAX_SELECT_STATES
    run = _sweeps(lat, num_sweeps, reverse, select=lat.num_states <= bound, chains_last=chains_last)

    def batched(keys, sub, J, tables, beta):  # keys (chains, 2), sub 4 x (chains, h, w), beta () or (chains,)
        if chains_last:
            sub = [jnp.moveaxis(x, 0, -1) for x in sub]
            new, flags = run(keys[:, 0], keys[:, 1], sub, J, tables, beta)
            return tuple(jnp.moveaxis(x, -1, 0) for x in new) + (sum_leading(flags),)
        beta = jnp.reshape(beta, jnp.shape(beta) + (1, 1))
        new, flags = run(keys[:, 0, None, None], keys[:, 1, None, None], list(sub), J, tables, beta)
        return tuple(new) + (_count_flags(flags),)

    @jax.custom_batching.custom_vmap
    def step(key_data, a, b, c, d, J, beta, *tables):
        return tuple(x[0] for x in batched(key_data[None], (a[None], b[None], c[None], d[None]), J, tables, beta))

    @step.def_vmap
    def _batched(axis_size, in_batched, key_data, a, b, c, d, J, beta, *tables):
        args = (key_data, a, b, c, d, J, beta, *tables)
        if in_batched[5] or any(in_batched[7:]):  # per-chain couplings: chain by chain
            args = [v if bat else jnp.broadcast_to(v, (axis_size,) + jnp.shape(v)) for v, bat in zip(args, in_batched)]
            return jax.lax.map(lambda x: step(*x), tuple(args)), (True,) * 5
        keys = key_data if in_batched[0] else jnp.broadcast_to(key_data, (axis_size, 2))
        sub = tuple(v if bat else jnp.broadcast_to(v, (axis_size,) + v.shape) for v, bat in zip(args[1:5], in_batched[1:5]))
        return batched(keys, sub, J, tables, beta), (True,) * 5

    def chain_step(rng_key, sub, J, tables, beta):
        k1, k2 = key_pair(rng_key)
        J = jnp.asarray(J)
        # the layout's half of the tables (the other half is then unused: a jitted caller never makes it)
        tables = tables[NUM_TABLES:] if chains_last else tables[:NUM_TABLES]
        tables = tuple(jnp.asarray(t, J.dtype) for t in tables)
        return step(jnp.stack([k1, k2]), *sub, J, jnp.asarray(beta, J.dtype), *tables)

    return chain_step


def _count_flags(flags: jax.Array) -> jax.Array:
    """Sum of ``uint8`` change flags (0 to 4 per position) over the last two axes, as ``int32``.

    The ``(h, w)`` grid, cut into ``k <= 16`` equal contiguous pieces, is first added
    piece by piece in ``uint8`` (at most ``4 k <= 64``: a reduction over a short outer
    axis, which XLA fuses and vectorises along the pieces); only those sums are widened
    and reduced.
    """
    lead, size = flags.shape[:-2], flags.shape[-2] * flags.shape[-1]
    pieces = largest_divisor(size, 16)
    sums = jnp.sum(flags.reshape(lead + (pieces, size // pieces)), axis=-2, dtype=jnp.uint8)
    return jnp.sum(sums, axis=-1, dtype=jnp.int32)


def count_changed(old: PottsLatticeState, new: PottsLatticeState) -> jax.Array:
    """Number of sites whose value differs between two states (``int32``; reduces the last two axes).

    The four sub-lattices' change flags are added site by site (at most 4), then
    summed by :func:`_count_flags`.
    """
    return _count_flags(sum((x != y).astype(jnp.uint8) for x, y in zip(old, new)))


def energy_of_sublattices(lat: PottsLattice, sub: tuple, tables: tuple, chains_last: bool = False) -> jax.Array:
    r"""The energy :math:`E(x) = -\sum_e J_e(x_i, x_j) - \sum_i h_i(x_i)` of chains kept as sub-lattices (float).

    ``sub`` holds the four sub-lattices ``(chains, h, w)`` (``(h, w, chains)`` with
    ``chains_last``), ``tables`` are :func:`sweep_tables` of the couplings and fields.
    Every bond is counted once, from its first site (the bonds to the right and
    below): the site's value selects its field and its row of the bond's coupling
    grids, the neighbour's value the entry of that row (nested selects from the
    value-major grids, :math:`q^2 + q` per bond): no joining of the lattice and no
    gather.  Returns one energy per chain, equal to the model's up to float rounding.
    """
    q = lat.num_states
    axes = (0, 1) if chains_last else (1, 2)

    def site_grid(a):
        return a[..., None] if chains_last else a[None]

    def select(x, values):  # values[a] where x == a
        out = values[-1]
        for a in range(q - 2, -1, -1):
            out = jnp.where(x == a, values[a], out)
        return out

    total = None
    for p in (0, 1):
        for r in (0, 1):
            x = sub[2 * p + r]
            fields = tables[16 + 2 * p + r]
            part = select(x, [site_grid(fields[a]) for a in range(q)])
            for value, direction in _neighbours(list(sub), p, r, axes)[::2]:  # right and down: the site is first
                grid = tables[4 * (2 * p + r) + DIRECTIONS.index(direction)]
                row = [select(x, [site_grid(grid[a, b]) for a in range(q)]) for b in range(q)]
                part = part + select(value, row)
            total = part if total is None else total + part
    if chains_last:
        return -jnp.sum(total.reshape(-1, total.shape[-1]), axis=0)
    return -jnp.sum(total, axis=(-2, -1))
