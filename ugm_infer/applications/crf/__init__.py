"""Conditional random fields: models whose potentials depend on inputs, and prediction.

:mod:`~ugm_infer.applications.crf.model`
    :class:`CRF` (an :class:`~ugm_infer.EnergyModel` over the labels, conditioned on
    one input by ``model.condition(theta, x)``), :func:`crf`, :func:`pairwise_crf`,
    :func:`grid_crf`, :func:`multilabel_crf` and :func:`difference_features`;
:mod:`~ugm_infer.applications.crf.predict`
    MAP by ICM (:func:`icm`) and simulated annealing (:func:`simulated_annealing`),
    marginal modes by sampling (:func:`max_marginals`), for any model;
:mod:`~ugm_infer.applications.crf.learners`
    learners of the conditional likelihood from (x, y) pairs (``ui.learn.conditional_*``),
    built on :mod:`ugm_infer.learn.skeleton`.

The model names are also ``ui.models.<name>``, the prediction names ``ui.predict.<name>``.
"""

from ugm_infer.applications.crf.model import (
    CRF,
    RESERVED_NAMES,
    MultilabelCRF,
    PairwiseCRF,
    crf,
    difference_features,
    grid_crf,
    multilabel_crf,
    pairwise_crf,
)
from ugm_infer.applications.crf.predict import (
    ICMResult,
    MaxMarginalsResult,
    SAResult,
    geometric_betas,
    icm,
    max_marginals,
    simulated_annealing,
)

__all__ = [
    "CRF",
    "MultilabelCRF",
    "PairwiseCRF",
    "RESERVED_NAMES",
    "crf",
    "pairwise_crf",
    "grid_crf",
    "multilabel_crf",
    "difference_features",
    "ICMResult",
    "SAResult",
    "MaxMarginalsResult",
    "icm",
    "simulated_annealing",
    "max_marginals",
    "geometric_betas",
]
