"""``numpyro.infer.MCMC`` runs as ArviZ data with summaries of the discrete sites (for ``ui.diagnostics``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC

__all__ = ["default_statistics", "to_arviz"]

#: ``idata.attrs`` key naming the sampler family (``ui.diagnostics`` tailors its advice)
SAMPLER_ATTR = "ugm_infer_sampler"


def default_statistics(samples: Mapping[str, Any], discrete: Any) -> dict[str, Callable]:
    """Label-free summaries of discrete sites, one per site of ``discrete``.

    ``num_<site>``: the number of ones of a binary site (e.g. the number of included
    predictors); ``num_<site>_values``: the number of distinct values of a categorical
    site (e.g. the number of occupied mixture components).
    """
    stats = {}
    for name in discrete:
        if name not in samples:
            continue
        values = np.asarray(samples[name])
        if values.size and np.all((values == 0) | (values == 1)) and np.issubdtype(values.dtype, np.integer):
            stats[f"num_{name}"] = lambda s, n=name: jnp.sum(s[n])
        else:
            stats[f"num_{name}_values"] = lambda s, n=name: jnp.sum(
                jnp.bincount(s[n].reshape(-1).astype(jnp.int32), length=_num_values(values)) > 0
            )
    return stats


def _num_values(values: np.ndarray) -> int:
    return int(values.max()) + 1 if values.size else 1


def _discrete_site_names(mcmc: MCMC) -> list[str]:
    sampler = mcmc.sampler
    for block in (getattr(sampler, "sampler", None), sampler):
        kernel = getattr(block, "discrete_kernel", None)
        if kernel is not None and kernel.energy_model is not None:
            return list(kernel.energy_model.variables)
    samples = mcmc.get_samples()
    return [n for n, v in samples.items() if jnp.issubdtype(jnp.asarray(v).dtype, jnp.integer)]


def to_arviz(
    mcmc: MCMC,
    *,
    statistics: Mapping[str, Callable] | None = None,
    betas: Any = None,
    attrs: Mapping[str, Any] | None = None,
    log_likelihood: bool = False,
    **from_numpyro_kwargs: Any,
):
    """``arviz.from_numpyro(mcmc)`` plus discrete summary statistics, ready for ``ui.diagnostics.diagnose``.

    Parameters
    ----------
    mcmc
        A run of ``numpyro.infer.MCMC`` (any kernel; :class:`UGMGibbs`,
        :class:`ParallelTempering`, ``DiscreteHMCGibbs``, ...).
    statistics
        ``{name: fn(draw) -> scalar}`` evaluated on every draw ``{site: array}`` (all
        sites, constrained), added to ``posterior``; default
        :func:`default_statistics` of the discrete sites (``num_gamma`` = the number of
        included predictors, ``num_c_values`` = the number of occupied components).
        Rank-normalised R-hat and ESS are meaningful on such real-valued summaries.
    betas
        The ladder of a :class:`ParallelTempering` run (default: read from the kernel),
        stored as ``constant_data.betas``.
    attrs
        Extra top-level attributes.
    log_likelihood, **from_numpyro_kwargs
        Passed to :func:`arviz.from_numpyro` (the pointwise log likelihood is off by
        default: it replays the model for every draw).

    Returns
    -------
    arviz.InferenceData
        The discrete sites are listed in ``posterior.attrs["raw_variables"]``, so
        ``diagnose`` checks the continuous sites and the statistics but not every raw
        discrete coordinate (whose labels may switch).  Kernel infos collected with
        ``extra_fields=("info.<field>",)`` appear in ``sample_stats`` as ``<field>``
        (``swap_acceptance``, ``acceptance_probability``, ``num_changed``, ...).
    """
    import arviz as az
    import xarray as xr

    from ugm_infer._idata import check_statistics as _check_statistics
    from ugm_infer._idata import undotted_sample_stats

    if not isinstance(mcmc, MCMC):
        raise TypeError(f"`mcmc` must be a numpyro.infer.MCMC that has run, got {type(mcmc).__name__}")
    samples = mcmc.get_samples(group_by_chain=True)
    discrete = _discrete_site_names(mcmc)
    flat = mcmc.get_samples()
    statistics = _check_statistics(statistics) if statistics is not None else default_statistics(flat, discrete)
    idata = az.from_numpyro(mcmc, log_likelihood=log_likelihood, **from_numpyro_kwargs)
    if statistics:
        chains, draws = next(iter(jax.tree.leaves(samples))).shape[:2]
        stacked = jax.tree.map(lambda x: jnp.reshape(x, (chains * draws,) + x.shape[2:]), samples)
        values = {n: np.asarray(jax.jit(jax.vmap(fn))(stacked)) for n, fn in statistics.items()}
        idata.posterior = idata.posterior.assign(
            {
                n: (
                    ("chain", "draw") + tuple(f"{n}_dim_{i}" for i in range(v.ndim - 1)),
                    v.reshape((chains, draws) + v.shape[1:]),
                )
                for n, v in values.items()
            }
        )
    idata.posterior.attrs["raw_variables"] = ",".join(discrete)
    if betas is None:
        betas = getattr(mcmc.sampler, "betas", None)
    if betas is not None:
        idata.add_groups(constant_data=xr.Dataset({"betas": ("beta", np.asarray(betas, np.float64))}))
    idata = undotted_sample_stats(idata)
    idata.attrs[SAMPLER_ATTR] = "numpyro"
    for k, v in dict(attrs or {}).items():
        idata.attrs[k] = v
    return idata
