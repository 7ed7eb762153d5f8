"""Maximum pseudo-likelihood (Besag 1974) for fully visible models.

The pseudo-log-likelihood of a configuration replaces the joint by the product of
every site's full conditional,

.. math::  \\mathrm{PL}(\\theta; x) = \\sum_i \\log p_\\theta(x_i \\mid x_{-i}),
   \\qquad p_\\theta(x_i = k \\mid x_{-i}) =
   \\frac{e^{-E(\\theta, x^{(i \\to k)})}}{\\sum_{k'} e^{-E(\\theta, x^{(i \\to k')})}},

which needs no partition function.  The conditionals are computed generically: the
energy is evaluated at every value ``k`` of every site ``i`` (``num_sites * K``
evaluations per configuration, vmapped), so any energy works.  The maximiser is a
consistent estimator for fully visible models (Besag 1975), less efficient than the
MLE when couplings are strong.

References
----------
Besag, J. (1974). Spatial interaction and the statistical analysis of lattice systems.
JRSS B 36(2), 192-236.
Besag, J. (1975). Statistical analysis of non-lattice data. The Statistician 24(3), 179-195.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer.learn.base import Learner, check_batch, check_model
from ugm_infer.learn.skeleton import ObjectiveState, objective_learner, setup, shared_argument_docs

__all__ = ["PseudoLikelihoodState", "PseudoLikelihoodInfo", "pseudo_likelihood", "pseudo_log_likelihood"]


PseudoLikelihoodState = ObjectiveState  # the state of :func:`pseudo_likelihood`: params, opt_state, step


class PseudoLikelihoodInfo(NamedTuple):
    """grad_norm: norm of the ascent direction; pseudo_log_likelihood: batch average of PL (pre-update)."""

    grad_norm: jax.Array
    pseudo_log_likelihood: jax.Array


def _one_pll(model, params: Any, x: dict) -> jax.Array:
    """Pseudo-log-likelihood of one configuration."""
    total = jnp.zeros((), jnp.float32)
    for name, domain in model.variables.items():
        values = jnp.asarray(domain.values, domain.dtype)
        flat = x[name].reshape(-1)

        def site(i, name=name, domain=domain, values=values, flat=flat):
            def energy_at(value):
                return model.energy(params, {**x, name: flat.at[i].set(value).reshape(domain.shape)})

            log_cond = jax.nn.log_softmax(-jax.vmap(energy_at)(values).astype(jnp.float32))
            return log_cond[domain.to_index(flat[i])]

        total = total + jnp.sum(jax.vmap(site)(jnp.arange(domain.size)))
    return total


def _check_fully_visible(model, visible: tuple[str, ...]) -> None:
    latent = [n for n in model.variables if n not in visible]
    if latent:
        raise ValueError(
            f"pseudo-likelihood needs a fully visible model, but variable(s) {latent} of model '{model.name}' are "
            "latent (not in the data); use sap/pcd/cd, which handle latent variables"
        )


def pseudo_log_likelihood(model, params: Any, data: dict) -> jax.Array:
    """Pseudo-log-likelihood ``sum_i log p(x_i | x_-i)`` of each example (see the module docstring).

    Parameters
    ----------
    model
        A fully visible :class:`~ugm_infer.EnergyModel`.
    params
        Its parameters (may be traced).
    data
        ``{name: (num_examples, *shape)}`` with every variable.

    Returns
    -------
    ``(num_examples,)`` array.  Divide by ``model.num_sites`` for a per-site value.
    """
    check_model(model)
    visible = tuple(model.variables)
    data = check_batch(model, visible, data, argname="data")
    return jax.vmap(lambda x: _one_pll(model, params, x))(data)


@shared_argument_docs
def pseudo_likelihood(model, optimizer: Any = None, visible: Any = None) -> Learner:
    """Maximum pseudo-likelihood learner (Besag 1974) for fully visible models.

    Parameters
    ----------
    model
        A fully visible :class:`~ugm_infer.EnergyModel` (``ValueError`` when
        ``visible`` leaves latent variables, e.g. an RBM's ``h``).
    visible
        Must resolve to all variables (default: all but those summed out by
        ``model.free_energy_fns``).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` (state :class:`PseudoLikelihoodState`, info
    :class:`PseudoLikelihoodInfo`) ascending the batch-average pseudo-log-likelihood;
    ``step`` ignores its key.
    """
    s = setup(model, optimizer, visible=visible)
    _check_fully_visible(model, s.visible)

    def objective(params, batch):
        return jnp.mean(jax.vmap(lambda x: _one_pll(model, params, x))(batch))

    return objective_learner(s, "pseudo_likelihood", objective, PseudoLikelihoodState, PseudoLikelihoodInfo)
