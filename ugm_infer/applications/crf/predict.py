"""Prediction for discrete models: MAP by ICM and simulated annealing, marginal modes by sampling.

All functions act on ONE configuration of any :class:`~ugm_infer.EnergyModel` given its
params (for a CRF, ``model.condition(theta, x)`` for one input); vmap them over
inputs / restarts.  They are pure and jittable (``model`` and the static arguments
closed over).

:func:`icm`
    Iterated conditional modes (Besag 1986): sweep the sites and set each to the
    value of lowest energy given the rest, until no site changes.  Every change lowers
    the energy, so it stops at a **local optimum**: no single-site change lowers the
    energy.  For multilinear binary/spin models with declared blocks, all sites of a
    block (conditionally independent given the rest) are set at once from one
    gradient; otherwise sites are visited one at a time in systematic order.
:func:`simulated_annealing`
    Gibbs sampling (any kernel) of :math:`p_\\beta(x) \\propto e^{-\\beta E(x)}` along an
    increasing inverse-temperature schedule (Kirkpatrick et al. 1983; Geman & Geman
    1984), finished by :func:`icm`; returns the lowest-energy configuration seen.
:func:`max_marginals`
    Per-site marginals :math:`p(x_i = k)` estimated from MCMC samples and the
    configuration of per-site modes :math:`\\hat x_i = \\arg\\max_k p(x_i = k)` (the
    maximiser of the posterior marginals, MPM).

References
----------
Besag, J. (1986). On the statistical analysis of dirty pictures. JRSS B 48(3), 259-302.
Kirkpatrick, S., Gelatt, C. D. and Vecchi, M. P. (1983). Optimization by simulated
annealing. Science 220, 671-680.
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE PAMI 6, 721-741.
Marroquin, J., Mitter, S. and Poggio, T. (1987). Probabilistic solution of ill-posed
problems in computational vision. JASA 82, 76-89 (the MPM estimator).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Spin
from ugm_infer.kernels import _updates
from ugm_infer.kernels._common import check_model, resolve_structure
from ugm_infer.kernels.gibbs import build_kernel as gibbs_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.models._common import check_int

__all__ = ["ICMResult", "icm", "simulated_annealing", "SAResult", "max_marginals", "MaxMarginalsResult", "geometric_betas"]


class ICMResult(NamedTuple):
    """Result of :func:`icm`: the local optimum, its energy, sweeps done, whether it converged."""

    state: dict
    energy: jax.Array
    num_sweeps: jax.Array
    converged: jax.Array


class SAResult(NamedTuple):
    """Result of :func:`simulated_annealing`: best configuration, its energy, energy trace per stage."""

    state: dict
    energy: jax.Array
    energies: jax.Array


class MaxMarginalsResult(NamedTuple):
    """Result of :func:`max_marginals`.

    state
        Per-site modes of the estimated marginals.
    marginals
        ``{name: (*shape, K)}`` estimated :math:`p(x_i = k)` (``k`` indexes
        ``domain.values``; for spins ``[p(-1), p(+1)]``), the layout of
        :func:`ugm_infer.exact.marginals`.
    """

    state: dict
    marginals: dict


def _concrete(tree: Any) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _resolve_kernel(model, params, kernel) -> tuple:
    """``(init_fn, kernel_fn)`` for one chain: block Gibbs by default, or the pair given."""
    if kernel is None:
        return gibbs_init, gibbs_kernel(model, "block", params=params if _concrete(params) else None)
    if isinstance(kernel, (tuple, list)) and len(kernel) == 2:
        return kernel[0], kernel[1]
    raise TypeError("`kernel` must be None (block Gibbs) or a pair (init_fn, kernel_fn)")


def _prepare(model, params, state, argname="init_state"):
    check_model(model)
    if _concrete(params):
        model.validate_params(params)
    if _concrete(state):
        state = model.validate_state(state, batch_ndim=0, argname=argname)
    return state


# ----------------------------------------------------------------------------------
# ICM
# ----------------------------------------------------------------------------------
def _icm_sweep_fn(model, params):
    """One deterministic ICM sweep ``sweep(position, logdensity_fn) -> position``."""
    variables = model.variables
    gradient = model.has_structure and model.multilinear and all(isinstance(d, (Binary, Spin)) for d in variables.values())
    if gradient:
        blocks = model.blocks
        names = tuple(variables)
        masks = {
            n: jnp.asarray(np.stack([b.masks.get(n, np.zeros(variables[n].shape, bool)) for b in blocks])) for n in names
        }
        midpoints = {n: 0.5 if isinstance(variables[n], Binary) else 0.0 for n in names}

        def body(logdensity_fn, position, block_masks):
            # conditional log-odds of all sites of the block from one gradient at the midpoint
            relaxed = {
                n: jnp.where(block_masks[n], jnp.float32(midpoints[n]), position[n].astype(jnp.float32)) for n in names
            }
            grads = jax.grad(lambda r: logdensity_fn({**position, **r}))(relaxed)
            new = dict(position)
            for n in names:
                logit = grads[n]
                up = jnp.where(logit > 0, True, jnp.where(logit < 0, False, position[n] > midpoints[n]))
                val = up.astype(position[n].dtype) if isinstance(variables[n], Binary) else jnp.where(up, 1, -1)
                new[n] = jnp.where(block_masks[n], val.astype(position[n].dtype), position[n])
            return new, None

        def sweep(position, logdensity_fn):
            position, _ = jax.lax.scan(lambda p, m: body(logdensity_fn, p, m), position, masks)
            return position

        return sweep

    def site_fn(key, position, name, domain, flat_index, logdensity_fn):
        del key
        logits = _updates._site_logits(position, name, domain, flat_index, logdensity_fn)
        values = jnp.asarray(domain.values, domain.dtype)
        flat = position[name].reshape(-1)
        current = jnp.argmax(values == flat[flat_index])
        best = jnp.argmax(logits)
        # keep the current value on ties, so every change strictly lowers the energy
        choice = jnp.where(logits[best] > logits[current], best, current)
        return {**position, name: _updates.set_site(flat, flat_index, values[choice]).reshape(domain.shape)}

    def sweep(position, logdensity_fn):
        inner = _updates.systematic_scan(variables, lambda k, c, n, d, i: site_fn(k, c, n, d, i, logdensity_fn))
        return inner(jax.random.key(0), position)

    return sweep


def icm(model, params: Any, init_state: dict, *, max_sweeps: int = 100) -> ICMResult:
    """Iterated conditional modes from ``init_state`` (see the module docstring).

    Parameters
    ----------
    model, params
        The model and its params (a CRF: ``model.condition(theta, x)``).
    init_state
        One configuration to start from (e.g. the labels of the node potentials alone,
        a sample, or an annealed state).
    max_sweeps
        Upper bound on the sweeps (``converged`` is false if it was reached with
        sites still changing).

    Returns
    -------
    :class:`ICMResult`.  At convergence no single-site change lowers the energy.
    """
    max_sweeps = check_int(max_sweeps, "max_sweeps")
    state = _prepare(model, params, init_state)
    if not model.has_structure and _concrete(params):
        resolve_structure(model, params)
    sweep = _icm_sweep_fn(model, params)
    logdensity_fn = model.logdensity_fn(params)

    def cond(carry):
        _, changed, k = carry
        return changed & (k < max_sweeps)

    def body(carry):
        position, _, k = carry
        new = sweep(position, logdensity_fn)
        changed = _updates.count_changed(position, new) > 0
        return new, changed, k + 1

    position, changed, k = jax.lax.while_loop(cond, body, (state, jnp.array(True), jnp.zeros((), jnp.int32)))
    return ICMResult(position, model.energy(params, position), k, ~changed)


# ----------------------------------------------------------------------------------
# simulated annealing
# ----------------------------------------------------------------------------------
def geometric_betas(beta_min: float, beta_max: float, num_stages: int) -> np.ndarray:
    """``num_stages`` inverse temperatures spaced geometrically from ``beta_min`` to ``beta_max``."""
    num_stages = check_int(num_stages, "num_stages")
    if not (np.isfinite(beta_min) and np.isfinite(beta_max) and 0 < beta_min <= beta_max):
        raise ValueError(f"need 0 < beta_min <= beta_max (finite), got beta_min={beta_min!r}, beta_max={beta_max!r}")
    return np.geomspace(beta_min, beta_max, num_stages).astype(np.float32)


def simulated_annealing(
    rng_key: jax.Array,
    model,
    params: Any,
    init_state: dict,
    betas: Any,
    *,
    kernel: Any = None,
    num_steps_per_stage: int = 1,
    polish: bool = True,
) -> SAResult:
    """Simulated annealing of :math:`e^{-\\beta E}` along ``betas``, then :func:`icm`.

    Parameters
    ----------
    rng_key
        JAX PRNG key.
    model, params, init_state
        As in :func:`icm`.
    betas
        Increasing inverse temperatures (1-D, positive), e.g. :func:`geometric_betas`.
        The kernel targets ``model.logdensity_fn(params, beta)`` at each stage.
    kernel
        ``kernel(rng_key, state, logdensity_fn) -> (state, info)`` with a
        ``.position`` state built by ``ui.kernels.gibbs.init``-like ``init``; default
        block Gibbs (``ui.kernels.gibbs.build_kernel(model, "block")``).  Pass a pair
        ``(init_fn, kernel_fn)`` for another kernel.
    num_steps_per_stage
        Kernel steps at each ``beta``.
    polish
        Finish with :func:`icm` (a local optimum at zero temperature).

    Returns
    -------
    :class:`SAResult` with the lowest-energy configuration seen (after the polish),
    its energy and the energy after each stage.
    """
    num_steps_per_stage = check_int(num_steps_per_stage, "num_steps_per_stage")
    state = _prepare(model, params, init_state)
    betas_arr = jnp.asarray(betas, jnp.float32)
    if betas_arr.ndim != 1 or betas_arr.shape[0] < 1:
        raise ValueError(f"`betas` must be a non-empty 1-D array, got shape {betas_arr.shape}")
    if _concrete(betas_arr) and not bool(np.all(np.asarray(betas_arr) > 0) and np.all(np.isfinite(np.asarray(betas_arr)))):
        raise ValueError("`betas` must be positive and finite")
    init_fn, kernel_fn = _resolve_kernel(model, params, kernel)

    def stage(carry, inp):
        position, best, best_e = carry
        key, beta = inp
        logdensity_fn = model.logdensity_fn(params, beta)

        def one(ks, k):
            return kernel_fn(k, ks, logdensity_fn)[0], None

        ks, _ = jax.lax.scan(one, init_fn(position, logdensity_fn), jax.random.split(key, num_steps_per_stage))
        position = ks.position
        e = model.energy(params, position)
        better = e < best_e
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), position, best)
        return (position, best, jnp.minimum(e, best_e)), e

    keys = jax.random.split(rng_key, betas_arr.shape[0])
    e0 = model.energy(params, state)
    (_, best, best_e), trace = jax.lax.scan(stage, (state, state, e0), (keys, betas_arr))
    if polish:
        res = icm(model, params, best)
        best, best_e = res.state, res.energy
    return SAResult(best, best_e, trace)


# ----------------------------------------------------------------------------------
# max-marginals from sampling
# ----------------------------------------------------------------------------------
def max_marginals(
    rng_key: jax.Array,
    model,
    params: Any,
    init_state: dict,
    *,
    num_samples: int = 100,
    num_burnin: int = 20,
    thin: int = 1,
    num_chains: int = 1,
    kernel: Any = None,
) -> MaxMarginalsResult:
    """Marginals :math:`p(x_i = k)` from MCMC samples and their per-site modes.

    Runs ``num_chains`` chains from ``init_state`` (``num_burnin`` discarded kernel
    steps, then ``num_samples`` kept draws, each ``thin`` steps apart) and averages the
    one-hot encodings of the draws.  With block Gibbs (default) the estimate is
    consistent for any energy; its standard error per site is at most
    :math:`0.5/\\sqrt{\\text{ESS}}`.

    Returns
    -------
    :class:`MaxMarginalsResult` (modes and ``{name: (*shape, K)}`` marginals).
    """
    num_samples = check_int(num_samples, "num_samples")
    num_burnin = check_int(num_burnin, "num_burnin", minimum=0)
    thin = check_int(thin, "thin")
    num_chains = check_int(num_chains, "num_chains")
    state = _prepare(model, params, init_state)
    init_fn, kernel_fn = _resolve_kernel(model, params, kernel)
    logdensity_fn = model.logdensity_fn(params)
    values = {n: jnp.asarray(d.values, d.dtype) for n, d in model.variables.items()}

    def onehot(position):
        return {n: (position[n][..., None] == values[n]).astype(jnp.float32) for n in model.variables}

    def run(key, ks0):
        def step(ks, k):
            return kernel_fn(k, ks, logdensity_fn)[0], None

        key_burn, key_draw = jax.random.split(key)
        ks, _ = jax.lax.scan(step, ks0, jax.random.split(key_burn, max(num_burnin, 1))[:num_burnin])

        def draw(carry, k):
            ks, acc = carry
            ks, _ = jax.lax.scan(step, ks, jax.random.split(k, thin))
            oh = onehot(ks.position)
            return (ks, jax.tree.map(jnp.add, acc, oh)), None

        zeros = jax.tree.map(jnp.zeros_like, onehot(ks.position))
        (_, acc), _ = jax.lax.scan(draw, (ks, zeros), jax.random.split(key_draw, num_samples))
        return acc

    ks0 = init_fn(state, logdensity_fn)
    accs = jax.vmap(run, in_axes=(0, None))(jax.random.split(rng_key, num_chains), ks0)
    marg = {n: jnp.sum(a, axis=0) / (num_samples * num_chains) for n, a in accs.items()}
    modes = {n: values[n][jnp.argmax(marg[n], axis=-1)].astype(model.variables[n].dtype) for n in model.variables}
    return MaxMarginalsResult(modes, marg)
