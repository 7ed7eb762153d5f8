"""Gibbs sampling (heat bath) for discrete models.

Each site (or block of conditionally independent sites) is redrawn from its full
conditional

.. math::  p(x_i = k \\mid x_{-i}) \\propto \\exp(\\log p(x_{-i}, x_i = k)),

computed from ``logdensity_fn`` only, so the kernel targets whatever density it is
handed: ``-E`` (sampling), ``-beta E`` (tempering), or a geometric bridge (SMC, AIS,
learners).  Three scan orders:

``"block"``
    one pass over the model's blocks (declared or detected colour classes); all
    sites of a block are drawn in parallel.  For multilinear binary/spin energies
    the conditionals of a block come from one ``jax.grad`` of ``logdensity_fn``;
    otherwise every value of every site is evaluated.
``"systematic"``
    single-site updates in a fixed order (variables in declaration order, sites in
    row-major order), ``K`` log-density evaluations per site.
``"random"``
    ``num_sites`` single-site updates at uniformly random sites.

One ``step`` performs ``num_sweeps`` sweeps.  The built kernel has BlackJAX's
inner-kernel signature ``kernel(rng_key, state, logdensity_fn) -> (state, info)``,
so it can be the ``mcmc_step_fn`` of :func:`blackjax.adaptive_tempered_smc`.

References
----------
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE TPAMI 6, 721-741.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer.kernels import _updates
from ugm_infer.kernels._common import (
    check_initial_logdensity,
    check_model,
    resolve_logdensity,
    resolve_structure,
    validate_position,
)

__all__ = ["GibbsState", "GibbsInfo", "init", "build_kernel", "as_top_level_api"]

SCANS = ("block", "systematic", "random")
# above this many blocks a sweep is one lax.scan over stacked blocks instead of unrolled
# updates, so compilation time does not grow with the number of blocks (dense models)
MAX_UNROLLED_BLOCKS = 4


class GibbsState(NamedTuple):
    """State of one Gibbs chain.

    position
        The configuration, a dict ``{name: array}``.
    """

    position: dict


class GibbsInfo(NamedTuple):
    """Per-step diagnostics.

    num_changed
        Number of sites whose value differs after the step (a cheap mixing signal;
        dead chains show zeros).
    """

    num_changed: jax.Array


def init(position: dict, logdensity_fn: Callable | None = None) -> GibbsState:
    """Wrap a position; ``logdensity_fn`` is accepted for the BlackJAX signature."""
    del logdensity_fn
    return GibbsState(dict(position))


def build_sweep(model, scan: str = "block", params: Any = None, reverse: bool = False):
    """One Gibbs sweep ``sweep(rng_key, position, logdensity_fn) -> position``.

    ``reverse=True`` applies the same updates in the opposite order (the reverse
    operator tempered transitions need).
    """
    check_model(model)
    if scan not in SCANS:
        raise ValueError(f"`scan` must be one of {SCANS}, got {scan!r}")
    variables = model.variables
    if scan == "block":
        model = resolve_structure(model, params)
        if len(model.blocks) > MAX_UNROLLED_BLOCKS:
            stacked = _updates.stacked_block_sweep(model.blocks, variables, gradient=model.multilinear)

            def sweep(rng_key, position, logdensity_fn):
                return stacked(rng_key, position, logdensity_fn, reverse=reverse)

            return sweep
        make = _updates.gradient_block_update if model.multilinear else _updates.enumeration_block_update
        updates = [make(block, variables) for block in model.blocks]
        if reverse:
            updates = updates[::-1]

        def sweep(rng_key, position, logdensity_fn):
            keys = jax.random.split(rng_key, len(updates))
            for key, update in zip(keys, updates):
                position = update(key, position, logdensity_fn)
            return position

        return sweep

    def sweep(rng_key, position, logdensity_fn):
        # logdensity_fn is a Python closure, not an array: close over it instead of carrying it
        def fn(k, c, n, d, i):
            return _updates.heat_bath_site(k, c, n, d, i, logdensity_fn)

        if scan == "systematic":
            inner = _updates.systematic_scan(variables, fn, reverse=reverse)
        else:

            def global_fn(k, c, sites, g):
                return _updates.heat_bath_global(k, c, sites, g, logdensity_fn)

            inner = _updates.random_scan(variables, fn, num_updates=model.num_sites, global_fn=global_fn)
        return inner(rng_key, position)

    return sweep


def build_kernel(model, scan: str = "block", num_sweeps: int = 1, *, params: Any = None, reverse: bool = False):
    """Build a Gibbs kernel for ``model``.

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel`.
    scan
        ``"block"``, ``"systematic"`` or ``"random"`` (see the module docstring).
    num_sweeps
        Sweeps per step (a Python int >= 1).
    params
        Example parameters, used only to detect blocks and multilinearity when the
        model does not declare them (``scan="block"``).
    reverse
        Apply the sweep's updates in reverse order.

    Returns
    -------
    kernel(rng_key, state, logdensity_fn) -> (GibbsState, GibbsInfo)
    """
    if isinstance(num_sweeps, bool) or not isinstance(num_sweeps, (int, np.integer)) or num_sweeps < 1:
        raise ValueError(f"`num_sweeps` must be a positive int, got {num_sweeps!r}")
    sweep = build_sweep(model, scan, params, reverse)

    def kernel(rng_key, state: GibbsState, logdensity_fn: Callable) -> tuple[GibbsState, GibbsInfo]:
        start = state.position
        if num_sweeps == 1:
            position = sweep(rng_key, start, logdensity_fn)
        else:
            position, _ = jax.lax.scan(
                lambda p, k: (sweep(k, p, logdensity_fn), None), start, jax.random.split(rng_key, num_sweeps)
            )
        return GibbsState(position), GibbsInfo(_updates.count_changed(start, position))

    return kernel


def as_top_level_api(
    model,
    params: Any = None,
    *,
    logdensity_fn: Callable | None = None,
    beta: float = 1.0,
    scan: str = "block",
    num_sweeps: int = 1,
) -> SamplingAlgorithm:
    """Gibbs sampler for ``model`` at ``params`` (or any ``logdensity_fn``).

    Returns a :class:`blackjax.base.SamplingAlgorithm` acting on one chain; ``vmap``
    ``init`` and ``step`` over chains.  Not jitted.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.lattice_ising(4, 4)
    >>> params = model.init_params(jax.random.key(0))
    >>> gibbs = ui.kernels.gibbs(model, params)
    >>> state = gibbs.init(model.random_state(jax.random.key(1)))
    >>> state, info = gibbs.step(jax.random.key(2), state)
    """
    logdensity_fn = resolve_logdensity(model, params, logdensity_fn, beta)
    kernel = build_kernel(model, scan, num_sweeps, params=params)

    def init_fn(position, rng_key=None):
        del rng_key
        position = validate_position(model, position)
        check_initial_logdensity(logdensity_fn, position)
        return init(position, logdensity_fn)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)
