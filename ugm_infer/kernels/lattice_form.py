r"""Recognising a user-written energy as a uniform nearest-neighbour lattice Ising energy.

An :class:`~ugm_infer.EnergyModel` with one binary/spin variable of even shape
``(H, W)`` whose energy, written any way (e.g. with ``jnp.roll``), equals

.. math::  E(s) = c(\theta) - J(\theta) \sum_{\langle ij \rangle} s_i s_j - h(\theta) \sum_i s_i

on a periodic or open ``H x W`` lattice runs on the four-sub-lattice sweep of
:mod:`ugm_infer.kernels.checkerboard`, like ``ui.models.lattice_ising``.

Detection (:func:`lattice_form`, once per model, with concrete parameters): the energy
must be smooth in the state (:func:`ugm_infer.structure.is_smooth_in_state`); for the
given parameters and a random perturbation of them, ``J`` and ``h`` are read off three
energies (:func:`coefficients`) and the energy's gradient at two random real points is
compared, site by site, with the gradient of the lattice form, ``-J nb_i(x) - h``
(``nb`` the neighbour sum, periodic or open), together with the energy differences.
An energy that differs from the form as a function of real states (any extra term,
any site-dependent coefficient, a different graph) fails the comparison at random
points with probability one; the tolerance is ``1e-4`` of the largest field.  The
perturbation (Gaussian, of the parameters' own scale) keeps a coincidence of the given
values (e.g. a per-site field array initialised to zeros) from passing: the
parameters must give a uniform lattice energy for all values, as the structure
probes of :mod:`ugm_infer.structure` assume for interaction graphs.

Coefficients (:func:`coefficients`, traceable): with ``0`` the all-zero state, ``e_0``
site ``(0, 0)`` set to 1 and ``e_{01}`` sites ``(0, 0)`` and ``(0, 1)`` set to 1 (real
arguments of the energy polynomial),

.. math::  h = E(0) - E(e_0), \qquad J = 2 E(e_0) - E(0) - E(e_{01}).
"""

from __future__ import annotations

import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Spin
from ugm_infer.structure import _host_rng, _perturb_params, _strong, is_smooth_in_state

__all__ = ["lattice_form", "lattice_logdensity", "coefficients", "neighbour_sum"]

_FORMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_RTOL = 1e-4


def neighbour_sum(x: jax.Array, periodic: bool) -> jax.Array:
    """Sum of the four nearest neighbours of every site of ``(..., H, W)`` (0 past an open edge)."""
    if periodic:
        return jnp.roll(x, 1, -2) + jnp.roll(x, -1, -2) + jnp.roll(x, 1, -1) + jnp.roll(x, -1, -1)
    pad = [(0, 0)] * (x.ndim - 2)
    rows = jnp.pad(x[..., :-1, :], pad + [(1, 0), (0, 0)]) + jnp.pad(x[..., 1:, :], pad + [(0, 1), (0, 0)])
    cols = jnp.pad(x[..., :, :-1], pad + [(0, 0), (1, 0)]) + jnp.pad(x[..., :, 1:], pad + [(0, 0), (0, 1)])
    return rows + cols


def _candidate(model) -> tuple[str, tuple[int, int], str] | None:
    """``(name, shape, domain)`` when the model has the right kind of variable, else ``None``."""
    # ``ui.models.lattice_ising`` (marked, so that kernels need not import the models) has its own fast path
    if getattr(model, "is_uniform_lattice_ising", False) or len(model.variables) != 1:
        return None
    name, domain = next(iter(model.variables.items()))
    if not isinstance(domain, (Binary, Spin)) or len(domain.shape) != 2:
        return None
    height, width = domain.shape
    if height % 2 or width % 2 or height < 2 or width < 2:
        return None
    return name, (height, width), "spin" if isinstance(domain, Spin) else "binary"


def coefficients(model, params: Any, name: str, shape: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
    """``(J, h)`` of a lattice-form energy at ``params`` (may be traced): three energy evaluations."""
    zero = jnp.zeros(shape, jnp.float32)
    one = zero.at[0, 0].set(1.0)
    two = one.at[0, 1].set(1.0)
    e0, e1, e2 = (model.energy(params, {name: x}).astype(jnp.float32) for x in (zero, one, two))
    return 2.0 * e1 - e0 - e2, e0 - e1


def _matches(model, params, name, shape, rng) -> set[bool]:
    """The boundary conditions (``periodic`` values) under which the energy has the lattice form at ``params``."""
    J, h = (float(v) for v in coefficients(model, params, name, shape))
    energy = jax.jit(lambda x: model.energy(params, {name: x}).astype(jnp.float32))
    grad = jax.jit(jax.grad(lambda x: model.energy(params, {name: x}).astype(jnp.float32)))
    e0 = float(energy(jnp.zeros(shape, jnp.float32)))
    scale = 4.0 * abs(J) + abs(h) + 1e-6
    found = {True, False}
    for _ in range(2):
        x = jnp.asarray(rng.uniform(-1.0, 1.0, size=shape), jnp.float32)
        g = np.asarray(grad(x), np.float64)
        e = float(energy(x)) - e0
        for periodic in tuple(found):
            nb = np.asarray(neighbour_sum(x, periodic), np.float64)
            expected = -J * nb - h
            pair = 0.5 * float(np.sum(np.asarray(x, np.float64) * nb))
            expected_e = -J * pair - h * float(np.sum(np.asarray(x, np.float64)))
            size = x.size
            if np.max(np.abs(g - expected)) > _RTOL * scale or abs(e - expected_e) > _RTOL * scale * size:
                found.discard(periodic)
    return found


def lattice_form(model, params: Any = None) -> tuple[int, int, bool, str] | None:
    """``(height, width, periodic, domain)`` if ``model``'s energy has the lattice form, else ``None``.

    Probed once per model with concrete ``params`` (see the module docstring) and
    remembered; with ``params=None`` or traced parameters only a remembered answer is
    returned (``None`` if the model was never probed).  ``ui.models.lattice_ising``
    models are not probed (they carry their own fast path).
    """
    if model in _FORMS:
        return _FORMS[model]
    candidate = _candidate(model)
    if candidate is None:
        return None
    if params is None or any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(params)):
        return None
    name, shape, domain = candidate
    form = None
    try:
        if is_smooth_in_state(model.energy_fn, params, model.variables):
            rng = _host_rng(jax.random.key(0))
            boundaries = _matches(model, _strong(params), name, shape, rng)
            boundaries &= _matches(model, _strong(_perturb_params(rng, params)), name, shape, rng)
            if len(boundaries) == 1:
                periodic = boundaries.pop()
                if not periodic or min(shape) >= 4:
                    form = (shape[0], shape[1], periodic, domain)
    except (TypeError, ValueError, FloatingPointError):  # an energy the probe cannot evaluate: no fast path
        form = None
    _FORMS[model] = form
    return form


def lattice_logdensity(model, params: Any, beta: Any, form: tuple, fn):
    """``fn`` (the model's log-density at ``params``, ``beta``) as a lattice log-density.

    A :class:`~ugm_infer.kernels.checkerboard.LatticeLogDensity` with ``J`` and ``h``
    from :func:`coefficients`, so the block Gibbs kernel runs the four-sub-lattice sweep.
    """
    from ugm_infer.kernels.checkerboard import LatticeLogDensity

    height, width, periodic, domain = form
    name = next(iter(model.variables))
    J, h = coefficients(model, params, name, (height, width))
    scale = 2.0 if domain == "spin" else 1.0

    def site_logits(position):
        x = jnp.asarray(position[name]).astype(jnp.float32)
        return {name: (scale * beta) * (J * neighbour_sum(x, periodic) + h)}

    return LatticeLogDensity(fn, site_logits, J, h, beta, form, name=name)
