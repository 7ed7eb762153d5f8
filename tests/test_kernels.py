"""Statistical and contract tests of the Gibbs and Metropolis kernels and ``ui.sample``.

Statistical tests compare the final states of many independent chains (iid draws of the
``num_steps``-step marginal) with the exact Boltzmann distribution computed by brute
force (``conftest.brute_force``, independent of ``ui.exact``), with the chi-square test
of ``stat_utils.assert_distribution_matches`` (alpha = 1e-6, cells with expected count
< 5 pooled).  Burn-in lengths were checked offline by evolving the exact distribution of
the single-site chains from the uniform start (numpy, all configurations): the
total-variation distance to the target after the sweeps used here is at most 7e-4 for
the dense Ising model (80 sweeps; random-scan Gibbs is the slowest), 4e-5 for the Potts
model (20), 2e-5 for the RBM (25), 3e-6 for the non-multilinear chain (25) and, for the
4x4 lattice, 3e-4 after 25 systematic Gibbs sweeps (50 are used, for the random scans),
all far below what 2e4 draws can resolve (the chi-square noncentrality is about
``n * sum delta^2 / p``).

Every kernel is driven through its low-level BlackJAX interface
``kernel(rng_key, state, logdensity_fn)`` with ``model.logdensity_fn(params, beta)`` at
``beta != 1``, so a kernel that applies ``beta`` a second time (or ignores it) fails;
the power checks assert that the same draws are *rejected* against those wrong targets.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import (
    brute_force,
    dense_ising,
    dense_ising_params,
    lattice,
    marginal,
    marginal_index,
    potts,
    potts_params,
    rbm,
    rbm_params,
    run_chains,
)
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui

# the modules themselves (``ui.kernels.gibbs`` is the BlackJAX-style API object)
gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")
metropolis_module = importlib.import_module("ugm_infer.kernels.metropolis")

KERNELS = [
    ("gibbs", "block"),
    ("gibbs", "systematic"),
    ("gibbs", "random"),
    ("metropolis", "systematic"),
    ("metropolis", "random"),
]
KERNEL_IDS = [f"{k}-{s}" for k, s in KERNELS]
#: the same kernels, the random-scan ones as second checks (run with `pytest -m slow`; the contract test keeps them)
KERNELS_RANDOM_SLOW = [
    pytest.param(k, s, id=f"{k}-{s}", marks=[pytest.mark.slow] if s == "random" else []) for k, s in KERNELS
]


def build(kind: str, model, scan: str, params, num_sweeps: int = 1):
    """(kernel, init) of the low-level API."""
    if kind == "gibbs":
        return ui.kernels.gibbs.build_kernel(model, scan, num_sweeps, params=params), ui.kernels.gibbs.init
    return ui.kernels.metropolis.build_kernel(model, scan, num_sweeps), ui.kernels.metropolis.init


def draws(kind, scan, model, params, beta, key, num_chains, num_steps):
    """Final states of ``num_chains`` independent chains started uniformly at random."""
    kernel, init = build(kind, model, scan, params)
    key_init, key_run = jax.random.split(key)
    start = model.random_state(key_init, num_chains)
    return run_chains(kernel, init, model.logdensity_fn(params, beta), start, key_run, num_steps)


def magnetisation_distribution(probs, num_spins):
    """Exact distribution of the number of up spins (index = number of +1's)."""
    ups = np.array([bin(i).count("1") for i in range(2**num_spins)])
    return np.bincount(ups, weights=probs, minlength=num_spins + 1)


# --------------------------------------------------------------------------------------
# (a) dense 12-spin Ising model at beta = 0.7
# --------------------------------------------------------------------------------------
DENSE_N, DENSE_BETA = 12, 0.7


@pytest.fixture(scope="module")
def dense():
    model = dense_ising(DENSE_N)
    params = dense_ising_params(DENSE_N)
    model.detect_structure(params)
    return model, params, brute_force(model, params, DENSE_BETA)


@pytest.mark.parametrize("kind,scan", KERNELS_RANDOM_SLOW)
def test_dense_ising_tempered(dense, kind, scan, key):
    model, params, probs = dense
    assert model.multilinear  # the gradient path is exercised by scan="block"
    x = draws(kind, scan, model, params, DENSE_BETA, jax.random.fold_in(key, 1), 20000, 80)
    idx = state_index(x, model)
    assert_distribution_matches(idx, probs, label=f"dense Ising {kind}/{scan}")
    if scan == "block":
        # power: the same draws reject beta applied twice (0.49) and beta ignored (1.0)
        assert_distribution_differs(idx, brute_force(model, params, DENSE_BETA**2), label="double beta")
        assert_distribution_differs(idx, brute_force(model, params, 1.0), label="beta ignored")


# --------------------------------------------------------------------------------------
# (b) 3x3 Potts model with 3 states (categorical, pairwise on the grid)
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def potts_case():
    model = potts()
    params = potts_params()
    model.detect_structure(params)
    return model, params, brute_force(model, params)


@pytest.mark.parametrize("kind,scan", KERNELS_RANDOM_SLOW)
def test_potts(potts_case, kind, scan, key):
    model, params, probs = potts_case
    assert not model.multilinear and len(model.blocks) == 2  # categorical: enumeration path, checkerboard
    x = draws(kind, scan, model, params, 1.0, jax.random.fold_in(key, 2), 20000, 20)
    assert_distribution_matches(state_index(x, model), probs, label=f"Potts {kind}/{scan}")
    # low-dimensional marginals have expected counts >= 5 in every cell: sharper tests
    for sites in [(0, 1, 4), (4, 8), (2, 6)]:
        assert_distribution_matches(
            marginal_index(x, model, sites), marginal(probs, model, sites), label=f"Potts {kind}/{scan} {sites}"
        )


# --------------------------------------------------------------------------------------
# (c) RBM with 5 visible and 4 hidden units, declared blocks; joint over (v, h)
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rbm_case():
    model = rbm(5, 4)
    params = rbm_params(5, 4)
    return model, params, brute_force(model, params)


@pytest.mark.parametrize("kind,scan", KERNELS_RANDOM_SLOW)
def test_rbm_joint(rbm_case, kind, scan, key):
    model, params, probs = rbm_case
    x = draws(kind, scan, model, params, 1.0, jax.random.fold_in(key, 3), 20000, 25)
    assert [sorted(b.indices) for b in model.blocks] == [["v"], ["h"]]
    assert_distribution_matches(state_index(x, model), probs, label=f"RBM {kind}/{scan}")


# --------------------------------------------------------------------------------------
# (d) user-written energies with detected blocks
# --------------------------------------------------------------------------------------
LATTICE_PARAMS = {"J": 0.3, "H": 0.1}


@pytest.fixture(scope="module")
def lattice_case():
    model = lattice(4, 4)
    model.detect_structure(LATTICE_PARAMS)
    return model, LATTICE_PARAMS, brute_force(model, LATTICE_PARAMS)


# the lattice sweep is the block scan; the other scans of a lattice model run the generic sweeps that the
# other models of this file test in the default run
@pytest.mark.parametrize(
    "kind,scan",
    [pytest.param(k, s, id=f"{k}-{s}", marks=[] if s == "block" else [pytest.mark.slow]) for k, s in KERNELS],
)
def test_lattice_detected_checkerboard(lattice_case, kind, scan, key):
    model, params, probs = lattice_case
    checker = (np.add.outer(np.arange(4), np.arange(4)) % 2).astype(bool)
    assert model.multilinear
    assert sorted(b.masks["s"].tobytes() for b in model.blocks) == sorted([(~checker).tobytes(), checker.tobytes()])
    x = draws(kind, scan, model, params, 1.0, jax.random.fold_in(key, 4), 20000, 50)
    assert_distribution_matches(state_index(x, model), probs, label=f"lattice {kind}/{scan}")
    ups = np.sum(np.asarray(x["s"]).reshape(-1, 16) > 0, axis=1)
    assert_distribution_matches(ups, magnetisation_distribution(probs, 16), label=f"lattice {kind}/{scan} #up")
    sites = (0, 1, 4, 5)
    assert_distribution_matches(marginal_index(x, model, sites), marginal(probs, model, sites), label="2x2 plaquette")


def nonmultilinear_energy(params, state):
    """Binary chain with terms whose gradient is NOT the flip difference.

    ``a_i (x_i + x_{i+1})^2`` is quadratic in each site (d2E/dx_i^2 != 0) and
    ``d * where(x_3 > 0.5, x_7, 0)`` has zero derivative in ``x_3``: the gradient trick
    at the current state would be wrong for both.
    """
    x = state["x"].astype(jnp.float32)
    quad = jnp.sum(params["a"] * (x[:-1] + x[1:]) ** 2)
    gate = params["d"] * jnp.where(x[3] > 0.5, x[7], 0.0)
    return quad + gate - params["h"] @ x


def nonmultilinear_params(n=10, seed=5):
    rng = np.random.default_rng(seed)
    return {
        "a": jnp.asarray(0.8 * rng.normal(size=n - 1), jnp.float32),
        "d": jnp.float32(-2.5),
        "h": jnp.asarray(rng.normal(size=n), jnp.float32),
    }


def nonmultilinear_model(**kwargs):
    return ui.EnergyModel(nonmultilinear_energy, {"x": ui.Binary(10)}, **kwargs)


@pytest.fixture(scope="module")
def nonml_case():
    model = nonmultilinear_model()
    params = nonmultilinear_params()
    model.detect_structure(params)
    return model, params, brute_force(model, params)


@pytest.mark.parametrize("kind,scan", KERNELS_RANDOM_SLOW)
def test_nonmultilinear_energy_exact(nonml_case, kind, scan, key):
    model, params, probs = nonml_case
    assert model.multilinear is False
    x = draws(kind, scan, model, params, 1.0, jax.random.fold_in(key, 5), 20000, 25)
    assert_distribution_matches(state_index(x, model), probs, label=f"non-multilinear {kind}/{scan}")


def test_gradient_trick_never_used_when_wrong(nonml_case, key):
    """The detected non-multilinear model samples exactly; forcing the gradient trick does not.

    The second half shows the statistical test has the power to catch a misused gradient
    trick: the same energy declared ``multilinear=True`` gives a visibly wrong sampler.
    """
    model, params, probs = nonml_case
    # the gradient at the current state differs from the flip difference for this energy
    x0 = {"x": jnp.zeros(10)}
    grad = jax.grad(lambda s: model.energy(params, {"x": s}))(x0["x"])
    flips = jnp.stack([model.energy(params, {"x": x0["x"].at[i].set(1.0)}) for i in range(10)])
    assert float(jnp.max(jnp.abs(flips - model.energy(params, x0) - grad))) > 0.1
    assert model.multilinear is False

    forced = nonmultilinear_model(multilinear=True, blocks=[{"x": b.masks["x"]} for b in model.blocks])
    x = draws("gibbs", "block", forced, params, 1.0, jax.random.fold_in(key, 6), 20000, 25)
    assert_distribution_differs(state_index(x, forced), probs, label="gradient trick forced on a non-multilinear energy")


def test_declared_not_multilinear_uses_enumeration(rbm_case, key, monkeypatch):
    """``multilinear=False`` on a multilinear energy: block Gibbs enumerates (and is exact)."""
    _, params, probs = rbm_case
    from conftest import rbm_energy

    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(5), "h": ui.Binary(4)}, [{"v": True}, {"h": True}], multilinear=False)
    calls = []
    from ugm_infer.kernels import _updates

    real = _updates.enumeration_block_update

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("gradient update used on a model declared multilinear=False")

    monkeypatch.setattr(_updates, "gradient_block_update", forbidden)
    monkeypatch.setattr(_updates, "enumeration_block_update", spy)
    x = draws("gibbs", "block", model, params, 1.0, jax.random.fold_in(key, 7), 20000, 25)
    assert len(calls) == 2
    assert_distribution_matches(state_index(x, model), probs, label="RBM declared non-multilinear")


def test_midpoint_gradient_exact_when_diagonal_appears(key):
    """Structure probed with a zero-diagonal ``W``; sampled after ``W`` gained a diagonal.

    This is what learning a binary Boltzmann machine does (``x_i^2 = x_i`` makes the
    diagonal act as a field): the gradient at the current state would then be wrong,
    the midpoint gradient used by the block update is exact.
    """
    n = 8

    def energy(params, state):
        x = state["x"].astype(jnp.float32)
        return -0.5 * x @ params["W"] @ x - params["b"] @ x

    rng = np.random.default_rng(11)
    w = rng.normal(size=(n, n))
    w = np.triu(w, 1) + np.triu(w, 1).T
    model = ui.EnergyModel(energy, {"x": ui.Binary(n)})
    model.detect_structure({"W": jnp.asarray(w, jnp.float32), "b": jnp.zeros(n, jnp.float32)})
    assert model.multilinear
    w_diag = w + np.diag(2.0 * rng.normal(size=n))
    params = {"W": jnp.asarray(w_diag, jnp.float32), "b": jnp.asarray(rng.normal(size=n), jnp.float32)}
    probs = brute_force(model, params)
    x = draws("gibbs", "block", model, params, 1.0, jax.random.fold_in(key, 8), 20000, 60)
    assert_distribution_matches(state_index(x, model), probs, label="binary BM with a diagonal")


@pytest.mark.parametrize("multilinear,reverse", [(True, False), (False, True)])
def test_many_blocks_scanned_sweep(rbm_case, multilinear, reverse, key):
    """More than ``MAX_UNROLLED_BLOCKS`` blocks: the sweep is one ``lax.scan`` over stacked blocks.

    Nine single-site blocks over two variables (padding of the per-variable indices),
    with the gradient and the enumeration update, forwards and in reverse order.
    """
    from conftest import rbm_energy

    _, params, probs = rbm_case
    blocks = [{"v": np.array([i])} for i in range(5)] + [{"h": np.array([j])} for j in range(4)]
    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(5), "h": ui.Binary(4)}, blocks, multilinear=multilinear)
    assert len(model.blocks) > gibbs_module.MAX_UNROLLED_BLOCKS
    kernel = ui.kernels.gibbs.build_kernel(model, "block", params=params, reverse=reverse)
    start = model.random_state(jax.random.fold_in(key, 15), 20000)
    x = run_chains(kernel, ui.kernels.gibbs.init, model.logdensity_fn(params), start, jax.random.fold_in(key, 16), 25)
    assert_distribution_matches(state_index(x, model), probs, label=f"stacked blocks ml={multilinear} rev={reverse}")


def mixed_energy(params, state):
    """Three 3-state labels coupled to two binary units (different numbers of states)."""
    onehot = jax.nn.one_hot(state["x"], 3, dtype=jnp.float32)  # (3, 3)
    y = state["y"].astype(jnp.float32)
    return -jnp.einsum("ik,ikj,j->", onehot, params["W"], y) - jnp.sum(onehot * params["h"]) - params["c"] @ y


SINGLE_SITE = [k for k in KERNELS_RANDOM_SLOW if k.values[1] != "block"]


@pytest.mark.parametrize("kind,scan", SINGLE_SITE)
def test_mixed_domains(kind, scan, key):
    """Categorical (K=3) and binary variables in one model, int8 states: padded global sites."""
    rng = np.random.default_rng(21)
    params = {
        "W": jnp.asarray(rng.normal(size=(3, 3, 2)), jnp.float32),
        "h": jnp.asarray(rng.normal(size=(3, 3)), jnp.float32),
        "c": jnp.asarray(rng.normal(size=2), jnp.float32),
    }
    model = ui.EnergyModel(mixed_energy, {"x": ui.Categorical(3, 3, dtype=jnp.int8), "y": ui.Binary(2, dtype=jnp.int8)})
    x = draws(kind, scan, model, params, 1.0, jax.random.fold_in(key, 17), 20000, 25)
    assert x["x"].dtype == jnp.int8 and x["y"].dtype == jnp.int8
    assert_distribution_matches(state_index(x, model), brute_force(model, params), label=f"mixed {kind}/{scan}")


def test_sample_driver_matches_exact(rbm_case, key):
    """``ui.sample`` + the top-level API at ``beta`` (final states of 20000 chains)."""
    model, params, _ = rbm_case
    beta = 0.6
    algorithm = ui.kernels.gibbs(model, params, beta=beta, scan="block")
    start = model.random_state(jax.random.fold_in(key, 9), 20000)
    result = ui.sample(jax.random.fold_in(key, 10), algorithm, start, 1, num_warmup=40, model=model, params=params)
    x = {n: v[:, -1] for n, v in result.states.items()}
    assert_distribution_matches(state_index(x, model), brute_force(model, params, beta), label="ui.sample")
    np.testing.assert_allclose(result.energies[:, -1], model.energies(params, x), rtol=1e-6)


# --------------------------------------------------------------------------------------
# contract tests: jit / vmap / scan, no recompilation, stable state structure and dtypes
# --------------------------------------------------------------------------------------
def _models_with_dtypes():
    from conftest import lattice_energy

    return [
        ("spin-int8", ui.EnergyModel(lattice_energy, {"s": ui.Spin((4, 4), dtype=jnp.int8)}), {"J": 0.3, "H": 0.1}),
        (
            "binary-int8",
            ui.EnergyModel(
                lambda p, s: -jnp.sum(p["W"] * jnp.outer(s["x"].astype(jnp.float32), s["x"].astype(jnp.float32))),
                {"x": ui.Binary(6, dtype=jnp.int8)},
            ),
            {"W": jnp.triu(jnp.full((6, 6), 0.2), 1)},
        ),
        ("categorical-int8", potts(dtype=jnp.int8), potts_params()),
    ]


@pytest.mark.parametrize("kind,scan", KERNELS, ids=KERNEL_IDS)
def test_contract_jit_vmap_scan_no_retrace(kind, scan, key):
    for label, model, params in _models_with_dtypes():
        kernel, init = build(kind, model, scan, params, num_sweeps=2)
        traces = []

        @jax.jit
        def many_steps(rng_key, positions, params):
            traces.append(1)  # runs only while tracing
            logdensity = model.logdensity_fn(params, 0.8)
            states = jax.vmap(lambda p: init(p, logdensity))(positions)

            def body(s, k):
                s, info = jax.vmap(lambda kk, ss: kernel(kk, ss, logdensity))(jax.random.split(k, 7), s)
                return s, info

            return jax.lax.scan(body, states, jax.random.split(rng_key, 3))

        positions = model.random_state(jax.random.fold_in(key, 11), 7)
        params = jax.tree.map(lambda a: jnp.asarray(a, dtype=jnp.asarray(a).dtype), params)  # non-weak dtypes
        params2 = jax.tree.map(lambda a: (a * 1.1).astype(a.dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, params)
        state0 = jax.vmap(lambda p: init(p, model.logdensity_fn(params, 0.8)))(positions)
        states, infos = many_steps(jax.random.fold_in(key, 12), positions, params)
        many_steps(jax.random.fold_in(key, 13), positions, params)
        many_steps(jax.random.fold_in(key, 14), positions, params2)
        assert len(traces) == 1, f"{label}: traced {len(traces)} times"
        # state structure and dtypes are stable across steps
        assert jax.tree.structure(states) == jax.tree.structure(state0), label
        for a, b in zip(jax.tree.leaves(states), jax.tree.leaves(state0)):
            assert a.dtype == b.dtype and a.shape == b.shape, label
        for name, domain in model.variables.items():
            assert states.position[name].dtype == domain.dtype, label
            assert np.all(domain.contains(np.asarray(states.position[name]))), label
        # infos: NamedTuples with documented fields, one value per (step, chain)
        if kind == "gibbs":
            assert isinstance(infos, gibbs_module.GibbsInfo) and infos._fields == ("num_changed",)
            assert infos.num_changed.shape == (3, 7)
            assert np.all((infos.num_changed >= 0) & (infos.num_changed <= model.num_sites))
        else:
            assert isinstance(infos, metropolis_module.MetropolisInfo)
            assert infos._fields == ("acceptance_rate", "num_accepted")
            assert infos.acceptance_rate.shape == (3, 7)
            np.testing.assert_allclose(infos.acceptance_rate * 2 * model.num_sites, infos.num_accepted, rtol=1e-6)
            assert np.all((infos.acceptance_rate >= 0) & (infos.acceptance_rate <= 1))
            # the cached log-density is the log-density of the position
            logdensity = model.logdensity_fn(params, 0.8)
            np.testing.assert_allclose(states.logdensity, jax.vmap(logdensity)(states.position), rtol=1e-5, atol=1e-5)


def test_states_are_namedtuples_with_position():
    model = rbm(3, 2)
    params = rbm_params(3, 2)
    pos = model.random_state(jax.random.key(0))
    g = ui.kernels.gibbs.init(pos, model.logdensity_fn(params))
    m = ui.kernels.metropolis.init(pos, model.logdensity_fn(params))
    assert isinstance(g, gibbs_module.GibbsState) and g._fields == ("position",)
    assert isinstance(m, metropolis_module.MetropolisState) and m._fields == ("position", "logdensity")
    assert m.logdensity.shape == ()


def test_sample_driver_shapes_and_thinning(key):
    model = rbm(3, 2)
    params = rbm_params(3, 2)
    algorithm = ui.kernels.metropolis(model, params, scan="random")
    start = model.random_state(key, 4)
    result = ui.sample(key, algorithm, start, 5, num_warmup=3, thin=2, model=model, params=params)
    assert result.states["v"].shape == (4, 5, 3) and result.states["h"].shape == (4, 5, 2)
    assert result.energies.shape == (4, 5)
    assert result.infos.acceptance_rate.shape == (4, 5)
    np.testing.assert_array_equal(result.final_state.position["v"], result.states["v"][:, -1])
    traced = ui.sample(key, algorithm, start, 5, keep_states=False, trace_fn=lambda s, i: s.logdensity)
    assert traced.states is None and traced.infos.shape == (4, 5)
