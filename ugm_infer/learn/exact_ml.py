"""Exact maximum likelihood by enumeration: the ground truth for the stochastic learners.

The average log-likelihood of a batch of visible data is

.. math::  \\ell(\\theta) = -\\frac1B \\sum_b F(\\theta, v_b) - \\log Z(\\theta),
   \\qquad F(\\theta, v) = -\\log \\sum_h e^{-E(\\theta, v, h)},

and its gradient :math:`\\mathbb E_{\\text{data}}[-\\partial_\\theta E] -
\\mathbb E_{p_\\theta}[-\\partial_\\theta E]` is ``jax.grad`` of this objective:
:math:`\\log Z` comes from :func:`ugm_infer.exact.log_partition` (chunked enumeration,
differentiable), :math:`F` from ``model.free_energy_fns`` when the model has one
latent variable summed out there, :math:`F = E` for fully visible models, and
otherwise from exact enumeration of the latents given each datum
(:func:`ugm_infer.exact.log_partition` of the conditional model ``p(h | v)``, which
sums non-interacting latents analytically).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer.learn.base import Learner, check_batch, check_model, check_params, is_concrete, resolve_visible
from ugm_infer.learn.phases import conditional_model, mean_free_energy, visible_free_energy
from ugm_infer.learn.skeleton import ObjectiveState, objective_learner, setup, shared_argument_docs

__all__ = ["ExactMLState", "ExactMLInfo", "exact_ml", "exact_average_log_likelihood"]


ExactMLState = ObjectiveState  # the state of :func:`exact_ml`: params, opt_state, step


class ExactMLInfo(NamedTuple):
    """grad_norm: norm of the exact gradient; log_likelihood: exact average log-likelihood of the batch (pre-update)."""

    grad_norm: jax.Array
    log_likelihood: jax.Array


def _objective(model, visible: tuple[str, ...]):
    """``objective(params, batch)`` = exact average log-likelihood, traceable in both arguments."""
    from ugm_infer import exact

    free_energy = visible_free_energy(model, visible)
    cache: dict[str, Any] = {}

    def prepare(params):
        """Resolve structure / enumeration plans on concrete params (also checks enumerability)."""
        exact.log_partition(model, params)
        if free_energy is None and "conditional" not in cache:
            cache["conditional"] = conditional_model(model, visible, params)

    def objective(params, batch):
        if free_energy is not None:
            data_term = mean_free_energy(free_energy, params, batch)
        else:
            if "conditional" not in cache:
                if not is_concrete(params):
                    raise ValueError("call learner.init(rng_key, params) with concrete params before tracing step")
                prepare(params)
            cond = cache["conditional"]
            data_term = -jnp.mean(jax.vmap(lambda v: exact.log_partition(cond, (params, v)))(batch))
        return -data_term - exact.log_partition(model, params)

    return prepare, objective


def exact_average_log_likelihood(model, params: Any, data: dict, visible: Any = None) -> jax.Array:
    """Exact average log-likelihood of ``data`` (visible variables), differentiable in ``params``.

    The objective :func:`exact_ml` ascends; equal to
    ``ui.exact.average_log_likelihood(model, params, data)`` but traceable (usable
    under ``jax.grad``/``jit`` once called with concrete parameters).
    """
    check_model(model)
    visible = resolve_visible(model, visible)
    data = check_batch(model, visible, data, argname="data")
    prepare, objective = _objective(model, visible)
    if is_concrete(params):
        check_params(model, params)
        prepare(params)
    return objective(params, data)


@shared_argument_docs
def exact_ml(model, optimizer: Any = None, visible: Any = None) -> Learner:
    """Exact maximum-likelihood learner (gradient by enumeration; see the module docstring).

    Parameters
    ----------
    model
        An enumerable :class:`~ugm_infer.EnergyModel` (``ui.exact`` refuses models too
        large to enumerate, at ``init``).
    optimizer
        An optax ``GradientTransformation``; default ``optax.sgd(learning_rate=0.01)``.
        The objective is concave in the natural parameters of exponential families,
        so e.g. ``optax.sgd(0.5)`` or ``optax.adam(0.05)`` run to the MLE.

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` (state :class:`ExactMLState`, info
    :class:`ExactMLInfo`); ``step`` ignores its key.
    """
    s = setup(model, optimizer, visible=visible)
    prepare, objective = _objective(model, s.visible)
    return objective_learner(s, "exact_ml", objective, ExactMLState, ExactMLInfo, lambda params, data: prepare(params))
