"""Restricted and semi-restricted Boltzmann machines.

RBM (Smolensky 1986; Hinton 2002), visible units ``v`` in ``{0,1}^{n_v}``, hidden units
``h`` in ``{0,1}^{n_h}``:

.. math::  E(v, h) = -v^\\top W h - b^\\top v - c^\\top h,

``params = {"W": (n_v, n_h), "b": (n_v,), "c": (n_h,)}``.  Given one layer the other
factorises, :math:`p(h_j = 1 \\mid v) = \\sigma(c_j + v^\\top W_{:j})` and
:math:`p(v_i = 1 \\mid h) = \\sigma(b_i + W_{i:} h)`, so the blocks are ``{v}`` and
``{h}``, each drawn with one matrix product per batch of chains.  Summing out a
layer gives the free energies

.. math::  F(v) = -b^\\top v - \\sum_j \\log(1 + e^{c_j + v^\\top W_{:j}}), \\qquad
           F(h) = -c^\\top h - \\sum_i \\log(1 + e^{b_i + W_{i:} h}),

with :math:`p(v) \\propto e^{-F(v)}` (``free_energy_fns["h"]``, the hidden layer
summed out) and :math:`p(h) \\propto e^{-F(h)}` (``free_energy_fns["v"]``).

Semi-restricted BM (Osindero and Hinton 2008; used by Salakhutdinov 2009 as the
"semi-restricted" model) adds lateral visible-visible couplings ``L``:

.. math::  E(v, h) = -v^\\top W h - b^\\top v - c^\\top h - \\tfrac12 v^\\top L v,

``L`` symmetric ``(n_v, n_v)`` with zero diagonal (or one coupling per listed visible
edge).  The hiddens are still independent given ``v``, so
:math:`F(v) = -b^\\top v - \\tfrac12 v^\\top L v - \\sum_j \\mathrm{softplus}(c_j + v^\\top W_{:j})`.

References
----------
Smolensky, P. (1986). Information processing in dynamical systems: foundations of
harmony theory.  Hinton, G. E. (2002). Training products of experts by minimizing
contrastive divergence. Neural Computation 14, 1771-1800.
Hinton, G. E. (2010). A practical guide to training restricted Boltzmann machines.
UTML TR 2010-003 (initialisation, section 8).
Osindero, S. and Hinton, G. E. (2008). Modeling image patches with a directed
hierarchy of Markov random fields. NIPS 20.
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered transitions.
NIPS 22.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary
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
    softplus,
    symmetric_offdiagonal,
)

__all__ = ["RBM", "SemiRBM", "rbm", "semi_rbm"]


# --------------------------------------------------------------------------------------
# energies and free energies (one configuration; the free energies also broadcast over
# leading batch axes of v / h)
# --------------------------------------------------------------------------------------
def _rbm_energy(params, state):
    W, b, c = params["W"], params["b"], params["c"]
    dt = compute_dtype(W)
    v, h = state["v"].astype(dt), state["h"].astype(dt)
    # dE/dh = -(v W + c) and dE/dv = -(W h + b): one matrix product per block under vmap
    return -jnp.dot(jnp.dot(v, W), h) - jnp.dot(b, v) - jnp.dot(c, h)


def _visible_free_energy(params, v):
    W, b, c = params["W"], params["b"], params["c"]
    v = jnp.asarray(v).astype(compute_dtype(W))
    return -jnp.sum(v * b, axis=-1) - jnp.sum(softplus(c + v @ W), axis=-1)


def _hidden_free_energy(params, h):
    W, b, c = params["W"], params["b"], params["c"]
    h = jnp.asarray(h).astype(compute_dtype(W))
    return -jnp.sum(h * c, axis=-1) - jnp.sum(softplus(b + h @ W.T), axis=-1)


def _lateral_dense(params, v):
    L = symmetric_offdiagonal(params["L"])  # learning keeps L symmetric with a zero diagonal
    return 0.5 * jnp.sum(v * (v @ L), axis=-1)


def _lateral_edges(edges: np.ndarray):
    i_idx, j_idx = edges[:, 0], edges[:, 1]

    def lateral(params, v):
        return jnp.sum(params["L"] * v[..., i_idx] * v[..., j_idx], axis=-1)

    return lateral


class RBM(EnergyModel):
    """Restricted Boltzmann machine (built by :func:`rbm`; see the module docstring).

    Variables ``"v"`` = ``Binary((num_visible,))`` and ``"h"`` = ``Binary((num_hidden,))``;
    ``params = {"W": (n_v, n_h), "b": (n_v,), "c": (n_h,)}``.

    Attributes
    ----------
    num_visible, num_hidden
        Layer sizes.
    visible
        ``("v",)``: the variables data provide (learners read it).
    """

    visible = ("v",)

    def __init__(self, num_visible: int, num_hidden: int, *, dtype: Any = jnp.float32, **kwargs: Any):
        nv = check_int(num_visible, "num_visible")
        nh = check_int(num_hidden, "num_hidden")
        self.num_visible, self.num_hidden = nv, nh
        variables = {"v": Binary((nv,), dtype), "h": Binary((nh,), dtype)}
        if not kwargs:  # plain RBM
            kwargs = dict(
                energy_fn=_rbm_energy,
                blocks=[{"v": True}, {"h": True}],
                free_energy_fns={
                    "h": lambda params, rest: _visible_free_energy(params, rest["v"]),
                    "v": lambda params, rest: _hidden_free_energy(params, rest["h"]),
                },
                name=f"rbm({nv}, {nh})",
            )
        energy_fn = kwargs.pop("energy_fn")
        super().__init__(
            energy_fn, variables, kwargs.pop("blocks"), multilinear=True, validate_params=self._check_params, **kwargs
        )

    def _param_spec(self) -> tuple[dict, list]:
        nv, nh = self.num_visible, self.num_hidden
        return {"W": (nv, nh), "b": (nv,), "c": (nh,)}, ["(num_visible, num_hidden)", "(num_visible,)", "(num_hidden,)"]

    def _check_params(self, params: Any) -> None:
        spec, names = self._param_spec()
        check_params(self.name, params, spec, names)

    # ------------------------------------------------------------------------------
    # conditionals and free energies
    # ------------------------------------------------------------------------------
    def free_energy(self, params: Any, v: jax.Array) -> jax.Array:
        """Visible free energy :math:`F(v) = -\\log \\sum_h e^{-E(v, h)}`.

        ``v`` has shape ``(num_visible,)`` or ``(..., num_visible)`` (leading axes are
        broadcast); :math:`p(v) = e^{-F(v)} / Z`.
        """
        return self.free_energy_fns["h"](params, {"v": v})

    def hidden_probs(self, params: Any, v: jax.Array) -> jax.Array:
        """:math:`p(h_j = 1 \\mid v) = \\sigma(c_j + v^\\top W_{:j})`, shape ``(..., num_hidden)``."""
        W = params["W"]
        v = jnp.asarray(v).astype(compute_dtype(W))
        return jax.nn.sigmoid(params["c"] + v @ W)

    def visible_probs(self, params: Any, h: jax.Array) -> jax.Array:
        """:math:`p(v_i = 1 \\mid h) = \\sigma(b_i + W_{i:} h)`, shape ``(..., num_visible)`` (plain RBM)."""
        W = params["W"]
        h = jnp.asarray(h).astype(compute_dtype(W))
        return jax.nn.sigmoid(params["b"] + h @ W.T)

    # ------------------------------------------------------------------------------
    # initialisation
    # ------------------------------------------------------------------------------
    def init_params(
        self,
        rng_key: jax.Array,
        scale: float = 0.01,
        data: Any = None,
        *,
        pseudo_count: float = 1.0,
        dtype: Any = jnp.float32,
    ) -> dict:
        """Initial parameters following Hinton's practical guide (2010, section 8).

        ``W`` is i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2)` (default 0.01), the
        hidden biases ``c`` are zero.  Visible biases ``b`` are zero, or, if ``data``
        (an ``(N, num_visible)`` array with values in [0, 1]) is given, the logits of
        the smoothed data marginals

        .. math::  b_i = \\log \\frac{p_i}{1 - p_i}, \\qquad
                   p_i = \\frac{\\sum_n v_i^{(n)} + \\alpha}{N + 2\\alpha}

        with ``alpha = pseudo_count`` (add-one smoothing by default, so pixels that are
        always off get a large negative, finite bias instead of ``-inf``).  With zero
        weights this makes :math:`p(v)` the product of the data marginals.

        Returns
        -------
        ``{"W": (n_v, n_h), "b": (n_v,), "c": (n_h,)}`` in ``dtype`` (float32).
        """
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        logits = None if data is None else data_logits(data, self.num_visible, pseudo_count)
        return self._random_params(rng_key, (scale,), (), jnp.dtype(dtype), logits)

    def _random_params(self, rng_key, stds: tuple, extra_spec: tuple, dtype: Any, logits: Any) -> dict:
        nv, nh = self.num_visible, self.num_hidden
        spec = (("W", (nv, nh), "normal"), ("b", (nv,), "zeros"), ("c", (nh,), "zeros")) + extra_spec
        params = random_params(rng_key, (stds[0], 0.0, 0.0) + stds[1:], spec, dtype)
        if logits is not None:
            params["b"] = jnp.asarray(logits, dtype)
        return params


def data_logits(data: Any, num_visible: int, pseudo_count: float = 1.0) -> np.ndarray:
    """Logits of the smoothed marginals of ``data`` (``(N, num_visible)``, values in [0, 1])."""
    arr = np.asarray(data)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"`data` must be a numeric array of shape (N, {num_visible}), got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != num_visible or arr.shape[0] < 1:
        raise ValueError(f"`data` must have shape (N, num_visible) = (N, {num_visible}) with N >= 1, got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
        raise ValueError("`data` must hold finite values in [0, 1] (binary data or probabilities)")
    alpha = check_scale(pseudo_count, "pseudo_count")
    p = (arr.sum(axis=0) + alpha) / (arr.shape[0] + 2 * alpha)
    if np.any(p <= 0) or np.any(p >= 1):
        raise ValueError(
            "some visible unit is constant in `data` and `pseudo_count` is 0: its bias would be infinite; "
            "use pseudo_count > 0"
        )
    return np.log(p) - np.log1p(-p)


class SemiRBM(RBM):
    """Semi-restricted Boltzmann machine (built by :func:`semi_rbm`; see the module docstring).

    ``params = {"W": (n_v, n_h), "b": (n_v,), "c": (n_h,), "L": (n_v, n_v) or (m,)}``.

    Attributes
    ----------
    num_visible, num_hidden
        Layer sizes.
    edges
        The validated ``(m, 2)`` visible-visible edge list, or ``None`` for a dense ``L``.
    """

    def __init__(self, num_visible: int, num_hidden: int, *, edges: Any = None, dtype: Any = jnp.float32):
        nv = check_int(num_visible, "num_visible")
        self.edges = None if edges is None else check_edges(edges, nv)
        lateral = _lateral_dense if self.edges is None else _lateral_edges(self.edges)

        def energy(params, state):
            v = state["v"].astype(compute_dtype(params["W"]))
            return _rbm_energy(params, state) - lateral(params, v)

        def free_energy_h(params, rest):
            v = jnp.asarray(rest["v"]).astype(compute_dtype(params["W"]))
            return _visible_free_energy(params, v) - lateral(params, v)

        if self.edges is None:
            visible_blocks = [{"v": np.array([i])} for i in range(nv)]
        else:
            visible_blocks = colour_blocks(nv, self.edges, "v")
        super().__init__(
            num_visible,
            num_hidden,
            dtype=dtype,
            energy_fn=energy,
            blocks=visible_blocks + [{"h": True}],
            free_energy_fns={"h": free_energy_h},
            name=f"semi_rbm({nv}, {num_hidden}{', edges' if self.edges is not None else ''})",
        )

    def _param_spec(self) -> tuple[dict, list]:
        spec, names = super()._param_spec()
        if self.edges is None:
            spec["L"], names = (self.num_visible, self.num_visible), names + ["(num_visible, num_visible)"]
        else:
            spec["L"], names = (len(self.edges),), names + ["(num_edges,)"]
        return spec, names

    def _check_params(self, params: Any) -> None:
        super()._check_params(params)
        if self.edges is None:
            check_symmetric(self.name, "L", params["L"], (1, 0), "L[i, j] == L[j, i]")
            check_zero_diagonal(self.name, "L", params["L"], "no visible self-couplings")

    def logdensity_fn(self, params: Any, beta: Any = 1.0):
        """``x -> -beta E(params, x)``; with dense ``L`` it also gives ``beta L`` (incremental Gibbs).

        With dense lateral couplings the visibles are single-site blocks; the returned
        :class:`~ugm_infer.kernels.pairwise.CouplingLogDensity` gives their couplings
        ``{"v": beta * L}`` (symmetrised, zero diagonal), so the block Gibbs kernel
        updates them one by one from incrementally maintained fields
        (:mod:`ugm_infer.kernels.pairwise`) instead of one gradient per visible unit.
        """
        fn = super().logdensity_fn(params, beta)
        if self.edges is not None:
            return fn
        return CouplingLogDensity(fn, lambda: {"v": beta * symmetric_offdiagonal(jnp.asarray(params["L"]))})

    def visible_probs(self, params: Any, h: jax.Array) -> jax.Array:
        """Not available: the visibles are coupled given ``h`` (use the Gibbs kernel)."""
        raise NotImplementedError("a semi-RBM's visibles are not independent given h; sample them with Gibbs")

    def init_params(
        self,
        rng_key: jax.Array,
        scale: float = 0.01,
        data: Any = None,
        *,
        lateral_scale: float = 0.0,
        pseudo_count: float = 1.0,
        dtype: Any = jnp.float32,
    ) -> dict:
        """As :meth:`RBM.init_params`, plus lateral couplings ``L``.

        ``L`` entries are i.i.d. :math:`\\mathcal N(0, \\mathrm{lateral\\_scale}^2)`
        (symmetrised, zero diagonal when dense); zero by default, so learning starts
        from an RBM.
        """
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        lateral_scale = check_scale(lateral_scale, "lateral_scale")
        logits = None if data is None else data_logits(data, self.num_visible, pseudo_count)
        nv = self.num_visible
        lateral = ("L", (nv, nv), "symmetric") if self.edges is None else ("L", (len(self.edges),), "normal")
        return self._random_params(rng_key, (scale, lateral_scale), (lateral,), jnp.dtype(dtype), logits)


def rbm(num_visible: int, num_hidden: int, *, dtype: Any = jnp.float32) -> RBM:
    """Restricted Boltzmann machine with binary visible and hidden units.

    .. math::  E(v, h) = -v^\\top W h - b^\\top v - c^\\top h

    Parameters
    ----------
    num_visible, num_hidden
        Layer sizes.
    dtype
        Storage dtype of states (``float32``, the natural choice for the matmuls).

    Returns
    -------
    An :class:`RBM`: variables ``"v"``, ``"h"``; ``params = {"W", "b", "c"}``; blocks
    ``[{v}, {h}]``; ``multilinear=True``; ``free_energy_fns`` for both layers; methods
    :meth:`~RBM.free_energy`, :meth:`~RBM.hidden_probs`, :meth:`~RBM.visible_probs`,
    :meth:`~RBM.init_params`.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.rbm(784, 500)
    >>> params = model.init_params(jax.random.key(0))
    >>> params["W"].shape, params["b"].shape, params["c"].shape
    ((784, 500), (784,), (500,))
    """
    return RBM(num_visible, num_hidden, dtype=dtype)


def semi_rbm(num_visible: int, num_hidden: int, *, edges: Any = None, dtype: Any = jnp.float32) -> SemiRBM:
    """Semi-restricted Boltzmann machine: an RBM with lateral visible couplings.

    .. math::  E(v, h) = -v^\\top W h - b^\\top v - c^\\top h - \\tfrac12 v^\\top L v

    Parameters
    ----------
    num_visible, num_hidden
        Layer sizes.
    edges
        ``None`` for dense lateral couplings ``params["L"]`` ``(n_v, n_v)`` (symmetric,
        zero diagonal; the visibles are then updated one site per block), or an
        ``(m, 2)`` int array of visible pairs with ``params["L"]`` of shape ``(m,)``
        and lateral energy :math:`-\\sum_e L_e v_i v_j` (visible blocks are the greedy
        colouring of that graph).
    dtype
        Storage dtype of states.

    Returns
    -------
    A :class:`SemiRBM` with blocks ``[visible blocks..., {h}]``, ``multilinear=True``
    and ``free_energy_fns={"h": F}`` (hiddens summed out given ``v``).
    """
    return SemiRBM(num_visible, num_hidden, edges=edges, dtype=dtype)
