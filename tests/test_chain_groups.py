"""``ui.sample`` on a CPU runs the chains of a lattice state in groups that stay in the caches.

* The group rule (``kernels._common.chain_group``): the largest divisor of the chains of
  at least ``MIN_GROUP`` within ``GROUP_BYTES``, the smallest such divisor when none
  fits, one group for other states or when no divisor is large enough.
* A grouped run gives the draws, energies, trace and final state of the same run in one
  group, bit for bit: lattice Ising and lattice Potts, with warm-up and thinning, one
  draw, kept or dropped states, keys drawn at once or per draw, and continuing from a
  ``final_state``.
* A ``trace_fn`` sees all chains at once, so a run with one is never grouped.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer.kernels import checkerboard

sampling = importlib.import_module("ugm_infer.sampling")
common = importlib.import_module("ugm_infer.kernels._common")

CHAINS = 48  # three groups of 16 when forced


def _leaves(tree):
    out = []
    for x in jax.tree.leaves(tree):
        x = jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        out.append(np.asarray(x))
    return out


def _run(monkeypatch, group_bytes, *args, **kwargs):
    """``ui.sample(*args, **kwargs)`` built with ``GROUP_BYTES = group_bytes``; ``.groups``: the group sizes it chose."""
    chosen = []

    def spy(states, num_chains, budget):
        chosen.append(common.chain_group(states, num_chains, budget))
        return chosen[-1]

    monkeypatch.setattr(common, "GROUP_BYTES", group_bytes)
    monkeypatch.setattr(sampling, "chain_group", spy)
    sampling._RUN_CACHE.clear()
    out = ui.sample(*args, **kwargs)
    return out, chosen


def _state_of(shape_bytes):
    return checkerboard.state_type(checkerboard.LatticeLayout(4, 4, True, "spin", "float32"))(
        jnp.zeros((CHAINS, shape_bytes // 4), jnp.uint16), jnp.zeros((CHAINS, shape_bytes // 4), jnp.uint16)
    )


def test_group_rule(monkeypatch):
    monkeypatch.setattr(common, "GROUP_BYTES", 1024)
    state = _state_of(32)  # 32 bytes of words per chain
    assert common.chain_group(state, CHAINS) == 24  # 24 x 32 <= 1024 < 48 x 32
    monkeypatch.setattr(common, "GROUP_BYTES", 100)
    assert common.chain_group(state, CHAINS) == 16  # none fits: the smallest divisor of at least MIN_GROUP
    monkeypatch.setattr(common, "GROUP_BYTES", 1 << 20)
    assert common.chain_group(state, CHAINS) == CHAINS  # everything fits: one group
    words = jnp.zeros((15, 8), jnp.uint16)
    assert common.chain_group(type(state)(words, words), 15) == 15  # no divisor of at least 16
    assert common.chain_group({"s": jnp.zeros((CHAINS, 4))}, CHAINS) == CHAINS  # not a lattice state


MODELS = {
    "ising": (ui.models.lattice_ising(6, 8), lambda m: m.init_params(J=0.4, h=-0.1)),
    "potts": (ui.models.lattice_potts(4, 6, 3), lambda m: m.init_params(jax.random.key(0), scale=1.0, field_scale=0.2)),
}
SETTINGS = [
    dict(num_samples=5),
    dict(num_samples=4, num_warmup=3, thin=2),
    dict(num_samples=1),
    dict(num_samples=3, keep_states=False),
]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_grouped_run_equals_one_group(monkeypatch, name, settings):
    model, make_params = MODELS[name]
    params = make_params(model)
    x0 = model.random_state(jax.random.key(2), CHAINS)
    args = (jax.random.key(1), ui.kernels.gibbs(model, params), x0)
    grouped, groups = _run(monkeypatch, 1, *args, model=model, params=params, **settings)
    one, whole = _run(monkeypatch, 1 << 40, *args, model=model, params=params, **settings)
    assert groups == [16] and whole == [CHAINS]
    for a, b in zip(_leaves(grouped), _leaves(one)):
        np.testing.assert_array_equal(a, b)
    assert grouped.infos.num_changed.shape == (CHAINS, settings["num_samples"])
    assert np.asarray(grouped.infos.num_changed).min() >= 0


def test_grouped_run_with_keys_drawn_per_draw_and_continuing(monkeypatch):
    model, make_params = MODELS["ising"]
    params = make_params(model)
    gibbs = ui.kernels.gibbs(model, params)
    x0 = model.random_state(jax.random.key(3), CHAINS)
    monkeypatch.setattr(sampling, "_PRESPLIT_KEYS", 8)  # keys split inside the loops, per draw
    runs = {}
    for label, group_bytes, size in (("grouped", 1, 16), ("one", 1 << 40, CHAINS)):
        first, groups = _run(monkeypatch, group_bytes, jax.random.key(4), gibbs, x0, 3, num_warmup=2, thin=2)
        again, more = _run(monkeypatch, group_bytes, jax.random.key(5), gibbs, first.final_state, 4)
        assert groups + more == [size, size]
        runs[label] = (first, again)
    for a, b in zip(_leaves(runs["grouped"]), _leaves(runs["one"])):
        np.testing.assert_array_equal(a, b)


def test_a_trace_fn_sees_every_chain(monkeypatch):
    model, make_params = MODELS["ising"]
    params = make_params(model)
    x0 = model.random_state(jax.random.key(6), CHAINS)

    def mean_over_chains(state, info):  # mixes chains: wrong if it saw one group
        return jnp.full((CHAINS,), jnp.mean(state.position["s"]))

    out, groups = _run(monkeypatch, 1, jax.random.key(7), ui.kernels.gibbs(model, params), x0, 3, trace_fn=mean_over_chains)
    assert groups == []  # not asked: one group
    want = np.asarray(out.states["s"]).mean(axis=(0, 2, 3))
    np.testing.assert_allclose(np.asarray(out.infos)[0], want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.infos), np.broadcast_to(np.asarray(out.infos)[:1], out.infos.shape))
