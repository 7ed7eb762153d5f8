"""Interaction structure of an energy: probing, multilinearity and block colouring.

Sites
    All variables of a model are laid out in one flat *site* space: the sites of the
    first declared variable (in row-major order), then those of the second, and so on.

What is probed, and how (:func:`analyze_energy`)
    1. **Smoothness in the state.**  The energy is traced once with continuous
       (float32) states and its jaxpr is walked, following the values that depend on
       the state.  If any of them reaches an operation that is not analytic in it
       (a comparison, ``where`` on a state-dependent predicate, ``abs``/``max``/
       ``clip``, a cast to an integer, indexing *by* the state, ``stop_gradient``,
       an unknown primitive, ...), the energy is *non-smooth*.  This is exact
       bookkeeping, not a numerical test, so a term that is switched on only in rare
       configurations (``jnp.where(jnp.all(s == 1), c, 0)``) is never missed.
    2. **Smooth energies** (every operation on the state analytic) are probed through
       their Hessian at random points of the interior of the domains' convex hull,
       one row per site (``n`` forward-over-reverse Hessian-vector products, in
       chunks of 256, at the given parameters and at randomly perturbed ones).  For an
       analytic function a second derivative that vanishes at a random point
       vanishes identically (almost surely), so

       * sites ``i`` and ``j`` interact iff ``d2E/dx_i dx_j != 0`` there;
       * the energy is **multilinear** (affine in each site, so single-site energy
         differences are exactly gradient times value change) iff ``d2E/dx_i^2 = 0``
         for every binary/spin site at the given parameters, and it stays at most
         quadratic in each site at the perturbed parameters
         (``d3E/dx_i^3 = 0``).  The latter is what the block update needs when the
         parameters change later (learning): it reads the conditionals off the
         gradient at the *midpoint* of each site's two values, which is exact for any
         energy of degree <= 2 in each site (e.g. a Boltzmann machine whose
         ``W`` acquires a diagonal).  As a last safeguard every single-site flip
         difference at a random discrete state is compared with the gradient.
    3. **Non-smooth energies** (and all categorical ones, whose integer encoding is
       usually used for indexing or one-hot encoding) are never multilinear; their
       interaction graph is the support of second differences
       ``E(x^{ij}) - E(x^i) - E(x^j) + E(x)`` at random states and, for categorical
       variables, also at constant states (all sites equal to one value, the changes
       to another), which detect Potts-type couplings ``[x_i == x_j]`` for any
       number of states.  This costs ``n^2`` energy evaluations per probe (refused
       above ``max_sites_fd`` sites) and, being a test at finitely many states,
       cannot see an interaction that is active only in rare configurations: for
       such energies declare ``blocks=`` explicitly.

    Probing at perturbed parameters (every float leaf plus Gaussian noise) finds
    couplings that happen to be zero at the given parameters; the union of the edges
    is kept.  Everything is compiled once per model (parameters are cast to
    non-weak dtypes so the perturbed copy reuses the compilation).

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

__all__ = [
    "Block",
    "SiteLayout",
    "StructureReport",
    "analyze_energy",
    "check_multilinear",
    "color_graph",
    "dsatur_coloring",
    "greedy_coloring",
    "is_smooth_in_state",
    "probe_interactions",
]


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


def dsatur_coloring(num_sites: int, edges: np.ndarray) -> np.ndarray:
    """DSatur colouring (Brelaz 1979): colour next the site with the most distinct colours
    among its neighbours (ties: highest degree, then lowest index).

    Optimal on bipartite graphs and usually better than greedy in site order (e.g. three
    colours on an odd periodic lattice, where site order needs four).
    """
    import heapq

    neighbours: list[list[int]] = [[] for _ in range(num_sites)]
    for i, j in np.asarray(edges, dtype=np.int64).reshape(-1, 2):
        if i != j:
            neighbours[i].append(int(j))
            neighbours[j].append(int(i))
    degree = [len(nb) for nb in neighbours]
    saturation: list[set] = [set() for _ in range(num_sites)]
    colors = np.full(num_sites, -1, dtype=np.int64)
    heap = [(0, -degree[i], i) for i in range(num_sites)]
    heapq.heapify(heap)
    while heap:
        neg_sat, _, i = heapq.heappop(heap)
        if colors[i] >= 0 or -neg_sat != len(saturation[i]):
            continue  # stale entry
        c = 0
        while c in saturation[i]:
            c += 1
        colors[i] = c
        for j in neighbours[i]:
            if colors[j] < 0 and c not in saturation[j]:
                saturation[j].add(c)
                heapq.heappush(heap, (-len(saturation[j]), -degree[j], j))
    return colors


def color_graph(num_sites: int, edges: np.ndarray) -> np.ndarray:
    """Fewest colours of greedy-in-site-order and DSatur, relabelled by first site.

    Colour ``0`` is the class of site 0, colour ``1`` the class of the first site not in
    class 0, and so on, so blocks come out in a natural order.
    """
    best = None
    for colors in (greedy_coloring(num_sites, edges), dsatur_coloring(num_sites, edges)):
        if best is None or (colors.size and colors.max() < best.max()):
            best = colors
    if best.size == 0:
        return best
    _, first = np.unique(best, return_index=True)
    relabel = np.empty(best.max() + 1, dtype=np.int64)
    relabel[np.unique(best)[np.argsort(first)]] = np.arange(len(first))
    return relabel[best]


# --------------------------------------------------------------------------------------
# smoothness of the energy in the state: a taint walk over the jaxpr
# --------------------------------------------------------------------------------------
# primitives that are analytic in every operand
_ANALYTIC = frozenset(
    """
    add add_any sub mul neg div dot_general reduce_sum reduce_prod cumsum cumprod
    broadcast_in_dim reshape transpose squeeze expand_dims concatenate slice pad rev
    split copy copy_p reduce_precision exp exp2 log log1p expm1 tanh logistic sin cos
    tan sinh cosh asinh acosh atanh asin acos atan atan2 sqrt rsqrt cbrt pow
    integer_pow square erf erfc erf_inv lgamma digamma conj real imag complex
    """.split()
)
# primitives analytic in some operands only: {name: operand positions that must not
# depend on the state (predicates, indices)}
_INDEX_OPERANDS = {
    "select_n": lambda k: {0},
    "gather": lambda k: {1},
    "dynamic_slice": lambda k: set(range(1, k)),
    "dynamic_update_slice": lambda k: set(range(2, k)),
    "scatter-add": lambda k: {1},
    "scatter_add": lambda k: {1},
    "scatter": lambda k: {1},
}


def _is_literal(v) -> bool:
    from jax.extend import core as jex_core  # loaded on first use: jax.extend is slow to import

    return isinstance(v, jex_core.Literal)


def _sub_jaxpr(value):
    from jax.extend import core as jex_core

    if isinstance(value, jex_core.ClosedJaxpr):
        return value.jaxpr
    if isinstance(value, jex_core.Jaxpr):
        return value
    return None


def _walk(jaxpr, tainted_in: list[bool]) -> list[bool] | None:
    """Propagate state dependence through ``jaxpr``; ``None`` if it hits a non-analytic op."""
    tainted = {v for v, t in zip(jaxpr.invars, tainted_in) if t}
    for eqn in jaxpr.eqns:
        ins = [(not _is_literal(v)) and v in tainted for v in eqn.invars]
        if not any(ins):
            continue
        name = eqn.primitive.name
        if name in _ANALYTIC:
            outs = [True] * len(eqn.outvars)
        elif name == "convert_element_type":
            if not jnp.issubdtype(eqn.params["new_dtype"], jnp.inexact):
                return None
            outs = [True]
        elif name in _INDEX_OPERANDS:
            if any(ins[k] for k in _INDEX_OPERANDS[name](len(ins))):
                return None
            outs = [True] * len(eqn.outvars)
        elif name == "scan":
            body = eqn.params["jaxpr"].jaxpr
            nc, ncarry = eqn.params["num_consts"], eqn.params["num_carry"]
            carry_in = list(ins[nc : nc + ncarry])
            for _ in range(ncarry + 1):  # fixed point of the carried dependence
                res = _walk(body, ins[:nc] + carry_in + ins[nc + ncarry :])
                if res is None:
                    return None
                new = [a or b for a, b in zip(carry_in, res[:ncarry])]
                if new == carry_in:
                    break
                carry_in = new
            outs = res
        elif name == "cond":
            if ins[0]:
                return None
            outs = [False] * len(eqn.outvars)
            for branch in eqn.params["branches"]:
                res = _walk(branch.jaxpr, ins[1:])
                if res is None:
                    return None
                outs = [a or b for a, b in zip(outs, res)]
        else:
            # call-like primitives (jit, custom_jvp_call, custom_vjp_call, remat, ...)
            subs = [s for s in map(_sub_jaxpr, eqn.params.values()) if s is not None]
            subs = [s for s in subs if len(s.invars) == len(ins) and len(s.outvars) == len(eqn.outvars)]
            if not subs:
                return None  # unknown or non-analytic (comparisons, max, abs, sign, ...)
            outs = _walk(subs[0], ins)
            if outs is None:
                return None
        for v, t in zip(eqn.outvars, outs):
            if t:
                tainted.add(v)
    return [(not _is_literal(v)) and v in tainted for v in jaxpr.outvars]


def is_smooth_in_state(energy_fn: Callable, params: Any, variables: dict) -> bool:
    """Whether every operation applied to the (continuous) state is analytic.

    Categorical variables make the answer ``False`` (their integer labels are
    one-hot encoded or used as indices).  Otherwise the energy is traced with float32
    states; ``False`` if tracing fails (e.g. the
    energy indexes arrays with the state) or a state-dependent value reaches a
    comparison, ``where`` predicate, integer cast, index, ``stop_gradient``,
    ``max``/``abs``/``clip`` or any primitive not known to be analytic.
    """
    from ugm_infer.domains import Categorical

    if any(isinstance(d, Categorical) for d in variables.values()):
        return False  # integer-encoded labels: one-hot / indexing, never differentiated
    relaxed = {n: jax.ShapeDtypeStruct(d.shape, jnp.float32) for n, d in variables.items()}
    try:
        closed = jax.make_jaxpr(lambda p, s: energy_fn(p, s))(params, relaxed)
    except Exception:  # noqa: BLE001 - an energy that cannot take float states is not smooth
        return False
    num_param_leaves = len(jax.tree.leaves(params))
    ins = [i >= num_param_leaves for i in range(len(closed.jaxpr.invars))]
    return _walk(closed.jaxpr, ins) is not None


# --------------------------------------------------------------------------------------
# flat <-> state helpers used by the probes
# --------------------------------------------------------------------------------------
def _unflatten(flat: jax.Array, layout: SiteLayout, variables: dict, cast: bool = False) -> dict:
    """Flat site vector -> state dict; ``cast=True`` gives each variable its domain dtype."""
    return {
        n: (flat[off : off + size].astype(variables[n].dtype) if cast else flat[off : off + size]).reshape(
            variables[n].shape
        )
        for n, size, off in zip(layout.names, layout.sizes, layout.offsets)
    }


def _host_rng(rng_key: jax.Array) -> np.random.Generator:
    """A numpy generator seeded from a JAX key (probe inputs are made on the host: no compilations)."""
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        rng_key = jax.random.key_data(rng_key)
    return np.random.default_rng(np.asarray(rng_key, dtype=np.uint32).reshape(-1).tolist())


def _strong(params: Any) -> Any:
    """Params as arrays with explicit (non-weak) dtypes, so perturbed copies share a compilation."""

    def cast(x):
        a = np.asarray(x)
        if a.dtype == np.float64 and not jax.config.jax_enable_x64:
            a = a.astype(np.float32)
        return jnp.asarray(a, dtype=jnp.asarray(a).dtype)

    return jax.tree.map(cast, params)


def _perturb_params(rng: np.random.Generator, params: Any) -> Any:
    """Every float leaf plus Gaussian noise of scale ``0.5 (mean|leaf| + 1)``."""

    def perturb(leaf):
        arr = np.asarray(leaf)
        if not np.issubdtype(arr.dtype, np.floating):
            return leaf
        scale = np.mean(np.abs(arr)) + 1.0 if arr.size else 1.0
        return jnp.asarray(arr + 0.5 * scale * rng.normal(size=arr.shape), dtype=jnp.asarray(leaf).dtype)

    return jax.tree.map(perturb, params)


def _site_tables(variables: dict, layout: SiteLayout):
    """Per-site number of states, padded value table, hull ``[lo, hi]`` of the values, binary flag."""
    from ugm_infer.domains import Binary, Spin

    kmax = max(variables[n].num_states for n in layout.names)
    table = np.zeros((layout.num_sites, kmax))
    nstates = np.zeros(layout.num_sites, dtype=np.int64)
    binary = np.zeros(layout.num_sites, dtype=bool)
    for n, size, off in zip(layout.names, layout.sizes, layout.offsets):
        vals = variables[n].values
        table[off : off + size, : len(vals)] = vals
        nstates[off : off + size] = len(vals)
        binary[off : off + size] = isinstance(variables[n], (Binary, Spin))
    lo = table[np.arange(layout.num_sites), 0]
    hi = table[np.arange(layout.num_sites), nstates - 1]
    return nstates, table, lo, hi, binary


def _random_discrete(rng: np.random.Generator, nstates, table):
    """A uniformly random state (flat float32) and, per site, a random different value."""
    current = rng.integers(0, nstates)
    other = (current + rng.integers(1, nstates)) % nstates
    pick = lambda idx: table[np.arange(len(idx)), idx].astype(np.float32)
    return pick(current), pick(other)


def _constant_discrete(rng: np.random.Generator, nstates, table):
    """All sites at one value ``a`` and their changes all to one value ``b != a`` (mod each site's K)."""
    kmax = table.shape[1]
    a = int(rng.integers(0, kmax))
    b = a + int(rng.integers(1, kmax))
    current, other = a % nstates, b % nstates
    other = np.where(other == current, (current + 1) % nstates, other)
    pick = lambda idx: table[np.arange(len(idx)), idx].astype(np.float32)
    return pick(current), pick(other)


# --------------------------------------------------------------------------------------
# the analysis
# --------------------------------------------------------------------------------------
class StructureReport(NamedTuple):
    """Result of :func:`analyze_energy`.

    smooth
        Every operation applied to the state is analytic (see the module docstring).
    multilinear
        Block conditionals may be read off one gradient (``None`` if not probed).
    edges
        ``(m, 2)`` global site pairs ``i < j`` of the interaction graph (``None`` if
        not probed).
    """

    smooth: bool
    multilinear: bool | None
    edges: np.ndarray | None


def analyze_energy(
    rng_key: jax.Array,
    energy_fn: Callable,
    params: Any,
    variables: dict,
    *,
    multilinear: bool | None = None,
    need_edges: bool = True,
    num_probes: int = 2,
    max_sites: int = 4096,
    max_sites_fd: int = 2048,
    chunk: int = 256,
    rtol: float = 1e-4,
) -> StructureReport:
    """Probe an energy's smoothness, multilinearity and interaction graph (module docstring).

    Parameters
    ----------
    rng_key
        Key for the random probe points and the parameter perturbation.
    energy_fn, params, variables
        The energy ``energy_fn(params, state)``, parameters to probe at (concrete),
        and ``{name: domain}``.
    multilinear
        A declared value (kept as is); ``None`` probes it.
    need_edges
        Also probe the interaction graph.
    num_probes
        Random points per parameter set.
    max_sites
        Above this many sites the multilinearity test (without edges) looks at a
        random subset of sites.
    max_sites_fd
        Largest model for the ``n^2`` finite-difference edge probe (non-smooth energies).
    chunk
        Hessian rows (or second-difference rows) per compiled call.
    rtol
        Tolerance of the multilinearity tests, relative to the largest first or
        second derivative seen (and, for the flip check, to the largest flip
        difference).

    Returns
    -------
    StructureReport
    """
    from ugm_infer.domains import Categorical

    layout = make_layout(variables)
    n = layout.num_sites
    categorical = any(isinstance(d, Categorical) for d in variables.values())
    smooth = is_smooth_in_state(energy_fn, params, variables)
    tables = _site_tables(variables, layout)
    rng = _host_rng(rng_key)
    given = _strong(params)
    candidates = [given, _strong(_perturb_params(rng, params))]

    def flat_energy(p, flat):  # continuous (float32) states: derivatives of smooth energies
        return energy_fn(p, _unflatten(flat, layout, variables))

    def discrete_energy(p, flat):  # states in the domain dtypes (energies may index with them)
        return energy_fn(p, _unflatten(flat, layout, variables, cast=True))

    want_ml = multilinear is None and smooth and not categorical
    ml = bool(multilinear) if multilinear is not None else False
    edges_found: list[tuple[np.ndarray, np.ndarray]] = []
    fd_edges = need_edges
    if smooth and (need_edges or want_ml):
        sites = np.arange(n)
        if not need_edges and n > max_sites:
            sites = np.sort(rng.choice(n, max_sites, replace=False))
        result = _hessian_probe(rng, flat_energy, candidates, tables, sites, num_probes, chunk)
        if result is not None:
            diag_err, third_err, flip_err, scale, hess_edges = result
            if want_ml:
                tol = rtol * max(scale, 1e-30)
                ml = diag_err <= tol and third_err <= tol and flip_err <= 10 * rtol
            edges_found += hess_edges
            fd_edges = False
        else:
            smooth = False
    if fd_edges:
        if n > max_sites_fd:
            raise ValueError(
                f"automatic block detection for an energy that is not smooth in the state (comparisons, "
                f"indexing, categorical one-hot...) costs n^2 = {n}^2 energy evaluations; it is refused above "
                f"{max_sites_fd} sites. Pass `blocks=` to EnergyModel (e.g. blocks=[{{'x': mask_a}}, {{'x': mask_b}}])."
            )
        edges_found += _second_difference_probe(rng, discrete_energy, candidates, tables, num_probes, chunk, categorical)
    edges = None
    if need_edges:
        pairs = [np.stack([i, j], axis=1) for i, j in edges_found if len(i)]
        edges = np.sort(np.concatenate(pairs).astype(np.int64), axis=1) if pairs else np.zeros((0, 2), np.int64)
        edges = edges[edges[:, 0] != edges[:, 1]]
        edges = np.unique(edges, axis=0) if len(edges) else np.zeros((0, 2), dtype=np.int64)
    return StructureReport(bool(smooth), bool(ml), edges)


def _chunks(sites: np.ndarray, chunk: int):
    """Fixed-size chunks of ``sites`` (the last one padded by repetition: one compilation)."""
    for start in range(0, len(sites), chunk):
        rows = sites[start : start + chunk]
        if len(sites) > chunk and len(rows) < chunk:
            rows = np.concatenate([rows, np.full(chunk - len(rows), rows[-1])])
        yield rows


def _hessian_probe(rng, flat_energy, candidates, tables, sites, num_probes, chunk):
    """Hessian rows, second and third diagonal derivatives and flip checks at random points.

    Returns ``(max |d2E/dx_i^2| at the given params, max |d3E/dx_i^3| at the perturbed
    params, relative flip-vs-gradient error at a discrete state (given params), derivative
    scale, edges)`` (derivatives over binary/spin sites only), or ``None`` if anything is
    not finite at the given params.
    """
    nstates, table, lo, hi, binary = tables
    n = len(lo)

    @jax.jit
    def probe(p, points, rows, flat, other):
        grad_fn = jax.grad(flat_energy, argnums=1)

        def one(x, i):
            e_i = jax.nn.one_hot(i, n, dtype=x.dtype)
            hvp = lambda y: jax.jvp(lambda z: grad_fn(p, z), (y,), (e_i,))[1]
            row, drow = jax.jvp(hvp, (x,), (e_i,))
            return row, drow[i]

        rows_out, third = jax.vmap(lambda x: jax.vmap(lambda i: one(x, i))(rows))(points)
        grads = jax.vmap(lambda x: grad_fn(p, x))(points)
        # single-site changes at a discrete state: energy difference vs gradient x change
        e0, g0 = jax.value_and_grad(flat_energy, argnums=1)(p, flat)
        deltas = jax.vmap(lambda i: flat_energy(p, flat.at[i].set(other[i])) - e0)(rows)
        predicted = g0[rows] * (other[rows] - flat[rows])
        return rows_out, third, grads, deltas, predicted, e0

    diag_err = third_err = flip_err = scale = 0.0
    edges = []
    for c, p in enumerate(candidates):
        u = rng.uniform(0.1, 0.9, size=(num_probes, n))
        points = jnp.asarray(lo + u * (hi - lo), jnp.float32)
        flat, other = _random_discrete(rng, nstates, table)
        finite, d_err, t_err, s, found = True, 0.0, 0.0, 0.0, []
        flip_num, flip_den, e0 = 0.0, 0.0, 0.0
        for rows in _chunks(sites, chunk):
            out = probe(p, points, jnp.asarray(rows), jnp.asarray(flat), jnp.asarray(other))
            block, third, grads, deltas, predicted, e0 = (np.asarray(a, dtype=np.float64) for a in out)
            finite = all(np.all(np.isfinite(a)) for a in (block, third, grads, deltas, predicted))
            if not finite:
                break
            sel = binary[rows]
            diag = block[:, np.arange(len(rows)), rows]
            d_err = max(d_err, float(np.abs(diag[:, sel]).max(initial=0.0)))
            t_err = max(t_err, float(np.abs(third[:, sel]).max(initial=0.0)))
            s = max(s, float(np.abs(block).max(initial=0.0)), float(np.abs(grads).max(initial=0.0)))
            flip_num = max(flip_num, float(np.abs(deltas - predicted)[sel].max(initial=0.0)))
            flip_den = max(flip_den, float(np.abs(deltas).max(initial=0.0)))
            found.append((rows, np.abs(block).max(axis=0)))
        if not finite:
            if c == 0:
                return None
            continue  # the perturbation left the energy's domain: skip that parameter set
        scale = max(scale, s)
        if c == 0:
            diag_err = d_err
            # float32 energies of big models lose ~1e-7 |E| to cancellation in differences
            flip_err = flip_num / (flip_den + 1e-3 * (abs(float(e0)) + 1.0))
        else:
            third_err = t_err
        # relative threshold: float32 round-off of structurally zero entries is far below it
        threshold = 1e-6 * max(max((float(m.max(initial=0.0)) for _, m in found), default=0.0), 1e-30)
        for rows, m in found:
            i, j = np.nonzero(m > threshold)
            edges.append((rows[i], j))
    return diag_err, third_err, flip_err, scale, edges


def _second_difference_probe(rng, flat_energy, candidates, tables, num_probes, chunk, categorical):
    """Edges from second differences at random (and, for categorical models, constant) states."""
    nstates, table, _, _, _ = tables
    n = len(nstates)

    def deltas_at(p, x, other):
        e = flat_energy(p, x)
        return jax.vmap(lambda i: flat_energy(p, x.at[i].set(other[i])) - e)(jnp.arange(n))

    @jax.jit
    def second_differences(p, flats, others, rows):
        def one(flat, other):
            base = deltas_at(p, flat, other)
            moved = jax.vmap(lambda j: flat.at[j].set(other[j]))(rows)
            return jax.vmap(lambda x: deltas_at(p, x, other))(moved) - base[None, :], jnp.max(jnp.abs(base))

        return jax.vmap(one)(flats, others)

    edges = []
    for c, p in enumerate(candidates):
        pairs = [_random_discrete(rng, nstates, table) for _ in range(num_probes)]
        if categorical:
            pairs += [_constant_discrete(rng, nstates, table) for _ in range(num_probes)]
        flats = jnp.asarray(np.stack([a for a, _ in pairs]))
        others = jnp.asarray(np.stack([b for _, b in pairs]))
        found, finite = [], True
        for rows in _chunks(np.arange(n), chunk):
            block, scale = (np.asarray(a) for a in second_differences(p, flats, others, jnp.asarray(rows)))
            finite = finite and bool(np.all(np.isfinite(block)))
            threshold = 1e-4 * np.maximum(scale, 1.0)[:, None, None]
            i, j = np.nonzero((np.abs(block) > threshold).any(axis=0))
            found.append((rows[i], j))
        if c > 0 and not finite:
            continue  # the perturbation left the energy's domain: skip that parameter set
        edges += found
    return edges


def check_multilinear(rng_key: jax.Array, energy_fn: Callable, params: Any, variables: dict, **kwargs: Any) -> bool:
    """Whether block conditionals may be read off one gradient (see :func:`analyze_energy`).

    Only smooth energies of binary/spin variables can pass.
    """
    return bool(analyze_energy(rng_key, energy_fn, params, variables, need_edges=False, **kwargs).multilinear)


def probe_interactions(
    rng_key: jax.Array,
    energy_fn: Callable,
    params: Any,
    variables: dict,
    multilinear: bool | None = None,
    **kwargs: Any,
) -> np.ndarray:
    """Edges ``(m, 2)`` (global site indices, ``i < j``) of the interaction graph."""
    ml = bool(multilinear) if multilinear is not None else False
    return analyze_energy(rng_key, energy_fn, params, variables, multilinear=ml, **kwargs).edges
