"""Tests of ``ui.fit`` when things go wrong: divergence, bad learning rates, Ctrl-C, kill -9, damaged files.

The learners and data are the small ones of ``test_fit.py`` (a 4-spin model), so that
each fit compiles in about a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_fit import DATA, MODEL, NOISY, ZERO_PARAMS, _assert_same_state

import ugm_infer as ui
import ugm_infer.fit as fit_module
from ugm_infer.fit import (
    CHECKPOINT_HISTORY,
    CHECKPOINT_JSON,
    CHECKPOINT_NPZ,
    FitDiverged,
    FitInterrupted,
    fit,
    load_checkpoint,
)

HERE = os.path.dirname(__file__)


def _finite(tree) -> bool:
    return all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(tree) if np.asarray(x).dtype.kind == "f")


def _strict_json(text: str):
    """``json.loads`` that refuses NaN and Infinity (which are not JSON)."""

    def refuse(name):
        raise ValueError(f"not valid JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# ----------------------------------------------------------------------------------
# divergence
# ----------------------------------------------------------------------------------
DIVERGING = ui.learn.exact_ml(MODEL, optimizer=optax.sgd(1e38))


def test_divergence_is_detected_at_the_right_step_and_keeps_the_last_finite_params(tmp_path):
    kw = dict(params=ZERO_PARAMS, num_epochs=5, batch_size=10, progress=False, eval_fn=None, step_info=True)
    with pytest.raises(FitDiverged, match=r"step \d+.*learning rate") as info:
        fit(DIVERGING, jax.random.key(0), DATA, checkpoint_dir=tmp_path, checkpoint_every=1, **kw)
    err = info.value
    assert isinstance(err, RuntimeError) and ui.FitDiverged is FitDiverged is fit_module.FitDiverged
    k = err.step
    assert k >= 1 and _finite(err.params)
    # the same run without the check: k steps give the same parameters, step k + 1 is not finite
    quiet = dict(check_finite=False, **kw)
    after = fit(DIVERGING, jax.random.key(0), DATA, max_steps=k + 1, **quiet)
    reported = [v[k] for name, v in after.history["steps"].items() if name not in ("step", "epoch_index")]
    assert not (_finite(after.params) and np.all(np.isfinite(reported)))
    before = fit(DIVERGING, jax.random.key(0), DATA, max_steps=k, **quiet)
    for a, b in zip(jax.tree.leaves(before.params), jax.tree.leaves(err.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    # the result up to that step, and no checkpoint with NaN/inf (the last one is step k)
    assert err.result is not None and err.result.params is err.params
    assert len(err.result.history["steps"]["step"]) == k
    ckpt = load_checkpoint(tmp_path)
    assert ckpt["meta"]["step"] == k and all(np.all(np.isfinite(x)) for x in ckpt["state_leaves"] if x.dtype.kind == "f")
    # check_finite=False never writes a non-finite checkpoint either: the last finite one stays
    with pytest.warns(UserWarning, match="non-finite"):
        unchecked = fit(DIVERGING, jax.random.key(0), DATA, checkpoint_dir=tmp_path / "u", checkpoint_every=1, **quiet)
    assert not _finite(unchecked.params)
    ckpt = load_checkpoint(tmp_path / "u")
    assert ckpt["meta"]["step"] < 20 and all(np.all(np.isfinite(x)) for x in ckpt["state_leaves"] if x.dtype.kind == "f")


def test_divergence_checked_after_every_update():
    kw = dict(params=ZERO_PARAMS, num_epochs=5, batch_size=10, progress=False, eval_fn=None)
    with pytest.raises(FitDiverged) as per_chunk:
        fit(DIVERGING, jax.random.key(0), DATA, **kw)
    with pytest.raises(FitDiverged) as per_step:
        fit(DIVERGING, jax.random.key(0), DATA, check_finite="step", **kw)
    assert per_step.value.step == per_chunk.value.step
    _assert_same_state(per_step.value.params, per_chunk.value.params)  # the replay runs the per-step program
    with pytest.raises(ValueError, match="check_finite"):
        fit(DIVERGING, jax.random.key(0), DATA, check_finite="sometimes", **kw)


@pytest.mark.parametrize(
    "optimizer",
    [optax.sgd(float("nan")), optax.sgd(float("inf")), optax.sgd(-0.1), optax.adam(float("nan")), optax.adam(-1e-3)],
    ids=["sgd-nan", "sgd-inf", "sgd-negative", "adam-nan", "adam-negative"],
)
def test_a_bad_learning_rate_is_rejected_before_training(optimizer):
    learner = ui.learn.pcd(MODEL, optimizer=optimizer, num_particles=10)
    with pytest.raises(ValueError, match="`optimizer`.*learning rate"):
        fit(learner, jax.random.key(0), DATA, params=ZERO_PARAMS, batch_size=10, progress=False)


def test_an_optimizer_that_cannot_update_is_named_before_training():
    learner = ui.learn.pcd(MODEL, optimizer=optax.sgd("0.05"), num_particles=10)  # a string, not a number
    with pytest.raises(TypeError, match="`optimizer`: its update fails.*learning rate must be a number"):
        fit(learner, jax.random.key(0), DATA, params=ZERO_PARAMS, batch_size=10, progress=False)
    # an update that takes more arguments than the probe passes is not judged by it
    learner = ui.learn.pcd(MODEL, optimizer=optax.polyak_sgd(), num_particles=10)
    with pytest.raises(TypeError, match="value") as err:
        fit(learner, jax.random.key(0), DATA, params=ZERO_PARAMS, batch_size=10, progress=False)
    assert "`optimizer`: its update fails" not in str(err.value)


def test_an_optimizer_exposed_on_the_step_is_probed_too():
    def step(rng_key, state, batch):
        return NOISY.step(rng_key, state, batch)

    step.optimizer = optax.sgd(float("nan"))
    with pytest.raises(ValueError, match="`optimizer`"):
        fit(NOISY._replace(step=step), jax.random.key(0), DATA, params=ZERO_PARAMS, batch_size=10, progress=False)
    step.optimizer = optax.sgd(0.1)  # a good one passes (and nothing is probed for learners without one)
    fit(NOISY._replace(step=step), jax.random.key(0), DATA, params=ZERO_PARAMS, batch_size=10, max_steps=1,
        eval_fn=None, progress=False)  # fmt: skip


# ----------------------------------------------------------------------------------
# Ctrl-C and kill -9
# ----------------------------------------------------------------------------------
def _ctrl_c_at(step):
    def callback(progress):
        if progress.step >= step:
            raise KeyboardInterrupt

    return callback


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler during the test: a test run started in the background (``cmd &``) inherits
    SIGINT ignored, and fit leaves any handler other than Python's alone."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_sigint_during_training_stops_at_the_next_chunk_boundary(tmp_path, python_sigint_handler):
    # the signal (what Ctrl-C sends) arrives mid-run; fit stops after the chunk it interrupts, checkpoints, and
    # restores Python's handler
    def sigint_at_step_5(progress):
        if progress.step == 5:
            os.kill(os.getpid(), signal.SIGINT)

    kw = dict(params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False, steps_per_jit=5, eval_fn=None)
    with pytest.raises(FitInterrupted) as info:
        fit(NOISY, jax.random.key(11), DATA, checkpoint_dir=tmp_path, callbacks=[sigint_at_step_5], **kw)
    assert info.value.step == 5 and load_checkpoint(tmp_path)["meta"]["step"] == 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_writes_a_checkpoint_and_resuming_is_bit_identical(tmp_path):
    # chunks of 3 steps (and epoch ends): the interruption falls mid-epoch, between periodic checkpoints
    kw = dict(params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False, steps_per_jit=3, eval_every=1)
    key = jax.random.key(11)
    full = fit(NOISY, key, DATA, **kw)
    ckdir = tmp_path / "ck"
    with pytest.raises(FitInterrupted, match="continue") as info:
        fit(NOISY, key, DATA, checkpoint_dir=ckdir, checkpoint_every=8, callbacks=[_ctrl_c_at(7)], **kw)
    err = info.value
    assert isinstance(err, KeyboardInterrupt) and ui.FitInterrupted is FitInterrupted
    assert err.step == 7 and err.checkpoint_dir == str(ckdir)
    assert load_checkpoint(ckdir)["meta"]["step"] == 7 and int(err.result.state.step) == 7
    assert list(err.result.history["steps"]["step"]) == [4]  # the default cadence: every epoch's last step (4 steps)
    resumed = fit(NOISY, key, DATA, checkpoint_dir=ckdir, **kw)
    _assert_same_state(full.state, resumed.state)
    for table in ("steps", "epochs"):
        for name, values in full.history[table].items():
            if name != "wall_time":
                np.testing.assert_array_equal(values, resumed.history[table][name])
    # without a checkpoint_dir: still a FitInterrupted with the result so far
    with pytest.raises(FitInterrupted) as info:
        fit(NOISY, key, DATA, callbacks=[_ctrl_c_at(5)], **kw)
    assert info.value.checkpoint_dir is None and info.value.step == 7  # chunks end at 3, 4 (epoch), 7
    _assert_same_state(info.value.result.state, fit(NOISY, key, DATA, max_steps=7, **kw).state)


CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading
    sys.path.insert(0, {tests!r})
    import jax
    from test_fit import DATA, NOISY, ZERO_PARAMS
    import ugm_infer as ui

    mode, ckdir = sys.argv[1], sys.argv[2]
    kw = dict(params=ZERO_PARAMS, num_epochs=400, batch_size=10, progress=False, steps_per_jit=5, eval_fn=None)

    def kill(progress):
        if mode == "kill" and progress.step >= 13:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "sigint" and progress.step >= 5 and not threading.active_count() > 1:
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    try:
        ui.fit(NOISY, jax.random.key(4), DATA, checkpoint_dir=ckdir, checkpoint_every=4, callbacks=[kill], **kw)
    except ui.FitInterrupted as err:
        print("interrupted at", err.step)
        sys.exit(3)
    """
)


def _run_child(mode, ckdir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])}
    code = CHILD.format(tests=HERE)
    # SIGINT at its default in the child even when the tests run in the background (where SIGINT is ignored)
    return subprocess.run([sys.executable, "-c", code, mode, str(ckdir)], env=env, capture_output=True, text=True,
                          timeout=300, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def test_kill_9_then_resume_is_bit_identical(tmp_path):
    proc = _run_child("kill", tmp_path)
    assert proc.returncode == -9, proc.stderr[-2000:]
    meta = load_checkpoint(tmp_path)["meta"]
    assert meta["step"] == 12  # chunks end at checkpoints (every 4 steps); killed after step 16, before its checkpoint
    # what a kill during the next checkpoint could leave behind: a temporary file and history rows
    # beyond the ones the checkpoint points to; both are cleaned up when the fit resumes
    (tmp_path / ".tmp-half-written").write_bytes(b"\0" * 100)
    with open(tmp_path / CHECKPOINT_HISTORY, "ab") as f:
        f.write(b'{"table": "steps", "start": 12, "columns": {"step": [13]')
    kw = dict(params=ZERO_PARAMS, num_epochs=8, batch_size=10, progress=False, steps_per_jit=5, eval_fn=None)
    resumed = fit(NOISY, jax.random.key(4), DATA, checkpoint_dir=tmp_path, **kw)
    full = fit(NOISY, jax.random.key(4), DATA, **kw)
    _assert_same_state(full.state, resumed.state)
    np.testing.assert_array_equal(full.history["steps"]["grad_norm"], resumed.history["steps"]["grad_norm"])
    assert sorted(os.listdir(tmp_path)) == sorted([CHECKPOINT_NPZ, CHECKPOINT_JSON, CHECKPOINT_HISTORY])


@pytest.mark.slow
def test_sigint_at_a_random_moment_then_resume_is_bit_identical(tmp_path):
    proc = _run_child("sigint", tmp_path)
    assert proc.returncode == 3 and "interrupted at" in proc.stdout, proc.stderr[-2000:]
    step = load_checkpoint(tmp_path)["meta"]["step"]
    assert step == int(proc.stdout.split("interrupted at")[1])
    kw = dict(params=ZERO_PARAMS, num_epochs=400, batch_size=10, progress=False, steps_per_jit=5, eval_fn=None)
    resumed = fit(NOISY, jax.random.key(4), DATA, checkpoint_dir=tmp_path, **kw)
    full = fit(NOISY, jax.random.key(4), DATA, **kw)
    _assert_same_state(full.state, resumed.state)


# ----------------------------------------------------------------------------------
# checkpoint files
# ----------------------------------------------------------------------------------
def test_a_damaged_checkpoint_names_the_file_and_how_to_start_fresh(tmp_path):
    kw = dict(params=ZERO_PARAMS, num_epochs=1, batch_size=10, progress=False, eval_fn=None, checkpoint_dir=tmp_path)
    fit(NOISY, jax.random.key(0), DATA, **kw)
    npz = tmp_path / CHECKPOINT_NPZ
    good = npz.read_bytes()
    npz.write_bytes(good[: len(good) // 2])  # truncated, e.g. a full disk
    for call in (lambda: load_checkpoint(tmp_path), lambda: fit(NOISY, jax.random.key(0), DATA, **kw)):
        with pytest.raises(ValueError, match=r"checkpoint\.npz is damaged.*delete it.*resume=False"):
            call()
    res = fit(NOISY, jax.random.key(0), DATA, resume=False, **kw)  # starts fresh and overwrites
    assert load_checkpoint(tmp_path)["meta"]["step"] == 4 and int(res.state.step) == 4
    history = tmp_path / CHECKPOINT_HISTORY
    history.write_bytes(history.read_bytes()[:10])
    with pytest.raises(ValueError, match=r"history\.jsonl is damaged.*resume=False"):
        fit(NOISY, jax.random.key(0), DATA, **kw)


def test_stale_temporary_files_are_removed_when_a_fit_starts(tmp_path):
    (tmp_path / ".tmp-left-by-a-killed-run").write_bytes(b"\0" * 10)
    (tmp_path / "notes.txt").write_text("not ours")
    fit(NOISY, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=1, batch_size=10, progress=False, eval_fn=None,
        checkpoint_dir=tmp_path)  # fmt: skip
    assert sorted(os.listdir(tmp_path)) == sorted([CHECKPOINT_NPZ, CHECKPOINT_JSON, CHECKPOINT_HISTORY, "notes.txt"])


def test_history_and_metadata_are_valid_json_with_null_for_non_finite_values(tmp_path):
    calls = []

    def eval_fn(params):  # a metric that appears late and one that is infinite
        calls.append(1)
        return {"first": 1.0} if len(calls) == 1 else {"later": float("-inf")}

    res = fit(NOISY, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False,
              eval_fn=eval_fn, eval_every=1, checkpoint_dir=tmp_path, checkpoint_every=4)  # fmt: skip
    lines = (tmp_path / CHECKPOINT_HISTORY).read_text().splitlines()
    assert len(lines) >= 3 and all(isinstance(_strict_json(line), dict) for line in lines)
    assert "null" in "".join(lines)
    meta = _strict_json((tmp_path / CHECKPOINT_JSON).read_text())
    assert meta["step"] == 12 and meta["history_bytes"] == os.path.getsize(tmp_path / CHECKPOINT_HISTORY)
    back = load_checkpoint(tmp_path)["history"]["evaluations"]
    ev = res.history["evaluations"]
    np.testing.assert_array_equal(back["first"], ev["first"])  # NaN where missing, both sides
    assert np.isnan(back["later"][0]) and np.all(np.isnan(back["later"][1:]))  # -inf was written as null
    assert np.isneginf(ev["later"][1])  # the in-memory history keeps it


def test_history_is_appended_not_rewritten(tmp_path):
    sizes = []

    def watch(progress):
        path = tmp_path / CHECKPOINT_HISTORY
        if path.exists():
            sizes.append((path.stat().st_size, path.read_bytes()))

    fit(NOISY, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=4, batch_size=10, progress=False,
        eval_fn=None, checkpoint_dir=tmp_path, checkpoint_every=2, steps_per_jit=2, callbacks=[watch])  # fmt: skip
    assert len(sizes) >= 5
    for (n0, b0), (n1, b1) in zip(sizes, sizes[1:]):
        assert n1 >= n0 and b1[:n0] == b0  # every write only appends


def test_resume_accepts_the_same_data_in_another_format(tmp_path):
    kw = dict(params=ZERO_PARAMS, num_epochs=2, batch_size=10, progress=False, eval_fn=None, checkpoint_dir=tmp_path)
    fit(NOISY, jax.random.key(0), DATA, max_steps=3, **kw)
    as_int8 = {"s": DATA["s"].astype(np.int8)}
    resumed = fit(NOISY, jax.random.key(0), as_int8, **kw)
    full = fit(NOISY, jax.random.key(0), DATA, **{**kw, "checkpoint_dir": None})
    _assert_same_state(full.state, resumed.state)
    assert jnp.asarray(resumed.params["J"]).dtype == jnp.float32
