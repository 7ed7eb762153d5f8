"""NumPyro models as energies: the discrete latent sites of a model, given everything else.

:func:`energy_model_from_numpyro` turns a NumPyro model into an
:class:`~ugm_infer.EnergyModel` over its discrete latent sites with

.. math::  E(\\theta, x) = -\\log p(x, z, y_{\\mathrm{obs}} \\mid \\theta),

where :math:`\\theta` are the model's keyword arguments and :math:`z` the values of its
continuous latent sites (both are the energy's ``params``).  The helpers below are
shared with the HMC-within-Gibbs kernel of :mod:`ugm_infer.numpyro._gibbs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from ugm_infer.domains import Binary, Categorical
from ugm_infer.model import EnergyModel

__all__ = ["NumPyroEnergyModel", "energy_model_from_numpyro", "log_joint", "site_domain"]


class NumPyroEnergyModel(EnergyModel):
    """An :class:`~ugm_infer.EnergyModel` built from a NumPyro model (see :func:`energy_model_from_numpyro`).

    Attributes
    ----------
    numpyro_model
        The NumPyro model, conditioned on ``observed``.
    model_args
        Its fixed positional arguments.
    example_params
        A valid ``params``: the keyword arguments given when it was built and the values
        of the continuous latent sites in a trace of the model.
    continuous_sites
        Names of the continuous latent sites (keys of ``params`` besides the keyword
        arguments).
    observed
        ``{site: value}`` of every observed sample site (``obs=`` and ``observed=``;
        ``numpyro.factor`` terms excluded).
    numpyro_model_bound
        A zero-argument NumPyro model calling ``numpyro_model(*model_args,
        **keyword arguments)`` (what ``arviz.from_numpyro`` replays for plate dims and
        observed data).
    """

    numpyro_model: Callable
    model_args: tuple
    example_params: dict
    continuous_sites: tuple
    observed: dict
    numpyro_model_bound: Callable


def site_domain(name: str, fn: Any, value: Any, dtype: Any = None):
    """The ugm_infer domain of a discrete latent sample site, or a ValueError naming the site.

    ``dtype`` is the storage dtype of the states (default: the domain's own, float32
    for :class:`~ugm_infer.Binary`, int32 for :class:`~ugm_infer.Categorical`).
    """
    if fn.event_shape != ():
        hint = (
            "declare independent sites with `numpyro.plate` (or `.expand(shape)` without `.to_event`)"
            if isinstance(fn, dist.Independent)
            else "only scalar-event distributions (Bernoulli, Categorical, ...) batched by plates are supported"
        )
        raise ValueError(
            f"latent site '{name}' has event shape {fn.event_shape} ({type(fn).__name__}); {hint}. "
            "A `.to_event(n)` discrete site cannot be enumerated site by site"
        )
    shape = tuple(int(s) for s in jnp.shape(value))
    support = fn.support
    kwargs = {} if dtype is None else {"dtype": dtype}
    if support is constraints.boolean:
        return Binary(shape, **kwargs)
    if isinstance(support, constraints.integer_interval):
        low = np.asarray(support.lower_bound)
        high = np.asarray(support.upper_bound)
        if low.size and np.all(low == 0) and high.size and np.all(high == high.reshape(-1)[0]):
            return Categorical(shape, int(high.reshape(-1)[0]) + 1, **kwargs)
        raise ValueError(
            f"latent site '{name}' has support {support} (lower {low.tolist()}, upper {high.tolist()}); "
            "supported discrete supports are {0, 1} and {0, ..., K-1} with one K for the whole site"
        )
    raise ValueError(
        f"latent site '{name}' has support {support} ({type(fn).__name__}); supported discrete supports are "
        "{0, 1} (Bernoulli) and {0, ..., K-1} (Categorical, Binomial, ...); unbounded supports (Poisson, "
        "Geometric) cannot be enumerated"
    )


def log_joint(numpyro_model: Callable, model_args: tuple, model_kwargs: dict, values: dict) -> jax.Array:
    """:math:`\\log p` of the model with ``values`` substituted (:func:`numpyro.infer.util.log_density`)."""
    return numpyro.infer.util.log_density(numpyro_model, model_args, model_kwargs, values)[0]


def trace_model(numpyro_model: Callable, model_args: tuple, model_kwargs: dict, rng_key: Any = 0) -> dict:
    """A trace of the model (values drawn from the prior), or a ValueError saying why it failed."""
    try:
        seeded = numpyro.handlers.seed(numpyro_model, rng_seed=rng_key)
        return numpyro.handlers.trace(seeded).get_trace(*model_args, **model_kwargs)
    except Exception as err:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"tracing the NumPyro model {getattr(numpyro_model, '__name__', numpyro_model)!r} with the given "
            f"arguments failed: {type(err).__name__}: {err}"
        ) from err


def latent_sites(trace: Mapping[str, dict]) -> tuple[dict, dict]:
    """``({name: site} discrete, {name: site} continuous)`` latent sample sites of a trace.

    A site is discrete when its support is (``Bernoulli``, ``Categorical``, ``Poisson``,
    ...); its domain is checked separately by :func:`site_domain`.
    """
    discrete, continuous = {}, {}
    for name, site in trace.items():
        if site["type"] != "sample" or site["is_observed"]:
            continue
        (discrete if site["fn"].support.is_discrete else continuous)[name] = site
    return discrete, continuous


def _check_param_value(key: str, value: Any):
    try:
        arr = jnp.asarray(value)
    except TypeError as err:
        raise TypeError(
            f"model keyword argument '{key}' becomes a parameter and must be numeric (an array or a number), "
            f"got {type(value).__name__}; pass non-numeric arguments positionally"
        ) from err
    if not (jnp.issubdtype(arr.dtype, jnp.number) or arr.dtype == jnp.bool_):
        raise TypeError(f"model keyword argument '{key}' must be numeric, got dtype {arr.dtype}")
    return arr


def _is_data(site: dict) -> bool:
    """An observed sample site that is data (``obs=``/``observed=``), not a ``numpyro.factor``."""
    return site["type"] == "sample" and site["is_observed"] and not isinstance(site["fn"], dist.Unit)


def _params_validator(shapes: dict[str, tuple]) -> Callable[[Any], None]:
    """``validate_params(params)``: a dict with exactly these keys and shapes."""
    keys = list(shapes)

    def validate_params(params):
        if not isinstance(params, Mapping):
            raise ValueError(
                f"`params` must be a dict of the model's keyword arguments and continuous latent sites {keys}, "
                f"got {type(params).__name__}"
            )
        missing, extra = [k for k in keys if k not in params], sorted(set(params) - set(keys))
        if missing or extra:
            raise ValueError(f"`params` must have exactly the keys {keys}: missing {missing}, unexpected {extra}")
        for k in keys:
            if tuple(jnp.shape(params[k])) != shapes[k]:
                raise ValueError(f"`params['{k}']` has shape {tuple(jnp.shape(params[k]))}; expected {shapes[k]}")

    return validate_params


def _check_sites(trace: Mapping[str, dict], observed: Mapping[str, Any]) -> tuple[dict, dict]:
    """Discrete domains and continuous latent values of the traced model (errors name the site)."""
    sample_sites = {n: s for n, s in trace.items() if s["type"] == "sample"}
    unknown = sorted(set(observed) - set(sample_sites))
    if unknown:
        raise ValueError(f"`observed` names {unknown}, which are not sample sites of the model; sites: {list(sample_sites)}")
    param_sites = [n for n, s in trace.items() if s["type"] == "param"]
    if param_sites:
        raise ValueError(
            f"numpyro.param sites {param_sites} are not supported; make them keyword arguments of the model "
            "(the keyword arguments are the EnergyModel's params)"
        )
    discrete, continuous = latent_sites(trace)
    if not discrete:
        detail = "".join(
            f"; latent site '{n}' is continuous ({type(s['fn']).__name__}, support {s['fn'].support})"
            for n, s in continuous.items()
        )
        raise ValueError(
            "the NumPyro model has no latent (unobserved) discrete sample site: there is nothing to sample" + detail
        )
    domains = {name: site_domain(name, site["fn"], site["value"]) for name, site in discrete.items()}
    return domains, {name: jnp.asarray(site["value"]) for name, site in continuous.items()}


def energy_model_from_numpyro(
    numpyro_model: Callable,
    *model_args: Any,
    observed: Mapping[str, Any] | None = None,
    blocks: Any = None,
    multilinear: bool | None = None,
    **model_kwargs: Any,
) -> NumPyroEnergyModel:
    """An :class:`~ugm_infer.EnergyModel` over the discrete latent sites of a NumPyro model.

    .. math::  E(\\theta, x) = -\\log p(x, z, y_{\\mathrm{obs}} \\mid \\theta)
               = -\\sum_{\\mathrm{sites}} \\log p_{\\mathrm{site}} - \\sum \\mathrm{factors},

    evaluated by :func:`numpyro.infer.util.log_density`, so :math:`\\exp(-E)` is
    proportional to the conditional posterior :math:`p(x \\mid z, y_{\\mathrm{obs}},
    \\theta)` of the discrete sites :math:`x` given the continuous latent sites
    :math:`z` (the normalising constants of the priors only shift :math:`\\log Z`).

    Parameters
    ----------
    numpyro_model
        A NumPyro model.  Its discrete latent sample sites must have support ``{0, 1}``
        (``Bernoulli`` -> :class:`~ugm_infer.Binary`) or ``{0, ..., K-1}``
        (``Categorical`` and others -> :class:`~ugm_infer.Categorical` ``(K)``), with
        independent elements batched by ``numpyro.plate`` (not ``.to_event``).  Shapes
        come from a trace of the model.  Couplings are ``numpyro.factor`` terms.
    *model_args
        Positional arguments of the model, fixed (closed over) in the energy: data,
        sizes, anything that is not a parameter.
    observed
        ``{site: value}`` conditioning sample sites (like
        ``numpyro.handlers.condition``); sites with ``obs=`` are observed too.
    blocks, multilinear
        Passed to :class:`~ugm_infer.EnergyModel`; leave ``None`` to detect them.
    **model_kwargs
        Keyword arguments of the model: they are **parameters**.

    Returns
    -------
    A :class:`NumPyroEnergyModel` with one variable per discrete latent site.  Its
    ``params`` is the dict of the (numeric) keyword arguments and of the values of the
    continuous latent sites (traced: new values need no recompilation, learners can fit
    them); ``example_params`` holds those given here and of one trace.  Blocks are
    probed with ``n^2`` energy evaluations (NumPyro's log-probabilities are non-smooth in
    the state); pass ``blocks=`` to skip the probe.

    Raises
    ------
    ValueError
        No discrete latent site; ``.to_event`` or unbounded or shifted discrete supports;
        ``numpyro.param`` sites; unknown ``observed`` sites; keywords named like sites.
    TypeError
        A non-callable model, non-numeric keyword arguments.

    Examples
    --------
    >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist, ugm_infer as ui
    >>> def chain(J, h):
    ...     with numpyro.plate("site", 3):
    ...         x = numpyro.sample("x", dist.Bernoulli(0.5))
    ...     s = 2.0 * x - 1.0
    ...     numpyro.factor("coupling", J * jnp.sum(s[:-1] * s[1:]) + h @ s)
    >>> model = ui.numpyro.energy_model_from_numpyro(chain, J=0.5, h=jnp.zeros(3))
    >>> model.variables
    {'x': Binary(shape=(3,), dtype=float32)}
    >>> round(float(model.energy({"J": 0.5, "h": jnp.zeros(3)}, {"x": jnp.ones(3)})), 4)  # -(1.0) + 3 log 2
    1.0794
    """
    if not callable(numpyro_model):
        raise TypeError(f"`numpyro_model` must be a callable NumPyro model, got {type(numpyro_model).__name__}")
    if observed is not None and not isinstance(observed, Mapping):
        raise TypeError(f"`observed` must be a dict {{site: value}}, got {type(observed).__name__}")
    observed = {str(k): jnp.asarray(v) for k, v in (observed or {}).items()}
    kwargs = {k: _check_param_value(k, v) for k, v in model_kwargs.items()}
    conditioned = numpyro.handlers.condition(numpyro_model, data=observed) if observed else numpyro_model
    args = tuple(model_args)
    trace = trace_model(conditioned, args, kwargs)
    variables, continuous = _check_sites(trace, observed)
    clash = sorted(set(continuous) & set(kwargs))
    if clash:
        raise ValueError(f"keyword arguments {clash} are named like latent sites of the model; rename them")
    keys, sites = tuple(kwargs), tuple(continuous)

    def energy_fn(params, state):
        values = {**{k: params[k] for k in sites}, **state}
        return -log_joint(conditioned, args, {k: params[k] for k in keys}, values)

    example = {**kwargs, **continuous}
    model = NumPyroEnergyModel(
        energy_fn,
        variables,
        blocks,
        multilinear=multilinear,
        validate_params=_params_validator({k: tuple(jnp.shape(v)) for k, v in example.items()}),
        name=f"numpyro:{getattr(numpyro_model, '__name__', 'numpyro_model')}",
    )
    model.numpyro_model, model.model_args, model.example_params, model.continuous_sites = conditioned, args, example, sites
    model.observed = {n: s["value"] for n, s in trace.items() if _is_data(s)}
    model.numpyro_model_bound = lambda: conditioned(*args, **kwargs)
    return model
