"""Contrastive divergence CD-k (Hinton 2002).

Like :func:`~ugm_infer.learn.sap`, but the negative chains are **restarted at the
data** at every update instead of persisting: one chain per datum of the batch,
started at :math:`x_0 = (v_n, h_0)` and moved ``k`` kernel steps with the current
parameters; the model term of the gradient is averaged over the final states
:math:`x_k`.  For small ``k`` the chains are far from equilibrium and the update
follows the gradient of the CD objective, not of the likelihood: its fixed points
are biased (Carreira-Perpinan and Hinton 2005), typically towards weaker couplings in
strongly coupled models, whose chains barely move away from the data in ``k`` steps.

Latent variables of the starting point :math:`h_0` are drawn given the data by
``latent_sweeps`` Gibbs sweeps over the latents with the visibles clamped, started
from uniformly random latents (for RBM-like models, whose latents are conditionally
independent given the visibles, one sweep is an exact draw from :math:`p(h \\mid v)`,
as in Hinton's CD).  With block Gibbs on an RBM declared ``{"v", "h"}``, one CD step
then draws :math:`v_1 \\sim p(v \\mid h_0)` and :math:`h_1 \\sim p(h \\mid v_1)`.

References
----------
Hinton, G. E. (2002). Training products of experts by minimizing contrastive
divergence. Neural Computation 14(8), 1771-1800.
Carreira-Perpinan, M. A. and Hinton, G. E. (2005). On contrastive divergence learning.
AISTATS.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer._random import split as split_key
from ugm_infer.learn.base import Learner, check_positive_int, global_norm
from ugm_infer.learn.particles import advance
from ugm_infer.learn.phases import _latent_sampler, latent_names, resolve_negative_phase
from ugm_infer.learn.skeleton import ascend, build, initial_step, setup, shared_argument_docs, start

__all__ = ["CDState", "CDInfo", "cd"]


class CDState(NamedTuple):
    """State of :func:`cd`: ``params``, optax ``opt_state``, positive-phase ``aux_state``, ``step`` (int32)."""

    params: Any
    opt_state: Any
    aux_state: Any
    step: jax.Array


class CDInfo(NamedTuple):
    """Diagnostics of one CD update.

    grad_norm
        Global L2 norm of the ascent direction.
    reconstruction_error
        Mean fraction of visible sites whose value changed between the data and the
        end of the ``k`` steps (the classical CD monitoring signal; not a likelihood).
    kernel_info
        The kernel's info averaged over the ``k`` steps, per chain.
    """

    grad_norm: jax.Array
    reconstruction_error: jax.Array
    kernel_info: Any


@shared_argument_docs
def cd(
    model,
    k: int = 1,
    optimizer: Any = None,
    kernel: Any = None,
    visible: Any = None,
    *,
    latent_sweeps: int = 1,
    positive_phase: Any = "auto",
    negative_phase: str = "auto",
) -> Learner:
    """Contrastive divergence CD-k learner (see the module docstring).

    Parameters
    ----------
    k
        Kernel steps from the data (a positive int; with the default block Gibbs
        kernel, ``k`` sweeps).
    latent_sweeps
        Clamped Gibbs sweeps that draw the latents of the starting points from random
        (ignored for fully visible models).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` with state :class:`CDState` and info :class:`CDInfo`.
    """
    s = setup(model, optimizer, visible=visible, positive_phase=positive_phase, kernel=kernel)
    k = check_positive_int(k, "k")
    latent_sweeps = check_positive_int(latent_sweeps, "latent_sweeps")
    negative = resolve_negative_phase(model, s.visible, negative_phase)
    latent = latent_names(model, s.visible)
    latent_get, latent_sample = _latent_sampler(model, s.visible, "block", latent_sweeps) if latent else (None, None)

    def init(rng_key, params, data) -> CDState:
        if latent:
            latent_get(params)
        fresh = start(s, rng_key, params, data)
        return CDState(params, fresh.opt_state, fresh.aux_state, initial_step())

    def chains_from_data(rng_key, params, batch):
        """One chain per datum, started at (v_n, h_0) with h_0 drawn given v_n."""
        x0 = dict(batch)
        if latent:
            x0.update(latent_sample(rng_key, params, batch))
        return {n: x0[n] for n in model.variables}

    def step(rng_key, state: CDState, batch) -> tuple[CDState, CDInfo]:
        key_latent, key_chain, key_positive = split_key(rng_key, 3)
        params = state.params
        x0 = chains_from_data(key_latent, params, batch)
        x_k, kernel_info = advance(s.kernel, key_chain, x0, model.logdensity_fn(jax.lax.stop_gradient(params)), params, k)
        new = ascend(s, key_positive, params, state.opt_state, state.aux_state, batch, jax.grad(negative)(params, x_k))
        info = CDInfo(global_norm(new.direction), _reconstruction_error(model, s.visible, batch, x_k), kernel_info)
        return CDState(new.params, new.opt_state, new.aux_state, state.step + 1), info

    return build(s, "cd", init, step)


def _reconstruction_error(model, visible: tuple[str, ...], batch: dict, samples: dict) -> jax.Array:
    """Fraction of visible sites whose value changed between the data and the chains' ends."""
    changed = [jnp.mean((samples[n] != batch[n]).astype(jnp.float32)) for n in visible]
    sizes = [model.variables[n].size for n in visible]
    return sum(c * s for c, s in zip(changed, sizes)) / sum(sizes)
