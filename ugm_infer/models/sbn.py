"""Sigmoid belief networks: layered binary directed acyclic graphs (Neal 1992).

Layers :math:`x_0 = v` (visible, the *bottom*, ``n_0`` units) and
:math:`x_1 = h_1, \\dots, x_L = h_L` (hidden; :math:`h_L` is the *top*), all in
:math:`\\{0, 1\\}`.  Arrows point down, from layer :math:`k + 1` to layer :math:`k`:

.. math::  P(x_{k,i} = 1 \\mid x_{k+1}) = \\sigma(z_{k,i}), \\qquad
           z_k = b_k + W_{k+1} x_{k+1} \\ (k < L), \\qquad z_L = b_L ,

so the top layer has biases only (Saul, Jaakkola and Jordan 1996, eq. 1, with
:math:`J_{ij} = (W_{k+1})_{ij}` for unit :math:`i` of layer :math:`k` and its parent
:math:`j` of layer :math:`k + 1`, and :math:`h_i = b_{k,i}`).
``params = {"W1": (n_0, n_1), ..., "WL": (n_{L-1}, n_L), "b0": (n_0,), ..., "bL": (n_L,)}``
(the same names and shapes as :func:`~ugm_infer.models.dbm`).  Variables ``"v"``,
``"h1"``, ..., ``"hL"``.

The energy is minus the log of the *normalised* joint distribution, with the
log-normaliser of every conditional included:

.. math::  E(v, h) = -\\log P(v, h) = -\\sum_{k=0}^{L} \\sum_i
           \\big[x_{k,i}\\, z_{k,i} - \\mathrm{softplus}(z_{k,i})\\big],

so :math:`Z = 1` (``ui.exact.log_partition`` returns 0 up to float round-off), every
ugm_infer kernel run on the model samples the joint :math:`P(v, h)`, and the same
kernel run on :func:`ugm_infer.learn.phases.conditional_model` (visibles clamped)
samples the posterior :math:`P(h \\mid v)`; ``ui.exact.log_likelihood(model, params,
{"v": v})`` is the exact :math:`\\log P(v)` (hidden layers enumerated).

Structure and cost
------------------
The energy is **not multilinear**: :math:`\\mathrm{softplus}(z_k)` couples all the
parents of a unit (explaining away), so ``multilinear=False`` and a Gibbs update
evaluates the energy at both values of each site (two energy evaluations, each
:math:`O(\\sum_k n_{k-1} n_k)`, per site and sweep).  Units of one hidden layer are
co-parents and interact; units two layers apart do not (neither is in the other's
Markov blanket).  The declared blocks are therefore ``{v, h2[0], h4[0], ...}``,
``{h2[j], h4[j], ...}`` for ``j >= 1`` and ``{h1[j], h3[j], ...}``: the visibles are
updated together, hidden units one per layer per block.  The visibles can be summed
out analytically given :math:`h_1` (:math:`\\sum_v P(v \\mid h_1) = 1`), so
``free_energy_fns["v"]`` is :math:`-\\log P(h)` and exact enumeration of :math:`\\log Z`
only visits the :math:`2^{n_1 + \\dots + n_L}` hidden configurations.

:meth:`SigmoidBeliefNet.sample` draws exact iid samples by ancestral sampling (top
layer first), one Bernoulli draw per layer.

References
----------
Neal, R. M. (1992). Connectionist learning of belief networks. Artificial
Intelligence 56, 71-113.
Saul, L. K., Jaakkola, T. and Jordan, M. I. (1996). Mean field theory for sigmoid
belief networks. Journal of Artificial Intelligence Research 4, 61-76 (eq. 1 and 2:
the conditionals and the joint; mean-field theory in
:mod:`ugm_infer.learn.sbn_meanfield`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
    check_int,
    check_key,
    check_params,
    compute_dtype,
    layered_param_spec,
    layered_random_params,
    layered_variables,
    softplus,
)

__all__ = ["SigmoidBeliefNet", "sigmoid_belief_net"]


class SigmoidBeliefNet(EnergyModel):
    """Sigmoid belief network (built by :func:`sigmoid_belief_net`; see the module docstring).

    Attributes
    ----------
    layer_sizes
        ``(n_0, n_1, ..., n_L)``: visible (bottom) first, top last.
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
        super().__init__(
            self._energy,
            variables,
            self._declared_blocks(),
            multilinear=False,
            free_energy_fns={"v": self._hidden_energy},
            validate_params=self._check_params,
            name=f"sigmoid_belief_net({', '.join(map(str, sizes))})",
        )
        self._sample_fns: dict[int, Any] = {}

    # ------------------------------------------------------------------------------
    def _declared_blocks(self) -> list[dict]:
        n, names = self.layer_sizes, self.layer_names
        even = [k for k in range(2, len(n), 2)]
        odd = [k for k in range(1, len(n), 2)]
        blocks = []
        width_even = max([n[k] for k in even], default=0)
        for j in range(max(width_even, 1)):
            blk = {"v": True} if j == 0 else {}
            blk.update({names[k]: np.array([j]) for k in even if n[k] > j})
            blocks.append(blk)
        for j in range(max(n[k] for k in odd)):
            blocks.append({names[k]: np.array([j]) for k in odd if n[k] > j})
        return blocks

    def layers(self, params: Any, state: dict) -> list[jax.Array]:
        """The layers ``[v, h1, ..., hL]`` of ``state`` cast to the params' float dtype."""
        dt = compute_dtype(params["W1"])
        return [jnp.asarray(state[n]).astype(dt) for n in self.layer_names]

    def logits(self, params: Any, layers: Sequence[jax.Array], k: int) -> jax.Array:
        """:math:`z_k = b_k + W_{k+1} x_{k+1}` (or :math:`b_L` for the top layer).

        ``layers`` holds every layer (leading batch axes broadcast); only entry
        ``k + 1`` is read.  ``sigmoid(z_k)`` is :math:`P(x_k = 1 \\mid x_{k+1})`.
        """
        if k == self.num_hidden_layers:
            return params[f"b{k}"]
        return params[f"b{k}"] + layers[k + 1] @ params[f"W{k + 1}"].T

    def layer_log_probs(self, params: Any, layers: Sequence[jax.Array]) -> list[jax.Array]:
        """:math:`\\log P(x_k \\mid x_{k+1})` for every layer ``k = 0..L`` (summed over units)."""
        out = []
        for k in range(self.num_hidden_layers + 1):
            z = self.logits(params, layers, k)
            out.append(jnp.sum(layers[k] * z - softplus(z), axis=-1))
        return out

    def _energy(self, params: Any, state: dict) -> jax.Array:
        return -sum(self.layer_log_probs(params, self.layers(params, state)))

    def _hidden_energy(self, params: Any, rest: dict) -> jax.Array:
        """:math:`-\\log P(h)`: the energy with the visibles summed out (their conditional sums to 1)."""
        dt = compute_dtype(params["W1"])
        x = [None] + [jnp.asarray(rest[n]).astype(dt) for n in self.layer_names[1:]]
        total = 0.0
        for k in range(1, self.num_hidden_layers + 1):
            z = self.logits(params, x, k)
            total = total + jnp.sum(x[k] * z - softplus(z), axis=-1)
        return -total

    def _check_params(self, params: Any) -> None:
        check_params(self.name, params, *layered_param_spec(self.layer_sizes))

    # ------------------------------------------------------------------------------
    def init_params(self, rng_key: jax.Array, scale: float = 0.1, *, dtype: Any = jnp.float32) -> dict:
        """Weights i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2)`, biases zero (float32)."""
        return layered_random_params(rng_key, self.layer_sizes, scale, dtype)

    def sample(self, rng_key: jax.Array, params: Any, num_samples: int) -> dict:
        """Exact iid draws of :math:`P(v, h)` by ancestral sampling (top layer first).

        Returns ``{name: (num_samples, n_k)}`` float32 arrays of 0/1 for every layer.
        Jitted once per ``num_samples``.
        """
        check_key(rng_key)
        num_samples = check_int(num_samples, "num_samples")
        self.validate_params(params)
        if num_samples not in self._sample_fns:
            self._sample_fns[num_samples] = jax.jit(functools.partial(self._ancestral, num_samples=num_samples))
        return self._sample_fns[num_samples](rng_key, params)

    def _ancestral(self, rng_key: jax.Array, params: Any, num_samples: int) -> dict:
        L = self.num_hidden_layers
        dt = compute_dtype(params["W1"])
        keys = jax.random.split(rng_key, L + 1)
        x: list[Any] = [None] * (L + 1)
        for k in range(L, -1, -1):
            z = jnp.broadcast_to(self.logits(params, x, k), (num_samples, self.layer_sizes[k]))
            x[k] = jax.random.bernoulli(keys[k], jax.nn.sigmoid(z)).astype(dt)
        return {name: x[k] for k, name in enumerate(self.layer_names)}


def sigmoid_belief_net(layer_sizes: Sequence[int], *, dtype: Any = jnp.float32) -> SigmoidBeliefNet:
    """Sigmoid belief network with binary layers of the given sizes, visible layer first.

    .. math::  E(v, h) = -\\log P(v, h) = -\\sum_{k=0}^{L} \\sum_i
               \\big[x_{k,i} z_{k,i} - \\mathrm{softplus}(z_{k,i})\\big], \\quad
               z_k = b_k + W_{k+1} x_{k+1}, \\ z_L = b_L

    Parameters
    ----------
    layer_sizes
        ``(n_v, n_h1, ..., n_hL)`` with ``L >= 1``: the visible (bottom) layer first,
        the top layer (biases only) last.
    dtype
        Storage dtype of states (float32 by default).

    Returns
    -------
    A :class:`SigmoidBeliefNet`: variables ``"v", "h1", ..., "hL"``; params
    ``W1..WL`` (``Wk`` of shape ``(n_{k-1}, n_k)``: child layer by parent layer),
    ``b0..bL``; ``multilinear=False``; ``free_energy_fns["v"]`` (:math:`-\\log P(h)`);
    :math:`\\log Z = 0`.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> from ugm_infer.models.sbn import sigmoid_belief_net
    >>> model = sigmoid_belief_net([6, 3, 2])
    >>> params = model.init_params(jax.random.key(0), scale=1.0)
    >>> abs(float(ui.exact.log_partition(model, params))) < 1e-5
    True
    """
    return SigmoidBeliefNet(layer_sizes, dtype=dtype)
