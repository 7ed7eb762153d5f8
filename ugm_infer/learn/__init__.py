"""Learners: maximum-likelihood (and pseudo-likelihood) fitting of energy models.

Every learner is a :class:`Learner` -- an optax-like ``init``/``step`` pair of pure
functions plus the model and the names of its visible variables -- whose parameter
updates go through any optax optimizer (see :mod:`ugm_infer.learn.base` for the
contract, and :func:`ugm_infer.fit` for the training loop).

=========================  ============================================================
:func:`sap`                stochastic approximation with any kernel (Younes 1988;
                           Salakhutdinov 2009, Alg. 1): persistent particles
:func:`pcd`                SAP with Gibbs sampling (persistent CD, Tieleman 2008)
:func:`cd`                 contrastive divergence CD-k (Hinton 2002): chains restart
                           at the data
:func:`exact_ml`           exact gradient by enumeration (ground truth, small models)
:func:`pseudo_likelihood`  maximum pseudo-likelihood (Besag 1974), fully visible models
:func:`trans_sap`          SAP with Gibbs plus a tempered-transitions run every 200
                           updates (Salakhutdinov 2009)
:func:`pt_sap`             SAP with parallel-tempering particles (Desjardins et al. 2010)
:func:`mcmc_mle`           MCMC-MLE (Geyer & Thompson 1992; Asuncion et al. 2010, Alg. 1)
:func:`pf_mcmc_mle`        particle-filtered MCMC-MLE (Asuncion et al. 2010, Alg. 2; PCD
                           as Alg. 3 with ``unit_weights=True``)
:func:`psmc`               persistent SMC: ESS-adaptive bridges between successive models
:func:`smc_learner`        standard SMC: tempered SMC from uniform at every update
:func:`conditional_sap`    CRF learners with one particle set per input (also
                           ``conditional_pcd``, ``conditional_mcmc_mle``,
                           ``conditional_pf_mcmc_mle``, ``conditional_exact_ml``);
                           defined in :mod:`ugm_infer.applications.crf.learners`
=========================  ============================================================

Schedules (:func:`robbins_monro`, :func:`constant_then_robbins_monro`) and
:func:`sgd` (momentum, weight decay) live in :mod:`ugm_infer.learn.schedules`;
positive phases (the data term with latent variables) in
:mod:`ugm_infer.learn.phases`.
"""

import importlib

from ugm_infer.learn.apcd import APCDInfo, APCDState, apcd, power_decay
from ugm_infer.learn.base import Learner
from ugm_infer.learn.cd import CDInfo, CDState, cd
from ugm_infer.learn.exact_ml import ExactMLInfo, ExactMLState, exact_average_log_likelihood, exact_ml
from ugm_infer.learn.mcmc_mle import MCMCMLEInfo, MCMCMLEState, mcmc_mle
from ugm_infer.learn.meanfield import MeanFieldInfo, mean_field, mean_field_positive_phase, mfpcd
from ugm_infer.learn.particles import Alternate, AlternateInfo, Builder, Persistent
from ugm_infer.learn.pf_mcmc_mle import PFInfo, PFState, pf_mcmc_mle
from ugm_infer.learn.phases import PositivePhase, free_energy_positive_phase, mc_positive_phase
from ugm_infer.learn.pseudo_likelihood import (
    PseudoLikelihoodInfo,
    PseudoLikelihoodState,
    pseudo_likelihood,
    pseudo_log_likelihood,
)
from ugm_infer.learn.psmc import PSMCInfo, PSMCState, SMCLearnerInfo, SMCLearnerState, psmc, smc_learner
from ugm_infer.learn.sap import SAPInfo, SAPState, pcd, sap
from ugm_infer.learn.sbn_meanfield import (
    SBNBound,
    SBNMeanFieldInfo,
    SBNMeanFieldState,
    mean_field_bound,
    mean_field_learner,
)
from ugm_infer.learn.schedules import constant_then_robbins_monro, robbins_monro, sgd
from ugm_infer.learn.tempered import parallel_tempering_kernel, pt_sap, tempered_transitions_kernel, trans_sap

smc = smc_learner  # the name in ARCHITECTURE.md

# The CRF learners live with their application (ugm_infer.applications.crf.learners);
# they are reached from here lazily, so the core never imports the applications.
_CRF_LEARNERS = "ugm_infer.applications.crf.learners"
_CRF_NAMES = (
    "ConditionalExactMLInfo",
    "ConditionalExactMLState",
    "ConditionalMCMCMLEInfo",
    "ConditionalMCMCMLEState",
    "ConditionalPFInfo",
    "ConditionalPFState",
    "ConditionalSAPInfo",
    "ConditionalSAPState",
    "conditional_exact_ml",
    "conditional_mcmc_mle",
    "conditional_pcd",
    "conditional_pf_mcmc_mle",
    "conditional_sap",
    "exact_conditional_log_likelihood",
)


def __getattr__(name: str):
    """``ui.learn.conditional_*`` and the module ``ui.learn.conditional``, from the CRF application."""
    if name == "conditional" or name in _CRF_NAMES:
        module = importlib.import_module(_CRF_LEARNERS)
        return module if name == "conditional" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_CRF_NAMES) | {"conditional"})


__all__ = [
    *_CRF_NAMES,
    "SBNBound",
    "SBNMeanFieldInfo",
    "SBNMeanFieldState",
    "mean_field_bound",
    "mean_field_learner",
    "APCDInfo",
    "APCDState",
    "MeanFieldInfo",
    "apcd",
    "mean_field",
    "mean_field_positive_phase",
    "mfpcd",
    "power_decay",
    "MCMCMLEInfo",
    "MCMCMLEState",
    "mcmc_mle",
    "PFInfo",
    "PFState",
    "pf_mcmc_mle",
    "PSMCInfo",
    "PSMCState",
    "SMCLearnerInfo",
    "SMCLearnerState",
    "psmc",
    "smc",
    "smc_learner",
    "Alternate",
    "AlternateInfo",
    "Builder",
    "Persistent",
    "parallel_tempering_kernel",
    "pt_sap",
    "tempered_transitions_kernel",
    "trans_sap",
    "CDInfo",
    "CDState",
    "ExactMLInfo",
    "ExactMLState",
    "Learner",
    "PositivePhase",
    "PseudoLikelihoodInfo",
    "PseudoLikelihoodState",
    "SAPInfo",
    "SAPState",
    "cd",
    "constant_then_robbins_monro",
    "exact_average_log_likelihood",
    "exact_ml",
    "free_energy_positive_phase",
    "mc_positive_phase",
    "pcd",
    "pseudo_likelihood",
    "pseudo_log_likelihood",
    "robbins_monro",
    "sap",
    "sgd",
]
