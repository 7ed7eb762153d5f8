"""Tests of ``ui.fit``: training, history, progress, checkpoint/resume, validation, ArviZ.

Most tests use small learners written here (an exact-gradient learner for a 4-spin
model, with optional noise and fake persistent particles, so that resuming has
randomness to get wrong) because they compile in about a second; one test runs the
real ``ui.learn`` PCD learner through an interrupted and resumed fit.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import warnings
from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer import exact
from ugm_infer.fit import (
    CHECKPOINT_HISTORY,
    CHECKPOINT_JSON,
    CHECKPOINT_NPZ,
    FitResult,
    _resolve_progress,
    fit,
    load_checkpoint,
)

N_SPINS = 4


def _energy(params, state):
    s = state["s"].astype(jnp.float32)
    return -s @ jnp.triu(params["J"], 1) @ s - params["h"] @ s


MODEL = ui.EnergyModel(_energy, {"s": ui.Spin((N_SPINS,))}, multilinear=True, name="tiny")
ALL_STATES = jnp.asarray(list(itertools.product([-1.0, 1.0], repeat=N_SPINS)), jnp.float32)
TRUE_PARAMS = {
    "J": jnp.asarray(np.random.default_rng(0).normal(0.0, 0.8, (N_SPINS, N_SPINS)), jnp.float32),
    "h": jnp.asarray([0.5, -0.3, 0.2, 0.0], jnp.float32),
}
ZERO_PARAMS = {"J": jnp.zeros((N_SPINS, N_SPINS)), "h": jnp.zeros(N_SPINS)}
DATA = {k: np.asarray(v) for k, v in exact.sample(jax.random.key(1), MODEL, TRUE_PARAMS, 40).items()}


class MiniState(NamedTuple):
    params: dict
    particles: dict
    step: jax.Array


class MiniInfo(NamedTuple):
    grad_norm: jax.Array
    flipped: jax.Array  # bool, per particle: exercises non-scalar / bool info fields


class Learner(NamedTuple):
    init: object
    step: object
    model: object
    name: str
    visible: tuple


def mini_learner(lr=0.2, noise=0.0, num_particles=6, model=MODEL, calls=None):
    """Exact gradient ascent on the batch log-likelihood, plus optional noise.

    Fake persistent particles are flipped at random every step (they carry
    randomness through checkpoints); ``calls`` counts Python-level calls of init and
    step (a traced step counts once per trace).
    """

    def log_lik(params, batch):
        log_z = jax.nn.logsumexp(-jax.vmap(lambda s: model.energy(params, {"s": s}))(ALL_STATES))
        return -jnp.mean(model.energies(params, batch)) - log_z

    def init(rng_key, params, data=None):
        if calls is not None:
            calls["init"] += 1
        parts = {"s": model.random_state(rng_key, num_particles)["s"]}
        return MiniState(params, parts, jnp.zeros((), jnp.int32))

    def step(rng_key, state, batch):
        if calls is not None:
            calls["step"] += 1
        key_noise, key_flip = jax.random.split(rng_key)
        grad = jax.grad(log_lik)(state.params, batch)
        leaves, treedef = jax.tree.flatten(grad)
        keys = jax.random.split(key_noise, len(leaves))
        grad = jax.tree.unflatten(treedef, [g + noise * jax.random.normal(k, g.shape) for g, k in zip(leaves, keys)])
        params = jax.tree.map(lambda p, g: p + lr * g, state.params, grad)
        flip = jax.random.bernoulli(key_flip, 0.3, (num_particles, N_SPINS))
        parts = {"s": jnp.where(flip, -state.particles["s"], state.particles["s"])}
        gnorm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grad)))
        return MiniState(params, parts, state.step + 1), MiniInfo(gnorm, flip.any(axis=1))

    return Learner(init, step, model, "mini", ("s",))


# shared learners: fits of the same learner on data of the same shapes reuse one
# compiled chunk (tests keep batch_size=10, N=40, the default steps_per_jit)
LEARNER = mini_learner()
NOISY = mini_learner(lr=0.3, noise=0.5)


def exact_avg_ll(params, data=DATA):
    return float(exact.average_log_likelihood(MODEL, params, data))


# ----------------------------------------------------------------------------------
# training and history
# ----------------------------------------------------------------------------------
def test_fit_improves_log_likelihood_and_records_history():
    held_out = {k: np.asarray(v) for k, v in exact.sample(jax.random.key(7), MODEL, TRUE_PARAMS, 20).items()}
    res = fit(LEARNER, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=6, batch_size=10, eval_data=held_out,
              eval_every=2, progress=False, step_info=True)  # fmt: skip
    assert isinstance(res, FitResult) and res.learner_name == "mini" and res.model is MODEL
    ev = res.history["evaluations"]
    # step 0, then epochs 2, 4, 6
    np.testing.assert_array_equal(ev["step"], [0, 8, 16, 24])
    np.testing.assert_allclose(ev["epoch"], [0, 2, 4, 6])
    assert np.all(np.diff(ev["wall_time"]) >= 0) and ev["wall_time"][0] == 0.0
    # automatic evaluation = exact average log-likelihood on both data sets
    np.testing.assert_allclose(ev["train_log_likelihood"][0], -N_SPINS * np.log(2), rtol=1e-5)
    np.testing.assert_allclose(ev["train_log_likelihood"][-1], exact_avg_ll(res.params), rtol=1e-5)
    np.testing.assert_allclose(ev["eval_log_likelihood"][-1], exact_avg_ll(res.params, held_out), rtol=1e-5)
    assert ev["train_log_likelihood"][-1] > ev["train_log_likelihood"][0] + 0.2
    st = res.history["steps"]
    np.testing.assert_array_equal(st["step"], np.arange(1, 25))
    np.testing.assert_array_equal(st["epoch_index"], np.repeat(np.arange(6), 4))
    assert st["grad_norm"].shape == (24,) and np.all(st["grad_norm"] > 0)
    assert st["flipped"].shape == (24,) and np.all((st["flipped"] >= 0) & (st["flipped"] <= 1))
    ep = res.history["epochs"]
    np.testing.assert_array_equal(ep["epoch"], np.arange(1, 7))
    np.testing.assert_array_equal(ep["step"], 4 * np.arange(1, 7))
    np.testing.assert_allclose(ep["grad_norm_mean"], st["grad_norm"].reshape(6, 4).mean(axis=1))
    assert set(res.history["timing"]) == {"compile_seconds", "train_seconds", "eval_seconds", "checkpoint_seconds"}
    assert int(res.state.step) == 24


class OrderState(NamedTuple):
    params: dict
    order: jax.Array  # (max_steps, batch): codes of the examples of every step's batch
    step: jax.Array


def order_learner(batch_size, max_steps=16):
    """Records which examples (coded 0..15 by their spins) each step receives."""
    weights = 2 ** jnp.arange(N_SPINS - 1, -1, -1)

    def init(rng_key, params, data=None):
        return OrderState(params, jnp.full((max_steps, batch_size), -1, jnp.int32), jnp.zeros((), jnp.int32))

    def step(rng_key, state, batch):
        codes = (((batch["s"] + 1) // 2) @ weights).astype(jnp.int32)
        order = state.order.at[state.step].set(codes)
        return OrderState(state.params, order, state.step + 1), MiniInfo(jnp.zeros(()), jnp.zeros((), bool))

    return Learner(init, step, MODEL, "order", ("s",))


ALL_DATA = {"s": np.asarray(ALL_STATES)}  # the 16 configurations, coded 0..15 in order


def test_minibatches_are_permutations_of_the_data():
    seen = []
    learner = order_learner(4)
    res = fit(learner, jax.random.key(3), ALL_DATA, params=ZERO_PARAMS, num_epochs=3, batch_size=4, eval_fn=None,
              callbacks=[lambda p: seen.append(p.step)], progress=False)  # fmt: skip
    order = np.asarray(res.state.order)[:12].reshape(3, 16)
    for epoch in order:
        assert sorted(epoch.tolist()) == list(range(16))  # every example exactly once per epoch
    assert not np.array_equal(order[0], order[1]) and not np.array_equal(order[1], order[2])
    assert not np.array_equal(order[0], np.arange(16))
    assert seen == [12]  # evaluation off: one chunk runs all three epochs, then the callbacks run
    seen.clear()
    fit(learner, jax.random.key(3), ALL_DATA, params=ZERO_PARAMS, num_epochs=3, batch_size=4, eval_every=1,
        eval_fn=lambda p: {"zero": 0.0}, callbacks=[lambda p: seen.append(p.step)], progress=False)  # fmt: skip
    assert seen == [4, 8, 12]  # callbacks after every chunk; chunks stop at evaluations (every epoch here)
    res = fit(learner, jax.random.key(3), ALL_DATA, params=ZERO_PARAMS, num_epochs=2, batch_size=4, eval_fn=None,
              shuffle=False, progress=False)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(res.state.order)[:8].reshape(2, 16), np.tile(np.arange(16), (2, 1)))


def test_drop_last_warns_and_keeps_static_batches():
    learner = order_learner(5)
    with pytest.warns(UserWarning, match="drops the last 1 examples"):
        res = fit(learner, jax.random.key(0), ALL_DATA, params=ZERO_PARAMS, num_epochs=2, batch_size=5,
                  eval_fn=None, progress=False)  # fmt: skip
    order = np.asarray(res.state.order)[:6].reshape(2, 15)
    np.testing.assert_array_equal(res.history["steps"]["step"], [3, 6])  # the info of every epoch's last step
    for epoch in order:
        assert len(set(epoch.tolist())) == 15  # 15 distinct examples, one dropped per epoch


def test_user_eval_fn_and_bare_array_data():
    calls = []

    def my_eval(params):
        calls.append(1)
        return {"h0": params["h"][0], "ll": exact_avg_ll(params)}

    res = fit(LEARNER, jax.random.key(0), DATA["s"], params=ZERO_PARAMS, num_epochs=2, batch_size=10,
              eval_fn=my_eval, eval_every=1, progress=False)  # fmt: skip
    ev = res.history["evaluations"]
    assert set(ev) == {"step", "epoch", "wall_time", "eval_seconds", "h0", "ll"} and len(calls) == 3
    np.testing.assert_allclose(ev["h0"][-1], float(res.params["h"][0]))


def test_pseudo_log_likelihood_when_too_large_to_enumerate():
    n = 24  # 2^24 configurations > the 2^22 limit of the automatic exact evaluation
    model = ui.EnergyModel(_energy, {"s": ui.Spin((n,))}, multilinear=True, name="big")

    def init(rng_key, params, data=None):
        return MiniState(params, {}, jnp.zeros((), jnp.int32))

    def step(rng_key, state, batch):
        return state._replace(step=state.step + 1), MiniInfo(jnp.zeros(()), jnp.zeros((), bool))

    learner = Learner(init, step, model, "noop", ("s",))
    data = np.asarray(model.random_state(jax.random.key(0), 10)["s"])
    params = {"J": 0.1 * jnp.ones((n, n)), "h": jnp.zeros(n)}
    res = fit(learner, jax.random.key(0), data, params=params, num_epochs=1, batch_size=10, progress=False)
    pll = res.history["evaluations"]["train_pseudo_log_likelihood"]
    # reference: sum_i log sigmoid(2 s_i * local field_i), local field = (J_upper + J_upper^T) s + h
    J = np.triu(np.asarray(params["J"]), 1)
    field = data @ (J + J.T)
    ref = np.mean(np.sum(-np.logaddexp(0.0, -2.0 * data * field), axis=1))
    np.testing.assert_allclose(pll, [ref, ref], rtol=1e-5)


# ----------------------------------------------------------------------------------
# progress bar
# ----------------------------------------------------------------------------------
def test_progress_is_off_when_not_interactive(capsys, monkeypatch):
    fit(LEARNER, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=1, batch_size=10, eval_fn=None,
        progress="auto")  # fmt: skip
    assert "step" not in capsys.readouterr().err  # stderr is not a TTY under pytest

    class TTY:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", TTY())
    monkeypatch.delenv("CI", raising=False)
    assert _resolve_progress("auto") is True
    monkeypatch.setenv("CI", "true")
    assert _resolve_progress("auto") is False
    assert _resolve_progress(True) is True and _resolve_progress(False) is False


def test_progress_true_shows_a_bar(capsys):
    fit(LEARNER, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=2, batch_size=10, eval_fn=None,
        progress=True)  # fmt: skip
    err = capsys.readouterr().err
    assert "8/8" in err and "mini" in err


# ----------------------------------------------------------------------------------
# checkpoint / resume
# ----------------------------------------------------------------------------------
class Interrupt(Exception):
    pass


def _interrupt_at(step):
    def callback(progress):
        if progress.step >= step:
            raise Interrupt

    return callback


def _assert_same_state(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(la, lb):
        assert np.array_equal(np.asarray(x), np.asarray(y)), (x, y)


def test_resume_is_bit_identical(tmp_path):
    # noisy steps and random particle flips: every step consumes randomness
    learner = NOISY
    kw = dict(params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False, checkpoint_every=3, eval_every=1)
    key = jax.random.key(42)
    full = fit(learner, key, DATA, checkpoint_dir=tmp_path / "full", **kw)  # 4 steps per epoch, 12 steps
    # (a) crash in a callback at step 8 (end of epoch 2): the last checkpoint is step 6 (mid-epoch)
    ckdir = tmp_path / "crash"
    with pytest.raises(Interrupt):
        fit(learner, key, DATA, checkpoint_dir=ckdir, callbacks=[_interrupt_at(8)], **kw)
    meta = load_checkpoint(ckdir)["meta"]
    assert (meta["step"], meta["epoch"], meta["step_in_epoch"]) == (6, 1, 2)
    resumed = fit(learner, key, DATA, checkpoint_dir=ckdir, **kw)
    _assert_same_state(full.state, resumed.state)
    for name in full.history["evaluations"]:
        if name not in ("wall_time", "eval_seconds"):
            np.testing.assert_array_equal(full.history["evaluations"][name], resumed.history["evaluations"][name])
    for name in ("step", "epoch_index", "grad_norm", "flipped"):
        np.testing.assert_array_equal(full.history["steps"][name], resumed.history["steps"][name])
    np.testing.assert_array_equal(full.history["epochs"]["grad_norm_mean"], resumed.history["epochs"]["grad_norm_mean"])
    # (b) a step budget: stop at step 7 (checkpoint written at the stop), resume
    ckdir = tmp_path / "budget"
    part = fit(learner, key, DATA, checkpoint_dir=ckdir, max_steps=7, **kw)
    assert int(part.state.step) == 7 and load_checkpoint(ckdir)["meta"]["step"] == 7
    resumed = fit(learner, key, DATA, checkpoint_dir=ckdir, **kw)
    _assert_same_state(full.state, resumed.state)
    # resuming a finished run returns its state without training
    again = fit(learner, key, DATA, checkpoint_dir=ckdir, **kw)
    _assert_same_state(full.state, again.state)
    # the files: atomic writes leave no temporary files behind; readable metadata
    assert sorted(os.listdir(ckdir)) == sorted([CHECKPOINT_NPZ, CHECKPOINT_JSON, CHECKPOINT_HISTORY])
    with open(ckdir / CHECKPOINT_JSON) as f:
        info = json.load(f)
    assert info["step"] == 12 and info["learner"] == "mini" and info["batch_size"] == 10


def test_resume_refuses_a_different_run(tmp_path):
    learner = LEARNER
    kw = dict(params=ZERO_PARAMS, num_epochs=1, progress=False, eval_fn=None, checkpoint_dir=tmp_path)
    fit(learner, jax.random.key(0), DATA, batch_size=10, **kw)
    with pytest.raises(ValueError, match="batch_size"):
        fit(learner, jax.random.key(0), DATA, batch_size=8, **kw)
    with pytest.raises(ValueError, match="key_data"):
        fit(learner, jax.random.key(1), DATA, batch_size=10, **kw)
    other = {"s": -DATA["s"]}
    with pytest.raises(ValueError, match="data_fingerprint"):
        fit(learner, jax.random.key(0), other, batch_size=10, **kw)
    with pytest.raises(ValueError, match="learner"):
        fit(NOISY._replace(name="other"), jax.random.key(0), DATA, batch_size=10, **kw)
    # resume=False starts over
    res = fit(learner, jax.random.key(1), DATA, batch_size=10, resume=False, **kw)
    assert int(res.state.step) == 4 and load_checkpoint(tmp_path)["meta"]["key_data"] == [0, 1]


def test_resume_real_pcd_learner_is_bit_identical(tmp_path):
    import optax

    from ugm_infer.learn import pcd

    # a fresh model whose blocks are not known yet: the learner probes them at init
    model = ui.EnergyModel(_energy, {"s": ui.Spin((N_SPINS,))}, name="fresh")
    learner = pcd(model, optimizer=optax.sgd(0.05), num_particles=10)
    kw = dict(params=ZERO_PARAMS, num_epochs=2, batch_size=10, progress=False, checkpoint_every=2)
    key = jax.random.key(5)
    full = fit(learner, key, DATA, checkpoint_dir=tmp_path / "full", **kw)
    with pytest.raises(Interrupt):
        fit(learner, key, DATA, checkpoint_dir=tmp_path / "crash", callbacks=[_interrupt_at(5)], **kw)
    assert load_checkpoint(tmp_path / "crash")["meta"]["step"] == 4
    resumed = fit(learner, key, DATA, checkpoint_dir=tmp_path / "crash", **kw)
    _assert_same_state(full.state, resumed.state)
    assert full.history["evaluations"]["train_log_likelihood"][-1] > -N_SPINS * np.log(2)


# ----------------------------------------------------------------------------------
# validation before any compilation
# ----------------------------------------------------------------------------------
BAD_CASES = [
    ({"data": {"s": np.zeros((0, N_SPINS))}}, "empty"),
    ({"data": {"s": np.where(np.eye(40, N_SPINS) > 0, np.nan, DATA["s"])}}, "NaN"),
    ({"data": {"s": DATA["s"][:, :3]}}, "shape"),
    ({"data": {"s": np.zeros((40, N_SPINS))}}, "outside the domain"),
    ({"data": {"s": DATA["s"], "x": DATA["s"]}}, "unknown"),
    ({"data": {"t": DATA["s"]}}, "unknown"),
    ({"data": None}, "data"),
    ({"data": {"s": np.array(["a"] * 40)}}, "numeric"),
    ({"batch_size": 41}, "batch_size"),
    ({"batch_size": 0}, "batch_size"),
    ({"num_epochs": 0}, "num_epochs"),
    ({"num_epochs": 1.5}, "num_epochs"),
    ({"eval_every": 0}, "eval_every"),
    ({"steps_per_jit": -1}, "steps_per_jit"),
    ({"checkpoint_every": 3}, "checkpoint_dir"),
    ({"progress": "yes"}, "progress"),
    ({"eval_fn": "exact"}, "eval_fn"),
    ({"rng_key": 3}, "rng_key"),
    ({"eval_data": {"s": np.ones((5, 2))}}, "eval_data"),
    ({"params": {"J": jnp.full((N_SPINS, N_SPINS), jnp.nan), "h": jnp.zeros(N_SPINS)}}, "params"),
]


@pytest.mark.parametrize("overrides, match", BAD_CASES)
def test_bad_arguments_raise_before_any_tracing(overrides, match):
    calls = {"init": 0, "step": 0}
    learner = mini_learner(calls=calls)
    kwargs = dict(rng_key=jax.random.key(0), data=DATA, params=ZERO_PARAMS, batch_size=10, progress=False)
    kwargs.update(overrides)
    with pytest.raises((ValueError, TypeError), match=match):
        fit(learner, kwargs.pop("rng_key"), kwargs.pop("data"), **kwargs)
    assert calls == {"init": 0, "step": 0}  # nothing was traced, so nothing was compiled


def test_validation_is_fast():
    bad = {"s": np.full((40, N_SPINS), 2.0)}
    t = time.perf_counter()
    with pytest.raises(ValueError, match=r"data\['s'\].*outside the domain"):
        fit(mini_learner(), jax.random.key(0), bad, params=ZERO_PARAMS, batch_size=10, progress=False)
    assert time.perf_counter() - t < 2.0  # compiling would take seconds


# ----------------------------------------------------------------------------------
# ArviZ
# ----------------------------------------------------------------------------------
def test_to_arviz_and_netcdf_round_trip(tmp_path):
    res = fit(NOISY, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=3, batch_size=10, eval_every=1,
              progress=False, step_info=True)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no schema warnings leak to the user
        idata = res.to_arviz(raw_particles=True)
    assert isinstance(idata, az.InferenceData)
    assert {"posterior", "learning_history", "learner_stats", "learned_params"} <= set(idata.groups())
    hist = idata.learning_history
    assert hist.sizes["evaluation"] == 4
    np.testing.assert_allclose(hist["train_log_likelihood"].values, res.history["evaluations"]["train_log_likelihood"])
    stats = idata.learner_stats
    np.testing.assert_array_equal(stats["step"].values, np.arange(1, 13))
    np.testing.assert_allclose(stats["grad_norm"].values, res.history["steps"]["grad_norm"])
    assert stats["grad_norm_mean"].dims == ("epoch",) and stats.sizes["epoch"] == 3
    post = idata.posterior
    assert post["energy"].dims == ("chain", "draw") and post.sizes["draw"] == 6 and post.sizes["chain"] == 1
    parts = np.asarray(res.state.particles["s"])
    np.testing.assert_allclose(post["energy"].values[0], np.asarray(MODEL.energies(res.params, {"s": parts})), rtol=1e-6)
    np.testing.assert_allclose(post["mean_s"].values[0], parts.mean(axis=1))
    np.testing.assert_array_equal(post["s"].values[0], parts)
    np.testing.assert_allclose(idata.learned_params["h"].values, np.asarray(res.params["h"]))
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert set(back.groups()) == set(idata.groups())
    for group in idata.groups():
        a, b = idata[group], back[group]
        assert set(a.data_vars) == set(b.data_vars)
        for v in a.data_vars:
            np.testing.assert_array_equal(a[v].values, b[v].values)
    assert back.attrs["learner"] == "mini"
    # az functions work on the summaries
    assert "mean" in az.summary(back, var_names=["energy"], kind="stats").columns
