"""Tests of the lean parts of ``ui.fit``: compact and bit-packed data, chunking, the evaluation cadence.

Same small learners and data as ``test_fit.py``.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_fit import DATA, NOISY, ZERO_PARAMS, _assert_same_state, mini_learner

import ugm_infer as ui
from ugm_infer.fit import EVAL_BUDGET, PackedBits, _chunk, _driver, fit, load_checkpoint
from ugm_infer.fit._arguments import check_optimizer
from ugm_infer.fit._chunk import block_size
from ugm_infer.fit._evaluation import EvalSchedule
from ugm_infer.learn.base import CheckedData

KW = dict(params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False, eval_fn=None)
MODEL_RBM = ui.models.rbm(6, 2)


def _spin_bits(s: np.ndarray) -> PackedBits:
    return PackedBits(np.packbits(s > 0, axis=-1), s.shape[-1])


# ----------------------------------------------------------------------------------
# data formats
# ----------------------------------------------------------------------------------
def test_integer_bool_and_packed_data_give_the_same_run_as_float_data():
    key = jax.random.key(8)
    reference = fit(NOISY, key, DATA, **KW)
    spins = DATA["s"]
    for data in ({"s": spins.astype(np.int8)}, {"s": spins.astype(np.float64)}, spins.astype(np.int32)):
        _assert_same_state(reference.state, fit(NOISY, key, data, **KW).state)
    packed = fit(NOISY, key, {"s": _spin_bits(spins)}, **KW)  # another program (it unpacks): same numbers
    _assert_same_state(reference.state, packed.state)
    np.testing.assert_array_equal(reference.history["steps"]["grad_norm"], packed.history["steps"]["grad_norm"])


def test_binary_data_as_uint8_bool_and_bits():
    model = ui.EnergyModel(lambda p, x: -(p["h"] @ x["v"].astype(jnp.float32)), {"v": ui.Binary((11,))}, name="bern")
    learner = mini_learner(model=model)._replace(init=_bias_init, step=_bias_step, visible=("v",))
    v = (np.random.default_rng(0).random((30, 11)) < 0.3).astype(np.float32)
    kw = dict(params={"h": np.zeros(11, np.float32)}, num_epochs=2, batch_size=10, progress=False, eval_fn=None)
    ref = fit(learner, jax.random.key(0), v, **kw)
    for data in (v.astype(np.uint8), v.astype(bool), PackedBits(np.packbits(v.astype(np.uint8), axis=-1), 11)):
        _assert_same_state(ref.state, fit(learner, jax.random.key(0), data, **kw).state)
    little = PackedBits(np.packbits(v.astype(np.uint8), axis=-1, bitorder="little"), 11, bitorder="little")
    _assert_same_state(ref.state, fit(learner, jax.random.key(0), little, **kw).state)


class _SumState(NamedTuple):
    params: dict
    sum: jax.Array


def _bias_init(rng_key, params, data=None):
    return _SumState(params, jnp.zeros(11, jnp.float32))


def _bias_step(rng_key, state, batch):  # a running sum of the batches: any decoding error shows
    total = state.sum + batch["v"].sum(axis=0) * (1 + 0.1 * batch["v"][0, 0])
    return _SumState(state.params, total), {"total": total.sum()}


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: PackedBits(np.zeros((40, 1), np.int8), 4), "uint8"),
        (lambda: PackedBits(np.zeros((40, 1), np.uint8), 9), "bytes per row"),
        (lambda: PackedBits(np.zeros((40, 1), np.uint8), 4, bitorder="middle"), "bitorder"),
        (lambda: PackedBits(np.zeros((40, 1), np.uint8), 3), "shape"),
        (lambda: {"s": np.full((40, 4), 0.5)}, "outside the domain"),
        (lambda: {"s": np.zeros((40, 4), np.int8)}, "outside the domain"),  # 0 is not a spin
        (lambda: {"s": np.full((40, 4), np.inf)}, "NaN or inf"),
        (lambda: {"s": np.where(np.arange(160).reshape(40, 4) == 77, np.nan, 1.0)}, "NaN or inf"),
        (lambda: {"s": np.full((40, 4), 255.0)}, "outside the domain"),  # 255 is -1 as int8, not as a float
        (lambda: {"s": np.full((40, 4), 255, np.int64)}, "outside the domain"),  # ... nor as an int64
    ],
)
def test_bad_compact_data_is_rejected(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fit(NOISY, jax.random.key(0), bad(), **KW)


def test_packed_bits_need_a_two_valued_domain():
    model = ui.EnergyModel(lambda p, x: p["a"] * x["c"].sum(), {"c": ui.Categorical((4,), num_states=3)}, name="cat")
    learner = mini_learner(model=model)._replace(visible=("c",))
    with pytest.raises(ValueError, match="has 3 values"):
        fit(learner, jax.random.key(0), PackedBits(np.zeros((10, 1), np.uint8), 4), params={"a": 0.0},
            batch_size=5, progress=False)  # fmt: skip


# ----------------------------------------------------------------------------------
# chunks
# ----------------------------------------------------------------------------------
def test_where_chunks_stop_does_not_change_the_run(tmp_path, monkeypatch):
    key = jax.random.key(21)
    runs = []
    # with whole epochs in a loop of their own (the default off the CPU), and step by step (on the CPU)
    for block_loops in (True, False):
        monkeypatch.setattr(_driver, "BLOCK_LOOPS", block_loops)
        seen = {}

        def record(name, seen=seen):
            seen[name] = []
            return lambda progress: seen[name].append(progress.step)

        # one chunk for all 12 steps (nothing due in between)
        one = fit(NOISY, key, DATA, callbacks=[record("one")], **KW)
        # a chunk per epoch (an evaluation at every epoch end)
        eval_kw = {**KW, "eval_fn": lambda p: {}, "eval_every": 1}
        per_epoch = fit(NOISY, key, DATA, callbacks=[record("epoch")], **eval_kw)
        # chunks of 3 steps that cross epoch ends (checkpoints every 3 steps)
        odd = fit(NOISY, key, DATA, callbacks=[record("odd")], checkpoint_dir=tmp_path / str(block_loops),
                  checkpoint_every=3, **KW)  # fmt: skip
        assert seen == {"one": [12], "epoch": [4, 8, 12], "odd": [3, 6, 9, 12]}
        runs += [one, per_epoch, odd]
        np.testing.assert_array_equal(one.history["epochs"]["grad_norm_mean"], odd.history["epochs"]["grad_norm_mean"])
    for other in runs[1:]:
        _assert_same_state(runs[0].state, other.state)
        for name in ("grad_norm", "flipped"):
            np.testing.assert_array_equal(runs[0].history["steps"][name], other.history["steps"][name])


def test_block_loops_only_off_the_cpu(monkeypatch):
    assert _driver.BLOCK_LOOPS is None  # by backend
    assert _driver._block_loops() is (jax.default_backend() != "cpu")
    monkeypatch.setattr(_driver, "BLOCK_LOOPS", True)
    assert _driver._block_loops() is True


def test_block_size_is_the_largest_divisor_that_fits_a_chunk():
    assert [block_size(spe, 1000) for spe in (4, 500, 499, 1000, 5000, 1001)] == [4, 500, 499, 1000, 1000, 143]
    assert block_size(4, 3) == 2 and block_size(7, 3) == 1 and block_size(1, 1000) == 1


def test_a_repeated_fit_runs_whole_blocks_in_one_chunk(monkeypatch):
    # 20 steps per epoch (one block), 2 epochs; chunks end where the callbacks see them
    monkeypatch.setattr(_driver, "CHUNK_SECONDS", 1e6)  # the chunk length never depends on measured times here
    monkeypatch.setattr(_driver, "BLOCK_LOOPS", True)  # whole blocks in their own loop, as off the CPU
    learner = mini_learner(lr=0.1, noise=0.3)
    data = {"s": np.concatenate([DATA["s"]] * 5)}
    kw = dict(params=ZERO_PARAMS, num_epochs=2, batch_size=10, progress=False, eval_fn=None)
    ends = []
    first = fit(learner, jax.random.key(3), data, callbacks=[lambda p: ends.append(p.step)], **kw)
    assert ends == [16, 40]  # the step time is unknown: a short first chunk (its block runs step by step)
    ends.clear()
    again = fit(learner, jax.random.key(3), data, callbacks=[lambda p: ends.append(p.step)], **kw)
    assert ends == [40]  # the step time measured by the first fit: both epochs in one chunk, as whole blocks
    _assert_same_state(first.state, again.state)
    np.testing.assert_array_equal(first.history["steps"]["grad_norm"], again.history["steps"]["grad_norm"])
    # a chunk cut by the time budget ends at the end of a block: 25 steps' worth ends after the first epoch
    for per_spec in _chunk._CHUNK_CACHE[learner.step].values():
        per_spec.seconds_per_step = 1e6 / 25
    ends.clear()
    fit(learner, jax.random.key(3), data, callbacks=[lambda p: ends.append(p.step)], **kw)
    assert ends == [20, 40]


def test_init_reads_the_data_only_if_it_wants_them(monkeypatch):
    decoded = []
    real = _driver.decode_all
    monkeypatch.setattr(_driver, "decode_all", lambda dec, x: decoded.append(x.shape) or real(dec, x))
    seen = {}

    def reading_init(rng_key, params, data=None):
        seen["type"] = type(data)
        seen["leaves"] = [np.asarray(x) for x in jax.tree.leaves(data)]  # a pytree: flattening decodes
        seen["s"] = np.asarray(data["s"])
        return _SumState(params, jnp.zeros(11, jnp.float32))

    kw = dict(params=ZERO_PARAMS, num_epochs=1, batch_size=10, progress=False, eval_fn=None)
    fit(NOISY, jax.random.key(0), {"s": _spin_bits(DATA["s"])}, **kw)  # its init ignores the data
    assert decoded == []
    learner = NOISY._replace(init=reading_init, step=lambda k, st, b: (st, {}))
    fit(learner, jax.random.key(0), {"s": _spin_bits(DATA["s"])}, **kw)
    assert decoded == [(40, 1)] and seen["type"] is CheckedData  # decoded once, from the packed bytes
    np.testing.assert_array_equal(seen["s"], DATA["s"])
    assert seen["s"].dtype == np.float32 and len(seen["leaves"]) == 1
    np.testing.assert_array_equal(seen["leaves"][0], DATA["s"])


def test_step_info_false_records_no_step_info(tmp_path):
    kw = dict(params=ZERO_PARAMS, num_epochs=3, batch_size=10, progress=False, eval_fn=None)
    full = fit(NOISY, jax.random.key(5), DATA, **kw)
    lean = fit(NOISY, jax.random.key(5), DATA, step_info=False, checkpoint_dir=tmp_path, **kw)
    assert set(lean.history["steps"]) == {"step", "epoch_index"} and set(full.history["steps"]) > {"grad_norm"}
    np.testing.assert_array_equal(lean.history["steps"]["step"], np.arange(1, 13))
    assert set(lean.history["epochs"]) == {"epoch", "step", "wall_time"}
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(lean.state), strict=True):  # another program:
        np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64), rtol=1e-6, atol=1e-6)
    assert load_checkpoint(tmp_path)["meta"]["step_info"] is False
    with pytest.raises(ValueError, match="`step_info` must be True, False, 'auto' or an int >= 1"):
        fit(NOISY, jax.random.key(5), DATA, step_info="no", **kw)


def test_step_info_records_every_kth_step_and_computes_no_other_info(tmp_path):
    # 4 steps per epoch, 12 steps; the info of step k carries a host-counted callback, which XLA drops with the
    # info on the steps that record nothing
    calls = []

    def counted(value):
        calls.append(1)
        return value

    def step(rng_key, state, batch):
        new, info = NOISY.step(rng_key, state, batch)
        probe = jax.pure_callback(counted, jax.ShapeDtypeStruct((), jnp.float32), info.grad_norm)
        return new, {"grad_norm": info.grad_norm, "probe": probe}

    counting = NOISY._replace(step=step)
    every3 = fit(counting, jax.random.key(5), DATA, step_info=3, **KW)
    assert len(calls) == 4  # steps 3, 6, 9, 12 only
    st, ep = every3.history["steps"], every3.history["epochs"]
    np.testing.assert_array_equal(st["step"], [3, 6, 9, 12])
    np.testing.assert_array_equal(st["epoch_index"], [0, 1, 2, 2])
    np.testing.assert_array_equal(st["probe"], st["grad_norm"])
    g = st["grad_norm"]
    np.testing.assert_allclose(ep["grad_norm_mean"], [g[0], g[1], (g[2] + g[3]) / 2])
    # the variant each step runs depends on its index alone: other chunk boundaries give the same run
    for steps_per_jit in (1, 5):
        again = fit(counting, jax.random.key(5), DATA, step_info=3, steps_per_jit=steps_per_jit, **KW)
        _assert_same_state(every3.state, again.state)
        np.testing.assert_array_equal(again.history["steps"]["grad_norm"], g)
    # the recorded values are those every step's info gives (another program: equal to float32 rounding)
    every = fit(NOISY, jax.random.key(5), DATA, step_info=True, **KW)
    np.testing.assert_allclose(every.history["steps"]["grad_norm"][2::3], g, rtol=1e-5)
    # the default: every 10th step, here every epoch's last one (epochs of 4 steps), in the checkpoint too
    auto = fit(NOISY, jax.random.key(5), DATA, checkpoint_dir=tmp_path, **KW)
    np.testing.assert_array_equal(auto.history["steps"]["step"], [4, 8, 12])
    np.testing.assert_array_equal(auto.history["epochs"]["grad_norm_mean"], auto.history["steps"]["grad_norm"])
    assert load_checkpoint(tmp_path)["meta"]["step_info"] == 4
    for bad in (0, -1, 2.5, "every"):
        with pytest.raises(ValueError, match="`step_info` must be True, False, 'auto' or an int >= 1"):
            fit(NOISY, jax.random.key(5), DATA, step_info=bad, **KW)


def test_the_learning_rate_probe_runs_once_per_learner_and_shapes():
    updates = []
    sgd = optax.sgd(0.1)
    counted = optax.GradientTransformation(sgd.init, lambda *a, **k: updates.append(1) or sgd.update(*a, **k))
    learner = ui.learn.pcd(MODEL_RBM, optimizer=counted, num_particles=10, visible="v")
    params = MODEL_RBM.init_params(jax.random.key(0))
    check_optimizer(learner, params)
    assert len(updates) == 1
    check_optimizer(learner, params)  # remembered
    assert len(updates) == 1
    check_optimizer(learner, {**params, "c": jnp.zeros(3)})  # other shapes: probed again
    assert len(updates) == 2


# ----------------------------------------------------------------------------------
# the evaluation cadence
# ----------------------------------------------------------------------------------
def test_default_evaluation_cadence_keeps_within_the_budget():
    assert EVAL_BUDGET == 0.1
    sched = EvalSchedule(True, None, steps_per_epoch=5, total_steps=100)
    timing = {"train_seconds": 0.0, "eval_seconds": 0.02}
    sched.record(0.02)  # the evaluation at step 0 took 20 ms
    assert sched.due(0, timing) is False and sched.due(100, timing) is True  # the end is always evaluated
    assert sched.due(3, {"train_seconds": 10.0, "eval_seconds": 0.0}) is False  # only at epoch ends
    # steps of 2 ms: 0.1 * train >= 0.02 + 0.02 after 0.4 s = 200 steps, beyond the run; then 20 steps (0.04 s)
    assert sched.next_due(0, timing, 0.002) == 100
    assert sched.next_due(0, timing, 0.02) == 20 and sched.due(20, {"train_seconds": 0.4, "eval_seconds": 0.02})
    assert not sched.due(20, {"train_seconds": 0.39, "eval_seconds": 0.02})
    assert sched.next_due(7, timing, None) == 10  # before a step time is known: the next epoch end
    fixed = EvalSchedule(True, 2, steps_per_epoch=5, total_steps=23)
    assert [s for s in range(24) if fixed.due(s, timing)] == [0, 10, 20, 23]
    assert fixed.next_due(10, timing, 0.1) == 20 and fixed.next_due(21, timing, 0.1) == 23
    assert EvalSchedule(False, None, 5, 100).next_due(0, timing, 0.1) == 100


def test_default_cadence_in_a_fit_with_a_slow_evaluation():
    def slow_eval(params):
        time.sleep(0.03)
        return {"h0": float(params["h"][0])}

    res = fit(NOISY, jax.random.key(0), DATA, params=ZERO_PARAMS, num_epochs=30, batch_size=10, progress=False,
              eval_fn=slow_eval)  # fmt: skip
    ev = res.history["evaluations"]
    steps, cost, wall = ev["step"], ev["eval_seconds"], ev["wall_time"]
    assert steps[0] == 0 and steps[-1] == 120 and np.all(steps % 4 == 0)
    # every evaluation between the first and the last was within budget when it was decided:
    # the evaluations before it plus the previous one's cost <= 10% of the training time
    for i in range(1, len(steps) - 1):
        assert cost[:i].sum() + cost[i - 1] <= EVAL_BUDGET * wall[i] + 1e-12
    assert len(steps) < 31  # fewer than one per epoch: 30 ms evaluations against sub-millisecond epochs
    np.testing.assert_allclose(ev["h0"][-1], float(res.params["h"][0]))
