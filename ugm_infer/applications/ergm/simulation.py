"""Simulation of an ERGM: many chains of the edge-toggle kernel, jitted once per setting."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.applications.ergm.model import ERGM, check_graphs
from ugm_infer.applications.ergm.sampler import toggle_build_kernel, toggle_init
from ugm_infer.models._common import check_int, check_key

__all__ = ["ergm_simulate"]


def ergm_simulate(
    model: ERGM,
    rng_key: jax.Array,
    params: Any,
    num_samples: int,
    *,
    num_chains: int = 1,
    burn_in: int = 100,
    thin: int = 1,
    init: Any = None,
    update: str = "gibbs",
) -> dict:
    """Draw graphs with :data:`ergm_toggle` (systematic sweeps).

    Runs ``num_chains`` chains (vmapped) from ``init`` (``(num_chains, m)``; default
    the empty graph), ``burn_in`` sweeps, then records ``num_samples`` graphs per
    chain, ``thin`` sweeps apart.

    Returns
    -------
    ``{"y": (num_chains, num_samples, m) int8, "stats": (num_chains, num_samples, K),
    "acceptance_rate": (num_chains,)}`` (numpy).
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM, got {type(model).__name__}")
    check_key(rng_key)
    model.validate_params(params)
    num_samples = check_int(num_samples, "num_samples")
    num_chains = check_int(num_chains, "num_chains")
    thin = check_int(thin, "thin")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValueError(f"`burn_in` must be an int >= 0, got {burn_in!r}")
    m = model.num_dyads
    if init is None:
        y0 = np.zeros((num_chains, m), np.int8)
    else:
        y0 = check_graphs(model, init, "init")
        if y0.shape[0] != num_chains:
            raise ValueError(f"`init` has {y0.shape[0]} graphs but `num_chains` is {num_chains}")
    return _simulate_jit(model, update, int(num_samples), int(burn_in), int(thin))(rng_key, params, jnp.asarray(y0))


_SIM_CACHE: dict = {}


def _simulate_jit(model: ERGM, update: str, num_samples: int, burn_in: int, thin: int):
    key = (id(model), update, num_samples, burn_in, thin)
    if key in _SIM_CACHE and _SIM_CACHE[key][0] is model:
        return _SIM_CACHE[key][1]
    kernel = toggle_build_kernel(model, "systematic", update)

    @jax.jit
    def run(rng_key, params, y0):
        logdensity = model.logdensity_fn(params)

        def chain(key, y):
            state = toggle_init({"y": y})
            key_burn, key_draw = jax.random.split(key)

            def step(s, k):
                s, info = kernel(k, s, logdensity)
                return s, info.acceptance_rate

            if burn_in:
                state, _ = jax.lax.scan(step, state, jax.random.split(key_burn, burn_in))

            def draw(s, k):
                s, acc = jax.lax.scan(step, s, jax.random.split(k, thin))
                return s, (s.position["y"], acc.mean())

            _, (ys, acc) = jax.lax.scan(draw, state, jax.random.split(key_draw, num_samples))
            return ys, acc.mean()

        ys, acc = jax.vmap(chain)(jax.random.split(rng_key, y0.shape[0]), y0)
        stats = model.statistics(ys.reshape((-1, ys.shape[-1])), params["theta"].dtype)
        return ys.astype(jnp.int8), stats.reshape(ys.shape[:2] + (-1,)), acc

    def wrapped(rng_key, params, y0):
        ys, stats, acc = run(rng_key, params, y0)
        return {"y": np.asarray(ys), "stats": np.asarray(stats), "acceptance_rate": np.asarray(acc)}

    _SIM_CACHE[key] = (model, wrapped)
    return wrapped
