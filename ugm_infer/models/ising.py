"""Ising models and (fully visible) Boltzmann machines on any graph.

Two parametrisations of the same energy, over spins ``s`` in ``{-1, +1}^n``
(``domain="spin"``) or units in ``{0, 1}^n`` (``domain="binary"``):

dense couplings (``edges=None``)
    .. math::  E(s) = -\\tfrac12\\, s^\\top W s - h^\\top s,

    ``params = {"W": (n, n) symmetric with zero diagonal, "h": (n,)}``, so
    :math:`-\\tfrac12 s^\\top W s = -\\sum_{i<j} W_{ij} s_i s_j`.
edge list (``edges`` an ``(m, 2)`` int array)
    .. math::  E(s) = -\\sum_{e=(i,j)} w_e\\, s_i s_j - h^\\top s,

    ``params = {"w": (m,), "h": (n,)}``, one coupling per listed edge.

Both energies are multilinear (affine in each site), so the Gibbs kernel gets every
conditional of a block from one gradient, :math:`\\partial E / \\partial s = -W s - h`
(a matrix product over a batch of chains), and the model declares its blocks:
single sites for dense couplings (every pair interacts), the greedy colouring of the
graph for an edge list.

References
----------
Ising, E. (1925). Beitrag zur Theorie des Ferromagnetismus. Z. Physik 31, 253-258.
Ackley, D. H., Hinton, G. E. and Sejnowski, T. J. (1985). A learning algorithm for
Boltzmann machines. Cognitive Science 9, 147-169.
Sherrington, D. and Kirkpatrick, S. (1975). Solvable model of a spin-glass.
Phys. Rev. Lett. 35, 1792-1796 (the ``1/sqrt(n)`` coupling scale of ``init_params``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.kernels.pairwise import CouplingLogDensity
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
    spin_or_binary,
    symmetric_offdiagonal,
)

__all__ = ["Ising", "ising", "boltzmann_machine"]


class Ising(EnergyModel):
    """Ising model / Boltzmann machine on a dense or sparse graph (see the module docstring).

    Built by :func:`ising` and :func:`boltzmann_machine`; one variable ``"s"`` of
    shape ``(num_spins,)``.

    Attributes
    ----------
    num_spins
        Number of sites ``n``.
    edges
        The validated read-only ``(m, 2)`` int32 edge list, or ``None`` for dense couplings.
    domain
        ``"spin"`` or ``"binary"``.
    """

    def __init__(self, num_spins: int, *, edges: Any = None, domain: str = "spin", dtype: Any = jnp.float32):
        n = check_int(num_spins, "num_spins")
        dom = spin_or_binary(domain, (n,), dtype)
        self.num_spins = n
        self.domain = domain
        self.edges = None if edges is None else check_edges(edges, n)
        label = "ising" if domain == "spin" else "boltzmann_machine"
        if self.edges is None:
            energy = _dense_energy
            blocks = [{"s": np.array([i])} for i in range(n)]
        else:
            energy = _edge_energy(self.edges)
            blocks = colour_blocks(n, self.edges, "s")
        super().__init__(
            energy,
            {"s": dom},
            blocks,
            multilinear=True,
            validate_params=self._check_params,
            name=label if self.edges is None else f"{label}(edges)",
        )

    def energies(self, params: Any, states: Any) -> jax.Array:
        r"""Energies of a batch of configurations (leading axis).

        Dense couplings: computed units-major, :math:`-\tfrac12 \sum_i (S^\top)_{ic}
        (W S^\top)_{ic} - S h`, so that the gradient in ``W`` (the learners' model and
        data terms) is one matrix product whose operands XLA's CPU matrix-multiply
        library takes as they are (the chains-major form needs a transposed operand,
        which falls back to a slower generic product).
        """
        if self.edges is not None or jnp.ndim(states["s"]) != 2:
            return super().energies(params, states)
        W, h = symmetric_offdiagonal(jnp.asarray(params["W"])), jnp.asarray(params["h"])
        s = jnp.asarray(states["s"]).astype(compute_dtype(W))
        return -0.5 * jnp.sum(s.T * (W @ s.T), axis=0) - s @ h

    @property
    def dense(self) -> bool:
        """Whether the couplings are a dense matrix (``edges=None``)."""
        return self.edges is None

    @property
    def max_degree(self) -> int:
        """Largest number of neighbours of a site."""
        if self.edges is None:
            return self.num_spins - 1
        if self.edges.size == 0:
            return 0
        return int(np.bincount(self.edges.reshape(-1), minlength=self.num_spins).max())

    def _check_params(self, params: Any) -> None:
        n = self.num_spins
        if self.edges is None:
            check_params(self.name, params, {"W": (n, n), "h": (n,)}, ["(num_spins, num_spins)", "(num_spins,)"])
            check_symmetric(self.name, "W", params["W"], (1, 0), "W[i, j] == W[j, i]")
            check_zero_diagonal(self.name, "W", params["W"], "self-couplings are not allowed")
        else:
            m = len(self.edges)
            check_params(self.name, params, {"w": (m,), "h": (n,)}, ["(num_edges,)", "(num_spins,)"])

    def init_params(self, rng_key: jax.Array, scale: float = 1.0, field_scale: float = 0.0, dtype: Any = jnp.float32):
        """Random parameters.

        Couplings are drawn i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2 / d)` with
        :math:`d` the maximum degree of the graph (``n - 1`` when dense), so the
        coupling part of every local field has standard deviation at most ``scale``
        whatever the graph size (the Sherrington-Kirkpatrick ``1/sqrt(n)`` scaling for
        dense couplings); dense ``W`` is symmetrised with a zero diagonal.  Fields are
        :math:`\\mathcal N(0, \\mathrm{field\\_scale}^2)` (zero by default).

        Returns
        -------
        ``{"W": (n, n), "h": (n,)}`` (dense) or ``{"w": (m,), "h": (n,)}`` (edge list), float32.
        """
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        field_scale = check_scale(field_scale, "field_scale")
        n = self.num_spins
        std = scale / np.sqrt(max(self.max_degree, 1))
        if self.edges is None:
            spec = (("W", (n, n), "symmetric"), ("h", (n,), "normal"))
        else:
            spec = (("w", (len(self.edges),), "normal"), ("h", (n,), "normal"))
        return random_params(rng_key, (std, field_scale), spec, jnp.dtype(dtype))

    def logdensity_fn(self, params: Any, beta: Any = 1.0):
        """``s -> -beta E(params, s)``; with dense couplings it also gives ``beta W`` (incremental Gibbs).

        Dense models return a :class:`~ugm_infer.kernels.pairwise.CouplingLogDensity`
        whose couplings ``{"s": beta * W}`` (symmetrised, zero diagonal) let the block
        Gibbs kernel update single sites from incrementally maintained local fields
        (:mod:`ugm_infer.kernels.pairwise`): one gradient per sweep instead of one per
        site.  Edge-list models return the plain log-density.
        """
        fn = super().logdensity_fn(params, beta)
        if self.edges is not None:
            return fn
        return CouplingLogDensity(fn, lambda: {"s": beta * symmetric_offdiagonal(jnp.asarray(params["W"]))})

    def dense_couplings(self, params: Any) -> jax.Array:
        """The ``(n, n)`` symmetric coupling matrix ``W`` of either parametrisation."""
        if self.edges is None:
            return jnp.asarray(params["W"])
        w = jnp.asarray(params["w"])
        i, j = self.edges[:, 0], self.edges[:, 1]
        return jnp.zeros((self.num_spins, self.num_spins), w.dtype).at[i, j].add(w).at[j, i].add(w)


def _dense_energy(params, state):
    W, h = symmetric_offdiagonal(params["W"]), params["h"]
    s = state["s"].astype(compute_dtype(W))
    # dE/ds = -W s - h: one matrix-vector product (a matmul under vmap); W is used
    # symmetrised with a zero diagonal so that learning keeps it so (exact gradients)
    return -0.5 * jnp.dot(s, jnp.dot(W, s)) - jnp.dot(h, s)


def _edge_energy(edges: np.ndarray):
    i_idx, j_idx = edges[:, 0], edges[:, 1]

    def energy(params, state):
        w, h = params["w"], params["h"]
        s = state["s"].astype(compute_dtype(w))
        return -jnp.dot(w, s[i_idx] * s[j_idx]) - jnp.dot(h, s)

    return energy


def ising(num_spins: int, *, edges: Any = None, domain: str = "spin", dtype: Any = jnp.float32) -> Ising:
    """Ising model on any graph (dense couplings or an edge list).

    .. math::  E(s) = -\\tfrac12\\, s^\\top W s - h^\\top s \\quad\\text{or}\\quad
               E(s) = -\\sum_{e=(i,j)} w_e s_i s_j - h^\\top s

    Parameters
    ----------
    num_spins
        Number of sites ``n``.
    edges
        ``None`` for dense couplings ``params["W"]`` (symmetric, zero diagonal), or an
        ``(m, 2)`` int array of distinct pairs ``i != j`` with one coupling
        ``params["w"][e]`` per row.
    domain
        ``"spin"`` (``s`` in {-1, +1}) or ``"binary"`` (``s`` in {0, 1}).
    dtype
        Storage dtype of states (``float32``; ``int8`` saves memory; energies always
        compute in the parameters' float dtype).

    Returns
    -------
    An :class:`Ising` model with variable ``"s"`` of shape ``(n,)``, declared blocks
    (single sites when dense, the greedy colouring of ``edges`` otherwise) and
    ``multilinear=True``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ugm_infer as ui
    >>> model = ui.models.ising(3, edges=[[0, 1], [1, 2]])
    >>> params = {"w": jnp.array([1.0, -0.5]), "h": jnp.zeros(3)}
    >>> float(model.energy(params, {"s": jnp.array([1.0, 1.0, -1.0])}))
    -1.5
    """
    return Ising(num_spins, edges=edges, domain=domain, dtype=dtype)


def boltzmann_machine(num_units: int, *, edges: Any = None, dtype: Any = jnp.float32) -> Ising:
    """Fully visible Boltzmann machine: :func:`ising` with units in ``{0, 1}``.

    .. math::  E(s) = -\\tfrac12\\, s^\\top W s - b^\\top s, \\qquad s \\in \\{0, 1\\}^n

    with the bias stored as ``params["h"]`` (Ackley, Hinton and Sejnowski 1985).
    ``edges`` as in :func:`ising`.
    """
    return Ising(check_int(num_units, "num_units"), edges=edges, domain="binary", dtype=dtype)
