"""Sampling kernels in BlackJAX style.

Each kernel is exposed like ``blackjax.hmc``: calling it builds a
:class:`blackjax.base.SamplingAlgorithm` (``init``, ``step``) for one chain, and
``.init`` / ``.build_kernel`` give the low-level pieces, whose kernel has the
BlackJAX inner-kernel signature ``kernel(rng_key, state, logdensity_fn)``.
"""

from blackjax import GenerateSamplingAPI

from ugm_infer.kernels import gibbs as _gibbs
from ugm_infer.kernels import metropolis as _metropolis

gibbs = GenerateSamplingAPI(_gibbs.as_top_level_api, _gibbs.init, _gibbs.build_kernel)
metropolis = GenerateSamplingAPI(_metropolis.as_top_level_api, _metropolis.init, _metropolis.build_kernel)

__all__ = ["gibbs", "metropolis"]
