"""Potts models: pairwise categorical models (generalised Potts / Boltzmann models of sequences).

Sites ``x_i`` take ``q`` states ``{0, ..., q-1}``.  With one-hot encodings
:math:`\\sigma_i = \\mathrm{onehot}(x_i) \\in \\{0,1\\}^q`:

dense couplings (``edges=None``)
    .. math::  E(x) = -\\sum_{i<j} J_{ij}(x_i, x_j) - \\sum_i h_i(x_i)
               = -\\tfrac12 \\sum_{i,j} \\sigma_i^\\top J_{ij} \\sigma_j - \\sum_i h_i^\\top \\sigma_i,

    ``params = {"J": (n, n, q, q), "h": (n, q)}`` with ``J[i, j, a, b] == J[j, i, b, a]``
    and ``J[i, i] == 0`` (the second form is why the symmetry is required).
edge list (``edges`` an ``(m, 2)`` int array)
    .. math::  E(x) = -\\sum_{e=(i,j)} J_e(x_i, x_j) - \\sum_i h_i(x_i),

    ``params = {"J": (m, q, q), "h": (n, q)}``; ``J[e, a, b]`` couples state ``a`` of
    the edge's first site with state ``b`` of its second.

The energy is written with one-hot encodings (a matrix product of the flattened
``(n q)`` encoding), so it vectorises over chains and is multilinear in the one-hot
encoding; the generic Gibbs kernel evaluates the ``q`` values of each site
(``multilinear=False``, categorical variables).  Blocks are declared: single sites
for dense couplings, the greedy colouring of the graph for an edge list.

The parametrisation has gauge freedom (adding a function of ``x_i`` alone to
``J_ij`` and subtracting it from ``h_i`` leaves the energy unchanged); no gauge is
imposed (:func:`ugm_infer.applications.dca.zero_sum_gauge` fixes the zero-sum gauge).

Fast Gibbs sampling
    :meth:`Potts.logdensity_fn` returns a :class:`PottsLogDensity`, a log-density
    that also carries ``beta``, ``J`` and ``h``.  The single-site heat-bath kernel
    :data:`potts_gibbs` recognises it and draws site ``i`` from its full conditional

    .. math::  p(x_i = a \\mid x_{-i}) \\propto \\exp\\big(\\beta\\,[h_i(a) +
               \\textstyle\\sum_{j \\ne i} J_{ij}(a, x_j)]\\big)

    (the local field, Gibbs sampling of Geman & Geman 1984) in O(n q) per site (O(d q)
    for an edge list of maximum degree ``d``) instead of ``q`` full energies of cost
    O((n q)^2) each; any other ``logdensity_fn`` (e.g. a tempered bridge) falls back
    to ``q`` log-density evaluations per site (exact, slower).  Every learner of
    :mod:`ugm_infer.learn` accepts it as ``kernel=``.

    For :func:`lattice_potts` with even sizes the block-Gibbs kernel
    (``ui.kernels.gibbs``, the default of ``ui.sample`` and the learners) recognises
    the same log-density and runs the four-sub-lattice sweep of
    :mod:`ugm_infer.kernels.potts_lattice`.

References
----------
Potts, R. B. (1952). Some generalized order-disorder transformations. Proc. Camb.
Phil. Soc. 48, 106-109.  Wu, F. Y. (1982). The Potts model. Rev. Mod. Phys. 54, 235.
Morcos, F. et al. (2011). Direct-coupling analysis of residue coevolution captures
native contacts across many protein families. PNAS 108, E1293-E1301.
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE TPAMI 6, 721-741.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax import GenerateSamplingAPI
from blackjax.base import SamplingAlgorithm

from ugm_infer import _random
from ugm_infer.domains import Categorical
from ugm_infer.kernels.potts_lattice import PottsLogDensity
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
    bound_algorithm,
    check_edges,
    check_int,
    check_key,
    check_params,
    check_scale,
    check_symmetric,
    check_zero_diagonal,
    colour_blocks,
    compute_dtype,
    random_params,
    symmetric_offdiagonal,
)
from ugm_infer.models.lattice import _check_lattice, lattice_colors, lattice_edges

__all__ = [
    "Potts",
    "PottsLogDensity",
    "PottsGibbsState",
    "PottsGibbsInfo",
    "potts",
    "lattice_potts",
    "potts_gibbs",
    "dense_local_field",
]


class Potts(EnergyModel):
    """Pairwise categorical model (built by :func:`potts` and :func:`lattice_potts`).

    One variable ``"x"`` of shape ``(num_sites,)`` with ``num_states`` categories.

    Attributes
    ----------
    num_sites, num_states
        ``n`` and ``q``.
    edges
        The validated read-only ``(m, 2)`` edge list, or ``None`` for dense couplings.
    """

    def __init__(
        self,
        num_sites: int,
        num_states: int,
        *,
        edges: Any = None,
        dtype: Any = jnp.int32,
        blocks: list | None = None,
        name: str | None = None,
    ):
        n = check_int(num_sites, "num_sites")
        q = check_int(num_states, "num_states", minimum=2)
        self._n = n
        self.num_states = q
        self.edges = None if edges is None else check_edges(edges, n)
        if blocks is None:
            if self.edges is None:
                blocks = [{"x": np.array([i])} for i in range(n)]
            else:
                blocks = colour_blocks(n, self.edges, "x")
        if self.edges is None:
            energy = _dense_energy(n, q)
        else:
            energy = _edge_energy(self.edges, q)
        super().__init__(
            energy,
            {"x": Categorical((n,), q, dtype)},
            blocks,
            multilinear=False,
            validate_params=self._check_params,
            name=name or ("potts" if self.edges is None else "potts(edges)"),
        )

    @property
    def max_degree(self) -> int:
        """Largest number of neighbours of a site."""
        n = self._n
        if self.edges is None:
            return n - 1
        if self.edges.size == 0:
            return 0
        return int(np.bincount(self.edges.reshape(-1), minlength=n).max())

    def _check_params(self, params: Any) -> None:
        n, q = self._n, self.num_states
        if self.edges is None:
            check_params(
                self.name,
                params,
                {"J": (n, n, q, q), "h": (n, q)},
                ["(num_sites, num_sites, num_states, num_states)", "(num_sites, num_states)"],
            )
            check_symmetric(self.name, "J", params["J"], (1, 0, 3, 2), "J[i, j, a, b] == J[j, i, b, a]")
            check_zero_diagonal(self.name, "J", params["J"], "J[i, i] == 0: no self-couplings")
        else:
            check_params(
                self.name,
                params,
                {"J": (len(self.edges), q, q), "h": (n, q)},
                ["(num_edges, num_states, num_states)", "(num_sites, num_states)"],
            )

    def logdensity_fn(self, params: Any, beta: Any = 1.0) -> PottsLogDensity:
        """``x -> -beta E(params, x)`` as a :class:`PottsLogDensity` (read by :data:`potts_gibbs`)."""
        fn = super().logdensity_fn(params, beta)
        J = jnp.asarray(params["J"])
        if self.edges is None:
            J = symmetric_offdiagonal(J, (1, 0, 3, 2))
        lattice = getattr(self, "lattice_potts_shape", None)
        return PottsLogDensity(fn, J, jnp.asarray(params["h"]), beta, self._structure_key, lattice)

    @property
    def _structure_key(self) -> tuple:
        return (self._n, self.num_states, None if self.edges is None else self.edges.tobytes())

    def init_params(self, rng_key: jax.Array, scale: float = 1.0, field_scale: float = 0.0, dtype: Any = jnp.float32):
        """Random parameters.

        Coupling entries are i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2 / d)` with
        :math:`d` the maximum degree (``n - 1`` when dense), so the coupling part of
        each local field has standard deviation at most ``scale`` whatever the graph;
        dense ``J`` is made symmetric (``J[j, i] = J[i, j].T``) with ``J[i, i] = 0``.
        Fields are :math:`\\mathcal N(0, \\mathrm{field\\_scale}^2)` (zero by default).

        Returns
        -------
        ``{"J": (n, n, q, q) or (m, q, q), "h": (n, q)}``, float32.
        """
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        field_scale = check_scale(field_scale, "field_scale")
        n, q = self._n, self.num_states
        std = scale / np.sqrt(max(self.max_degree, 1))
        if self.edges is None:
            spec = (("J", (n, n, q, q), "symmetric"), ("h", (n, q), "normal"))
        else:
            spec = (("J", (len(self.edges), q, q), "normal"), ("h", (n, q), "normal"))
        return random_params(rng_key, (std, field_scale), spec, jnp.dtype(dtype))


def _dense_energy(n: int, q: int):
    def energy(params, state):
        J, h = symmetric_offdiagonal(params["J"], (1, 0, 3, 2)), params["h"]  # learning keeps J valid
        onehot = jax.nn.one_hot(state["x"].astype(jnp.int32), q, dtype=compute_dtype(J))  # (n, q)
        flat = onehot.reshape(n * q)
        pair = jnp.dot(flat, jnp.dot(J.transpose(0, 2, 1, 3).reshape(n * q, n * q), flat))
        return -0.5 * pair - jnp.sum(h * onehot)

    return energy


def _periodic_grid(edges: np.ndarray) -> tuple[int, int] | None:
    """``(height, width)`` when ``edges`` is exactly :func:`lattice_edges` of a torus with both sizes >= 3, else ``None``."""
    m = len(edges)
    if m < 18 or m % 2:
        return None
    n = m // 2
    width = int(edges[n, 1])  # the vertical bond of site 0 reaches site `width`
    if width < 3 or n % width or n // width < 3:
        return None
    height = n // width
    return (height, width) if np.array_equal(edges, lattice_edges(height, width, True)) else None


def _edge_energy(edges: np.ndarray, q: int):
    i_idx, j_idx = edges[:, 0], edges[:, 1]
    bond_offsets = np.arange(len(edges), dtype=np.int32) * np.int32(q * q)
    grid = _periodic_grid(edges)

    def pair_values(x):
        """``(x_i, x_j)`` of every bond, in the order of ``edges``."""
        if grid is None:
            return x[i_idx], x[j_idx]
        # a periodic lattice's bonds (lattice_edges: every site's right, then every site's lower
        # neighbour) read by shifts of the lattice, not by gathers
        lattice = x.reshape(grid)
        right, down = jnp.roll(lattice, -1, axis=1).reshape(-1), jnp.roll(lattice, -1, axis=0).reshape(-1)
        return jnp.concatenate([x, x]), jnp.concatenate([right, down])

    def energy(params, state):
        # each bond's coupling and each site's field read at the configuration's values: one
        # gather per bond and per site, from the flattened tables (one-hot products cost q^2 per
        # bond; the flat index keeps the gathers' transpose, a learner's gradient, one scatter-add
        # of single indices)
        J, h = params["J"], params["h"]
        dtype = compute_dtype(J)
        x = state["x"].astype(jnp.int32)
        first, second = pair_values(x)
        pair = J.reshape(-1).astype(dtype).at[bond_offsets + first * q + second].get(mode="promise_in_bounds")
        site_index = jax.lax.iota(jnp.int32, x.shape[0]) * q + x
        field = h.reshape(-1).astype(dtype).at[site_index].get(mode="promise_in_bounds")
        return -jnp.sum(pair) - jnp.sum(field)

    return energy


def potts(num_sites: int, num_states: int, *, edges: Any = None, dtype: Any = jnp.int32) -> Potts:
    """Pairwise categorical (Potts) model on a dense or sparse graph.

    .. math::  E(x) = -\\sum_{i<j} J_{ij}(x_i, x_j) - \\sum_i h_i(x_i)

    Parameters
    ----------
    num_sites
        Number of sites ``n``.
    num_states
        Number of states ``q >= 2`` of every site.
    edges
        ``None`` for dense couplings ``params["J"]`` of shape ``(n, n, q, q)``
        (``J[i, j, a, b] == J[j, i, b, a]``, ``J[i, i] == 0``), or an ``(m, 2)`` int
        array of distinct pairs with ``params["J"]`` of shape ``(m, q, q)``.
    dtype
        Storage dtype of states (``int32``; ``int8`` for ``q <= 127`` saves memory).

    Returns
    -------
    A :class:`Potts` model with variable ``"x"`` = ``Categorical((n,), q)``.

    Examples
    --------
    >>> import jax.numpy as jnp, ugm_infer as ui
    >>> model = ui.models.potts(2, 3, edges=[[0, 1]])
    >>> params = {"J": jnp.eye(3)[None], "h": jnp.zeros((2, 3))}
    >>> float(model.energy(params, {"x": jnp.array([2, 2])}))
    -1.0
    """
    return Potts(num_sites, num_states, edges=edges, dtype=dtype)


def lattice_potts(height: int, width: int, num_states: int, *, periodic: bool = False, dtype: Any = jnp.int32) -> Potts:
    """Potts model on a ``height x width`` lattice, one ``(q, q)`` coupling per bond.

    Equivalent to ``potts(height * width, num_states, edges=lattice_edges(height,
    width, periodic))``: the variable ``"x"`` has shape ``(height * width,)`` with
    row-major site numbering (``x.reshape(height, width)`` is the image), and
    ``params = {"J": (m, q, q), "h": (height * width, q)}`` with the bonds ordered as
    in :func:`~ugm_infer.models.lattice_edges`.  Blocks are the checkerboard (3 colours from
    :func:`~ugm_infer.models.lattice_colors` for an odd periodic size).  For the standard ferromagnetic Potts model set
    ``J[e] = K * eye(q)``.
    """
    height, width, periodic = _check_lattice(height, width, periodic)
    colors = lattice_colors(height, width, periodic).reshape(-1)
    blocks = [{"x": colors == c} for c in range(int(colors.max()) + 1)]
    model = Potts(
        height * width,
        num_states,
        edges=lattice_edges(height, width, periodic),
        dtype=dtype,
        blocks=blocks,
        name=f"lattice_potts({height}x{width}, {'periodic' if periodic else 'open'})",
    )
    model.height, model.width, model.periodic = height, width, periodic
    model.lattice_potts_shape = (height, width, periodic)  # read by the block-Gibbs kernel's lattice sweep
    return model


# ----------------------------------------------------------------------------------
# fast single-site Gibbs kernel
# ----------------------------------------------------------------------------------
#: the dense local field adds the couplings of this many other sites in straight-line code
DENSE_GROUP = 16
#: up to this many states the inverse-CDF draw adds the partial sums one by one
UNROLL_STATES = 32


class PottsGibbsState(NamedTuple):
    """State of one :data:`potts_gibbs` chain: ``position = {"x": (n,)}``."""

    position: dict


class PottsGibbsInfo(NamedTuple):
    """Per-step diagnostics.

    num_changed
        Number of sites whose state differs after the step (dead chains show zeros).
    """

    num_changed: jax.Array


def _neighbour_tables(n: int, edges: np.ndarray):
    """Padded incidence tables of an edge list: neighbour, edge id, "site is the edge's first", mask."""
    deg = np.bincount(edges.reshape(-1), minlength=n) if edges.size else np.zeros(n, np.int64)
    d = max(int(deg.max()) if n else 0, 1)
    nbr = np.zeros((n, d), np.int32)
    eid = np.zeros((n, d), np.int32)
    first = np.zeros((n, d), bool)
    mask = np.zeros((n, d), bool)
    fill = np.zeros(n, np.int64)
    for e, (i, j) in enumerate(edges):
        for a, b, is_first in ((i, j, True), (j, i, False)):
            k = fill[a]
            nbr[a, k], eid[a, k], first[a, k], mask[a, k] = b, e, is_first, True
            fill[a] += 1
    return nbr, eid, first, mask


def dense_local_field(J: jax.Array, h: jax.Array, x: jax.Array, i: jax.Array) -> jax.Array:
    """Site ``i``'s local field ``h_i(a) + sum_j J_ij(a, x_j)`` (``(q,)``) of a dense Potts model, one chain.

    ``J`` is ``(n, n, q, q)`` symmetrised with a zero diagonal, so ``J[i, j, a, x_j] =
    J[j, i, x_j, a]``: the field adds one contiguous row of ``q`` couplings per other
    site, one site after the other.  XLA fuses those additions with the row reads into
    one loop (vectorised over chains under ``jax.vmap``); a single gather of all ``n``
    rows would first write them out, ``n q`` floats per chain and site.  The sites come
    ``DENSE_GROUP`` at a time, in straight-line code inside a loop over the groups.
    """
    n, q = J.shape[0], J.shape[-1]
    column = jax.lax.dynamic_index_in_dim(J, i, axis=1, keepdims=False)  # (n, q, q): [j, x_j, a]
    if n <= DENSE_GROUP:
        field = h[i]
        for j in range(n):
            field = field + column[j, x[j]]
        return field
    groups = -(-n // DENSE_GROUP)
    pad = groups * DENSE_GROUP - n  # padding sites with zero couplings
    column = jnp.pad(column, ((0, pad), (0, 0), (0, 0))).reshape(groups, DENSE_GROUP, q, q)
    values = jnp.pad(x, (0, pad)).reshape(groups, DENSE_GROUP)

    def group(g, field):
        rows, xs = column[g], values[g]
        for k in range(DENSE_GROUP):
            field = field + rows[k, xs[k]]
        return field

    return jax.lax.fori_loop(0, groups, group, h[i])


def gibbs_init(position: dict, logdensity_fn: Callable | None = None) -> PottsGibbsState:
    """Wrap a position ``{"x": (n,)}``; ``logdensity_fn`` is accepted for the BlackJAX signature."""
    del logdensity_fn
    if not isinstance(position, dict) or "x" not in position:
        raise ValueError("`position` must be a dict {'x': (num_sites,)} (a Potts state)")
    return PottsGibbsState(dict(position))


def gibbs_build_kernel(model: Potts, scan: str = "systematic", num_sweeps: int = 1):
    """Single-site heat-bath kernel ``kernel(rng_key, state, logdensity_fn) -> (state, info)``.

    One sweep visits the ``n`` sites (in order for ``scan="systematic"``; ``n`` uniformly
    random sites for ``scan="random"``) and redraws each from its full conditional.
    When ``logdensity_fn`` is the :class:`PottsLogDensity` of this model (what
    :meth:`Potts.logdensity_fn` returns, and so what every learner passes), the
    conditional's logits are the local field :math:`\\beta\\,(h_i(a) + \\sum_{j \\ne i}
    J_{ij}(a, x_j))`, a gather of ``n`` (dense: the contiguous rows
    :math:`J_{ji}(x_j, \\cdot)` of the symmetrised couplings) or ``d`` (edge list) rows of
    ``q`` couplings; otherwise they are ``q`` log-density evaluations (exact, slower).
    The new value is drawn by inverse CDF from one uniform per site.  Each site update
    leaves :math:`p(x)` invariant, so both scans do.  Vectorise over chains
    with ``jax.vmap`` (the learners do).

    Parameters
    ----------
    model
        The :class:`Potts` model (fixes ``n``, ``q`` and the graph).
    scan
        ``"systematic"`` or ``"random"``.
    num_sweeps
        Sweeps per step (a positive int).
    """
    if not isinstance(model, Potts):
        raise TypeError(f"`model` must be a Potts model (ui.models.potts(...)), got {type(model).__name__}")
    if scan not in ("systematic", "random"):
        raise ValueError(f"`scan` must be 'systematic' or 'random', got {scan!r}")
    num_sweeps = check_int(num_sweeps, "num_sweeps")
    n, q = model.num_sites, model.num_states
    key_struct = model._structure_key
    dense = model.edges is None
    if not dense:
        nbr, eid, first, mask = (jnp.asarray(t) for t in _neighbour_tables(n, model.edges))
    states = jnp.arange(q)

    def fast_logits(ld: PottsLogDensity, x, i):
        if dense:
            field = dense_local_field(ld.J, ld.h, x, i)
        else:
            xn = x[nbr[i]]  # (d,)
            Je = ld.J[eid[i]]  # (d, q, q)
            as_first = Je[jnp.arange(Je.shape[0]), :, xn]  # J_e(a, x_j): site i is the edge's first
            as_second = Je[jnp.arange(Je.shape[0]), xn, :]  # J_e(x_j, a)
            rows = jnp.where(first[i][:, None], as_first, as_second)
            field = ld.h[i] + jnp.sum(jnp.where(mask[i][:, None], rows, 0.0), axis=0)
        return ld.beta * field

    def kernel(rng_key, state: PottsGibbsState, logdensity_fn: Callable):
        fast = isinstance(logdensity_fn, PottsLogDensity) and logdensity_fn.structure == key_struct
        x0 = state.position["x"]
        dtype = x0.dtype

        def site_logits(x, i):
            if fast:
                return fast_logits(logdensity_fn, x.astype(jnp.int32), i)
            return jax.vmap(lambda a: logdensity_fn({**state.position, "x": x.at[i].set(a.astype(dtype))}))(states)

        def update(x, inp):
            i, u = inp
            logits = site_logits(x, i)
            # inverse CDF with one uniform: the new value is the number of partial sums of
            # exp(logits - max) below u times their total
            weights = jnp.exp(logits - jnp.max(logits))
            if q <= UNROLL_STATES:  # partial sums one by one (a cumsum is a slow reduce-window on the CPU)
                total = jnp.sum(weights)
                target = u * total
                partial, new = weights[0], (weights[0] < target).astype(jnp.int32)
                for a in range(1, q - 1):
                    partial = partial + weights[a]
                    new = new + (partial < target).astype(jnp.int32)
            else:
                cdf = jnp.cumsum(weights)
                new = jnp.minimum(jnp.sum(cdf < u * cdf[-1]), q - 1)
            return x.at[i].set(new.astype(dtype)), None

        def sweep(x, key):
            key_sites, key_updates = _random.split(key)
            if scan == "systematic":
                sites = jnp.arange(n)
            else:
                sites = _random.randint(key_sites, (n,), 0, n)
            x, _ = jax.lax.scan(update, x, (sites, _random.uniform(key_updates, (n,))))
            return x, None

        x, _ = jax.lax.scan(sweep, x0, _random.split(rng_key, num_sweeps))
        position = dict(state.position)
        position["x"] = x
        return PottsGibbsState(position), PottsGibbsInfo(jnp.sum(x != x0).astype(jnp.int32))

    return kernel


def gibbs_as_top_level_api(
    model: Potts, logdensity_fn: Callable, scan: str = "systematic", num_sweeps: int = 1
) -> SamplingAlgorithm:
    """``SamplingAlgorithm(init, step)`` bound to ``logdensity_fn`` (BlackJAX top-level API)."""
    return bound_algorithm(gibbs_init, gibbs_build_kernel(model, scan, num_sweeps), logdensity_fn)


#: The fast single-site Gibbs kernel for :class:`Potts` in BlackJAX style:
#: ``potts_gibbs.init(position)``, ``potts_gibbs.build_kernel(model, scan, num_sweeps)``
#: and ``potts_gibbs(model, model.logdensity_fn(params), ...)`` for a
#: ``SamplingAlgorithm``.  Pass it as ``kernel=`` to any learner of :mod:`ugm_infer.learn`.
potts_gibbs = GenerateSamplingAPI(gibbs_as_top_level_api, gibbs_init, gibbs_build_kernel)
