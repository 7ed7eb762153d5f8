r"""Exact inference by enumeration, with one variable summed out analytically.

For a model :math:`p(x) = \exp(-E(\theta, x)) / Z(\theta)` over named discrete
variables, this module computes, exactly (up to floating point),

* :func:`log_partition` -- :math:`\log Z = \log \sum_x \exp(-E(x))`;
* :func:`log_prob` -- :math:`\log p(x) = -E(x) - \log Z`;
* :func:`log_likelihood` -- :math:`\log p(x_O) = -F(x_O) - \log Z` for observed
  variables :math:`O`, the missing ones summed out:
  :math:`F(x_O) = -\log \sum_{x_M} \exp(-E(x_O, x_M))`;
* :func:`marginals` -- every site's marginal distribution;
* :func:`expectation` -- :math:`\mathbb{E}_p[f(x)]` for any pytree-valued ``f``;
* :func:`sample` -- exact iid draws;
* :func:`distribution` -- every configuration and its probability (small models).

How the sum is organised
------------------------
**Enumeration.**  The configurations of the enumerated variables are numbered
``0 .. N-1`` in mixed radix over their sites (variables in declaration order, sites
row-major, the first site most significant; the same order as
``tests/stat_utils.state_index``).  They are visited in *chunks*: a chunk is the set
of all values of the trailing ``m`` sites, for the largest ``m`` whose number of
configurations fits ``chunk_size`` and a memory budget; the chunk id enumerates the
leading sites.  A configuration's index is ``chunk_id * chunk + offset``, but it is
never formed: chunk digits and offset digits are decoded separately with int32
arithmetic, so models with more than :math:`2^{31}` configurations are indexed
correctly.  Chunks are a ``lax.scan`` inside one jitted function; each chunk's
energies are ``vmap``-ed and reduced by a max-subtracted ``logsumexp``; the per-chunk
results are combined by a second ``logsumexp``.  Memory is bounded by the chunk, not
by ``N``, and the scan body is rematerialised (``jax.checkpoint``), so
``jax.grad(log_partition)`` -- :math:`\nabla_\theta \log Z = \mathbb{E}_p[-\nabla_\theta E]`
-- needs no more memory than the forward pass.

**Analytic summation over one variable.**  One variable ``V`` may be summed in closed
form instead of enumerated, which is what makes an RBM with 784 visible and ~20 hidden
units exact (:math:`2^{20}` hidden states, the visibles summed analytically):

1. if the model declares ``free_energy_fns[V]`` (e.g. the RBM free energy), it is used:
   :math:`F_V(x_{-V}) = -\log \sum_{x_V} \exp(-E)`;
2. otherwise, if the sites of ``V`` are mutually non-interacting (all in one block,
   :meth:`EnergyModel.non_interacting_variables`, found by probing if not declared),
   the energy is a sum of single-site terms in ``x_V`` given the rest, so with the
   reference state :math:`r` (every site of ``V`` at its first value) and
   :math:`\delta_{ik} = E(x_{-V}, r^{(i \to k)}) - E(x_{-V}, r)`,

   .. math::  F_V(x_{-V}) = E(x_{-V}, r) - \sum_i \log \sum_k \exp(-\delta_{ik}),
              \qquad p(x_{V,i} = k \mid x_{-V}) = \operatorname{softmax}_k(-\delta_{i\cdot}).

   For multilinear binary/spin energies all :math:`\delta_{i1}` come from one gradient,
   :math:`\delta_{i1} = \partial E / \partial x_i \,(v_1 - v_0)` taken at the midpoint
   :math:`(v_0 + v_1)/2` (exact for any energy of degree at most 2 in each site);
   otherwise each of the :math:`|V|(K-1)` single-site changes is evaluated (vmapped).

**Which variable.**  ``sum_out="auto"`` picks, among the candidates (variables with a
``free_energy_fns`` entry, and non-interacting variables), the one with the most
configurations (``size * log K``): that minimises the number left to enumerate.
Structure is probed with :meth:`EnergyModel.detect_structure` only when a variable
without a free energy could beat the best free-energy candidate, or when the
conditionals are needed.  :func:`marginals` and :func:`sample` need the per-site
conditionals of ``V``, so for them only non-interacting variables qualify;
:func:`expectation` and :func:`distribution` always enumerate the full joint.  Pass
``sum_out=None`` to enumerate everything, or a variable name to force a choice.

``max_configurations`` bounds the number of *enumerated* configurations (after the
analytic summation; per example for :func:`log_likelihood`); beyond it a
``ValueError`` ("model too large to enumerate") suggests AIS or SMC.  The bound is
first checked by shape arithmetic alone (the enumerated count is at least the joint
count divided by that of the largest variable), before any parameter value is read,
so a model far too large is refused without touching its (possibly huge) params.

Floating-point range
--------------------
Energies, free energies and ``log Z`` are computed in the params' float dtype,
float32 by default.  float32 holds magnitudes up to about :math:`3.4 \times 10^{38}`
with a relative rounding error of :math:`2^{-24} \approx 6 \times 10^{-8}`, so

* ``log Z``, :func:`log_prob` and :func:`log_likelihood` carry an absolute error of
  about :math:`6 \times 10^{-8} (|E| + |\log Z|)`: about :math:`10^{-3}` nats at
  energies of :math:`10^4`, and no correct digit left (e.g. ``log_prob`` returns 0
  instead of :math:`-\log 2`) once energies reach about :math:`10^{7}`;
* an energy or ``log Z`` beyond :math:`3.4 \times 10^{38}` overflows to ``inf``.

Every routine raises ``ValueError`` when its result (or the normaliser behind it) is
NaN or :math:`\pm\infty`, naming the quantity, the model and the largest parameter,
instead of returning it.  A configuration of energy :math:`+\infty` (a forbidden
state) is allowed: it has probability 0 and log-probability :math:`-\infty`.  With
``jax.config.update("jax_enable_x64", True)`` and float64 params everything runs in
float64: magnitudes up to about :math:`1.8 \times 10^{308}`, relative error
:math:`1.1 \times 10^{-16}`.

References
----------
Koller, D. & Friedman, N. (2009). *Probabilistic Graphical Models*, ch. 9 (variable
elimination: summing out a variable in closed form).
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered transitions.
NIPS 22 -- exact RBM likelihoods by enumerating the hidden units (784-10 on MNIST).
Hinton, G. E. (2010). A practical guide to training restricted Boltzmann machines,
sec. 16.1 (free energy :math:`F(v) = -b^\top v - \sum_j \log(1 + e^{c_j + W_j^\top v})`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Spin
from ugm_infer.model import FLOAT64_HINT as _FLOAT64_HINT
from ugm_infer.model import largest_param_note as _largest_param

__all__ = [
    "EnumerationPlan",
    "average_log_likelihood",
    "distribution",
    "enumeration_plan",
    "expectation",
    "log_likelihood",
    "log_partition",
    "log_prob",
    "marginals",
    "sample",
]

State = dict[str, jax.Array]

#: Rough number of array elements one chunk (or batch of chunks) may materialise.
#: 2**24 float32 elements = 64 MiB per intermediate; a few intermediates live at once.
_MEMORY_BUDGET = 2**24
_INT32_LIMIT = 2**31 - 1
#: Compiled functions kept per model (plans x static arguments such as ``num_samples``).
_CACHE_SIZE = 32
_AUTO = "auto"


class EnumerationPlan(NamedTuple):
    """How a sum over configurations is organised (see the module docstring).

    Attributes
    ----------
    free
        The variables summed over, in declaration order (all variables for ``log Z``;
        the missing ones for a likelihood).
    enumerated
        The subset of ``free`` that is enumerated.
    summed
        The variable summed analytically, or ``None``.
    method
        ``"free_energy"`` (declared ``free_energy_fns``), ``"gradient"`` (single-site
        differences from one gradient of a multilinear energy), ``"single_site"``
        (each single-site change evaluated) or ``None``.
    radices
        Number of states of every enumerated site, in enumeration order.
    num_low
        Number of trailing sites enumerated inside one chunk.
    chunk
        Configurations per chunk (product of the trailing radices).
    num_chunks
        Number of chunks; ``chunk * num_chunks`` is the number of configurations.
    """

    free: tuple[str, ...]
    enumerated: tuple[str, ...]
    summed: str | None
    method: str | None
    radices: tuple[int, ...]
    num_low: int
    chunk: int
    num_chunks: int

    @property
    def num_configurations(self) -> int:
        """Number of enumerated configurations."""
        return self.chunk * self.num_chunks


# ======================================================================================
# validation
# ======================================================================================
def _is_concrete(tree: Any) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _check_model(model: Any) -> None:
    from ugm_infer.model import EnergyModel

    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


def _check_params(model: Any, params: Any) -> None:
    if _is_concrete(params):
        model.validate_params(params)


def _check_positive_int(value: Any, argname: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{argname}` must be a positive int, got {value!r}")
    return int(value)


def _check_key(rng_key: Any) -> None:
    if isinstance(rng_key, jax.core.Tracer):
        return
    arr = rng_key
    if not hasattr(arr, "dtype"):
        raise TypeError(f"`rng_key` must be a JAX PRNG key (jax.random.key(seed)), got {type(rng_key).__name__}")
    if jax.dtypes.issubdtype(arr.dtype, jax.dtypes.prng_key):
        if arr.shape != ():
            raise ValueError(f"`rng_key` must be a single key, got a key array of shape {arr.shape}")
        return
    if not (np.asarray(arr).dtype == np.uint32 and np.asarray(arr).shape == (2,)):
        raise TypeError(
            f"`rng_key` must be a JAX PRNG key (jax.random.key(seed)), got an array of dtype {arr.dtype} "
            f"and shape {np.shape(arr)}"
        )


def _check_sum_out(model: Any, sum_out: Any) -> None:
    if sum_out is None or sum_out == _AUTO:
        return
    if not isinstance(sum_out, str):
        raise TypeError(f'`sum_out` must be "auto", None or a variable name, got {sum_out!r}')
    if sum_out not in model.variables:
        raise ValueError(f"`sum_out` names unknown variable '{sum_out}'; the model has {list(model.variables)}")


def _validate_observed(model: Any, data: Any, argname: str = "data") -> tuple[State, int | None]:
    """Validate a dict holding a subset of the variables, all with 0 or 1 leading axis.

    Returns the data cast to the domain dtypes (with a leading axis) and the number of
    examples, or ``None`` if the data were unbatched.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"`{argname}` must be a dict {{name: array}}, got {type(data).__name__}")
    if not data:
        raise ValueError(f"`{argname}` must hold at least one of the model's variables {list(model.variables)}")
    unknown = sorted(set(data) - set(model.variables))
    if unknown:
        raise ValueError(f"`{argname}` has unknown variable(s) {unknown}; the model has {list(model.variables)}")
    out: State = {}
    batch: tuple[int, ...] | None = None
    for name in model.variables:
        if name not in data:
            continue
        domain = model.variables[name]
        arr = np.asarray(data[name])
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"`{argname}['{name}']` must be numeric, got dtype {arr.dtype}")
        nd = arr.ndim - len(domain.shape)
        if nd not in (0, 1) or tuple(arr.shape[nd:]) != domain.shape:
            shape = ", ".join(map(str, domain.shape))
            raise ValueError(
                f"`{argname}['{name}']` has shape {arr.shape}; expected (num_examples, {shape}) or ({shape}) for {domain!r}"
            )
        if batch is None:
            batch = arr.shape[:nd]
        elif arr.shape[:nd] != batch:
            raise ValueError(
                f"`{argname}` variables disagree on the number of examples: '{name}' has leading shape "
                f"{arr.shape[:nd]}, expected {batch}"
            )
        domain.check_values(arr, f"`{argname}['{name}']`")
        out[name] = jnp.asarray(arr.reshape((-1,) + domain.shape), dtype=domain.dtype)
    assert batch is not None
    num = batch[0] if batch else None
    if num == 0:
        raise ValueError(f"`{argname}` has zero examples")
    return out, num


# ======================================================================================
# planning
# ======================================================================================
def _log_configs(domain) -> float:
    return domain.size * math.log(domain.num_states)


def _structure(model: Any, params: Any) -> tuple[list[str], bool | None]:
    """(non-interacting variables, multilinear) -- probing if needed and possible."""
    if not model.has_structure:
        if not _is_concrete(params):
            return [], None
        try:
            model.detect_structure(params)
        except (ValueError, TypeError):
            # probing refused or impossible (e.g. a non-multilinear energy with too many
            # sites): no generic analytic summation, which only costs speed; declared
            # free energies are still used
            return [], None
    return model.non_interacting_variables(), model.multilinear


def _summation_method(model: Any, name: str, multilinear: bool | None, conditionals: bool) -> str:
    if name in model.free_energy_fns and not conditionals:
        return "free_energy"
    domain = model.variables[name]
    if multilinear and isinstance(domain, (Binary, Spin)):
        return "gradient"
    return "single_site"


def _choose_summed(
    model: Any, params: Any, free: tuple[str, ...], sum_out: Any, conditionals: bool
) -> tuple[str | None, str | None]:
    if sum_out is None or not free:
        return None, None
    if sum_out != _AUTO:
        if sum_out not in free:
            raise ValueError(f"`sum_out='{sum_out}'` is not summed over here (free variables: {list(free)})")
        need_structure = conditionals or sum_out not in model.free_energy_fns
        nonint, multilinear = _structure(model, params) if need_structure else ([], None)
        if sum_out not in model.free_energy_fns or conditionals:
            if sum_out not in nonint:
                why = "its sites interact" if model.has_structure else "its structure could not be probed"
                raise ValueError(
                    f"cannot sum '{sum_out}' analytically here: {why}"
                    + ("" if conditionals else " and it has no entry in `free_energy_fns`")
                    + "; pass sum_out='auto' or None"
                )
        return sum_out, _summation_method(model, sum_out, multilinear, conditionals)
    size = {n: _log_configs(model.variables[n]) for n in free}
    fe = [n for n in free if n in model.free_energy_fns] if not conditionals else []
    best_fe = max((size[n] for n in fe), default=-1.0)
    if conditionals or any(size[n] > best_fe for n in free if n not in model.free_energy_fns):
        nonint, multilinear = _structure(model, params)
    else:
        nonint, multilinear = [], None
    candidates = [n for n in free if n in fe or n in nonint]
    if not candidates:
        return None, None
    # most configurations first; among equals prefer a declared free energy, then order
    best = max(candidates, key=lambda n: (size[n], n in fe, -free.index(n)))
    return best, _summation_method(model, best, multilinear, conditionals)


def _work_per_config(model: Any, summed: str | None, method: str | None) -> int:
    """Rough number of array elements materialised per enumerated configuration."""
    n = max(model.num_sites, 1)
    if method == "gradient":
        return 3 * n
    if method == "single_site":
        d = model.variables[summed]
        return n * (1 + d.size * (d.num_states - 1))
    return 2 * n


def _check_size_from_shapes(model: Any, free: tuple[str, ...], sum_out: Any, max_configurations: int) -> None:
    """Refuse, from the domains' shapes alone, a sum that cannot fit ``max_configurations``.

    At most one variable is summed analytically, so at least ``joint / largest``
    configurations are enumerated (``joint`` when nothing may be summed).  Nothing
    here reads a parameter value, so a model far too large (e.g. an RBM with 10^5
    hidden units) is refused before its params are validated or copied.
    """
    logs = {n: _log_configs(model.variables[n]) for n in free}
    if not logs:
        return
    if sum_out is None:
        summable = 0.0
    elif sum_out == _AUTO:
        summable = max(logs.values())
    else:
        summable = logs.get(sum_out, 0.0)
    log_min = sum(logs.values()) - summable
    if log_min > math.log(max_configurations) * (1 + 1e-9) + 1e-9:
        largest = max(logs, key=logs.get)
        what = f" after summing '{largest}' analytically" if sum_out == _AUTO and len(logs) > 1 else ""
        raise ValueError(
            f"model too large to enumerate: at least {_fmt_log_count(log_min)} configurations{what} > "
            f"max_configurations={max_configurations}; use AIS/SMC"
        )


def _fmt_log_count(log_n: float) -> str:
    return str(round(math.exp(log_n))) if log_n < math.log(1e15) else f"~10^{log_n / math.log(10):.1f}"


def _check_energy_shape(model: Any, params: Any) -> None:
    """The energy of one configuration must be a scalar (checked once per params structure, by shapes only)."""
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), params)
    key = ("energy_shape", str(abstract))
    cache = model.__dict__.setdefault("_exact_cache", {})
    if key in cache:
        return
    example = {n: jax.ShapeDtypeStruct(d.shape, d.dtype) for n, d in model.variables.items()}
    out = jax.eval_shape(model.energy, abstract, example)
    if not (hasattr(out, "shape") and out.shape == () and jnp.issubdtype(out.dtype, jnp.number)):
        got = f"shape {out.shape} and dtype {out.dtype}" if hasattr(out, "shape") else type(out).__name__
        raise ValueError(f"the energy of model {model.name!r} must return a real scalar for one configuration, got {got}")
    cache[key] = True


def _make_plan(
    model: Any,
    params: Any,
    free: tuple[str, ...],
    *,
    sum_out: Any,
    conditionals: bool,
    chunk_size: int,
    max_configurations: int,
) -> EnumerationPlan:
    summed, method = _choose_summed(model, params, free, sum_out, conditionals)
    enumerated = tuple(n for n in free if n != summed)
    radices: list[int] = []
    for n in enumerated:
        d = model.variables[n]
        radices.extend([d.num_states] * d.size)
    total = math.prod(radices)
    if total > max_configurations:
        what = f" after summing '{summed}' analytically" if summed else ""
        hint = "" if model.has_structure else " (or call model.detect_structure(params) first)"
        raise ValueError(
            f"model too large to enumerate: {_fmt_count(total)} configurations{what} > "
            f"max_configurations={max_configurations}; use AIS/SMC{hint}"
        )
    limit = min(chunk_size, max(1, _MEMORY_BUDGET // _work_per_config(model, summed, method)))
    num_low, chunk = 0, 1
    while num_low < len(radices) and chunk * radices[-1 - num_low] <= limit:
        chunk *= radices[-1 - num_low]
        num_low += 1
    num_chunks = total // chunk
    if num_chunks > _INT32_LIMIT:
        raise ValueError(
            f"{total} configurations in chunks of {chunk} give {num_chunks} > 2^31-1 chunks; "
            "raise `chunk_size` or lower `max_configurations`"
        )
    return EnumerationPlan(free, enumerated, summed, method, tuple(radices), num_low, chunk, num_chunks)


def _fmt_count(n: int) -> str:
    return str(n) if n < 10**15 else f"~10^{math.log10(n):.1f}"


def enumeration_plan(
    model: Any,
    params: Any,
    observed: tuple[str, ...] | list[str] = (),
    *,
    sum_out: Any = _AUTO,
    conditionals: bool = False,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
) -> EnumerationPlan:
    """The plan :func:`log_partition` (or :func:`log_likelihood`, ...) would use, after their argument checks.

    Every routine of this module starts here.  Sizes are checked before values: a sum
    that cannot fit ``max_configurations`` whatever is summed analytically is refused
    from the domains' shapes alone, then the energy's output shape is checked with
    ``jax.eval_shape``, and only then are the params' values read.

    Parameters
    ----------
    model, params
        The model and its parameters (used to probe the structure if needed).
    observed
        Names of observed variables; the others are summed over.
    sum_out
        ``"auto"``, ``None`` or a variable name (see the module docstring).
    conditionals
        Whether the summed variable's conditionals are needed (as in :func:`sample`).
    chunk_size, max_configurations
        As in :func:`log_partition`.

    Returns
    -------
    EnumerationPlan
    """
    _check_model(model)
    _check_sum_out(model, sum_out)
    chunk_size = _check_positive_int(chunk_size, "chunk_size")
    max_configurations = _check_positive_int(max_configurations, "max_configurations")
    unknown = sorted(set(observed) - set(model.variables))
    if unknown:
        raise ValueError(f"`observed` has unknown variable(s) {unknown}; the model has {list(model.variables)}")
    free = tuple(n for n in model.variables if n not in set(observed))
    # shapes before values: the size of the sum from the domains, the energy's output
    # shape (jax.eval_shape), then the params' values, then the plan (which may probe)
    _check_size_from_shapes(model, free, sum_out, max_configurations)
    _check_params(model, params)
    _check_energy_shape(model, params)
    return _make_plan(
        model,
        params,
        free,
        sum_out=sum_out,
        conditionals=conditionals,
        chunk_size=chunk_size,
        max_configurations=max_configurations,
    )


# ======================================================================================
# traced building blocks
# ======================================================================================
def _suffix_products(radices: np.ndarray) -> np.ndarray:
    """Place values of a mixed-radix number (last digit least significant)."""
    if radices.size == 0:
        return np.zeros(0, dtype=np.int32)
    place = np.concatenate([np.cumprod(radices[::-1][:-1].astype(np.int64))[::-1], [1]])
    return place.astype(np.int32)


def _decode(model: Any, plan: EnumerationPlan, chunk_ids: jax.Array, offsets: jax.Array) -> tuple[State, jax.Array]:
    """States (leading axis ``B``) and per-site state indices of configurations.

    ``chunk_ids`` and ``offsets`` are int32 arrays of shape ``(B,)``; the configuration
    is ``chunk_id * plan.chunk + offset`` in mixed radix, decoded without forming it.
    """
    radices = np.asarray(plan.radices, dtype=np.int64)
    num_high = radices.size - plan.num_low
    high, low = radices[:num_high], radices[num_high:]
    parts = []
    if num_high:
        parts.append((chunk_ids[:, None] // _suffix_products(high)[None, :]) % high.astype(np.int32)[None, :])
    if plan.num_low:
        parts.append((offsets[:, None] // _suffix_products(low)[None, :]) % low.astype(np.int32)[None, :])
    batch = offsets.shape[0]
    digits = jnp.concatenate(parts, axis=1) if parts else jnp.zeros((batch, 0), jnp.int32)
    states, pos = {}, 0
    for name in plan.enumerated:
        d = model.variables[name]
        states[name] = d.from_index(digits[:, pos : pos + d.size]).reshape((batch,) + d.shape)
        pos += d.size
    return states, digits


def _as_float(x: jax.Array) -> jax.Array:
    x = jnp.asarray(x)
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _site_deltas(model: Any, params: Any, name: str, method: str, rest: State) -> tuple[jax.Array, jax.Array]:
    r"""``(E(rest, r), delta)`` with ``delta[k-1, i] = E(rest, r^{i->k}) - E(rest, r)`` for ``k >= 1``.

    ``delta`` has shape ``(K - 1, size)``: values first, so that reductions over the
    values are elementwise operations between rows (reducing a trailing axis of
    length 2 is several times slower on CPU).
    """
    d = model.variables[name]
    values = d.values
    if method == "gradient":
        # The gradient is taken at the midpoint of the two values: exact for energies of
        # degree <= 2 in each site (e.g. after learning gives a Boltzmann machine's W a
        # diagonal), not only for affine ones.  Sites of V do not interact, so the
        # other sites of V may sit at the midpoint too.
        def energy_of(x):
            return _as_float(model.energy(params, {**rest, name: x}))

        e0 = energy_of(jnp.full(d.shape, values[0], dtype=jnp.float32))
        grad = jax.grad(energy_of)(jnp.full(d.shape, 0.5 * (values[0] + values[1]), dtype=jnp.float32))
        return e0, (grad.reshape(-1) * float(values[1] - values[0]))[None, :]
    return single_site_deltas(model, params, rest, name)


def single_site_deltas(model: Any, params: Any, rest: Mapping, name: str) -> tuple[jax.Array, jax.Array]:
    r"""``(E(rest, r), delta)`` of :func:`_site_deltas` by evaluating every single-site change of ``r``.

    ``r`` is the reference configuration of variable ``name`` (every site at its first
    value); ``delta[k - 1, i] = E(rest, r^{i -> k}) - E(rest, r)`` for ``k >= 1``.
    Exact for any energy, one energy evaluation per (site, value).
    """
    d = model.variables[name]
    values = d.values
    ref = jnp.full((d.size,), values[0]).astype(d.dtype)
    e0 = _as_float(model.energy(params, {**rest, name: ref.reshape(d.shape)}))
    sites = np.tile(np.arange(d.size), d.num_states - 1)
    new_values = np.repeat(values[1:], d.size)

    def changed(i, v):
        x = ref.at[i].set(jnp.asarray(v).astype(d.dtype))
        return _as_float(model.energy(params, {**rest, name: x.reshape(d.shape)}))

    energies = jax.vmap(changed)(jnp.asarray(sites), jnp.asarray(new_values))
    return e0, (energies - e0).reshape(d.num_states - 1, d.size)


def _site_log_norm(delta: jax.Array) -> jax.Array:
    r"""Per site :math:`\log(1 + \sum_{k \ge 1} \exp(-\delta_{ik}))`, shape ``(size,)``."""
    if delta.shape[0] == 1:
        return jnp.logaddexp(0.0, -delta[0])
    neg = -delta
    m = jnp.maximum(jnp.max(neg, axis=0), 0.0)
    return m + jnp.log(jnp.exp(-m) + jnp.sum(jnp.exp(neg - m[None, :]), axis=0))


def _free_energy(model: Any, params: Any, plan: EnumerationPlan, state: State) -> jax.Array:
    """Energy of one configuration with ``plan.summed`` summed out (``state`` lacks it)."""
    if plan.summed is None:
        return _as_float(model.energy(params, state))
    if plan.method == "free_energy":
        return _as_float(model.free_energy_fns[plan.summed](params, state))
    e0, delta = _site_deltas(model, params, plan.summed, plan.method, state)
    return e0 - jnp.sum(_site_log_norm(delta))


def _conditional_probs(model: Any, params: Any, plan: EnumerationPlan, state: State):
    """Free energy and conditional probabilities of values ``1..K-1``, shape ``(K-1, size)``.

    The probability of value 0 is one minus their sum (not materialised: for an RBM
    the marginal pass then costs one sigmoid and one matrix-vector product).
    """
    e0, delta = _site_deltas(model, params, plan.summed, plan.method, state)
    lse = _site_log_norm(delta)
    if delta.shape[0] == 1:
        return e0 - jnp.sum(lse), jax.nn.sigmoid(-delta)
    return e0 - jnp.sum(lse), jnp.exp(-delta - lse[None, :])


def _merge_weights(log_mass: jax.Array, chunk_log_mass: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Streaming normalisation: weights of the old average and of a new chunk's average.

    With ``log_mass`` the log of the mass seen so far and ``chunk_log_mass`` that of
    the new chunk, the running average becomes ``a * old + b * chunk_average``.
    Chunks (or prefixes) of zero mass get weight zero instead of NaN.
    """
    new = jnp.logaddexp(log_mass, chunk_log_mass)
    safe = jnp.where(jnp.isfinite(new), new, 0.0)
    a = jnp.where(jnp.isfinite(log_mass), jnp.exp(log_mass - safe), 0.0)
    b = jnp.where(jnp.isfinite(chunk_log_mass), jnp.exp(chunk_log_mass - safe), 0.0)
    return new, a, b


def _chunk_ids(plan: EnumerationPlan, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.full((plan.chunk,), c, dtype=jnp.int32), jnp.arange(plan.chunk, dtype=jnp.int32)


def _scan_chunks(body: Callable, init: Any, plan: EnumerationPlan) -> tuple[Any, Any]:
    """``lax.scan`` of ``body(carry, chunk_id)`` over the chunks of ``plan``."""
    return jax.lax.scan(body, init, jnp.arange(plan.num_chunks, dtype=jnp.int32))


def _chunk_energies(model: Any, params: Any, plan: EnumerationPlan, c: jax.Array, context: State | None = None):
    """Chunk ``c`` decoded: ``(states, digits, F)``, ``F`` the free energies ``(chunk,)``.

    ``context`` (one example's observed variables) completes every state.
    """
    states, digits = _decode(model, plan, *_chunk_ids(plan, c))
    context = {} if context is None else context
    f = jax.vmap(lambda s: _free_energy(model, params, plan, {**context, **s}), axis_size=plan.chunk)(states)
    return states, digits, f


def _chunk_log_masses(model: Any, params: Any, plan: EnumerationPlan, context: State) -> jax.Array:
    """``log sum exp(-F)`` of every chunk, shape ``(num_chunks,)``; ``context`` is one example."""

    def body(carry, c):
        _, _, f = _chunk_energies(model, params, plan, c, context)
        return carry, jax.nn.logsumexp(-f)

    _, out = _scan_chunks(jax.checkpoint(body), None, plan)
    return out


def _accumulator_dtype() -> Any:
    return jnp.float32 if not jax.config.jax_enable_x64 else jnp.float64


def _weighted_average(model: Any, params: Any, plan: EnumerationPlan, init: Any, stats: Callable) -> tuple[jax.Array, Any]:
    """``(log Z, sum_x p(x) s(x))`` in one pass over the chunks, with streaming normalisation.

    ``stats(w, states, digits, cond)`` returns, for one chunk, the ``w``-weighted sums
    of the statistic (a pytree like ``init``), ``w`` the configurations' probabilities
    within the chunk and ``cond`` the conditionals of the summed variable (``None``
    when nothing is summed).  The running average is re-weighted as the normaliser
    grows (:func:`_merge_weights`).
    """

    def body(carry, c):
        log_mass, acc = carry
        if plan.summed is None:
            states, digits, f = _chunk_energies(model, params, plan, c)
            cond = None
        else:
            states, digits = _decode(model, plan, *_chunk_ids(plan, c))
            f, cond = jax.vmap(lambda s: _conditional_probs(model, params, plan, s), axis_size=plan.chunk)(states)
        chunk_log_mass = jax.nn.logsumexp(-f)
        w = jnp.exp(-f - chunk_log_mass)
        log_mass, a, b = _merge_weights(log_mass, chunk_log_mass)
        acc = jax.tree.map(lambda x, v: a * x + b * v, acc, stats(w, states, digits, cond))
        return (log_mass, acc), None

    (log_mass, acc), _ = _scan_chunks(body, (jnp.asarray(-jnp.inf, _accumulator_dtype()), init), plan)
    return log_mass, acc


# ======================================================================================
# compiled-function cache (one compilation per model, plan and static arguments)
# ======================================================================================
def _cached(model: Any, key: tuple, build: Callable[[], Callable]) -> Callable:
    # Stored on the model instance (like its probed structure), so the jitted closures,
    # which reference the model, are freed with it.  Parameter values are arguments,
    # so new parameters never recompile; only a new plan or static argument does.
    per_model = model.__dict__.setdefault("_exact_cache", {})
    if key not in per_model:
        if len(per_model) >= _CACHE_SIZE:
            per_model.pop(next(iter(per_model)))  # oldest first
        per_model[key] = build()
    return per_model[key]


def _log_partition_fn(model: Any, plan: EnumerationPlan) -> Callable:
    def build():
        return jax.jit(lambda params: jax.nn.logsumexp(_chunk_log_masses(model, params, plan, {})))

    return _cached(model, ("log_partition", plan), build)


def _check_finite_result(value: Any, what: str, model: Any, params: Any, *, allow_neg_inf: bool = False) -> None:
    """Raise ``ValueError`` if ``value`` holds NaN, +inf or (unless allowed) -inf.

    ``-inf`` is a legitimate log-probability (a configuration of energy +inf); a
    normaliser or an expectation is never infinite.
    """
    if not _is_concrete(value):
        return
    leaves = [np.asarray(x) for x in jax.tree.leaves(value)]
    if any(np.isnan(x).any() for x in leaves):
        problem = "NaN"
        why = "the energy returned NaN for some configuration, or energies overflowed (inf - inf); check `params`"
        why += f", or {_FLOAT64_HINT}"
    elif any(np.isposinf(x).any() for x in leaves):
        problem = "+inf"
        why = f"the energies overflow the float range (|E| above ~{_float_max(leaves):.2g}); {_FLOAT64_HINT}"
    elif not allow_neg_inf and any(np.isneginf(x).any() for x in leaves):
        problem = "-inf"
        why = f"every configuration has energy +inf, or the energies overflow; {_FLOAT64_HINT}"
    else:
        return
    raise ValueError(f"{what} is {problem} for model {model.name!r}: {why}{_largest_param(params)}")


def _float_max(leaves: list[np.ndarray]) -> float:
    dtypes = [x.dtype for x in leaves if np.issubdtype(x.dtype, np.floating)]
    return float(np.finfo(dtypes[0] if dtypes else np.float32).max)


# ======================================================================================
# public API
# ======================================================================================
def log_partition(
    model: Any,
    params: Any,
    *,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
    sum_out: Any = _AUTO,
) -> jax.Array:
    r"""Exact log partition function :math:`\log Z = \log \sum_x \exp(-E(\theta, x))`.

    Parameters
    ----------
    model
        A :class:`ugm_infer.EnergyModel`.
    params
        Its parameters.  May be traced: ``jax.grad(lambda p: log_partition(model, p))``
        gives :math:`\mathbb{E}_p[-\nabla_\theta E]` (the structure must then already be
        known, e.g. from an earlier call with concrete params).
    chunk_size
        Upper bound on the configurations evaluated at once (further limited by a
        memory budget; see the module docstring).
    max_configurations
        Largest number of configurations to enumerate (after the analytic summation).
    sum_out
        ``"auto"`` (default), ``None`` (enumerate everything) or the name of the
        variable to sum analytically.

    Returns
    -------
    Scalar ``log Z`` (float32 unless the energy is float64).

    Raises
    ------
    ValueError
        ``"model too large to enumerate: ..."`` beyond ``max_configurations``; bad
        params (NaN/inf, or rejected by the model); an energy that is not a scalar;
        a ``log Z`` that is NaN or infinite (float32 overflows beyond energies of
        about 3.4e38; see "Floating-point range" in the module docstring); bad
        arguments.

    Examples
    --------
    >>> import jax.numpy as jnp, ugm_infer as ui
    >>> model = ui.EnergyModel(lambda p, s: -jnp.sum(p["h"] * s["s"]), {"s": ui.Spin(3)})
    >>> round(float(ui.exact.log_partition(model, {"h": jnp.zeros(3)})), 4)  # 3 log 2
    2.0794
    """
    plan = enumeration_plan(
        model, params, sum_out=sum_out, conditionals=False, chunk_size=chunk_size, max_configurations=max_configurations
    )
    out = _log_partition_fn(model, plan)(params)
    _check_finite_result(out, "log Z", model, params)
    return out


def log_prob(model: Any, params: Any, state: State, **kwargs: Any) -> jax.Array:
    r"""Exact :math:`\log p(x) = -E(\theta, x) - \log Z(\theta)` of full configurations.

    Parameters
    ----------
    model, params
        The model and its parameters.
    state
        ``{name: array}`` with every variable, unbatched or with leading batch axes.
    **kwargs
        Passed to :func:`log_partition` (``chunk_size``, ``max_configurations``,
        ``sum_out``).

    Returns
    -------
    Array of the state's batch shape (a scalar for one configuration); ``-inf`` for a
    configuration of energy ``+inf``.

    Raises
    ------
    ValueError
        As :func:`log_partition`, and when a result is NaN or ``+inf``.  In float32 the
        result loses its digits once energies reach about ``1e7`` (see
        "Floating-point range" in the module docstring).
    """
    _check_model(model)
    _check_params(model, params)
    state = model.validate_state(state, argname="state")
    first = next(iter(model.variables))
    batch_shape = state[first].shape[: state[first].ndim - len(model.variables[first].shape)]
    log_z = log_partition(model, params, **kwargs)
    flat = {n: x.reshape((-1,) + model.variables[n].shape) for n, x in state.items()}
    energies = _cached(model, ("energies",), lambda: jax.jit(model.energies))(params, flat)
    out = (-_as_float(energies) - log_z).reshape(batch_shape)
    _check_finite_result(out, "log p(state)", model, params, allow_neg_inf=True)
    return out


def log_likelihood(
    model: Any,
    params: Any,
    data: Mapping[str, Any],
    *,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
    sum_out: Any = _AUTO,
) -> jax.Array:
    r"""Exact log-likelihood of (partially) observed examples, latent variables summed out.

    .. math::  \log p(x_O) = -F(x_O) - \log Z,
               \qquad F(x_O) = -\log \sum_{x_M} \exp(-E(\theta, x_O, x_M)),

    where :math:`O` are the variables present in ``data`` and :math:`M` the missing
    ones.  :math:`F` is computed with the same machinery as :math:`\log Z`: the
    largest summable missing variable is summed analytically (an RBM's hidden layer
    through ``free_energy_fns``, or any non-interacting variable) and the other
    missing variables are enumerated in chunks for every example.

    Parameters
    ----------
    model, params
        The model and its parameters.
    data
        ``{name: array}`` holding a subset of the variables, each with a leading
        example axis (or none, for a single example).
    chunk_size, max_configurations, sum_out
        As in :func:`log_partition`; ``max_configurations`` also bounds the
        configurations of the missing variables enumerated per example.

    Returns
    -------
    ``(num_examples,)`` log-likelihoods (a scalar for an unbatched example; ``-inf``
    for an example of probability 0).

    Raises
    ------
    ValueError
        As :func:`log_partition`, and when a result is NaN or ``+inf``.
    """
    _check_model(model)
    _check_sum_out(model, sum_out)
    observed, num = _validate_observed(model, data, "data")
    n_examples = next(iter(observed.values())).shape[0]
    missing = tuple(n for n in model.variables if n not in observed)
    if sum_out not in (None, _AUTO) and sum_out not in missing:
        raise ValueError(f"`sum_out='{sum_out}'` is observed in `data`; it can only name a missing variable")
    plan = enumeration_plan(
        model,
        params,
        tuple(observed),
        sum_out=sum_out,
        conditionals=False,
        chunk_size=chunk_size,
        max_configurations=max_configurations,
    )
    work = _work_per_config(model, plan.summed, plan.method) * plan.chunk
    batch_size = int(max(1, min(n_examples, _MEMORY_BUDGET // work)))

    def build():
        def neg_free_energy(params, example):
            return jax.nn.logsumexp(_chunk_log_masses(model, params, plan, example))

        return jax.jit(lambda params, obs: jax.lax.map(lambda ex: neg_free_energy(params, ex), obs, batch_size=batch_size))

    fn = _cached(model, ("log_likelihood", plan, tuple(observed), batch_size), build)
    log_z = log_partition(model, params, chunk_size=chunk_size, max_configurations=max_configurations, sum_out=sum_out)
    out = fn(params, observed) - log_z
    _check_finite_result(out, "log-likelihood", model, params, allow_neg_inf=True)
    return out if num is not None else out[0]


def average_log_likelihood(model: Any, params: Any, data: Mapping[str, Any], **kwargs: Any) -> jax.Array:
    """Mean of :func:`log_likelihood` over the examples of ``data`` (same arguments)."""
    return jnp.mean(log_likelihood(model, params, data, **kwargs))


def marginals(
    model: Any,
    params: Any,
    *,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
    sum_out: Any = _AUTO,
) -> dict[str, jax.Array]:
    r"""Exact marginal distribution of every site.

    Enumerated sites accumulate :math:`\sum_x p(x)\, [x_i = k]` chunk by chunk; for
    the analytically summed variable ``V`` (non-interacting sites only), the
    conditionals :math:`p(x_{V,i} = k \mid x_{-V})` are averaged over the enumerated
    configurations instead.

    Parameters
    ----------
    model, params, chunk_size, max_configurations, sum_out
        As in :func:`log_partition`.

    Returns
    -------
    ``{name: probs}`` with ``probs`` of shape ``domain.shape + (K,)``; index ``k`` is
    the ``k``-th value of the domain (for spins: ``[p(-1), p(+1)]``).
    """
    plan = enumeration_plan(
        model, params, sum_out=sum_out, conditionals=True, chunk_size=chunk_size, max_configurations=max_configurations
    )

    def build():
        def run(params):
            def stats(w, states, digits, cond):
                new, pos = {}, 0
                for name in plan.enumerated:
                    d = model.variables[name]
                    onehot = jax.nn.one_hot(digits[:, pos : pos + d.size], d.num_states, dtype=w.dtype)
                    new[name] = jnp.einsum("c,cik->ik", w, onehot)
                    pos += d.size
                if plan.summed is not None:
                    new[plan.summed] = jnp.tensordot(w, cond, axes=1)
                return new

            dtype = _accumulator_dtype()
            init = {n: jnp.zeros((model.variables[n].size, model.variables[n].num_states), dtype) for n in plan.enumerated}
            if plan.summed is not None:
                d = model.variables[plan.summed]
                init[plan.summed] = jnp.zeros((d.num_states - 1, d.size), dtype)
            log_z, acc = _weighted_average(model, params, plan, init, stats)
            if plan.summed is not None:
                rest = acc[plan.summed]  # values 1..K-1; value 0 gets the remaining mass
                acc[plan.summed] = jnp.concatenate([jnp.clip(1.0 - jnp.sum(rest, axis=0, keepdims=True), 0.0), rest]).T
            return log_z, {
                n: (acc[n] / jnp.sum(acc[n], axis=-1, keepdims=True)).reshape(
                    model.variables[n].shape + (model.variables[n].num_states,)
                )
                for n in model.variables
            }

        return jax.jit(run)

    log_z, out = _cached(model, ("marginals", plan), build)(params)
    _check_finite_result(log_z, "log Z", model, params)
    _check_finite_result(out, "marginals", model, params)
    return out


def expectation(
    model: Any,
    params: Any,
    fn: Callable[[State], Any],
    *,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
) -> Any:
    r"""Exact :math:`\mathbb{E}_p[f(x)] = \sum_x p(x) f(x)` for a pytree-valued ``f``.

    The full joint is enumerated (an arbitrary ``f`` does not factorise over the
    analytically summable variable); ``f`` is applied to one configuration and
    vmapped over each chunk.  For :math:`\mathbb{E}_p[-\nabla_\theta E]` on models too
    large for that, use ``jax.grad`` of :func:`log_partition` instead.  Each call
    compiles anew (``fn`` is part of the program).

    Parameters
    ----------
    model, params
        The model and its parameters.
    fn
        ``fn(state) -> pytree of arrays`` for one configuration ``state``.
    chunk_size, max_configurations
        As in :func:`log_partition` (no analytic summation here).

    Returns
    -------
    A pytree like ``fn``'s output (float leaves).

    Raises
    ------
    ValueError
        As :func:`log_partition`, and when the expectation is NaN or infinite.
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable, got {type(fn).__name__}")
    plan = enumeration_plan(
        model, params, sum_out=None, conditionals=False, chunk_size=chunk_size, max_configurations=max_configurations
    )

    @jax.jit
    def run(params):
        example, _ = _decode(model, plan, jnp.zeros((1,), jnp.int32), jnp.zeros((1,), jnp.int32))
        shapes = jax.eval_shape(fn, {n: x[0] for n, x in example.items()})

        def stats(w, states, digits, cond):
            return jax.tree.map(lambda v: jnp.tensordot(w, _as_float(v), axes=1), jax.vmap(fn)(states))

        init = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.promote_types(s.dtype, _accumulator_dtype())), shapes)
        return _weighted_average(model, params, plan, init, stats)

    log_z, out = run(params)
    _check_finite_result(log_z, "log Z", model, params)
    _check_finite_result(out, "the expectation", model, params)
    return out


def sample(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    num_samples: int,
    *,
    chunk_size: int = 65536,
    max_configurations: int = 2**27,
    sum_out: Any = _AUTO,
) -> State:
    r"""Exact iid samples from :math:`p(x) \propto \exp(-E(\theta, x))`.

    The enumerated variables are drawn from their exact marginal
    :math:`\propto \exp(-F(x_{-V}))` in one pass over the chunks (weighted reservoir
    sampling over chunks, then inversion of the chunk's cumulative weights).  The summed
    variable ``V`` (non-interacting sites) is then drawn site by site from its
    conditional :math:`\operatorname{softmax}_k(-\delta_{ik})` (for an RBM:
    :math:`p(v_i = 1 \mid h) = \sigma(b_i + W_i h)`).

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        The model and its parameters.
    num_samples
        Number of iid draws.
    chunk_size, max_configurations, sum_out
        As in :func:`log_partition`.

    Returns
    -------
    ``{name: array of shape (num_samples, *domain.shape)}`` in the domain dtypes.

    Raises
    ------
    ValueError
        As :func:`log_partition` (the draws are refused when ``log Z`` or a conditional
        probability is NaN or infinite).
    """
    _check_key(rng_key)
    num_samples = _check_positive_int(num_samples, "num_samples")
    plan = enumeration_plan(
        model, params, sum_out=sum_out, conditionals=True, chunk_size=chunk_size, max_configurations=max_configurations
    )
    cond_batch = int(max(1, min(num_samples, _MEMORY_BUDGET // _work_per_config(model, plan.summed, plan.method))))

    def build():
        def run(rng_key, params):
            key_enum, key_summed = jax.random.split(rng_key)

            # One pass of weighted reservoir sampling: chunk c replaces a sample's
            # current draw with probability mass_c / (mass of chunks 0..c), so the final
            # draw lies in chunk c with probability mass_c / Z; inside the chunk a
            # configuration is drawn by inverting its cumulative weights.  (Few random
            # calls on purpose: each threefry call site is slow to compile on CPU.)
            def body(carry, c):
                log_mass, chunk_ids, offsets = carry
                u = jax.random.uniform(jax.random.fold_in(key_enum, c), (2, num_samples))
                _, _, f = _chunk_energies(model, params, plan, c)
                logw = -f.astype(jnp.float32)  # float32 suffices to draw; keeps the carry's dtype fixed
                chunk_log_mass = jax.nn.logsumexp(logw)
                log_mass = jnp.logaddexp(log_mass, chunk_log_mass)
                accept = jnp.log(u[0]) < chunk_log_mass - log_mass
                cdf = jnp.cumsum(jnp.exp(logw - jnp.max(logw)))
                idx = jnp.searchsorted(cdf, u[1] * cdf[-1], side="right")
                idx = jnp.clip(idx, 0, plan.chunk - 1).astype(jnp.int32)
                return (log_mass, jnp.where(accept, c, chunk_ids), jnp.where(accept, idx, offsets)), None

            zeros = jnp.zeros((num_samples,), jnp.int32)
            (log_z, chunk_ids, offsets), _ = _scan_chunks(body, (jnp.asarray(-jnp.inf), zeros, zeros), plan)
            states, _ = _decode(model, plan, chunk_ids, offsets)
            check = log_z  # returned for the finiteness check: log Z, or NaN if a conditional is not finite
            if plan.summed is not None:
                d = model.variables[plan.summed]
                # p(x_i = k | rest) for k >= 1; a dummy axis keeps lax.map well defined
                # when nothing is enumerated
                _, probs = jax.lax.map(
                    lambda a: _conditional_probs(model, params, plan, a[0]),
                    (states, jnp.zeros(num_samples)),
                    batch_size=cond_batch,
                )
                # inverse CDF: value = number of k in 1..K-1 with u >= p_0 + ... + p_{k-1}
                u = jax.random.uniform(key_summed, (num_samples, d.size))
                upper = 1.0 - jnp.cumsum(probs[:, ::-1], axis=1)[:, ::-1]  # P(x < k), k = 1..K-1
                index = jnp.sum(u[:, None, :] >= upper, axis=1)
                states[plan.summed] = d.from_index(index).reshape((num_samples,) + d.shape)
                check = jnp.where(jnp.all(jnp.isfinite(probs)), check, jnp.nan)
            return {n: states[n] for n in model.variables}, check

        return jax.jit(run)

    out, check = _cached(model, ("sample", plan, num_samples, cond_batch), build)(rng_key, params)
    _check_finite_result(check, "log Z (or a conditional) of the draws", model, params)
    return out


def distribution(
    model: Any, params: Any, *, chunk_size: int = 65536, max_configurations: int = 2**22
) -> tuple[State, np.ndarray]:
    """Every configuration and its exact probability (small models; for tests).

    Parameters
    ----------
    model, params
        The model and its parameters.
    chunk_size
        As in :func:`log_partition`.
    max_configurations
        Largest number of joint configurations (all are materialised).

    Returns
    -------
    states
        ``{name: array (N, *domain.shape)}`` with all ``N`` configurations in mixed-radix
        order (first variable's first site most significant; the order of
        ``tests/stat_utils.state_index``).
    probs
        ``(N,)`` float64 numpy probabilities (normalised in float64 on the host).
    """
    plan = enumeration_plan(
        model, params, sum_out=None, conditionals=False, chunk_size=chunk_size, max_configurations=max_configurations
    )

    def build():
        def run(params):
            def body(carry, c):
                states, _ = _decode(model, plan, *_chunk_ids(plan, c))
                return carry, (states, model.energies(params, states))

            _, (states, energies) = _scan_chunks(body, None, plan)
            n = plan.num_configurations
            return {k: v.reshape((n,) + v.shape[2:]) for k, v in states.items()}, energies.reshape(n)

        return jax.jit(run)

    states, energies = _cached(model, ("distribution", plan), build)(params)
    logw = -np.asarray(energies, dtype=np.float64)
    _check_finite_result(np.max(logw), "log Z", model, params)  # finite iff the largest log-weight is
    logw -= logw.max()
    probs = np.exp(logw)
    return states, probs / probs.sum()
