"""Resampling schemes of :mod:`blackjax.smc.resampling` by name, shared by the SMC samplers and the learners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blackjax.smc import resampling as bj_resampling

__all__ = ["RESAMPLING", "resolve_resampling"]

#: Resampling schemes of :mod:`blackjax.smc.resampling` accepted by name.
RESAMPLING = {
    "systematic": bj_resampling.systematic,
    "stratified": bj_resampling.stratified,
    "multinomial": bj_resampling.multinomial,
    "residual": bj_resampling.residual,
}


def resolve_resampling(resampling: Any) -> Callable:
    """A BlackJAX resampling function by name, or a callable ``(rng_key, weights, num) -> indices``."""
    if callable(resampling):
        return resampling
    if resampling not in RESAMPLING:
        raise ValueError(f"`resampling` must be one of {sorted(RESAMPLING)} or a callable, got {resampling!r}")
    return RESAMPLING[resampling]
