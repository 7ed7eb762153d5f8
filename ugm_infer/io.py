"""Saving and loading built-in models with their parameters, and reading data files.

A saved model is a folder with two files:

* ``model.json`` -- ``{"format": "ugm_infer.model/1", "family": ..., "kwargs": {...}}``:
  the built-in constructor (:mod:`ugm_infer.models`) and its arguments;
* ``params.npz`` -- the parameter pytree, one array per leaf, keys joined with ``/``.

``ui.load_model(folder)`` rebuilds ``(model, params)`` in one call. Only models built by
a constructor listed in :data:`FAMILIES` can be saved this way (a user-written energy
function is Python code, not data: save its params with :func:`save_params` and
rebuild the model in your own code).

Data files (:func:`load_data`): ``.npz`` (a named array, or ``train``/``test``),
``.npy``, ``.csv`` (comma-separated) and ``.txt`` (whitespace-separated), one example
per row; ``unpack_bits`` unpacks ``np.packbits``-packed rows (e.g. the binarized MNIST
file with ``unpack_bits=784``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["FAMILIES", "build_model", "load_data", "load_model", "load_params", "save_model", "save_params"]

FORMAT = "ugm_infer.model/1"


def _families() -> dict[str, Any]:
    from ugm_infer import models

    return {
        "rbm": models.rbm,
        "semi_rbm": models.semi_rbm,
        "ising": models.ising,
        "boltzmann_machine": models.boltzmann_machine,
        "potts": models.potts,
        "lattice_ising": models.lattice_ising,
        "lattice_potts": models.lattice_potts,
    }


#: Names of the built-in constructors that :func:`save_model` / :func:`load_model` know.
FAMILIES = ("rbm", "semi_rbm", "ising", "boltzmann_machine", "potts", "lattice_ising", "lattice_potts")


def build_model(family: str, **kwargs):
    """The built-in model ``ui.models.<family>(**kwargs)``; ``ValueError`` for an unknown family."""
    fams = _families()
    if family not in fams:
        raise ValueError(f"family: unknown model family {family!r}; expected one of {sorted(fams)}")
    return fams[family](**kwargs)


def _flatten(params: Any, prefix: str = "") -> dict[str, np.ndarray]:
    if isinstance(params, Mapping):
        out: dict[str, np.ndarray] = {}
        for k, v in params.items():
            if not isinstance(k, str) or "/" in k:
                raise ValueError(f"params: keys must be strings without '/', got {k!r}")
            out.update(_flatten(v, f"{prefix}{k}/"))
        return out
    return {prefix[:-1]: np.asarray(params)}


def _unflatten(flat: Mapping[str, np.ndarray]) -> dict:
    out: dict = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def save_params(path: str | os.PathLike, params: Mapping) -> str:
    """Write a (nested) dict of arrays to ``path`` (``.npz``); returns the path."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params: expected a dict of arrays, got {type(params).__name__}")
    path = os.fspath(path)
    np.savez(path, **_flatten(params))
    return path if path.endswith(".npz") else path + ".npz"


def load_params(path: str | os.PathLike) -> dict:
    """Read params written by :func:`save_params` as a dict of ``jax.numpy`` arrays."""
    import jax.numpy as jnp

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"params file not found: {path!r}")
    with np.load(path) as f:
        return _unflatten({k: jnp.asarray(f[k]) for k in f.files})


def save_model(folder: str | os.PathLike, family: str, kwargs: Mapping[str, Any], params: Mapping, **extra) -> str:
    """Save a built-in model (``family``, constructor ``kwargs``) and ``params`` to ``folder``.

    ``extra`` JSON-serialisable entries (e.g. the data shape, the learner) are stored in
    ``model.json`` under ``"info"``. Returns the folder.
    """
    model = build_model(family, **kwargs)  # validates family and kwargs
    model.validate_params(params)
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    spec = {"format": FORMAT, "family": family, "kwargs": dict(kwargs), "info": extra}
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(spec, f, indent=2)
    save_params(os.path.join(folder, "params.npz"), params)
    return folder


def load_model(folder: str | os.PathLike):
    """``(model, params)`` from a folder written by :func:`save_model` or ``ugm-infer fit``."""
    folder = os.fspath(folder)
    spec_path = os.path.join(folder, "model.json")
    if not os.path.isfile(spec_path):
        raise FileNotFoundError(f"no saved model in {folder!r} (model.json not found)")
    try:
        with open(spec_path) as f:
            spec = json.load(f)
    except json.JSONDecodeError as err:
        raise ValueError(f"{spec_path}: not valid JSON ({err})") from None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{spec_path}: not a ugm_infer model file (expected format {FORMAT!r})")
    model = build_model(spec["family"], **spec.get("kwargs", {}))
    params = load_params(os.path.join(folder, "params.npz"))
    model.validate_params(params)
    return model, params


def _read_array(path: str, key: str | None) -> np.ndarray:
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npz":
            with np.load(path) as f:
                names = list(f.files)
                if key is None:
                    if "train" in names:
                        key = "train"
                    elif len(names) == 1:
                        key = names[0]
                    else:
                        raise ValueError(f"{path}: holds arrays {names}; say which one with a key (--data-key)")
                if key not in names:
                    raise ValueError(f"{path}: no array named {key!r}; it holds {names}")
                return np.asarray(f[key])
        if key is not None:
            raise ValueError(f"a key ({key!r}) only applies to .npz files, not {path}")
        if ext == ".npy":
            return np.load(path, allow_pickle=False)
        if ext in (".csv", ".txt"):
            return np.loadtxt(path, delimiter="," if ext == ".csv" else None, ndmin=2)
    except (OSError, EOFError) as err:  # zip / header errors
        raise ValueError(f"{path}: cannot be read as {ext} ({err})") from None
    except ValueError as err:
        if str(err).startswith(path) or "key" in str(err):
            raise
        raise ValueError(f"{path}: malformed {ext} file ({err})") from None
    raise ValueError(f"{path}: unsupported data file type {ext!r}; expected .npz, .npy, .csv or .txt")


def load_data(path: str | os.PathLike, *, key: str | None = None, unpack_bits: int | None = None) -> np.ndarray:
    """A float32 ``(N, D)`` data matrix from ``path`` (one example per row).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for an empty or
    malformed one, or one that is not two-dimensional, or holds NaN/inf.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{path}: empty file")
    arr = _read_array(path, key)
    if unpack_bits is not None:
        if arr.dtype != np.uint8 or arr.ndim != 2:
            raise ValueError(f"{path}: unpack_bits needs a 2-D uint8 array of packed bits, got {arr.dtype} {arr.shape}")
        if not 0 < unpack_bits <= 8 * arr.shape[1]:
            raise ValueError(f"unpack_bits: must be in [1, {8 * arr.shape[1]}] for rows of {arr.shape[1]} bytes")
        arr = np.unpackbits(arr, axis=1, count=unpack_bits)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D array (examples x variables), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{path}: no data (shape {arr.shape})")
    if not np.issubdtype(arr.dtype, np.number) and arr.dtype != np.bool_:
        raise ValueError(f"{path}: expected numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{path}: contains NaN or infinite values")
    return arr
