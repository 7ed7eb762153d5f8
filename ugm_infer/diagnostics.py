"""ArviZ diagnostics of chain mixing: ``ui.diagnostics``.

Two entry points:

:func:`to_arviz`
    turns a run (:class:`~ugm_infer.SampleResult` of ``ui.sample``, a
    :class:`~ugm_infer.smc.TemperedSMCResult`, an :class:`~ugm_infer.smc.AISResult` or a
    :class:`~ugm_infer.FitResult`) into :class:`arviz.InferenceData`.  Discrete
    configurations are summarised by real-valued statistics — the energy, the mean of
    every variable (the magnetisation for spins) and any user statistic — because
    rank-normalised R-hat and ESS are meaningful on those, while tail-ESS on raw tied
    discrete draws is biased.  Kernel infos go to ``sample_stats``.
:func:`diagnose`
    computes rank-normalised split R-hat, bulk and tail ESS (``arviz.rhat``,
    ``arviz.ess``) and autocorrelations (``arviz.autocorr``) of those statistics, reads
    the kernel-specific signals (parallel-tempering swap rates per pair and round trips,
    tempered-transitions acceptance, SMC/AIS effective sample sizes, particle-filter
    resampling frequency) and returns a :class:`Diagnosis`: a list of plain-language
    :class:`Finding` objects with the numbers and what to do about them.

Default thresholds
------------------
``rhat_threshold = 1.01`` and ``ess_threshold = 400`` follow Vehtari, Gelman, Simpson,
Carpenter & Bürkner (2021): use a rank-normalised split R-hat below 1.01 and a bulk and
tail ESS above 400 (100 per chain for 4 chains) before trusting posterior summaries.
``min_swap_rate = 0.1``: the optimal swap acceptance of parallel tempering is about 0.23
(Kone & Kofke 2005); a pair far below it — here below 0.1 — is a bottleneck the
replicas rarely cross.  ``min_tt_acceptance = 0.05``: below it a tempered-transitions
kernel almost never moves (see ``docs/tempering.md``).  ``min_smc_ess = 0.1``: an
effective sample size under 10% of the particles is the usual sign of weight
degeneracy, and the standard error of ``log Z`` is unreliable then.
``max_resample_fraction = 0.9``: a particle filter that resamples at nearly every update
(Asuncion et al. 2010, Alg. 2) is in effect a PCD learner that also pays for the
weights; its weights degenerate within one step.

The netCDF files written by :func:`to_netcdf` (``h5netcdf`` engine) reload with
:func:`from_netcdf` or ``arviz.from_netcdf``; all groups and attributes round-trip.

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC. Bayesian Analysis 16(2), 667-718.
Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical Science 7, 473-483.
Kone, A. and Kofke, D. A. (2005). Selection of temperature intervals for
parallel-tempering simulations. J. Chem. Phys. 122, 206101.
Neal, R. M. (1996). Sampling from multimodal distributions using tempered transitions.
Statistics and Computing 6, 353-366.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE with
connections to contrastive divergence. ICML.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._idata import KIND_ATTR as _KIND_ATTR
from ugm_infer._idata import check_statistics as _check_statistics
from ugm_infer._idata import undotted_sample_stats
from ugm_infer.fit._result import path_name as _path_name

__all__ = [
    "Diagnosis",
    "Finding",
    "diagnose",
    "from_netcdf",
    "swap_rates",
    "to_arviz",
    "to_netcdf",
]

RHAT_THRESHOLD = 1.01
ESS_THRESHOLD = 400.0
MIN_SWAP_RATE = 0.1
MIN_TT_ACCEPTANCE = 0.05
MIN_SMC_ESS = 0.1
MAX_RESAMPLE_FRACTION = 0.9

#: severities, most serious first; ``Diagnosis.ok`` is False when any finding is an
#: "error" or a "warning"
SEVERITIES = ("error", "warning", "info")

_TEMPERING_ADVICE = (
    "try parallel tempering (ui.kernels.parallel_tempering) or tempered transitions "
    "(ui.kernels.tempered_transitions), see docs/tempering.md"
)


# ======================================================================================
# to_arviz
# ======================================================================================
def _netcdf_array(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr.astype(np.int8)
    return arr


#: names given to the extra axes of known kernel-info fields
_INFO_DIMS = {
    "swap_acceptance": "pair",
    "swap_attempted": "pair",
    "swap_accepted": "pair",
    "log_ratio_terms": "rung",
    "replica_energy": "replica",
}


def _dims_for(name: str, arr: np.ndarray, lead: int) -> list[str]:
    extra = arr.ndim - lead
    short = name.rsplit(".", 1)[-1]
    if extra == 1 and short in _INFO_DIMS:
        return [_INFO_DIMS[short]]
    return [f"{name}_dim_{i}" for i in range(extra)]


def _dataset(variables: Mapping[str, np.ndarray], lead_dims: tuple[str, ...], attrs: dict | None = None):
    """A thin ``{name: array} -> xarray.Dataset`` with the given leading dims (the only container code)."""
    import xarray as xr

    data_vars = {}
    coords: dict[str, np.ndarray] = {}
    for name, value in variables.items():
        arr = _netcdf_array(value)
        dims = list(lead_dims) + _dims_for(name, arr, len(lead_dims))
        data_vars[name] = (dims, arr)
        for d, size in zip(dims, arr.shape):
            coords.setdefault(d, np.arange(size))
    return xr.Dataset(data_vars, coords=coords, attrs=dict(attrs or {}))


def _inference_data(groups: Mapping[str, Any], attrs: dict) -> Any:
    """Build :class:`arviz.InferenceData` from ``{group: xarray.Dataset}`` (schema groups first)."""
    import arviz as az

    schema = {k: v for k, v in groups.items() if k in ("posterior", "sample_stats", "constant_data")}
    extra = {k: v for k, v in groups.items() if k not in schema}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not defined in the InferenceData scheme.*")
        idata = az.InferenceData(attrs=dict(attrs), **schema)
        if extra:
            idata.add_groups(extra)
    return idata


def _variable_shapes(model: Any, states: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    if model is None:
        return {}
    variables = getattr(model, "variables", None)
    if not isinstance(variables, Mapping):
        raise TypeError(f"`model` must be a ugm_infer EnergyModel, got {type(model).__name__}")
    missing = [n for n in variables if n not in states]
    if missing:
        raise ValueError(f"the run's states lack the model variables {missing} (have {sorted(states)})")
    return {n: tuple(d.shape) for n, d in variables.items()}


def _split_replicas(states: dict, shapes: dict, lead: int, replicas: bool) -> tuple[dict, dict | None]:
    """``(target states, all-replica states or None)``; the target replica (beta = 1) is the last one."""
    if not states:
        return states, None
    if shapes:
        extra = {n: np.ndim(states[n]) - lead - len(shapes[n]) for n in shapes}
        trailing = all(tuple(np.shape(states[n])[np.ndim(states[n]) - len(shapes[n]) :]) == shapes[n] for n in shapes)
        if trailing and set(extra.values()) == {1}:
            replicas = True
        elif not trailing or set(extra.values()) != {0}:
            got = {n: tuple(np.shape(states[n])) for n in shapes}
            raise ValueError(
                f"state shapes {got} do not match the model's variables {shapes} after {lead} leading (chain, draw) axes"
            )
    if not replicas:
        return states, None
    target = {n: v[(slice(None),) * lead + (-1,)] for n, v in states.items()}
    return target, states


_ENERGY_FNS: dict[int, tuple[Any, Callable]] = {}


def _energies(model: Any, params: Any, states: Mapping[str, Any], lead: int) -> np.ndarray:
    """Energies of configurations with ``lead`` leading batch axes (float64 numpy).

    The batch is flattened and evaluated by one jitted ``vmap`` per model, cached, so
    repeated conversions of runs of the same model do not recompile.
    """
    names = tuple(model.variables)
    first = np.asarray(states[names[0]])
    batch = first.shape[:lead]
    flat = {n: jnp.asarray(np.asarray(states[n]).reshape((-1,) + np.shape(states[n])[lead:])) for n in names}
    entry = _ENERGY_FNS.get(id(model))
    if entry is None or entry[0] is not model:
        fn = jax.jit(lambda p, x: jax.vmap(lambda one: model.energy(p, one))(x))
        if len(_ENERGY_FNS) >= 8:
            _ENERGY_FNS.pop(next(iter(_ENERGY_FNS)))
        _ENERGY_FNS[id(model)] = entry = (model, fn)
    return np.asarray(entry[1](params, flat), np.float64).reshape(batch)


def _summaries(
    states: dict | None,
    lead: int,
    model: Any,
    params: Any,
    statistics: dict[str, Callable],
    raw: bool,
    energies: Any = None,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Posterior variables of configurations with ``lead`` leading batch axes."""
    out: dict[str, np.ndarray] = {}
    raw_names: list[str] = []
    if energies is not None:
        out["energy"] = np.asarray(energies, np.float64)
    elif states is not None and model is not None and params is not None:
        out["energy"] = _energies(model, params, states, lead)
    if states is None:
        if statistics:
            raise ValueError("user `statistics` need the states: run ui.sample with keep_states=True")
        if raw:
            raise ValueError("`raw=True` needs the states: run ui.sample with keep_states=True")
        return out, raw_names
    for name, value in states.items():
        arr = np.asarray(value)
        batch = arr.shape[:lead]
        out[f"mean_{name}"] = arr.reshape(batch + (-1,)).astype(np.float64).mean(axis=-1)
    for name, fn in statistics.items():
        if name in out or name in states:
            raise ValueError(f"user statistic {name!r} clashes with a built-in posterior variable; rename it")
        batch = np.shape(next(iter(states.values())))[:lead]
        flat = {n: jnp.asarray(np.asarray(v).reshape((-1,) + np.shape(v)[lead:])) for n, v in states.items()}
        try:
            value = jax.jit(jax.vmap(fn))(flat)
            value = np.asarray(value).reshape(batch + np.shape(value)[1:])
        except Exception as err:  # user code: report which statistic failed
            raise ValueError(
                f"user statistic {name!r} failed on one configuration (it must be a JAX-traceable "
                f"fn(state: dict) -> scalar or array): {type(err).__name__}: {err}"
            ) from err
        value = np.asarray(value)
        if value.dtype == bool:
            value = value.astype(np.int8)
        elif not np.issubdtype(value.dtype, np.number):
            raise ValueError(f"user statistic {name!r} must return numbers, got dtype {value.dtype}")
        out[name] = value
    if raw:
        domains = getattr(model, "variables", {}) if model is not None else {}
        for name, value in states.items():
            arr = np.asarray(value)
            if name in domains and np.issubdtype(arr.dtype, np.floating):
                arr = arr.astype(np.int8)  # spins, bits and categories are small integers
            out[name] = arr
            raw_names.append(name)
    return out, raw_names


def _flatten_infos(infos: Any, lead: int) -> dict[str, np.ndarray]:
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(infos)[0]:
        arr = np.asarray(leaf)
        if arr.ndim < lead or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            continue
        out[_path_name(path) or "info"] = arr
    return out


def _check_betas(betas: Any) -> np.ndarray | None:
    if betas is None:
        return None
    arr = np.asarray(betas, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)) or np.any(np.diff(arr) <= 0):
        raise ValueError(f"`betas` must be a strictly increasing 1-D array of inverse temperatures, got {betas!r}")
    return arr


def _from_sample(result, model, params, statistics, raw, betas, attrs):
    states = None if result.states is None else dict(result.states)
    info_fields = _flatten_infos(result.infos, 2)
    is_pt = "swap_acceptance" in info_fields
    lead_shape = None
    for value in (result.energies, *(states or {}).values(), *info_fields.values()):
        if value is not None and np.ndim(value) >= 2:
            lead_shape = tuple(np.shape(value)[:2])
            break
    if lead_shape is None:
        raise ValueError("the SampleResult holds no (chain, draw) arrays: nothing to convert")
    energies = result.energies
    if energies is not None and tuple(np.shape(energies)) != lead_shape:
        energies = None  # e.g. one energy per PT replica: recomputed on the target replica below
    replica_states = None
    if states is not None:
        shapes = _variable_shapes(model, states)
        states, replica_states = _split_replicas(states, shapes, 2, is_pt)
    sample_stats = dict(info_fields)
    if replica_states is not None and model is not None and params is not None:
        sample_stats["replica_energy"] = _energies(model, params, replica_states, 3)
        energies = sample_stats["replica_energy"][..., -1]  # the beta = 1 replica
    posterior, raw_names = _summaries(states, 2, model, params, statistics, raw, energies)
    kernel = type(result.infos).__name__ if result.infos is not None else ""
    groups = {}
    if posterior:
        groups["posterior"] = _dataset(posterior, ("chain", "draw"), {"raw_variables": ",".join(raw_names)})
    if sample_stats:
        groups["sample_stats"] = _dataset(sample_stats, ("chain", "draw"), {"kernel_info": kernel})
    if betas is not None:
        groups["constant_data"] = _dataset({"betas": betas}, ("beta",))
    return _inference_data(groups, {**attrs, _KIND_ATTR: "sample", "kernel_info": kernel})


def _from_tempered_smc(result, model, params, statistics, raw, attrs):
    particles = dict(result.particles)
    if model is not None:
        _variable_shapes(model, particles)
    posterior, raw_names = _summaries(particles, 2, model, params, statistics, raw)
    weights = np.asarray(result.weights, np.float64)
    with np.errstate(divide="ignore"):
        sample_stats = {"weight": weights, "log_weight": np.log(weights)}
    used = max(int(np.max(np.asarray(result.num_steps))), 1)  # drop the NaN padding after the last step
    smc = _dataset(
        {
            "tempering_param": np.asarray(result.tempering_params)[:, :used],
            "ess": np.asarray(result.ess)[:, :used],
            "log_Z_increment": np.asarray(result.log_Z_increments)[:, :used],
        },
        ("replicate", "step"),
    )
    smc["num_steps"] = ("replicate", np.asarray(result.num_steps))
    smc["log_Z_replicate"] = ("replicate", np.asarray(result.log_Z_replicates))
    smc.attrs.update(
        {"log_Z": float(result.log_Z), "log_Z_se": float(result.log_Z_se), "num_particles": int(weights.shape[-1])}
    )
    groups = {
        "posterior": _dataset(posterior, ("chain", "draw"), {"raw_variables": ",".join(raw_names)}),
        "sample_stats": _dataset(sample_stats, ("chain", "draw")),
        "smc": smc,
    }
    if not posterior:
        del groups["posterior"]
    return _inference_data(groups, {**attrs, _KIND_ATTR: "tempered_smc"})


def _from_ais(result, model, params, statistics, raw, attrs):
    particles = {n: np.asarray(v)[None] for n, v in dict(result.particles).items()}
    if model is not None:
        _variable_shapes(model, particles)
    posterior, raw_names = _summaries(particles, 2, model, params, statistics, raw)
    log_w = np.asarray(result.log_weights, np.float64)[None]
    smc = _dataset({"betas": np.asarray(result.betas)}, ("beta",))
    smc.attrs.update(
        {
            "log_Z": float(result.log_Z),
            "log_Z_se": float(result.log_Z_se),
            "ess": float(result.ess),
            "num_particles": int(log_w.shape[-1]),
            "analytic": str(result.analytic),
        }
    )
    groups = {"sample_stats": _dataset({"log_weight": log_w}, ("chain", "draw")), "smc": smc}
    if posterior:
        groups["posterior"] = _dataset(posterior, ("chain", "draw"), {"raw_variables": ",".join(raw_names)})
    return _inference_data(groups, {**attrs, _KIND_ATTR: "ais"})


def _from_fit(result, statistics, raw, attrs):
    idata = result.to_arviz(raw_particles=raw)
    idata.attrs.update({**attrs, _KIND_ATTR: "fit"})
    if statistics:
        particles = getattr(result.state, "particles", None)
        if not isinstance(particles, Mapping) or "posterior" not in idata.groups():
            raise ValueError("user `statistics` need persistent particles; this learner's state has none")
        batch = {n: np.asarray(v)[None] for n, v in particles.items()}
        extra, _ = _summaries(batch, 2, None, None, statistics, False)
        posterior = idata.posterior
        for name in statistics:
            if name in posterior:
                raise ValueError(f"user statistic {name!r} clashes with a built-in posterior variable; rename it")
        new = _dataset({k: extra[k] for k in statistics}, ("chain", "draw"))
        idata.posterior = posterior.assign({k: new[k] for k in statistics})
    return idata


def to_arviz(
    result: Any,
    *,
    model: Any = None,
    params: Any = None,
    statistics: Mapping[str, Callable] | None = None,
    raw: bool = False,
    betas: Any = None,
    attrs: Mapping[str, Any] | None = None,
):
    # Long because its docstring documents every argument and group; the code is about 30 lines.
    """Convert a run to :class:`arviz.InferenceData`.

    Parameters
    ----------
    result
        One of

        * :class:`~ugm_infer.SampleResult` (``ui.sample``): leaves ``(chain, draw, ...)``.
          For parallel tempering the states hold every replica ``(chain, draw, R,
          ...)``; the statistics describe the ``beta = 1`` replica (the last).
        * :class:`~ugm_infer.smc.TemperedSMCResult`: ``chain`` = replicate, ``draw`` =
          particle (weighted: see ``sample_stats.weight``).
        * :class:`~ugm_infer.smc.AISResult`: one chain, ``draw`` = annealing run.
        * :class:`~ugm_infer.FitResult`: delegated to :meth:`FitResult.to_arviz`
          (groups ``learning_history``, ``learner_stats``, ``learned_params`` and a
          ``posterior`` of the persistent particles).
        * a ``numpyro.infer.MCMC`` run: delegated to :func:`ugm_infer.numpyro.to_arviz`
          (``statistics`` are evaluated on every draw ``{site: array}``; default: the
          number of ones of each binary site and of values used by each categorical one).
    model, params
        Give both to record the ``energy`` of every draw when the run did not (always
        needed for parallel tempering, SMC and AIS).  ``model`` also checks the state
        shapes.
    statistics
        ``{name: fn(state) -> scalar or array}`` evaluated (``vmap``-ed, jitted) on
        every configuration ``state = {variable: array}``; e.g. the number of up spins,
        a pair correlation, an order parameter.
    raw
        Also store the raw configurations (``posterior[<variable>]``; spins and bits as
        ``int8``).  Memory ``chain x draw x sites``.
    betas
        The inverse temperatures of a parallel-tempering or tempered-transitions run,
        stored as ``constant_data.betas`` so that :func:`diagnose` can name the betas
        of a slow pair.
    attrs
        Extra top-level attributes (strings and numbers).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (dims ``chain, draw``): ``energy``, ``mean_<variable>`` (the mean
        over the variable's sites: the magnetisation for spins, the density of ones for
        binary variables), the user statistics, and the raw configurations on request.
        ``sample_stats``: every numeric kernel-info field, flattened with ``.``-joined
        names (e.g. ``swap_acceptance`` on dim ``pair`` for parallel tempering,
        ``acceptance_probability`` and ``log_ratio_terms`` on dim ``rung`` for tempered
        transitions, ``num_changed`` for Gibbs), ``replica_energy`` (PT, with
        ``model`` and ``params``), or the importance weights (SMC, AIS).  ``smc``
        (SMC/AIS): per-step ``ess`` (fraction of N), ``tempering_param``,
        ``log_Z_increment``, ``num_steps`` and ``log_Z`` / ``log_Z_se`` attributes.
        ``idata.attrs["ugm_infer_result"]`` names the kind of run.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> from ugm_infer import diagnostics
    >>> model = ui.models.ising(4)
    >>> params = model.init_params(jax.random.key(0))
    >>> run = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params),
    ...                 model.random_state(jax.random.key(2), 4), 50, model=model, params=params)
    >>> idata = diagnostics.to_arviz(run, model=model, statistics={"up": lambda x: (x["s"] > 0).sum()})
    >>> sorted(idata.posterior.data_vars)
    ['energy', 'mean_s', 'up']
    """
    from ugm_infer.fit import FitResult
    from ugm_infer.sampling import SampleResult
    from ugm_infer.smc import AISResult, TemperedSMCResult

    statistics = _check_statistics(statistics)
    if not isinstance(raw, (bool, np.bool_)):
        raise TypeError(f"`raw` must be True or False, got {raw!r}")
    if attrs is not None and not isinstance(attrs, Mapping):
        raise TypeError(f"`attrs` must be a dict, got {type(attrs).__name__}")
    attrs = dict(attrs or {})
    betas = _check_betas(betas)
    if (model is None) != (params is None) and params is not None:
        raise ValueError("`params` needs the `model` it belongs to")
    if params is not None and hasattr(model, "validate_params"):
        model.validate_params(params)
    if isinstance(result, SampleResult):
        return _from_sample(result, model, params, statistics, raw, betas, attrs)
    if isinstance(result, TemperedSMCResult):
        return _from_tempered_smc(result, model, params, statistics, raw, attrs)
    if isinstance(result, AISResult):
        return _from_ais(result, model, params, statistics, raw, attrs)
    if isinstance(result, FitResult):
        return _from_fit(result, statistics, raw, attrs)
    if _is_numpyro_mcmc(result):
        from ugm_infer.numpyro import to_arviz as numpyro_to_arviz

        return numpyro_to_arviz(result, statistics=statistics or None, betas=betas, attrs=attrs)
    raise TypeError(
        "`result` must be a ui.SampleResult, ui.smc.TemperedSMCResult, ui.smc.AISResult, ui.FitResult or a "
        f"numpyro.infer.MCMC run, got {type(result).__name__}"
    )


def to_netcdf(idata: Any, path: str) -> str:
    """Save ``idata`` to ``path`` with the ``h5netcdf`` engine (ArviZ 0.23's default); returns ``path``."""
    _check_idata(idata, "idata")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not defined in the InferenceData scheme.*")
        return idata.to_netcdf(str(path), engine="h5netcdf")


def from_netcdf(path: str):
    """Load an :class:`arviz.InferenceData` saved by :func:`to_netcdf` (all groups and attributes)."""
    import arviz as az

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not defined in the InferenceData scheme.*")
        return az.from_netcdf(str(path), engine="h5netcdf")


def _check_idata(idata: Any, argname: str) -> None:
    import arviz as az

    if not isinstance(idata, az.InferenceData):
        raise TypeError(f"`{argname}` must be an arviz.InferenceData, got {type(idata).__name__}")


def _is_numpyro_mcmc(result: Any) -> bool:
    """A ``numpyro.infer.MCMC`` (checked by type name: this module does not import NumPyro)."""
    return any(c.__module__.startswith("numpyro.") and c.__name__ == "MCMC" for c in type(result).__mro__)


# ======================================================================================
# diagnose
# ======================================================================================
class Finding(NamedTuple):
    """One diagnostic finding.

    severity
        ``"error"`` (estimates are unreliable), ``"warning"`` (probably a problem) or
        ``"info"`` (context).
    statistic
        What was measured (``"energy"``, ``"swap_rate[2,3]"``, ``"tt_acceptance"``...).
    message
        Plain-language description with the numbers and what to do.
    value, threshold
        The measured value and the threshold it was compared with (``nan`` if none).
    """

    severity: str
    statistic: str
    message: str
    value: float = math.nan
    threshold: float = math.nan


@dataclass(frozen=True, eq=False)
class Diagnosis:
    """Result of :func:`diagnose`.

    findings
        The findings, most serious first.
    table
        ``{statistic: {"rhat", "ess_bulk", "ess_tail", "autocorr_lag1", "tau"}}`` for
        every posterior statistic checked (worst element for array statistics), plus
        ``"swap_rate"`` (per pair) and other kernel summaries where present.
    """

    findings: tuple[Finding, ...]
    table: dict

    @property
    def ok(self) -> bool:
        """True when there is no error and no warning."""
        return not any(f.severity in ("error", "warning") for f in self.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    def __str__(self) -> str:
        head = (
            "OK: no mixing problems found."
            if self.ok
            else (f"PROBLEMS: {len(self.errors)} error(s), {len(self.warnings)} warning(s).")
        )
        lines = [head]
        for f in self.findings:
            lines.append(f"[{f.severity}] {f.statistic}: {f.message}")
        stats = {k: v for k, v in self.table.items() if isinstance(v, dict)}
        if stats:
            lines.append("statistic      R-hat  bulk ESS  tail ESS  lag-1 autocorr")
            for name, row in stats.items():
                lines.append(
                    f"{name:<13} {row['rhat']:>6.3f}  {_fmt(row['ess_bulk']):>8}  {_fmt(row['ess_tail']):>8}  "
                    f"{_fmt(row['autocorr_lag1']):>14}"
                )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Diagnosis(ok={self.ok}, findings={len(self.findings)})"

    def print(self) -> None:
        """Print :meth:`__str__`."""
        print(str(self))


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return str(x)
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.3g}"


def _element_label(name: str, index: tuple[int, ...]) -> str:
    return name if not index else f"{name}[{','.join(str(i) for i in index)}]"


def _rhat_ess(values: np.ndarray) -> dict[str, float]:
    """R-hat, bulk/tail ESS, lag-1 autocorrelation of one ``(chain, draw)`` array."""
    import arviz as az

    values = np.asarray(values, np.float64)
    chains, draws = values.shape
    out = {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        out["rhat"] = float(az.rhat(values)) if draws >= 4 else math.nan
        out["ess_bulk"] = float(az.ess(values, method="bulk")) if draws >= 4 else math.nan
        out["ess_tail"] = float(az.ess(values, method="tail")) if draws >= 4 else math.nan
        ac = az.autocorr(values, axis=-1)
        out["autocorr_lag1"] = float(np.nanmean(ac[:, 1])) if draws > 1 else math.nan
    within = values.std(axis=1)
    means = values.mean(axis=1)
    out["constant"] = bool(np.all(values == values.flat[0]))
    out["stuck_apart"] = bool(np.all(within == 0) and np.ptp(means) > 0)
    if out["stuck_apart"]:
        out["rhat"] = math.inf
    ess = out["ess_bulk"]
    out["tau"] = chains * draws / ess if ess and np.isfinite(ess) and ess > 0 else math.nan
    out["chain_means"] = means
    return out


def _mixing_advice(idata) -> str:
    ss = getattr(idata, "sample_stats", None)
    names = set(ss.data_vars) if ss is not None else set()
    if idata.attrs.get("ugm_infer_sampler") == "numpyro" and not names & {"swap_acceptance", "acceptance_probability"}:
        return (
            "for the discrete sites of a NumPyro model try ui.numpyro.UGMGibbs(NUTS(model), "
            "kernel='tempered_transitions', betas=...) or ui.numpyro.ParallelTempering(UGMGibbs(NUTS(model)), betas), "
            "or run much longer"
        )
    if "swap_acceptance" in names or "acceptance_probability" in names:
        return (
            "the tempered sampler has not mixed yet either: run longer, lower the smallest beta, add betas where "
            "swaps/acceptances are rare, or adapt the ladder (ui.kernels.adapt_ladder)"
        )
    return f"{_TEMPERING_ADVICE}, or run much longer"


def _check_posterior(idata, var_names, rhat_threshold, ess_threshold, findings, table) -> None:
    """Append the mixing findings of every posterior variable to ``findings`` and its worst statistics to ``table``."""
    posterior = idata.posterior
    advice = _mixing_advice(idata)
    raw = set(filter(None, str(posterior.attrs.get("raw_variables", "")).split(",")))
    names = list(var_names) if var_names is not None else [n for n in posterior.data_vars if n not in raw]
    unknown = [n for n in names if n not in posterior.data_vars]
    if unknown:
        raise ValueError(f"`var_names` {unknown} are not posterior variables (have {sorted(posterior.data_vars)})")
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    if draws < 4:
        findings.append(Finding("warning", "draws", f"only {draws} draws per chain: too few to diagnose; run longer"))
        return
    if chains == 1:
        findings.append(
            Finding(
                "info",
                "chains",
                "one chain: R-hat only compares its two halves; run 4 or more chains from dispersed "
                "starting points (e.g. different modes) to detect chains stuck in different modes",
            )
        )
    for name in names:
        summary = _summarise_variable(name, np.asarray(posterior[name].values, np.float64))
        table[name] = {
            "rhat": summary.worst["rhat"],
            "ess_bulk": summary.min_bulk,
            "ess_tail": summary.min_tail,
            "autocorr_lag1": summary.worst["autocorr_lag1"],
            "tau": summary.worst["tau"],
        }
        findings.extend(_variable_findings(name, summary, rhat_threshold, ess_threshold, advice))


class _VariableSummary(NamedTuple):
    """The mixing statistics of one posterior variable (all its elements).

    ``worst``: the :func:`_rhat_ess` statistics of the element with the largest R-hat
    (then smallest bulk ESS), named ``label``; ``min_bulk``, ``min_tail``: the smallest
    ESS over the elements; ``constant``: every element is constant in every chain;
    ``first``: the variable's first value; ``chains``, ``draws``: the sizes.
    """

    label: str
    worst: dict
    min_bulk: float
    min_tail: float
    constant: bool
    first: float
    chains: int
    draws: int


def _badness(st: dict) -> tuple[float, float]:
    """Order elements by R-hat (NaN last), then by smaller bulk ESS."""
    rhat = st["rhat"] if (np.isfinite(st["rhat"]) or st["stuck_apart"]) else -math.inf
    ess = st["ess_bulk"] if np.isfinite(st["ess_bulk"]) else math.inf
    return rhat, -ess


def _min_finite(values: list[float]) -> float:
    return float(np.nanmin(values)) if any(np.isfinite(v) for v in values) else math.nan


def _summarise_variable(name: str, arr: np.ndarray) -> _VariableSummary:
    """The :class:`_VariableSummary` of draws ``arr`` of shape ``(chains, draws, *element shape)``."""
    chains, draws = arr.shape[:2]
    flat = arr.reshape(chains, draws, -1)
    extra_shape = arr.shape[2:]
    stats = [_rhat_ess(flat[:, :, k]) for k in range(flat.shape[-1])]
    k_worst = max(range(len(stats)), key=lambda k: _badness(stats[k]))
    worst_index = np.unravel_index(k_worst, extra_shape) if extra_shape else ()
    return _VariableSummary(
        _element_label(name, tuple(int(i) for i in worst_index)),
        stats[k_worst],
        _min_finite([s["ess_bulk"] for s in stats]),
        _min_finite([s["ess_tail"] for s in stats]),
        all(s["constant"] for s in stats),
        float(flat.flat[0]),
        chains,
        draws,
    )


def _variable_findings(name, summary: _VariableSummary, rhat_threshold, ess_threshold, advice) -> list[Finding]:
    """The findings of one variable: constant, stuck apart, or not mixed (R-hat); else low bulk/tail ESS."""
    label, worst, min_bulk, min_tail = summary.label, summary.worst, summary.min_bulk, summary.min_tail
    chains, draws = summary.chains, summary.draws
    means = ", ".join(_fmt(m) for m in worst["chain_means"][:8]) + (" ..." if chains > 8 else "")
    if worst["constant"] and summary.constant:
        return [
            Finding(
                "warning",
                label,
                f"{label} never changes ({_fmt(summary.first)} in every chain and draw): R-hat and ESS are "
                "undefined; the chains may not be moving at all, or the statistic is constant under the model",
            )
        ]
    if worst["stuck_apart"]:
        return [
            Finding(
                "error",
                label,
                f"chains disagree on {label} and none of them moves: each chain is constant, at different values "
                f"(chain means {means}); R-hat is infinite. The chains are stuck in different modes; " + advice,
                math.inf,
                rhat_threshold,
            )
        ]
    if np.isfinite(worst["rhat"]) and worst["rhat"] > rhat_threshold:
        # low ESS follows from the disagreement; one finding per statistic
        return [
            Finding(
                "error",
                label,
                f"chains disagree on {label}: R-hat {worst['rhat']:.4g} > {rhat_threshold} (chain means {means}). "
                f"The chains have not mixed (they explore different regions, e.g. different modes; bulk ESS "
                f"{_fmt(min_bulk)}); {advice}",
                worst["rhat"],
                rhat_threshold,
            )
        ]
    found = []
    total = chains * draws
    ac = worst["autocorr_lag1"]
    tau = worst["tau"]
    if np.isfinite(min_bulk) and min_bulk < ess_threshold:
        found.append(
            Finding(
                "warning",
                f"{name} (bulk ESS)",
                f"bulk effective sample size of {name} is {_fmt(min_bulk)} < {_fmt(ess_threshold)} from "
                f"{chains}x{draws} = {total} draws (lag-1 autocorrelation {_fmt(ac)}, autocorrelation time "
                f"~{_fmt(tau)} draws): run about {_fmt(math.ceil(total * ess_threshold / max(min_bulk, 1.0)))} "
                "draws in total or use a better-mixing kernel",
                min_bulk,
                ess_threshold,
            )
        )
    if np.isfinite(min_tail) and min_tail < ess_threshold:
        found.append(
            Finding(
                "warning",
                f"{name} (tail ESS)",
                f"tail effective sample size of {name} is {_fmt(min_tail)} < {_fmt(ess_threshold)}: "
                "the 5% and 95% quantiles are poorly estimated (for discrete statistics with few distinct "
                "values tail ESS is pessimistic); run longer",
                min_tail,
                ess_threshold,
            )
        )
    return found


def swap_rates(idata_or_result: Any) -> np.ndarray:
    """Per-pair parallel-tempering swap acceptance: mean over attempted steps and all chains.

    Pair ``h`` is ``(beta_h, beta_{h+1})``; ``nan`` for a pair never attempted.
    Accepts the ``InferenceData`` of :func:`to_arviz` or a ``SampleResult`` of a PT run.
    """
    from ugm_infer.sampling import SampleResult

    if isinstance(idata_or_result, SampleResult):
        infos = idata_or_result.infos
        acc, att = getattr(infos, "swap_acceptance", None), getattr(infos, "swap_attempted", None)
    else:
        _check_idata(idata_or_result, "idata_or_result")
        ss = getattr(idata_or_result, "sample_stats", None)
        acc = None if ss is None or "swap_acceptance" not in ss else ss["swap_acceptance"].values
        att = None if ss is None or "swap_attempted" not in ss else ss["swap_attempted"].values
    if acc is None or att is None:
        raise ValueError("not a parallel-tempering run: no swap_acceptance / swap_attempted kernel infos")
    acc = np.asarray(acc, np.float64)
    att = np.asarray(att, np.float64)
    axes = tuple(range(acc.ndim - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (acc * att).sum(axis=axes) / att.sum(axis=axes)


def _check_kernels(idata, min_swap_rate, min_tt_acceptance, findings, table) -> None:
    ss = getattr(idata, "sample_stats", None)
    if ss is None:
        return
    betas = None
    cd = getattr(idata, "constant_data", None)
    if cd is not None and "betas" in cd:
        betas = np.asarray(cd["betas"].values)
    if "swap_acceptance" in ss and "swap_attempted" in ss:
        rates = swap_rates(idata)
        table["swap_rate"] = rates
        shown = ", ".join(_fmt(r) for r in rates)
        findings.append(Finding("info", "swap_rate", f"parallel-tempering swap rates per pair (hot to cold): {shown}"))
        for h, rate in enumerate(rates):
            if np.isfinite(rate) and rate < min_swap_rate:
                where = f"pair ({h}, {h + 1})"
                if betas is not None and len(betas) == len(rates) + 1:
                    where += f" between beta={_fmt(betas[h])} and beta={_fmt(betas[h + 1])}"
                findings.append(
                    Finding(
                        "warning",
                        f"swap_rate[{h},{h + 1}]",
                        f"replicas rarely swap at {where}: swap rate {_fmt(rate)} < {min_swap_rate}. This pair is a "
                        "bottleneck (often a phase transition between the two temperatures): add betas between them or "
                        "adapt the ladder with ui.kernels.adapt_ladder",
                        float(rate),
                        min_swap_rate,
                    )
                )
        if "round_trips" in ss:
            trips = np.asarray(ss["round_trips"].values)
            per_chain = trips.reshape(trips.shape[0], -1).max(axis=1)
            table["round_trips"] = per_chain
            if np.all(per_chain == 0):
                findings.append(
                    Finding(
                        "warning",
                        "round_trips",
                        "no walker completed a round trip from the hottest to the coldest temperature and back in any "
                        f"chain ({ss.sizes['draw']} recorded steps): information from the hot end has not reached "
                        "beta = 1; run longer, add betas at the slow pairs, or lower the smallest beta",
                        0.0,
                    )
                )
    if "acceptance_probability" in ss and "log_ratio_terms" in ss:
        acc = float(np.mean(ss["acceptance_probability"].values))
        table["tt_acceptance"] = acc
        if acc < min_tt_acceptance:
            terms = np.asarray(ss["log_ratio_terms"].values, np.float64)
            spread = terms.reshape(-1, terms.shape[-1]).std(axis=0)
            worst = int(np.argmax(spread))
            where = f"rung {worst}"
            if betas is not None and len(betas) == terms.shape[-1] + 1:
                where += f" (beta={_fmt(betas[worst])} to {_fmt(betas[worst + 1])})"
            findings.append(
                Finding(
                    "warning",
                    "tt_acceptance",
                    f"tempered transitions accept only {_fmt(acc)} of their proposals (< {min_tt_acceptance}): the "
                    f"kernel rarely moves. The largest spread of the log acceptance ratio comes from {where}; add "
                    "betas (more rungs) or narrow the range, or adapt the ladder with "
                    "ui.kernels.adapt_ladder(..., method='tempered_transitions')",
                    acc,
                    min_tt_acceptance,
                )
            )
        else:
            findings.append(Finding("info", "tt_acceptance", f"tempered-transitions acceptance {_fmt(acc)}", acc))
    if "num_changed" in ss:
        changed = np.asarray(ss["num_changed"].values)
        if np.all(changed == 0):
            findings.append(
                Finding(
                    "error",
                    "num_changed",
                    "no chain changed a single site in any recorded step: the chains are frozen (a zero temperature, "
                    "infinite couplings or a deterministic conditional)",
                    0.0,
                )
            )
    if "acceptance_rate" in ss:
        acc = float(np.mean(ss["acceptance_rate"].values))
        table["acceptance_rate"] = acc
        if acc < 0.01:
            findings.append(
                Finding(
                    "warning",
                    "acceptance_rate",
                    f"Metropolis accepts only {_fmt(acc)} of its proposals: the chains barely move; use Gibbs "
                    "(heat-bath) updates or tempering",
                    acc,
                    0.01,
                )
            )


def _check_smc(idata, min_smc_ess, findings, table) -> None:
    smc = idata["smc"]
    n = int(smc.attrs.get("num_particles", 0))
    if "ess" in smc:
        ess = np.asarray(smc["ess"].values, np.float64)
        lam = np.asarray(smc["tempering_param"].values, np.float64) if "tempering_param" in smc else None
        if np.all(np.isnan(ess)):
            return
        r, t = np.unravel_index(int(np.nanargmin(ess)), ess.shape)
        low = float(ess[r, t])
        num_steps = np.asarray(smc["num_steps"].values) if "num_steps" in smc else None
        table["smc_min_ess"] = low
        if num_steps is not None:
            table["smc_num_steps"] = num_steps
            findings.append(
                Finding(
                    "info",
                    "num_betas",
                    f"tempered SMC used {_fmt(float(np.mean(num_steps)))} tempering steps on average "
                    f"(min {int(np.min(num_steps))}, max {int(np.max(num_steps))}) over {len(num_steps)} replicates",
                )
            )
        if low < min_smc_ess:
            at = f" (lambda={_fmt(lam[r, t])})" if lam is not None else ""
            findings.append(
                Finding(
                    "warning",
                    "smc_ess",
                    f"SMC effective sample size collapsed to {_fmt(low)} N (< {min_smc_ess} N) at step {t} of replicate "
                    f"{r}{at}: the weights degenerate there, so log Z and its standard error are unreliable; use a "
                    "higher target_ess (more, smaller tempering steps), more MCMC steps per SMC step, or more particles",
                    low,
                    min_smc_ess,
                )
            )
    elif "ess" in smc.attrs:
        ess = float(smc.attrs["ess"])
        table["ais_ess"] = ess
        if ess < min_smc_ess:
            findings.append(
                Finding(
                    "warning",
                    "ais_ess",
                    f"AIS weights are degenerate: ESS {_fmt(ess)} M (< {min_smc_ess} M, M = {n} runs); the estimate of "
                    "log Z is dominated by a few runs and log_Z_se is unreliable; use more betas or more runs",
                    ess,
                    min_smc_ess,
                )
            )


def _check_learner(idata, min_smc_ess, max_resample_fraction, findings, table) -> None:
    if "learner_stats" not in idata.groups():
        return
    stats = idata["learner_stats"]
    num_particles = idata.posterior.sizes["draw"] if "posterior" in idata.groups() else None
    if "resampled" in stats and stats["resampled"].size:
        frac = float(np.nanmean(np.asarray(stats["resampled"].values, np.float64)))
        table["resample_fraction"] = frac
        if frac >= max_resample_fraction:
            findings.append(
                Finding(
                    "warning",
                    "resampled",
                    f"the particle filter resampled at {frac:.0%} of the updates (>= {max_resample_fraction:.0%}): "
                    "the importance weights degenerate within one parameter step, so the learner is in effect PCD; "
                    "lower the learning rate, raise the weight temperature T, or lower ess_threshold",
                    frac,
                    max_resample_fraction,
                )
            )
    for field in ("min_ess", "ess"):
        if field in stats and stats[field].size and num_particles:
            ess = np.asarray(stats[field].values, np.float64) / num_particles
            low = float(np.nanmin(ess))
            table[f"learner_{field}"] = low
            if low < min_smc_ess:
                findings.append(
                    Finding(
                        "warning",
                        field,
                        f"the learner's particle ESS fell to {_fmt(low)} N (< {min_smc_ess} N) at step "
                        f"{int(np.asarray(stats['step'].values)[int(np.nanargmin(ess))])}: the weighted negative phase "
                        "rests on a few particles there; lower the learning rate or use more bridges/particles",
                        low,
                        min_smc_ess,
                    )
                )
            break
    if "capped" in stats and stats["capped"].size:
        frac = float(np.nanmean(np.asarray(stats["capped"].values, np.float64)))
        if frac > 0:
            findings.append(
                Finding(
                    "warning",
                    "capped",
                    f"{frac:.0%} of the SMC updates hit max_bridges before reaching the target ESS: raise max_bridges "
                    "or lower the learning rate",
                    frac,
                    0.0,
                )
            )
    if "num_bridges" in stats and stats["num_bridges"].size:
        nb = np.asarray(stats["num_bridges"].values, np.float64)
        table["num_bridges"] = float(np.nanmean(nb))
        findings.append(
            Finding(
                "info",
                "num_bridges",
                f"{_fmt(float(np.nanmean(nb)))} bridges per update on average (max {_fmt(np.nanmax(nb))})",
            )
        )


def _check_threshold(value: Any, name: str, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number, got {type(value).__name__}")
    value = float(value)
    if not (low < value < high):
        raise ValueError(f"`{name}` must lie in ({low}, {high}), got {value}")
    return value


def diagnose(
    result: Any,
    *,
    model: Any = None,
    params: Any = None,
    statistics: Mapping[str, Callable] | None = None,
    betas: Any = None,
    var_names: Any = None,
    rhat_threshold: float = RHAT_THRESHOLD,
    ess_threshold: float = ESS_THRESHOLD,
    min_swap_rate: float = MIN_SWAP_RATE,
    min_tt_acceptance: float = MIN_TT_ACCEPTANCE,
    min_smc_ess: float = MIN_SMC_ESS,
    max_resample_fraction: float = MAX_RESAMPLE_FRACTION,
) -> Diagnosis:
    """Check a run for mixing problems and explain them in plain language.

    Parameters
    ----------
    result
        An :class:`arviz.InferenceData` from :func:`to_arviz` or
        ``arviz.from_numpyro`` (``sample_stats`` named ``info.<field>`` are read as
        ``<field>``), or anything :func:`to_arviz` accepts, including a
        ``numpyro.infer.MCMC`` run (converted with ``model``, ``params``,
        ``statistics`` and ``betas``).
    var_names
        Posterior statistics to check (default: all but raw configurations).
    rhat_threshold
        Rank-normalised split R-hat above this means the chains disagree (1.01,
        Vehtari et al. 2021).  Any value above it is reported as an ``error``.
    ess_threshold
        Bulk and tail ESS below this (total over chains) is a ``warning`` (400,
        Vehtari et al. 2021).
    min_swap_rate, min_tt_acceptance, min_smc_ess, max_resample_fraction
        Kernel thresholds (see the module docstring for where they come from).

    Returns
    -------
    Diagnosis
        ``ok`` is ``True`` when nothing is an error or a warning; ``str(diagnosis)``
        lists the findings.

    Notes
    -----
    R-hat is only meaningful across chains started from dispersed points — for a
    multimodal model start chains in different modes.  For SMC, AIS and learner
    particles the draws are (weighted) exchangeable particles, not Markov chains, so
    R-hat and ESS of the posterior are not computed there; their weight
    degeneracy is checked instead.
    """
    import arviz as az

    rhat_threshold = _check_threshold(rhat_threshold, "rhat_threshold", 1.0)
    ess_threshold = _check_threshold(ess_threshold, "ess_threshold", 0.0)
    min_swap_rate = _check_threshold(min_swap_rate, "min_swap_rate", 0.0, 1.0)
    min_tt_acceptance = _check_threshold(min_tt_acceptance, "min_tt_acceptance", 0.0, 1.0)
    min_smc_ess = _check_threshold(min_smc_ess, "min_smc_ess", 0.0, 1.0)
    max_resample_fraction = _check_threshold(max_resample_fraction, "max_resample_fraction", 0.0, 1.0 + 1e-12)
    if isinstance(result, az.InferenceData):
        if any(x is not None for x in (model, params, statistics, betas)):
            raise ValueError("`model`, `params`, `statistics` and `betas` only apply when `result` is not InferenceData")
        idata = undotted_sample_stats(result)
    else:
        idata = to_arviz(result, model=model, params=params, statistics=statistics, betas=betas)
    if var_names is not None:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
    kind = str(idata.attrs.get(_KIND_ATTR, "sample"))
    findings: list[Finding] = []
    table: dict = {}
    if kind == "sample" and "posterior" in idata.groups():
        _check_posterior(idata, var_names, rhat_threshold, ess_threshold, findings, table)
    elif kind == "sample" and var_names:
        raise ValueError("`var_names` given but the run has no posterior statistics")
    _check_kernels(idata, min_swap_rate, min_tt_acceptance, findings, table)
    if "smc" in idata.groups():
        _check_smc(idata, min_smc_ess, findings, table)
    if kind == "fit":
        _check_learner(idata, min_smc_ess, max_resample_fraction, findings, table)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: order[f.severity])
    return Diagnosis(tuple(findings), table)
