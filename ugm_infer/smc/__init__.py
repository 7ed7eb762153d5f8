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
:func:`multispin_ais`                  forward AIS on the bit-packed lattice kernel (periodic
                                       ``lattice_ising``; 32 runs per ``uint32`` word)
:func:`ais_schedule`                   beta schedules (Salakhutdinov & Murray 2008, linear, sigmoid)
:func:`thermodynamic_schedule`         a schedule with equal thermodynamic length per step, from the
                                       log-weight variance of a pilot :func:`multispin_ais` run
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
from ugm_infer.smc.multispin_ais import multispin_ais
from ugm_infer.smc.tempered import RESAMPLING, TemperedSMCResult, tempered_smc
from ugm_infer.smc.thermodynamic import ThermodynamicSchedule, thermodynamic_schedule

__all__ = [
    "AISResult",
    "LatentLogLikelihoodResult",
    "LogLikelihoodResult",
    "RESAMPLING",
    "TemperedSMCResult",
    "ThermodynamicSchedule",
    "ais",
    "ais_latent_log_likelihood",
    "ais_log_likelihood",
    "ais_schedule",
    "multispin_ais",
    "reverse_ais",
    "tempered_free_energy",
    "tempered_smc",
    "thermodynamic_schedule",
]
