"""CRF names under ``ugm_infer.models.crf``: a facade of :mod:`ugm_infer.applications.crf.model`.

The CRF application (models, prediction and conditional learners) lives in
:mod:`ugm_infer.applications.crf`; this module re-exports the model names on first use,
so ``from ugm_infer.models.crf import grid_crf`` keeps working without the core
importing the application.
"""

from ugm_infer._lazy import reexport

__getattr__, __dir__ = reexport(__name__, ("ugm_infer.applications.crf.model",))
