"""Prediction names under ``ugm_infer.predict``: a facade of :mod:`ugm_infer.applications.crf.predict`.

MAP by ICM and simulated annealing, and marginal modes by sampling, live with the CRF
application in :mod:`ugm_infer.applications.crf.predict` (they act on any
:class:`~ugm_infer.EnergyModel`); this module re-exports them on first use.
"""

from ugm_infer._lazy import reexport

__getattr__, __dir__ = reexport(__name__, ("ugm_infer.applications.crf.predict",))
