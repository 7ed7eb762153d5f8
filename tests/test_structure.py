"""Structure detection: smoothness, multilinearity, interaction graph and blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import (
    dense_ising,
    dense_ising_params,
    grid_edges,
    lattice,
    lattice_energy,
    potts,
    potts_params,
    rbm_energy,
    rbm_params,
)

import ugm_infer as ui
from ugm_infer import structure


def edge_set(edges) -> set[tuple[int, int]]:
    return {(int(min(i, j)), int(max(i, j))) for i, j in np.asarray(edges).reshape(-1, 2)}


def assert_valid_blocks(model, true_edges):
    """Blocks partition the sites and no block contains an interacting pair."""
    owner = np.full(model.num_sites, -1)
    for b, block in enumerate(model.blocks):
        for name, idx in block.indices.items():
            g = model.layout.offsets[model.layout.names.index(name)] + np.asarray(idx)
            assert np.all(owner[g] == -1), "a site is in two blocks"
            owner[g] = b
            assert np.array_equal(np.nonzero(block.masks[name].reshape(-1))[0], np.sort(idx))
    assert np.all(owner >= 0), "a site is in no block"
    for i, j in true_edges:
        assert owner[i] != owner[j], f"interacting sites {i} and {j} share a block"


# --------------------------------------------------------------------------------------
# blocks of hand-written energies
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [4, 6])
def test_periodic_lattice_even_is_checkerboard(size):
    model = lattice(size, size)
    model.detect_structure({"J": 0.4, "H": 0.0})
    assert model.multilinear
    assert edge_set(model.interaction_edges(None)) == edge_set(grid_edges(size, size, periodic=True))
    checker = (np.add.outer(np.arange(size), np.arange(size)) % 2).astype(bool)
    masks = sorted(b.masks["s"].tobytes() for b in model.blocks)
    assert masks == sorted([checker.tobytes(), (~checker).tobytes()])


@pytest.mark.parametrize("size", [3, 5])
def test_periodic_lattice_odd_is_valid_three_colouring(size):
    model = lattice(size, size)
    model.detect_structure({"J": 0.4, "H": 0.0})
    true_edges = grid_edges(size, size, periodic=True)
    assert edge_set(model.interaction_edges(None)) == edge_set(true_edges)
    assert len(model.blocks) == 3  # odd cycles need three colours; greedy finds three
    assert_valid_blocks(model, true_edges)


def test_rbm_like_energy_gives_v_and_h():
    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(6), "h": ui.Binary(3)})
    model.detect_structure(rbm_params(6, 3))
    assert model.multilinear
    assert [{n: len(i) for n, i in b.indices.items()} for b in model.blocks] == [{"v": 6}, {"h": 3}]
    assert model.non_interacting_variables() == ["v", "h"]
    assert len(model.interaction_edges(None)) == 18


def test_explicit_blocks_override_detection():
    checker = (np.add.outer(np.arange(4), np.arange(4)) % 2).astype(bool)
    rows = [{"s": np.arange(16).reshape(4, 4) // 4 == r} for r in range(4)]  # valid but not minimal
    model = lattice(4, 4, blocks=rows)
    model.detect_structure({"J": 0.3, "H": 0.1})
    assert len(model.blocks) == 4
    assert [int(b.masks["s"].sum()) for b in model.blocks] == [4, 4, 4, 4]
    # multilinearity is still probed when only blocks are declared
    assert model.multilinear
    # with_blocks returns a copy that overrides detected blocks; the original is unchanged
    detected = lattice(4, 4).detect_structure({"J": 0.3, "H": 0.1})
    other = detected.with_blocks([{"s": checker}, {"s": ~checker}])
    assert len(detected.blocks) == 2 and len(other.blocks) == 2
    single = detected.with_blocks([{"s": np.arange(i, i + 1)} for i in range(16)])
    assert len(single.blocks) == 16 and len(detected.blocks) == 2
    # flat-index and True selectors
    r = ui.EnergyModel(rbm_energy, {"v": ui.Binary(4), "h": ui.Binary(2)}).with_blocks(
        [{"v": np.array([0, 1, 2, 3])}, {"h": True}]
    )
    assert [sorted(b.indices) for b in r.blocks] == [["v"], ["h"]]


@pytest.mark.parametrize(
    "blocks,match",
    [
        ([{"s": True}, {"s": np.array([0])}], "more than one block"),
        ([{"s": np.arange(15)}], "do not cover"),
        ([{"s": np.ones((2, 2), bool)}], "mask has shape"),
        ([{"s": np.array([0, 16])}], "outside"),
        ([{"t": True}], "unknown variable"),
        ([{"s": np.array([0.5])}], "must be True"),
        ([], "non-empty list"),
        ({"s": True}, "non-empty list"),
        (["s"], "must be a dict"),
    ],
)
def test_with_blocks_validation(blocks, match):
    model = lattice(4, 4)
    with pytest.raises(ValueError, match=match):
        model.with_blocks(blocks)
    with pytest.raises(ValueError, match=match):
        lattice(4, 4, blocks=blocks)


def test_edges_found_when_couplings_are_zero():
    """Probing perturbs the parameters, so a coupling that is zero now is still an edge."""
    n = 8
    params = dense_ising_params(n, strong=())
    w = np.array(params["W"])
    w[0, :] = w[:, 0] = 0.0  # site 0 decoupled at these params
    w[3, 4] = w[4, 3] = 0.0
    model = dense_ising(n)
    model.detect_structure({"W": jnp.asarray(w), "h": params["h"]})
    assert len(model.interaction_edges(None)) == n * (n - 1) // 2
    assert len(model.blocks) == n
    # all-zero lattice coupling: still the checkerboard
    zero = lattice(4, 4).detect_structure({"J": 0.0, "H": 0.0})
    assert len(zero.blocks) == 2 and len(zero.interaction_edges(None)) == 32


def test_categorical_energy_uses_finite_differences(monkeypatch):
    """Categorical (one-hot) energies are not smooth in the state: second differences are used."""
    model = potts(3, 3, 3)
    params = potts_params(3, 3, 3)
    report = structure.analyze_energy(jax.random.key(0), model.energy_fn, params, model.variables)
    assert report.smooth is False and report.multilinear is False
    assert edge_set(report.edges) == edge_set(grid_edges(3, 3))

    def forbidden(*args, **kwargs):
        raise AssertionError("Hessian probe used for a categorical energy")

    monkeypatch.setattr(structure, "_hessian_probe", forbidden)
    fresh = potts(3, 3, 3).detect_structure(params)
    assert len(fresh.blocks) == 2 and fresh.multilinear is False


def test_potts_many_states_equality_coupling():
    """``J [x_i == x_j]`` with 21 states: random value pairs rarely overlap, constant probes do."""

    def energy(params, state):
        x = state["x"]
        return -params["J"] * jnp.sum(x[:-1] == x[1:]) - jnp.sum(params["h"][jnp.arange(x.shape[0]), x])

    variables = {"x": ui.Categorical(12, 21)}
    params = {"J": jnp.float32(0.7), "h": jnp.zeros((12, 21), jnp.float32)}
    report = structure.analyze_energy(jax.random.key(3), energy, params, variables)
    assert edge_set(report.edges) == {(i, i + 1) for i in range(11)}


# --------------------------------------------------------------------------------------
# smoothness (jaxpr walk) and multilinearity
# --------------------------------------------------------------------------------------
def _binary(n=6):
    return {"x": ui.Binary(n)}


SMOOTH_CASES = [
    ("quadratic", lambda p, s: s["x"] @ p["W"] @ s["x"], True),
    ("roll", lambda p, s: jnp.sum(s["x"] * jnp.roll(s["x"], 1)), True),
    ("exp-log-tanh", lambda p, s: jnp.sum(jnp.tanh(s["x"]) + jnp.log1p(jnp.exp(s["x"] @ p["W"]))), True),
    ("scan", lambda p, s: jax.lax.scan(lambda c, xi: (c * 0.5 + xi, None), 0.0, s["x"])[0], True),
    ("fori", lambda p, s: jax.lax.fori_loop(0, 6, lambda i, c: c + s["x"][i] * s["x"][(i + 1) % 6], 0.0), True),
    ("where-constant-mask", lambda p, s: jnp.sum(jnp.where(jnp.arange(6) > 2, s["x"], 0.0)), True),
    ("cast-int", lambda p, s: jnp.sum(s["x"].astype(jnp.int32)).astype(jnp.float32), False),
    ("where-state", lambda p, s: jnp.sum(jnp.where(s["x"] > 0.5, 1.0, 0.0)), False),
    ("rare-all", lambda p, s: jnp.sum(s["x"]) + 3.0 * jnp.all(s["x"] == 1), False),
    ("abs", lambda p, s: jnp.sum(jnp.abs(s["x"] - 0.5)), False),
    ("max", lambda p, s: jnp.max(s["x"] @ p["W"]), False),
    ("index-by-state", lambda p, s: jnp.sum(p["W"][s["x"].astype(jnp.int32), 0]), False),
    ("stop-gradient", lambda p, s: jnp.sum(jax.lax.stop_gradient(s["x"]) * s["x"]), False),
    ("sign", lambda p, s: jnp.sum(jnp.sign(s["x"] - 0.5) * s["x"]), False),
    ("clip", lambda p, s: jnp.sum(jnp.clip(s["x"] @ p["W"], 0.0, 1.0)), False),
    ("logsumexp", lambda p, s: jax.nn.logsumexp(s["x"] @ p["W"]), False),  # conservative: uses max
]


@pytest.mark.parametrize("name,fn,smooth", SMOOTH_CASES, ids=[c[0] for c in SMOOTH_CASES])
def test_smoothness_walk(name, fn, smooth):
    params = {"W": jnp.ones((6, 6), jnp.float32)}
    assert structure.is_smooth_in_state(fn, params, _binary()) is smooth


def _ml(fn, params, variables=None):
    return structure.check_multilinear(jax.random.key(0), fn, params, variables or _binary())


def test_multilinear_detection():
    w = jnp.asarray(np.triu(np.random.default_rng(0).normal(size=(6, 6)), 1), jnp.float32)
    params = {"W": w, "h": jnp.ones(6, jnp.float32)}
    bm = lambda p, s: -s["x"] @ p["W"] @ s["x"] - p["h"] @ s["x"]
    assert _ml(bm, params)
    # a diagonal makes x_i^2 terms: not multilinear as written (at these params)
    assert not _ml(bm, {"W": w + jnp.eye(6), "h": params["h"]})
    # spins: zero-diagonal dense Ising is multilinear, even though perturbed params get a diagonal
    spins = {"s": ui.Spin(12)}
    assert _ml(lambda p, s: -0.5 * s["s"] @ p["W"] @ s["s"] - p["h"] @ s["s"], dense_ising_params(12), spins)
    # (x_i + x_j)^2 and a where-gated term
    assert not _ml(lambda p, s: jnp.sum((s["x"][:-1] + s["x"][1:]) ** 2), params)
    assert not _ml(lambda p, s: bm(p, s) + jnp.where(s["x"][0] > 0.5, s["x"][1], 0.0), params)
    # non-affine only in a rare configuration: x_0^2 * prod_{j>0} x_j (flip differences at random
    # binary states almost never see it, the Hessian diagonal at an interior point does)
    assert not _ml(lambda p, s: bm(p, s) + s["x"][0] ** 2 * jnp.prod(s["x"][1:]), params)
    # non-smooth and rare: a bonus for the all-ones state only
    assert not _ml(lambda p, s: bm(p, s) + 5.0 * jnp.all(s["x"] == 1), params)
    # a cubic term whose coefficient is zero at the given params (seen at the perturbed ones)
    cubic = lambda p, s: bm(p, s) + p["c"] * s["x"][0] ** 3
    assert not _ml(cubic, {**params, "c": jnp.float32(0.0)})
    # categorical variables are never multilinear
    assert not _ml(lambda p, s: jnp.sum(s["x"]), {}, {"x": ui.Categorical(3, 3)})


def test_declared_multilinear_is_kept_and_false_is_respected():
    params = dense_ising_params(6, strong=())
    declared = dense_ising(6, multilinear=False).detect_structure(params)
    assert declared.multilinear is False and len(declared.blocks) == 6
    with pytest.raises(ValueError, match="multilinear=True is only supported"):
        ui.EnergyModel(lambda p, s: jnp.sum(s["x"]), {"x": ui.Categorical(3, 3)}, multilinear=True)


def test_detection_is_cached_and_needs_params():
    model = lattice(4, 4)
    with pytest.raises(ValueError, match="detect_structure"):
        _ = model.blocks
    with pytest.raises(ValueError, match="detect_structure"):
        _ = model.multilinear
    with pytest.raises(ValueError, match="params="):
        ui.kernels.gibbs.build_kernel(model, "block")
    assert model.detect_structure({"J": 0.3, "H": 0.0}) is model
    blocks = model.blocks
    assert model.detect_structure({"J": 1.0, "H": 2.0}).blocks is blocks


def test_nonsmooth_detection_refused_for_huge_models():
    def energy(params, state):
        return jnp.sum(jnp.where(state["x"] > 0.5, 1.0, 0.0))

    model = ui.EnergyModel(energy, {"x": ui.Binary(3000)})
    with pytest.raises(ValueError, match="blocks="):
        model.detect_structure({})


def test_nonmultilinear_chain_edges():
    def energy(p, s):
        x = s["x"]
        return jnp.sum((x[:-1] + x[1:]) ** 2) + jnp.where(x[3] > 0.5, x[7], 0.0)

    model = ui.EnergyModel(energy, {"x": ui.Binary(10)}).detect_structure({})
    assert model.multilinear is False
    expected = {(i, i + 1) for i in range(9)} | {(3, 7)}
    assert edge_set(model.interaction_edges(None)) == expected
    assert_valid_blocks(model, expected)


def test_probe_is_compiled_once_per_model():
    """Perturbed parameters reuse the compilation of the given ones (non-weak dtypes)."""
    traces = []
    model_fn = lattice_energy

    def energy(p, s):
        traces.append(1)
        return model_fn(p, s)

    structure.analyze_energy(jax.random.key(0), energy, {"J": 0.3, "H": 0.1}, {"s": ui.Spin((4, 4))})
    # one trace for the jaxpr walk and four inside the single compilation of the probe
    # (used for both parameter sets); a second compilation would add four more
    assert len(traces) <= 5, len(traces)
