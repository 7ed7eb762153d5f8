"""Memory estimates made before anything is allocated.

A command estimates what it will hold (parameters, gradients and optimizer moments,
chains, data, stored draws) from the model's arguments alone
(:func:`ugm_infer.io.model_size`) and stops with a one-line error naming the option to
change when the estimate exceeds the memory available on the device JAX computes on.
"""

from __future__ import annotations

import os

from ugm_infer.cli._options import CLIError
from ugm_infer.io import format_bytes, max_model_bytes, model_size

# 4-byte numbers (float32 parameters, float32/int32 states)
_NUMBER = 4
# optimizer moments per parameter
_OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2}
# a command may use at most this fraction of the free memory
_HEADROOM = 0.8


def available_bytes() -> tuple[int | None, str]:
    """``(bytes free, where)``: the accelerator's free memory, else the host's available memory."""
    try:
        import jax

        if jax.default_backend() != "cpu":
            stats = jax.devices()[0].memory_stats() or {}
            if "bytes_limit" in stats:
                return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0)), f"free on {jax.devices()[0]}"
    except Exception:  # noqa: BLE001 - no estimate is better than a crash here
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available on this machine"
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available on this machine"
    except (ValueError, OSError, AttributeError):
        return None, ""


def _check_free(needed: int, flag: str, what: str, alternative: str) -> None:
    free, where = available_bytes()
    if free is not None and needed > _HEADROOM * free:
        raise CLIError(
            f"{flag}: {what} needs about {format_bytes(needed)}, more than the {format_bytes(free)} {where}; {alternative}"
        )


def check_model_bytes(family: str, kwargs: dict, limit: int | None, flag: str, alternative: str) -> int:
    """The model's size in bytes; a :class:`CLIError` over ``limit`` (``--max-model-bytes``)."""
    num_params, num_sites = model_size(family, kwargs)
    size = _NUMBER * (num_params + num_sites)
    limit = max_model_bytes(limit)
    if size > limit:
        raise CLIError(
            f"{flag}: a {family} model with {kwargs} has {num_params:.3g} parameters, about {format_bytes(size)}, over "
            f"the model size limit of {format_bytes(limit)}; {alternative} (or raise the limit with --max-model-bytes)"
        )
    return size


def check_training(
    family: str,
    kwargs: dict,
    *,
    optimizer: str,
    num_chains: int,
    replicas: int,
    data_shape: tuple[int, int],
    limit: int | None,
) -> None:
    """Refuse a fit whose parameters, optimizer state, chains and data will not fit in memory."""
    num_columns = data_shape[1]
    pairs = f"--data has {num_columns} columns; a dense {family} couples every pair of them"
    if family == "rbm" or (family == "semi_rbm" and kwargs["num_hidden"] > num_columns):
        flag, alternative = "--hidden", "use fewer hidden units (--hidden)"
    elif family == "potts":
        flag, alternative = "--data", f"{pairs}: use fewer columns or fewer states (--num-states)"
    else:
        flag, alternative = "--data", f"{pairs}: use --model rbm with a few hidden units"
    check_model_bytes(family, kwargs, limit, flag, alternative)
    num_params, num_sites = model_size(family, kwargs)
    parts = {
        flag: _NUMBER * num_params * (3 + _OPTIMIZER_SLOTS.get(optimizer, 2)),
        "--num-chains": _NUMBER * num_sites * num_chains * max(replicas, 1) * 2,
        "--max-examples": _NUMBER * data_shape[0] * num_columns * 2,
    }
    total = sum(parts.values())
    largest = max(parts, key=parts.get)
    alternatives = {
        flag: alternative,
        "--num-chains": "use fewer chains (--num-chains)",
        "--max-examples": "train on fewer examples (--max-examples)",
    }
    what = {
        flag: f"training a {family} model with {kwargs} ({num_params:.3g} parameters, with {optimizer} state)",
        "--num-chains": f"{num_chains} chains x {max(replicas, 1)} replicas of {num_sites} sites (with the rest of the fit)",
        "--max-examples": f"{data_shape[0]} examples x {num_columns} variables (with the rest of the fit)",
    }
    _check_free(total, largest, what[largest], alternatives[largest])


def check_sampling(num_sites: int, *, num_chains: int, num_steps: int, replicas: int) -> None:
    """Refuse a sampling run whose stored draws will not fit in memory."""
    needed = _NUMBER * num_sites * num_chains * num_steps * max(replicas, 1)
    flag = "--num-steps" if num_steps >= num_chains else "--num-chains"
    _check_free(
        needed,
        flag,
        f"storing {num_chains} chains x {num_steps} draws x {max(replicas, 1)} replicas of {num_sites} sites",
        "use fewer --num-steps or --num-chains",
    )
