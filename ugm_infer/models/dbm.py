"""Deep Boltzmann machines: any number of binary layers, each coupled to its neighbours.

Salakhutdinov and Hinton (2009).  Layers :math:`h_0 = v` (visible, ``n_0`` units) and
:math:`h_1, \\dots, h_L` (hidden), all in :math:`\\{0, 1\\}`:

.. math::  E(v, h_1, \\dots, h_L) = -\\sum_{k=1}^{L} h_{k-1}^\\top W_k h_k
           - \\sum_{k=0}^{L} b_k^\\top h_k ,

``params = {"W1": (n_0, n_1), ..., "WL": (n_{L-1}, n_L), "b0": (n_0,), ..., "bL": (n_L,)}``.
Variables ``"v"``, ``"h1"``, ..., ``"hL"``.  Layer ``k`` only talks to ``k - 1`` and
``k + 1``, so given the even layers the odd layers factorise and vice versa:

.. math::  p(h_{k,j} = 1 \\mid h_{k-1}, h_{k+1}) = \\sigma\\big(b_{k,j} + (h_{k-1}^\\top W_k)_j
           + (W_{k+1} h_{k+1})_j\\big),

and block Gibbs alternates the two blocks ``{v, h2, h4, ...}`` and ``{h1, h3, ...}``
(Salakhutdinov and Hinton 2009, section 3).  Every layer can be summed out analytically
given its neighbours: ``free_energy_fns["hk"]`` is

.. math::  F_k(\\text{rest}) = E|_{h_k = 0} - \\sum_j \\mathrm{softplus}\\big(b_{k,j}
           + (h_{k-1}^\\top W_k)_j + (W_{k+1} h_{k+1})_j\\big),

so for a 2-layer DBM ``free_energy_fns["h1"]`` gives :math:`F(v, h_2)` with
:math:`p(v, h_2) \\propto e^{-F(v, h_2)}` (used by exact enumeration over ``v, h2``
only, and by AIS).  A 1-layer DBM is an RBM.

References
----------
Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS 5,
448-455 (energy eq. 1, mean-field updates eq. 6, learning Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
    check_params,
    compute_dtype,
    layered_param_spec,
    layered_random_params,
    layered_variables,
    softplus,
)

__all__ = ["DBM", "dbm"]


class DBM(EnergyModel):
    """Deep Boltzmann machine (built by :func:`dbm`; see the module docstring).

    Attributes
    ----------
    layer_sizes
        ``(n_0, n_1, ..., n_L)``.
    layer_names
        ``("v", "h1", ..., "hL")``.
    visible
        ``("v",)``: the variable the data provide.
    """

    visible = ("v",)

    def __init__(self, layer_sizes: Sequence[int], *, dtype: Any = jnp.float32):
        sizes, self.layer_names, variables = layered_variables(layer_sizes, dtype)
        self.layer_sizes = sizes
        self.num_hidden_layers = len(sizes) - 1
        even = {name: True for i, name in enumerate(self.layer_names) if i % 2 == 0}
        odd = {name: True for i, name in enumerate(self.layer_names) if i % 2 == 1}
        free = {name: self._free_energy_fn(i) for i, name in enumerate(self.layer_names) if i > 0}
        super().__init__(
            self._energy,
            variables,
            [even, odd],
            multilinear=True,
            free_energy_fns=free,
            validate_params=self._check_params,
            name=f"dbm({', '.join(map(str, sizes))})",
        )

    # ------------------------------------------------------------------------------
    def _layers(self, params: Any, state: dict) -> list[jax.Array]:
        dt = compute_dtype(params["W1"])
        return [jnp.asarray(state[n]).astype(dt) for n in self.layer_names]

    def _energy(self, params: Any, state: dict) -> jax.Array:
        x = self._layers(params, state)
        L = self.num_hidden_layers
        out = -sum(jnp.dot(params[f"b{k}"], x[k]) for k in range(L + 1))
        return out - sum(jnp.dot(jnp.dot(x[k - 1], params[f"W{k}"]), x[k]) for k in range(1, L + 1))

    def layer_field(self, params: Any, layers: Sequence[jax.Array], k: int) -> jax.Array:
        """Input to layer ``k``: :math:`b_k + h_{k-1}^\\top W_k + W_{k+1} h_{k+1}`.

        ``layers`` holds every layer (values or mean-field means, leading batch axes
        broadcast); entry ``k`` itself is not read.  ``sigmoid`` of it is
        :math:`p(h_k = 1 \\mid h_{k-1}, h_{k+1})` (Salakhutdinov and Hinton 2009, eq. 6
        for the mean-field version).
        """
        field = params[f"b{k}"]
        if k > 0:
            field = field + layers[k - 1] @ params[f"W{k}"]
        if k < self.num_hidden_layers:
            field = field + layers[k + 1] @ params[f"W{k + 1}"].T
        return field

    def _free_energy_fn(self, layer: int):
        name = self.layer_names[layer]

        def free_energy(params, rest):
            dt = compute_dtype(params["W1"])
            x = [jnp.asarray(rest[n]).astype(dt) if n != name else None for n in self.layer_names]
            x[layer] = jnp.zeros(x[layer - 1].shape[:-1] + (self.layer_sizes[layer],), dt)
            field = self.layer_field(params, x, layer)
            other = 0.0
            for k in range(self.num_hidden_layers + 1):
                if k != layer:
                    other = other - jnp.sum(x[k] * params[f"b{k}"], axis=-1)
            for k in range(1, self.num_hidden_layers + 1):
                if layer not in (k - 1, k):
                    other = other - jnp.sum((x[k - 1] @ params[f"W{k}"]) * x[k], axis=-1)
            return other - jnp.sum(softplus(field), axis=-1)

        return free_energy

    def _check_params(self, params: Any) -> None:
        check_params(self.name, params, *layered_param_spec(self.layer_sizes))

    # ------------------------------------------------------------------------------
    def init_params(self, rng_key: jax.Array, scale: float = 0.01, *, dtype: Any = jnp.float32) -> dict:
        """Weights i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2)`, biases zero (float32)."""
        return layered_random_params(rng_key, self.layer_sizes, scale, dtype)

    def even_odd(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Names of the even layers (``v``, ``h2``, ...) and of the odd ones (``h1``, ``h3``, ...)."""
        names = self.layer_names
        return tuple(names[0::2]), tuple(names[1::2])


def dbm(layer_sizes: Sequence[int], *, dtype: Any = jnp.float32) -> DBM:
    """Deep Boltzmann machine with binary layers of the given sizes.

    .. math::  E = -\\sum_{k=1}^{L} h_{k-1}^\\top W_k h_k - \\sum_{k=0}^{L} b_k^\\top h_k

    Parameters
    ----------
    layer_sizes
        ``(n_v, n_h1, ..., n_hL)`` with ``L >= 1`` (``L = 1`` is an RBM with the
        parameter names ``W1, b0, b1``).
    dtype
        Storage dtype of states (float32 by default).

    Returns
    -------
    A :class:`DBM`: variables ``"v", "h1", ..., "hL"``; params ``W1..WL``, ``b0..bL``;
    blocks ``[{v, h2, ...}, {h1, h3, ...}]``; ``multilinear=True``;
    ``free_energy_fns`` for every hidden layer (summed out given its neighbours).

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.dbm([784, 500, 1000])
    >>> params = model.init_params(jax.random.key(0))
    >>> sorted(params)
    ['W1', 'W2', 'b0', 'b1', 'b2']
    """
    return DBM(layer_sizes, dtype=dtype)
