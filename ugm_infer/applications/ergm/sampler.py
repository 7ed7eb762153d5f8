"""The edge-toggle kernel of an ERGM (BlackJAX style): :data:`ergm_toggle`.

Each toggle visits one dyad and redraws it from its conditional given the rest of the
graph (heat bath) or proposes its flip (Metropolis), with the conditional log-odds
:math:`\\theta^\\top \\delta_{ij} g(y)` computed from cached degrees and the
shared-partner matrix :math:`A^2` in O(n): the single-dyad samplers of Snijders (2002)
and of statnet's ``ergm`` package (Hunter et al. 2008).

References
----------
Snijders, T. A. B. (2002). Markov chain Monte Carlo estimation of exponential random
graph models. Journal of Social Structure 3(2).
Hunter, D. R., Handcock, M. S., Butts, C. T., Goodreau, S. M. and Morris, M. (2008).
ergm: a package to fit, simulate and diagnose exponential-family models for networks.
J. Stat. Softw. 24(3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax import GenerateSamplingAPI
from blackjax.base import SamplingAlgorithm

from ugm_infer.applications.ergm.model import ERGM, ERGMLogDensity, _change_core, to_adjacency
from ugm_infer.models._common import bound_algorithm, check_int

__all__ = [
    "ERGMToggleState",
    "ERGMToggleInfo",
    "ergm_toggle",
    "toggle_init",
    "toggle_build_kernel",
    "toggle_as_top_level_api",
]


class ERGMToggleState(NamedTuple):
    """State of one edge-toggle chain.

    position
        ``{"y": (m,)}``: the dyad vector (what learners and SMC read).
    adjacency
        ``(n, n)`` int32 symmetric adjacency matrix of ``y`` (cached).
    degrees
        ``(n,)`` int32 node degrees (cached).
    shared_partners
        ``(n, n)`` int32 matrix :math:`A^2` (shared-partner counts; its diagonal is
        the degrees), cached for GWESP change statistics.
    """

    position: dict
    adjacency: jax.Array
    degrees: jax.Array
    shared_partners: jax.Array


class ERGMToggleInfo(NamedTuple):
    """Per-step diagnostics.

    acceptance_rate
        Mean over the toggles of the probability that the dyad changed (Gibbs: the
        conditional probability of the other value; Metropolis: the acceptance
        probability of the flip).
    num_changed
        Number of dyads whose value changed during the step.
    """

    acceptance_rate: jax.Array
    num_changed: jax.Array


def toggle_init(position: dict, logdensity_fn: Callable | None = None) -> ERGMToggleState:
    """Build the cached adjacency matrix, degrees and :math:`A^2` of a position ``{"y": (m,)}``."""
    del logdensity_fn
    if not isinstance(position, dict) or "y" not in position:
        raise ValueError("`position` must be a dict {'y': (num_dyads,)} (an ERGM state)")
    y = jnp.asarray(position["y"])
    A = to_adjacency(y.astype(jnp.int32))
    return ERGMToggleState(dict(position), A, A.sum(-1), A @ A)


def toggle_build_kernel(model: ERGM, scan: str = "systematic", update: str = "gibbs", num_toggles: int | None = None):
    # Long because the docstring explains both updates and the kernel is one closure over a single jitted toggle loop.
    """Edge-toggle kernel ``kernel(rng_key, state, logdensity_fn) -> (state, info)``.

    Each toggle visits one dyad ``ij`` and, with :math:`\\eta_{ij} = \\log p(y^+_{ij})
    - \\log p(y^-_{ij})` (the conditional log-odds of the edge),

    ``update="gibbs"``
        redraws :math:`y_{ij} \\sim \\mathrm{Bernoulli}(\\sigma(\\eta_{ij}))` (heat bath);
    ``update="metropolis"``
        proposes the flip and accepts with probability :math:`\\min(1, e^{\\pm\\eta_{ij}})`
        (``+`` when adding the edge).

    Both leave :math:`p(y)` invariant at every toggle, so any scan order does.
    When ``logdensity_fn`` is an :class:`ERGMLogDensity` for this model's terms (what
    :meth:`ERGM.logdensity_fn` returns, and so what every learner passes),
    :math:`\\eta_{ij} = \\beta\\theta^\\top \\delta_{ij} g(y)` from the cached degrees and
    :math:`A^2` in O(n); otherwise (an arbitrary density, e.g. a tempered SMC
    bridge) it is computed from two log-density evaluations (exact, slower).
    After a toggle the caches (adjacency, degrees) are updated in O(1) and, for
    models with GWESP, the shared-partner matrix :math:`A^2` in O(n); otherwise
    :math:`A^2` is recomputed once at the end of the step (O(n) amortised per toggle).

    Parameters
    ----------
    model
        The :class:`ERGM` (fixes ``n`` and the terms).
    scan
        ``"systematic"`` (dyads in order) or ``"random"`` (uniformly random dyads).
    update
        ``"gibbs"`` or ``"metropolis"``.
    num_toggles
        Toggles per step; default one sweep, ``m = n(n-1)/2``.
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM (ui.models.ergm.ergm(...)), got {type(model).__name__}")
    if scan not in ("systematic", "random"):
        raise ValueError(f"`scan` must be 'systematic' or 'random', got {scan!r}")
    if update not in ("gibbs", "metropolis"):
        raise ValueError(f"`update` must be 'gibbs' or 'metropolis', got {update!r}")
    m = model.num_dyads
    num_toggles = m if num_toggles is None else check_int(num_toggles, "num_toggles")
    dyads = jnp.asarray(model.dyads)
    terms = model.terms
    # only GWESP change statistics read A^2 during a step; without GWESP, and on the
    # generic path, A^2 is refreshed once at the end of the step instead
    needs_sp_fast = any(name == "gwesp" for name, _ in terms)

    def kernel(rng_key, state: ERGMToggleState, logdensity_fn: Callable):
        fast = isinstance(logdensity_fn, ERGMLogDensity) and logdensity_fn.terms == terms
        needs_sp = fast and needs_sp_fast
        if fast:
            lin = logdensity_fn.natural_params
            dtype = lin.dtype
        else:
            dtype = jnp.float32
        y_dtype = state.position["y"].dtype
        key_sites, key_toggles = jax.random.split(rng_key)
        if scan == "systematic":
            sites = jnp.arange(num_toggles) % m
        else:
            sites = jax.random.randint(key_sites, (num_toggles,), 0, m)

        def toggle(carry, inp):
            y, A, deg, sp = carry
            k, key = inp
            i, j = dyads[k, 0], dyads[k, 1]
            a_ij = A[i, j]
            if fast:
                delta = _change_core(terms, A[i], A[j], a_ij, deg[i], deg[j], sp[i], sp[j], dtype)
                eta = jnp.dot(lin, delta)
            else:
                eta = logdensity_fn({"y": y.at[k].set(jnp.ones((), y_dtype))}) - logdensity_fn(
                    {"y": y.at[k].set(jnp.zeros((), y_dtype))}
                )
            u = jax.random.uniform(key, dtype=jnp.float32)
            if update == "gibbs":
                p_one = jax.nn.sigmoid(eta)
                new = (u < p_one).astype(jnp.int32)
                p_change = jnp.where(a_ij == 1, 1.0 - p_one, p_one)
            else:
                log_ratio = jnp.where(a_ij == 1, -eta, eta)
                p_change = jnp.exp(jnp.minimum(log_ratio, 0.0))
                new = jnp.where(u < p_change, 1 - a_ij, a_ij)
            d = new - a_ij  # -1, 0 or +1
            # A^2 update for A' = A + d (e_i e_j^T + e_j e_i^T), with the old A:
            # A'^2 = A^2 + d (A E + E A) + d^2 (e_i e_i^T + e_j e_j^T)
            if needs_sp:
                row_i, row_j = A[i], A[j]
                sp = sp.at[i, :].add(d * row_j).at[j, :].add(d * row_i)
                sp = sp.at[:, i].add(d * row_j).at[:, j].add(d * row_i)
                sp = sp.at[i, i].add(d * d).at[j, j].add(d * d)
            A = A.at[i, j].set(new).at[j, i].set(new)
            deg = deg.at[i].add(d).at[j].add(d)
            y = y.at[k].set(new.astype(y_dtype))
            return (y, A, deg, sp), (p_change.astype(jnp.float32), d != 0)

        carry = (state.position["y"], state.adjacency, state.degrees, state.shared_partners)
        keys = jax.random.split(key_toggles, num_toggles)
        (y, A, deg, sp), (p, changed) = jax.lax.scan(toggle, carry, (sites, keys))
        if not needs_sp:
            # no toggle read A^2: refresh it once per step (O(n^3) per O(n^2) toggles,
            # O(n) amortised) instead of four O(n) scatters per toggle
            sp = A @ A
        y0 = state.position["y"]
        info = ERGMToggleInfo(jnp.mean(p), jnp.sum(y != y0).astype(jnp.int32))
        del changed
        new_position = dict(state.position)
        new_position["y"] = y
        return ERGMToggleState(new_position, A, deg, sp), info

    return kernel


def toggle_as_top_level_api(
    model: ERGM, logdensity_fn: Callable, scan: str = "systematic", update: str = "gibbs", num_toggles: int | None = None
) -> SamplingAlgorithm:
    """``SamplingAlgorithm(init, step)`` bound to ``logdensity_fn`` (BlackJAX top-level API)."""
    return bound_algorithm(toggle_init, toggle_build_kernel(model, scan, update, num_toggles), logdensity_fn)


#: The edge-toggle kernel in BlackJAX style: ``ergm_toggle.init(position)``,
#: ``ergm_toggle.build_kernel(model, scan, update, num_toggles)``, and
#: ``ergm_toggle(model, logdensity_fn, ...)`` for a ``SamplingAlgorithm``.  Pass it
#: as ``kernel=`` to any learner of :mod:`ugm_infer.learn`.
ergm_toggle = GenerateSamplingAPI(toggle_as_top_level_api, toggle_init, toggle_build_kernel)
