"""Saving and loading built-in models with their parameters, and reading data files.

A saved model is a folder with two files:

* ``model.json`` -- ``{"format": "ugm_infer.model/1", "family": ..., "kwargs": {...}}``
  (and an optional ``"info"`` object): the built-in constructor (:mod:`ugm_infer.models`)
  and its arguments;
* ``params.npz`` -- the parameter pytree, one array per leaf, keys joined with ``/``.

``ui.load_model(folder)`` rebuilds ``(model, params)`` in one call. Only models built by
a constructor listed in :data:`FAMILIES` can be saved this way (a user-written energy
function is Python code, not data: save its params with :func:`save_params` and
rebuild the model in your own code).

Loading is bounded and checked before anything large is allocated, so a saved model
from elsewhere cannot make the loader run out of memory:

* ``model.json`` is validated against a schema (:func:`check_model_spec`: a known family,
  the constructor's keyword arguments with the right types, no unknown keys);
* the model's size (parameters plus one configuration, :func:`model_size`) must stay
  under a limit, :data:`DEFAULT_MAX_MODEL_BYTES` (1 GiB) unless raised with
  ``max_bytes=`` or the environment variable ``UGM_MAX_MODEL_BYTES``;
* every array of ``params.npz`` is checked against the model's parameter shapes, from
  the archive's headers, before it is decompressed.

Any failure is a ``ValueError`` naming the file (``FileNotFoundError`` when the folder
holds no ``model.json`` or ``params.npz``).  Saving writes each file to a temporary
name and renames it into place, so a planted symbolic link is replaced, never followed.

Data files (:func:`load_data`): ``.npz`` (a named array, or ``train``/``test``),
``.npy``, ``.csv`` (comma-separated) and ``.txt`` (whitespace-separated), one example
per row (a header line is detected and skipped); ``unpack_bits`` unpacks
``np.packbits``-packed rows (e.g. the binarized MNIST file with ``unpack_bits=784``).
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MAX_MODEL_BYTES",
    "FAMILIES",
    "build_model",
    "check_model_spec",
    "load_data",
    "load_model",
    "load_params",
    "max_model_bytes",
    "model_info",
    "model_size",
    "save_model",
    "save_params",
]

FORMAT = "ugm_infer.model/1"

#: Default bound on a loaded model's size in bytes (parameters plus one configuration,
#: 4 bytes per number); raise it with ``max_bytes=`` or ``UGM_MAX_MODEL_BYTES``.
DEFAULT_MAX_MODEL_BYTES = 2**30
MAX_MODEL_BYTES_ENV = "UGM_MAX_MODEL_BYTES"
# a model.json is a few hundred bytes (plus site marginals in "info"); refuse anything huge
_MAX_SPEC_FILE_BYTES = 16 * 2**20


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

# the constructor arguments a saved model may carry: name -> kind; the first group is required
_SCHEMA: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "rbm": (("num_visible", "num_hidden"), {}),
    "semi_rbm": (("num_visible", "num_hidden"), {"edges": "edges"}),
    "ising": (("num_spins",), {"edges": "edges", "domain": "domain"}),
    "boltzmann_machine": (("num_units",), {"edges": "edges"}),
    "potts": (("num_sites", "num_states"), {"edges": "edges"}),
    "lattice_ising": (("height", "width"), {"periodic": "bool", "domain": "domain"}),
    "lattice_potts": (("height", "width", "num_states"), {"periodic": "bool"}),
}


def build_model(family: str, **kwargs):
    """The built-in model ``ui.models.<family>(**kwargs)``; ``ValueError`` for an unknown family."""
    fams = _families()
    if family not in fams:
        raise ValueError(f"family: unknown model family {family!r}; expected one of {sorted(fams)}")
    return fams[family](**kwargs)


# ----------------------------------------------------------------------------------
# model specs: schema and size
# ----------------------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_model_spec(family: Any, kwargs: Any) -> dict:
    """Check a saved model's ``family`` and constructor ``kwargs`` against the schema.

    Sizes must be positive integers, ``edges`` a list of ``[i, j]`` integer pairs (or
    ``None``), ``domain`` ``"spin"`` or ``"binary"``, ``periodic`` a bool; unknown or
    missing arguments are errors.  Returns ``kwargs`` as a dict; raises ``ValueError``
    naming the offending entry.
    """
    if not isinstance(family, str) or family not in _SCHEMA:
        raise ValueError(f"family: unknown model family {family!r}; expected one of {list(FAMILIES)}")
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"kwargs: expected an object of constructor arguments, got {type(kwargs).__name__}")
    required, optional = _SCHEMA[family]
    missing = [k for k in required if k not in kwargs]
    if missing:
        raise ValueError(f"kwargs: a {family} model needs {', '.join(missing)}")
    unknown = sorted(set(kwargs) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"kwargs: unknown argument(s) {unknown} for a {family} model; expected {[*required, *optional]}")
    for name, value in kwargs.items():
        kind = optional.get(name, "size")
        if kind == "size" and not (_is_int(value) and value >= 1):
            raise ValueError(f"kwargs.{name}: must be a positive integer, got {value!r}")
        if kind == "bool" and not isinstance(value, bool):
            raise ValueError(f"kwargs.{name}: must be true or false, got {value!r}")
        if kind == "domain" and value not in ("spin", "binary"):
            raise ValueError(f"kwargs.{name}: must be 'spin' or 'binary', got {value!r}")
        if kind == "edges" and value is not None:
            if not isinstance(value, (list, tuple)) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and all(_is_int(i) and i >= 0 for i in e) for e in value
            ):
                raise ValueError(f"kwargs.{name}: must be null or a list of [i, j] pairs of site indices")
    if family == "potts" or family == "lattice_potts":
        if kwargs["num_states"] < 2:
            raise ValueError(f"kwargs.num_states: must be >= 2, got {kwargs['num_states']}")
    return dict(kwargs)


def model_size(family: str, kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """``(number of parameters, number of sites)`` of a built-in model, from its arguments alone.

    Nothing is allocated; ``kwargs`` must pass :func:`check_model_spec`.
    """
    k = dict(kwargs)
    edges = k.get("edges")
    m = None if edges is None else len(edges)
    if family in ("rbm", "semi_rbm"):
        v, h = k["num_visible"], k["num_hidden"]
        lateral = 0 if family == "rbm" else (v * v if m is None else m)
        return v * h + v + h + lateral, v + h
    if family in ("ising", "boltzmann_machine"):
        n = k.get("num_spins", k.get("num_units"))
        return (n * n if m is None else m) + n, n
    if family == "potts":
        n, q = k["num_sites"], k["num_states"]
        return (n * n * q * q if m is None else m * q * q) + n * q, n
    h, w = k["height"], k["width"]
    if family == "lattice_ising":
        return 2, h * w
    q = k["num_states"]
    bonds = 2 * h * w if k.get("periodic", False) else h * (w - 1) + w * (h - 1)
    return bonds * q * q + h * w * q, h * w


def max_model_bytes(value: int | None = None) -> int:
    """The size limit in bytes: ``value`` if given, else ``UGM_MAX_MODEL_BYTES``, else 1 GiB."""
    name = "max_bytes"
    if value is None:
        raw = os.environ.get(MAX_MODEL_BYTES_ENV)
        if raw is None or not raw.strip():
            return DEFAULT_MAX_MODEL_BYTES
        name = MAX_MODEL_BYTES_ENV
        try:
            number = float(raw)
        except ValueError:
            raise ValueError(f"{name}: expected a number of bytes, got {raw!r}") from None
        value = int(number) if np.isfinite(number) and number == int(number) else raw
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name}: must be a positive whole number of bytes, got {value!r}")
    return int(value)


def format_bytes(n: float) -> str:
    """``n`` bytes as a short human-readable string (``1.5 GB``)."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"  # pragma: no cover


def _check_size(family: str, kwargs: Mapping[str, Any], limit: int, where: str) -> None:
    num_params, num_sites = model_size(family, kwargs)
    size = 4 * (num_params + num_sites)
    if size > limit:
        raise ValueError(
            f"{where}: a {family} model with {dict(kwargs)} needs about {format_bytes(size)} ({num_params:.3g} parameters), "
            f"over the limit of {format_bytes(limit)}; if you trust this file, raise the limit with max_bytes= "
            f"or the environment variable {MAX_MODEL_BYTES_ENV}"
        )


# ----------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------
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


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _replace_atomically(path: str, write: Callable[[str], Any]) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then rename it over ``path``.

    A symbolic link at ``path`` is replaced by the new file, never followed.
    """
    folder, name = os.path.split(os.path.abspath(path))
    suffix = os.path.splitext(name)[1]
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> what open() would have given
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def save_params(path: str | os.PathLike, params: Mapping) -> str:
    """Write a (nested) dict of arrays to ``path`` (``.npz``); returns the path."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params: expected a dict of arrays, got {type(params).__name__}")
    path = os.fspath(path)
    path = path if path.endswith(".npz") else path + ".npz"
    flat = _flatten(params)
    _replace_atomically(path, lambda tmp: np.savez(tmp, **flat))
    return path


def _npz_error(path: str, err: Exception) -> ValueError:
    return ValueError(f"{path}: not a readable .npz archive (truncated or damaged: {err})")


def _read_member_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    return tuple(int(s) for s in shape), np.dtype(dtype)


def _check_member_expansion(path: str, name: str, info: zipfile.ZipInfo, shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The array's size in bytes; raises if the zip entry expands to more than that array (plus its header)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if info.file_size > nbytes + 65536:
        raise ValueError(f"{path}: member {name!r} expands to {info.file_size} bytes, more than its array ({nbytes})")
    return nbytes


def load_params(path: str | os.PathLike, expected: Mapping[str, Any] | None = None, *, max_bytes: int | None = None) -> dict:
    """Read params written by :func:`save_params` as a dict of ``jax.numpy`` arrays.

    Each array's header is read before its data: arrays must be numeric (no pickled
    objects) and, when ``expected`` (``{"W": shape, "a/b": shape}``, or a params pytree of
    arrays / ``jax.ShapeDtypeStruct``) is given, exactly the expected names and shapes.
    Without ``expected``, the total size must stay under ``max_bytes`` (see
    :func:`max_model_bytes`).  A damaged file raises ``ValueError``.
    """
    import jax.numpy as jnp

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"params file not found: {path!r}")
    shapes = None
    if expected is not None:
        shapes = {k: tuple(getattr(v, "shape", v)) for k, v in _flatten_shapes(expected).items()}
    limit = max_model_bytes(max_bytes)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = {}
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise ValueError(f"{path}: unexpected member {info.filename!r} (not an array)")
                infos[info.filename[: -len(".npy")]] = info
            if shapes is not None:
                missing, unknown = sorted(set(shapes) - set(infos)), sorted(set(infos) - set(shapes))
                if missing or unknown:
                    raise ValueError(
                        f"{path}: holds arrays {sorted(infos)} but the model's parameters are {sorted(shapes)}"
                        + (f" (missing {missing})" if missing else "")
                        + (f" (unknown {unknown})" if unknown else "")
                    )
            total = 0
            for name, info in infos.items():
                shape, dtype = _read_member_header(zf, info)
                if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or dtype.hasobject:
                    raise ValueError(f"{path}: array {name!r} has dtype {dtype}, expected numbers")
                if shapes is not None and shape != shapes[name]:
                    raise ValueError(f"{path}: array {name!r} has shape {shape} but the model expects {shapes[name]}")
                total += _check_member_expansion(path, name, info, shape, dtype)
            if total > limit:
                raise ValueError(
                    f"{path}: its arrays need {format_bytes(total)}, over the limit of {format_bytes(limit)} "
                    f"(raise it with max_bytes= or {MAX_MODEL_BYTES_ENV})"
                )
            flat = {}
            for name, info in infos.items():
                with zf.open(info) as f:
                    flat[name] = jnp.asarray(np.lib.format.read_array(f, allow_pickle=False))
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
        raise _npz_error(path, err) from None
    except ValueError as err:
        if str(err).startswith(path):
            raise
        raise _npz_error(path, err) from None
    return _unflatten(flat)


def _flatten_shapes(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten_shapes(v, f"{prefix}{k}/"))
        return out
    return {prefix[:-1]: tree}


# ----------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------
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
    text = json.dumps(spec, indent=2, allow_nan=False)

    def write_spec(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    _replace_atomically(os.path.join(folder, "model.json"), write_spec)
    save_params(os.path.join(folder, "params.npz"), params)
    return folder


def _read_spec(spec_path: str) -> dict:
    if os.path.getsize(spec_path) > _MAX_SPEC_FILE_BYTES:
        raise ValueError(f"{spec_path}: {os.path.getsize(spec_path)} bytes, too large for a model file")
    try:
        with open(spec_path) as f:
            spec = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{spec_path}: not valid JSON ({err})") from None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{spec_path}: not a ugm_infer model file (expected format {FORMAT!r})")
    unknown = sorted(set(spec) - {"format", "family", "kwargs", "info"})
    if unknown:
        raise ValueError(f"{spec_path}: unknown key(s) {unknown}; expected format, family, kwargs, info")
    if "family" not in spec:
        raise ValueError(f"{spec_path}: no 'family' (the model constructor, one of {list(FAMILIES)})")
    if not isinstance(spec.get("info", {}), dict):
        raise ValueError(f"{spec_path}: 'info' must be an object")
    return spec


def load_model(folder: str | os.PathLike, *, max_bytes: int | None = None):
    """``(model, params)`` from a folder written by :func:`save_model` or ``ugm-infer fit``.

    ``max_bytes`` bounds the model's size (default ``UGM_MAX_MODEL_BYTES`` or 1 GiB; see
    the module docstring).  Raises ``FileNotFoundError`` when ``model.json`` or
    ``params.npz`` is missing and ``ValueError`` for anything malformed, too large or
    inconsistent, before large arrays are allocated.
    """
    import jax

    folder = os.fspath(folder)
    limit = max_model_bytes(max_bytes)
    spec_path = os.path.join(folder, "model.json")
    if not os.path.isfile(spec_path):
        raise FileNotFoundError(f"no saved model in {folder!r} (model.json not found)")
    spec = _read_spec(spec_path)
    try:
        kwargs = check_model_spec(spec["family"], spec.get("kwargs", {}))
    except ValueError as err:
        raise ValueError(f"{spec_path}: {err}") from None
    family = spec["family"]
    _check_size(family, kwargs, limit, spec_path)
    try:
        model = build_model(family, **kwargs)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{spec_path}: a {family} model cannot be built from {kwargs}: {err}") from None
    expected = jax.eval_shape(lambda k: model.init_params(k), jax.random.key(0))
    params = load_params(os.path.join(folder, "params.npz"), expected, max_bytes=limit)
    try:
        model.validate_params(params)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{os.path.join(folder, 'params.npz')}: {err}") from None
    return model, params


def model_info(folder: str | os.PathLike) -> dict:
    """The ``"info"`` object of a saved model's ``model.json`` (``{}`` if absent)."""
    return dict(_read_spec(os.path.join(os.fspath(folder), "model.json")).get("info", {}))


# ----------------------------------------------------------------------------------
# data files
# ----------------------------------------------------------------------------------
def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def _header_lines(path: str, delimiter: str | None) -> int:
    """Lines to skip so that a text file's first data line is read: 0, or 1 + the header's index."""
    with open(path, errors="replace") as f:
        for index, line in enumerate(f):
            if line.strip() and not line.lstrip().startswith("#"):
                numeric = all(_is_number(t.strip()) for t in line.strip().split(delimiter) if t.strip())
                return 0 if numeric else index + 1
    return 0


def _check_npz_member_size(path: str, key: str) -> None:
    """Before decompressing ``key``: its zip entry must not expand to more than the array its header declares."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{key}.npy")
        _check_member_expansion(path, key, info, *_read_member_header(zf, info))


def _read_array(path: str, key: str | None, header: bool | None) -> np.ndarray:
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as f:
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
                _check_npz_member_size(path, key)
                return np.asarray(f[key])
        if key is not None:
            raise ValueError(f"a key ({key!r}) only applies to .npz files, not {path}")
        if ext == ".npy":
            return np.load(path, allow_pickle=False)
        if ext in (".csv", ".txt"):
            delimiter = "," if ext == ".csv" else None
            skip = _header_lines(path, delimiter) if header is None else int(bool(header))
            try:
                return np.loadtxt(path, delimiter=delimiter, ndmin=2, skiprows=skip)
            except ValueError as err:
                hint = "" if skip else " (if the first line is a header, skip it with header=True)"
                raise ValueError(f"{path}: malformed {ext} file ({err}){hint}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as err:  # zip / header errors
        raise ValueError(f"{path}: cannot be read as {ext} ({err})") from None
    except ValueError as err:
        if str(err).startswith(path) or "key" in str(err):
            raise
        raise ValueError(f"{path}: malformed {ext} file ({err})") from None
    raise ValueError(f"{path}: unsupported data file type {ext!r}; expected .npz, .npy, .csv or .txt")


def load_data(
    path: str | os.PathLike, *, key: str | None = None, unpack_bits: int | None = None, header: bool | None = None
) -> np.ndarray:
    """A float32 ``(N, D)`` data matrix from ``path`` (one example per row).

    ``header`` (``.csv``/``.txt``): ``True`` skips the first line, ``False`` reads it as
    data, ``None`` (default) skips it when it holds a non-numeric field.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a folder, an
    empty or malformed file, one that is not two-dimensional (a 1-D array is refused:
    reshape it to say whether it is one example or one variable), or one that holds
    NaN/inf.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a folder; expected a data file (.npz, .npy, .csv or .txt)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{path}: empty file")
    arr = _read_array(path, key, header)
    if unpack_bits is not None:
        if arr.dtype != np.uint8 or arr.ndim != 2:
            raise ValueError(f"{path}: unpack_bits needs a 2-D uint8 array of packed bits, got {arr.dtype} {arr.shape}")
        if not 0 < unpack_bits <= 8 * arr.shape[1]:
            raise ValueError(f"unpack_bits: must be in [1, {8 * arr.shape[1]}] for rows of {arr.shape[1]} bytes")
        arr = np.unpackbits(arr, axis=1, count=unpack_bits)
    if arr.ndim == 1:
        raise ValueError(
            f"{path}: a 1-D array of shape {arr.shape}; expected one example per row (examples x variables): "
            "save x.reshape(1, -1) for a single example or x.reshape(-1, 1) for a single variable"
        )
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
