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

from ugm_infer.learn.base import (
    LazyKernel,
    Learner,
    advance,
    apply_ascent,
    check_batch,
    check_data,
    check_model,
    check_params,
    check_positive_int,
    check_same_structure,
    global_norm,
    resolve_optimizer,
    resolve_visible,
)
from ugm_infer.learn.phases import _latent_sampler, latent_names, resolve_negative_phase, resolve_positive_phase

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
    model
        The :class:`~ugm_infer.EnergyModel` to fit.
    k
        Kernel steps from the data (a positive int; with the default block Gibbs
        kernel, ``k`` sweeps).
    optimizer
        An optax ``GradientTransformation``; default ``optax.sgd(learning_rate=0.01)``.
    kernel
        As in :func:`~ugm_infer.learn.sap`: ``None`` (block Gibbs), a kernel module,
        or an ``(init_fn, kernel_fn)`` pair.
    visible
        Names of the data variables (see :func:`~ugm_infer.learn.sap`).
    latent_sweeps
        Clamped Gibbs sweeps that draw the latents of the starting points from random
        (ignored for fully visible models).
    positive_phase, negative_phase
        As in :func:`~ugm_infer.learn.sap`.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` with state :class:`CDState` and info :class:`CDInfo`.
    """
    check_model(model)
    k = check_positive_int(k, "k")
    latent_sweeps = check_positive_int(latent_sweeps, "latent_sweeps")
    visible = resolve_visible(model, visible)
    optimizer = resolve_optimizer(optimizer)
    positive = resolve_positive_phase(model, visible, positive_phase)
    negative = resolve_negative_phase(model, visible, negative_phase)
    kernel = LazyKernel(model, kernel)
    latent = latent_names(model, visible)
    latent_get, latent_sample = _latent_sampler(model, visible, "block", latent_sweeps) if latent else (None, None)

    def init(rng_key, params, data=None) -> CDState:
        check_params(model, params)
        data = check_data(model, visible, data)
        kernel.get(params)
        if latent:
            latent_get(params)
        aux_state = positive.init(rng_key, params, data)
        return CDState(params, optimizer.init(params), aux_state, jnp.zeros((), jnp.int32))

    def step(rng_key, state: CDState, batch) -> tuple[CDState, CDInfo]:
        batch = check_batch(model, visible, batch)
        key_latent, key_chain, key_positive = jax.random.split(rng_key, 3)
        params = state.params
        start = dict(batch)
        if latent:
            start.update(latent_sample(key_latent, params, batch))
        start = {n: start[n] for n in model.variables}
        logdensity_fn = model.logdensity_fn(jax.lax.stop_gradient(params))
        samples, kernel_info = advance(kernel, key_chain, start, logdensity_fn, params, k)
        positive_grad, aux_state = positive.update(key_positive, params, batch, state.aux_state)
        check_same_structure(params, positive_grad, "the positive phase's gradient")
        negative_grad = jax.grad(negative)(params, samples)
        ascent = jax.tree.map(jnp.add, positive_grad, negative_grad)
        new_params, opt_state = apply_ascent(optimizer, ascent, state.opt_state, params)
        changed = [jnp.mean((samples[n] != batch[n]).astype(jnp.float32)) for n in visible]
        sizes = [model.variables[n].size for n in visible]
        recon = sum(c * s for c, s in zip(changed, sizes)) / sum(sizes)
        info = CDInfo(global_norm(ascent), recon, kernel_info)
        return CDState(new_params, opt_state, aux_state, state.step + 1), info

    return Learner(init, step, model, "cd", visible)
