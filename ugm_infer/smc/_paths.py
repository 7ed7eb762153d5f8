r"""Annealing paths shared by tempered SMC and AIS: base distributions and tempered free energies.

Both estimators move particles along the geometric path between a normalised,
independent-sites *base* distribution :math:`p_0` and the target
:math:`p(x) \propto e^{-E(x)}`:

.. math::  f_\beta(x) = p_0(x)^{1 - \beta}\, e^{-\beta E(x)}, \qquad
           Z_\beta = \sum_x f_\beta(x), \qquad Z_0 = 1,\ Z_1 = Z.

Optionally one variable ``h`` whose sites do not interact (an RBM's hidden layer) is
summed in closed form along the path, so the particles live on the other variables
``x`` only (Salakhutdinov & Murray 2008, section 4.1).  With the base factorising as
:math:`p_0(x)\, p_0(h)` (every variable has a base; uniform unless given),

.. math::  f_\beta(x) = \sum_h \big(p_0(x) p_0(h)\big)^{1 - \beta} e^{-\beta E(x, h)}
           = p_0(x)^{1-\beta}\, e^{-F_\beta(x)}, \qquad Z_0 = 1,

where :math:`F_\beta` is the *tempered free energy* (:func:`tempered_free_energy`).
With :math:`r` the reference configuration of ``h`` (every site at its first value),
:math:`\delta_{ik} = E(x, r^{i \to k}) - E(x, r)` the cost of moving site
:math:`i` to value :math:`k` and :math:`L_{ik} = \log p_0(h_i = k)`, non-interaction
makes the energy (and the base) a sum of single-site terms in ``h``, so

.. math::  F_\beta(x) = \beta E(x, r) - \sum_i \log \sum_k
           e^{(1-\beta) L_{ik} - \beta \delta_{ik}}, \qquad \delta_{i0} = 0.

Summing the *larger* layer is usually the better choice (fewer annealed dimensions);
a base over the summed layer (e.g. the data base rates of an RBM's visibles) still
shapes the path through :math:`L`.

For binary/spin sites and an energy affine in each site (every pairwise energy),
all :math:`\delta_{i1}` come from *one* gradient,
:math:`\delta_{i1} = (v_1 - v_0)\, \partial E / \partial h_i` evaluated at the
midpoint :math:`h_i = (v_0 + v_1)/2` (exact also with a diagonal :math:`h_i^2` term);
otherwise each of the :math:`|h|(K-1)` single-site changes is evaluated.

Base distributions (``base=``):

``"uniform"``
    every site uniform over its ``K`` values;
``"data"``
    the *base-rate* model: each site's marginal in ``data``, Laplace-smoothed,
    :math:`p_i(k) = (n_{ik} + \alpha) / (N + K\alpha)` with ``alpha = pseudo_count``
    (the RBM recipe of Salakhutdinov & Murray 2008, section 4.2); variables absent
    from ``data`` are uniform;
``{name: logits}``
    per-site logits of shape ``domain.shape + (K,)`` (normalised with a softmax);
    variables not named are uniform.

The base log-density is written affine in each binary/spin site,
:math:`\log p_0(x_i) = L_{i0} + t_i (L_{i1} - L_{i0})` with
:math:`t_i = (x_i - v_0)/(v_1 - v_0)`, so gradient-based block Gibbs updates stay
exact on the tempered density.

References
----------
Neal, R. M. (2001). Annealed importance sampling. Statistics and Computing 11, 125-139.
Salakhutdinov, R. and Murray, I. (2008). On the quantitative analysis of deep belief
networks. ICML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._random import categorical_shaped
from ugm_infer._random import split as split_key
from ugm_infer.domains import Binary, Domain, Spin
from ugm_infer.exact import _as_float, single_site_deltas
from ugm_infer.kernels import checkerboard, potts_lattice
from ugm_infer.kernels._common import is_concrete, resolve_structure
from ugm_infer.kernels._updates import SiteLogitsLogDensity
from ugm_infer.kernels.pairwise import CouplingLogDensity

__all__ = [
    "base_log_probs",
    "float_dtype",
    "base_logdensity",
    "is_uniform_base",
    "bridge_logdensity",
    "sample_base",
    "resolve_latent",
    "latent_deltas",
    "tempered_free_energy",
    "free_energy_difference",
]

BASES = ("uniform", "data")
_AUTO = "auto"


# ======================================================================================
# argument checks shared by the estimators
# ======================================================================================
def check_model(model: Any) -> None:
    from ugm_infer.model import EnergyModel

    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


def check_key(rng_key: Any, argname: str = "rng_key") -> None:
    ok = hasattr(rng_key, "dtype") and (
        jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key) or (rng_key.dtype == jnp.uint32 and rng_key.shape == (2,))
    )
    if not ok:
        raise TypeError(f"`{argname}` must be a JAX PRNG key (jax.random.key(seed)), got {type(rng_key).__name__}")


def check_positive_int(value: Any, argname: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{argname}` must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"`{argname}` must be an int >= {minimum}, got {value}")
    return int(value)


def check_params(model: Any, params: Any) -> None:
    if is_concrete(params):
        model.validate_params(params)


def float_dtype(model: Any, params: Any) -> jnp.dtype:
    """The dtype log-weights accumulate in: the energy's, at least float32.

    float64 when ``jax_enable_x64`` is on and the energy computes in float64 (float64
    parameters); float32 otherwise.  Uses the model's cached energy check.
    """
    return jnp.promote_types(model.check_energy(params).dtype, jnp.float32)


def check_schedule(betas: Any, argname: str = "betas") -> np.ndarray:
    """A 1-D float array, strictly increasing from exactly 0 to exactly 1."""
    try:
        arr = np.asarray(betas, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`{argname}` must be a 1-D array of floats, got {type(betas).__name__}") from err
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(f"`{argname}` must be a 1-D array with at least 2 entries (0 and 1), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{argname}` contains NaN or inf")
    if arr[0] != 0.0 or arr[-1] != 1.0:
        raise ValueError(f"`{argname}` must start at 0 and end at 1, got {arr[0]} ... {arr[-1]}")
    steps = np.diff(arr)
    if np.any(steps <= 0):
        i = int(np.nonzero(steps <= 0)[0][0])
        raise ValueError(f"`{argname}` must be strictly increasing; entry {i + 1} ({arr[i + 1]}) <= entry {i} ({arr[i]})")
    return arr


# ======================================================================================
# base distributions
# ======================================================================================
def check_batched(model: Any, arrays: Mapping, argname: str, rows: str) -> tuple[dict[str, np.ndarray], int]:
    """Host arrays ``{name: (num, *shape)}`` of the model's variables, checked.

    Numeric dtype, shape ``(num, *domain shape)``, one leading size ``num >= 1`` for all
    (the number of ``rows``: ``"examples"``, ``"runs"``) and values in the domain.
    """
    out, num = {}, None
    for n, x in arrays.items():
        d = model.variables[n]
        arr = np.asarray(x)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"`{argname}['{n}']` must be numeric, got dtype {arr.dtype}")
        if arr.ndim != len(d.shape) + 1 or tuple(arr.shape[1:]) != d.shape or arr.shape[0] < 1:
            raise ValueError(
                f"`{argname}['{n}']` must have shape (num_{rows}, {', '.join(map(str, d.shape))}), got {arr.shape}"
            )
        if num is None:
            num = arr.shape[0]
        elif arr.shape[0] != num:
            raise ValueError(
                f"`{argname}` variables disagree on the number of {rows}: '{n}' has {arr.shape[0]}, expected {num}"
            )
        d.check_values(arr, f"`{argname}['{n}']`")
        out[n] = arr
    return out, int(num)


def _check_data(model: Any, data: Any, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not isinstance(data, Mapping) or not data:
        raise ValueError("`data` must be a non-empty dict {name: array (num_examples, *shape)}")
    for n in data:
        if n not in model.variables:
            raise ValueError(f"`data` names unknown variable '{n}'; the model has {list(model.variables)}")
        if n not in names:
            raise ValueError(
                f"`data` names '{n}', which is summed analytically (not annealed); annealed variables: {list(names)}"
            )
    return check_batched(model, data, "data", "examples")[0]


def _data_log_probs(domain: Domain, arr: np.ndarray, pseudo_count: float) -> np.ndarray:
    index = np.asarray(domain.to_index(jnp.asarray(arr)))
    k = domain.num_states
    counts = np.stack([np.sum(index == j, axis=0) for j in range(k)], axis=-1).astype(np.float64)
    probs = (counts + pseudo_count) / (arr.shape[0] + k * pseudo_count)
    with np.errstate(divide="ignore"):
        return np.log(probs)


def base_log_probs(
    model: Any,
    base: Any,
    names: tuple[str, ...],
    data: Any = None,
    pseudo_count: float = 1.0,
    *,
    dtype: Any = jnp.float32,
) -> dict[str, jax.Array]:
    """Normalised per-site log-probabilities ``{name: domain.shape + (K,)}`` of the base.

    Parameters
    ----------
    model
        The model.
    base
        ``"uniform"``, ``"data"`` or ``{name: logits}`` (see the module docstring).
    names
        The annealed variables (the base is a distribution over these).
    data
        ``{name: (num_examples, *shape)}`` for ``base="data"``.
    pseudo_count
        Laplace smoothing ``alpha > 0`` of the data base rates.
    dtype
        Float dtype of the result (see :func:`float_dtype`).

    Raises
    ------
    ValueError
        Unknown base, unknown or non-annealed variable names, logits of the wrong shape
        or not finite, ``base="data"`` without ``data``, a zero-probability site value
        (``pseudo_count = 0`` and a value never seen).
    """
    out = {}
    for n in names:
        d = model.variables[n]
        out[n] = np.full(d.shape + (d.num_states,), -np.log(d.num_states))
    if isinstance(base, str):
        if base not in BASES:
            raise ValueError(f"`base` must be one of {BASES} or a dict {{name: logits}}, got {base!r}")
        if base == "data":
            if data is None:
                raise ValueError('`base="data"` needs `data=` ({name: array (num_examples, *shape)})')
            try:
                alpha = float(pseudo_count)
            except (TypeError, ValueError) as err:
                raise ValueError(f"`pseudo_count` must be a float >= 0, got {pseudo_count!r}") from err
            if not np.isfinite(alpha) or alpha < 0:
                raise ValueError(f"`pseudo_count` must be a finite float >= 0, got {pseudo_count!r}")
            for n, arr in _check_data(model, data, names).items():
                lp = _data_log_probs(model.variables[n], arr, alpha)
                if not np.all(np.isfinite(lp)):
                    raise ValueError(
                        f"`data['{n}']` never shows some value at some site and `pseudo_count` is 0: the base "
                        "would give it probability 0; use pseudo_count > 0"
                    )
                out[n] = lp
        elif data is not None:
            raise ValueError('`data` is only used with `base="data"`')
    elif isinstance(base, Mapping):
        if data is not None:
            raise ValueError('`data` is only used with `base="data"`')
        for n, logits in base.items():
            if n not in model.variables:
                raise ValueError(f"`base` names unknown variable '{n}'; the model has {list(model.variables)}")
            if n not in names:
                raise ValueError(f"`base` names '{n}', which is summed analytically (not annealed); annealed: {list(names)}")
            d = model.variables[n]
            arr = np.asarray(logits, dtype=np.float64)
            expected = d.shape + (d.num_states,)
            if arr.shape != expected:
                raise ValueError(f"`base['{n}']` must have shape domain.shape + (K,) = {expected}, got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"`base['{n}']` must be finite (a value with probability 0 under the base breaks the annealing path)"
                )
            m = arr.max(axis=-1, keepdims=True)
            out[n] = arr - m - np.log(np.sum(np.exp(arr - m), axis=-1, keepdims=True))
    else:
        raise ValueError(f"`base` must be one of {BASES} or a dict {{name: logits}}, got {type(base).__name__}")
    return {n: jnp.asarray(v, dtype) for n, v in out.items()}


def base_logdensity(variables: Mapping[str, Domain], log_probs: Mapping[str, jax.Array], state: Mapping) -> jax.Array:
    """Normalised base log-density of one configuration (affine in each binary/spin site)."""
    total = jnp.zeros((), jnp.float32)
    for n, lp in log_probs.items():
        d = variables[n]
        x = state[n]
        if isinstance(d, (Binary, Spin)):
            v0, v1 = (float(v) for v in d.values)
            t = (x.astype(lp.dtype) - v0) / (v1 - v0)
            total = total + jnp.sum(lp[..., 0] + t * (lp[..., 1] - lp[..., 0]))
        else:
            idx = d.to_index(x)
            total = total + jnp.sum(jnp.take_along_axis(lp, idx[..., None], axis=-1))
    return total


def is_uniform_base(log_probs: Mapping[str, Any]) -> bool:
    """True when every site of every variable is uniform under the base (concrete ``log_probs``).

    Then :math:`(1-\\beta)\\log p_0` is a constant and the path's densities are the model's
    own tempered densities up to that constant (see :func:`bridge_logdensity`).
    """
    for lp in log_probs.values():
        arr = np.asarray(lp)
        if arr.size and not np.all(arr == arr[..., :1]):
            return False
    return True


def bridge_logdensity(
    model: Any, params: Any, variables: Mapping[str, Domain], log_probs: Mapping, beta: Any, uniform_base: bool
):
    r"""The path's log-density :math:`(1-\beta)\log p_0(x) - \beta E(x)` over all ``variables``, in the model's fast form.

    Built from ``model.logdensity_fn(params, beta)`` so that the block-Gibbs kernel
    keeps the model's exact fast sweeps along the path:

    * ``uniform_base`` (:func:`is_uniform_base`): the base term is a constant, so the
      model's own density is returned (lattice Ising and Potts sweeps, incremental
      fields, closed-form site log-odds, ERGM change statistics);
    * a :class:`~ugm_infer.kernels.pairwise.CouplingLogDensity`: the base is affine in
      each binary/spin site, so the bridge has the same pairwise couplings
      (:math:`\beta L` of a semi-RBM, :math:`\beta W` of a dense Boltzmann machine);
    * a :class:`~ugm_infer.kernels.SiteLogitsLogDensity`: the base adds
      :math:`(1-\beta)(L_{i1} - L_{i0})` to each binary/spin site's log-odds;
    * otherwise the plain sum.
    """
    own = model.logdensity_fn(params, beta)
    if uniform_base:
        return own

    def fn(x):
        return (1.0 - beta) * base_logdensity(variables, log_probs, x) + own(x)

    if isinstance(own, CouplingLogDensity):
        return CouplingLogDensity(fn, own.couplings)
    if isinstance(own, SiteLogitsLogDensity):
        shifts = {n: lp[..., 1] - lp[..., 0] for n, lp in log_probs.items() if isinstance(variables[n], (Binary, Spin))}

        def site_logits(position):
            logits = own.site_logits(position)
            return {n: v + (1.0 - beta) * shifts[n].astype(v.dtype) if n in shifts else v for n, v in logits.items()}

        return SiteLogitsLogDensity(fn, site_logits)
    return fn


def layout_energy(model: Any, params: Any, chain: Any):
    """``energy(chain)``: the model's energy of one chain kept in a lattice sweep's layout, read from it; or ``None``.

    For ``lattice_ising`` words (:meth:`~ugm_infer.models.LatticeIsing.energy_of_words`,
    the same integer sums as the energy, ``None`` when the energy function was replaced)
    and ``lattice_potts`` sub-lattices
    (:func:`~ugm_infer.kernels.potts_lattice.energy_of_sublattices`, equal up to float
    rounding).  ``chain`` is an example chain (it may be abstract): only its type is read.
    """
    if isinstance(chain, checkerboard.LatticeGibbsState):
        of_words, layout = getattr(model, "energy_of_words", None), type(chain).layout
        if of_words is None or jax.eval_shape(lambda c: of_words(params, layout, c.even, c.odd), chain) is None:
            return None
        return lambda c: of_words(params, layout, c.even, c.odd)
    if isinstance(chain, potts_lattice.PottsLatticeState):
        own = model.logdensity_fn(params)
        lat = potts_lattice.lattice_of(own, model)
        if lat != type(chain).lattice:
            return None
        tables = own.tables[: potts_lattice.NUM_TABLES]
        return lambda c: potts_lattice.energy_of_sublattices(lat, tuple(x[None] for x in c), tables)[0]
    return None


def sample_base(rng_key: jax.Array, variables: Mapping[str, Domain], log_probs: Mapping, num: int) -> dict:
    """``num`` independent draws from the base: ``{name: (num, *shape)}``."""
    keys = split_key(rng_key, len(log_probs))
    out = {}
    for key, (n, lp) in zip(keys, log_probs.items()):
        d = variables[n]
        out[n] = d.from_index(categorical_shaped(key, lp, (num,) + d.shape))
    return out


# ======================================================================================
# the analytically summed variable
# ======================================================================================
def resolve_latent(model: Any, params: Any, analytic: Any, with_base: tuple[str, ...] = ()) -> tuple[str | None, str | None]:
    """Which variable to sum analytically along the path, and how.

    Returns ``(name, method)`` with ``method`` in ``{"gradient", "enumeration"}``, or
    ``(None, None)``.  ``analytic="auto"`` picks, among the variables whose sites are
    mutually non-interacting (one block), the one with the most configurations
    (``size * log K``), provided another variable remains to anneal; variables given a
    non-uniform base (``with_base``: data base rates or logits) are passed over when
    another candidate exists, because starting the particles from a fitted base pays
    (e.g. an RBM with a base-rate base over ``v`` sums ``h``, as in SM08).
    """
    if analytic is None or analytic is False:
        return None, None
    if analytic is not True and not isinstance(analytic, str):
        raise ValueError(f"`analytic` must be 'auto', None or a variable name, got {analytic!r}")
    if isinstance(analytic, str) and analytic != _AUTO and analytic not in model.variables:
        raise ValueError(f"`analytic` names unknown variable '{analytic}'; the model has {list(model.variables)}")
    if len(model.variables) < 2:
        if analytic in (_AUTO, True):
            return None, None
        raise ValueError(f"`analytic='{analytic}'`: summing out the model's only variable leaves nothing to anneal")
    model = resolve_structure(model, params)
    candidates = model.non_interacting_variables()
    if analytic in (_AUTO, True):
        if not candidates:
            return None, None
        preferred = [n for n in candidates if n not in with_base] or candidates
        name = max(preferred, key=lambda n: model.variables[n].size * np.log(model.variables[n].num_states))
    else:
        name = analytic
        if name not in candidates:
            raise ValueError(
                f"`analytic='{name}'`: the sites of '{name}' interact with each other (they are not all in one "
                f"block), so it cannot be summed in closed form; summable: {candidates}"
            )
    return name, latent_method(model, name)


def latent_method(model: Any, name: str) -> str:
    d = model.variables[name]
    return "gradient" if (isinstance(d, (Binary, Spin)) and model.multilinear) else "enumeration"


def latent_deltas(model: Any, params: Any, rest: Mapping, name: str, method: str) -> tuple[jax.Array, jax.Array]:
    r"""``(E(rest, r), delta)`` with ``delta[k - 1, i] = E(rest, r^{i -> k}) - E(rest, r)``, ``k >= 1``.

    ``r`` is the reference configuration of variable ``name`` (every site at its first
    value).  ``method="gradient"`` uses one gradient at the midpoint (binary/spin,
    energy affine or quadratic in each site); ``"enumeration"`` evaluates every
    single-site change.  ``delta`` has shape ``(K - 1, size)``.
    """
    d = model.variables[name]
    values = d.values
    rest = {n: x for n, x in rest.items() if n != name}
    if method != "gradient":
        return single_site_deltas(model, params, rest, name)
    e0 = _as_float(model.energy(params, {**rest, name: jnp.full(d.shape, values[0]).astype(d.dtype)}))
    mid = jnp.full(d.shape, 0.5 * (values[0] + values[1]), dtype=e0.dtype)
    grad = jax.grad(lambda x: _as_float(model.energy(params, {**rest, name: x})))(mid)
    return e0, (grad.reshape(-1) * float(values[1] - values[0]))[None, :]


def _site_lse(delta: jax.Array, beta: Any, log_probs: jax.Array | None = None) -> jax.Array:
    r"""Per site :math:`\log \sum_{k \ge 0} \exp(g_{ik})`, :math:`g_{ik} = (1-\beta) L_{ik} - \beta \delta_{ik}`.

    ``delta`` is ``(K - 1, size)`` (with :math:`\delta_{i0} = 0` implied), ``log_probs``
    the base log-probabilities ``(*shape, K)`` of the summed variable or ``None``
    (:math:`L = 0`: a plain sum over the values).
    """
    neg = -beta * delta
    if log_probs is None:
        if delta.shape[0] == 1:
            return jnp.logaddexp(0.0, neg[0])
        g = jnp.concatenate([jnp.zeros((1,) + neg.shape[1:], neg.dtype), neg], axis=0)
    else:
        lp = log_probs.reshape(-1, log_probs.shape[-1]).T  # (K, size)
        g = (1.0 - beta) * lp + jnp.concatenate([jnp.zeros((1,) + neg.shape[1:], neg.dtype), neg], axis=0)
        if delta.shape[0] == 1:
            return jnp.logaddexp(g[0], g[1])
    m = jnp.max(g, axis=0)
    return m + jnp.log(jnp.sum(jnp.exp(g - m[None, :]), axis=0))


def tempered_free_energy(
    model: Any,
    params: Any,
    rest: Mapping,
    latent_name: str,
    beta: Any = 1.0,
    method: str | None = None,
    log_probs: jax.Array | None = None,
) -> jax.Array:
    r"""Tempered free energy :math:`F_\beta(x) = -\log \sum_h e^{-\beta E(x, h)}` of one configuration.

    Sums the variable ``latent_name`` (``h``), whose sites must be mutually
    non-interacting given the rest, in closed form:
    :math:`F_\beta = \beta E(x, r) - \sum_i \log \sum_k e^{-\beta \delta_{ik}}`
    (see the module docstring).  For an RBM at ``beta = 1`` this is the visible free
    energy :math:`-b^\top v - \sum_j \mathrm{softplus}(c_j + v^\top W_{:j})`.  With
    ``log_probs`` (an independent-sites base :math:`p_0(h)`, shape ``domain.shape +
    (K,)``) the summand carries the base factor of the geometric path:
    :math:`F_\beta(x) = -\log \sum_h p_0(h)^{1-\beta} e^{-\beta E(x, h)}`.

    Parameters
    ----------
    model, params
        The model (with known structure: declared blocks or probed) and parameters.
    rest
        One configuration of the other variables, ``{name: array}`` (a value for
        ``latent_name``, if present, is ignored).
    latent_name
        The summed variable.
    beta
        Inverse temperature (scalar, may be traced).
    method
        ``"gradient"`` (one gradient; binary/spin multilinear energies),
        ``"enumeration"`` (each value of each site; any energy), or ``None`` to choose.
    log_probs
        Optional normalised base log-probabilities of ``latent_name``.

    Returns
    -------
    Scalar :math:`F_\beta(x)`.
    """
    if method is None:
        if isinstance(model.variables[latent_name], (Binary, Spin)) and not model.has_structure:
            if not is_concrete(params):
                raise ValueError(
                    f"model '{model.name}': multilinearity is unknown and `params` are traced; pass `method=` or call "
                    "model.detect_structure(params) first"
                )
            model = resolve_structure(model, params)
        method = latent_method(model, latent_name)
    elif method not in ("gradient", "enumeration"):
        raise ValueError(f"`method` must be 'gradient', 'enumeration' or None, got {method!r}")
    e0, delta = latent_deltas(model, params, rest, latent_name, method)
    return beta * e0 - jnp.sum(_site_lse(delta, beta, log_probs))


def free_energy_difference(
    e0: jax.Array, delta: jax.Array, beta_from: Any, beta_to: Any, log_probs: jax.Array | None = None
) -> jax.Array:
    r""":math:`F_{b}(x) - F_{a}(x)` from ``latent_deltas``, summed site by site.

    Differences are formed per site before summing, so the result keeps its relative
    accuracy when each free energy is large (``|F|`` of hundreds, steps of ``1e-4``).
    """
    per_site = _site_lse(delta, beta_to, log_probs) - _site_lse(delta, beta_from, log_probs)
    return (beta_to - beta_from) * e0 - jnp.sum(per_site)
