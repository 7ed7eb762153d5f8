r"""Annealing schedules that follow the thermodynamic length measured in a pilot run.

For slow annealing the variance of the AIS log-weights is, to leading order,

.. math::  \sigma^2 \approx \sum_k \Delta\beta_k^2 \, \zeta(\beta_k), \qquad
           \zeta(\beta) = 2\,\tau_E(\beta)\,\mathrm{Var}_\beta(E),

a "friction" that combines the energy's variance with the autocorrelation time
:math:`\tau_E` (in steps) of the moves at :math:`\beta` (Sivak and Crooks 2012, eq. 3;
the log-weight is minus the dissipated work).  For a fixed number of steps
:math:`K` the sum is smallest when each step contributes equally, i.e. when the betas
are spaced with density :math:`\propto \sqrt{\zeta(\beta)}`, and then
:math:`\sigma^2 \approx \Lambda^2 / K` with the thermodynamic length
:math:`\Lambda = \int_0^1 \sqrt{\zeta(\beta)}\, d\beta` (Crooks 2007; Sivak and Crooks
2012).  A linear schedule gives :math:`\int \zeta / K \ge \Lambda^2 / K`; near a
critical point, where :math:`\zeta` is sharply peaked (the variance *and* the
autocorrelation time grow), the difference is large.

:func:`thermodynamic_schedule` estimates :math:`\zeta` from a pilot run: the across-run
variance :math:`V_k` of the cumulative log-weights after each step (``AISResult.
log_weight_variance`` of :func:`~ugm_infer.smc.multispin_ais`) grows by
:math:`\approx \delta_k\, \zeta(\beta_k)\, \Delta\beta` over a stretch
:math:`\Delta\beta` of steps :math:`\delta_k`; the growth is averaged over ``num_bins``
bins of equally many pilot steps, and the new schedule puts equal length
:math:`\int \sqrt\zeta\, d\beta` between consecutive betas.  Only the shape of
:math:`\zeta` matters, so the pilot may be short and have few runs.

References
----------
Crooks, G. E. (2007). Measuring thermodynamic length. Phys. Rev. Lett. 99, 100602.
Sivak, D. A. and Crooks, G. E. (2012). Thermodynamic metrics and optimal paths.
Phys. Rev. Lett. 108, 190602.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ugm_infer.smc import _paths

__all__ = ["ThermodynamicSchedule", "thermodynamic_schedule"]


class ThermodynamicSchedule(NamedTuple):
    """Result of :func:`thermodynamic_schedule`.

    betas
        The new schedule, ``num_betas`` float64 values strictly increasing from 0 to 1.
    friction
        ``(num_bins,)`` estimated :math:`\\zeta` on the pilot's bins (per unit beta).
    bin_edges
        ``(num_bins + 1,)`` the bins' beta edges.
    length
        The estimated thermodynamic length :math:`\\Lambda`; the predicted variance of
        the log-weights with ``K = num_betas - 1`` steps is ``length**2 / K`` (and for
        the linear schedule ``linear_variance_times_steps / K``).
    linear_variance_times_steps
        :math:`\\int_0^1 \\zeta\\, d\\beta`: ``K`` times the predicted log-weight variance of
        a linear schedule of ``K`` steps, for comparison (``>= length**2``).
    """

    betas: np.ndarray
    friction: np.ndarray
    bin_edges: np.ndarray
    length: float
    linear_variance_times_steps: float


def thermodynamic_schedule(
    pilot_betas: Any,
    log_weight_variance: Any,
    num_betas: int,
    *,
    num_bins: int | None = None,
    floor: float = 1e-3,
) -> ThermodynamicSchedule:
    r"""A schedule with density :math:`\propto \sqrt{\zeta(\beta)}`, :math:`\zeta` measured in a pilot run.

    Parameters
    ----------
    pilot_betas
        The pilot's schedule (``K + 1`` betas from 0 to 1).
    log_weight_variance
        ``(K,)`` the across-run variance of the cumulative log-weights after each of
        the pilot's steps (``AISResult.log_weight_variance``).
    num_betas
        Betas of the new schedule (both ends included, >= 2).
    num_bins
        Bins of equally many pilot steps over which the variance growth is averaged
        (fewer bins: less noise, coarser shape); at most ``K``, default ``min(50, K)``.
    floor
        The friction of every bin is raised to at least ``floor`` times the mean
        friction, so no stretch of the path is skipped because the pilot's variance
        happened not to grow there.

    Returns
    -------
    :class:`ThermodynamicSchedule`.

    Raises
    ------
    ValueError
        A bad pilot schedule, a variance array of the wrong length or with NaN or
        negative values, a variance that never grows, or bad ``num_betas`` /
        ``num_bins`` / ``floor``.

    Examples
    --------
    >>> import numpy as np, ugm_infer as ui
    >>> pilot = np.linspace(0.0, 1.0, 101)
    >>> var = np.cumsum(np.where(pilot[1:] > 0.5, 4.0, 1.0)) * 0.01  # friction 4x higher above 0.5
    >>> sched = ui.smc.thermodynamic_schedule(pilot, var, 31, num_bins=10)
    >>> int(np.sum(sched.betas > 0.5)), int(np.sum(sched.betas <= 0.5))  # 2x denser above 0.5
    (20, 11)
    """
    betas = _paths.check_schedule(pilot_betas, "pilot_betas")
    num_steps = betas.size - 1
    num_betas = _paths.check_positive_int(num_betas, "num_betas", minimum=2)
    num_bins = min(50, num_steps) if num_bins is None else _paths.check_positive_int(num_bins, "num_bins")
    if num_bins > num_steps:
        raise ValueError(f"`num_bins` must be at most the pilot's number of steps ({num_steps}), got {num_bins}")
    if isinstance(floor, bool) or not isinstance(floor, (int, float, np.floating)) or not 0.0 <= floor < 1.0:
        raise ValueError(f"`floor` must be a float in [0, 1), got {floor!r}")
    var = np.asarray(log_weight_variance, dtype=np.float64)
    if var.shape != (num_steps,):
        raise ValueError(f"`log_weight_variance` must have shape ({num_steps},) (one value per pilot step), got {var.shape}")
    if not np.all(np.isfinite(var)) or np.any(var < 0):
        raise ValueError("`log_weight_variance` must be finite and >= 0")
    # cumulative variance at every pilot beta; a running maximum removes sampling dips
    cum = np.concatenate([[0.0], np.maximum.accumulate(var)])
    idx = np.unique(np.round(np.linspace(0, num_steps, num_bins + 1)).astype(int))
    edges = betas[idx]
    widths = np.diff(edges)
    steps_per_bin = np.diff(idx)
    growth = np.diff(cum[idx])
    if not np.any(growth > 0):
        raise ValueError("`log_weight_variance` never grows: the pilot gives no information on the friction")
    # growth over a bin ~ (width / n) * zeta * width  ->  zeta ~ growth * n / width^2
    friction = growth * steps_per_bin / widths**2
    mean_friction = np.sum(friction * widths)
    friction = np.maximum(friction, floor * mean_friction)
    speed = np.sqrt(friction)
    length_at_edges = np.concatenate([[0.0], np.cumsum(speed * widths)])
    length = float(length_at_edges[-1])
    new = np.interp(np.linspace(0.0, length, num_betas), length_at_edges, edges)
    new[0], new[-1] = 0.0, 1.0
    if np.any(np.diff(new) <= 0):  # pragma: no cover - interp of a strictly increasing map
        raise RuntimeError("the adapted schedule is not strictly increasing")
    return ThermodynamicSchedule(new, friction, edges, length, float(np.sum(friction * widths)))
