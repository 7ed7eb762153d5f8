r"""Annealed importance sampling on the bit-packed lattice kernel (32 runs per word).

The same estimator as :func:`ugm_infer.smc.ais` with a uniform base (Neal 2001):
``M`` runs start uniform, anneal through :math:`f_t(s) = 2^{-N(1-t)} e^{-t E(s)}`,
:math:`0 = t_0 < t_1 < \dots < t_K = 1`, and accumulate

.. math::  \log w \mathrel{+}= (t_k - t_{k-1}) \, (N \log 2 - E(s)), \qquad
           s \sim T_{t_k}(s, \cdot),

so :math:`\mathbb E[w] = Z` and :math:`\log \frac1M \sum_m w_m` is a stochastic lower
bound on :math:`\log Z`.  Here the runs are the lanes of
:mod:`ugm_infer.kernels.multispin`: 32 runs share one ``uint32`` word per site,
:math:`T_t` is ``num_sweeps`` multi-spin-coded checkerboard heat-bath sweeps at inverse
temperature ``t``, and the energies come from bit counts of the packed words
(:func:`ugm_infer.kernels.multispin.energy`, exact integers times ``J`` and ``h``).  It
accepts only what that kernel does: a periodic :func:`~ugm_infer.models.lattice_ising`
with even height and width (spins or binary, any scalar ``J`` and ``h``).

Why a separate estimator: near the critical coupling the variance of the AIS weights
falls like the inverse of the number of sweeps per run, and the packed kernel does
several times more spin updates per second than the float kernel on many chains
(``docs/performance.md``), so at equal time it affords several times more betas or runs
(``benchmarks/bench_log_z.py``).

Reference: Neal, R. M. (2001). Annealed importance sampling. Statistics and Computing
11, 125-139.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer import _compile
from ugm_infer._random import drawn_flat
from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.kernels import multispin
from ugm_infer.smc import _paths
from ugm_infer.smc.ais import AISResult, _finish, _kahan_add, _resolve_betas
from ugm_infer.smc.tempered import _cache

__all__ = ["multispin_ais"]


def _build_run(model: Any, num_sweeps: int, num_groups: int):
    sweep = multispin.build_sweep(model)
    domain = model.domain
    num_sites = model.height * model.width
    log_base = float(num_sites * np.log(2.0))  # -log p_0(s) for the uniform base

    def run(rng_key, params, betas, num_runs):
        key_init, key_run = split_key(rng_key)
        # uniform random bits: every lane of every site is +1 / -1 (1 / 0) with probability 1/2
        words = drawn_flat(jax.random.bits, key_init, (num_groups, model.height, model.width), jnp.uint32)

        def step(carry, inp):
            words, total, comp = carry
            a, b, k = inp
            increment = (b - a) * (log_base - multispin.energy(words, params, domain))
            total, comp = _kahan_add(total, comp, increment)
            key = fold_in_key(key_run, k)
            for i in range(num_sweeps):
                words, _ = sweep(fold_in_key(key, i), words, params, b)
            return (words, total, comp), jnp.var(total[:num_runs])

        zero = jnp.zeros((num_groups * multispin.LANES,), betas.dtype)
        steps = (betas[:-1], betas[1:], jnp.arange(betas.shape[0] - 1))
        (words, total, _), variance = jax.lax.scan(step, (words, zero, zero), steps)
        return words, total, variance

    return _compile.jit(run, static_argnums=3)


def multispin_ais(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    *,
    num_runs: int = 1024,
    betas: Any = None,
    num_betas: int = 1000,
    schedule: str = "linear",
    num_sweeps: int = 1,
) -> AISResult:
    r"""Forward AIS estimate of :math:`\log Z` for a periodic lattice Ising model, 32 runs per word.

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        A periodic ``ui.models.lattice_ising(H, W)`` with even ``H, W >= 4`` and its
        ``{"J", "h"}``.
    num_runs
        Annealing runs ``M``; they are simulated in ``ceil(M / 32)`` words per site, so
        a multiple of 32 wastes nothing (the spare lanes of the last word are run and
        dropped).
    betas, num_betas, schedule
        The schedule, as for :func:`ugm_infer.smc.ais`: an explicit strictly increasing
        array from 0 to 1, or ``num_betas`` values of :func:`~ugm_infer.smc.ais_schedule`
        of kind ``schedule``.
    num_sweeps
        Multi-spin checkerboard sweeps per intermediate distribution.

    Returns
    -------
    :class:`~ugm_infer.smc.AISResult`, with ``particles = {"s": (M, H, W)}`` in the model's
    storage dtype (the weighted final states), ``analytic = ""`` and
    ``log_weight_variance`` (the across-run variance of the cumulative log-weights after
    each step, for :func:`~ugm_infer.smc.thermodynamic_schedule`).

    Raises
    ------
    TypeError
        ``model`` is not a ``lattice_ising`` model, or ``rng_key`` is not a key.
    ValueError
        An open lattice, odd or small sizes, ``num_runs < 1``, a bad schedule,
        non-scalar ``J`` or ``h``.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.lattice_ising(4, 4)
    >>> params = model.init_params(J=0.3)
    >>> res = ui.smc.multispin_ais(jax.random.key(0), model, params, num_runs=2048, num_betas=100)
    >>> bool(abs(float(res.log_Z) - float(ui.exact.log_partition(model, params))) < 0.05)
    True
    """
    _paths.check_key(rng_key)
    multispin.check_lattice(model)
    _paths.check_params(model, params)
    for name in ("J", "h"):
        if np.ndim(params[name]) != 0:
            raise ValueError(
                f"`params['{name}']` must be a scalar for the multi-spin kernel, got shape {np.shape(params[name])}"
            )
    num_runs = _paths.check_positive_int(num_runs, "num_runs")
    num_sweeps = _paths.check_positive_int(num_sweeps, "num_sweeps")
    betas = _resolve_betas(betas, num_betas, schedule)
    num_groups = -(-num_runs // multispin.LANES)
    run = _cache(model, ("multispin_ais", num_sweeps, num_groups), lambda: _build_run(model, num_sweeps, num_groups))
    words, log_w, variance = run(rng_key, params, jnp.asarray(betas, _paths.float_dtype(model, params)), num_runs)
    particles = {"s": multispin.unpack(words, num_runs, model.domain, model.variables["s"].dtype)}
    return _finish(log_w[:num_runs], particles, betas, None, reverse=False, log_weight_variance=variance)
