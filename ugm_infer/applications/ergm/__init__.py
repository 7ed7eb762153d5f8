"""Exponential random graph models (ERGMs) for undirected graphs.

An ERGM is the exponential family :math:`p(y \\mid \\theta) \\propto \\exp(\\theta^\\top g(y))`
over the dyads ``y`` of a graph, with statnet's statistics (edges, k-stars, triangles,
GWESP, GWD).  The application is four modules:

:mod:`~ugm_infer.applications.ergm.model`
    the statistics, change statistics, energy and :class:`ERGM` (an
    :class:`~ugm_infer.EnergyModel`), built by :func:`ergm`;
:mod:`~ugm_infer.applications.ergm.sampler`
    the edge-toggle kernel :data:`ergm_toggle` (BlackJAX API; any learner of
    :mod:`ugm_infer.learn` accepts it as ``kernel=``);
:mod:`~ugm_infer.applications.ergm.simulation`
    :func:`ergm_simulate`, many toggle chains at once;
:mod:`~ugm_infer.applications.ergm.estimation`
    :func:`ergm_mple` (maximum pseudo-likelihood) and :func:`ergm_mcmc_mle`
    (Geyer-Thompson MCMC-MLE as statnet iterates it).

Every name is also available as ``ui.models.<name>``.
"""

from ugm_infer.applications.ergm.estimation import MAX_ABS_MPLE, MCMCMLEResult, MPLEResult, ergm_mcmc_mle, ergm_mple
from ugm_infer.applications.ergm.model import ERGM, ERGMLogDensity, change_stats, ergm, from_adjacency, to_adjacency
from ugm_infer.applications.ergm.sampler import ERGMToggleInfo, ERGMToggleState, ergm_toggle
from ugm_infer.applications.ergm.simulation import ergm_simulate

__all__ = [
    "ERGM",
    "ERGMLogDensity",
    "ERGMToggleState",
    "ERGMToggleInfo",
    "MPLEResult",
    "MCMCMLEResult",
    "MAX_ABS_MPLE",
    "ergm",
    "to_adjacency",
    "from_adjacency",
    "change_stats",
    "ergm_toggle",
    "ergm_simulate",
    "ergm_mple",
    "ergm_mcmc_mle",
]
