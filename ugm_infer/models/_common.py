"""Helpers shared by the built-in models: argument and parameter validation, edge lists.

Parameter checks run on the host when a kernel or learner is built (through
:meth:`ugm_infer.EnergyModel.validate_params`).  Shapes and dtypes are checked for
any leaf, traced or not; value checks (symmetry, zero diagonals) only for concrete
arrays, because a tracer has no values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer.domains import Binary, Spin

DOMAINS = ("spin", "binary")


def check_int(value: Any, argname: str, minimum: int = 1) -> int:
    """A Python/numpy int ``>= minimum`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{argname}` must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"`{argname}` must be >= {minimum}, got {value}")
    return int(value)


def spin_or_binary(domain: str, shape: tuple[int, ...], dtype: Any):
    """The :class:`~ugm_infer.Spin` or :class:`~ugm_infer.Binary` domain named by ``domain``."""
    if domain not in DOMAINS:
        raise ValueError(f"`domain` must be one of {DOMAINS}, got {domain!r}")
    return Spin(shape, dtype) if domain == "spin" else Binary(shape, dtype)


def compute_dtype(param: Any) -> Any:
    """The dtype energies compute in: the parameter's float dtype, at least float32.

    States are cast to it (``int8 @ int8`` would overflow and integers cannot be
    differentiated).
    """
    return jnp.promote_types(jnp.result_type(param), jnp.float32)


@jax.custom_jvp
def softplus(x: jax.Array) -> jax.Array:
    """``log(1 + exp(x))``, bit for bit ``jax.nn.softplus``, at a third of its cost.

    ``jax.nn.softplus`` is ``logaddexp(x, 0)``: ``max(x, 0) + log1p(exp(-|x|))`` behind a
    ``select`` for NaN arguments that keeps XLA's CPU compiler from vectorising the
    loop (3x slower on 50,000 values); ``max`` and the additions propagate a NaN by
    themselves, so the values are the same without it, infinities included.  Its
    derivative is ``sigmoid(x)``, one transcendental per element, where ``logaddexp``'s
    rule takes three and needs the value even when only the gradient is used.  Free
    energies differentiated in every learning step (RBM, DBM, sigmoid belief network)
    use this one.
    """
    return jnp.maximum(x, 0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), jax.nn.sigmoid(x) * t


def check_edges(edges: Any, num_sites: int, argname: str = "edges") -> np.ndarray:
    """Validate an ``(m, 2)`` edge list over sites ``0..num_sites-1``.

    Refuses self-loops (``i == j``) and duplicated pairs (``(i, j)`` and ``(j, i)``
    count as the same pair).  Returns a read-only int32 copy.
    """
    arr = np.asarray(edges)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"`{argname}` must be an integer array of shape (m, 2), got dtype {arr.dtype}")
    if arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"`{argname}` must have shape (m, 2), got {arr.shape}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= num_sites):
        raise ValueError(f"`{argname}` has site indices outside [0, {num_sites}): min {arr.min()}, max {arr.max()}")
    loops = np.nonzero(arr[:, 0] == arr[:, 1])[0]
    if loops.size:
        raise ValueError(f"`{argname}` has self-loops (i == j), e.g. row {loops[0]}: {arr[loops[0]].tolist()}")
    pairs = np.sort(arr, axis=1)
    _, first, counts = np.unique(pairs, axis=0, return_index=True, return_counts=True)
    if np.any(counts > 1):
        dup = pairs[first[np.argmax(counts > 1)]]
        raise ValueError(f"`{argname}` lists the pair {dup.tolist()} more than once (as (i, j) or (j, i))")
    out = arr.astype(np.int32)
    out.setflags(write=False)
    return out


def colour_blocks(num_sites: int, edges: np.ndarray, name: str, offset: int = 0) -> list[dict]:
    """Greedy colouring of ``edges`` as a list of ``{name: flat indices}`` blocks."""
    from ugm_infer.structure import greedy_coloring

    colors = greedy_coloring(num_sites, edges)
    return [{name: np.nonzero(colors == c)[0] + offset} for c in range(int(colors.max()) + 1)]


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def check_params(model: str, params: Any, spec: Mapping[str, tuple[int, ...]], names: Sequence[str] = ()) -> None:
    """Check that ``params`` is a dict with exactly the keys of ``spec``, float leaves of those shapes.

    ``spec[key]`` is the expected shape; ``names`` optionally spells each shape in
    symbols for the message (e.g. ``"(num_visible, num_hidden)"``).
    """
    if not isinstance(params, Mapping):
        raise ValueError(f"{model}: `params` must be a dict with keys {list(spec)}, got {type(params).__name__}")
    missing = [k for k in spec if k not in params]
    if missing:
        raise ValueError(f"{model}: `params` is missing {missing}; expected keys {list(spec)}")
    extra = [k for k in params if k not in spec]
    if extra:
        raise ValueError(f"{model}: `params` has unexpected key(s) {extra}; expected keys {list(spec)}")
    symbols = dict(zip(spec, names))
    for key, shape in spec.items():
        leaf = params[key]
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"{model}: params['{key}'] must be a float array, got dtype {np.dtype(dtype).name}")
        got = tuple(np.shape(leaf))
        if got != tuple(shape):
            sym = f" {symbols[key]} =" if key in symbols else ""
            raise ValueError(f"{model}: params['{key}'] must have shape{sym} {tuple(shape)}, got {got}")


def check_symmetric(model: str, key: str, value: Any, axes: tuple[int, ...], what: str) -> None:
    """Value check: ``value == value.transpose(axes)`` (skipped for tracers)."""
    if _is_tracer(value):
        return
    arr = np.asarray(value, dtype=np.float64)
    ref = np.transpose(arr, axes)
    tol = 1e-5 * max(float(np.max(np.abs(arr))) if arr.size else 0.0, 1.0)
    err = float(np.max(np.abs(arr - ref))) if arr.size else 0.0
    if err > tol:
        raise ValueError(f"{model}: params['{key}'] must be symmetric ({what}); max asymmetry {err:.3g}")


def symmetric_offdiagonal(X: jax.Array, axes: tuple[int, ...] = (1, 0)) -> jax.Array:
    """``(X + X^T) / 2`` with the ``i == j`` blocks zeroed.

    Energies use this instead of ``X`` so that the gradient with respect to ``X`` is
    exactly symmetric with a zero diagonal: learners then keep a valid ``X`` (no
    drift of the diagonal or of the asymmetry by float round-off or by a genuine
    diagonal gradient for binary units).
    """
    n = X.shape[0]
    sym = 0.5 * (X + jnp.transpose(X, axes))
    mask = 1.0 - jnp.eye(n, dtype=X.dtype)
    return sym * mask.reshape((n, n) + (1,) * (X.ndim - 2))


def check_zero_diagonal(model: str, key: str, value: Any, what: str) -> None:
    """Value check: the ``i == j`` entries (first two axes) are zero (skipped for tracers)."""
    if _is_tracer(value):
        return
    arr = np.asarray(value, dtype=np.float64)
    n = arr.shape[0]
    diag = arr[np.arange(n), np.arange(n)]
    tol = 1e-5 * max(float(np.max(np.abs(arr))) if arr.size else 0.0, 1.0)
    if np.any(np.abs(diag) > tol):
        i = int(np.nonzero(np.any(np.abs(diag.reshape(n, -1)) > tol, axis=1))[0][0])
        raise ValueError(
            f"{model}: params['{key}'] must have a zero diagonal ({what}); entry [{i}, {i}] is {diag[i].tolist()}"
        )


def check_key(rng_key: Any, argname: str = "rng_key") -> jax.Array:
    """Accept a typed key (``jax.random.key``) or a raw uint32 key (``PRNGKey``)."""
    if rng_key is None:
        raise TypeError(f"`{argname}` must be a JAX PRNG key (jax.random.key(seed)), got None")
    arr = rng_key
    if not (hasattr(arr, "dtype") and (jnp.issubdtype(arr.dtype, jax.dtypes.prng_key) or arr.dtype == jnp.uint32)):
        raise TypeError(f"`{argname}` must be a JAX PRNG key (jax.random.key(seed)), got {type(rng_key).__name__}")
    return rng_key


def check_scale(value: Any, argname: str) -> float:
    """A finite non-negative float."""
    try:
        out = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{argname}` must be a float, got {type(value).__name__}") from err
    if not np.isfinite(out) or out < 0:
        raise ValueError(f"`{argname}` must be finite and >= 0, got {value}")
    return out


@functools.partial(jax.jit, static_argnums=(2, 3))
def random_params(rng_key: jax.Array, stds: tuple, spec: tuple, dtype: Any) -> dict:
    """Random parameter arrays from one Gaussian draw, in one compilation.

    ``spec`` is a tuple of ``(name, shape, kind)`` with ``kind`` one of

    ``"normal"``
        i.i.d. :math:`\\mathcal N(0, \\mathrm{std}^2)`;
    ``"symmetric"``
        shape ``(n, n, *inner)``: i.i.d. :math:`\\mathcal N(0, \\mathrm{std}^2)` above
        the diagonal, ``X[j, i] = X[i, j].T`` (inner axes reversed) and ``X[i, i] = 0``;
    ``"zeros"``
        zeros (its ``std`` is ignored).

    ``stds`` holds one (traced) standard deviation per entry.  Jitted with static
    shapes: compiling a random-normal draw costs a fraction of a second, so a model's
    whole initialisation is one draw and one compilation rather than one per op.
    """
    sizes = [math.prod(shape) if kind != "zeros" else 0 for _, shape, kind in spec]
    z = jax.random.normal(rng_key, (max(sum(sizes), 1),), dtype)
    out, offset = {}, 0
    for (name, shape, kind), std, size in zip(spec, stds, sizes):
        if kind == "zeros":
            out[name] = jnp.zeros(shape, dtype)
            continue
        x = z[offset : offset + size].reshape(shape)
        offset += size
        if kind == "symmetric":
            n, inner = shape[0], shape[2:]
            x = jnp.triu(jnp.ones((n, n), dtype), k=1).reshape((n, n) + (1,) * len(inner)) * x
            x = x + jnp.transpose(x, (1, 0) + tuple(range(len(shape) - 1, 1, -1)))
        out[name] = jnp.asarray(std, dtype) * x
    return out


def layered_variables(layer_sizes: Any, dtype: Any) -> tuple[tuple[int, ...], tuple[str, ...], dict]:
    """Checked ``(sizes, names, variables)`` of a layered binary model: layers ``v, h1, ..., hL``."""
    if isinstance(layer_sizes, (str, bytes)) or not isinstance(layer_sizes, Sequence):
        raise TypeError(f"`layer_sizes` must be a sequence of ints (n_v, n_h1, ...), got {layer_sizes!r}")
    if len(layer_sizes) < 2:
        raise ValueError(f"`layer_sizes` needs a visible and at least one hidden layer, got {list(layer_sizes)}")
    sizes = tuple(check_int(n, f"layer_sizes[{i}]") for i, n in enumerate(layer_sizes))
    names = ("v",) + tuple(f"h{k}" for k in range(1, len(sizes)))
    return sizes, names, {name: Binary((n,), dtype) for name, n in zip(names, sizes)}


def layered_param_spec(layer_sizes: Sequence[int]) -> tuple[dict, list]:
    """Shapes of layered params ``W1..WL`` (``(n_{k-1}, n_k)``) and ``b0..bL`` (``(n_k,)``), with their names."""
    spec, names = {}, []
    for k in range(1, len(layer_sizes)):
        spec[f"W{k}"] = (layer_sizes[k - 1], layer_sizes[k])
        names.append(f"(n_{k - 1}, n_{k})")
    for k in range(len(layer_sizes)):
        spec[f"b{k}"] = (layer_sizes[k],)
        names.append(f"(n_{k},)")
    return spec, names


def layered_random_params(rng_key: jax.Array, layer_sizes: Sequence[int], scale: float, dtype: Any) -> dict:
    """Layered params (:func:`layered_param_spec`): weights i.i.d. N(0, scale^2), biases zero."""
    check_key(rng_key)
    scale = check_scale(scale, "scale")
    shapes, _ = layered_param_spec(layer_sizes)
    spec = tuple((k, shape, "normal" if k.startswith("W") else "zeros") for k, shape in shapes.items())
    return random_params(rng_key, tuple(scale for _ in spec), spec, jnp.dtype(dtype))


def bound_algorithm(init: Callable, kernel: Callable, logdensity_fn: Callable) -> SamplingAlgorithm:
    """A model-specific kernel bound to one log-density (BlackJAX top-level API).

    ``init(position, logdensity_fn) -> state`` and ``kernel(rng_key, state,
    logdensity_fn) -> (state, info)`` become ``SamplingAlgorithm(init(position),
    step(rng_key, state))``.
    """

    def init_fn(position, rng_key=None):
        del rng_key
        return init(position, logdensity_fn)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)
