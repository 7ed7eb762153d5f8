"""Tempered learners: Trans-SAP and PT-SAP, SAP with tempered kernels.

Both are :func:`~ugm_infer.learn.sap` with a kernel schedule of
:mod:`ugm_infer.learn.particles` and no learner code of their own:
:func:`trans_sap` runs Gibbs with one tempered-transitions run every ``gibbs_per_tt``
updates (an :class:`~ugm_infer.learn.Alternate` schedule), :func:`pt_sap` keeps a
parallel-tempering chain per particle (a :class:`~ugm_infer.learn.Persistent` kernel).

References
----------
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered
transitions. NIPS 22.
Desjardins, G., Courville, A., Bengio, Y., Vincent, P. and Delalleau, O. (2010).
Tempered Markov chain Monte Carlo for training of restricted Boltzmann machines.
AISTATS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ugm_infer.kernels.parallel_tempering import build_kernel as build_pt_kernel
from ugm_infer.kernels.parallel_tempering import init as pt_init
from ugm_infer.kernels.parallel_tempering import target_position
from ugm_infer.kernels.tempered_transitions import build_kernel as build_tt_kernel
from ugm_infer.kernels.tempered_transitions import check_ladder, uniform_ladder
from ugm_infer.kernels.tempered_transitions import init as tt_init
from ugm_infer.learn.base import check_nonnegative_int, check_positive_int
from ugm_infer.learn.particles import Alternate, Builder, Persistent  # noqa: F401 (Persistent: re-exported)
from ugm_infer.learn.sap import sap

__all__ = ["parallel_tempering_kernel", "pt_sap", "tempered_transitions_kernel", "trans_sap"]


def parallel_tempering_kernel(model, betas: Any, base_kernel: Callable | None = None, base_init=None) -> Builder:
    """A :class:`Builder` of the :class:`Persistent` parallel-tempering kernel for SAP."""
    num = len(check_ladder(betas))

    def build(params):
        kernel = build_pt_kernel(model, betas, base_kernel=base_kernel, base_init=base_init, params=params)
        return Persistent(lambda x, ld: pt_init(x, num_replicas=num), kernel, target_position)

    return Builder(build)


def tempered_transitions_kernel(model, betas: Any) -> Builder:
    """A :class:`Builder` of the default tempered-transitions kernel (Gibbs base operator)."""
    check_ladder(betas)
    return Builder(lambda params: (tt_init, build_tt_kernel(model, betas, params=params)))


def trans_sap(
    model,
    optimizer: Any = None,
    num_particles: int = 100,
    *,
    betas: Any = None,
    gibbs_per_tt: int = 200,
    tt_start: int = 0,
    **kwargs,
):
    """Trans-SAP (Salakhutdinov 2009): SAP with Gibbs, plus one tempered-transitions run
    every ``gibbs_per_tt`` updates from update ``tt_start`` on.

    ``betas`` defaults to the paper's 50 inverse temperatures uniform in ``[0.9, 1]``.
    The paper runs TT only in the second half of training: pass
    ``tt_start = num_updates // 2``.
    """
    gibbs_per_tt = check_positive_int(gibbs_per_tt, "gibbs_per_tt")
    tt_start = check_nonnegative_int(tt_start, "tt_start")
    betas = uniform_ladder(50, 0.9) if betas is None else betas
    kernel = Alternate(None, tempered_transitions_kernel(model, betas), gibbs_per_tt, tt_start)
    return sap(model, kernel, optimizer, num_particles, name="trans_sap", **kwargs)


def pt_sap(model, optimizer: Any = None, num_particles: int = 100, *, betas: Any = None, **kwargs):
    """PT-SAP (Desjardins et al. 2010): SAP whose particles are parallel-tempering chains.

    Each particle is a stack of ``len(betas)`` replicas; the ``beta = 1`` replica enters
    the gradient.  ``betas`` defaults to 10 inverse temperatures uniform in ``[0.5, 1]``.
    """
    betas = uniform_ladder(10, 0.5) if betas is None else betas
    return sap(model, parallel_tempering_kernel(model, betas), optimizer, num_particles, name="pt_sap", **kwargs)
