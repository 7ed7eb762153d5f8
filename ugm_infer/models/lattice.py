"""Two-dimensional lattices: edge lists, checkerboard blocks and the uniform lattice Ising model.

Sites of a ``height x width`` lattice are numbered row-major, site ``(r, c)`` being
``r * width + c``.  Nearest neighbours are ``(r, c) ~ (r, c + 1)`` and
``(r, c) ~ (r + 1, c)``, wrapping around with ``periodic=True`` (a torus).

Boundary conventions (the same for every function here):

* a dimension of size 1 has no bonds;
* a periodic dimension must have size 1 or at least 3 (size 2 would bond the same
  pair twice, once directly and once around the torus; use ``periodic=False``);
* the lattice is two-colourable (checkerboard) unless a periodic dimension has odd
  size >= 3; then :func:`lattice_colors` gives an explicit 3-colouring.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.kernels.checkerboard import LatticeLayout, LatticeLogDensity, pair_and_total
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import check_int, check_params, compute_dtype, spin_or_binary

__all__ = ["lattice_edges", "checkerboard_blocks", "lattice_colors", "LatticeIsing", "lattice_ising"]

#: Critical coupling of the square-lattice Ising model, J_c = ln(1 + sqrt 2) / 2 (Onsager 1944).
CRITICAL_COUPLING = float(np.log1p(np.sqrt(2.0)) / 2.0)


def _check_lattice(height: Any, width: Any, periodic: Any) -> tuple[int, int, bool]:
    height = check_int(height, "height")
    width = check_int(width, "width")
    if not isinstance(periodic, (bool, np.bool_)):
        raise TypeError(f"`periodic` must be True or False, got {periodic!r}")
    if periodic:
        for argname, size in (("height", height), ("width", width)):
            if size == 2:
                raise ValueError(
                    f"periodic lattice with `{argname}` = 2 would bond each pair twice (directly and around "
                    "the torus); use periodic=False, or a size of 1 or >= 3"
                )
    return height, width, bool(periodic)


def lattice_edges(height: int, width: int, periodic: bool = True) -> np.ndarray:
    """Nearest-neighbour edges of a 2D lattice, row-major site numbering.

    Parameters
    ----------
    height, width
        Lattice size; site ``(r, c)`` is ``r * width + c``.
    periodic
        Wrap around both dimensions (torus).  See the module docstring for sizes 1 and 2.

    Returns
    -------
    An ``(m, 2)`` int32 array: first every horizontal bond ``(r, c) ~ (r, c + 1)``, then
    every vertical bond ``(r, c) ~ (r + 1, c)``, each in row-major order of its first
    site.  ``m = 2 * height * width`` on a torus with both sizes >= 3.

    Examples
    --------
    >>> lattice_edges(2, 2, periodic=False).tolist()
    [[0, 1], [2, 3], [0, 2], [1, 3]]
    """
    height, width, periodic = _check_lattice(height, width, periodic)
    site = np.arange(height * width).reshape(height, width)
    parts = []
    if width > 1:
        right = np.roll(site, -1, axis=1)
        cols = slice(None) if periodic else slice(0, width - 1)
        parts.append(np.stack([site[:, cols].ravel(), right[:, cols].ravel()], axis=1))
    if height > 1:
        down = np.roll(site, -1, axis=0)
        rows = slice(None) if periodic else slice(0, height - 1)
        parts.append(np.stack([site[rows].ravel(), down[rows].ravel()], axis=1))
    if not parts:
        return np.zeros((0, 2), dtype=np.int32)
    return np.concatenate(parts).astype(np.int32)


def checkerboard_blocks(height: int, width: int, name: str = "s") -> list[dict[str, np.ndarray]]:
    """The two checkerboard blocks ``[{name: (r + c) even}, {name: (r + c) odd}]``.

    Each mask has shape ``(height, width)``.  Sites of one colour share no bond on an
    open lattice or on a torus with even sizes, so each block is updated in parallel.
    """
    height = check_int(height, "height")
    width = check_int(width, "width")
    parity = np.add.outer(np.arange(height), np.arange(width)) % 2
    return [{name: parity == 0}, {name: parity == 1}]


def _cycle_colours(size: int, periodic: bool) -> np.ndarray:
    """Values in Z_3 with consecutive entries distinct (cyclically when ``periodic``)."""
    colours = np.arange(size) % 2
    if periodic and size >= 3 and size % 2:
        colours[-1] = 2  # an odd cycle: ... 0, 1, 2 | 0 ...
    return colours


def lattice_colors(height: int, width: int, periodic: bool = True) -> np.ndarray:
    """A proper colouring of the lattice's sites with the fewest colours, shape ``(height, width)``.

    The checkerboard ``(r + c) % 2`` whenever it is valid.  When a periodic dimension
    has odd size >= 3 the lattice contains odd cycles and needs 3 colours:
    ``(f(r) + g(c)) % 3``, where ``f`` and ``g`` map each dimension's cycle to
    ``Z_3`` with neighbours distinct (``0, 1, 0, 1, ..., 2`` for an odd cycle), so
    bonded sites differ in exactly one term and get different colours.  (Greedy
    colouring of :func:`lattice_edges` in site order uses 4 colours on odd tori.)
    """
    height, width, periodic = _check_lattice(height, width, periodic)
    odd_wrap = periodic and any(size >= 3 and size % 2 for size in (height, width))
    if not odd_wrap:
        return np.add.outer(np.arange(height), np.arange(width)) % 2
    return np.add.outer(_cycle_colours(height, periodic), _cycle_colours(width, periodic)) % 3


class LatticeIsing(EnergyModel):
    """Ising model on a 2D lattice with uniform coupling and field (built by :func:`lattice_ising`).

    .. math::  E(s) = -J \\sum_{\\langle i j \\rangle} s_i s_j - h \\sum_i s_i

    over nearest-neighbour bonds :math:`\\langle ij \\rangle` (each counted once), with
    ``params = {"J": scalar, "h": scalar}``.  One variable ``"s"`` of shape
    ``(height, width)``.

    Attributes
    ----------
    height, width, periodic, domain
        As passed to :func:`lattice_ising`.
    """

    #: recognised by the kernels (``kernels.multispin``, ``kernels.lattice_form``) without importing this module
    is_uniform_lattice_ising = True

    def __init__(self, height: int, width: int, *, periodic: bool = True, domain: str = "spin", dtype: Any = jnp.float32):
        height, width, periodic = _check_lattice(height, width, periodic)
        dom = spin_or_binary(domain, (height, width), dtype)
        self.height, self.width, self.periodic, self.domain = height, width, periodic, domain
        colors = lattice_colors(height, width, periodic)
        blocks = [{"s": colors == c} for c in range(int(colors.max()) + 1)]
        self._pair, self._neighbour_sum = _lattice_pair_sum(height, width, periodic)
        self._energy = _lattice_energy(self._pair)
        super().__init__(
            self._energy,
            {"s": dom},
            blocks,
            multilinear=True,
            validate_params=self._check_params,
            name=f"lattice_ising({height}x{width}, {'periodic' if periodic else 'open'})",
        )

    def _check_params(self, params: Any) -> None:
        check_params(self.name, params, {"J": (), "h": ()}, ["()", "()"])

    def finite_energy_on_domain(self, params: Any) -> bool:
        """True when every state in the domain has a finite energy at ``params`` (concrete, finite ``J``, ``h``).

        ``|E| <= |J| bonds + |h| sites``; ``ui.sample`` then skips evaluating the
        energies of its starting states.  False for a replaced energy function.
        """
        if self.energy_fn is not self._energy:
            return False
        try:
            J, h = (float(np.max(np.abs(np.asarray(params[k], np.float64)))) for k in ("J", "h"))
        except (TypeError, KeyError, jax.errors.ConcretizationTypeError):
            return False
        sites = self.height * self.width
        return bool(np.isfinite(J) and np.isfinite(h) and (J * 2 * sites + h * sites) < 1e30)

    def energy_of_words(
        self, params: Any, layout: LatticeLayout, even: jax.Array, odd: jax.Array, chains_last: bool = False
    ) -> jax.Array | None:
        """:meth:`energy` of states stored as four-sub-lattice words (any leading axes), or ``None``.

        The same values as unpacking and calling :meth:`energy` (the bond and site sums
        are integers, exact in the float dtype up to ``2^22`` sites), without unpacking.
        ``None`` when the words are of another lattice, the energy function was
        replaced, or the lattice is larger than that.  ``chains_last``: words
        ``(h, w, chains)`` (one energy per chain).
        """
        size = self.height * self.width
        same = (layout.height, layout.width, layout.periodic, layout.domain) == (
            self.height,
            self.width,
            self.periodic,
            self.domain,
        )
        if not same or size > 1 << 22 or self.energy_fn is not self._energy:
            return None
        J, h = params["J"], params["h"]
        pair, total = pair_and_total(layout, even, odd, chains_last)
        dtype = compute_dtype(J)
        return -J * pair.astype(dtype) - h * total.astype(dtype)

    def local_fields(self, params: Any, s: jax.Array) -> jax.Array:
        """:math:`J \\sum_{j \\sim i} s_j + h` (``-dE/ds_i``) at every site.

        ``s`` is one configuration of shape ``(height, width)``; vmap over chains.
        """
        J, h = params["J"], params["h"]
        x = jnp.asarray(s).astype(compute_dtype(J))
        return J * self._neighbour_sum(x) + h

    def logdensity_fn(self, params: Any, beta: Any = 1.0) -> LatticeLogDensity:
        """``s -> -beta E(params, s)``, carrying ``J``, ``h``, ``beta`` and the closed-form conditionals.

        The returned :class:`~ugm_infer.kernels.checkerboard.LatticeLogDensity`
        evaluates like any log-density.  On a lattice with even height and width the
        block Gibbs kernel runs the four-sub-lattice sweep of
        :mod:`ugm_infer.kernels.checkerboard` from its ``J``, ``h`` and ``beta``;
        otherwise it uses its ``site_logits``, the exact conditional log-odds
        ``2 beta (J nb_i + h)`` (spins) or ``beta (J nb_i + h)`` (binary), with ``nb_i``
        the sum of the neighbours (no gradient, no masking).
        """
        fn = super().logdensity_fn(params, beta)
        scale = 2.0 if self.domain == "spin" else 1.0

        def site_logits(position):
            J, h = params["J"], params["h"]
            x = jnp.asarray(position["s"]).astype(compute_dtype(J))
            return {"s": (scale * beta) * (J * self._neighbour_sum(x) + h)}

        structure = (self.height, self.width, self.periodic, self.domain)
        return LatticeLogDensity(fn, site_logits, params["J"], params["h"], beta, structure)

    def edges(self) -> np.ndarray:
        """The bonds as an edge list (:func:`lattice_edges`), for :func:`~ugm_infer.models.ising`."""
        return lattice_edges(self.height, self.width, self.periodic)

    def init_params(self, rng_key: jax.Array | None = None, J: float = 0.44, h: float = 0.0, dtype: Any = jnp.float32):
        """Parameters ``{"J": J, "h": h}`` as float32 scalars.

        ``rng_key`` is accepted for the common ``init_params(rng_key, ...)`` interface
        and unused (the parameters are deterministic).  The default ``J = 0.44`` is
        close to the critical coupling :math:`J_c = \\ln(1 + \\sqrt 2)/2 \\approx 0.4407`
        of the infinite square lattice with spins (Onsager 1944), where Gibbs sampling
        mixes slowly: a deliberately hard default.
        """
        del rng_key
        for argname, value in (("J", J), ("h", h)):
            if not np.isfinite(value):
                raise ValueError(f"`{argname}` must be finite, got {value}")
        return {"J": jnp.asarray(J, dtype), "h": jnp.asarray(h, dtype)}


def _lattice_pair_sum(height: int, width: int, periodic: bool):
    """``pair(s) = sum_<ij> s_i s_j`` with a hand-written derivative, and the neighbour sum.

    ``d pair / d s`` is the neighbour sum ``nb(s)`` (each bond counted once in
    ``pair``, so both ends get the other's value).  The derivative is declared with
    :func:`jax.custom_jvp` as ``sum(ds * nb(s))``, so ``jax.grad`` of the energy is
    exactly the rolls (or shifts) of a hand-written checkerboard sweep.  Plain
    autodiff gives the same values, but its transpose of ``roll`` (slices,
    concatenations and pads) fuses poorly on CPU with the masked midpoint state the
    Gibbs kernel differentiates at (about 1.5x slower on a 128x128 lattice).
    """
    # a dimension contributes bonds when it has size >= 2 (open) / >= 3 (periodic)
    bond_rows = height >= (3 if periodic else 2)
    bond_cols = width >= (3 if periodic else 2)

    def forward(s):
        if periodic:
            neighbours = jnp.zeros_like(s)
            if bond_rows:
                neighbours = neighbours + jnp.roll(s, 1, axis=0)
            if bond_cols:
                neighbours = neighbours + jnp.roll(s, 1, axis=1)
            return jnp.sum(s * neighbours)
        pair = jnp.zeros((), s.dtype)
        if bond_rows:
            pair = pair + jnp.sum(s[1:, :] * s[:-1, :])
        if bond_cols:
            pair = pair + jnp.sum(s[:, 1:] * s[:, :-1])
        return pair

    def neighbour_sum(s):
        out = jnp.zeros_like(s)
        if periodic:
            if bond_rows:
                out = out + jnp.roll(s, 1, axis=0) + jnp.roll(s, -1, axis=0)
            if bond_cols:
                out = out + jnp.roll(s, 1, axis=1) + jnp.roll(s, -1, axis=1)
            return out
        if bond_rows:
            out = out + jnp.pad(s[:-1, :], ((1, 0), (0, 0))) + jnp.pad(s[1:, :], ((0, 1), (0, 0)))
        if bond_cols:
            out = out + jnp.pad(s[:, :-1], ((0, 0), (1, 0))) + jnp.pad(s[:, 1:], ((0, 0), (0, 1)))
        return out

    pair = jax.custom_jvp(forward)

    @pair.defjvp
    def _pair_jvp(primals, tangents):
        (s,), (ds,) = primals, tangents
        return forward(s), jnp.sum(ds * neighbour_sum(s))

    return pair, neighbour_sum


def _lattice_energy(pair):
    def energy(params, state):
        J, h = params["J"], params["h"]
        s = state["s"].astype(compute_dtype(J))
        return -J * pair(s) - h * jnp.sum(s)

    return energy


def lattice_ising(
    height: int, width: int, *, periodic: bool = True, domain: str = "spin", dtype: Any = jnp.float32
) -> LatticeIsing:
    """Ising model on a ``height x width`` square lattice with uniform coupling and field.

    .. math::  E(s) = -J \\sum_{\\langle i j \\rangle} s_i s_j - h \\sum_i s_i

    Parameters
    ----------
    height, width
        Lattice size (see the module docstring for sizes 1 and 2).
    periodic
        Toroidal boundary (bonds wrap around) or open boundary.
    domain
        ``"spin"`` ({-1, +1}) or ``"binary"`` ({0, 1}).
    dtype
        Storage dtype of states: ``float32`` by default, ``int8`` to cut memory on
        huge lattices (the energy casts to the parameters' float dtype, at least
        float32).

    Returns
    -------
    A :class:`LatticeIsing` model: variable ``"s"`` of shape ``(height, width)``,
    ``params = {"J": scalar, "h": scalar}``, checkerboard blocks (3 colours from
    :func:`lattice_colors` for an odd periodic size), ``multilinear=True``.  The same energy as
    ``ising(height * width, edges=lattice_edges(height, width, periodic))`` with
    ``w = J`` on every edge and ``h`` on every site, with row-major flattening.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ugm_infer as ui
    >>> model = ui.models.lattice_ising(4, 4)
    >>> params = model.init_params(J=1.0)
    >>> float(model.energy(params, {"s": jnp.ones((4, 4))}))
    -32.0
    """
    return LatticeIsing(height, width, periodic=periodic, domain=domain, dtype=dtype)
