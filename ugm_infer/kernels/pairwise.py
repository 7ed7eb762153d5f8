r"""Single-site Gibbs updates with incrementally maintained local fields (pairwise couplings).

For a log-density that is affine in each binary/spin site of a variable ``x`` (every
pairwise energy) the conditional log-odds of site ``i`` are

.. math::  \log\frac{p(x_i = v_1 \mid x_{-i})}{p(x_i = v_0 \mid x_{-i})}
           = (v_1 - v_0)\, g_i, \qquad g = \nabla_x \log p(x)\big|_{x_i = (v_0 + v_1)/2},

and after site ``i`` moves by :math:`\Delta` the gradient changes by
:math:`\Delta\, C_{:, i}`, with :math:`C = \nabla_x^2 \log p` the within-variable
coupling matrix (constant for a pairwise energy: :math:`\beta W` for a Boltzmann
machine, :math:`\beta L` for a semi-RBM's visibles).  So every site's field is
:math:`g = \nabla_x \log p(0) + C x` (one gradient at ``x = 0``, which holds the
biases and the other variables' part, and one product with ``C``), and each
single-site update costs ``O(n)`` instead of a full gradient.

:func:`sequential_update` visits the sites of a variable in a given order (the same
transition as one block per site) in chunks of ``chunk`` sites: inside a chunk the
fields of the chunk's own sites are updated after every site (``O(chunk)``), and the
fields of all sites once per chunk by a matrix product with the chunk's columns of
``C`` (a rank-``chunk`` update, which vectorises over chains as a matrix product).
Under ``jax.vmap`` over chains with shared couplings (a ``jax.custom_batching.custom_vmap``
rule) the sweep holds the chains units-major, ``(n, chains)``: each site's update
reads and writes one contiguous row, and every chain draws the same uniforms as it
would alone, so batched and one-chain-at-a-time runs agree exactly.

A model opts in by returning a :class:`CouplingLogDensity` from ``logdensity_fn``
(``ui.models.ising`` / ``boltzmann_machine`` with dense couplings, ``ui.models.semi_rbm``
with dense lateral couplings); the block Gibbs kernel then uses it for runs of
single-site blocks of a coupled variable.  Any other density takes the generic path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._random import key_pair
from ugm_infer.domains import Binary, Domain, Spin
from ugm_infer.kernels.checkerboard import uniform_of_words

__all__ = ["CouplingLogDensity", "sequential_update", "single_site_runs"]

#: chunks of at most this many sites run as straight-line code; longer ones in a loop that
#: visits this many sites per iteration (a dense 16-unit BM's PCD step with 100 chains then
#: compiles in less than half the time of straight-line code and runs faster; 2 per
#: iteration ran 5% faster than 4 and 10% faster than 1, ``benchmarks/bench_dense.py``)
UNROLL = 2


class CouplingLogDensity:
    """A ``logdensity_fn`` that also gives within-variable pairwise couplings.

    Calling it evaluates the log-density; :meth:`couplings` returns
    ``{name: C}`` with ``C`` the ``(n, n)`` matrix :math:`\\partial^2 \\log p /
    \\partial x_i \\partial x_j` over the flattened sites of variable ``name`` (constant
    in ``x``: the density must be pairwise in that variable).  :meth:`tempered` scales
    both by ``beta`` (parallel tempering, tempered transitions keep the fast path).
    """

    def __init__(self, fn: Callable, couplings: Callable[[], dict]):
        self._fn = fn
        self._couplings = couplings

    def __call__(self, state):
        return self._fn(state)

    def couplings(self) -> dict:
        """``{name: (n, n) float matrix}``."""
        return self._couplings()

    def tempered(self, beta: Any) -> CouplingLogDensity:
        """``x -> beta * self(x)`` with couplings ``beta * C``."""
        fn, couplings = self._fn, self._couplings
        return CouplingLogDensity(lambda state: beta * fn(state), lambda: {n: beta * c for n, c in couplings().items()})


def single_site_runs(blocks, variables: dict[str, Domain]) -> list:
    """Split a block sequence into segments: ``("run", name, flat_indices)`` or ``("block", block)``.

    A run is a maximal sequence of consecutive blocks that each hold one site of the same
    binary/spin variable (dense pairwise models: one block per site).
    """
    segments: list = []
    for block in blocks:
        single = len(block.indices) == 1 and block.num_sites == 1
        name = next(iter(block.indices)) if single else None
        if single and isinstance(variables[name], (Binary, Spin)):
            site = int(block.indices[name][0])
            if segments and segments[-1][0] == "run" and segments[-1][1] == name:
                segments[-1][2].append(site)
                continue
            segments.append(("run", name, [site]))
        else:
            segments.append(("block", block))
    return [("run", s[1], np.asarray(s[2], np.int32)) if s[0] == "run" else s for s in segments]


def sequential_update(name: str, domain: Domain, sites: np.ndarray, chunk: int = 32):
    """``update(rng_key, position, logdensity_fn) -> position``: heat-bath updates of ``sites`` in order.

    ``logdensity_fn`` must be a :class:`CouplingLogDensity` with couplings for ``name``
    (see the module docstring).  One chain; vectorise with ``jax.vmap``.  Under
    ``jax.vmap`` over chains with shared couplings the sweep runs on all chains at
    once, units-major (``(n, chains)``: each site's update writes one contiguous row),
    on the same uniforms as one chain at a time, so the result is the same.
    """
    v0, v1 = (float(v) for v in domain.values)
    mid = 0.5 * (v0 + v1)
    n_sites = len(sites)
    chunk = max(1, min(chunk, n_sites))
    num_chunks = -(-n_sites // chunk)
    padded = np.full(num_chunks * chunk, domain.size, np.int32)  # index `size`: a padding site, never updated
    padded[:n_sites] = sites
    order = jnp.asarray(padded.reshape(num_chunks, chunk))
    natural = num_chunks == 1 and n_sites == domain.size and np.array_equal(sites, np.arange(domain.size))

    # Every array below holds sites along its leading axis and chains (none for one chain)
    # along the trailing ones: ``x``, ``g`` ``(n, *chains)``, ``u`` ``(chunk, *chains)``.
    def site(k, x, g, c, u, valid):
        """Heat-bath update of local site ``k``; returns the new values, fields and the change."""
        field = g[k] + c[k, k] * (mid - x[k])  # log-odds at the site's midpoint (exact with a diagonal too)
        new = jnp.where(u[k] < jax.nn.sigmoid((v1 - v0) * field), v1, v0)
        delta = new - x[k] if valid is None else jnp.where(valid[k], new - x[k], 0.0)
        col = c[:, k].reshape(c.shape[:1] + (1,) * (x.ndim - 1))
        return x.at[k].add(delta), g + delta * col, delta

    def visit(x, g, c, u, valid):
        """Update the sites of one chunk in order: ``x``, ``g`` their values and fields, ``c`` their couplings."""
        if x.shape[0] <= UNROLL:  # straight-line code for short runs (fused by XLA)
            deltas = []
            for k in range(x.shape[0]):
                x, g, delta = site(k, x, g, c, u, valid)
                deltas.append(delta)
            return x, jnp.stack(deltas)

        def body(k, carry):
            x, g, deltas = carry
            x, g, delta = site(k, x, g, c, u, valid)
            return x, g, deltas.at[k].set(delta)

        x, _, deltas = jax.lax.fori_loop(0, x.shape[0], body, (x, g, jnp.zeros_like(x)), unroll=UNROLL)
        return x, deltas

    def run(k1, k2, x, g0, c):
        """The sweep on ``(n, *chains)`` values, ``g0`` the fields at ``x = 0``, the key words ``(*chains,)``."""
        u = uniform_of_words(k1, k2, (num_chunks, chunk))  # each chain's own uniforms, chains trailing
        g = g0.reshape(g0.shape + (1,) * (x.ndim - g0.ndim)) + c @ x  # the gradient at x (pairwise in x)
        if natural:  # one chunk holding every site in order: no gathers
            return visit(x, g, c, u[0], None)[0]
        # one padding site (index `size`) with zero couplings absorbs the padded slots
        pad = jnp.zeros((1,) + x.shape[1:], jnp.float32)
        x, g = jnp.concatenate([x, pad]), jnp.concatenate([g, pad])
        c = jnp.pad(c, ((0, 1), (0, 1)))

        def one_chunk(carry, inputs):
            x, g = carry
            idx, u = inputs
            local, deltas = visit(x[idx], g[idx], c[idx[:, None], idx[None, :]], u, idx < domain.size)
            return (x.at[idx].set(local), g + c[:, idx] @ deltas), None

        (x, _), _ = jax.lax.scan(one_chunk, (x, g), (order, u))
        return x[: domain.size]

    @jax.custom_batching.custom_vmap
    def chain_sweep(key_words, x, g0, c):
        return run(key_words[0], key_words[1], x, g0, c)

    @chain_sweep.def_vmap
    def _chains_sweep(axis_size, in_batched, key_words, x, g0, c):
        if in_batched[3]:  # couplings per chain: one chain at a time
            axes = tuple(0 if b else None for b in in_batched)
            return jax.vmap(lambda kw, *a: run(kw[0], kw[1], *a), in_axes=axes)(key_words, x, g0, c), True
        kw, x = (a if b else jnp.broadcast_to(a, (axis_size,) + a.shape) for a, b in zip((key_words, x), in_batched))
        return run(kw[:, 0], kw[:, 1], x.T, g0.T if in_batched[2] else g0, c).T, True

    def update(rng_key, position, logdensity_fn):
        x0 = position[name]
        flat = x0.reshape(-1).astype(jnp.float32)
        couplings = jnp.asarray(logdensity_fn.couplings()[name], jnp.float32)
        # the fields at x = 0 (the other variables' and the biases' part); `run` adds C x
        zero = jnp.zeros(domain.size, jnp.float32)
        fields = jax.grad(lambda y: logdensity_fn({**position, name: y.reshape(domain.shape)}))(zero)
        k1, k2 = key_pair(rng_key)
        x = chain_sweep(jnp.stack([k1, k2]), flat, fields, couplings)
        return {**position, name: x.reshape(domain.shape).astype(x0.dtype)}

    return update
