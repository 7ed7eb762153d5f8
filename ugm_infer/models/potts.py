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
imposed.

References
----------
Potts, R. B. (1952). Some generalized order-disorder transformations. Proc. Camb.
Phil. Soc. 48, 106-109.  Wu, F. Y. (1982). The Potts model. Rev. Mod. Phys. 54, 235.
Morcos, F. et al. (2011). Direct-coupling analysis of residue coevolution captures
native contacts across many protein families. PNAS 108, E1293-E1301.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Categorical
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
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

__all__ = ["Potts", "potts", "lattice_potts"]


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


def _edge_energy(edges: np.ndarray, q: int):
    i_idx, j_idx = edges[:, 0], edges[:, 1]

    def energy(params, state):
        J, h = params["J"], params["h"]
        onehot = jax.nn.one_hot(state["x"].astype(jnp.int32), q, dtype=compute_dtype(J))  # (n, q)
        pair = jnp.einsum("ea,eab,eb->", onehot[i_idx], J, onehot[j_idx])
        return -pair - jnp.sum(h * onehot)

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
    return model
