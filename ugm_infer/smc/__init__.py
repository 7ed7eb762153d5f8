"""Partition-function estimators: tempered SMC (on BlackJAX) and annealed importance sampling.

=====================================  ===============================================================
:func:`tempered_smc`                   adaptive (ESS) or fixed-schedule tempered SMC, replicated;
                                       ``log Z`` with a standard error
:func:`ais`                            forward AIS (stochastic lower bound on ``log Z``), optional
                                       closed-form sum over a non-interacting layer (RBM hiddens)
:func:`reverse_ais`                    reverse AIS from samples of ``p`` (stochastic upper bound when
                                       the samples are exact)
:func:`ais_log_likelihood`             average log-likelihood ``-F(x) - log Z`` with AIS ``log Z``
:func:`ais_latent_log_likelihood`      log p(v) for models with interacting latent layers (DBMs, grids
                                       with hidden units): AIS log Z + mean-field bound or per-datum AIS
:func:`ais_schedule`                   beta schedules (Salakhutdinov & Murray 2008, linear, sigmoid)
:func:`tempered_free_energy`           ``-log sum_h exp(-beta E(x, h))`` for a non-interacting ``h``
=====================================  ===============================================================

All estimators anneal along the geometric path from a normalised base distribution
(uniform, Laplace-smoothed data base rates, or user logits) to ``exp(-E)``; see
:mod:`ugm_infer.smc._paths`.
"""

from ugm_infer.smc._paths import tempered_free_energy
from ugm_infer.smc.ais import (
    AISResult,
    LatentLogLikelihoodResult,
    LogLikelihoodResult,
    ais,
    ais_latent_log_likelihood,
    ais_log_likelihood,
    ais_schedule,
    reverse_ais,
)
from ugm_infer.smc.tempered import RESAMPLING, TemperedSMCResult, tempered_smc

__all__ = [
    "AISResult",
    "LatentLogLikelihoodResult",
    "LogLikelihoodResult",
    "RESAMPLING",
    "TemperedSMCResult",
    "ais",
    "ais_latent_log_likelihood",
    "ais_log_likelihood",
    "ais_schedule",
    "reverse_ais",
    "tempered_free_energy",
    "tempered_smc",
]
