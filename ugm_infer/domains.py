"""Variable domains: the set of values a discrete variable can take.

A domain fixes the *shape* of one variable (one configuration, unbatched), its
set of values and the dtype its states are stored in.  Three domains exist:

============================  ==========================  ==================
domain                        values                      default dtype
============================  ==========================  ==================
``Binary(shape)``             ``{0, 1}``                  ``float32``
``Spin(shape)``               ``{-1, +1}``                ``float32``
``Categorical(shape, K)``     ``{0, ..., K-1}``           ``int32``
============================  ==========================  ==================

The dtype is a performance choice (``float32`` suits matmul-heavy models, ``int8``
suits huge lattices); whatever it is, states hold the documented values.
Energies should cast states to the dtype they compute in
(``s.astype(W.dtype)``), because ``int8 @ int8`` overflows.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer import _random

__all__ = ["Domain", "Binary", "Spin", "Categorical"]


def _as_shape(shape: Any, argname: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (tuple, list)):
        raise TypeError(f"`{argname}` must be an int or a tuple of ints, got {shape!r}")
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"`{argname}` must be an int or a tuple of ints, got {shape!r}")
    shape = tuple(int(s) for s in shape)
    if any(s < 1 for s in shape):
        raise ValueError(f"`{argname}` must have positive entries, got {shape}")
    return shape


class Domain:
    """Base class of the variable domains (see the module docstring).

    Parameters
    ----------
    shape
        Shape of one configuration of the variable (``()`` for a scalar).
    dtype
        Storage dtype of states.
    """

    shape: tuple[int, ...]
    dtype: Any
    num_states: int

    def __init__(self, shape: Any = (), dtype: Any = jnp.float32):
        self.shape = _as_shape(shape)
        try:
            self.dtype = jnp.dtype(dtype)
        except TypeError as err:
            raise TypeError(f"`dtype` must be a numeric dtype (e.g. jnp.float32, jnp.int8), got {dtype!r}") from err
        if not (jnp.issubdtype(self.dtype, jnp.integer) or jnp.issubdtype(self.dtype, jnp.floating)):
            if not (self.dtype == jnp.bool_ and self._bool_ok()):
                raise TypeError(f"`dtype` {self.dtype.name} cannot hold the values of {type(self).__name__}")

    def _bool_ok(self) -> bool:
        return False

    # -- values -----------------------------------------------------------------
    @property
    def values(self) -> np.ndarray:
        """The allowed values, in index order, as a float64 numpy array."""
        raise NotImplementedError

    @property
    def size(self) -> int:
        """Number of sites (scalar variables) in one configuration."""
        return math.prod(self.shape)

    def from_index(self, index: jax.Array) -> jax.Array:
        """Map state indices ``0..K-1`` to values, in this domain's dtype."""
        values = jnp.asarray(self.values, dtype=self.dtype)
        return values[index]

    def to_index(self, value: jax.Array) -> jax.Array:
        """Map values to state indices ``0..K-1`` (int32)."""
        raise NotImplementedError

    def random(self, rng_key: jax.Array, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        """Uniformly random values of shape ``batch_shape + self.shape``.

        The values of ``jax.random.randint(rng_key, shape, 0, num_states)`` mapped by
        :meth:`from_index`, bit for bit, drawn by one compiled program per shape.
        """
        return _draw(rng_key, (self._spec(tuple(batch_shape)),), False)[0]

    def _spec(self, batch_shape: tuple[int, ...]) -> tuple:
        """What a draw depends on, hashable: (shape, number of states, values, dtype name)."""
        return (batch_shape + self.shape, int(self.num_states), tuple(self.values.tolist()), self.dtype.name)

    def contains(self, value: np.ndarray, xp: Any = np) -> np.ndarray:
        """Elementwise: is ``value`` one of the allowed values (host numpy, or ``xp=jax.numpy`` inside ``jit``).

        One comparison per value for up to four values, a range check for a range of
        integers held in an integer array, :func:`numpy.isin` otherwise (whose table
        method would copy an integer array to ``intp``).
        """
        value = xp.asarray(value)
        values = self.values
        as_int = [int(v) if float(v).is_integer() else float(v) for v in values]
        if len(as_int) <= 4:
            mask = value == as_int[0]
            for v in as_int[1:]:
                if xp is np:
                    mask |= value == v
                else:
                    mask = mask | (value == v)
            return mask
        if np.issubdtype(value.dtype, np.integer) and as_int == list(range(as_int[0], as_int[0] + len(as_int))):
            return (value >= as_int[0]) & (value <= as_int[-1])
        return xp.isin(value, values if xp is np else xp.asarray(values))

    def check_values(self, value: np.ndarray, label: str) -> None:
        """Raise a ValueError naming ``label`` (e.g. ```state['s']```) when the host array
        ``value`` holds NaN or inf, or values outside this domain."""
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            raise ValueError(f"{label} contains NaN or inf")
        bad = ~self.contains(value)
        if np.any(bad):
            raise ValueError(
                f"{label} has {int(bad.sum())} value(s) outside the domain {self!r} "
                f"(allowed {self.values.tolist()}), e.g. {value[bad].reshape(-1)[0]}"
            )

    # -- dunder -----------------------------------------------------------------

    def _key(self) -> tuple:
        return (type(self).__name__, self.shape, self.num_states, str(self.dtype))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype.name})"


class Binary(Domain):
    """Variables in ``{0, 1}``.

    Takes ``shape`` and ``dtype`` (``float32`` by default) as :class:`Domain` does.
    """

    num_states = 2

    def _bool_ok(self) -> bool:
        return True

    @property
    def values(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def to_index(self, value: jax.Array) -> jax.Array:
        return (jnp.asarray(value) > 0.5).astype(jnp.int32)


class Spin(Domain):
    """Variables in ``{-1, +1}`` (index 0 is ``-1``, index 1 is ``+1``).

    Takes ``shape`` and ``dtype`` (``float32`` by default) as :class:`Domain` does.
    """

    num_states = 2

    def __init__(self, shape: Any = (), dtype: Any = jnp.float32):
        super().__init__(shape, dtype)
        if jnp.issubdtype(self.dtype, jnp.unsignedinteger):
            raise ValueError(f"`dtype` {self.dtype.name} is unsigned and cannot hold the spin value -1")

    @property
    def values(self) -> np.ndarray:
        return np.array([-1.0, 1.0])

    def to_index(self, value: jax.Array) -> jax.Array:
        return (jnp.asarray(value) > 0).astype(jnp.int32)


class Categorical(Domain):
    """Variables in ``{0, ..., num_states - 1}``.

    Parameters
    ----------
    shape
        Shape of one configuration of the variable (``()`` for a scalar).
    num_states
        Number of states ``K >= 2``.
    dtype
        Storage dtype of states (``int32`` by default; ``int8`` for ``K <= 127``
        saves memory on huge lattices).
    """

    def __init__(self, shape: Any = (), num_states: int | None = None, dtype: Any = jnp.int32):
        if num_states is None:
            raise TypeError("Categorical needs `num_states`, e.g. ui.Categorical(shape=(3, 3), num_states=3)")
        if isinstance(num_states, bool) or not isinstance(num_states, (int, np.integer)):
            raise TypeError(f"`num_states` must be an int, got {type(num_states).__name__}")
        if num_states < 2:
            raise ValueError(f"`num_states` must be >= 2, got {num_states}")
        self.num_states = int(num_states)
        super().__init__(shape, dtype)
        if jnp.issubdtype(self.dtype, jnp.integer) and jnp.iinfo(self.dtype).max < self.num_states - 1:
            raise ValueError(f"`dtype` {self.dtype.name} cannot hold {self.num_states} states")

    def _bool_ok(self) -> bool:
        return self.num_states == 2

    @property
    def values(self) -> np.ndarray:
        return np.arange(self.num_states, dtype=np.float64)

    def to_index(self, value: jax.Array) -> jax.Array:
        return jnp.asarray(value).astype(jnp.int32)

    def __repr__(self) -> str:
        return f"Categorical(shape={self.shape}, num_states={self.num_states}, dtype={self.dtype.name})"


def _draw_one(rng_key: jax.Array, spec: tuple) -> jax.Array:
    shape, num_states, values, dtype = spec
    index = _random.randint(rng_key, shape, jnp.int32(0), jnp.int32(num_states))
    # what from_index does, as one gather
    return jnp.take(jnp.asarray(values, dtype=dtype), index, axis=0, mode="clip")


@functools.partial(jax.jit, static_argnums=(1, 2))
def _draw(rng_key: jax.Array, specs: tuple, split: bool) -> tuple:
    # compiled, through the fused hash (ugm_infer._random): jax.random.randint's loop over a batch of
    # lattices (rank 3) costs XLA 0.5-0.9 s to compile, this whole program 0.15-0.2 s
    keys = _random.split(rng_key, len(specs)) if split else [rng_key]
    return tuple(_draw_one(k, spec) for k, spec in zip(keys, specs))


def _random_values(rng_key: jax.Array, domains: dict[str, Domain], batch_shape: tuple[int, ...] = ()) -> dict:
    """Uniformly random values of every domain: ``{name: domain.random(key_name, batch_shape)}``.

    The keys are ``jax.random.split(rng_key, len(domains))`` in ``domains``' order;
    one compiled program draws them all.
    """
    specs = tuple(d._spec(tuple(batch_shape)) for d in domains.values())
    return dict(zip(domains, _draw(rng_key, specs, True)))
