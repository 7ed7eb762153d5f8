"""Interaction structure of an energy: probing, multilinearity and block colouring.

Sites
    All variables of a model are laid out in one flat *site* space: the sites of the
    first declared variable (in row-major order), then those of the second, and so on.

Multilinearity (the gradient trick)
    If the energy, as written, is affine in each binary/spin site when the others are
    held fixed (true of every pairwise or bilinear energy), then flipping site ``i``
    changes the energy by exactly ``dE/dx_i * (x_i' - x_i)``, so the conditionals of
    all sites of a block come from one ``jax.grad``.  :func:`check_multilinear`
    verifies this numerically: at a few random states and randomly perturbed
    parameters it compares every single-site flip difference (all sites if there are
    at most 4096, a random subset otherwise) with the gradient.  Energies that are
    not differentiable in the state (integer casts, comparisons, indexing by the
    state) give a zero or wrong gradient and fail the check, so the kernel falls back
    to evaluating the energy at each value of each site.  Categorical variables are
    integer-encoded and always use the fallback.

Interaction graph
    Sites ``i`` and ``j`` interact if the energy difference of a change at ``i``
    depends on the value at ``j``.  For multilinear energies this is the sparsity of
    the Hessian of the energy's multilinear extension, read off with batched
    Hessian-vector products at random continuous points (cost: ``n`` HVPs, i.e. about
    ``n`` energy-gradient evaluations, done in chunks of 256).  Otherwise it is the
    second difference ``E(x^{ij}) - E(x^i) - E(x^j) + E(x)`` at random states
    (cost: ``n^2`` energy evaluations; refused above ``max_sites_fd`` sites, where you
    should pass ``blocks=`` explicitly).  Probing is repeated at the given
    parameters and at randomly perturbed ones (so a coupling that happens to be zero
    now is still found) and the union of the edges is kept.

Colouring
    Greedy colouring in site order: each site gets the smallest colour unused by its
    already-coloured neighbours.  A colour class is a set of mutually non-interacting
    sites, i.e. a block that Gibbs can update in parallel.  On a 2D lattice this is
    the checkerboard (two colours for even periodic sizes), on an RBM it is {v}, {h}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Block", "SiteLayout", "greedy_coloring", "probe_interactions", "check_multilinear"]


class SiteLayout(NamedTuple):
    """Flat site layout of a model's variables."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    offsets: tuple[int, ...]

    @property
    def num_sites(self) -> int:
        return int(sum(self.sizes))

    def owner(self, site: int) -> tuple[str, int]:
        """(variable name, flat index inside the variable) of a global site."""
        k = int(np.searchsorted(np.asarray(self.offsets), site, side="right")) - 1
        return self.names[k], site - self.offsets[k]


class Block(NamedTuple):
    """A set of mutually conditionally independent sites.

    ``indices[name]`` holds the flat indices of the block's sites inside variable
    ``name`` (variables without sites in the block are absent); ``masks[name]`` is
    the same set as a boolean array of the variable's shape.
    """

    indices: dict[str, np.ndarray]
    masks: dict[str, np.ndarray]

    @property
    def num_sites(self) -> int:
        return int(sum(len(v) for v in self.indices.values()))


def make_layout(variables: dict) -> SiteLayout:
    names = tuple(variables)
    sizes = tuple(variables[n].size for n in names)
    offsets = tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes)[:-1]]))
    return SiteLayout(names, sizes, offsets)


def blocks_from_colors(colors: np.ndarray, layout: SiteLayout, variables: dict) -> list[Block]:
    """Turn a colour per global site into a list of :class:`Block`."""
    blocks = []
    for c in range(int(colors.max()) + 1 if colors.size else 0):
        indices, masks = {}, {}
        for name, size, off in zip(layout.names, layout.sizes, layout.offsets):
            idx = np.nonzero(colors[off : off + size] == c)[0]
            if idx.size:
                indices[name] = idx.astype(np.int32)
                mask = np.zeros(size, dtype=bool)
                mask[idx] = True
                masks[name] = mask.reshape(variables[name].shape)
        blocks.append(Block(indices, masks))
    return blocks


def greedy_coloring(num_sites: int, edges: np.ndarray) -> np.ndarray:
    """Greedy colouring in site order. ``edges`` is an ``(m, 2)`` int array."""
    neighbours: list[list[int]] = [[] for _ in range(num_sites)]
    for i, j in np.asarray(edges, dtype=np.int64).reshape(-1, 2):
        if i != j:
            neighbours[i].append(int(j))
            neighbours[j].append(int(i))
    colors = np.full(num_sites, -1, dtype=np.int64)
    for i in range(num_sites):
        used = {colors[j] for j in neighbours[i] if colors[j] >= 0}
        c = 0
        while c in used:
            c += 1
        colors[i] = c
    return colors


# --------------------------------------------------------------------------------------
# flat <-> state helpers used by the probes
# --------------------------------------------------------------------------------------
def _unflatten(flat: jax.Array, layout: SiteLayout, variables: dict) -> dict:
    return {
        n: flat[off : off + size].reshape(variables[n].shape)
        for n, size, off in zip(layout.names, layout.sizes, layout.offsets)
    }


def _perturb_params(rng_key: jax.Array, params: Any) -> Any:
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(rng_key, max(len(leaves), 1))
    out = []
    for k, leaf in zip(keys, leaves):
        arr = jnp.asarray(leaf)
        if jnp.issubdtype(arr.dtype, jnp.floating):
            scale = jnp.mean(jnp.abs(arr)) + 1.0
            arr = arr + 0.5 * scale * jax.random.normal(k, arr.shape, arr.dtype)
        out.append(arr)
    return jax.tree.unflatten(treedef, out)


def _probe_params(rng_key: jax.Array, params: Any, energy_fn: Callable, variables: dict) -> list:
    """The given params plus a perturbed copy, if the perturbed copy gives finite energies."""
    candidates = [params]
    perturbed = _perturb_params(rng_key, params)
    state = {n: d.random(jax.random.fold_in(rng_key, 1)) for n, d in variables.items()}
    try:
        if bool(jnp.isfinite(energy_fn(perturbed, state))):
            candidates.append(perturbed)
    except Exception:  # noqa: BLE001 - a perturbation the energy cannot take is simply skipped
        pass
    return candidates


def _random_flat_state(rng_key, variables, layout):
    parts = [variables[n].random(jax.random.fold_in(rng_key, i)).reshape(-1) for i, n in enumerate(layout.names)]
    return jnp.concatenate([p.astype(jnp.float32) for p in parts])


def _values_table(variables: dict, layout: SiteLayout) -> tuple[np.ndarray, np.ndarray]:
    """Per-site number of states and (padded) table of values."""
    kmax = max(variables[n].num_states for n in layout.names)
    table = np.zeros((layout.num_sites, kmax))
    nstates = np.zeros(layout.num_sites, dtype=np.int32)
    for n, size, off in zip(layout.names, layout.sizes, layout.offsets):
        vals = variables[n].values
        table[off : off + size, : len(vals)] = vals
        nstates[off : off + size] = len(vals)
    return nstates, table


def _other_value(rng_key, flat, nstates, table):
    """For every site, a uniformly random value different from the current one."""
    current = jnp.argmax(jnp.asarray(table) == flat[:, None], axis=1)
    shift = jax.random.randint(rng_key, flat.shape, 1, jnp.asarray(nstates))
    new_index = (current + shift) % jnp.asarray(nstates)
    return jnp.take_along_axis(jnp.asarray(table, jnp.float32), new_index[:, None], axis=1)[:, 0]


# --------------------------------------------------------------------------------------
# multilinearity
# --------------------------------------------------------------------------------------
def check_multilinear(
    rng_key: jax.Array,
    energy_fn: Callable,
    params: Any,
    variables: dict,
    num_probes: int = 3,
    max_sites: int = 4096,
    rtol: float = 1e-3,
) -> bool:
    """Whether single-site energy differences equal gradient times value change.

    Only binary/spin variables can pass (categorical states are integer-encoded).
    """
    from ugm_infer.domains import Categorical

    if any(isinstance(d, Categorical) for d in variables.values()):
        return False
    layout = make_layout(variables)
    n = layout.num_sites
    nstates, table = _values_table(variables, layout)

    def flat_energy(p, flat):
        return energy_fn(p, _unflatten(flat, layout, variables))

    @jax.jit
    def discrepancy(p, flat, other, sites):
        e0, grad = jax.value_and_grad(flat_energy, argnums=1)(p, flat)
        deltas = jax.lax.map(lambda i: flat_energy(p, flat.at[i].set(other[i])) - e0, sites, batch_size=256)
        predicted = grad[sites] * (other[sites] - flat[sites])
        finite = jnp.all(jnp.isfinite(deltas)) & jnp.all(jnp.isfinite(predicted))
        scale = jnp.max(jnp.abs(deltas)) + 1e-3 * (jnp.abs(e0) + 1.0)
        return finite, jnp.max(jnp.abs(deltas - predicted)) / scale

    key_params, key_probe = jax.random.split(rng_key)
    for p in _probe_params(key_params, params, energy_fn, variables):
        for r in range(num_probes):
            k_state, k_other, k_sites = jax.random.split(jax.random.fold_in(key_probe, r), 3)
            flat = _random_flat_state(k_state, variables, layout)
            other = _other_value(k_other, flat, nstates, table)
            sites = jnp.arange(n)
            if n > max_sites:
                sites = jax.random.choice(k_sites, n, (max_sites,), replace=False)
            finite, err = discrepancy(p, flat, other, sites)
            if not bool(finite) or float(err) > rtol:
                return False
    return True


# --------------------------------------------------------------------------------------
# interaction graph
# --------------------------------------------------------------------------------------
def probe_interactions(
    rng_key: jax.Array,
    energy_fn: Callable,
    params: Any,
    variables: dict,
    multilinear: bool,
    num_probes: int = 2,
    max_sites_fd: int = 2048,
    chunk: int = 256,
) -> np.ndarray:
    """Edges ``(m, 2)`` (global site indices, ``i < j``) of the interaction graph."""
    layout = make_layout(variables)
    n = layout.num_sites
    nstates, table = _values_table(variables, layout)
    if not multilinear and n > max_sites_fd:
        raise ValueError(
            f"automatic block detection for a non-multilinear energy costs n^2 = {n}^2 energy "
            f"evaluations; it is refused above {max_sites_fd} sites. Pass `blocks=` to EnergyModel "
            "(e.g. blocks=[{'x': mask_a}, {'x': mask_b}]) or declare multilinear=True if it is."
        )

    def flat_energy(p, flat):
        return energy_fn(p, _unflatten(flat, layout, variables))

    @jax.jit
    def hessian_rows(p, flat, rows):
        grad_fn = jax.grad(flat_energy, argnums=1)
        basis = jax.nn.one_hot(rows, n, dtype=jnp.float32)
        return jax.vmap(lambda v: jax.jvp(lambda x: grad_fn(p, x), (flat,), (v,))[1])(basis)

    def deltas_at(p, x, other):
        e = flat_energy(p, x)
        return jax.vmap(lambda i: flat_energy(p, x.at[i].set(other[i])) - e)(jnp.arange(n))

    @jax.jit
    def second_differences(p, flat, other, rows):
        base = deltas_at(p, flat, other)
        moved = jax.vmap(lambda j: flat.at[j].set(other[j]))(rows)
        return jax.vmap(lambda x: deltas_at(p, x, other))(moved) - base[None, :], jnp.max(jnp.abs(base))

    adjacency = np.zeros((n, n), dtype=bool) if n <= 8192 else None
    edge_sets: list[np.ndarray] = []
    key_params, key_probe = jax.random.split(rng_key)
    starts = list(range(0, n, chunk))
    for p in _probe_params(key_params, params, energy_fn, variables):
        for r in range(num_probes):
            k_state, k_other = jax.random.split(jax.random.fold_in(key_probe, r))
            if multilinear:
                # random continuous point: generic for the multilinear extension
                flat = jax.random.uniform(k_state, (n,), minval=-1.0, maxval=1.0)
            else:
                flat = _random_flat_state(k_state, variables, layout)
                other = _other_value(k_other, flat, nstates, table)
            for start in starts:
                # pad the last chunk so every call has the same shape (one compilation)
                rows = jnp.minimum(jnp.arange(start, start + chunk), n - 1) if n > chunk else jnp.arange(n)
                if multilinear:
                    block = np.asarray(hessian_rows(p, flat, rows))
                    threshold = 1e-6 * max(float(np.abs(block).max()) if block.size else 0.0, 1e-12)
                else:
                    block, scale = second_differences(p, flat, other, rows)
                    block = np.asarray(block)
                    threshold = 1e-4 * max(float(scale), 1.0)
                i, j = np.nonzero(np.abs(block) > threshold)
                _record(np.asarray(rows)[i], j, adjacency, edge_sets)
    if adjacency is not None:
        i, j = np.nonzero(np.triu(adjacency | adjacency.T, k=1))
        return np.stack([i, j], axis=1)
    if not edge_sets:
        return np.zeros((0, 2), dtype=np.int64)
    edges = np.concatenate(edge_sets)
    edges = np.sort(edges, axis=1)
    edges = edges[edges[:, 0] != edges[:, 1]]
    return np.unique(edges, axis=0)


def _record(rows, cols, adjacency, edge_sets):
    if adjacency is not None:
        adjacency[rows, cols] = True
    else:
        edge_sets.append(np.stack([rows, cols], axis=1))
