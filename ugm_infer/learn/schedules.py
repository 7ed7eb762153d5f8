"""Step-size schedules and optimizer helpers for stochastic approximation.

A schedule is an optax schedule: a jittable callable ``count -> learning rate``, where
``count`` is the number of updates done so far (``0`` for the first update); pass it
as ``optax.sgd(learning_rate=schedule)``.

Stochastic approximation (Robbins and Monro 1951; Younes 1988) converges when the
step sizes :math:`a_t` satisfy

.. math::  \\sum_t a_t = \\infty, \\qquad \\sum_t a_t^2 < \\infty

(the first so the iterates can travel any distance, the second so the Monte-Carlo
noise averages out).  A constant step size violates the second condition: the
iterates then fluctuate around the optimum with a spread that scales like
:math:`\\sqrt{a}`.

Momentum and weight decay are optax transformations (see :func:`sgd`)::

    optax.chain(optax.add_decayed_weights(weight_decay),
                optax.sgd(learning_rate=robbins_monro(10.0, 1000.0), momentum=0.9))

References
----------
Robbins, H. and Monro, S. (1951). A stochastic approximation method. Ann. Math.
Statist. 22(3), 400-407.
Younes, L. (1988). Estimation and annealing for Gibbsian fields. Ann. IHP 24, 269-294.
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered transitions.
NIPS 22.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["robbins_monro", "constant_then_robbins_monro", "sgd"]


def _positive_float(value: Any, argname: str, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{argname}` must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"`{argname}` must be a finite {'non-negative' if allow_zero else 'positive'} number, got {value}")
    return value


def robbins_monro(a: float, b: float):
    """Robbins-Monro step sizes :math:`a_t = a / (b + t)`, ``t`` = number of updates done.

    Satisfies :math:`\\sum_t a_t = \\infty` and :math:`\\sum_t a_t^2 < \\infty`, the
    conditions under which stochastic approximation converges.  The first step is
    ``a / b``; ``b`` sets how long the steps stay near that value (about ``b``
    updates) before the ``1/t`` decay takes over.

    Parameters
    ----------
    a, b
        Positive numbers.

    Returns
    -------
    A jittable optax schedule ``count -> a / (b + count)`` (float32).

    Examples
    --------
    >>> import ugm_infer as ui
    >>> schedule = ui.learn.robbins_monro(10.0, 1000.0)
    >>> float(schedule(0)), float(schedule(1000))
    (0.009999999776482582, 0.004999999888241291)
    """
    a = _positive_float(a, "a")
    b = _positive_float(b, "b")

    def schedule(count):
        return jnp.asarray(a, jnp.float32) / (b + jnp.asarray(count, jnp.float32))

    return schedule


def constant_then_robbins_monro(constant: float, num_constant: int, a: float, b: float, *, restart: bool = True):
    """A constant step size for ``num_constant`` updates, then Robbins-Monro decay.

    .. math::  a_t = \\begin{cases} c & t < T \\\\ a / (b + t - T) & t \\ge T
               \\end{cases}  \\qquad (\\texttt{restart=True})

    or :math:`a / (b + t)` for :math:`t \\ge T` with ``restart=False`` (``t`` counted
    from the first update).  ``t`` is the number of updates done so far.

    Salakhutdinov (2009) trains with a learning rate of 0.01 that is then decreased as
    :math:`10 / (1000 + t)`: ``constant_then_robbins_monro(0.01, T, 10.0, 1000.0)``.
    The paper does not spell out (in the text this library follows) whether ``t``
    restarts at the switch; with ``restart=True`` (the default) the schedule is
    continuous there, since :math:`10 / 1000 = 0.01`, which is why it is the default.
    With ``restart=False`` and a long constant phase the step size drops abruptly at
    the switch (to :math:`10 / (1000 + T)`).  Either way the tail satisfies
    :math:`\\sum_t a_t = \\infty`, :math:`\\sum_t a_t^2 < \\infty`.

    Parameters
    ----------
    constant
        The initial step size ``c`` (positive).
    num_constant
        Number ``T >= 0`` of updates at the constant step size.
    a, b
        Robbins-Monro constants (positive).
    restart
        Whether ``t`` restarts from 0 at the switch (default) or counts globally.

    Returns
    -------
    A jittable optax schedule ``count -> step size`` (float32).

    Examples
    --------
    >>> import ugm_infer as ui
    >>> schedule = ui.learn.constant_then_robbins_monro(0.01, 100, 10.0, 1000.0)
    >>> [round(float(schedule(t)), 6) for t in (0, 99, 100, 1100)]
    [0.01, 0.01, 0.01, 0.005]
    """
    constant = _positive_float(constant, "constant")
    if isinstance(num_constant, bool) or not isinstance(num_constant, (int, np.integer)) or num_constant < 0:
        raise ValueError(f"`num_constant` must be a non-negative int, got {num_constant!r}")
    a = _positive_float(a, "a")
    b = _positive_float(b, "b")
    offset = float(num_constant) if restart else 0.0

    def schedule(count):
        t = jnp.asarray(count, jnp.float32)
        decayed = a / (b + jnp.maximum(t - offset, 0.0))
        return jnp.where(t < num_constant, jnp.asarray(constant, jnp.float32), decayed.astype(jnp.float32))

    return schedule


def sgd(learning_rate: Any = 0.01, *, momentum: float | None = None, weight_decay: float = 0.0, nesterov: bool = False):
    """SGD with optional momentum and weight decay, as an optax transformation.

    ``optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate,
    momentum, nesterov))``.  Learners hand optax the negated ascent direction, so weight
    decay adds ``weight_decay * params`` to the minimised gradient: the learner then
    maximises :math:`\\ell(\\theta) - \\tfrac{\\lambda}{2} \\lVert\\theta\\rVert^2` (it
    shrinks every parameter, biases included; wrap it in ``optax.masked`` to exempt
    some).  With momentum :math:`\\mu` the effective step size is about
    :math:`a_t / (1 - \\mu)`.

    Parameters
    ----------
    learning_rate
        A float or an optax schedule (e.g. :func:`robbins_monro`).
    momentum
        ``None`` (no momentum) or a number in ``[0, 1)``.
    weight_decay
        L2 penalty coefficient ``>= 0``.
    nesterov
        Nesterov momentum.
    """
    if not callable(learning_rate):
        _positive_float(learning_rate, "learning_rate")
    if momentum is not None:
        momentum = _positive_float(momentum, "momentum", allow_zero=True)
        if momentum >= 1:
            raise ValueError(f"`momentum` must be in [0, 1), got {momentum}")
    weight_decay = _positive_float(weight_decay, "weight_decay", allow_zero=True)
    opt = optax.sgd(learning_rate=learning_rate, momentum=momentum, nesterov=nesterov)
    if weight_decay == 0:
        return opt
    return optax.chain(optax.add_decayed_weights(weight_decay), opt)
