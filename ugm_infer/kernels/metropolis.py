"""Single-site Metropolis for discrete models.

At each visited site a new value is proposed uniformly among the ``K - 1`` other
values (a flip for binary/spin sites; the proposal is symmetric) and accepted with
probability

.. math::  \\min\\{1, \\exp(\\log p(x') - \\log p(x))\\}.

One step performs ``num_sweeps`` sweeps of ``num_sites`` proposals, in systematic
order (``scan="systematic"``) or at uniformly random sites (``scan="random"``).
The current log-density is cached in the state, so each proposal costs one
log-density evaluation.

References
----------
Metropolis, N., Rosenbluth, A. W., Rosenbluth, M. N., Teller, A. H. and Teller, E.
(1953). Equation of state calculations by fast computing machines. J. Chem. Phys. 21.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer._random import randint, uniform
from ugm_infer._random import split as split_key
from ugm_infer.kernels import _updates
from ugm_infer.kernels._common import check_initial_logdensity, check_model, resolve_logdensity, validate_position

__all__ = ["MetropolisState", "MetropolisInfo", "init", "build_kernel", "as_top_level_api"]

SCANS = ("systematic", "random")


class MetropolisState(NamedTuple):
    """position: the configuration; logdensity: its cached log-density."""

    position: dict
    logdensity: jax.Array


class MetropolisInfo(NamedTuple):
    """acceptance_rate: fraction of accepted proposals in the step; num_accepted: their number."""

    acceptance_rate: jax.Array
    num_accepted: jax.Array


def init(position: dict, logdensity_fn: Callable) -> MetropolisState:
    return MetropolisState(dict(position), jnp.asarray(logdensity_fn(position), jnp.float32))


def build_kernel(model, scan: str = "systematic", num_sweeps: int = 1):
    """Build a single-site Metropolis kernel ``kernel(rng_key, state, logdensity_fn)``."""
    check_model(model)
    if scan not in SCANS:
        raise ValueError(f"`scan` must be one of {SCANS}, got {scan!r}")
    if isinstance(num_sweeps, bool) or not isinstance(num_sweeps, (int, np.integer)) or num_sweeps < 1:
        raise ValueError(f"`num_sweeps` must be a positive int, got {num_sweeps!r}")
    variables = model.variables
    num_proposals = num_sweeps * model.num_sites

    def kernel(rng_key, state: MetropolisState, logdensity_fn: Callable):
        def accept_reject(key_accept, carry, proposal):
            position, logdensity, accepted = carry
            proposal_logdensity = jnp.asarray(logdensity_fn(proposal), jnp.float32)
            log_ratio = proposal_logdensity - logdensity
            accept = jnp.log(uniform(key_accept)) < log_ratio
            position = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, position)
            return position, jnp.where(accept, proposal_logdensity, logdensity), accepted + accept

        def site_fn(key, carry, name, domain, i):
            position = carry[0]
            key_value, key_accept = split_key(key)
            flat = position[name].reshape(-1)
            current = domain.to_index(flat[i])
            shift = randint(key_value, (), 1, domain.num_states)
            value = domain.from_index((current + shift) % domain.num_states)
            proposal = {**position, name: _updates.set_site(flat, i, value).reshape(domain.shape)}
            return accept_reject(key_accept, carry, proposal)

        def global_fn(key, carry, sites, g):
            position = carry[0]
            key_value, key_accept = split_key(key)
            row, k = sites.values[g], sites.num_states[g]
            current = jnp.argmax(row == sites.get(position, g))
            shift = randint(key_value, (), 1, k)
            proposal = sites.set(position, g, row[(current + shift) % k])
            return accept_reject(key_accept, carry, proposal)

        if scan == "systematic":
            sweep = _updates.systematic_scan(variables, site_fn)
        else:
            sweep = _updates.random_scan(variables, site_fn, num_updates=model.num_sites, global_fn=global_fn)
        carry = (state.position, state.logdensity, jnp.zeros((), jnp.int32))
        keys = split_key(rng_key, num_sweeps)
        if num_sweeps == 1:
            carry = sweep(keys[0], carry)
        else:
            carry, _ = jax.lax.scan(lambda c, k: (sweep(k, c), None), carry, keys)
        position, logdensity, accepted = carry
        info = MetropolisInfo(accepted / num_proposals, accepted)
        return MetropolisState(position, logdensity), info

    return kernel


def as_top_level_api(
    model,
    params: Any = None,
    *,
    logdensity_fn: Callable | None = None,
    beta: float = 1.0,
    scan: str = "systematic",
    num_sweeps: int = 1,
) -> SamplingAlgorithm:
    """Single-site Metropolis sampler for ``model`` at ``params`` (or any ``logdensity_fn``)."""
    logdensity_fn = resolve_logdensity(model, params, logdensity_fn, beta)
    kernel = build_kernel(model, scan, num_sweeps)

    def init_fn(position, rng_key=None):
        del rng_key
        state = init(validate_position(model, position), logdensity_fn)
        check_initial_logdensity(logdensity_fn, state.position, state.logdensity)
        return state

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)
