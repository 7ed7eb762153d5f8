"""Training data whose values a caller has already checked (:class:`CheckedData`).

A module of its own, outside :mod:`ugm_infer.learn`, so that :mod:`ugm_infer.fit` can
build it without importing the learners (and BlackJAX and optax with them) when
``ugm_infer`` is imported; :mod:`ugm_infer.learn.base` re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax


class CheckedData(Mapping):
    """Training data ``{visible name: array}`` whose values a caller has already checked.

    :func:`ugm_infer.fit` hands its data to ``learner.init`` in this form: the arrays
    (in the domains' dtypes) are made by ``make(name)`` the first time they are read and
    then kept, so an ``init`` that ignores its data never decodes the whole training set.
    :func:`check_batch` checks its names and shapes and returns it unchanged (the values
    were checked when the caller built it).  It is a pytree: flattening reads every array,
    and unflattening gives a plain ``dict``.
    """

    __slots__ = ("_shapes", "_make", "_arrays")

    def __init__(self, shapes: Mapping[str, tuple[int, ...]], make: Callable[[str], jax.Array]):
        self._shapes = {n: tuple(s) for n, s in shapes.items()}
        self._make = make
        self._arrays: dict[str, jax.Array] = {}

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of ``self[name]`` (without making it)."""
        return self._shapes[name]

    def __getitem__(self, name: str) -> jax.Array:
        if name not in self._arrays:
            if name not in self._shapes:
                raise KeyError(name)
            self._arrays[name] = self._make(name)
        return self._arrays[name]

    def __contains__(self, name: object) -> bool:
        return name in self._shapes

    def __iter__(self):
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)

    def __repr__(self) -> str:
        return f"CheckedData({self._shapes})"


jax.tree_util.register_pytree_with_keys(
    CheckedData,
    lambda d: (tuple((jax.tree_util.DictKey(n), d[n]) for n in d), tuple(d)),
    lambda names, arrays: dict(zip(names, arrays, strict=True)),
)
