"""The compiled training chunk of :func:`ugm_infer.fit`: many learner steps per call, no host round trip.

A chunk runs global steps ``start, ..., start + count - 1``, with ``count`` a run-time
value, so every chunk (one step or several epochs) runs the same executable.  A
:func:`jax.lax.while_loop` goes over the epochs the chunk touches; an epoch's steps
are cut into *blocks* of ``block`` steps (the largest divisor of the steps per epoch
that fits in a chunk, so an epoch is a whole number of blocks and often one).  A
block the chunk covers whole runs as a :func:`jax.lax.scan`, a loop whose length the
compiler knows: on a GPU its steps are queued back to back, where every iteration of
a while loop first copies its condition to the host and waits for it.  The steps of a
block the chunk covers in part run one per while-loop iteration.  Both loops run the
same step on the same inputs, so the results do not depend on where chunks start and
stop (evaluations, checkpoints, interruptions, resumption).  On the CPU, :func:`fit`
uses blocks of one step (no block loop): there a scan is the same while loop, and the
step's second copy in the program would only add compile time.

Randomness (unchanged since the first checkpoint format): with ``key_train`` the
third key of ``split(rng_key, 3)``, epoch ``e`` uses ``fold_in(key_train, e)``, split
into ``key_perm`` (the epoch's permutation of the examples) and ``key_steps``; the
``s``-th step of the epoch uses ``fold_in(key_steps, s)``.

Each recorded step's info is reduced on the device to one number per field (the mean
over per-particle or per-chain axes; booleans as fractions) and written into a buffer
of ``chunk_len`` entries, so a chunk returns a few kilobytes whatever the learner
reports.  With ``info_every = k > 1`` only global steps ``g`` with ``(g + 1) % k == 0``
compute their info; the other steps run a copy of the step without it (so XLA leaves
out what only the info needs, e.g. the norm of the ascent direction).  Single steps run
as a loop of the steps without info up to the next one with it, then that one; whole
blocks choose per step with a ``lax.cond`` on the step's index (on the CPU a
conditional that carries the state copies the parameters at every step, so the CPU
path has no conditional).  Which copy a step runs depends only on its index, so results
do not depend on where chunks start and stop.

The chunk is compiled ahead of time for the shapes of its arguments and cached per
learner step, :class:`ChunkSpec` and argument shapes, so a repeated fit neither
traces nor compiles again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer import _compile
from ugm_infer.fit._data import Decoder
from ugm_infer.fit._result import path_name

__all__ = [
    "ChunkSpec",
    "CompiledChunk",
    "batch_index_key",
    "block_size",
    "compiled_chunk",
    "epoch_keys",
    "nonfinite_leaves",
    "summarize_info",
]


class ChunkSpec(NamedTuple):
    """Static configuration of a compiled chunk (with the learner's step and the argument shapes, the cache key)."""

    num_examples: int
    batch_size: int
    steps_per_epoch: int
    chunk_len: int
    shuffle: bool
    decoders: tuple[tuple[str, Decoder], ...]
    index_key: str | None
    stop_on_nonfinite: bool
    block: int  # steps of a block (see block_size); 1: no block loops
    info_every: int  # record the info of steps g with (g + 1) % info_every == 0; 0: none (and none computed)


class ChunkOut(NamedTuple):
    """What a chunk returns."""

    state: Any
    infos: dict  # {field: (chunk_len,)}; entries >= done are unspecified
    done: jax.Array  # int32: steps completed (== count unless stopped at a non-finite step)
    finite: jax.Array  # bool: parameters and the completed steps' infos are all finite


def epoch_keys(key_train: jax.Array, epoch: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(key_perm, key_steps)`` of epoch ``epoch``."""
    # imported here: importing ugm_infer.kernels with ugm_infer would load BlackJAX
    from ugm_infer._random import fold_in, split

    key_perm, key_steps = split(fold_in(key_train, epoch))
    return key_perm, key_steps


def batch_index_key(learner: Any) -> str | None:
    """The batch key under which :func:`fit` passes row indices to ``learner``, or ``None``.

    A learner asks for the indices of its minibatch rows (into the ``data`` given to its
    ``init``) by setting a string attribute ``batch_index_key`` on its ``step``
    function, e.g. ``step.batch_index_key = "_index"``; :func:`fit` then adds
    ``batch[key] = indices`` (``(batch_size,)`` int32) to every minibatch.  The key must
    not be a variable name of the model.
    """
    key = getattr(getattr(learner, "step", None), "batch_index_key", None)
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise TypeError(f"`learner.step.batch_index_key` must be a non-empty str or absent, got {key!r}")
    if key in getattr(learner.model, "variables", {}):
        raise ValueError(f"`learner.step.batch_index_key` {key!r} clashes with a variable of the model")
    return key


def summarize_info(info: Any) -> dict[str, jax.Array]:
    """One scalar per numeric info field: the value, or its mean over extra axes (booleans as fractions)."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(info)[0]:
        x = jnp.asarray(leaf)
        if x.dtype == jnp.bool_:
            x = x.astype(jnp.float32)
        if not jnp.issubdtype(x.dtype, jnp.number):
            continue
        if x.ndim:
            x = jnp.mean(x.astype(jnp.promote_types(x.dtype, jnp.float32)))
        out[path_name(path) or "info"] = x
    return out


def _float_leaves(tree: Any) -> list:
    return [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]


def _all_finite(tree: Any) -> jax.Array:
    ok = jnp.bool_(True)
    for x in _float_leaves(tree):
        ok = ok & jnp.all(jnp.isfinite(x))
    return ok


def nonfinite_leaves(tree: Any) -> list[str]:
    """Names of the floating-point leaves of ``tree`` (host or device arrays) holding NaN or inf."""
    names = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact) and not bool(jnp.all(jnp.isfinite(leaf))):
            names.append(path_name(path) or "params")
    return names


def block_size(steps_per_epoch: int, chunk_len: int) -> int:
    """The steps of a block: the largest divisor of ``steps_per_epoch`` that is at most ``chunk_len``."""
    return max(d for d in range(1, min(steps_per_epoch, chunk_len) + 1) if steps_per_epoch % d == 0)


def _make_chunk(learner: Any, spec: ChunkSpec):
    """``run(state, data, key_train, start, count) -> ChunkOut`` (see the module docstring)."""
    from ugm_infer._random import fold_in  # see epoch_keys

    spe, size, block = spec.steps_per_epoch, spec.batch_size, spec.block
    decoders = dict(spec.decoders)
    scan_blocks = block > 1 and not spec.stop_on_nonfinite
    every = spec.info_every

    def summary_of(info):
        return summarize_info(info) if every else {}

    def batch_of(data, perm, s):
        if spec.shuffle:
            idx = jax.lax.dynamic_slice(perm, (s * size,), (size,))
            rows = {n: jnp.take(x, idx, axis=0, mode="clip") for n, x in data.items()}
        else:
            idx = s * size + jnp.arange(size, dtype=jnp.int32)
            rows = {n: jax.lax.dynamic_slice_in_dim(x, s * size, size) for n, x in data.items()}
        batch = {n: decoders[n](x) for n, x in rows.items()}
        if spec.index_key is not None:
            batch[spec.index_key] = idx
        return batch

    def run(state, data, key_train, start, count):
        end = start + count
        batch_like = jax.eval_shape(lambda d: batch_of(d, jnp.arange(spec.num_examples, dtype=jnp.int32), 0), data)
        info_like = jax.eval_shape(lambda s, b: summary_of(learner.step(key_train, s, b)[1]), state, batch_like)
        buffer = {k: jnp.zeros((spec.chunk_len,), v.dtype) for k, v in info_like.items()}

        def epoch_body(carry):
            epoch = carry[1] // spe
            key_perm, key_steps = epoch_keys(key_train, epoch)
            perm = jax.random.permutation(key_perm, spec.num_examples).astype(jnp.int32) if spec.shuffle else None
            first, stop = epoch * spe, jnp.minimum(end, (epoch + 1) * spe)

            def step_at(state, g):  # global step g: its key and minibatch depend on its place in the epoch
                s = g - first
                return learner.step(fold_in(key_steps, s), state, batch_of(data, perm, s))

            def with_info(state, g):
                new_state, info = step_at(state, g)
                return new_state, summary_of(info)

            def without_info(state, g):
                return step_at(state, g)[0], {k: jnp.zeros((), v.dtype) for k, v in info_like.items()}

            def one_step(state, g):
                if every <= 1:
                    return with_info(state, g)
                return jax.lax.cond((g + 1) % every == 0, with_info, without_info, state, g)

            def steps_loop(carry, until, step):  # steps g .. until-1 of one kind, one per iteration
                def step_body(carry):
                    state, g, buffer, ok = carry
                    new_state, summary = step(state, g)
                    buffer = {k: buffer[k].at[g - start].set(summary[k]) for k in buffer}
                    if not spec.stop_on_nonfinite:
                        return new_state, g + 1, buffer, ok
                    good = _all_finite(new_state.params) & _all_finite(summary)
                    new_state = jax.tree.map(lambda a, b: jax.lax.select(good, a, b), new_state, state)
                    return new_state, jnp.where(good, g + 1, g), buffer, good

                return jax.lax.while_loop(lambda c: (c[1] < until) & c[3], step_body, carry)

            def single_steps(carry, until):  # steps g .. until-1
                if every <= 1:
                    return steps_loop(carry, until, with_info)

                # the steps without info up to the next step with it, then that step (a loop of 0 or 1
                # iterations): no conditional carries the state, which XLA would copy at every step
                def segment(carry):
                    g = carry[1]
                    due = (g // every + 1) * every - 1  # the first step g' >= g with (g' + 1) % every == 0
                    carry = steps_loop(carry, jnp.minimum(due, until), without_info)
                    return steps_loop(carry, jnp.minimum(due + 1, until), with_info)

                return jax.lax.while_loop(lambda c: (c[1] < until) & c[3], segment, carry)

            if not scan_blocks:
                return single_steps(carry, stop)

            def whole_block(carry):  # steps g .. g+block-1 in a loop of known length
                state, g, buffer, ok = carry
                state, summaries = jax.lax.scan(one_step, state, g + jnp.arange(block, dtype=g.dtype))
                buffer = {k: jax.lax.dynamic_update_slice(buffer[k], summaries[k], (g - start,)) for k in buffer}
                return state, g + block, buffer, ok

            def segment(carry):  # the rest of the block that holds step g, or all of it
                g = carry[1]
                block_end = (g // block + 1) * block
                whole = (g % block == 0) & (stop >= block_end)
                return jax.lax.cond(whole, whole_block, lambda c: single_steps(c, jnp.minimum(stop, block_end)), carry)

            return jax.lax.while_loop(lambda c: (c[1] < stop) & c[3], segment, carry)

        state, g, buffer, ok = jax.lax.while_loop(
            lambda c: (c[1] < end) & c[3], epoch_body, (state, start, buffer, jnp.bool_(True))
        )
        done = g - start
        valid = jnp.arange(spec.chunk_len) < done
        finite = ok & _all_finite(state.params)
        for x in _float_leaves(buffer):
            finite = finite & jnp.all(jnp.isfinite(x) | ~valid)
        return ChunkOut(state, buffer, done, finite)

    return run


def _signature(args: Any) -> tuple:
    """The tree structure and every leaf's shape, dtype, weak type and placement (what a compiled program is
    specialised to)."""
    leaves, treedef = jax.tree.flatten(args)
    return treedef, tuple(
        (np.shape(x), x.dtype, bool(getattr(x, "weak_type", False)), getattr(x, "sharding", None)) for x in leaves
    )


class CompiledChunk:
    """A compiled chunk, and the seconds per step last measured by a fit that ran it.

    The step time sizes the first chunk of the next fit with the same program (until
    a fit has measured it, a first chunk is short); results never depend on it.
    """

    __slots__ = ("run", "seconds_per_step")

    def __init__(self, run: Callable):
        self.run = run
        self.seconds_per_step: float | None = None

    def __call__(self, *args) -> ChunkOut:
        return self.run(*args)


# learner.step -> {(ChunkSpec, argument signature): CompiledChunk}: repeated fits of the
# same learner on data of the same shapes compile once and skip jit's tracing and dispatch
_CHUNK_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_chunk(learner: Any, spec: ChunkSpec, args: tuple) -> CompiledChunk:
    """The compiled chunk for ``learner``, ``spec`` and the shapes of ``args`` (compiled on first use).

    ``args`` are ``(state, data, key_train, start, count)`` as the chunk will be called
    with them (``start`` and ``count`` int32 scalars).
    """
    try:
        per_learner = _CHUNK_CACHE.setdefault(learner.step, {})
    except TypeError:  # not weak-referenceable: no caching
        per_learner = {}
    key = (spec, _signature(args))
    if key not in per_learner:
        per_learner[key] = CompiledChunk(_compile.jit(_make_chunk(learner, spec)).lower(*args).compile())
    return per_learner[key]
