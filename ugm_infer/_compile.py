"""Compiler options of the library's compiled drivers (``ui.sample``, ``ui.fit``, SMC and AIS runs).

On a CPU with AVX-512, XLA emits 256-bit vector code unless told otherwise (the default
avoids the frequency drop of 512-bit instructions on older server CPUs).  The lattice
sweeps are integer hashing and comparisons, which 512-bit vectors run up to 1.6x
faster (``benchmarks/bench_lattice.py``); floating-point and matrix-product work is
unchanged.  So where the CPU has AVX-512 the drivers ask for 512-bit vectors
(``xla_cpu_prefer_vector_width``); the environment variable
``UGM_INFER_CPU_VECTOR_WIDTH`` (``128``, ``256`` or ``512``) overrides the choice, read
when a driver's program is first built.  Other backends get no options.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["ENV_VECTOR_WIDTH", "compiler_options", "cpu_vector_width", "jit"]

ENV_VECTOR_WIDTH = "UGM_INFER_CPU_VECTOR_WIDTH"
_WIDTHS = ("128", "256", "512")


@functools.lru_cache(maxsize=1)
def _has_avx512() -> bool:
    """Whether the CPU reports AVX-512F (``/proc/cpuinfo``; ``False`` where that cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def cpu_vector_width() -> int | None:
    """The preferred CPU vector width in bits: the environment's choice, 512 with AVX-512, else ``None`` (XLA's)."""
    value = os.environ.get(ENV_VECTOR_WIDTH, "").strip()
    if value:
        if value not in _WIDTHS:
            raise ValueError(f"{ENV_VECTOR_WIDTH} must be one of {', '.join(_WIDTHS)} (bits), got {value!r}")
        return int(value)
    return 512 if _has_avx512() else None


def compiler_options() -> dict[str, Any] | None:
    """The options the drivers compile with on the default backend (``None``: XLA's defaults)."""
    if jax.default_backend() != "cpu":
        return None
    width = cpu_vector_width()
    return None if width is None else {"xla_cpu_prefer_vector_width": width}


def _tracing() -> bool:
    """Whether a JAX transformation is tracing (where a ``jax.jit`` is nested and takes no compiler options)."""
    try:
        from jax._src import core

        return not core.trace_state_clean()
    except (ImportError, AttributeError):  # no such API: take the options only where they are accepted
        return True


class _Jitted:
    """A function jitted twice: with the options when called at the top level, without them inside a trace."""

    __slots__ = ("_with_options", "_plain", "__wrapped__")

    def __init__(self, fn: Callable, options: dict[str, Any], kwargs: dict):
        self._with_options = jax.jit(fn, compiler_options=options, **kwargs)
        self._plain = jax.jit(fn, **kwargs)
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return (self._plain if _tracing() else self._with_options)(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return (self._plain if _tracing() else self._with_options).lower(*args, **kwargs)


def jit(fn: Callable, **kwargs) -> Callable:
    """``jax.jit(fn, **kwargs)`` compiled with :func:`compiler_options` where it is called outside a trace.

    Inside another ``jit`` (or any transformation) it is a plain nested ``jax.jit``: XLA
    takes compiler options only for a top-level program, which then decides them.
    """
    options = compiler_options()
    return _Jitted(fn, options, kwargs) if options else jax.jit(fn, **kwargs)
