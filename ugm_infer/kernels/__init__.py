"""Sampling kernels in BlackJAX style.

Each kernel is exposed like ``blackjax.hmc``: calling it builds a
:class:`blackjax.base.SamplingAlgorithm` (``init``, ``step``) for one chain, and
``.init`` / ``.build_kernel`` give the low-level pieces, whose kernel has the
BlackJAX inner-kernel signature ``kernel(rng_key, state, logdensity_fn)``.
:mod:`~ugm_infer.kernels.multispin` is the bit-packed (multi-spin-coded) checkerboard
sweep for periodic Ising lattices, 32 chains per ``uint32`` word.
"""

from blackjax import GenerateSamplingAPI

from ugm_infer.kernels import gibbs as _gibbs
from ugm_infer.kernels import metropolis as _metropolis
from ugm_infer.kernels import multispin
from ugm_infer.kernels import parallel_tempering as _parallel_tempering
from ugm_infer.kernels import tempered_transitions as _tempered_transitions
from ugm_infer.kernels._updates import SiteLogitsLogDensity
from ugm_infer.kernels.ladder import LadderReport, adapt_ladder, respace_ladder

gibbs = GenerateSamplingAPI(_gibbs.as_top_level_api, _gibbs.init, _gibbs.build_kernel)
metropolis = GenerateSamplingAPI(_metropolis.as_top_level_api, _metropolis.init, _metropolis.build_kernel)
tempered_transitions = GenerateSamplingAPI(
    _tempered_transitions.as_top_level_api, _tempered_transitions.init, _tempered_transitions.build_kernel
)
tempered_transitions.register_factory("uniform_ladder", _tempered_transitions.uniform_ladder)
parallel_tempering = GenerateSamplingAPI(
    _parallel_tempering.as_top_level_api, _parallel_tempering.init, _parallel_tempering.build_kernel
)
parallel_tempering.register_factory("target_position", _parallel_tempering.target_position)

__all__ = [
    "LadderReport",
    "SiteLogitsLogDensity",
    "adapt_ladder",
    "gibbs",
    "metropolis",
    "multispin",
    "parallel_tempering",
    "respace_ladder",
    "tempered_transitions",
]
