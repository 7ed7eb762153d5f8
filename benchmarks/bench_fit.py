"""``ui.fit`` against the fastest hand-written JAX loops and scikit-learn, timed alternately in one run.

Four parts, each timing its contenders one after another, repeat after repeat (the
first call of every contender compiles and is not timed; every timed figure is the
wall time of the whole call):

``mnist``
    One PCD-1 epoch of an RBM 784-500 on binarized MNIST (50,000 training images,
    minibatches of 100, 100 persistent chains, plain SGD with learning rate 0.01):

    * ``ui.fit(ui.learn.pcd(...))`` with the data as :class:`ugm_infer.PackedBits`
      (the file's own format), as ``uint8`` and as ``float32`` (the call includes
      checking and copying the data), and packed with ``step_info=False``;
    * ``learner.step`` of the same learner in a hand-written ``lax.scan`` (no driver);
    * a plain-JAX PCD loop: ``jit`` + ``lax.scan`` over the minibatches of a
      permutation, data on the device (float32), one uniform per sampled unit, five
      matrix products per update (the chains carry their hidden probabilities, as
      scikit-learn's do), the free-energy gradient on both sides, nothing else; and the
      same loop with the data and the chains stacked (three products per update);
    * scikit-learn's ``BernoulliRBM(n_components=500, batch_size=100,
      learning_rate=0.01, n_iter=1).fit(X)`` with ``threadpoolctl`` limiting BLAS to 1
      and to 2 threads (float32 input).

    Ratios: ``best plain JAX seconds (the faster loop, that repeat) / ui.fit seconds``
    (target >= 0.9) and ``best scikit-learn seconds (1 or 2 threads, that repeat) /
    ui.fit seconds`` (target >= 2),
    as the median over repeats of the paired ratio and as the ratio of the fastest runs
    (the least disturbed on a shared machine).
``tiny``
    The driver's own costs, where the compute per update is tiny (as it is on a fast
    GPU for the MNIST part): the same PCD-1 learner on an RBM 64-8, 5,000 random binary
    examples (density 0.3), minibatches of 100, 100 chains, for 1 and for 10 epochs (50
    and 500 updates), ``eval_fn=None`` (the MNIST RBM has no automatic evaluation):

    * ``ui.fit`` with the data as :class:`ugm_infer.PackedBits` and as ``uint8``, and
      packed with ``step_info=False`` (no per-step info computed or recorded);
    * ``learner.step`` in a hand-written ``lax.scan`` (no driver; the info it returns is
      unused, so the compiler drops it);
    * the plain-JAX PCD loop of the MNIST part (a scan over the epochs around it).

    Ratios: ``plain JAX / ui.fit`` and ``ui.fit / learner.step scan`` (the driver), and
    the paired difference ``ui.fit - learner.step scan`` in milliseconds per call, of the
    wall time and of the process CPU time (all threads; on a busy machine the CPU time
    of a call is inflated less than its wall time).
``dense``
    The dense 16-unit Boltzmann machine for 200 epochs on 500 examples drawn from a
    random model (batch 100, so 1,000 updates), and where its time goes:

    * ``ui.fit(ui.learn.pcd(model), key, data, num_epochs=200)`` with every default
      (exact evaluation at the default cadence, the learner's default SGD 0.01 and 100
      particles);
    * the same with ``eval_fn=None``;
    * ``learner.step`` of the same learner inside a hand-written ``lax.scan`` over
      epochs and minibatches (no driver);
    * a hand-written PCD-1 loop: the same scan, one systematic single-site Gibbs sweep
      of 100 chains per update (one uniform per unit), moments and an SGD step.

    The split: ``step`` = step-scan / hand loop, ``driver`` = fit without evaluation /
    step-scan, ``evaluation`` = fit defaults / fit without evaluation; their product is
    the total (target: total <= 3).
``checkpoint``
    An RBM 64-16 on 2,000 random binary examples for 50 epochs (1,000 updates) without
    checkpoints, with ``checkpoint_every=10`` and with the default cadence; the
    checkpoint seconds are reported against the training seconds.

Run::

    python benchmarks/bench_fit.py            # all parts, 5 repeats
    python benchmarks/bench_fit.py --quick    # smaller sizes, 2 repeats (CI smoke run)
    python benchmarks/bench_fit.py --parts mnist,tiny --no-sklearn   # without scikit-learn (a GPU run)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handwritten  # noqa: E402

# binarized MNIST is not shipped with the repository: ../shared/data beside the repository root, or $UGM_DATA
DATA = os.path.join(
    os.environ.get("UGM_DATA", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")),
    "binarized_mnist.npz",
)
LR = 0.01


# ----------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------
def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t, out


# the wall time of each contender's first (untimed, compiling) call in the latest `alternate`
FIRST_CALLS: dict[str, float] = {}


def alternate(contenders: dict, repeats: int, cpu: dict | None = None) -> dict[str, list[float]]:
    """Warm every contender up once, then time them in turn, ``repeats`` rounds.

    The warm-up calls, in the order given, are timed into :data:`FIRST_CALLS` (first-call
    latency, compilation included; pieces shared with a contender before it are already
    compiled).  With ``cpu`` (a dict), the process CPU seconds of every timed call (all
    threads) go into ``cpu[name]``: the work done, which a busy machine inflates less than
    the wall time.
    """
    FIRST_CALLS.clear()
    for name, fn in contenders.items():
        FIRST_CALLS[name] = timed(fn)[0]
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(repeats):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name in order:
            c = time.process_time()
            times[name].append(timed(contenders[name])[0])
            if cpu is not None:
                cpu.setdefault(name, []).append(time.process_time() - c)
    return times


def stats(x) -> dict:
    x = np.asarray(x, float)
    return {"median": float(np.median(x)), "min": float(x.min()), "max": float(x.max()), "all": x.tolist()}


def ratio(num, den) -> dict:
    """``num / den`` per repeat (paired: the two ran one after the other) and of the fastest runs."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    return {**stats(num / den), "fastest": float(num.min() / den.min())}


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ui.fit(*args, **kwargs)


# the step_info=False contenders need a ui.fit that has it (earlier versions are timed without them)
HAS_STEP_INFO = "step_info" in inspect.signature(ui.fit).parameters


# ----------------------------------------------------------------------------------
# MNIST: RBM 784-500, one PCD-1 epoch
# ----------------------------------------------------------------------------------
def rbm_init(seed: int, nv: int, nh: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "W": jnp.asarray(0.01 * rng.standard_normal((nv, nh)), jnp.float32),
        "b": jnp.zeros(nv, jnp.float32),
        "c": jnp.zeros(nh, jnp.float32),
    }


def plain_jax_pcd_epoch(num_examples: int, batch: int, chains: int, epochs: int = 1, stacked: bool = False):
    """The fastest PCD-1 epoch we can write: one scan over the minibatches of a permutation.

    Five matrix products per update, as in scikit-learn: the chains carry their hidden
    probabilities ``p(h | v)`` from the previous update, so a Gibbs step is ``h ~ p(h)``,
    ``v ~ p(v | h)``, ``p(h | v)`` (two products), plus the data's ``p(h | v)`` and the
    two outer products of the gradient.  The uniforms come from the fused Threefry hash
    (``handwritten.fused_uniform_rows``: both words of every hash, fused with the
    comparison that consumes them), not ``jax.random.uniform``'s loop (the fastest of
    the draws tried).  ``stacked=True``: the data and the chains' visibles are stacked,
    so their ``p(h | v)`` is one product and the gradient's outer products one weighted
    product (three products per update instead of five; the same arithmetic).
    ``epochs > 1``: a scan over the epochs around it.
    """
    steps = num_examples // batch

    def one_epoch(params, ph_chains, data, key):
        key_perm, key_steps = jax.random.split(key)
        perm = jax.random.permutation(key_perm, num_examples)
        # stacked: the rows' weights in the gradient (+1/batch for the data, -1/chains for the chains)
        weights = jnp.concatenate([jnp.full(batch, 1.0 / batch), jnp.full(chains, -1.0 / chains)]).astype(jnp.float32)

        def body(carry, s):
            (W, b, c), ph = carry
            v = jnp.take(data, jax.lax.dynamic_slice(perm, (s * batch,), (batch,)), axis=0, mode="clip")
            key_h, key_v = jax.random.split(jax.random.fold_in(key_steps, s))
            h = (handwritten.fused_uniform_rows(key_h, ph.shape) < ph).astype(jnp.float32)
            pv = jax.nn.sigmoid(h @ W.T + b)
            v_neg = (handwritten.fused_uniform_rows(key_v, pv.shape) < pv).astype(jnp.float32)
            if stacked:
                both = jnp.concatenate([v, v_neg])
                ph_both = jax.nn.sigmoid(both @ W + c)
                gW, gb, gc = (both * weights[:, None]).T @ ph_both, weights @ both, weights @ ph_both
                ph_neg = ph_both[batch:]
            else:
                ph_pos, ph_neg = jax.nn.sigmoid(v @ W + c), jax.nn.sigmoid(v_neg @ W + c)
                gW = v.T @ ph_pos / batch - v_neg.T @ ph_neg / chains
                gb = v.mean(0) - v_neg.mean(0)
                gc = ph_pos.mean(0) - ph_neg.mean(0)
            return ((W + LR * gW, b + LR * gb, c + LR * gc), ph_neg), None

        (params, ph_chains), _ = jax.lax.scan(body, (params, ph_chains), jnp.arange(steps))
        return params, ph_chains

    if epochs == 1:
        return handwritten.jit(one_epoch)

    @handwritten.jit
    def run(params, ph_chains, data, key):
        def epoch(carry, e):
            return one_epoch(*carry, data, jax.random.fold_in(key, e)), None

        return jax.lax.scan(epoch, (params, ph_chains), jnp.arange(epochs))[0]

    return run


def part_mnist(args) -> dict:
    d = np.load(args.data)
    n = args.mnist_examples
    packed = d["train"][:n]
    u8 = np.unpackbits(packed, axis=1, count=784)
    f32 = u8.astype(np.float32)
    nv, nh, batch = 784, 500, 100
    model = ui.models.rbm(nv, nh)
    learner = ui.learn.pcd(model, optax.sgd(LR), num_particles=batch, visible="v")
    params = rbm_init(0, nv, nh)
    key = jax.random.key(0)

    def ui_fit(data, **kw):
        return lambda: quiet_fit(learner, key, data, params=params, num_epochs=1, batch_size=batch, progress=False,
                                 **kw).params  # fmt: skip

    epoch = plain_jax_pcd_epoch(n, batch, batch)
    epoch_stacked = plain_jax_pcd_epoch(n, batch, batch, stacked=True)
    data_dev = jax.device_put(f32)
    chains0 = jnp.full((batch, nh), 0.5, jnp.float32)  # hidden probabilities of the chains
    jax_params = (params["W"], params["b"], params["c"])

    def sklearn(threads):
        from sklearn.neural_network import BernoulliRBM
        from threadpoolctl import threadpool_limits

        def run():
            with threadpool_limits(limits=threads, user_api="blas"):
                return BernoulliRBM(n_components=nh, batch_size=batch, learning_rate=LR, n_iter=1, random_state=0).fit(f32)

        return run

    state0 = learner.init(jax.random.key(1), params)
    step_scan = epoch_scan(lambda st, rows, k: learner.step(k, st, {"v": rows})[0], n, batch, 1)
    contenders = {
        "ui.fit packed bits": ui_fit(ui.PackedBits(packed, nv)),
        "ui.fit uint8": ui_fit(u8),
        "ui.fit float32": ui_fit(f32),
        **({"ui.fit packed, step_info=False": ui_fit(ui.PackedBits(packed, nv), step_info=False)} if HAS_STEP_INFO else {}),
        "learner.step in lax.scan": lambda: step_scan(state0, data_dev, key).params,
        "plain JAX": lambda: epoch(jax_params, chains0, data_dev, key),
        "plain JAX, stacked": lambda: epoch_stacked(jax_params, chains0, data_dev, key),
    }
    if not args.no_sklearn:
        contenders.update({"scikit-learn 1 thread": sklearn(1), "scikit-learn 2 threads": sklearn(2)})
    load_before = os.getloadavg()
    times = alternate(contenders, args.repeats)
    res = quiet_fit(learner, key, ui.PackedBits(packed, nv), params=params, num_epochs=1, batch_size=batch, progress=False)
    t_ui = np.asarray(times["ui.fit packed bits"])
    t_scan = times["learner.step in lax.scan"]
    t_plain = np.minimum(times["plain JAX"], times["plain JAX, stacked"])  # the faster loop, that repeat
    ratios = {"best plain JAX / ui.fit (target >= 0.9)": ratio(t_plain, t_ui)}
    ratios["plain JAX five products / ui.fit"] = ratio(times["plain JAX"], t_ui)
    ratios["plain JAX five products / stacked"] = ratio(times["plain JAX"], times["plain JAX, stacked"])
    if not args.no_sklearn:
        t_sk = np.minimum(times["scikit-learn 1 thread"], times["scikit-learn 2 threads"])
        ratios["best scikit-learn / ui.fit (target >= 2)"] = ratio(t_sk, t_ui)
    ratios["ui.fit float32 / ui.fit packed"] = ratio(times["ui.fit float32"], t_ui)
    ratios["step (learner.step scan / best plain JAX)"] = ratio(t_scan, t_plain)
    ratios["driver (ui.fit packed / learner.step scan)"] = ratio(t_ui, t_scan)
    if HAS_STEP_INFO:
        ratios["driver (ui.fit step_info=False / learner.step scan)"] = ratio(
            times["ui.fit packed, step_info=False"], t_scan
        )
    return {
        "examples": n,
        "steps": n // batch,
        "seconds": {k: stats(v) for k, v in times.items()},
        "ratios": ratios,
        "first_call_seconds": dict(FIRST_CALLS),
        "ui_fit_timing": res.history["timing"],
        "load_average": [load_before, os.getloadavg()],
    }


# ----------------------------------------------------------------------------------
# tiny RBM: the driver's own costs
# ----------------------------------------------------------------------------------
def part_tiny(args) -> dict:
    nv, nh, batch, n = 64, 8, 100, args.tiny_examples
    u8 = (np.random.default_rng(0).random((n, nv)) < 0.3).astype(np.uint8)
    packed = ui.PackedBits(np.packbits(u8, axis=1), nv)
    model = ui.models.rbm(nv, nh)
    learner = ui.learn.pcd(model, optax.sgd(LR), num_particles=batch, visible="v")
    params = rbm_init(0, nv, nh)
    key = jax.random.key(0)
    data_dev = jax.device_put(u8.astype(np.float32))
    state0 = learner.init(jax.random.key(1), params)
    chains0 = jnp.full((batch, nh), 0.5, jnp.float32)
    jax_params = (params["W"], params["b"], params["c"])
    contenders, pairs = {}, {}
    for epochs in args.tiny_epochs:

        def ui_fit(data, epochs=epochs, **kw):
            return lambda: quiet_fit(learner, key, data, params=params, num_epochs=epochs, batch_size=batch,
                                     progress=False, eval_fn=None, **kw).params  # fmt: skip

        step_scan = epoch_scan(lambda st, rows, k: learner.step(k, st, {"v": rows})[0], n, batch, epochs)
        plain = plain_jax_pcd_epoch(n, batch, batch, epochs)
        names = [f"{what}, {epochs} epoch{'s' if epochs > 1 else ''}" for what in TINY_CONTENDERS]
        contenders.update(zip(names, [
            ui_fit(packed),
            ui_fit(u8),
            ui_fit(packed, step_info=False) if HAS_STEP_INFO else None,
            lambda step_scan=step_scan: step_scan(state0, data_dev, key).params,
            lambda plain=plain: plain(jax_params, chains0, data_dev, key),
        ], strict=True))  # fmt: skip
        pairs[epochs] = names
    contenders = {k: v for k, v in contenders.items() if v is not None}
    load_before = os.getloadavg()
    cpu: dict[str, list[float]] = {}
    times = alternate(contenders, args.repeats, cpu)
    ratios, overhead, timing = {}, {}, {}
    for epochs, (fit_packed, fit_u8, fit_lean, scan, plain) in pairs.items():
        tag = f"{epochs} epoch{'s' if epochs > 1 else ''}"
        ratios[f"plain JAX / ui.fit packed, {tag}"] = ratio(times[plain], times[fit_packed])
        ratios[f"driver (ui.fit packed / learner.step scan), {tag}"] = ratio(times[fit_packed], times[scan])
        ratios[f"driver (ui.fit uint8 / learner.step scan), {tag}"] = ratio(times[fit_u8], times[scan])
        if HAS_STEP_INFO:
            ratios[f"driver (ui.fit step_info=False / learner.step scan), {tag}"] = ratio(times[fit_lean], times[scan])
        ratios[f"driver in CPU seconds (ui.fit packed / learner.step scan), {tag}"] = ratio(cpu[fit_packed], cpu[scan])
        overhead[tag] = stats((np.asarray(times[fit_packed]) - np.asarray(times[scan])) * 1e3)
        overhead[f"{tag}, CPU"] = stats((np.asarray(cpu[fit_packed]) - np.asarray(cpu[scan])) * 1e3)
        res = quiet_fit(learner, key, packed, params=params, num_epochs=epochs, batch_size=batch, progress=False,
                        eval_fn=None)  # fmt: skip
        timing[tag] = res.history["timing"]
    return {
        "examples": n,
        "steps_per_epoch": n // batch,
        "seconds": {k: stats(v) for k, v in times.items()},
        "cpu_seconds": {k: stats(v) for k, v in cpu.items()},
        "ratios": ratios,
        "ui.fit packed minus learner.step scan (ms per call)": overhead,
        "ui_fit_timing": timing,
        "load_average": [load_before, os.getloadavg()],
    }


TINY_CONTENDERS = (
    "ui.fit packed bits",
    "ui.fit uint8",
    "ui.fit packed, step_info=False",
    "learner.step in lax.scan",
    "plain JAX",
)


# ----------------------------------------------------------------------------------
# dense 16-unit Boltzmann machine, 200 epochs
# ----------------------------------------------------------------------------------
def epoch_scan(step_fn, num_examples: int, batch: int, epochs: int):
    """``run(carry, data, key)``: ``epochs`` epochs of ``step_fn(carry, batch, key) -> carry``."""
    steps = num_examples // batch

    @handwritten.jit
    def run(carry, data, key):
        def epoch(carry, e):
            key_perm, key_steps = jax.random.split(jax.random.fold_in(key, e))
            perm = jax.random.permutation(key_perm, num_examples)

            def step(carry, s):
                rows = jnp.take(data, jax.lax.dynamic_slice(perm, (s * batch,), (batch,)), axis=0, mode="clip")
                return step_fn(carry, rows, jax.random.fold_in(key_steps, s)), None

            return jax.lax.scan(step, carry, jnp.arange(steps))[0], None

        return jax.lax.scan(epoch, carry, jnp.arange(epochs))[0]

    return run


def hand_pcd_step(n: int, chains: int):
    """``handwritten.bm_pcd`` (a dense BM's PCD-1 update) as ``step(((W, h), s), v, key) -> ((W, h), s)``."""
    update = handwritten.bm_pcd(n, chains, LR)

    def step(carry, v, key):
        (W, h), s = carry
        (W, h, s), _ = update((W, h, s), (key, v))
        return (W, h), s

    return step


def part_dense(args) -> dict:
    n, num, batch, epochs = 16, 500, 100, args.dense_epochs
    model = ui.models.boltzmann_machine(n)
    rng = np.random.default_rng(0)
    W = rng.normal(0.0, 0.5, (n, n))
    true = {
        "W": jnp.asarray((W + W.T) / 2 * (1 - np.eye(n)), jnp.float32),
        "h": jnp.asarray(rng.normal(0, 0.5, n), jnp.float32),
    }
    data = np.asarray(ui.exact.sample(jax.random.key(1), model, true, num)["s"])
    learner = ui.learn.pcd(model)
    key = jax.random.key(0)
    params0 = model.init_params(jax.random.key(2))
    state0 = learner.init(jax.random.key(3), params0)
    step_scan = epoch_scan(lambda st, rows, k: learner.step(k, st, {"s": rows})[0], num, batch, epochs)
    hand = epoch_scan(hand_pcd_step(n, 100), num, batch, epochs)
    chains0 = jnp.asarray((rng.random((100, n)) < 0.5).astype(np.float32))
    hand0 = ((jnp.zeros((n, n)), jnp.zeros(n)), chains0)
    data_dev = jax.device_put(data)

    def ui_fit(**kw):
        return lambda: quiet_fit(learner, key, data, num_epochs=epochs, progress=False, **kw).params

    contenders = {
        "ui.fit defaults": ui_fit(),
        "ui.fit eval_fn=None": ui_fit(eval_fn=None),
        "learner.step in lax.scan": lambda: step_scan(state0, data_dev, key).params,
        "hand-written lax.scan": lambda: hand(hand0, data_dev, key),
    }
    load_before = os.getloadavg()
    times = alternate(contenders, args.repeats)
    res = quiet_fit(learner, key, data, num_epochs=epochs, progress=False)
    t = times
    split = {
        "step (learner.step scan / hand scan; target <= 1.5)": ratio(
            t["learner.step in lax.scan"], t["hand-written lax.scan"]
        ),
        "driver (fit eval_fn=None / learner.step scan)": ratio(t["ui.fit eval_fn=None"], t["learner.step in lax.scan"]),
        "evaluation (fit defaults / fit eval_fn=None)": ratio(t["ui.fit defaults"], t["ui.fit eval_fn=None"]),
        "total (fit defaults / hand scan; target <= 3)": ratio(t["ui.fit defaults"], t["hand-written lax.scan"]),
    }
    return {
        "epochs": epochs,
        "updates": epochs * (num // batch),
        "seconds": {k: stats(v) for k, v in times.items()},
        "ratios": split,
        "first_call_seconds": dict(FIRST_CALLS),
        "evaluations_at_defaults": int(len(res.history["evaluations"]["step"])),
        "ui_fit_timing": res.history["timing"],
        "load_average": [load_before, os.getloadavg()],
    }


# ----------------------------------------------------------------------------------
# checkpoints: RBM 64-16
# ----------------------------------------------------------------------------------
def part_checkpoint(args) -> dict:
    model = ui.models.rbm(64, 16)
    data = (np.random.default_rng(0).random((2000, 64)) < 0.3).astype(np.uint8)
    learner = ui.learn.pcd(model, num_particles=100, visible="v")
    key = jax.random.key(0)
    folder = tempfile.mkdtemp(prefix="bench_fit_")
    timings: dict[str, list] = {}

    def run(name, **kw):
        def go():
            res = quiet_fit(learner, key, {"v": data}, num_epochs=args.checkpoint_epochs, eval_fn=None, progress=False,
                            resume=False, **kw)  # fmt: skip
            timings.setdefault(name, []).append(res.history["timing"])
            return res.params

        return go

    contenders = {
        "no checkpoints": run("none"),
        "checkpoint_every=10": run("every10", checkpoint_dir=os.path.join(folder, "a"), checkpoint_every=10),
        "default cadence": run("default", checkpoint_dir=os.path.join(folder, "b")),
    }
    load_before = os.getloadavg()
    times = alternate(contenders, args.repeats)
    steps = args.checkpoint_epochs * 20

    def share(name):  # checkpoint seconds / training seconds of each timed run (the warm-up excluded)
        return stats([t["checkpoint_seconds"] / t["train_seconds"] for t in timings[name][1:]])

    every10 = timings["every10"][1:]
    return {
        "updates": steps,
        "seconds": {k: stats(v) for k, v in times.items()},
        "checkpoint_every=10": {
            "writes per run": steps // 10,
            "seconds per write": stats([t["checkpoint_seconds"] / (steps // 10) for t in every10]),
            "checkpoint / train seconds": share("every10"),
        },
        "default cadence (one write, at the end)": {"checkpoint / train seconds": share("default")},
        "load_average": [load_before, os.getloadavg()],
    }


# ----------------------------------------------------------------------------------
def print_table(name: str, part: dict) -> None:
    print(f"\n== {name} (load average {part['load_average'][0][0]:.2f} -> {part['load_average'][1][0]:.2f})")
    for k, v in part["seconds"].items():
        print(f"  {k:<42s} median {v['median']:8.4f} s   (min {v['min']:.4f}, max {v['max']:.4f})")
    for k, v in part.get("ratios", {}).items():
        print(
            f"  {k:<66s} paired median {v['median']:5.2f} (min {v['min']:.2f}, max {v['max']:.2f}); "
            f"fastest runs {v['fastest']:.2f}"
        )
    for k, v in part.items():
        if k not in ("seconds", "ratios", "load_average", "all", "finished") and not isinstance(v, dict | list):
            print(f"  {k}: {v}")
        elif k.startswith(("checkpoint_every", "ui_fit_timing", "default cadence", "ui.fit packed minus", "first_call")):
            print(f"  {k}: {json.dumps(_drop_all(v), default=float)}")


def _drop_all(v):
    """A result without its per-repeat lists (for printing)."""
    if isinstance(v, dict):
        return {k: _drop_all(x) for k, x in v.items() if k != "all"}
    return v


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and 2 repeats")
    parser.add_argument("--parts", default="mnist,tiny,dense,checkpoint")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--no-sklearn", action="store_true", help="mnist part without the scikit-learn contenders")
    parser.add_argument("--out")
    a = parser.parse_args(argv)
    a.repeats = a.repeats or (2 if a.quick else 5)
    a.mnist_examples = 500 if a.quick else 50000
    a.dense_epochs = 10 if a.quick else 200
    a.checkpoint_epochs = 4 if a.quick else 50
    a.tiny_examples = 1000 if a.quick else 5000
    a.tiny_epochs = (1, 2) if a.quick else (1, 10)
    out = Path(a.out or f"benchmarks/results/bench_fit{'_quick' if a.quick else ''}.json")
    parts = {"mnist": part_mnist, "tiny": part_tiny, "dense": part_dense, "checkpoint": part_checkpoint}
    # parts run separately are merged into one file; each part records its own command and time
    results = json.loads(out.read_text()) if out.exists() else {}
    results["machine"] = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }
    command = "python benchmarks/bench_fit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for name in a.parts.split(","):
        if name == "mnist" and not os.path.exists(a.data):
            print(f"skipping mnist: {a.data} not found")
            continue
        results[name] = parts[name](a)
        results[name].update(command=command.strip(), repeats=a.repeats, finished=time.strftime("%Y-%m-%d %H:%M"))
        print_table(name, results[name])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=float) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
