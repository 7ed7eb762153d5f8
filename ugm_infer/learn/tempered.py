"""Kernel schedules for SAP: persistent multi-replica kernels and alternating kernels.

Two ways of plugging tempering into :func:`ugm_infer.learn.sap` (no special learner
code beyond the schedule of updates):

:class:`Persistent`
    a kernel whose state is more than one configuration (parallel tempering keeps one
    replica per temperature).  SAP keeps the whole kernel state of every particle
    across updates, reads the particle used in the gradient with ``sample(state)``
    (PT: the ``beta = 1`` replica) and never re-initialises it: the kernel must not
    cache anything that depends on the parameters (PT does not).
:class:`Alternate`
    run ``extra`` (e.g. one tempered-transitions run) before the base step on every
    ``every``-th update from update ``start`` on.  Parameters are updated once per SAP
    update, i.e. after each base (Gibbs) step and never during the extra run: exactly
    the Trans-SAP schedule of Salakhutdinov (2009): 200 Gibbs updates : 1 TT run.
    The choice is made on the learner's (unbatched) step counter with ``lax.cond``,
    so the extra kernel costs nothing on the other updates.

:func:`trans_sap` and :func:`pt_sap` build the two learners of the seed papers.

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
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Alternate", "Persistent", "parallel_tempering_kernel", "pt_sap", "trans_sap"]


class Persistent(NamedTuple):
    """A kernel whose full state persists across SAP updates.

    init
        ``init(position, logdensity_fn) -> state`` from ONE configuration.
    step
        ``step(rng_key, state, logdensity_fn) -> (state, info)``.
    sample
        ``sample(state) -> position``: the configuration that enters the gradient.
    """

    init: Callable
    step: Callable
    sample: Callable


class Alternate(NamedTuple):
    """Run ``extra`` before ``base`` on updates ``start, start + every, ...``.

    ``base`` and ``extra`` take any form :func:`~ugm_infer.learn.sap` accepts for a
    kernel (``None`` = block Gibbs, a kernel module, an ``(init, kernel)`` pair, or a
    builder ``params -> (init, kernel)`` wrapped in :class:`Builder`).
    """

    base: Any
    extra: Any
    every: int
    start: int = 0


class Builder(NamedTuple):
    """A kernel built from example parameters: ``build(params) -> (init_fn, kernel_fn)``."""

    build: Callable


def parallel_tempering_kernel(model, betas: Any, base_kernel: Callable | None = None, base_init=None) -> Builder:
    """A :class:`Builder` of the :class:`Persistent` parallel-tempering kernel for SAP."""
    from ugm_infer.kernels.parallel_tempering import build_kernel, init, target_position
    from ugm_infer.kernels.tempered_transitions import check_ladder

    num = len(check_ladder(betas))

    def build(params):
        kernel = build_kernel(model, betas, base_kernel=base_kernel, base_init=base_init, params=params)
        return Persistent(lambda x, ld: init(x, num_replicas=num), kernel, target_position)

    return Builder(build)


def tempered_transitions_kernel(model, betas: Any) -> Builder:
    """A :class:`Builder` of the default tempered-transitions kernel (Gibbs base operator)."""
    from ugm_infer.kernels.tempered_transitions import build_kernel, check_ladder, init

    check_ladder(betas)
    return Builder(lambda params: (init, build_kernel(model, betas, params=params)))


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
    from ugm_infer.kernels.tempered_transitions import uniform_ladder
    from ugm_infer.learn.base import check_positive_int
    from ugm_infer.learn.sap import sap

    gibbs_per_tt = check_positive_int(gibbs_per_tt, "gibbs_per_tt")
    if isinstance(tt_start, bool) or not isinstance(tt_start, (int, np.integer)) or tt_start < 0:
        raise ValueError(f"`tt_start` must be an int >= 0, got {tt_start!r}")
    betas = uniform_ladder(50, 0.9) if betas is None else betas
    kernel = Alternate(None, tempered_transitions_kernel(model, betas), gibbs_per_tt, int(tt_start))
    return sap(model, kernel, optimizer, num_particles, name="trans_sap", **kwargs)


def pt_sap(model, optimizer: Any = None, num_particles: int = 100, *, betas: Any = None, **kwargs):
    """PT-SAP (Desjardins et al. 2010): SAP whose particles are parallel-tempering chains.

    Each particle is a stack of ``len(betas)`` replicas; the ``beta = 1`` replica enters
    the gradient.  ``betas`` defaults to 10 inverse temperatures uniform in ``[0.5, 1]``.
    """
    from ugm_infer.kernels.tempered_transitions import uniform_ladder
    from ugm_infer.learn.sap import sap

    betas = uniform_ladder(10, 0.5) if betas is None else betas
    return sap(model, parallel_tempering_kernel(model, betas), optimizer, num_particles, name="pt_sap", **kwargs)
