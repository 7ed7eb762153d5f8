"""Pairwise binary grid MRF with a chosen subset of the units hidden.

The synthetic setting of the adiabatic persistent contrastive divergence (APCD) paper
(section 4.1): a 2D grid of binary units :math:`x \\in \\{0, 1\\}^{H W}` (or spins),

.. math::  E(x) = -\\sum_{(i, j) \\in \\mathcal E} w_{ij} x_i x_j - \\sum_i b_i x_i ,

over the nearest-neighbour edges :math:`\\mathcal E` of the grid, of which a subset
of the sites is hidden.  Variables: ``"v"`` (the visible sites, in increasing
row-major site order) and ``"h"`` (the hidden sites, likewise);
``params = {"w": (num_edges,), "b": (H * W,)}`` indexed by the grid's edges
(:func:`~ugm_infer.models.lattice_edges`, row-major sites) and sites.  Blocks: the
two checkerboard colours (sites of one colour share no edge), each spanning visible
and hidden sites; with the visibles clamped, block Gibbs on the hidden sites is the
same checkerboard restricted to ``h``.  Hidden units are coupled to each other
through hidden-hidden edges, so :math:`p(h \\mid v)` does not factorise and no
free energy is analytic -- this is the case where mean-field E-steps are biased and
Markov-chain E-steps (APCD) are not.

:func:`random_grid_hidden` draws an instance as in the APCD paper: biases
:math:`b_i \\sim U[-3, 3]`, weights :math:`w_{ij} \\sim \\mathcal N(0, 0.5)` (variance
0.5, i.e. standard deviation :math:`\\sqrt{0.5}`; ``weight_std`` changes it), and a
fraction (50% or 20%) of the units hidden uniformly at random.

Exact likelihoods by transfer matrices
    :func:`grid_log_partition` and :func:`grid_log_likelihood` compute
    :math:`\\log Z`, :math:`\\log Z(v) = \\log \\sum_h e^{-E(v, h)}` and
    :math:`\\log p(v) = \\log Z(v) - \\log Z` exactly, column by column, in
    :math:`O(H W 2^{\\min(H, W)})` per configuration of the visibles (a 10x10 grid:
    1,024 frontier states) instead of :math:`2^{H W}` for enumeration.

References
----------
Adiabatic persistent contrastive divergence learning (APCD paper), section 4.1
(grid MRFs with hidden units).
Baxter, R. J. (1982). *Exactly Solved Models in Statistical Mechanics*, ch. 2
(transfer matrices); the site-by-site ("sparse", frontier) form of the column
transfer matrix is e.g. Bhanot, G. (1988), The Metropolis algorithm, Rep. Prog. Phys.
51, 429, and Jensen's enumerations of lattice models.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
    check_int,
    check_key,
    check_params,
    check_scale,
    compute_dtype,
    spin_or_binary,
)
from ugm_infer.models.lattice import lattice_colors, lattice_edges

__all__ = ["GridHidden", "grid_hidden", "grid_log_likelihood", "grid_log_partition", "random_grid_hidden"]


def _hidden_mask(hidden: Any, height: int, width: int) -> np.ndarray:
    arr = np.asarray(hidden)
    n = height * width
    if arr.dtype == bool:
        if arr.shape not in ((height, width), (n,)):
            raise ValueError(f"`hidden` as a mask must have shape ({height}, {width}) or ({n},), got {arr.shape}")
        mask = arr.reshape(-1).copy()
    elif np.issubdtype(arr.dtype, np.integer) or arr.size == 0:
        idx = arr.reshape(-1).astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"`hidden` has site indices outside [0, {n}): min {idx.min()}, max {idx.max()}")
        if len(np.unique(idx)) != idx.size:
            raise ValueError("`hidden` lists a site more than once")
        mask = np.zeros(n, bool)
        mask[idx] = True
    else:
        raise TypeError(f"`hidden` must be a boolean mask or an int array of flat site indices, got dtype {arr.dtype}")
    if mask.all():
        raise ValueError("`hidden` hides every site: at least one unit must be visible")
    if not mask.any():
        raise ValueError("`hidden` hides no site: use ui.models.ising / lattice models for fully visible grids")
    return mask


class GridHidden(EnergyModel):
    """Grid MRF with hidden units (built by :func:`grid_hidden`; see the module docstring).

    Attributes
    ----------
    height, width
        Grid size.
    hidden_mask
        ``(height * width,)`` bool, True at the hidden sites (row-major).
    visible_sites, hidden_sites
        Flat site indices of ``v`` and ``h`` (increasing).
    edges
        ``(num_edges, 2)`` grid edges (row-major sites), the order of ``params["w"]``.
    visible
        ``("v",)``.
    """

    visible = ("v",)

    def __init__(
        self,
        height: int,
        width: int,
        hidden: Any,
        *,
        periodic: bool = False,
        domain: str = "binary",
        dtype: Any = jnp.float32,
    ):
        self.height = check_int(height, "height")
        self.width = check_int(width, "width")
        if not isinstance(periodic, bool):
            raise TypeError(f"`periodic` must be a bool, got {periodic!r}")
        self.periodic = periodic
        mask = _hidden_mask(hidden, self.height, self.width)
        mask.setflags(write=False)
        self.hidden_mask = mask
        self.visible_sites = np.nonzero(~mask)[0].astype(np.int32)
        self.hidden_sites = np.nonzero(mask)[0].astype(np.int32)
        self.edges = lattice_edges(self.height, self.width, periodic)
        self.num_sites_grid = self.height * self.width
        self.domain = domain
        # x = concat([v, h])[order]: site s reads position order[s] of the concatenation
        order = np.empty(self.num_sites_grid, np.int32)
        order[self.visible_sites] = np.arange(len(self.visible_sites))
        order[self.hidden_sites] = len(self.visible_sites) + np.arange(len(self.hidden_sites))
        self._order = order
        colors = lattice_colors(self.height, self.width, periodic).reshape(-1)
        blocks = []
        for c in range(int(colors.max()) + 1):
            blk = {}
            v_idx = np.nonzero(colors[self.visible_sites] == c)[0]
            h_idx = np.nonzero(colors[self.hidden_sites] == c)[0]
            if v_idx.size:
                blk["v"] = v_idx
            if h_idx.size:
                blk["h"] = h_idx
            if blk:
                blocks.append(blk)
        variables = {
            "v": spin_or_binary(domain, (len(self.visible_sites),), dtype),
            "h": spin_or_binary(domain, (len(self.hidden_sites),), dtype),
        }
        i_idx, j_idx = self.edges[:, 0], self.edges[:, 1]

        def energy(params, state):
            dt = compute_dtype(params["w"])
            x = jnp.concatenate([state["v"].astype(dt), state["h"].astype(dt)])[order]
            return -jnp.sum(params["w"] * x[i_idx] * x[j_idx]) - jnp.dot(params["b"], x)

        super().__init__(
            energy,
            variables,
            blocks,
            multilinear=True,
            validate_params=self._check_params,
            name=f"grid_hidden({self.height}x{self.width}, {len(self.hidden_sites)} hidden)",
        )

    def _check_params(self, params: Any) -> None:
        check_params(
            self.name,
            params,
            {"w": (len(self.edges),), "b": (self.num_sites_grid,)},
            ["(num_edges,)", "(height * width,)"],
        )

    def to_grid(self, state: dict) -> jax.Array:
        """The full grid ``(..., height, width)`` from a (batched) state ``{v, h}``."""
        x = jnp.concatenate(
            [jnp.asarray(state["v"]), jnp.asarray(state["h"]).astype(jnp.asarray(state["v"]).dtype)], axis=-1
        )
        return x[..., self._order].reshape(x.shape[:-1] + (self.height, self.width))

    def init_params(self, rng_key: jax.Array, scale: float = 0.01, *, dtype: Any = jnp.float32) -> dict:
        """Weights i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2)`, biases zero."""
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        w = scale * jax.random.normal(rng_key, (len(self.edges),), jnp.dtype(dtype))
        return {"w": w, "b": jnp.zeros((self.num_sites_grid,), jnp.dtype(dtype))}

    def random_params(
        self,
        rng_key: jax.Array,
        *,
        bias_range: float = 3.0,
        weight_std: float = float(np.sqrt(0.5)),
        dtype: Any = jnp.float32,
    ) -> dict:
        """The APCD paper's random instance: :math:`b_i \\sim U[-r, r]`, :math:`w_e \\sim \\mathcal N(0, \\sigma^2)`.

        Defaults ``r = 3``, :math:`\\sigma^2 = 0.5`.
        """
        check_key(rng_key)
        bias_range = check_scale(bias_range, "bias_range")
        weight_std = check_scale(weight_std, "weight_std")
        key_w, key_b = jax.random.split(rng_key)
        dt = jnp.dtype(dtype)
        w = weight_std * jax.random.normal(key_w, (len(self.edges),), dt)
        b = jax.random.uniform(key_b, (self.num_sites_grid,), dt, -bias_range, bias_range)
        return {"w": w, "b": b}


def grid_hidden(
    height: int,
    width: int,
    hidden: Any,
    *,
    periodic: bool = False,
    domain: str = "binary",
    dtype: Any = jnp.float32,
) -> GridHidden:
    """Pairwise grid MRF whose sites ``hidden`` are latent.

    Parameters
    ----------
    height, width
        Grid size (sites numbered row-major).
    hidden
        The hidden sites: a boolean mask ``(height, width)`` (or flat) or an int array
        of flat site indices.  At least one site must be visible and one hidden.
    periodic
        Wrap the grid around (default: open boundaries, as in the APCD paper).
    domain
        ``"binary"`` ({0, 1}, default) or ``"spin"`` ({-1, +1}).
    dtype
        Storage dtype of states.

    Returns
    -------
    A :class:`GridHidden` with variables ``"v"`` (visible sites) and ``"h"`` (hidden
    sites), ``params = {"w": (num_edges,), "b": (height * width,)}``,
    :math:`E = -\\sum_e w_e x_i x_j - b^\\top x`, checkerboard blocks and
    ``visible = ("v",)``.
    """
    return GridHidden(height, width, hidden, periodic=periodic, domain=domain, dtype=dtype)


def random_grid_hidden(
    rng_key: jax.Array,
    height: int,
    width: int,
    hidden_fraction: float = 0.5,
    *,
    bias_range: float = 3.0,
    weight_std: float = float(np.sqrt(0.5)),
    periodic: bool = False,
    domain: str = "binary",
) -> tuple[GridHidden, dict]:
    """A random instance of the APCD paper's grid: ``(model, params)``.

    ``round(hidden_fraction * height * width)`` sites (at least 1, at most all but
    one) are hidden, chosen uniformly at random; the parameters come from
    :meth:`GridHidden.random_params` (:math:`b \\sim U[-3, 3]`,
    :math:`w \\sim \\mathcal N(0, 0.5)`).
    """
    check_key(rng_key)
    height = check_int(height, "height")
    width = check_int(width, "width")
    try:
        frac = float(hidden_fraction)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`hidden_fraction` must be a float in (0, 1), got {hidden_fraction!r}") from err
    if not 0.0 < frac < 1.0:
        raise ValueError(f"`hidden_fraction` must be in (0, 1), got {hidden_fraction!r}")
    n = height * width
    if n < 2:
        raise ValueError(f"the grid needs at least 2 sites (one visible, one hidden), got {height}x{width}")
    key_mask, key_params = jax.random.split(rng_key)
    num_hidden = int(min(max(round(frac * n), 1), n - 1))
    perm = np.asarray(jax.random.permutation(key_mask, n))
    model = grid_hidden(height, width, np.sort(perm[:num_hidden]), periodic=periodic, domain=domain)
    return model, model.random_params(key_params, bias_range=bias_range, weight_std=weight_std)


# ----------------------------------------------------------------------------------
# exact log Z and log p(v) by a (site-by-site) column transfer matrix
# ----------------------------------------------------------------------------------
#: Largest number of frontier states (2^min(H, W), times 2^min(H, W) more with a
#: periodic scan direction) that :func:`grid_log_partition` accepts.
MAX_TRANSFER_STATES = 2**22


class _TransferPlan(NamedTuple):
    rows: int  # R: frontier size (the shorter side)
    sites: np.ndarray  # (R * C,) physical site of scan step k (column-major over the logical grid)
    left: np.ndarray  # (R * C,) edge index coupling step k to the frontier bit it replaces, or -1
    couple: np.ndarray  # (R * C, R) edge index coupling step k to frontier bit r', or -1
    wrap: np.ndarray  # (R * C, R) edge index coupling step k to first-column bit r' (periodic), or -1
    periodic_scan: bool  # True when some `wrap` entry is used (sum over the first column)
    vpos: np.ndarray  # (R * C,) position of step k's site in ``v``, or -1 if hidden


def _transfer_plan(model: GridHidden) -> _TransferPlan:
    """Scan order and couplings of the site-by-site transfer matrix (host-side, cached)."""
    plan = getattr(model, "_transfer_plan_cache", None)
    if plan is not None:
        return plan
    h, w = model.height, model.width
    transpose = h > w  # the frontier runs along the shorter side
    rows, cols = (w, h) if transpose else (h, w)

    def phys(r, c):  # logical (r, c) -> physical flat site
        return c * w + r if transpose else r * w + c

    order = np.empty(rows * cols, np.int64)  # scan step of each physical site
    sites = np.empty(rows * cols, np.int32)
    for c in range(cols):
        for r in range(rows):
            k = c * rows + r
            sites[k] = phys(r, c)
            order[sites[k]] = k
    left = np.full(rows * cols, -1, np.int32)
    couple = np.full((rows * cols, rows), -1, np.int32)
    wrap = np.full((rows * cols, rows), -1, np.int32)
    for e, (i, j) in enumerate(model.edges):
        early, late = sorted((int(order[i]), int(order[j])))
        r, c = late % rows, late // rows
        re, ce = early % rows, early // rows
        # the frontier when step `late` is added: rows < r at column c, rows >= r at column c - 1
        if ce == c - 1 and re == r:
            left[late] = e
        elif (ce == c and re < r) or (ce == c - 1 and re > r):
            couple[late, re] = e
        elif ce == 0 and c == cols - 1:  # periodic wrap to the first column
            wrap[late, re] = e
        else:  # pragma: no cover - nearest-neighbour grids never get here
            raise AssertionError(f"edge {(i, j)} does not fit the transfer-matrix frontier")
    vpos = np.where(model.hidden_mask[sites], -1, model._order[sites]).astype(np.int32)
    plan = _TransferPlan(rows, sites, left, couple, wrap, bool((wrap >= 0).any()), vpos)
    model._transfer_plan_cache = plan
    return plan


def _site_tables(plan: _TransferPlan, params: dict, dt):
    """Per scan step: bias, left weight, frontier couplings, wrap couplings (dense, zeros where absent)."""

    def take(idx):
        idx = jnp.asarray(idx)
        return jnp.where(idx >= 0, params["w"].astype(dt)[jnp.maximum(idx, 0)], 0.0)

    return params["b"].astype(dt)[jnp.asarray(plan.sites)], take(plan.left), take(plan.couple), take(plan.wrap)


def _transfer_log_sum(plan: _TransferPlan, tables, allowed, first, spin: bool):
    """``log sum_x exp(-E(x))`` over the configurations allowed by ``allowed`` ``(R*C, 2)`` bool.

    ``first`` is the ``(R,)`` value vector of the first column (the periodic wrap
    field); ignored when the plan has no wrap couplings.
    """
    rows = plan.rows
    bias, left, couple, wrap = tables
    dt = bias.dtype
    idx = jnp.arange(2**rows, dtype=jnp.int32)
    bits = (idx[:, None] >> jnp.arange(rows, dtype=jnp.int32)) & 1  # (S, R)
    vals = (2 * bits - 1).astype(dt) if spin else bits.astype(dt)
    v0, v1 = (-1.0, 1.0) if spin else (0.0, 1.0)
    alpha0 = jnp.where(idx == 0, 0.0, -jnp.inf).astype(dt)

    def body(alpha, xs):
        k, b, lw, cw, ww, ok = xs
        r = k % rows
        bit = jnp.left_shift(1, r)
        vnew = vals[:, r]
        bnew = bits[:, r]
        a0 = alpha[idx & ~bit]
        a1 = alpha[idx | bit]
        field = b + vals @ cw + jnp.dot(first, ww)
        new = jnp.logaddexp(a0 + lw * v0 * vnew, a1 + lw * v1 * vnew) + vnew * field
        new = jnp.where(ok[bnew], new, -jnp.inf)
        return new, None

    steps = jnp.arange(bias.shape[0], dtype=jnp.int32)
    alpha, _ = jax.lax.scan(body, alpha0, (steps, bias, left, couple, wrap, allowed))
    return jax.nn.logsumexp(alpha)


def _check_transfer_size(model: GridHidden, plan: _TransferPlan) -> None:
    states = 2**plan.rows * (2**plan.rows if plan.periodic_scan else 1)
    if states > MAX_TRANSFER_STATES:
        raise ValueError(
            f"grid {model.height}x{model.width} too large for the exact transfer matrix: "
            f"{states} frontier states > {MAX_TRANSFER_STATES} (2^min(height, width)"
            f"{' squared on a periodic grid' if plan.periodic_scan else ''}); estimate log Z by AIS "
            "(ui.smc.ais) instead"
        )


def _transfer_fn(model: GridHidden, plan: _TransferPlan):
    """Jitted ``(params, allowed (B, R*C, 2)) -> (B,)`` log sums (cached on the model)."""
    fn = getattr(model, "_transfer_fn_cache", None)
    if fn is not None:
        return fn
    spin = model.variables["v"].values[0] < 0
    rows = plan.rows
    first_steps = np.arange(rows)  # scan steps of the first column

    def one(params, allowed, dt):
        tables = _site_tables(plan, params, dt)
        if not plan.periodic_scan:
            return _transfer_log_sum(plan, tables, allowed, jnp.zeros((rows,), dt), spin)
        # periodic scan direction: fix the first column to each of its 2^R values, sum
        idx = jnp.arange(2**rows, dtype=jnp.int32)
        bits = (idx[:, None] >> jnp.arange(rows, dtype=jnp.int32)) & 1

        def fixed(b):
            first = (2 * b - 1).astype(dt) if spin else b.astype(dt)
            onehot = jnp.stack([b == 0, b == 1], axis=-1)  # (R, 2)
            allowed_b = allowed.at[first_steps].set(allowed[first_steps] & onehot)
            return _transfer_log_sum(plan, tables, allowed_b, first, spin)

        return jax.nn.logsumexp(jax.lax.map(fixed, bits))

    @jax.jit
    def fn(params, allowed):
        dt = compute_dtype(params["w"])
        return jax.lax.map(lambda a: one(params, a, dt), allowed, batch_size=min(allowed.shape[0], 256))

    model._transfer_fn_cache = fn
    return fn


def _clamp_allowed(model: GridHidden, plan: _TransferPlan, clamp: Any) -> tuple[jax.Array, tuple | None]:
    """``(B, R*C, 2)`` allowed-value masks and the batch shape of ``clamp`` (None: unclamped)."""
    n_steps = plan.sites.shape[0]
    if clamp is None:
        return jnp.ones((1, n_steps, 2), bool), None
    if isinstance(clamp, dict):
        if set(clamp) != {"v"}:
            raise ValueError(f"`clamp` as a dict must hold exactly the key 'v' (the visible units), got {sorted(clamp)}")
        clamp = clamp["v"]
    v = jnp.asarray(clamp)
    nv = len(model.visible_sites)
    if v.ndim < 1 or v.shape[-1] != nv:
        raise ValueError(f"`clamp` must have shape (..., {nv}) (values of the visible units), got {v.shape}")
    batch_shape = v.shape[:-1]
    flat = model.variables["v"].to_index(v.reshape(-1, nv))  # (B, nv) in {0, 1}
    vpos = jnp.asarray(plan.vpos)
    vals = flat[:, jnp.maximum(vpos, 0)]  # (B, R*C)
    hidden = (vpos < 0)[None, :]
    allowed = jnp.stack([hidden | (vals == 0), hidden | (vals == 1)], axis=-1)
    return allowed, batch_shape


def grid_log_partition(model: GridHidden, params: dict, clamp: Any = None) -> jax.Array:
    """Exact :math:`\\log Z` (or :math:`\\log Z(v)`) of a grid MRF by a column transfer matrix.

    .. math::  \\log Z = \\log \\sum_x e^{-E(x)}, \\qquad
               \\log Z(v) = \\log \\sum_h e^{-E(v, h)}\\ \\ (\\text{visible units clamped}).

    The sum runs site by site in column-major order over the frontier of the last
    ``R = min(height, width)`` sites added (one per row; the grid is transposed when
    it is taller than wide): adding site :math:`(r, c)` replaces the frontier bit of
    row ``r`` (old value :math:`s`, new value :math:`s'`),

    .. math::  \\alpha'(x_{-r}, s') = \\log \\sum_s \\exp\\big(\\alpha(x_{-r}, s)
               + w_{\\text{left}}\\, s s'\\big) + s'\\big(b_{rc} + \\textstyle\\sum_{r'}
               w_{r r'} x_{r'}\\big),

    the site-by-site factorisation of the column transfer matrix (Baxter 1982, ch. 2),
    at cost :math:`O(H W\\, 2^R)` per clamped configuration (:math:`O(H W\\, 4^R)` with
    periodic boundaries along the scan, where the first column is fixed to each of its
    :math:`2^R` values in turn).  Clamped (visible) sites only allow their observed
    value.  A ``jax.lax.scan`` over the sites, vectorised over clamps; exact up to
    floating-point rounding (float32 unless ``params`` are float64).

    Parameters
    ----------
    model
        A :class:`GridHidden` (open or periodic, binary or spin).
    params
        ``{"w": (num_edges,), "b": (height * width,)}``.
    clamp
        ``None`` for :math:`\\log Z`; or the visible units' values ``(..., num_visible)``
        (or ``{"v": ...}``) for :math:`\\log Z(v)` of each configuration.

    Returns
    -------
    A scalar (``clamp=None``) or an array of ``clamp``'s batch shape.

    Raises
    ------
    ValueError
        If :math:`2^{\\min(H, W)}` (squared when periodic) exceeds
        :data:`MAX_TRANSFER_STATES` (a 30x30 grid: use AIS), or bad ``clamp``.
    """
    if not isinstance(model, GridHidden):
        raise TypeError(f"`model` must be a GridHidden (ui.models.grid_hidden), got {type(model).__name__}")
    model.validate_params(params)
    plan = _transfer_plan(model)
    _check_transfer_size(model, plan)
    allowed, batch_shape = _clamp_allowed(model, plan, clamp)
    out = _transfer_fn(model, plan)(params, allowed)
    return out[0] if batch_shape is None else out.reshape(batch_shape)


def grid_log_likelihood(model: GridHidden, params: dict, data: Any) -> jax.Array:
    """Exact :math:`\\log p(v) = \\log Z(v) - \\log Z` of visible configurations (hidden units summed).

    Both terms by :func:`grid_log_partition`.  ``data``: ``{"v": (..., num_visible)}`` or
    the array itself.  Returns an array of the batch shape (the ``ui.exact.log_likelihood``
    convention, without enumeration: a 10x10 grid costs ~``100 * 2^10`` operations
    per datum).
    """
    return grid_log_partition(model, params, data) - grid_log_partition(model, params)
