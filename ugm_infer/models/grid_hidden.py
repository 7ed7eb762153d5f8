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

References
----------
Adiabatic persistent contrastive divergence learning (APCD paper), section 4.1
(grid MRFs with hidden units).
"""

from __future__ import annotations

from typing import Any

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

__all__ = ["GridHidden", "grid_hidden", "random_grid_hidden"]


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
