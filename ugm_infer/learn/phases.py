"""Positive and negative phases: the data term and the model term of the gradient.

The ascent direction of the average log-likelihood splits into two expectations of
:math:`-\\partial E / \\partial \\theta`:

positive phase (data term)
    :math:`\\mathbb E_{v \\sim \\text{data}}\\, \\mathbb E_{h \\sim p(h \\mid v)}
    [-\\partial_\\theta E(v, h)] = -\\mathbb E_{\\text{data}}[\\partial_\\theta F(v)]`,
    with :math:`F(v) = -\\log \\sum_h e^{-E(v, h)}` the free energy of the visibles
    (:math:`F = E` for a fully visible model).
negative phase (model term)
    :math:`\\mathbb E_{x \\sim p_\\theta}[-\\partial_\\theta E(x)]`, estimated by the
    learner's particles.

A **positive phase** is a :class:`PositivePhase` ``(init, update)`` pair::

    aux_state = init(rng_key, params, data)          # data: all training data, or None
    positive_grad, aux_state = update(rng_key, params, batch, aux_state)

where ``positive_grad`` is a pytree like ``params`` holding the data term
:math:`\\mathbb E_{\\text{batch}}[-\\partial_\\theta E]` (or its estimate) and
``aux_state`` is any pytree of arrays the phase keeps between steps.  A bare callable
``update`` is accepted too (its ``aux_state`` starts as ``()``).  Three are built in:

* :func:`free_energy_positive_phase` -- exact: ``-grad mean F(v)`` (fully visible
  models, or one latent variable summed out by ``model.free_energy_fns``);
* :func:`mc_positive_phase` -- a Monte-Carlo E-step: latents drawn by a few Gibbs
  sweeps with the visibles clamped at the data, started afresh from uniformly random
  latents at every step (no state kept);
* user code -- e.g. persistent per-datum latent chains (adiabatic PCD) or mean-field
  posteriors (mean-field PCD) keep their chains / variational parameters in
  ``aux_state``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ugm_infer._random import split as split_key
from ugm_infer.kernels import gibbs
from ugm_infer.latent import conditional_model, latent_names, resolve_visible
from ugm_infer.learn.base import check_positive_int, is_concrete

__all__ = [
    "PositivePhase",
    "conditional_model",
    "free_energy_positive_phase",
    "latent_names",
    "mc_positive_phase",
    "resolve_negative_phase",
    "resolve_positive_phase",
    "visible_free_energy",
    "weighted_negative_phase",
]


class PositivePhase(NamedTuple):
    """A positive phase (see the module docstring).

    init
        ``init(rng_key, params, data) -> aux_state``.
    update
        ``update(rng_key, params, batch, aux_state) -> (positive_grad, aux_state)``.
    name
        Short description.
    """

    init: Callable
    update: Callable
    name: str = "custom"


def _no_aux(rng_key, params, data):
    del rng_key, params, data
    return ()


def visible_free_energy(model, visible: tuple[str, ...]) -> Callable | None:
    """``F(params, v)`` of one visible configuration, or ``None`` if not analytic.

    ``F = E`` for fully visible models; with one latent variable ``h`` that has
    ``model.free_energy_fns["h"]``, ``F(params, v) = free_energy_fns["h"](params, v)``.
    """
    latent = latent_names(model, visible)
    if not latent:
        return lambda params, v: model.energy(params, v)
    if len(latent) == 1 and latent[0] in model.free_energy_fns:
        fn = model.free_energy_fns[latent[0]]
        return lambda params, v: fn(params, {n: v[n] for n in visible})
    return None


def mean_free_energy(free_energy: Callable, params: Any, batch: dict) -> jax.Array:
    return jnp.mean(jax.vmap(lambda v: free_energy(params, v))(batch))


def free_energy_positive_phase(model, visible: Any = None) -> PositivePhase:
    """Exact data term ``-grad mean_batch F(params, v)``.

    Raises ``ValueError`` when the free energy of the visibles is not analytic (more
    than one latent variable, or a latent variable without ``free_energy_fns``).
    """
    visible = resolve_visible(model, visible)
    free_energy = visible_free_energy(model, visible)
    if free_energy is None:
        latent = latent_names(model, visible)
        raise ValueError(
            f"the free energy of the visible variables {list(visible)} is not analytic for model '{model.name}': "
            f"latent variable(s) {list(latent)} are not all summed out by model.free_energy_fns "
            f"(it has {sorted(model.free_energy_fns)}); use mc_positive_phase or a custom positive phase"
        )

    def update(rng_key, params, batch, aux_state):
        del rng_key
        return jax.grad(lambda p: -mean_free_energy(free_energy, p, batch))(params), aux_state

    return PositivePhase(_no_aux, update, "free_energy")


def _latent_sampler(model, visible: tuple[str, ...], scan: str, num_sweeps: int):
    """Lazily built Gibbs kernel over the latent variables only (visibles clamped at the data)."""
    latent = latent_names(model, visible)
    cache: dict[str, Callable] = {}

    def get(params):
        if "kernel" not in cache:
            cache["kernel"] = gibbs.build_kernel(conditional_model(model, visible, params, scan), scan, num_sweeps)
        return cache["kernel"]

    def sample(rng_key, params, batch):
        """One draw of the latents per datum (leading batch axis)."""
        kernel = get(params)
        params = jax.lax.stop_gradient(params)
        size = jax.tree.leaves(batch)[0].shape[0]

        def one(key, v):
            key_init, key_sweep = split_key(key)
            keys = split_key(key_init, len(latent))
            h = {n: model.variables[n].random(k) for k, n in zip(keys, latent)}

            def logdensity(h):
                return -model.energy(params, {**v, **h})

            state, _ = kernel(key_sweep, gibbs.init(h, logdensity), logdensity)
            return state.position

        return jax.vmap(one)(split_key(rng_key, size), batch)

    return get, sample


def mc_positive_phase(
    model, visible: Any = None, *, num_sweeps: int = 5, num_samples: int = 1, scan: str = "block"
) -> PositivePhase:
    """Monte-Carlo E-step: the data term from latents sampled given the data.

    For each datum ``v`` of the batch, ``num_samples`` latent configurations are drawn
    by ``num_sweeps`` Gibbs sweeps (scan order ``scan``) over the latent variables with
    the visibles clamped at ``v``, **started from uniformly random latents at every
    step** (no chains persist between steps).  The data term is
    ``-grad mean E(params, (v, h))`` over these completions.

    When the latents are conditionally independent given the visibles (RBM-like
    models, one block), one block sweep is an exact draw from ``p(h | v)`` and the
    estimate is unbiased; otherwise the chain is truncated after ``num_sweeps`` sweeps
    and the estimate carries that bias (raise ``num_sweeps``, or keep latent chains
    between steps with a custom positive phase, as adiabatic PCD does).
    """
    visible = resolve_visible(model, visible)
    num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
    num_samples = check_positive_int(num_samples, "num_samples")
    latent = latent_names(model, visible)
    if not latent:
        return free_energy_positive_phase(model, visible)
    get, sample = _latent_sampler(model, visible, scan, num_sweeps)

    def init(rng_key, params, data):
        del rng_key, data
        if params is not None and is_concrete(params):
            get(params)
        return ()

    def update(rng_key, params, batch, aux_state):
        keys = split_key(rng_key, num_samples)
        hs = jax.vmap(lambda k: sample(k, params, batch))(keys)  # (num_samples, batch, ...)
        full = {**jax.tree.map(lambda x: jnp.broadcast_to(x, (num_samples,) + x.shape), batch), **hs}
        full = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), full)
        return jax.grad(lambda p: -jnp.mean(model.energies(p, full)))(params), aux_state

    return PositivePhase(init, update, f"mc(num_sweeps={num_sweeps}, num_samples={num_samples})")


def resolve_positive_phase(model, visible: tuple[str, ...], positive_phase: Any) -> PositivePhase:
    """``"auto"``, ``"free_energy"``, ``"mc"``, a :class:`PositivePhase` or a callable."""
    if isinstance(positive_phase, PositivePhase):
        return positive_phase
    if isinstance(positive_phase, str):
        if positive_phase == "auto":
            if visible_free_energy(model, visible) is not None:
                return free_energy_positive_phase(model, visible)
            return mc_positive_phase(model, visible)
        if positive_phase == "free_energy":
            return free_energy_positive_phase(model, visible)
        if positive_phase == "mc":
            return mc_positive_phase(model, visible)
        raise ValueError(
            f"`positive_phase` must be 'auto', 'free_energy', 'mc', a PositivePhase or a callable, got {positive_phase!r}"
        )
    if hasattr(positive_phase, "init") and hasattr(positive_phase, "update"):
        return PositivePhase(positive_phase.init, positive_phase.update, getattr(positive_phase, "name", "custom"))
    if callable(positive_phase):
        return PositivePhase(_no_aux, positive_phase, getattr(positive_phase, "__name__", "custom"))
    raise TypeError(
        "`positive_phase` must be 'auto', 'free_energy', 'mc', a PositivePhase(init, update) or a callable "
        f"(rng_key, params, batch, aux_state) -> (positive_grad, aux_state); got {type(positive_phase).__name__}"
    )


def particle_energies(model, visible: tuple[str, ...], negative_phase: str) -> Callable:
    """``energies(params, particles) -> (num_particles,)``: what the particles contribute to the model term.

    ``"energy"``: the joint energy of each particle.  ``"free_energy"``: the free
    energy of its visible part (Rao-Blackwellised: the latents are summed out
    analytically, which has lower variance and the same expectation).  ``"auto"``:
    ``"free_energy"`` when it is analytic and the model has latents, else ``"energy"``.
    """
    if negative_phase not in ("auto", "energy", "free_energy"):
        raise ValueError(f"`negative_phase` must be 'auto', 'energy' or 'free_energy', got {negative_phase!r}")
    free_energy = visible_free_energy(model, visible)
    latent = latent_names(model, visible)
    if negative_phase == "free_energy" and free_energy is None:
        raise ValueError(
            f"`negative_phase='free_energy'` needs an analytic free energy of {list(visible)}; "
            f"model '{model.name}' sums out {sorted(model.free_energy_fns)} but the latents are {list(latent)}"
        )
    if free_energy is not None and latent and negative_phase in ("auto", "free_energy"):
        return lambda params, particles: jax.vmap(lambda v: free_energy(params, v))({n: particles[n] for n in visible})
    return model.energies


def resolve_negative_phase(model, visible: tuple[str, ...], negative_phase: str) -> Callable:
    """``mean_value(params, particles)`` whose gradient is the model term's negative.

    The mean of :func:`particle_energies` over equally weighted particles.
    """
    energies = particle_energies(model, visible, negative_phase)
    return lambda params, particles: jnp.mean(energies(params, particles))


def weighted_negative_phase(model, visible: tuple[str, ...], negative_phase: str) -> Callable:
    """``value(params, particles, weights)``: weighted sum of :func:`particle_energies`.

    Its gradient in ``params`` is :math:`\\sum_s w_s \\partial_\\theta E(x_s)`, the
    negated model term of the ascent direction (the weights are not differentiated).
    """
    energies = particle_energies(model, visible, negative_phase)

    def value(params, particles, weights):
        return jnp.sum(jax.lax.stop_gradient(weights) * energies(params, particles))

    return value
