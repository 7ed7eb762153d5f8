"""Small helpers on ArviZ data shared by :mod:`ugm_infer.diagnostics` and :mod:`ugm_infer.numpyro`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: the InferenceData attribute that says what made it ("sample", "fit", "ais", ...): how diagnose reads it
KIND_ATTR = "ugm_infer_result"


def check_statistics(statistics: Any) -> dict[str, Callable]:
    if statistics is None:
        return {}
    if not isinstance(statistics, Mapping):
        raise TypeError(
            f"`statistics` must be a dict {{name: fn(state) -> scalar or array}}, got {type(statistics).__name__}"
        )
    for name, fn in statistics.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"`statistics` keys must be non-empty strings without '/', got {name!r}")
        if not callable(fn):
            raise TypeError(f"`statistics[{name!r}]` must be callable fn(state) -> scalar or array, got {type(fn).__name__}")
    return dict(statistics)


def undotted_sample_stats(idata: Any) -> Any:
    """``idata`` with ``sample_stats`` variables ``info.<field>`` renamed ``<field>``.

    ``numpyro.infer.MCMC(...).run(extra_fields=("info.swap_acceptance",))`` with a
    ``ui.numpyro`` kernel names the field ``info.swap_acceptance`` in
    ``arviz.from_numpyro``; the kernel checks of :func:`diagnose` read ``swap_acceptance``.
    Names that would clash with an existing variable are kept.
    """
    ss = getattr(idata, "sample_stats", None)
    if ss is None:
        return idata
    rename = {n: n[len("info.") :] for n in ss.data_vars if n.startswith("info.") and n[len("info.") :] not in ss.data_vars}
    if rename:
        idata.sample_stats = ss.rename(rename)
    return idata
