"""Adaptive spacing of inverse-temperature ladders for tempered transitions and parallel tempering.

None of the seed papers adapts its ladder (Salakhutdinov 2009 uses 50 betas uniform in
``[0.9, 1]``); users ask for it.  :func:`adapt_ladder` is a warm-up: it runs the sampler
for ``steps_per_round`` steps, measures a *local rejection rate* for every rung, and
moves the interior betas so that each rung carries the same share of the cumulative
rejection (the "equal acceptance" feedback of Katzgraber, Trebst, Huse & Troyer 2006 and
the communication-barrier schedule of Syed, Bouchard-Côté, Deligiannidis & Doucet 2022):

.. math::

    \\Lambda(\\beta_k) = \\sum_{j < k} r_j, \\qquad
    \\beta^{new}_k = \\Lambda^{-1}\\bigl(k \\Lambda(\\beta_S) / S\\bigr),

with :math:`\\Lambda` interpolated linearly between the current betas.  The end points
(``beta_0`` and ``beta_S = 1``) stay fixed; a damping factor mixes old and new ladders.

Local rejection rates:

* parallel tempering: ``1 - mean swap acceptance`` of the pair ``(k, k+1)``;
* tempered transitions: the standard deviation of the rung's term ``t_k`` of the log
  acceptance ratio (``TemperedTransitionsInfo.log_ratio_terms``).  Since
  ``t_k = (beta_{k+1} - beta_k)(log p*(x~) - log p*(x^))``, equalising these spaces the
  rungs evenly in thermodynamic length ``sum_k (beta_{k+1} - beta_k) sd_beta(E)``, the
  spacing that maximises TT acceptance for a given number of rungs (Neal 1996, sec. 5).
  These are costs, not probabilities, so ``rejection`` holds them as they are.

The adapted ladder is then *fixed* for sampling, so the sampler stays exact.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer import _compile
from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.kernels._common import resolve_logdensity

# the modules, not the same-named API objects that ugm_infer.kernels exports
pt = importlib.import_module("ugm_infer.kernels.parallel_tempering")
tt = importlib.import_module("ugm_infer.kernels.tempered_transitions")

__all__ = ["LadderReport", "adapt_ladder", "respace_ladder"]

METHODS = ("parallel_tempering", "tempered_transitions")


class LadderReport(NamedTuple):
    """betas: the adapted ladder; history: ``(rounds + 1, S + 1)`` ladders tried;
    rejection: ``(rounds, S)`` measured local rejection rates; acceptance: ``(rounds,)``
    overall TT acceptance or mean PT swap acceptance per round."""

    betas: np.ndarray
    history: np.ndarray
    rejection: np.ndarray
    acceptance: np.ndarray


def respace_ladder(betas: np.ndarray, rejection: np.ndarray, damping: float = 0.5, floor: float = 1e-3) -> np.ndarray:
    """Move interior betas so every rung carries an equal share of the cumulative rejection (or cost)."""
    betas = np.asarray(betas, np.float64)
    rates = np.maximum(np.asarray(rejection, np.float64), floor)
    cumulative = np.concatenate([[0.0], np.cumsum(rates)])
    targets = np.linspace(0.0, cumulative[-1], len(betas))
    proposal = np.interp(targets, cumulative, betas)
    new = (1 - damping) * proposal + damping * betas
    new[0], new[-1] = betas[0], betas[-1]
    return np.maximum.accumulate(new)


def adapt_ladder(
    rng_key: jax.Array,
    model,
    params: Any,
    initial_position: dict,
    betas: Any,
    *,
    method: str = "parallel_tempering",
    num_rounds: int = 5,
    steps_per_round: int = 100,
    damping: float = 0.5,
    base_kernel: Callable | None = None,
    base_init: Callable | None = None,
    reverse_kernel: Callable | None = None,
) -> LadderReport:
    """Warm-up that adapts a ladder (see the module docstring).

    Parameters
    ----------
    rng_key
        PRNG key.
    model, params
        The target ``exp(-E(params, x))``.
    initial_position
        Starting configurations with a leading chain axis (several chains give
        better rate estimates).
    betas
        Initial ascending ladder ending at 1 (its length is kept).
    method
        ``"parallel_tempering"`` or ``"tempered_transitions"``.
    num_rounds, steps_per_round, damping
        Number of feedback rounds, sampler steps per round, and the weight of the
        old ladder in each update (``0``: jump to the new spacing).
    base_kernel, base_init, reverse_kernel
        Forwarded to the sampler (default: block Gibbs).

    Returns
    -------
    LadderReport
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
    for name, value in (("num_rounds", num_rounds), ("steps_per_round", steps_per_round)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"`damping` must be in [0, 1), got {damping}")
    ladder = tt.check_ladder(betas).astype(np.float64)
    logdensity_fn = resolve_logdensity(model, params, None)
    position = model.validate_state(initial_position, batch_ndim=1, argname="initial_position")
    num_chains = jax.tree.leaves(position)[0].shape[0]
    history, rejections, acceptances = [ladder.copy()], [], []
    state = None
    for round_index in range(num_rounds):
        key = fold_in_key(rng_key, round_index)
        if method == "parallel_tempering":
            kernel = pt.build_kernel(model, ladder, base_kernel=base_kernel, base_init=base_init, params=params)
            if state is None:
                keep = base_kernel is None  # the default Gibbs kernel keeps lattice replicas in its layout
                state = jax.vmap(lambda x: pt.init(x, logdensity_fn, num_replicas=len(ladder), keep_layout=keep))(position)
        else:
            kernel = tt.build_kernel(
                model, ladder, base_kernel=base_kernel, reverse_kernel=reverse_kernel, base_init=base_init, params=params
            )
            if state is None:
                state = jax.vmap(tt.init)(position)
        state, rates, acceptance = _run_round(key, kernel, state, logdensity_fn, steps_per_round, num_chains, method)
        rates, acceptance = np.asarray(rates, np.float64), float(acceptance)
        rejections.append(rates)
        acceptances.append(acceptance)
        ladder = respace_ladder(ladder, rates, damping)
        history.append(ladder.copy())
    return LadderReport(ladder.astype(np.float32), np.array(history), np.array(rejections), np.array(acceptances))


def _run_round(key, kernel, state, logdensity_fn, num_steps, num_chains, method):
    @_compile.jit
    def run(key, state):
        step = jax.vmap(kernel, in_axes=(0, 0, None))

        def body(state, k):
            state, info = step(split_key(k, num_chains), state, logdensity_fn)
            if method == "parallel_tempering":
                stats = (info.swap_acceptance, info.swap_attempted.astype(jnp.float32))
            else:
                stats = (info.log_ratio_terms, info.acceptance_probability)
            return state, stats

        state, (a, b) = jax.lax.scan(body, state, split_key(key, num_steps))
        if method == "parallel_tempering":
            per_pair = a.sum((0, 1)) / jnp.maximum(b.sum((0, 1)), 1.0)
            return state, 1.0 - per_pair, jnp.mean(per_pair)
        return state, jnp.std(a, axis=(0, 1)), b.mean()

    return run(key, state)
