"""The learner contract, checked the same way for every learner of ``ui.learn``.

Every learner in :data:`LEARNERS` (one line each: a new learner is tested by adding
its line) goes through the same checks on a tiny model:

* ``init`` returns a NamedTuple state whose leaves are arrays, with ``params`` and an
  int32 ``step`` of 0; its pytree structure, shapes and dtypes do not change across
  steps (so ``lax.scan`` and checkpoints can carry it);
* ``step`` jits, is deterministic per key (another key gives another run, unless the
  learner is deterministic), and its info is a NamedTuple with a finite ``grad_norm``
  whose every field is documented in the info's docstring;
* the parameters stay finite over a few steps;
* a run interrupted and resumed from a checkpoint ends bit-identical to an
  uninterrupted one: through ``ui.fit(checkpoint_dir=...)`` for learners ``ui.fit``
  drives, through a numpy round trip of the state for the CRF learners (their data
  are ``(x, y)`` pairs, which ``ui.fit`` does not take).

The type checks trace the step without compiling it and run for every learner.  The
run checks compile each learner's step once (inside ``ui.fit``, or ``jax.jit`` for the
CRF learners); they run in the default tier for the learners marked ``fast`` (one per
construction path) and for all with ``pytest -m slow``.

One more test checks the learner layer's imports (from the source): no cycle inside
``ugm_infer.learn``, no ``ugm_infer.smc`` module importing it, no core module importing
``ugm_infer.applications``.

The statistical correctness of each algorithm is tested in its own module
(``test_learn*.py``, ``test_latent*.py``, ``test_crf.py``, ``test_sbn.py``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ugm_infer as ui
from ugm_infer.models.crf import difference_features, grid_crf

NUM_STEPS = 4


class Problem(NamedTuple):
    model: Any
    params: Any
    data: dict


@functools.cache
def problem(kind: str) -> Problem:
    """Tiny models: a fully visible Boltzmann machine, an RBM, a DBM, a sigmoid belief net, a grid CRF."""
    if kind == "bm":
        model = ui.models.ising(4)
        params = model.init_params(jax.random.key(0))
        data = {"s": model.random_state(jax.random.key(1), 16)["s"]}
    elif kind == "rbm":
        model = ui.models.rbm(4, 2)
        params = model.init_params(jax.random.key(0))
        data = {"v": model.random_state(jax.random.key(1), 16)["v"]}
    elif kind == "dbm":
        model = ui.models.dbm([4, 3, 2])
        params = model.init_params(jax.random.key(0))
        data = {"v": model.random_state(jax.random.key(1), 16)["v"]}
    elif kind == "sbn":
        model = ui.models.sigmoid_belief_net([4, 2])
        params = model.init_params(jax.random.key(0))
        data = {"v": model.random_state(jax.random.key(1), 16)["v"]}
    elif kind == "crf":
        model = grid_crf(2, 2)
        clean = jax.random.bernoulli(jax.random.key(1), 0.5, (6, 2, 2)).astype(jnp.float32)
        noisy = clean + jax.random.normal(jax.random.key(2), clean.shape)
        params = model.init_params(jax.random.key(0))
        data = {"x": difference_features(noisy, model.edges), "y": clean}
    else:
        raise ValueError(kind)
    return Problem(model, params, data)


class Case(NamedTuple):
    name: str
    kind: str
    build: Callable  # model -> Learner
    deterministic: bool = False  # the step ignores its key
    fast: bool = False  # run the (compiling) run checks in the default tier, not only with -m slow


L = ui.learn
OPT = optax.sgd(0.05)

#: Every built-in learner, one line each.
LEARNERS = [
    Case("sap", "bm", lambda m: L.sap(m, ui.kernels.metropolis, OPT, 8)),
    Case("pcd", "rbm", lambda m: L.pcd(m, OPT, 8), fast=True),
    Case("pcd_mc_positive", "dbm", lambda m: L.pcd(m, OPT, 8, positive_phase="mc")),
    Case("trans_sap", "bm", lambda m: L.trans_sap(m, OPT, 8, betas=np.linspace(0.5, 1.0, 3), gibbs_per_tt=2)),
    Case("pt_sap", "bm", lambda m: L.pt_sap(m, OPT, 8, betas=np.linspace(0.5, 1.0, 3))),
    Case("cd", "rbm", lambda m: L.cd(m, 1, OPT)),
    Case("exact_ml", "rbm", lambda m: L.exact_ml(m, OPT), deterministic=True, fast=True),
    Case("pseudo_likelihood", "bm", lambda m: L.pseudo_likelihood(m, OPT), deterministic=True),
    Case("mcmc_mle", "bm", lambda m: L.mcmc_mle(m, None, OPT, 8, num_mcmc_steps=2, max_inner_steps=2), fast=True),
    Case("pf_mcmc_mle", "rbm", lambda m: L.pf_mcmc_mle(m, None, OPT, 8, max_updates_between_rejuvenation=2)),
    Case("pf_mcmc_mle_unit", "bm", lambda m: L.pf_mcmc_mle(m, None, OPT, 8, unit_weights=True)),
    Case("psmc", "bm", lambda m: L.psmc(m, None, OPT, 8, max_bridges=4)),
    Case("smc", "bm", lambda m: L.smc(m, None, OPT, 8, max_bridges=8)),
    Case("mfpcd", "dbm", lambda m: L.mfpcd(m, OPT, 8, max_iterations=5)),
    Case("apcd", "dbm", lambda m: L.apcd(m, OPT, 8, num_chains_per_datum=2)),
    Case("h_apcd", "dbm", lambda m: L.apcd(m, OPT, 8, statistics="latent", hybrid=True, num_steps=2 * NUM_STEPS)),
    Case("sbn_mean_field", "sbn", lambda m: L.mean_field_learner(m, OPT, num_iterations=3), deterministic=True),
    Case("conditional_sap", "crf", lambda m: L.conditional_sap(m, None, OPT, 3)),
    Case("conditional_pcd", "crf", lambda m: L.conditional_pcd(m, OPT, 3), fast=True),
    Case("conditional_mcmc_mle", "crf", lambda m: L.conditional_mcmc_mle(m, None, OPT, 3, max_inner_steps=2)),
    Case("conditional_pf_mcmc_mle", "crf", lambda m: L.conditional_pf_mcmc_mle(m, None, OPT, 3, ess_threshold=1.0)),
    Case("conditional_exact_ml", "crf", lambda m: L.conditional_exact_ml(m, OPT), deterministic=True),
]

CASES = {case.name: case for case in LEARNERS}


def steps(step, state, data, keys):
    """Run ``step`` once per key; ``(final state, infos)``."""
    infos = []
    for k in keys:
        state, info = step(k, state, data)
        infos.append(info)
    return state, infos


def signature(tree) -> tuple:
    return jax.tree.structure(tree), [(jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)]


def same(a, b) -> bool:
    if jax.tree.structure(a) != jax.tree.structure(b):
        return False
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


class Interrupt(Exception):
    pass


def _interrupt_at(step: int):
    def callback(progress):
        if progress.step >= step:
            raise Interrupt

    return callback


class Runs(NamedTuple):
    """Final states of runs of ``2 * NUM_STEPS`` updates: key A, key A again, key B, key A interrupted and resumed."""

    first: Any
    again: Any
    other_key: Any
    resumed: Any
    grad_norms: np.ndarray


def fit_runs(learner, params, data, tmp_path) -> Runs:
    """The runs through ``ui.fit`` (4 steps per epoch, 2 epochs), checkpoints every 2 steps, a crash at step 5."""
    kw = dict(params=params, num_epochs=2, batch_size=4, steps_per_jit=4, progress=False, eval_fn=None)
    first = ui.fit(learner, jax.random.key(5), data, checkpoint_dir=tmp_path / "first", checkpoint_every=2, **kw)
    again = ui.fit(learner, jax.random.key(5), data, **kw)
    other = ui.fit(learner, jax.random.key(6), data, **kw)
    crash = tmp_path / "crash"
    with pytest.raises(Interrupt):
        ui.fit(
            learner, jax.random.key(5), data, checkpoint_dir=crash, checkpoint_every=2, callbacks=[_interrupt_at(5)], **kw
        )
    resumed = ui.fit(learner, jax.random.key(5), data, checkpoint_dir=crash, checkpoint_every=2, **kw)
    return Runs(first.state, again.state, other.state, resumed.state, np.asarray(first.history["steps"]["grad_norm"]))


def step_runs(learner, state, data) -> Runs:
    """The same runs with the jitted step on the whole data (CRF learners: ``ui.fit`` takes no ``(x, y)`` pairs);
    the resumed run restarts from the state after half the steps, passed through numpy as a checkpoint would be."""
    step = jax.jit(learner.step)
    keys, other_keys = (jax.random.split(jax.random.key(k), 2 * NUM_STEPS) for k in (5, 6))
    first, infos = steps(step, state, data, keys)
    again, _ = steps(step, state, data, keys)
    other, _ = steps(step, state, data, other_keys)
    half, _ = steps(step, state, data, keys[:NUM_STEPS])
    leaves, treedef = jax.tree.flatten(half)
    restored = jax.tree.unflatten(treedef, [jnp.asarray(np.asarray(x)) for x in leaves])
    resumed, _ = steps(step, restored, data, keys[NUM_STEPS:])
    return Runs(first, again, other, resumed, np.asarray([float(i.grad_norm) for i in infos]))


def test_every_builtin_learner_is_listed():
    """A learner factory exported by ``ui.learn`` has a line in LEARNERS."""
    factories = {"sap", "pcd", "trans_sap", "pt_sap", "cd", "exact_ml", "pseudo_likelihood", "mcmc_mle", "pf_mcmc_mle"}
    factories |= {"psmc", "smc", "mfpcd", "apcd", "mean_field_learner"}
    factories |= {n for n in ui.learn.__all__ if n.startswith("conditional_")}
    listed = set().union(*(case.build.__code__.co_names for case in LEARNERS))
    assert factories <= listed, factories - listed


@pytest.mark.parametrize("name", CASES)
def test_state_and_info_types(name):
    """init gives a NamedTuple of arrays (params, int32 step 0); step keeps its structure and reports a
    documented info with grad_norm (traced with ``jax.eval_shape``: nothing is compiled)."""
    case = CASES[name]
    prob = problem(case.kind)
    learner = case.build(prob.model)
    assert isinstance(learner, ui.learn.Learner)
    state = learner.init(jax.random.key(3), prob.params, prob.data)
    assert isinstance(state, tuple) and hasattr(type(state), "_fields"), type(state)
    assert "params" in state._fields and "step" in state._fields
    assert jnp.result_type(state.step) == jnp.int32 and int(state.step) == 0
    assert jax.tree.structure(state.params) == jax.tree.structure(prob.params)
    for leaf in jax.tree.leaves(state):
        assert isinstance(leaf, (jax.Array, np.ndarray, np.generic)), type(leaf)
    new_state, info = jax.eval_shape(learner.step, jax.random.key(0), state, prob.data)
    assert signature(new_state) == signature(state), "the step changes the state's structure, shapes or dtypes"
    info_type = type(info)
    assert hasattr(info_type, "_fields") and "grad_norm" in info_type._fields
    undocumented = [f for f in info_type._fields if f not in (inspect.getdoc(info_type) or "")]
    assert not undocumented, f"{info_type.__name__} does not document {undocumented}"


@pytest.mark.parametrize("name", [pytest.param(c.name, marks=() if c.fast else pytest.mark.slow) for c in LEARNERS])
def test_runs_are_deterministic_resumable_and_finite(name, tmp_path):
    """Jitted runs: the same key gives the same run, another key another, an interrupted and resumed run
    ends bit-identical, the parameters and gradient norms stay finite."""
    case = CASES[name]
    prob = problem(case.kind)
    learner = case.build(prob.model)
    if case.kind == "crf":
        runs = step_runs(learner, learner.init(jax.random.key(3), prob.params, prob.data), prob.data)
    else:
        runs = fit_runs(learner, prob.params, prob.data, tmp_path)
    assert int(runs.first.step) == 2 * NUM_STEPS
    assert same(runs.first, runs.again), "the same key gave different runs"
    assert same(runs.first, runs.resumed), "an interrupted and resumed run differs from an uninterrupted one"
    if not case.deterministic:
        assert not same(runs.first, runs.other_key), "another key gave the same run"
    assert np.all(np.isfinite(runs.grad_norms))
    for leaf in jax.tree.leaves(runs.first.params):
        assert np.all(np.isfinite(np.asarray(leaf)))


def _import_graph() -> dict[str, set[str]]:
    """``module -> modules it imports`` inside ``ugm_infer``, from the source (every import statement)."""
    import ast
    import pathlib

    root = pathlib.Path(ui.__file__).parent
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            graph[m] |= {t for t in targets if t in mods and t != m}
    return graph


def test_learner_layer_imports():
    """No import cycle among the learner modules; smc does not import learn; the core imports no application."""
    graph = _import_graph()
    learn = {m for m in graph if m.startswith("ugm_infer.learn")}

    def reaches(start, goal, within):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] & within:
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    assert not [m for m in learn if reaches(m, m, learn)], "an import cycle inside ugm_infer.learn"
    assert not [(a, b) for a in graph if a.startswith("ugm_infer.smc") for b in graph[a] if b in learn]
    core = [m for m in graph if not m.startswith("ugm_infer.applications")]
    assert not [(a, b) for a in core for b in graph[a] if b.startswith("ugm_infer.applications")]
