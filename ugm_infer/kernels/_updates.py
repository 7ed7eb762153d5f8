"""Site and block updates shared by the Gibbs and Metropolis kernels.

Every update is a pure function ``update(rng_key, position, logdensity_fn) ->
position`` acting on *one* configuration; chains are handled by ``jax.vmap``.
Only ``logdensity_fn`` is used, so the same updates serve plain sampling, tempered
densities (``beta * -E``), geometric bridges (SMC, AIS, PSMC) and learners that
rebuild the density each step with new parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._random import categorical, computed_once, randint, uniform
from ugm_infer._random import split as split_key
from ugm_infer.domains import Binary, Domain, Spin
from ugm_infer.structure import Block

Update = Callable[[jax.Array, dict, Callable], dict]


def _values(domain: Domain) -> jax.Array:
    return jnp.asarray(domain.values, dtype=domain.dtype)


class SiteLogitsLogDensity:
    """A ``logdensity_fn`` that also gives every site's exact conditional log-odds.

    Calling it evaluates the log-density like any ``logdensity_fn``.  Its
    :meth:`site_logits` returns, for each binary/spin variable, the array of

    .. math::  \\log p(x_i = \\mathrm{hi} \\mid x_{-i}) - \\log p(x_i = \\mathrm{lo} \\mid x_{-i})

    at *every* site (``hi``/``lo`` = 1/0 for binary, +1/-1 for spins), computed from
    the current configuration.  Each entry depends only on the other sites, so the
    values at the sites of a block (mutually non-interacting) are exactly the block's
    conditionals.  :func:`gradient_block_update` uses them instead of a gradient at
    the masked midpoint state: models whose conditionals have a closed form
    (``ui.models.lattice_ising``: :math:`2\\beta(J \\sum_{j \\sim i} s_j + h)`) return
    this from ``model.logdensity_fn`` so that Gibbs sweeps skip the masking and the
    gradient (the same pattern as :class:`~ugm_infer.applications.ergm.ERGMLogDensity`).
    Any other density (a bridge, a user closure) takes the generic gradient path.
    """

    def __init__(self, fn: Callable, site_logits: Callable[[dict], dict]):
        self._fn = fn
        self._site_logits = site_logits

    def __call__(self, state):
        return self._fn(state)

    def site_logits(self, position: dict) -> dict:
        """``{name: log-odds array of the variable's shape}`` at ``position`` (one configuration)."""
        return self._site_logits(position)

    def tempered(self, beta) -> SiteLogitsLogDensity:
        """``x -> beta * self(x)`` with site logits ``beta * site_logits`` (exact: log-odds scale with beta).

        Used by ``ugm_infer.kernels._common.temper`` so parallel tempering and tempered
        transitions keep the fast path.
        """
        fn, site_logits = self._fn, self._site_logits
        return SiteLogitsLogDensity(
            lambda state: beta * fn(state),
            lambda position: {n: beta * v for n, v in site_logits(position).items()},
        )


def compact_factor(index_sets: list[np.ndarray], size: int) -> int:
    """Largest ``m >= 1`` such that, in every set, the flat indices ``i // m`` are distinct.

    With such an ``m`` one uniform per group of ``m`` consecutive sites is enough for a
    block update: site ``i`` reads uniform ``i // m``, and no two sites of one block
    share a uniform, so the block's uniforms are still independent (the masked-out sites
    read a uniform that is discarded).  A checkerboard colour on a row-major 2D lattice
    gives ``m = 2`` (no two horizontally adjacent sites share a colour), so a colour's
    update draws ``size / 2`` uniforms instead of ``size``.  Returns 1 when a set fills
    the variable or nothing larger works.
    """
    sets = [np.asarray(s, dtype=np.int64) for s in index_sets if len(s)]
    if not sets:
        return 1
    # sorted, the buckets ``i // m`` of distinct indices are distinct iff no two neighbours share one: O(n)
    sets = [s if np.all(s[1:] > s[:-1]) else np.unique(s) for s in sets]
    largest = max(len(s) for s in sets)
    for m in range(max(2, size // largest), 1, -1):
        if all(np.all(s[1:] // m != s[:-1] // m) for s in sets):
            return m
    return 1


def block_uniforms(rng_key: jax.Array, shape: tuple, factor: int, dtype=jnp.float32) -> jax.Array:
    """Uniforms of ``shape`` where flat site ``i`` reads the ``i // factor``-th of ``ceil(size / factor)`` draws."""
    size = int(np.prod(shape, dtype=np.int64))
    if factor == 1:
        return uniform(rng_key, shape, dtype)
    num = -(-size // factor)
    u = uniform(rng_key, (num,), dtype)
    return jnp.broadcast_to(u[:, None], (num, factor)).reshape(-1)[:size].reshape(shape)


_COMPUTED_ONCE_SIZE = 256  # sites per chain from which a block's draw is computed once (kernels._random.computed_once)


def _draw(domain: Domain, factor: int, dtype, logit: jax.Array, rng_key: jax.Array) -> jax.Array:
    """Heat-bath values of a binary/spin block from its log-odds: one uniform against ``sigmoid(logit)`` per site."""
    up = block_uniforms(rng_key, logit.shape, factor, logit.dtype) < jax.nn.sigmoid(logit)
    return up.astype(dtype) if isinstance(domain, Binary) else jnp.where(up, 1, -1).astype(dtype)


def gradient_block_update(block: Block, variables: dict[str, Domain]) -> Update:
    """Heat-bath update of a block from one gradient (binary/spin energies, ``model.multilinear``).

    For an energy of degree at most two in site ``i`` (affine, as every pairwise or
    bilinear energy is, or with a diagonal term ``x_i^2``), the log-odds of the two
    values of the site given the rest are exactly the derivative of ``logp`` at the
    *midpoint* of the two values times their difference:

    .. math::  \\log p(x_i = b \\mid x_{-i}) - \\log p(x_i = a \\mid x_{-i})
               = (b - a)\\, \\partial_i \\log p(x)\\big|_{x_i = (a + b)/2},

    i.e. ``d logp / d x_i`` at ``x_i = 1/2`` for binary sites and ``2 d logp / d x_i``
    at ``s_i = 0`` for spins.  Sites of a block do not interact (the mixed second
    derivatives vanish), so setting all of them to their midpoints at once gives all
    of their conditionals from one gradient.  Using the midpoint rather than the
    current value keeps the update exact when parameters change after the structure
    was probed (e.g. a learned Boltzmann-machine ``W`` acquiring a diagonal).

    Each site is then drawn by comparing one uniform with ``sigmoid(logit)``.  When the
    block covers only part of a variable, only as many uniforms as the block needs are
    drawn (:func:`compact_factor`, :func:`block_uniforms`): half a lattice's worth per
    checkerboard colour instead of a full lattice's, which halves the random-number work
    of a sweep, the dominant cost of a lattice update.
    """
    names = tuple(block.indices)
    full = {n: len(block.indices[n]) == variables[n].size for n in names}
    masks = {n: jnp.asarray(block.masks[n]) for n in names}
    for n in names:
        if not isinstance(variables[n], (Binary, Spin)):
            raise TypeError(f"gradient updates need Binary/Spin variables; '{n}' is {variables[n]!r}")
    midpoints = {n: 0.5 if isinstance(variables[n], Binary) else 0.0 for n in names}
    factors = {n: 1 if full[n] else compact_factor([block.indices[n]], variables[n].size) for n in names}

    def _gradient_logits(position, logdensity_fn):
        relaxed = {}
        for n in names:
            current = position[n].astype(jnp.float32)
            mid = jnp.full(current.shape, midpoints[n], jnp.float32)
            relaxed[n] = mid if full[n] else jnp.where(masks[n], mid, current)
        grads = jax.grad(lambda r: logdensity_fn({**position, **r}))(relaxed)
        return {n: grads[n] if isinstance(variables[n], Binary) else 2.0 * grads[n] for n in names}

    def update(rng_key, position, logdensity_fn):
        if isinstance(logdensity_fn, SiteLogitsLogDensity):
            site_logits = logdensity_fn.site_logits(position)
            logits = {n: site_logits[n] for n in names}
        else:
            logits = _gradient_logits(position, logdensity_fn)
        keys = split_key(rng_key, len(names)) if len(names) > 1 else [rng_key]
        new_position = dict(position)
        for key, n in zip(keys, names):
            draw = functools.partial(_draw, variables[n], factors[n], position[n].dtype)
            new = computed_once(draw, logits[n], key) if logits[n].size >= _COMPUTED_ONCE_SIZE else draw(logits[n], key)
            new_position[n] = new if full[n] else jnp.where(masks[n], new, position[n])
        return new_position

    return update


def set_site(flat: jax.Array, flat_index: jax.Array, value: jax.Array) -> jax.Array:
    """``flat`` with entry ``flat_index`` replaced by ``value``, written as a masked select.

    Under ``vmap`` over chains with a per-chain (random) index, ``flat.at[i].set`` becomes
    a scatter, which XLA executes element by element on CPU; the select is vectorised.
    It costs O(size), no more than the energy evaluation that follows every site update.
    """
    return jnp.where(jnp.arange(flat.shape[0]) == flat_index, jnp.asarray(value, flat.dtype), flat)


def _site_logits(position, name, domain, flat_index, logdensity_fn):
    """log-density at every value of one site (the rest fixed): shape (K,)."""
    flat = position[name].reshape(-1)
    values = _values(domain)

    def at(value):
        return logdensity_fn({**position, name: set_site(flat, flat_index, value).reshape(domain.shape)})

    return jax.vmap(at)(values)


def enumeration_block_update(block: Block, variables: dict[str, Domain], batch_size: int = 64) -> Update:
    """Heat-bath update of a block by evaluating the log-density at every value of every site.

    Correct for any energy; costs ``num_sites_in_block * K`` log-density evaluations.
    """
    names = tuple(block.indices)
    indices = {n: jnp.asarray(block.indices[n]) for n in names}

    def update(rng_key, position, logdensity_fn):
        keys = split_key(rng_key, len(names))
        new_position = dict(position)
        for key, n in zip(keys, names):
            domain = variables[n]
            logits = jax.lax.map(
                lambda i, n=n, domain=domain: _site_logits(position, n, domain, i, logdensity_fn),
                indices[n],
                batch_size=min(batch_size, len(block.indices[n])),
            )
            choice = categorical(key, logits - jnp.max(logits, axis=1, keepdims=True))
            flat = new_position[n].reshape(-1)
            new_position[n] = flat.at[indices[n]].set(_values(domain)[choice]).reshape(domain.shape)
        return new_position

    return update


def stacked_block_sweep(blocks: list[Block], variables: dict[str, Domain], gradient: bool, batch_size: int = 64):
    """One pass over *all* blocks as a single ``lax.scan`` (compiled once for any number of blocks).

    Used instead of unrolled per-block updates when a model has many blocks (dense
    models: one block per site), where unrolling would make compilation time grow with
    the number of blocks.  ``gradient=True`` gives the update of
    :func:`gradient_block_update` with the block's masks stacked along the scan axis;
    ``gradient=False`` that of :func:`enumeration_block_update`, with each block's flat
    indices padded to a common length by an out-of-range index whose write is dropped.

    Returns ``sweep(rng_key, position, logdensity_fn, reverse=False) -> position``.
    """
    names = tuple(variables)
    num_blocks = len(blocks)
    if gradient:
        for n in names:
            if not isinstance(variables[n], (Binary, Spin)):
                raise TypeError(f"gradient updates need Binary/Spin variables; '{n}' is {variables[n]!r}")
        scanned = {
            n: jnp.asarray(np.stack([b.masks.get(n, np.zeros(variables[n].shape, bool)) for b in blocks])) for n in names
        }
        midpoints = {n: 0.5 if isinstance(variables[n], Binary) else 0.0 for n in names}
        factors = {
            n: compact_factor([b.indices[n] for b in blocks if n in b.indices], variables[n].size)
            if all(len(b.indices.get(n, ())) < variables[n].size for b in blocks)
            else 1
            for n in names
        }
    else:
        names = tuple(n for n in names if any(n in b.indices for b in blocks))
        width = {n: max(len(b.indices.get(n, ())) for b in blocks) for n in names}
        scanned = {}
        for n in names:
            table = np.full((num_blocks, width[n]), variables[n].size, dtype=np.int32)  # size = "no site"
            for k, b in enumerate(blocks):
                idx = b.indices.get(n, np.zeros(0, np.int32))
                table[k, : len(idx)] = idx
            scanned[n] = jnp.asarray(table)

    def body_gradient(logdensity_fn, position, inputs):
        key, masks = inputs
        relaxed = {n: jnp.where(masks[n], jnp.float32(midpoints[n]), position[n].astype(jnp.float32)) for n in names}
        grads = jax.grad(lambda r: logdensity_fn({**position, **r}))(relaxed)
        new_position = dict(position)
        for k, n in zip(split_key(key, len(names)), names):
            dtype = position[n].dtype
            logit = grads[n] if isinstance(variables[n], Binary) else 2.0 * grads[n]
            new = _draw(variables[n], factors[n], dtype, logit, k)
            new_position[n] = jnp.where(masks[n], new, position[n])
        return new_position, None

    def body_enumeration(logdensity_fn, position, inputs):
        key, indices = inputs
        new_position = dict(position)
        for k, n in zip(split_key(key, len(names)), names):
            domain = variables[n]
            idx = indices[n]
            safe = jnp.minimum(idx, domain.size - 1)
            logits = jax.lax.map(
                lambda i, n=n, domain=domain: _site_logits(position, n, domain, i, logdensity_fn),
                safe,
                batch_size=min(batch_size, width[n]),
            )
            choice = categorical(k, logits - jnp.max(logits, axis=1, keepdims=True))
            flat = new_position[n].reshape(-1)
            flat = flat.at[idx].set(_values(domain)[choice].astype(flat.dtype), mode="drop")
            new_position[n] = flat.reshape(domain.shape)
        return new_position, None

    body = body_gradient if gradient else body_enumeration

    def sweep(rng_key, position, logdensity_fn, reverse: bool = False):
        inputs = (split_key(rng_key, num_blocks), scanned)
        position, _ = jax.lax.scan(lambda p, x: body(logdensity_fn, p, x), position, inputs, reverse=reverse)
        return position

    return sweep


def site_sequence(variables: dict[str, Domain], reverse: bool = False) -> list[tuple[str, np.ndarray]]:
    """(variable, flat indices) runs of the systematic scan order."""
    runs = [(n, np.arange(d.size, dtype=np.int32)) for n, d in variables.items()]
    if reverse:
        runs = [(n, idx[::-1].copy()) for n, idx in runs[::-1]]
    return runs


def heat_bath_site(rng_key, position, name, domain, flat_index, logdensity_fn):
    """Draw one site from its full conditional."""
    logits = _site_logits(position, name, domain, flat_index, logdensity_fn)
    choice = categorical(rng_key, logits - jnp.max(logits))
    flat = position[name].reshape(-1)
    return {**position, name: set_site(flat, flat_index, _values(domain)[choice]).reshape(domain.shape)}


def systematic_scan(variables: dict[str, Domain], site_fn, reverse: bool = False):
    """Apply ``site_fn(key, carry, name, domain, i) -> carry`` to every site in order."""
    runs = site_sequence(variables, reverse)

    def sweep(rng_key, carry):
        keys = split_key(rng_key, len(runs))
        for key, (n, idx) in zip(keys, runs):
            domain = variables[n]

            def body(c, inp, n=n, domain=domain):
                i, k = inp
                return site_fn(k, c, n, domain, i), None

            carry, _ = jax.lax.scan(body, carry, (jnp.asarray(idx), split_key(key, len(idx))))
        return carry

    return sweep


class GlobalSites(NamedTuple):
    """Every site of every variable addressed by one global index (layout order).

    ``values[g, k]`` is the ``k``-th value of site ``g`` (float32, padded to the largest
    number of states) and ``num_states[g]`` its number of values.  Reading and writing a
    site are masked selects over all variables, so one update handles sites of any
    variable without ``lax.switch`` (which ``vmap`` turns into running every branch).
    """

    names: tuple
    offsets: tuple
    sizes: tuple
    values: jax.Array
    num_states: jax.Array

    @classmethod
    def build(cls, variables: dict[str, Domain]) -> GlobalSites:
        names = tuple(variables)
        sizes = tuple(variables[n].size for n in names)
        offsets = tuple(int(o) for o in np.concatenate([[0], np.cumsum(sizes)[:-1]]))
        kmax = max(variables[n].num_states for n in names)
        values = np.zeros((sum(sizes), kmax), np.float32)
        num_states = np.zeros(sum(sizes), np.int32)
        for n, off, size in zip(names, offsets, sizes):
            values[off : off + size, : variables[n].num_states] = variables[n].values
            num_states[off : off + size] = variables[n].num_states
        return cls(names, offsets, sizes, jnp.asarray(values), jnp.asarray(num_states))

    def get(self, position: dict, site: jax.Array) -> jax.Array:
        """Value (float32) at global ``site``."""
        total = jnp.zeros((), jnp.float32)
        for n, off, size in zip(self.names, self.offsets, self.sizes):
            flat = position[n].reshape(-1).astype(jnp.float32)
            total = total + jnp.sum(jnp.where(jnp.arange(size) == site - off, flat, 0.0))
        return total

    def set(self, position: dict, site: jax.Array, value: jax.Array) -> dict:
        """``position`` with global ``site`` set to ``value`` (cast to each variable's dtype)."""
        out = dict(position)
        for n, off in zip(self.names, self.offsets):
            x = position[n]
            out[n] = set_site(x.reshape(-1), site - off, value).reshape(x.shape)
        return out


def heat_bath_global(rng_key, position, sites: GlobalSites, site, logdensity_fn):
    """Draw global ``site`` from its full conditional (padded values get probability 0)."""
    row = sites.values[site]
    logits = jax.vmap(lambda v: logdensity_fn(sites.set(position, site, v)))(row)
    logits = jnp.where(jnp.arange(row.shape[0]) < sites.num_states[site], logits, -jnp.inf)
    choice = categorical(rng_key, logits - jnp.max(logits))
    return sites.set(position, site, row[choice])


def random_scan(variables: dict[str, Domain], site_fn, num_updates: int, global_fn=None):
    """Apply updates at ``num_updates`` uniformly random sites (with replacement).

    ``site_fn(key, carry, name, domain, i)`` updates flat index ``i`` of variable
    ``name``; with several variables and ``global_fn(key, carry, sites, g)`` given, the
    update of global site ``g`` is used instead (no ``lax.switch``, see
    :class:`GlobalSites`).
    """
    names = tuple(variables)
    sizes = np.array([variables[n].size for n in names])
    owner = jnp.asarray(np.repeat(np.arange(len(names)), sizes), dtype=jnp.int32)
    local = jnp.asarray(np.concatenate([np.arange(s) for s in sizes]), dtype=jnp.int32)
    total = int(sizes.sum())
    sites = GlobalSites.build(variables) if (global_fn is not None and len(names) > 1) else None

    def sweep(rng_key, carry):
        key_sites, key_updates = split_key(rng_key)
        chosen = randint(key_sites, (num_updates,), 0, total)
        branches = [(lambda k, c, i, n=n: site_fn(k, c, n, variables[n], i)) for n in names]

        def body(c, inp):
            site, k = inp
            if sites is not None:
                return global_fn(k, c, sites, site), None
            if len(branches) == 1:
                return branches[0](k, c, local[site]), None
            return jax.lax.switch(owner[site], branches, k, c, local[site]), None

        carry, _ = jax.lax.scan(body, carry, (chosen, split_key(key_updates, num_updates)))
        return carry

    return sweep


def count_changed(old: dict, new: dict) -> jax.Array:
    return sum(jnp.sum(old[n] != new[n]) for n in old).astype(jnp.int32)
