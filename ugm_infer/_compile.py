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


def jit(fn: Callable, **kwargs) -> Callable:
    """``jax.jit(fn, **kwargs)`` compiled with :func:`compiler_options`."""
    options = compiler_options()
    return jax.jit(fn, compiler_options=options, **kwargs) if options else jax.jit(fn, **kwargs)
