""":func:`fit`: validate, build the evaluation, start or resume, run chunks, checkpoint, finish."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer._checked_data import CheckedData
from ugm_infer.fit._arguments import (
    as_key,
    check_check_finite,
    check_int,
    check_learner,
    check_optimizer,
    resolve_info_every,
    resolve_progress,
)
from ugm_infer.fit._checkpoint import FORMAT, CheckpointWriter, NonFiniteState, read_checkpoint, restore_state
from ugm_infer.fit._chunk import ChunkSpec, CompiledChunk, batch_index_key, block_size, compiled_chunk
from ugm_infer.fit._data import Dataset, decode_all, fingerprint, legacy_fingerprint, validate_data
from ugm_infer.fit._evaluation import EvalSchedule, Evaluation, build_evaluation
from ugm_infer.fit._history import History
from ugm_infer.fit._result import FitDiverged, FitInterrupted, FitProgress, FitResult

__all__ = ["fit"]

# default most steps per chunk (a chunk then ends at the end of a block, see _chunk.block_size)
DEFAULT_STEPS_PER_JIT = 1000
# a chunk returns to the host about this often (progress, Ctrl-C, time-based checkpoints)
CHUNK_SECONDS = 1.0
# steps of the first chunk while the time per step is unknown (the first fit of a program)
FIRST_CHUNK_STEPS = 16
# default checkpoint cadence: this much training time, and at least 10x the last write time
CHECKPOINT_SECONDS = 30.0
CHECKPOINT_COST_RATIO = 10.0
# whole blocks of an epoch's steps run in a loop of known length (see _chunk) only off the CPU: on a GPU
# its steps queue back to back; on the CPU it is the same while loop as the step-by-step one, and a second
# copy of the step in the program would add a quarter to two thirds to a first call. None: by backend
BLOCK_LOOPS: bool | None = None


class _Setup(NamedTuple):
    """Everything :func:`fit` validated; fixed for the run."""

    learner: Any
    name: str
    key: jax.Array
    train: Dataset
    held_out: Dataset | None
    params: Any
    num_epochs: int
    batch_size: int
    shuffle: bool
    steps_per_epoch: int
    total_steps: int
    chunk_len: int
    block: int
    max_chunk: int  # most steps of a chunk: steps_per_jit, or whole blocks within the default
    eval_every: int | None
    check_finite: str | None
    info_every: int  # record the learner's info every this many steps (0: never), from `step_info`
    callbacks: tuple
    show_progress: bool
    checkpoint_dir: str | None
    checkpoint_every: int | None
    resume: bool
    fingerprint: str

    def meta(self, step: int) -> dict:
        """The checkpoint metadata at ``step`` (what a resumed run must match, and counters)."""
        spe = self.steps_per_epoch
        return {
            "learner": self.name,
            "model": str(getattr(self.learner.model, "name", "")),
            "step": step,
            "epoch": step // spe,
            "step_in_epoch": step % spe,
            "steps_per_epoch": spe,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "num_examples": self.train.num_examples,
            "num_epochs": self.num_epochs,
            "chunk_len": self.chunk_len,
            "check_finite": self.check_finite or "off",
            "step_info": self.info_every or False,
            "data_fingerprint": self.fingerprint,
            "key_data": np.asarray(jax.random.key_data(self.key)).tolist(),
            "key_impl": str(jax.random.key_impl(self.key)),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }


# ----------------------------------------------------------------------------------
# 1. validate
# ----------------------------------------------------------------------------------
def _validate(learner, rng_key, data, params, num_epochs, batch_size, shuffle, steps_per_jit, eval_every, callbacks,
              progress, checkpoint_dir, checkpoint_every, resume, eval_data, max_steps, check_finite,
              step_info) -> _Setup:  # fmt: skip
    """Check every argument, the data and the parameters on the host; nothing is traced."""
    check_learner(learner)
    num_epochs = check_int(num_epochs, "num_epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    steps_per_jit = check_int(steps_per_jit, "steps_per_jit", 1, allow_none=True)
    eval_every = check_int(eval_every, "eval_every", 1, allow_none=True)
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every", 1, allow_none=True)
    max_steps = check_int(max_steps, "max_steps", 1, allow_none=True)
    check_finite = check_check_finite(check_finite)
    resolve_info_every(step_info, 1)  # a bad value fails before the data are read
    for name, flag in (("shuffle", shuffle), ("resume", resume)):
        if not isinstance(flag, bool):
            raise ValueError(f"`{name}` must be True or False, got {flag!r}")
    show_progress = resolve_progress(progress)
    callbacks = (callbacks,) if callable(callbacks) else tuple(callbacks)
    for i, cb in enumerate(callbacks):
        if not callable(cb):
            raise TypeError(f"`callbacks[{i}]` is not callable: {cb!r}")
    if checkpoint_every is not None and checkpoint_dir is None:
        raise ValueError("`checkpoint_every` needs `checkpoint_dir`")
    if checkpoint_dir is not None:
        checkpoint_dir = os.fspath(checkpoint_dir)
        if os.path.exists(checkpoint_dir) and not os.path.isdir(checkpoint_dir):
            raise ValueError(f"`checkpoint_dir` {checkpoint_dir!r} exists and is not a directory")
    key = as_key(rng_key)
    train = validate_data(data, learner, "data")
    if batch_size > train.num_examples:
        raise ValueError(
            f"`batch_size` ({batch_size}) is larger than the number of examples in `data` ({train.num_examples})"
        )
    held_out = validate_data(eval_data, learner, "eval_data") if eval_data is not None else None
    model = learner.model
    if params is None:
        if not hasattr(model, "init_params"):
            raise ValueError(f"`params` is required: model '{model.name}' has no init_params")
        params = model.init_params(jax.random.split(key, 3)[1])
    model.validate_params(params)
    check_optimizer(learner, params)
    steps_per_epoch = train.num_examples // batch_size
    if train.num_examples % batch_size:
        warnings.warn(
            f"fit: {train.num_examples} examples are not a multiple of batch_size={batch_size}; each epoch drops the "
            f"last {train.num_examples % batch_size} examples of its permutation ({steps_per_epoch} steps per epoch)",
            stacklevel=3,
        )
    total_steps = num_epochs * steps_per_epoch if max_steps is None else min(num_epochs * steps_per_epoch, max_steps)
    name = str(getattr(learner, "name", type(learner).__name__))
    chunk_len = steps_per_jit or DEFAULT_STEPS_PER_JIT
    block = block_size(steps_per_epoch, chunk_len) if _block_loops() else 1
    max_chunk = steps_per_jit or block * (chunk_len // block)
    return _Setup(learner, name, key, train, held_out, params, num_epochs, batch_size, shuffle, steps_per_epoch,
                  total_steps, chunk_len, block, max_chunk, eval_every, check_finite,
                  resolve_info_every(step_info, steps_per_epoch), callbacks, show_progress,
                  checkpoint_dir, checkpoint_every, resume, fingerprint(train))  # fmt: skip


def _block_loops() -> bool:
    """Whether chunks run whole blocks in their own loop (:data:`BLOCK_LOOPS`; by default off the CPU)."""
    return jax.default_backend() != "cpu" if BLOCK_LOOPS is None else bool(BLOCK_LOOPS)


# ----------------------------------------------------------------------------------
# 2. build the evaluation
# ----------------------------------------------------------------------------------
def _evaluation(setup: _Setup, eval_fn: Any) -> Evaluation:
    def sets():
        out = {"train": setup.train.host_codes()}
        if setup.held_out is not None:
            out["eval"] = setup.held_out.host_codes()
        return out

    return build_evaluation(eval_fn, setup.learner, setup.params, sets)


# ----------------------------------------------------------------------------------
# 3. start or resume
# ----------------------------------------------------------------------------------
def _strong(x: Any) -> Any:
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x
    x = jnp.asarray(x)
    return jax.lax.convert_element_type(x, x.dtype) if x.weak_type else x


def _initial_state(setup: _Setup, key_init: jax.Array, data_dev: dict) -> Any:
    # a concrete init (not eval_shape): learners may probe the model's structure from
    # concrete parameters the first time.  The data are decoded on the device only if
    # the learner reads them (CheckedData).  Strong dtypes, exactly as a restored state
    # has them (the compiled chunk is specialised to its argument types).
    train = setup.train
    shapes = {n: (train.num_examples, *setup.learner.model.variables[n].shape) for n in train.stored}
    data = CheckedData(shapes, lambda n: decode_all(train.decoders[n], data_dev[n]))
    state = setup.learner.init(key_init, setup.params, data)
    return jax.tree.map(_strong, state)


def _resume(setup: _Setup, state: Any) -> tuple[Any, int, History, int | None]:
    """``(state, step, history, history_bytes)`` from the checkpoint, or the fresh start."""
    found = read_checkpoint(setup.checkpoint_dir) if (setup.checkpoint_dir and setup.resume) else None
    if found is None:
        return state, 0, History(), None
    meta, leaves, history = found
    current = setup.meta(0)
    if meta.get("format") != FORMAT:
        current["data_fingerprint"] = legacy_fingerprint(setup.train)
        warnings.warn(
            "fit: resuming a checkpoint written by an earlier version of ui.fit; the result may differ from an "
            "uninterrupted run in the last bits",
            stacklevel=3,
        )
    for k in ("learner", "batch_size", "shuffle", "num_examples", "data_fingerprint", "key_data"):
        if meta.get(k) != current[k]:
            raise ValueError(
                f"cannot resume from `checkpoint_dir` {setup.checkpoint_dir!r}: its {k} is {meta.get(k)!r} but this "
                f"run has {current[k]!r} (pass resume=False to start over)"
            )
    for k, what in (("chunk_len", "steps_per_jit"), ("check_finite", "check_finite"), ("step_info", "step_info")):
        if k in meta and meta[k] != current[k]:
            warnings.warn(
                f"fit: resuming with {what}={current[k]!r} (the checkpoint used {meta[k]!r}); results may differ "
                "from the uninterrupted run in the last bits",
                stacklevel=3,
            )
    step = int(meta["step"])
    if step > setup.num_epochs * setup.steps_per_epoch:
        raise ValueError(
            f"the checkpoint in `checkpoint_dir` is at step {step}, beyond num_epochs={setup.num_epochs} "
            f"({setup.num_epochs * setup.steps_per_epoch} steps); raise num_epochs or use resume=False"
        )
    state_shape = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    state = restore_state({"meta": meta, "state_leaves": leaves}, state_shape)
    history.timing["compile_seconds"] = 0.0
    return state, step, history, int(meta.get("history_bytes", 0)) if meta.get("format") == FORMAT else 0


# ----------------------------------------------------------------------------------
# 4-5. run chunks, checkpoint
# ----------------------------------------------------------------------------------
class _Run:
    """The mutable side of one fit: committed state and step, history, timing, checkpoints."""

    def __init__(self, setup: _Setup, evaluation: Evaluation):
        self.setup = setup
        self.evaluation = evaluation
        self.data_dev = {n: jax.device_put(x) for n, x in setup.train.stored.items()}
        key_init, _, self.key_train = jax.random.split(setup.key, 3)
        state = _initial_state(setup, key_init, self.data_dev)
        self.treedef = str(jax.tree.structure(state))
        state, step, self.history, history_bytes = _resume(setup, state)
        self.committed = (state, step)  # replaced in one assignment, so Ctrl-C never sees half an update
        self.writer = CheckpointWriter(setup.checkpoint_dir, history_bytes) if setup.checkpoint_dir else None
        self.checkpointed_step = step if history_bytes is not None else -1
        self.checkpoint_train_seconds = self.history.timing["train_seconds"]
        self.checkpoint_cost = 0.0
        self.warned_nonfinite = False
        self.schedule = EvalSchedule(evaluation.fn is not None, setup.eval_every, setup.steps_per_epoch,
                                     setup.total_steps)  # fmt: skip
        self.seconds_per_step: float | None = None
        self.chunk: CompiledChunk | None = None  # compiled by start()
        self.bar = None

    @property
    def state(self) -> Any:
        return self.committed[0]

    @property
    def step(self) -> int:
        return self.committed[1]

    def start(self) -> None:
        """Compile the chunk (or fetch it from the cache) and open the progress bar."""
        self.chunk = self._compile(self.setup.check_finite == "step")
        self.seconds_per_step = self.chunk.seconds_per_step  # from an earlier fit of the same program, if any
        self.bar = self._progress_bar()

    def _chunk_args(self, state: Any, start: int, count: int) -> tuple:
        return state, self.data_dev, self.key_train, np.int32(start), np.int32(count)

    def _compile(self, stop_on_nonfinite: bool) -> CompiledChunk:
        s = self.setup
        spec = ChunkSpec(s.train.num_examples, s.batch_size, s.steps_per_epoch, s.chunk_len, s.shuffle,
                         tuple(sorted(s.train.decoders.items())), batch_index_key(s.learner), stop_on_nonfinite,
                         s.block, s.info_every)  # fmt: skip
        t = time.perf_counter()
        chunk = compiled_chunk(s.learner, spec, self._chunk_args(self.state, self.step, 0))
        self.history.timing["compile_seconds"] += time.perf_counter() - t
        return chunk

    def _progress_bar(self):
        if not self.setup.show_progress:
            return None
        from tqdm.auto import tqdm  # noqa: PLC0415

        total = self.setup.total_steps
        return tqdm(total=total, initial=min(self.step, total), unit="step", desc=self.setup.name, dynamic_ncols=True)

    def result(self) -> FitResult:
        s = self.setup
        return FitResult(self.state.params, self.history.as_dict(), self.state, s.learner.model, s.name)

    # -- one chunk ----------------------------------------------------------------
    def next_end(self) -> int:
        """Where the next chunk stops: its length, the next evaluation or checkpoint, the end, or after about
        ``CHUNK_SECONDS`` (then at the end of a block, so that whole blocks run in their fast loop)."""
        s, step = self.setup, self.step
        end = min(step + s.max_chunk, s.total_steps)
        end = min(end, self.schedule.next_due(step, self.history.timing, self.seconds_per_step))
        if s.checkpoint_every is not None:
            end = min(end, (step // s.checkpoint_every + 1) * s.checkpoint_every)
        budget = int(CHUNK_SECONDS / self.seconds_per_step) if self.seconds_per_step else FIRST_CHUNK_STEPS
        timed = step + max(1, budget)
        if timed >= end:
            return end
        aligned = timed // s.block * s.block
        return aligned if aligned > step else timed

    def train_chunk(self, end: int) -> None:
        """Run steps ``step+1 .. end`` and commit them (or raise :class:`FitDiverged`)."""
        s, state, step = self.setup, self.state, self.step
        t = time.perf_counter()
        out = self.chunk(*self._chunk_args(state, step, end - step))
        infos, done, finite = jax.device_get((out.infos, out.done, out.finite))
        seconds = time.perf_counter() - t
        self.history.timing["train_seconds"] += seconds
        self.seconds_per_step = seconds / max(int(done), 1)
        if done >= FIRST_CHUNK_STEPS or self.chunk.seconds_per_step is None:  # a few steps overstate it
            self.chunk.seconds_per_step = self.seconds_per_step
        if not finite and s.check_finite == "chunk":  # find the step: replay with a check after every update
            out = self._compile(True)(*self._chunk_args(state, step, end - step))
            infos, done, finite = jax.device_get((out.infos, out.done, out.finite))
        done = int(done)
        self.history.add_steps({k: v[:done] for k, v in infos.items()}, step, done, s.steps_per_epoch, s.info_every)
        self.history.close_epochs(step, step + done, s.steps_per_epoch, self.history.timing["train_seconds"])
        self.committed = (out.state, step + done)
        if self.bar is not None:
            self.bar.update(done)
        if not finite and s.check_finite is not None:
            bad = [k for k, v in infos.items() if np.issubdtype(v.dtype, np.inexact) and not np.isfinite(v[done])]
            what = f"the reported {', '.join(bad)}" if bad and done < end - step else "the parameters"
            raise self._diverged(f"{what} became NaN or infinite at step {self.step + 1}")

    def _diverged(self, what: str) -> FitDiverged:
        step = self.step
        return FitDiverged(
            f"ui.fit diverged: {what} (learner '{self.setup.name}'); the parameters after step {step} are the last "
            "finite ones (FitDiverged.params). Try a smaller learning rate (the optimizer's step size).",
            step,
            self.state.params,
            self.result(),
        )

    # -- evaluation, callbacks, checkpoints -----------------------------------------
    def evaluate(self) -> dict | None:
        step, timing = self.step, self.history.timing
        t = time.perf_counter()
        metrics = self.evaluation(self.state.params)
        seconds = time.perf_counter() - t
        timing["eval_seconds"] += seconds
        self.schedule.record(seconds)
        epoch = step / self.setup.steps_per_epoch
        self.history.add_eval({"step": step, "epoch": epoch, "wall_time": timing["train_seconds"],
                               "eval_seconds": seconds, **metrics})  # fmt: skip
        if self.bar is not None and metrics:
            self.bar.set_postfix({k: f"{v:.4g}" for k, v in metrics.items()})
        return metrics

    def call_back(self, metrics: dict | None) -> bool:
        """Run the callbacks; ``True`` when one asks to stop."""
        if not self.setup.callbacks:
            return False
        progress = FitProgress(self.step, self.step / self.setup.steps_per_epoch, self.state, metrics,
                               self.history.as_dict(copy=False))  # fmt: skip
        stop = False
        for cb in self.setup.callbacks:
            stop = (cb(progress) is True) or stop
        return stop

    def checkpoint_due(self) -> bool:
        s = self.setup
        if self.writer is None:
            return False
        if s.checkpoint_every is not None:
            return self.step % s.checkpoint_every == 0
        since = self.history.timing["train_seconds"] - self.checkpoint_train_seconds
        return since >= max(CHECKPOINT_SECONDS, CHECKPOINT_COST_RATIO * self.checkpoint_cost)

    def checkpoint(self) -> None:
        """Write a checkpoint of the committed step (once per step; never a non-finite one)."""
        if self.writer is None or self.checkpointed_step == self.step:
            return
        t = time.perf_counter()
        meta = {**self.setup.meta(self.step), "state_treedef": self.treedef, "eval_kind": self.evaluation.kind}
        try:
            self.writer.write(self.state, meta, self.history)
        except NonFiniteState as err:
            if self.setup.check_finite is not None:
                raise self._diverged(
                    f"the learner state ({', '.join(err.leaves)}) holds NaN or inf after step {self.step}"
                ) from err
            if not self.warned_nonfinite:
                warnings.warn(f"fit: step {self.step}: {err}; the previous checkpoint is kept", stacklevel=4)
                self.warned_nonfinite = True
            return
        self.checkpoint_cost = time.perf_counter() - t
        self.history.timing["checkpoint_seconds"] += self.checkpoint_cost
        self.checkpointed_step = self.step
        self.checkpoint_train_seconds = self.history.timing["train_seconds"]

    def interrupted(self) -> FitInterrupted:
        """Forget any half-recorded chunk, checkpoint the committed step, and say how to continue."""
        self.history.truncate(self.step)
        self.checkpoint()
        where = self.setup.checkpoint_dir
        how = (
            f"checkpoint written to {where!r}; call ui.fit again with the same arguments to continue"
            if where is not None
            else "no checkpoint_dir, so nothing was saved (FitInterrupted.result holds the state)"
        )
        return FitInterrupted(f"ui.fit interrupted after step {self.step}: {how}", self.step, self.result(), where)


@contextlib.contextmanager
def _ctrl_c_between_chunks():
    """Turn a first Ctrl-C into ``KeyboardInterrupt`` at the next point between chunks; yields ``interrupted()``.

    Python raises ``KeyboardInterrupt`` wherever the interpreter happens to be when the
    signal arrives; while a chunk runs that can be a garbage-collector callback, where
    the exception is printed and dropped, and training would go on.  Here the first
    SIGINT only sets a flag (and restores the previous handler, so a second Ctrl-C
    interrupts at once); the loop raises at its next check.  Only in the main thread,
    and only over Python's default handler (a handler of the caller's is left alone).
    """
    caught = []

    def handler(signum, frame):
        caught.append(signum)
        signal.signal(signal.SIGINT, previous)

    previous = None
    if threading.current_thread() is threading.main_thread():
        current = signal.getsignal(signal.SIGINT)
        if current is signal.default_int_handler:
            previous = current
            signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(caught)
    finally:
        if previous is not None and signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)


def _train(run: _Run, interrupted: Callable[[], bool] = lambda: False) -> None:
    """The loop: chunk, evaluation, callbacks, checkpoint, until the end or a callback stops it."""
    s = run.setup
    if run.step == 0 and run.schedule.enabled:
        run.evaluate()
    stop = False
    while run.step < s.total_steps and not stop:
        if interrupted():
            raise KeyboardInterrupt
        run.train_chunk(run.next_end())
        if interrupted():
            raise KeyboardInterrupt
        metrics = run.evaluate() if run.schedule.due(run.step, run.history.timing) else None
        stop = run.call_back(metrics)
        if stop and metrics is None and run.schedule.enabled:
            run.evaluate()
        if stop or run.step == s.total_steps or run.checkpoint_due():
            run.checkpoint()


# ----------------------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------------------
def fit(
    learner: Any,
    rng_key: jax.Array,
    data: Any,
    *,
    params: Any = None,
    num_epochs: int = 10,
    batch_size: int = 100,
    shuffle: bool = True,
    steps_per_jit: int | None = None,
    eval_every: int | None = None,
    eval_fn: Any = "auto",
    callbacks: Sequence[Callable[[FitProgress], Any]] = (),
    progress: bool | str = "auto",
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = True,
    eval_data: Any = None,
    max_steps: int | None = None,
    check_finite: str | bool = "chunk",
    step_info: bool | int | str = "auto",
) -> FitResult:
    # Long because its docstring documents every argument; the body is a short sequence of named steps.
    """Train ``learner`` on ``data`` by minibatch stochastic approximation.

    Each epoch visits a fresh permutation of the data in ``N // batch_size``
    minibatches of ``batch_size`` examples (the remainder is dropped, see below) and
    calls ``learner.step`` once per minibatch.  Steps run inside one compiled loop
    (a chunk of up to ``steps_per_jit`` steps, across epochs); the host only
    intervenes between chunks (evaluation, checkpoints, callbacks, progress bar),
    about once a second when nothing else is due.

    Parameters
    ----------
    learner
        A :class:`ugm_infer.learn.Learner` (``init``, ``step``, ``model``, ``name``,
        ``visible``).
    rng_key
        A ``jax.random.key`` (or legacy ``PRNGKey``).  The same key gives the same run;
        see :mod:`ugm_infer.fit` for how per-epoch and per-step keys derive from it.
    data
        ``{name: (N, *shape)}`` for every visible variable of the learner, or a bare
        ``(N, *shape)`` array when the learner has exactly one visible variable.
        Values must lie in the variables' domains.  Any numeric dtype works (``uint8``
        and ``bool`` avoid a float copy); a :class:`~ugm_infer.PackedBits` holds
        two-valued data packed eight per byte.  Float, integer and packed data with the
        same values give bit-identical runs.
    params
        Initial parameters.  Default: ``learner.model.init_params(key_params)`` if
        the model has ``init_params``; otherwise required.
    num_epochs
        Number of passes over the data (``>= 1``).  A resumed run continues up to
        this many epochs in total.
    batch_size
        Examples per step, ``1 <= batch_size <= N``.  When ``N % batch_size != 0``
        the last ``N % batch_size`` examples of each epoch's permutation are dropped
        (shapes stay static; with ``shuffle=True`` every example is still used over
        the epochs), and a warning says so.
    shuffle
        Permute the data every epoch (from the epoch key); ``False`` visits the
        examples in order.
    steps_per_jit
        The most steps one compiled call runs before returning to the host (default
        1000, then ending at the end of a block of the epoch, see
        :mod:`ugm_infer.fit._chunk`).  Where chunks start and stop does not change the
        results.
    eval_every
        Evaluate every ``eval_every`` **epochs**.  Default ``None``: evaluate at the
        end of an epoch whenever the evaluations so far plus one more stay within 10%
        of the training time so far (the evaluated epochs then depend on measured
        times).  There is always an evaluation before the first step of a fresh run
        and one after the last step.
    eval_fn
        ``"auto"``: the exact average log-likelihood (:mod:`ugm_infer.exact`) when
        ``log Z`` and the likelihood enumerate at most ``2**22`` configurations (after
        summing one variable analytically, see :func:`ugm_infer.exact.enumeration_plan`);
        otherwise, for fully visible models, the average pseudo-log-likelihood
        (:func:`ugm_infer.learn.pseudo_likelihood.pseudo_log_likelihood`, on at most
        2000 evenly spaced examples of each data set); metric names are prefixed ``train_`` and,
        with ``eval_data``, ``eval_``.  ``None`` disables evaluation.  A callable
        ``eval_fn(params) -> {name: float}`` is used as is.
    callbacks
        Functions ``callback(progress: FitProgress)`` called on the host after every
        chunk (and so after every evaluation).  ``progress.history`` holds read-only
        views, valid during the call (copy what you keep).  Returning ``True`` stops
        training (a final checkpoint is written).  An exception propagates and leaves
        the last checkpoint in place.
    progress
        ``True``/``False`` or ``"auto"``: a tqdm bar when stderr is a terminal and the
        ``CI`` environment variable is not set.
    checkpoint_dir
        Directory for the checkpoint (``checkpoint.npz``: learner state and metadata;
        ``history.jsonl``: the history, appended; ``checkpoint.json``: readable
        metadata); written atomically.  A checkpoint is also written when the run ends,
        stops or is interrupted (Ctrl-C).  Temporary files left by a killed run are
        removed when a fit starts.
    checkpoint_every
        Write a checkpoint every this many **steps** (needs ``checkpoint_dir``).
        Default ``None``: after a chunk once at least 30 s of training, and at least
        10 times the last write's duration, have passed since the last checkpoint.
    resume
        If ``checkpoint_dir`` holds a checkpoint, continue from it (its learner name,
        batch size, shuffling, data and key must match; mismatches raise
        ``ValueError``).  ``False`` deletes it and starts over.  A resumed run gives
        parameters bit-identical to an uninterrupted run with the same arguments.
    eval_data
        Optional held-out data (same format as ``data``) for ``eval_fn="auto"``.
    max_steps
        Stop once this many steps have been done in total (counting resumed runs);
        for step budgets and for testing interruption.
    check_finite
        ``"chunk"`` (default): after every compiled chunk, check that the parameters
        and every number the learner reports (on the steps that record their info,
        see ``step_info``) are finite; if not, replay the chunk with
        a check after every update to find the step, and raise :class:`FitDiverged`.
        ``"step"``: check after every update inside the chunk (stops at the first
        non-finite step without a replay; costs a little on every step, and compiles
        a different program, so results may differ from ``"chunk"`` in the last bits).
        ``False``: no check (a state with NaN/inf is still never written to a
        checkpoint; a warning says so).
    step_info
        Which steps record the learner's info (its :class:`NamedTuple` of diagnostics,
        e.g. the gradient norm) in ``history["steps"]``, whose epoch means go to
        ``history["epochs"]``.  ``"auto"`` (default): every 10th step (every
        ``steps_per_epoch``-th when an epoch is shorter), steps 10, 20, ... counting
        from 1; an int ``k``: every ``k``-th step; ``True``: every step; ``False``:
        none.  A step that records nothing is compiled without what only the info
        needs (for a PCD update of an RBM 784-500 on a CPU recording every step costs
        10-15% of its time, most of it the norm of the ascent direction): pass
        ``True`` when every step's value matters (e.g. counting the updates that
        resampled).  Another setting compiles another program: results may differ in
        the last bits.

    Returns
    -------
    FitResult

    Raises
    ------
    ValueError, TypeError
        On bad arguments, before anything is compiled; a damaged checkpoint names
        its file and how to start fresh.
    FitDiverged
        When the parameters or a reported quantity became NaN or infinite (see
        ``check_finite``); carries the step and the last finite parameters.
    FitInterrupted
        On Ctrl-C (``KeyboardInterrupt``), after checkpointing the last completed
        step; carries the step, the result so far and the checkpoint directory.

    Examples
    --------
    >>> result = ui.fit(ui.learn.pcd(model, num_particles=100), jax.random.key(0), data,
    ...                 num_epochs=20, batch_size=100)                      # doctest: +SKIP
    >>> result.history["evaluations"]["train_log_likelihood"]               # doctest: +SKIP
    """
    setup = _validate(learner, rng_key, data, params, num_epochs, batch_size, shuffle, steps_per_jit, eval_every,
                      callbacks, progress, checkpoint_dir, checkpoint_every, resume, eval_data, max_steps,
                      check_finite, step_info)  # fmt: skip
    evaluation = _evaluation(setup, eval_fn)
    run = _Run(setup, evaluation)
    try:
        run.start()
        with _ctrl_c_between_chunks() as interrupted:
            _train(run, interrupted)
    except KeyboardInterrupt as err:
        if isinstance(err, FitInterrupted):
            raise
        raise run.interrupted() from err
    finally:
        if run.bar is not None:
            run.bar.close()
    return run.result()
