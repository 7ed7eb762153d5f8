"""The learning history of :func:`ugm_infer.fit`: growing column tables, written as JSON lines.

Three tables (``steps``, ``epochs``, ``evaluations``) hold equal-length numeric
columns.  A field that appears late is NaN in earlier rows, one that goes missing is
NaN in later rows.  Appending is amortised O(1), so a snapshot for a callback costs
O(number of fields), not O(number of steps).

On disk the rows are appended, table by table, as JSON lines
``{"table": name, "start": first row, "columns": {field: [values]}}`` each time a
checkpoint is written (only the rows added since the previous one), so writing a
checkpoint does not grow with the length of the run.  Non-finite numbers are written
as ``null`` (valid JSON) and read back as NaN.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["History", "json_safe"]

TABLES = ("evaluations", "steps", "epochs")
# columns kept as integers (all others are float64)
_INT_COLUMNS = {"steps": ("step", "epoch_index"), "epochs": ("epoch", "step"), "evaluations": ("step",)}
TIMING_KEYS = ("compile_seconds", "train_seconds", "eval_seconds", "checkpoint_seconds")


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (so ``json.dumps(allow_nan=False)`` accepts it)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _column_list(col: np.ndarray) -> list:
    if col.dtype.kind in "iub":
        return col.tolist()
    bad = ~np.isfinite(col)
    if not bad.any():
        return col.tolist()
    out = col.astype(object)
    out[bad] = None
    return out.tolist()


class _Table:
    """Equal-length growable numpy columns."""

    def __init__(self, int_columns: Iterable[str] = ()):
        self.int_columns = set(int_columns)
        self.columns: dict[str, np.ndarray] = {}
        self.n = 0

    def _dtype(self, name: str):
        return np.int64 if name in self.int_columns else np.float64

    def _reserve(self, rows: int) -> None:
        cap = len(next(iter(self.columns.values()))) if self.columns else 0
        if self.n + rows <= cap:
            return
        new_cap = max(16, 2 * cap, self.n + rows)
        for k, col in self.columns.items():
            grown = np.full(new_cap, np.nan) if col.dtype.kind == "f" else np.zeros(new_cap, col.dtype)
            grown[: self.n] = col[: self.n]
            self.columns[k] = grown

    def append(self, columns: Mapping[str, Any], rows: int) -> None:
        if rows == 0:
            return
        for k in columns:
            if k not in self.columns:
                cap = len(next(iter(self.columns.values()))) if self.columns else 0
                dt = self._dtype(k)
                self.columns[k] = np.zeros(cap, dt) if dt is np.int64 else np.full(cap, np.nan)
        self._reserve(rows)
        for k, col in self.columns.items():
            v = columns.get(k)
            if v is None:
                col[self.n : self.n + rows] = 0 if col.dtype.kind == "i" else np.nan
            else:
                col[self.n : self.n + rows] = np.asarray(v, dtype=np.float64 if col.dtype.kind == "f" else col.dtype)
        self.n += rows

    def truncate(self, rows: int) -> None:
        self.n = min(self.n, rows)

    def column(self, name: str) -> np.ndarray:
        return self.columns[name][: self.n]

    def arrays(self, start: int = 0, copy: bool = True) -> dict[str, np.ndarray]:
        out = {}
        for k, col in self.columns.items():
            view = col[start : self.n]
            if copy:
                out[k] = view.copy()
            else:
                view = view.view()
                view.flags.writeable = False
                out[k] = view
        return out


class History:
    """The history of one fit (over resumed runs), see :attr:`ugm_infer.FitResult.history`."""

    def __init__(self):
        self.tables = {t: _Table(_INT_COLUMNS[t]) for t in TABLES}
        self.timing = dict.fromkeys(TIMING_KEYS, 0.0)
        self.written = dict.fromkeys(TABLES, 0)  # rows already in the history file

    # -- adding -------------------------------------------------------------------
    def add_eval(self, record: Mapping[str, float]) -> None:
        self.tables["evaluations"].append({k: [v] for k, v in record.items()}, 1)

    def add_steps(
        self, fields: Mapping[str, np.ndarray], first_step: int, count: int, steps_per_epoch: int, every: int = 1
    ) -> None:
        """Rows for steps ``first_step + 1 ... first_step + count`` (``fields``: one array of ``count`` per field).

        With ``every > 1`` only the steps that are multiples of ``every`` (those whose info
        was computed) get a row; with ``every = 0`` (no info) every step gets a row of its
        step and epoch index.
        """
        steps = np.arange(first_step + 1, first_step + count + 1)
        if every > 1:
            kept = steps % every == 0
            steps, fields = steps[kept], {k: np.asarray(v)[kept] for k, v in fields.items()}
        self.tables["steps"].append({**fields, "step": steps, "epoch_index": (steps - 1) // steps_per_epoch}, len(steps))

    def close_epochs(self, before: int, after: int, steps_per_epoch: int, wall_time: float) -> None:
        """Rows for the epochs completed between step ``before`` and step ``after``.

        An epoch's ``{field}_mean`` averages the step rows recorded in it (all of its steps,
        or every ``k``-th); NaN for an epoch without a recorded value.
        """
        steps = self.tables["steps"]
        epochs = np.arange(before // steps_per_epoch + 1, after // steps_per_epoch + 1)
        if not epochs.size:
            return
        rec = {"epoch": epochs, "step": epochs * steps_per_epoch, "wall_time": np.full(epochs.size, wall_time)}
        fields = [k for k in steps.columns if k not in ("step", "epoch_index")]
        if fields:
            # rows of steps (lo, hi]: the step column is increasing
            lo, hi = (epochs[0] - 1) * steps_per_epoch, epochs[-1] * steps_per_epoch
            step_col = steps.column("step")
            first, last = np.searchsorted(step_col, [lo + 1, hi + 1])
            which = steps.column("epoch_index")[first:last] - (epochs[0] - 1)
            counts = np.bincount(which, minlength=epochs.size).astype(np.float64)
            for k in fields:
                values = steps.column(k)[first:last]
                with np.errstate(invalid="ignore", divide="ignore"):
                    rec[f"{k}_mean"] = np.bincount(which, weights=values, minlength=epochs.size) / counts
        self.tables["epochs"].append(rec, epochs.size)

    def truncate(self, step: int) -> None:
        """Forget everything recorded after step ``step``."""
        for name, table in self.tables.items():
            if table.n:
                keep = int(np.searchsorted(table.column("step"), step, side="right"))
                table.truncate(keep)
            self.written[name] = min(self.written[name], table.n)

    # -- reading --------------------------------------------------------------------
    def as_dict(self, copy: bool = True) -> dict:
        """The public layout; ``copy=False`` gives read-only views (for callbacks)."""
        out: dict[str, Any] = {t: self.tables[t].arrays(copy=copy) for t in TABLES}
        out["timing"] = dict(self.timing)
        return out

    # -- persistence ----------------------------------------------------------------
    def pending(self) -> tuple[bytes, dict[str, int]]:
        """JSON lines for the rows not yet written, and the row counts to :meth:`mark_written` once they are."""
        lines = []
        for name, table in self.tables.items():
            start = self.written[name]
            if table.n > start:
                cols = {k: _column_list(v) for k, v in table.arrays(start, copy=False).items()}
                lines.append(json.dumps({"table": name, "start": start, "columns": cols}, allow_nan=False))
        return "".join(line + "\n" for line in lines).encode(), {t: self.tables[t].n for t in TABLES}

    def mark_written(self, rows: dict[str, int]) -> None:
        self.written = dict(rows)

    @classmethod
    def from_lines(cls, lines: Iterable[bytes], timing: Mapping[str, float]) -> History:
        """Rebuild from the JSON lines of :meth:`pending` (``json.JSONDecodeError``/``KeyError`` if damaged)."""
        h = cls()
        for line in lines:
            if not line.strip():
                continue
            rec = json.loads(line)
            table = h.tables[rec["table"]]
            table.truncate(int(rec["start"]))
            cols = {k: [np.nan if x is None else x for x in v] for k, v in rec["columns"].items()}
            rows = len(next(iter(cols.values()))) if cols else 0
            table.append(cols, rows)
        h.written = {t: h.tables[t].n for t in TABLES}
        h.timing.update({k: float(v) for k, v in timing.items() if k in TIMING_KEYS})
        return h

    @classmethod
    def from_dict(cls, d: Mapping) -> History:
        """Rebuild from the public layout (as returned by :meth:`as_dict`)."""
        h = cls()
        for t in TABLES:
            cols = {k: np.asarray(v) for k, v in d.get(t, {}).items()}
            rows = len(next(iter(cols.values()))) if cols else 0
            h.tables[t].append(cols, rows)
        h.timing.update({k: float(v) for k, v in d.get("timing", {}).items() if k in TIMING_KEYS})
        return h
