"""Shared helpers of the example scripts: provenance of a run and the binarized MNIST loader.

Import from an example with::

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import provenance

(this works both for ``python examples/x.py`` and for a test that loads the script by
path).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the data are not shipped with the repository: ../shared/data beside the repository root, or $UGM_DATA
SHARED_DATA = os.environ.get("UGM_DATA", os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data")))
DEFAULT_MNIST = os.path.join(SHARED_DATA, "binarized_mnist.npz")
NUM_PIXELS = 784


def git_commit(root: str = REPO_ROOT) -> str:
    """Short commit hash of the code being run (``+dirty`` when tracked library or example files differ).

    A copy of the tree made with ``git archive`` has no ``.git``: it carries the hash in
    a file ``COMMIT`` at its root, which is read instead.  ``"unknown"`` if neither.
    """
    try:
        commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", "ugm_infer", "examples"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        path = os.path.join(root, "COMMIT")
        if os.path.isfile(path):
            with open(path) as f:
                return f.read().strip()
        return "unknown"


def provenance(argv: list[str] | None = None, script: str | None = None) -> dict:
    """What produced a result: commit, command line, versions, machine, date and load."""
    import jax

    cmd = None
    if script is not None:
        args = sys.argv[1:] if argv is None else list(argv)
        cmd = " ".join(["python", f"examples/{os.path.basename(script)}", *[_quote(a) for a in args]])
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {
        "commit": git_commit(),
        "command": cmd,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "load_average_1min_at_start": load,
    }


def _quote(arg: str) -> str:
    return f"'{arg}'" if (" " in arg or not arg) else arg


def load_binarized_mnist(path: str, splits=("train", "test")) -> tuple[np.ndarray, ...]:
    """Binarized MNIST splits as float32 ``(N, 784)`` arrays (``FileNotFoundError`` naming ``--data``)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"binarized MNIST not found at {path!r}; it is not part of the repository: put binarized_mnist.npz in "
            "../shared/data beside the repository root, set UGM_DATA to the folder holding it, or pass --data PATH "
            "to an .npz with bit-packed 'train' and 'test' arrays of 784 pixels (np.packbits(x, axis=1))"
        )
    d = np.load(path)
    missing = [k for k in splits if k not in d]
    if missing:
        raise ValueError(f"--data {path!r} has no {missing} array(s) (found {sorted(d.files)})")
    return tuple(np.unpackbits(d[k], axis=1, count=NUM_PIXELS).astype(np.float32) for k in splits)


def tt_runs_before(updates, start: int, every: int):
    """Tempered-transitions runs done after ``updates`` SAP updates (``ui.learn.trans_sap`` runs one before
    updates ``start, start + every, ...``)."""
    u = np.asarray(updates, np.int64)
    return np.where(u > start, (u - start + every - 1) // every, 0)


def updates_within_budget(budget: int, start: int, every: int, sweeps_per_run: int) -> int:
    """Largest number of Trans-SAP updates whose Gibbs steps (updates + ``sweeps_per_run`` per TT run) fit ``budget``."""
    lo, hi = 0, int(budget)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mid + sweeps_per_run * int(tt_runs_before(mid, start, every)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo
