"""ERGM names under ``ugm_infer.models.ergm``: a facade of :mod:`ugm_infer.applications.ergm`.

The ERGM application (model, edge-toggle sampler, simulation, MPLE and MCMC-MLE)
lives in :mod:`ugm_infer.applications.ergm`; this module re-exports its names on
first use, so ``from ugm_infer.models.ergm import ergm, ergm_mple`` keeps working
without the core importing the application.
"""

from ugm_infer._lazy import reexport

__getattr__, __dir__ = reexport(
    __name__,
    (
        "ugm_infer.applications.ergm",
        "ugm_infer.applications.ergm.model",
        "ugm_infer.applications.ergm.sampler",
        "ugm_infer.applications.ergm.simulation",
        "ugm_infer.applications.ergm.estimation",
    ),
)
