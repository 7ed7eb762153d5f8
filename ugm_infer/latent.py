"""Latent variables given the visibles: the split, the clamped model and its mean-field approximation.

A model's variables are split into *visible* ones (the data provides them) and
*latent* ones (summed out).  Given one visible configuration :math:`v`, the latents
follow

.. math::  p(h \\mid v, \\theta) \\propto e^{-E(\\theta, v, h)},

an energy model of its own (:func:`conditional_model`), which exact enumeration,
Gibbs sampling and AIS can run on.  :func:`mean_field` approximates it by a product
of independent units, the naive mean-field E-step (Peterson and Anderson 1987;
Salakhutdinov and Hinton 2009, section 3.1).

Mean field.  The stationarity conditions of the variational bound are the fixed-point
equations

.. math::  \\mu_j = \\sigma\\big(-\\partial E / \\partial h_j \\,|_{(v, \\mu)}\\big)
           \\quad \\text{(binary)}, \\qquad
           \\mu_j = \\tanh\\big(-\\partial E / \\partial h_j \\,|_{(v, \\mu)}\\big)
           \\quad \\text{(spins)},

with the "field" :math:`-\\partial E / \\partial h_j` evaluated at the means.  For
energies affine in each unit (every pairwise/bilinear model: RBMs, DBMs, grids) this
field equals :math:`\\mathbb E_q[E(h_j = 0) - E(h_j = 1)]` exactly, so the update is
the exact coordinate ascent of the bound; for a DBM it is Salakhutdinov and Hinton's
layer-wise update (2009, eq. 6).  Units of one block of the model are updated
together, blocks in turn (a Gauss-Seidel sweep); sweeps of damped updates
:math:`\\mu \\leftarrow (1 - \\lambda) \\mu + \\lambda\\, \\mu^{\\text{new}}`
(``damping`` :math:`= 1 - \\lambda`) repeat until the largest change of a mean is
below ``tol`` or ``max_iterations`` sweeps are done.  When the latents are
conditionally independent given the visibles (an RBM) one sweep gives the exact
posterior means.

Learners (:mod:`ugm_infer.learn`) and estimators (:mod:`ugm_infer.smc`) both build on
these pieces, so they live in the core, next to the model.

References
----------
Peterson, C. and Anderson, J. R. (1987). A mean field theory learning algorithm for
neural networks. Complex Systems 1, 995-1019.
Welling, M. and Hinton, G. E. (2002). A new learning algorithm for mean field
Boltzmann machines. ICANN.
Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS
(section 3.1, eq. 6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Spin
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import check_int

__all__ = ["MeanFieldInfo", "conditional_model", "latent_names", "mean_field", "resolve_visible"]


def _check_model(model: Any) -> None:
    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


def _is_concrete(tree: Any) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def resolve_visible(model: Any, visible: Any = None) -> tuple[str, ...]:
    """The names of the visible (data) variables, in the model's declaration order.

    ``visible=None`` means: the model's ``visible`` attribute if it has one, otherwise
    every variable that the model does not sum out analytically (the keys of
    ``model.free_energy_fns`` are latent, e.g. ``"h"`` of an RBM), i.e. all variables
    of a fully visible model; a ``ValueError`` when that leaves nothing (a model with
    free energies for every variable).  Pass ``visible=("v",)`` (names or one name)
    to declare latent variables of a model without free energies.
    """
    if visible is None:
        visible = getattr(model, "visible", None)
        if visible is None:
            visible = tuple(n for n in model.variables if n not in model.free_energy_fns)
            if not visible:
                raise ValueError(
                    f"model '{model.name}' has free energies for every variable ({sorted(model.free_energy_fns)}), so "
                    "the visible ones cannot be guessed: pass `visible=` (e.g. visible='v' for an RBM)"
                )
    if isinstance(visible, str):
        visible = (visible,)
    try:
        names = tuple(visible)
    except TypeError as err:
        raise TypeError(f"`visible` must be a variable name or a sequence of names, got {visible!r}") from err
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"`visible` must contain variable names (str), got {n!r}")
    unknown = [n for n in names if n not in model.variables]
    if unknown:
        raise ValueError(f"`visible` names unknown variable(s) {unknown}; the model has {list(model.variables)}")
    if len(set(names)) != len(names):
        raise ValueError(f"`visible` lists a variable more than once: {list(names)}")
    if not names:
        raise ValueError("`visible` must name at least one variable (the data cannot be empty)")
    return tuple(n for n in model.variables if n in names)


def latent_names(model: Any, visible: tuple[str, ...]) -> tuple[str, ...]:
    """The variables not in ``visible``, in declaration order."""
    return tuple(n for n in model.variables if n not in visible)


def _with_structure(model: Any, params: Any) -> Any:
    if not model.has_structure:
        if params is None or not _is_concrete(params):
            raise ValueError(
                f"model '{model.name}' needs its blocks, which are probed from concrete parameters: "
                "call learner.init(rng_key, params) outside jit first, or declare blocks="
            )
        model.detect_structure(params)
    return model


def conditional_model(model: Any, visible: tuple[str, ...], params: Any = None, scan: str = "block") -> EnergyModel:
    """The model of the latent variables given the visibles, ``p(h | v)``.

    An :class:`~ugm_infer.EnergyModel` over the latent variables whose parameters are
    the pair ``(params, v)`` (``v`` one visible configuration) and whose energy is
    ``E(params, (v, h))``.  Its blocks are the model's blocks restricted to the latent
    sites (sites that are conditionally independent in the full model stay so given
    the visibles), so block Gibbs keeps its parallel updates and exact enumeration can
    sum non-interacting latents analytically.  Probing the model's structure needs
    concrete ``params`` when the model declares none.
    """
    latent = latent_names(model, visible)
    model = _with_structure(model, params)
    blocks = []
    for block in model.blocks:
        sel = {n: block.indices[n] for n in latent if n in block.indices}
        if sel:
            blocks.append(sel)
    return EnergyModel(
        lambda pv, h: model.energy(pv[0], {**pv[1], **h}),
        {n: model.variables[n] for n in latent},
        blocks if scan == "block" else None,
        multilinear=model.multilinear,
        name=f"{model.name}|{','.join(visible)}",
    )


# ----------------------------------------------------------------------------------
# naive mean field
# ----------------------------------------------------------------------------------
class MeanFieldInfo(NamedTuple):
    """Diagnostics of a mean-field solve (per datum when batched).

    num_iterations
        Sweeps done (int32).
    max_change
        Largest absolute change of a mean in the last sweep.
    converged
        ``max_change < tol``.
    """

    num_iterations: jax.Array
    max_change: jax.Array
    converged: jax.Array


def _check_float(value: Any, argname: str, low: float, high: float, *, closed_high: bool) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{argname}` must be a float, got {type(value).__name__}") from err
    ok = low <= out < high or (closed_high and out == high)
    if not np.isfinite(out) or not ok:
        bracket = "]" if closed_high else ")"
        raise ValueError(f"`{argname}` must be in [{low}, {high}{bracket}, got {value!r}")
    return out


def _latent_blocks(model: Any, latent: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """The model's blocks restricted to the latent variables (boolean masks per variable)."""
    if not model.has_structure:
        raise ValueError(
            f"model '{model.name}' has no declared blocks: call model.detect_structure(params) first "
            "(mean field updates the units of one block together)"
        )
    out = []
    for block in model.blocks:
        sel = {n: np.asarray(block.masks[n]) for n in latent if n in block.masks}
        if sel:
            out.append(sel)
    return out


def _check_mean_field_model(model: Any, latent: tuple[str, ...], visible: tuple[str, ...]) -> None:
    if not latent:
        raise ValueError(f"model '{model.name}' has no latent variables given visible={list(visible)}")
    for n in latent:
        if not isinstance(model.variables[n], (Binary, Spin)):
            raise ValueError(f"mean field needs Binary or Spin latent variables; '{n}' is {model.variables[n]!r}")


def mean_field(
    model: Any,
    visible: Any = None,
    *,
    damping: float = 0.0,
    tol: float = 1e-5,
    max_iterations: int = 100,
) -> Callable:
    """Naive mean-field fixed point :math:`q(h \\mid v) = \\prod_j q_j(h_j)` (see the module docstring).

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel` with ``multilinear=True`` and known blocks,
        latent variables Binary or Spin.
    visible
        The observed variables (default ``model.visible``, see :func:`resolve_visible`).
    damping
        Fraction of the old mean kept at each update, in ``[0, 1)`` (0: plain
        fixed-point iteration).
    tol
        Convergence threshold on the largest change of a mean in one sweep (> 0).
    max_iterations
        Maximum number of sweeps (a positive int).

    Returns
    -------
    ``solve(params, v, init_means=None) -> (means, MeanFieldInfo)`` for ONE datum
    ``v = {visible name: array}`` (vmap it over a batch).  ``means`` is
    ``{latent name: array}`` (probabilities of 1 for binary units, expected spins for
    spins); ``init_means`` defaults to 0.5 (binary) / 0 (spins).
    """
    _check_model(model)
    visible = resolve_visible(model, visible)
    latent = latent_names(model, visible)
    _check_mean_field_model(model, latent, visible)
    blocks = _latent_blocks(model, latent)
    if not model.multilinear:
        raise ValueError(f"mean field needs an energy affine in each unit (multilinear=True); model '{model.name}' is not")
    damping = _check_float(damping, "damping", 0.0, 1.0, closed_high=False)
    tol = _check_float(tol, "tol", 0.0, np.inf, closed_high=False)
    if tol <= 0:
        raise ValueError(f"`tol` must be > 0, got {tol}")
    max_iterations = check_int(max_iterations, "max_iterations")
    is_spin = {n: isinstance(model.variables[n], Spin) for n in latent}

    def default_means(v):
        dt = jnp.result_type(jnp.asarray(jax.tree.leaves(v)[0]).dtype, jnp.float32)
        return {n: jnp.full(model.variables[n].shape, 0.0 if is_spin[n] else 0.5, dt) for n in latent}

    def solve(params, v, init_means=None):
        means = default_means(v) if init_means is None else {n: jnp.asarray(init_means[n]) for n in latent}
        dt = jax.tree.leaves(means)[0].dtype
        means = {n: x.astype(dt) for n, x in means.items()}
        v = {n: jnp.asarray(v[n]) for n in visible}
        lam = 1.0 - damping

        def field(mu):
            return jax.tree.map(jnp.negative, jax.grad(lambda m: model.energy(params, {**v, **m}))(mu))

        def sweep(mu):
            for blk in blocks:
                f = field(mu)
                new = {}
                for n in latent:
                    if n not in blk:
                        new[n] = mu[n]
                        continue
                    target = jnp.tanh(f[n]) if is_spin[n] else jax.nn.sigmoid(f[n])
                    upd = (1.0 - lam) * mu[n] + lam * target.astype(dt)
                    new[n] = jnp.where(blk[n], upd, mu[n])
                mu = new
            return mu

        def cond(carry):
            _, it, change = carry
            return (it < max_iterations) & (change >= tol)

        def body(carry):
            mu, it, _ = carry
            new = sweep(mu)
            change = jnp.max(jnp.stack([jnp.max(jnp.abs(new[n] - mu[n])) for n in latent]))
            return new, it + 1, change

        mu, it, change = jax.lax.while_loop(cond, body, (means, jnp.int32(0), jnp.asarray(jnp.inf, dt)))
        return mu, MeanFieldInfo(it, change, change < tol)

    return solve
