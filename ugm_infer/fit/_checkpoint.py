"""Checkpoints of :func:`ugm_infer.fit`: atomic, incremental, finite, and checked when read.

A checkpoint directory holds

``checkpoint.npz``
    the learner state (one array per leaf; PRNG keys as key data) and the metadata
    (JSON: step, counters, data fingerprint, key data, the length of the history file
    that belongs to this state, timing).  Written to a temporary file and renamed, so
    a reader sees the old or the new checkpoint, never a mixture.
``history.jsonl``
    the history, appended: each checkpoint adds only the rows recorded since the
    previous one (see :mod:`ugm_infer.fit._history`).  Bytes beyond the length recorded
    in ``checkpoint.npz`` (a run killed between the two writes) are ignored and cut
    off when the run resumes.
``checkpoint.json``
    the metadata, readable (valid JSON; non-finite numbers written as ``null``).

Files are not ``fsync``-ed (an ``fsync`` costs more than writing a small checkpoint):
a checkpoint survives the process being killed at any moment (``kill -9``); after a
power failure the newest checkpoint may be lost or damaged, and a damaged one is
reported when the run resumes.  A checkpoint whose arrays hold NaN or inf is never
written.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import zipfile
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.fit._history import History, json_safe
from ugm_infer.fit._result import path_name

__all__ = [
    "CHECKPOINT_HISTORY",
    "CHECKPOINT_JSON",
    "CHECKPOINT_NPZ",
    "CheckpointWriter",
    "NonFiniteState",
    "load_checkpoint",
    "read_checkpoint",
    "restore_state",
]

CHECKPOINT_NPZ = "checkpoint.npz"
CHECKPOINT_JSON = "checkpoint.json"
CHECKPOINT_HISTORY = "history.jsonl"
FORMAT = "ugm_infer.fit/2"
_TMP_PREFIX = ".tmp-"
_SEP = "::"


class NonFiniteState(ValueError):
    """The state to be written holds NaN or inf (``leaves``: their names); nothing was written."""

    def __init__(self, leaves: list[str]):
        super().__init__(f"refusing to write a checkpoint with non-finite values in {', '.join(leaves)}")
        self.leaves = leaves


@contextlib.contextmanager
def deferred_sigint():
    """Hold Ctrl-C (SIGINT) until the block ends, so a checkpoint being written is finished."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(frame))
    except ValueError:  # signals unavailable here (e.g. some embedded interpreters)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, received[0])


def _atomic_write(path: str, write: Callable[[Any], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _damaged(path: str, err: BaseException) -> ValueError:
    return ValueError(
        f"`checkpoint_dir`: {path} is damaged or was not written by ui.fit ({type(err).__name__}: {err}); "
        "to start fresh, delete it (or its folder) or pass resume=False"
    )


class CheckpointWriter:
    """Writes the checkpoints of one run into ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, history_bytes: int | None):
        """``history_bytes``: length of the history file of the checkpoint resumed from (``None``: fresh run)."""
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):  # left by a run killed while writing
            if name.startswith(_TMP_PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))
        self.history_path = os.path.join(directory, CHECKPOINT_HISTORY)
        self.history_bytes = history_bytes
        if history_bytes is None:  # a fresh run: the folder's old checkpoint (if any) goes
            for name in (CHECKPOINT_NPZ, CHECKPOINT_JSON, CHECKPOINT_HISTORY):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
        elif os.path.exists(self.history_path):  # cut rows written after the checkpoint resumed from
            with open(self.history_path, "r+b") as f:
                f.truncate(history_bytes)

    def write(self, state: Any, meta: dict, history: History) -> None:
        """Write a checkpoint of ``state`` (raises :class:`NonFiniteState` and writes nothing if it is not finite)."""
        arrays, key_leaves = _state_arrays(state)
        with deferred_sigint():
            lines, rows = history.pending()
            with open(self.history_path, "ab") as f:
                f.write(lines)
                self.history_bytes = f.tell()
            history.mark_written(rows)
            meta = {**meta, "format": FORMAT, "key_leaves": key_leaves, "history_bytes": self.history_bytes}
            meta = json_safe({**meta, "timing": dict(history.timing)})
            arrays["meta"] = np.asarray(json.dumps(meta, sort_keys=True, allow_nan=False))
            _atomic_write(os.path.join(self.directory, CHECKPOINT_NPZ), lambda f: np.savez(f, **arrays))
            readable = {k: v for k, v in meta.items() if k != "state_treedef"}
            text = (json.dumps(readable, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()
            _atomic_write(os.path.join(self.directory, CHECKPOINT_JSON), lambda f: f.write(text))


def _state_arrays(state: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    leaves_with_path = jax.tree_util.tree_flatten_with_path(state)[0]
    keys = {}
    leaves = []
    for i, (_, leaf) in enumerate(leaves_with_path):
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            keys[str(i)] = str(jax.random.key_impl(leaf))
            leaf = jax.random.key_data(leaf)
        leaves.append(leaf)
    host = jax.device_get(leaves)
    arrays = {}
    bad = []
    for i, ((path, _), arr) in enumerate(zip(leaves_with_path, host)):
        arr = np.asarray(arr)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            bad.append(path_name(path) or f"leaf {i}")
        arrays[f"state{_SEP}{i}"] = arr
    if bad:
        raise NonFiniteState(bad)
    return arrays, keys


def load_checkpoint(checkpoint_dir: str) -> dict | None:
    """Read the checkpoint in ``checkpoint_dir`` (``None`` if there is none).

    Returns a dict with ``meta`` (the metadata written by :func:`fit`: step, epoch,
    learner name, batch size, data fingerprint, key data, ...), ``state_leaves``
    (the flattened learner state, host arrays; PRNG-key leaves as raw key data) and
    ``history`` (the history so far, in the layout of :attr:`FitResult.history`).

    Raises
    ------
    ValueError
        When a file is damaged (truncated, not a checkpoint), naming it and how to start fresh.
    """
    found = read_checkpoint(checkpoint_dir)
    if found is None:
        return None
    meta, leaves, history = found
    return {"meta": meta, "state_leaves": leaves, "history": history.as_dict()}


def read_checkpoint(checkpoint_dir: str) -> tuple[dict, list[np.ndarray], History] | None:
    """``(meta, state leaves, History)`` of the checkpoint in ``checkpoint_dir``, or ``None``."""
    path = os.path.join(os.fspath(checkpoint_dir), CHECKPOINT_NPZ)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            leaves = []
            while f"state{_SEP}{len(leaves)}" in z.files:
                leaves.append(np.array(z[f"state{_SEP}{len(leaves)}"]))
            legacy = {name: np.array(z[name]) for name in z.files if name.startswith(f"history{_SEP}")}
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, EOFError) as err:
        raise _damaged(path, err) from err
    if meta.get("format") == FORMAT:
        history = _read_history(os.path.join(os.fspath(checkpoint_dir), CHECKPOINT_HISTORY), meta)
    else:  # the first format kept the history inside the npz
        hist: dict = {"evaluations": {}, "steps": {}, "epochs": {}, "timing": meta.get("timing", {})}
        for name, arr in legacy.items():
            _, group, key = name.split(_SEP, 2)
            hist[group][key] = arr
        history = History.from_dict(hist)
    return meta, leaves, history


def _read_history(path: str, meta: dict) -> History:
    size = int(meta.get("history_bytes", 0))
    timing = {k: (np.nan if v is None else v) for k, v in meta.get("timing", {}).items()}
    if size == 0:
        return History.from_lines([], timing)
    try:
        with open(path, "rb") as f:
            data = f.read(size)
        if len(data) < size:
            raise EOFError(f"{len(data)} bytes, the checkpoint expects {size}")
        return History.from_lines(data.splitlines(), timing)
    except (OSError, EOFError, ValueError, KeyError, TypeError, StopIteration) as err:
        raise _damaged(path, err) from err


def restore_state(ckpt: dict, state_shape: Any) -> Any:
    """The learner state from a loaded checkpoint, checked against the learner's state structure."""
    leaves_shape, treedef = jax.tree.flatten(state_shape)
    meta = ckpt["meta"]
    if meta.get("state_treedef") != str(treedef):
        raise ValueError(
            "`checkpoint_dir` holds a learner state of a different structure; "
            f"checkpoint: {meta.get('state_treedef')}, learner: {treedef}. Use another checkpoint_dir or resume=False"
        )
    saved = ckpt["state_leaves"]
    if len(saved) != len(leaves_shape):
        raise ValueError("`checkpoint_dir`: the number of saved state arrays does not match the learner state")
    leaves = []
    for i, (arr, shape) in enumerate(zip(saved, leaves_shape)):
        impl = meta.get("key_leaves", {}).get(str(i))
        if impl is not None:
            leaf = jax.random.wrap_key_data(jnp.asarray(arr), impl=impl)
        else:
            leaf = jnp.asarray(arr, dtype=shape.dtype)
        if leaf.shape != shape.shape or leaf.dtype != shape.dtype:
            raise ValueError(
                f"`checkpoint_dir`: state leaf {i} has shape {leaf.shape} dtype {leaf.dtype}; the learner "
                f"expects {shape.shape} {shape.dtype}"
            )
        leaves.append(leaf)
    return jax.tree.unflatten(treedef, leaves)
