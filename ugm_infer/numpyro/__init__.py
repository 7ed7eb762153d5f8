"""NumPyro integration: ugm_infer kernels inside ``numpyro.infer.MCMC``, NumPyro models as energies.

:class:`UGMGibbs` (with :class:`UGMBlock`, :class:`ParallelTempering`)
    HMC-within-Gibbs for NumPyro models with discrete *and* continuous latent sites:
    NumPyro's NUTS/HMC moves the continuous sites, a ugm_infer kernel (block Gibbs
    over blocks detected on the conditional energy, Metropolis, tempered transitions,
    a user kernel) the discrete ones, on their conditional given the current continuous
    values.  ``UGMGibbs(NUTS(model), kernel="gibbs")`` is used like
    ``numpyro.infer.DiscreteHMCGibbs(NUTS(model))``.  :class:`ParallelTempering` runs
    copies of such a sampler at tempered likelihoods and swaps them.
:class:`NumPyroKernel` (built by :func:`as_numpyro_kernel`)
    Any ugm_infer kernel on an :class:`~ugm_infer.EnergyModel` at fixed parameters as
    a :class:`numpyro.infer.mcmc.MCMCKernel`, so ``numpyro.infer.MCMC`` supplies
    warm-up, ``num_chains`` (``chain_method="vectorized"`` / ``"sequential"`` /
    ``"parallel"``), thinning, its progress bar, ``print_summary`` and
    ``arviz.from_numpyro``.
:func:`energy_model_from_numpyro`
    A NumPyro model's discrete latent sites as an :class:`~ugm_infer.EnergyModel`,

    .. math::  E(\\theta, x) = -\\log p(x, z, y_{\\mathrm{obs}} \\mid \\theta),

    whose ``params`` are the model's keyword arguments :math:`\\theta` and the values of
    its continuous latent sites :math:`z`: the conditional of the discrete sites.
:func:`to_arviz`
    ``arviz.from_numpyro`` plus discrete summary statistics and the tempering
    diagnostics under the names ``ui.diagnostics.diagnose`` reads.

Inside this package ``import numpyro`` is the NumPyro package (absolute imports);
``import ugm_infer as ui; import numpyro`` in user code is likewise unaffected (this
package is reached only as ``ui.numpyro``).

References
----------
Phan, D., Pradhan, N. and Jankowiak, M. (2019). Composable effects for flexible and
accelerated probabilistic programming in NumPyro. arXiv:1912.11554.
Kumar, R., Carroll, C., Hartikainen, A. and Martin, O. (2019). ArviZ a unified library
for exploratory analysis of Bayesian models in Python. JOSS 4(33), 1143.
"""

from ugm_infer.numpyro._arviz import default_statistics, to_arviz
from ugm_infer.numpyro._energy import NumPyroEnergyModel, energy_model_from_numpyro
from ugm_infer.numpyro._gibbs import UGMBlock, UGMBlockState, UGMGibbs, UGMGibbsState, discrete_sites
from ugm_infer.numpyro._kernel import KERNELS, NumPyroKernel, NumPyroKernelState, as_numpyro_kernel
from ugm_infer.numpyro._tempering import ParallelTempering, ParallelTemperingState

__all__ = [
    "KERNELS",
    "NumPyroEnergyModel",
    "NumPyroKernel",
    "NumPyroKernelState",
    "ParallelTempering",
    "ParallelTemperingState",
    "UGMBlock",
    "UGMBlockState",
    "UGMGibbs",
    "UGMGibbsState",
    "as_numpyro_kernel",
    "default_statistics",
    "discrete_sites",
    "energy_model_from_numpyro",
    "to_arviz",
]
