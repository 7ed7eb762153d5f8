"""The four-sub-lattice block-Gibbs sweep of ``ui.models.lattice_potts`` (``ugm_infer.kernels.potts_lattice``).

The block Gibbs kernel runs the sweep when it gets the model's own ``PottsLogDensity``
(even sizes).  Checked here, chi-square at alpha = 1e-6 with fixed seeds (``stat_utils``):

* the full joint on an open 2x4 lattice with q = 3 (random per-bond couplings and
  per-site fields, beta = 0.9) against enumeration, 20,000 chains (all chains batched:
  the many-chain form), with power against the wrong beta;
* one step from a fixed state on a 4x6 torus (every bond direction, wrap-around): each
  site's distribution against the exact one (the first colour's sites from their
  conditionals, the second colour's a mixture over their neighbours' new values),
  for one chain and many chains, with the couplings selected by value (q = 3) and
  gathered (q = 3 forced, and q = 18), and the colours in reverse order; the generic
  block sweep (the path it replaces) passes the same test;
* that ``ui.sample`` runs it and a PCD learner, parallel tempering and tempered
  transitions build it (traced only);
  odd sizes and other densities keep the generic path.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force, run_chains
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels import potts_lattice

gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")
CHAINS = 20000


def _params(model, seed, scale=0.8, field=0.5):
    return model.init_params(jax.random.key(seed), scale=scale, field_scale=field)


def test_open_lattice_matches_enumeration():
    model = ui.models.lattice_potts(2, 4, 3)
    params = _params(model, 0, scale=1.2)
    ld = model.logdensity_fn(params, 0.9)
    assert potts_lattice.lattice_of(ld, model) is not None
    kernel = gibbs_module.build_kernel(model, "block")
    start = model.random_state(jax.random.key(1), CHAINS)
    x = run_chains(kernel, gibbs_module.init, ld, start, jax.random.key(2), 25)
    idx = state_index(x, model)
    assert_distribution_matches(idx, brute_force(model, params, 0.9), label="2x4 open, q=3")
    assert_distribution_differs(idx, brute_force(model, params, 0.3), label="beta ignored")


def test_sample_with_many_chains_matches_enumeration():
    """``ui.sample`` steps many chains with the chains on the trailing axis (the sweep's chains-last form)."""
    model = ui.models.lattice_potts(2, 4, 3)
    params = _params(model, 0, scale=1.2)
    algorithm = ui.kernels.gibbs(model, params, beta=0.9)
    start = model.random_state(jax.random.key(1), CHAINS)
    assert potts_lattice.state_type(potts_lattice.lattice_of(model.logdensity_fn(params)), jnp.int32).chains_last is False
    out = ui.sample(jax.random.key(2), algorithm, start, 1, num_warmup=24)
    assert not type(out.final_state).chains_last and out.final_state.a.shape == (CHAINS, 1, 2)  # chains first again
    idx = state_index({"x": out.states["x"][:, 0]}, model)
    assert_distribution_matches(idx, brute_force(model, params, 0.9), label="ui.sample, 2x4 open, q=3")
    assert_distribution_differs(idx, brute_force(model, params, 0.3), label="beta ignored")


# the smallest q whose chains-first sweep gathers the couplings; the chains-last sweep still selects them
GATHERED_Q = potts_lattice.MAX_SELECT_STATES + 1
assert GATHERED_Q <= potts_lattice.MAX_SELECT_STATES_CHAINS_LAST


# the gathered q: a second check of the same equivalence (CI time budget), run with `pytest -m slow`
@pytest.mark.parametrize("q, periodic", [(3, True), pytest.param(GATHERED_Q, False, marks=pytest.mark.slow)])
def test_chains_last_is_the_chains_first_sweep_bit_for_bit(q, periodic, monkeypatch):
    """The same draws, counts and final states whichever layout ``ui.sample`` steps the chains in."""
    from collections import OrderedDict

    from ugm_infer import sampling
    from ugm_infer.kernels import _common

    model = ui.models.lattice_potts(4, 6, q, periodic=periodic)
    params = _params(model, q, scale=1.0, field=0.7)
    start = model.random_state(jax.random.key(0), 16)
    runs = []
    for minimum in (_common.MIN_CHAINS_LAST, 10**9):  # the chains-last form, then chains-first throughout
        monkeypatch.setattr(_common, "MIN_CHAINS_LAST", minimum)
        monkeypatch.setattr(sampling, "_RUN_CACHE", OrderedDict())
        out = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), start, 4, thin=2, model=model, params=params)
        again = ui.sample(jax.random.key(2), ui.kernels.gibbs(model, params), out.final_state, 3)
        runs.append((out, again))
    (a, a2), (b, b2) = runs
    for x, y in ((a.states, b.states), (a.energies, b.energies), (a.infos, b.infos), (a2.states, b2.states)):
        jax.tree.map(np.testing.assert_array_equal, x, y)
    jax.tree.map(np.testing.assert_array_equal, tuple(a2.final_state), tuple(b2.final_state))
    assert type(a2.final_state) is type(b2.final_state)
    # the counts are the sites changed between consecutive steps (thin = 1 in the second run)
    moved = np.sum(np.diff(np.concatenate([a.states["x"][:, -1:], a2.states["x"]], axis=1), axis=1) != 0, axis=-1)
    np.testing.assert_array_equal(a2.infos.num_changed, moved)


def _site_conditionals(model, params, beta, x):
    """Exact conditional probabilities ``(n, q)`` of every site given ``x`` (numpy, from the edge list)."""
    J, h = np.asarray(params["J"], np.float64), np.asarray(params["h"], np.float64)
    logits = h.copy()
    for e, (i, j) in enumerate(model.edges):
        logits[i] += J[e, :, x[j]]
        logits[j] += J[e, x[i], :]
    logits = beta * logits
    p = np.exp(logits - logits.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def _one_step_marginals(model, params, beta, x, first_colour):
    """Exact distribution of each site after one block sweep from ``x`` (colour ``first_colour`` first)."""
    q = model.num_states
    colours = np.asarray(ui.models.lattice_colors(model.height, model.width, model.periodic)).reshape(-1)
    cond = _site_conditionals(model, params, beta, x)
    out = np.zeros_like(cond)
    neighbours = [[] for _ in range(x.size)]
    for e, (i, j) in enumerate(model.edges):
        neighbours[i].append((e, j, True))
        neighbours[j].append((e, i, False))
    J, h = np.asarray(params["J"], np.float64), np.asarray(params["h"], np.float64)
    for i in range(x.size):
        if colours[i] == first_colour:
            out[i] = cond[i]
            continue
        nbrs = neighbours[i]  # the first colour's sites, drawn independently
        for combo in np.ndindex(*(q,) * len(nbrs)):
            weight = np.prod([cond[j, v] for (_, j, _), v in zip(nbrs, combo)])
            logits = h[i].copy()
            for (e, _, first), v in zip(nbrs, combo):
                logits += J[e, :, v] if first else J[e, v, :]
            p = np.exp(beta * logits - (beta * logits).max())
            out[i] += weight * p / p.sum()
    return out


def _one_step(model, ld, x, batched, reverse, chains):
    kernel = gibbs_module.build_kernel(model, "block", reverse=reverse)
    keys = jax.random.split(jax.random.key(7), chains)
    xs = jnp.broadcast_to(jnp.asarray(x, jnp.int32), (chains, x.size))

    def one(key, xx):
        state = gibbs_module.init({"x": xx}, ld)
        return kernel(key, state, ld)[0].position["x"]

    run = jax.vmap(one) if batched else (lambda k, xx: jax.lax.map(lambda a: one(*a), (k, xx)))
    return np.asarray(jax.jit(run)(keys, xs))


@pytest.mark.parametrize(
    "q,batched,reverse,plain",
    [
        (3, True, False, False),
        (3, False, False, False),
        (3, True, True, False),
        (-3, True, False, False),  # -q: the couplings gathered (as for q > MAX_SELECT_STATES)
        (-3, False, False, False),
        pytest.param(18, True, False, False, marks=pytest.mark.slow),  # q^4 mixtures in numpy: ~100 s
        pytest.param(3, True, False, True, marks=pytest.mark.slow),  # the generic path: ~13 s
    ],
)
def test_one_step_from_a_fixed_state_is_exact(q, batched, reverse, plain, monkeypatch):
    if q < 0:
        q = -q
        monkeypatch.setattr(potts_lattice, "MAX_SELECT_STATES", 0)
    model = ui.models.lattice_potts(4, 6, q, periodic=True)
    params = _params(model, q, scale=1.0, field=0.7)
    ld = model.logdensity_fn(params, 0.8)
    if plain:  # the generic block sweep: the path the lattice sweep replaces
        ld = (lambda f: lambda s: f(s))(ld)
    x = np.asarray(jax.random.randint(jax.random.key(3), (24,), 0, q))
    chains = 4000 if not batched else 20000
    draws = _one_step(model, ld, x, batched, reverse, chains)
    exact = _one_step_marginals(model, params, 0.8, x, 1 if reverse else 0)
    for i in range(24):
        assert_distribution_matches(draws[:, i], exact[i], label=f"site {i}, q={q}, batched={batched}, reverse={reverse}")


def test_states_stay_in_the_lattice_layout():
    model = ui.models.lattice_potts(4, 6, 3, periodic=True)
    params = _params(model, 0)
    ld = model.logdensity_fn(params)
    x = model.random_state(jax.random.key(0))
    state = gibbs_module.init(x, ld)
    assert isinstance(state, potts_lattice.PottsLatticeState) and state.sites.dtype == jnp.int8
    np.testing.assert_array_equal(state.position["x"], x["x"])
    assert state.position["x"].dtype == x["x"].dtype
    assert isinstance(gibbs_module.init(x, ld.tempered(0.5)), potts_lattice.PottsLatticeState)
    # other densities and odd sizes: the generic state
    assert isinstance(gibbs_module.init(x, lambda s: ld(s)), gibbs_module.GibbsState)
    odd = ui.models.lattice_potts(3, 3, 3, periodic=True)
    assert potts_lattice.lattice_of(odd.logdensity_fn(odd.init_params(jax.random.key(0)))) is None
    other = ui.models.lattice_potts(4, 6, 3, periodic=False)
    assert potts_lattice.lattice_of(other.logdensity_fn(other.init_params(jax.random.key(0))), model) is None


@pytest.fixture
def calls(monkeypatch):
    seen = []
    original = potts_lattice.build_step

    def recording(lat, *args, **kwargs):
        seen.append(lat)
        return original(lat, *args, **kwargs)

    monkeypatch.setattr(potts_lattice, "build_step", recording)
    return seen


def test_user_facing_paths_take_the_lattice_sweep(calls):
    model = ui.models.lattice_potts(4, 4, 3, periodic=True)
    params = _params(model, 1)
    x0 = model.random_state(jax.random.key(0), 4)
    out = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), x0, 3)
    assert calls and isinstance(out.final_state, potts_lattice.PottsLatticeState)
    assert out.states["x"].shape == (4, 3, 16) and out.states["x"].dtype == jnp.int32
    # the other paths are only traced (jax.eval_shape: no compilation): which sweep they build is the point here
    for name, build in [
        ("pt", lambda: ui.kernels.parallel_tempering(model, params, betas=[0.5, 1.0])),
        ("tt", lambda: ui.kernels.tempered_transitions(model, params, betas=[0.5, 1.0])),
    ]:
        calls.clear()
        algorithm = build()
        state = algorithm.init(model.random_state(jax.random.key(2)))
        jax.eval_shape(algorithm.step, jax.random.key(3), state)
        assert calls, f"{name} did not run the lattice sweep"
    calls.clear()
    learner = ui.learn.pcd(model, num_particles=8)
    state = learner.init(jax.random.key(4), params)
    jax.eval_shape(learner.step, jax.random.key(5), state, model.random_state(jax.random.key(6), 8))
    assert calls, "the PCD learner did not run the lattice sweep"


def test_odd_torus_keeps_the_generic_path(calls):
    model = ui.models.lattice_potts(3, 3, 2, periodic=True)
    params = _params(model, 2)
    ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), model.random_state(jax.random.key(0), 2), 2)
    assert not calls


@pytest.mark.parametrize("q, periodic", [(3, True), (7, False), (2, False)])
def test_energy_of_sublattices_is_the_energy(q, periodic):
    model = ui.models.lattice_potts(4, 6, q, periodic=periodic)
    params = _params(model, q, scale=1.0, field=0.7)
    ld = model.logdensity_fn(params)
    lat = potts_lattice.lattice_of(ld, model)
    x = model.random_state(jax.random.key(q), 10)
    sub = tuple(jnp.moveaxis(lat.split(x["x"]), 1, 0))  # four (chains, h, w)
    tables = ld.tables[: potts_lattice.NUM_TABLES]
    want = np.asarray(model.energies(params, x))
    first = potts_lattice.energy_of_sublattices(lat, sub, tables)
    last = potts_lattice.energy_of_sublattices(lat, tuple(jnp.moveaxis(s, 0, -1) for s in sub), tables, chains_last=True)
    np.testing.assert_allclose(np.asarray(first), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(last), want, rtol=1e-5, atol=1e-5)
    # a table with one bond's couplings changed gives another energy
    changed = list(tables)
    changed[0] = changed[0].at[:, :, 0, 0].add(1.0)
    assert not np.allclose(np.asarray(potts_lattice.energy_of_sublattices(lat, sub, tuple(changed))), want, atol=1e-3)


def test_edge_energy_reads_a_torus_by_shifts_with_the_gathers_values_and_gradients():
    """A periodic lattice's bonds are read by shifts; energies and parameter gradients equal the gather form bit for bit."""
    from ugm_infer.models.lattice import lattice_edges
    from ugm_infer.models.potts import _periodic_grid

    assert _periodic_grid(lattice_edges(6, 4, True)) == (6, 4)
    assert _periodic_grid(lattice_edges(3, 3, True)) == (3, 3)
    assert _periodic_grid(lattice_edges(4, 4, False)) is None
    assert _periodic_grid(lattice_edges(3, 1, True)) is None
    assert _periodic_grid(np.flipud(lattice_edges(4, 5, True))) is None  # another bond order: the gathers
    for height, width, periodic, q in [(6, 4, True, 3), (5, 5, False, 3), (4, 6, True, 10)]:
        model = ui.models.lattice_potts(height, width, q, periodic=periodic)
        params = model.init_params(jax.random.key(0), scale=1.0, field_scale=0.3)
        states = model.random_state(jax.random.key(1), 7)
        edges = lattice_edges(height, width, periodic)

        def gathered(p, s, q=q, edges=edges):
            x = s["x"].astype(jnp.int32)
            index = (x[edges[:, 0]] * q + x[edges[:, 1]])[:, None]
            pair = jnp.take_along_axis(p["J"].reshape(len(edges), q * q), index, axis=1)
            return -jnp.sum(pair) - jnp.sum(jnp.take_along_axis(p["h"], x[:, None], axis=1))

        def mean_energy(fn):
            return lambda p: jnp.mean(jax.vmap(lambda s: fn(p, s))(states))

        got = jax.jit(jax.value_and_grad(mean_energy(model.energy)))(params)
        want = jax.jit(jax.value_and_grad(mean_energy(gathered)))(params)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
