"""Built-in models (ugm_infer.models): energies, validation, declared structure, free energies.

Energies are compared with independent numpy loops; declared blocks with the probed
interaction graph (:func:`ugm_infer.structure.probe_interactions`); free energies with
brute-force log-sum-exp over the summed-out layer; samplers on tiny models with exact
enumeration (chi-square on iid final states of independent chains, see stat_utils).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import all_states, brute_force, run_chains
from scipy.special import logsumexp
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer import models as M
from ugm_infer.structure import check_multilinear, probe_interactions


def _rng(seed):
    return np.random.default_rng(seed)


def _sym(rng, n, scale=1.0):
    a = np.triu(scale * rng.normal(size=(n, n)), 1)
    return a + a.T


# --------------------------------------------------------------------------------------
# hand-computed energies
# --------------------------------------------------------------------------------------
def np_pair_energy(s, edges, w):
    return -sum(w_e * s[i] * s[j] for (i, j), w_e in zip(edges, w))


@pytest.mark.parametrize("domain", ["spin", "binary"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int8])
def test_ising_energies_match_loops(domain, dtype):
    rng = _rng(0)
    n = 5
    W, h = _sym(rng, n), rng.normal(size=n)
    values = [-1, 1] if domain == "spin" else [0, 1]
    s = rng.choice(values, size=n)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    expected = np_pair_energy(s, pairs, [W[i, j] for i, j in pairs]) - h @ s
    dense = M.ising(n, domain=domain, dtype=dtype)
    params = {"W": jnp.asarray(W, jnp.float32), "h": jnp.asarray(h, jnp.float32)}
    state = {"s": jnp.asarray(s, dtype)}
    np.testing.assert_allclose(dense.energy(params, state), expected, rtol=1e-5)

    edges = np.array([[0, 1], [3, 1], [2, 4], [0, 4]])
    w = rng.normal(size=len(edges))
    sparse = M.ising(n, edges=edges, domain=domain, dtype=dtype)
    p2 = {"w": jnp.asarray(w, jnp.float32), "h": jnp.asarray(h, jnp.float32)}
    np.testing.assert_allclose(sparse.energy(p2, state), np_pair_energy(s, edges, w) - h @ s, rtol=1e-5)
    np.testing.assert_allclose(sparse.dense_couplings(p2), sparse.dense_couplings(p2).T)
    np.testing.assert_allclose(
        dense.energy({"W": sparse.dense_couplings(p2), "h": p2["h"]}, state), sparse.energy(p2, state), rtol=1e-5
    )


def test_boltzmann_machine_is_binary_ising():
    model = M.boltzmann_machine(4)
    assert isinstance(model.variables["s"], ui.Binary)
    assert model.multilinear and len(model.blocks) == 4
    with pytest.raises(ValueError, match="num_units"):
        M.boltzmann_machine(0)


def np_lattice_energy(s, J, h, periodic):
    H, W = s.shape
    e = 0.0
    for r, c in itertools.product(range(H), range(W)):
        if periodic or c + 1 < W:
            if W >= (3 if periodic else 2):
                e -= J * s[r, c] * s[r, (c + 1) % W]
        if periodic or r + 1 < H:
            if H >= (3 if periodic else 2):
                e -= J * s[r, c] * s[(r + 1) % H, c]
    return e - h * s.sum()


@pytest.mark.parametrize("shape", [(3, 4), (4, 4), (5, 3), (1, 5), (4, 1), (1, 1)])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("domain", ["spin", "binary"])
def test_lattice_energy_matches_loops_and_edge_list_ising(shape, periodic, domain):
    H, W = shape
    rng = _rng(1)
    J, h = 0.7, -0.3
    values = [-1, 1] if domain == "spin" else [0, 1]
    s = rng.choice(values, size=(6, H, W))
    lat = M.lattice_ising(H, W, periodic=periodic, domain=domain, dtype=jnp.int8)
    params = lat.init_params(J=J, h=h)
    got = lat.energies(params, {"s": jnp.asarray(s, jnp.int8)})
    expected = [np_lattice_energy(x, J, h, periodic) for x in s]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    edges = M.lattice_edges(H, W, periodic)
    flat = M.ising(H * W, edges=edges, domain=domain)
    p_flat = {"w": jnp.full(len(edges), J, jnp.float32), "h": jnp.full(H * W, h, jnp.float32)}
    np.testing.assert_allclose(
        flat.energies(p_flat, {"s": jnp.asarray(s.reshape(6, -1), jnp.float32)}), got, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("periodic", [True, False])
def test_lattice_custom_derivative_equals_autodiff(periodic):
    """The hand-written jvp of the pair sum equals plain autodiff (gradient and Hessian-vector products)."""
    H, W = 5, 4
    lat = M.lattice_ising(H, W, periodic=periodic)
    params = lat.init_params(J=0.8, h=0.2)
    edges = M.lattice_edges(H, W, periodic)

    def plain(x):
        flat = x.reshape(-1)
        return -0.8 * jnp.sum(flat[edges[:, 0]] * flat[edges[:, 1]]) - 0.2 * jnp.sum(x)

    x = jax.random.uniform(jax.random.key(0), (H, W), minval=-1, maxval=1)
    v = jax.random.normal(jax.random.key(1), (H, W))
    energy = lambda y: lat.energy(params, {"s": y})
    np.testing.assert_allclose(jax.grad(energy)(x), jax.grad(plain)(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(-jax.grad(energy)(x), lat.local_fields(params, x), rtol=1e-5, atol=1e-6)
    hvp = lambda f: jax.jvp(jax.grad(f), (x,), (v,))[1]
    np.testing.assert_allclose(hvp(energy), hvp(plain), rtol=1e-5, atol=1e-6)
    # gradients with respect to the parameters (what learners differentiate)
    gp = jax.grad(lambda p: lat.energy(p, {"s": jnp.sign(x)}))(params)
    sx = np.sign(np.asarray(x)).reshape(-1)
    np.testing.assert_allclose(gp["J"], -np.sum(sx[edges[:, 0]] * sx[edges[:, 1]]), rtol=1e-5)
    np.testing.assert_allclose(gp["h"], -sx.sum(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int8])
def test_potts_energies_match_loops(dtype):
    rng = _rng(2)
    n, q = 4, 3
    J = rng.normal(size=(n, n, q, q))
    J = np.triu(np.ones((n, n)), 1)[:, :, None, None] * J
    J = J + J.transpose(1, 0, 3, 2)
    h = rng.normal(size=(n, q))
    x = np.array([2, 0, 1, 2])
    expected = -sum(J[i, j, x[i], x[j]] for i in range(n) for j in range(i + 1, n)) - sum(h[i, x[i]] for i in range(n))
    dense = M.potts(n, q, dtype=dtype)
    params = {"J": jnp.asarray(J, jnp.float32), "h": jnp.asarray(h, jnp.float32)}
    np.testing.assert_allclose(dense.energy(params, {"x": jnp.asarray(x, dtype)}), expected, rtol=1e-5)

    edges = np.array([[0, 1], [2, 1], [3, 0]])
    Je = rng.normal(size=(3, q, q))
    sparse = M.potts(n, q, edges=edges, dtype=dtype)
    exp2 = -sum(Je[e, x[i], x[j]] for e, (i, j) in enumerate(edges)) - sum(h[i, x[i]] for i in range(n))
    p2 = {"J": jnp.asarray(Je, jnp.float32), "h": jnp.asarray(h, jnp.float32)}
    np.testing.assert_allclose(sparse.energy(p2, {"x": jnp.asarray(x, dtype)}), exp2, rtol=1e-5)
    # gradients (what learners differentiate): -1 at each bond's and each site's values, 0 elsewhere
    grads = jax.grad(lambda p: sparse.energy(p, {"x": jnp.asarray(x, dtype)}))(p2)
    want_J, want_h = np.zeros((3, q, q)), np.zeros((n, q))
    for e, (i, j) in enumerate(edges):
        want_J[e, x[i], x[j]] = -1.0
    want_h[np.arange(n), x] = -1.0
    np.testing.assert_array_equal(grads["J"], want_J)
    np.testing.assert_array_equal(grads["h"], want_h)


def test_lattice_potts_layout():
    model = M.lattice_potts(3, 4, 3, periodic=False)
    assert model.variables["x"].shape == (12,)
    assert model.edges.tolist() == M.lattice_edges(3, 4, periodic=False).tolist()
    assert len(model.blocks) == 2
    odd = M.lattice_potts(3, 3, 2, periodic=True)
    assert len(odd.blocks) == 3


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int8])
def test_rbm_and_semi_rbm_energies_match_loops(dtype):
    rng = _rng(3)
    nv, nh = 4, 3
    W, b, c, L = rng.normal(size=(nv, nh)), rng.normal(size=nv), rng.normal(size=nh), _sym(rng, nv)
    v, h = np.array([1, 0, 1, 1]), np.array([0, 1, 1])
    e_rbm = -sum(v[i] * W[i, j] * h[j] for i in range(nv) for j in range(nh)) - b @ v - c @ h
    e_lat = -sum(L[i, j] * v[i] * v[j] for i in range(nv) for j in range(i + 1, nv))
    f32 = lambda a: jnp.asarray(a, jnp.float32)
    state = {"v": jnp.asarray(v, dtype), "h": jnp.asarray(h, dtype)}
    params = {"W": f32(W), "b": f32(b), "c": f32(c)}
    np.testing.assert_allclose(M.rbm(nv, nh, dtype=dtype).energy(params, state), e_rbm, rtol=1e-5)
    semi = M.semi_rbm(nv, nh, dtype=dtype)
    np.testing.assert_allclose(semi.energy({**params, "L": f32(L)}, state), e_rbm + e_lat, rtol=1e-5)
    edges = np.array([[0, 1], [1, 3]])
    semi_e = M.semi_rbm(nv, nh, edges=edges, dtype=dtype)
    le = rng.normal(size=2)
    np.testing.assert_allclose(
        semi_e.energy({**params, "L": f32(le)}, state), e_rbm - le[0] * v[0] * v[1] - le[1] * v[1] * v[3], rtol=1e-5
    )


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------
def test_param_validation_names_the_param():
    n = 4
    model = M.ising(n)
    good = model.init_params(jax.random.key(0))
    model.validate_params(good)
    W = np.array(good["W"])
    W[0, 1] += 1.0
    with pytest.raises(ValueError, match=r"params\['W'\] must be symmetric"):
        model.validate_params({**good, "W": jnp.asarray(W)})
    W = np.array(good["W"])
    W[2, 2] = 0.5
    with pytest.raises(ValueError, match=r"params\['W'\] must have a zero diagonal"):
        model.validate_params({**good, "W": jnp.asarray(W)})
    with pytest.raises(ValueError, match=r"params\['W'\] must have shape .*\(4, 4\), got \(3, 3\)"):
        model.validate_params({**good, "W": jnp.zeros((3, 3))})
    with pytest.raises(ValueError, match=r"params\['h'\] must be a float array"):
        model.validate_params({**good, "h": jnp.zeros(n, jnp.int32)})
    with pytest.raises(ValueError, match="missing"):
        model.validate_params({"W": good["W"]})
    with pytest.raises(ValueError, match="unexpected key"):
        model.validate_params({**good, "b": good["h"]})
    with pytest.raises(ValueError, match="must be a dict"):
        model.validate_params([good["W"], good["h"]])
    # kernels validate when built with concrete params
    with pytest.raises(ValueError, match=r"params\['W'\]"):
        ui.kernels.gibbs(model, {**good, "W": jnp.zeros((3, 3))})

    sparse = M.ising(n, edges=[[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"params\['w'\] must have shape .*\(2,\), got \(3,\)"):
        sparse.validate_params({"w": jnp.zeros(3), "h": jnp.zeros(n)})

    potts = M.potts(3, 2)
    pp = potts.init_params(jax.random.key(0))
    J = np.array(pp["J"])
    J[0, 1, 0, 1] += 1.0
    with pytest.raises(ValueError, match=r"params\['J'\] must be symmetric"):
        potts.validate_params({**pp, "J": jnp.asarray(J)})
    J = np.array(pp["J"])
    J[1, 1, 0, 0] = 1.0
    with pytest.raises(ValueError, match=r"params\['J'\] must have a zero diagonal"):
        potts.validate_params({**pp, "J": jnp.asarray(J)})

    rbm = M.rbm(5, 3)
    rp = rbm.init_params(jax.random.key(0))
    with pytest.raises(ValueError, match=r"params\['W'\] must have shape \(num_visible, num_hidden\) = \(5, 3\)"):
        rbm.validate_params({**rp, "W": rp["W"].T})
    with pytest.raises(ValueError, match=r"params\['c'\]"):
        rbm.validate_params({**rp, "c": jnp.zeros(5)})
    semi = M.semi_rbm(5, 3)
    sp = semi.init_params(jax.random.key(0), lateral_scale=0.1)
    semi.validate_params(sp)
    with pytest.raises(ValueError, match=r"params\['L'\] must be symmetric"):
        semi.validate_params({**sp, "L": sp["L"] + jnp.triu(jnp.ones((5, 5)), 1)})

    lat = M.lattice_ising(4, 4)
    with pytest.raises(ValueError, match=r"params\['J'\] must have shape"):
        lat.validate_params({"J": jnp.ones(3), "h": 0.0})
    lat.validate_params({"J": 0.5, "h": 0.0})  # python floats are fine


def test_validation_skips_values_under_tracing():
    """Shape checks work on tracers; value checks (symmetry) are skipped instead of crashing."""
    model = M.ising(3)
    params = model.init_params(jax.random.key(0))

    @jax.jit
    def f(p):
        model._check_params(p)
        return model.energy(p, {"s": jnp.ones(3)})

    f(params)


@pytest.mark.parametrize(
    "edges, match",
    [
        ([[0, 0]], "self-loops"),
        ([[0, 1], [1, 0]], "more than once"),
        ([[0, 5]], "outside"),
        ([0, 1, 2], r"shape \(m, 2\)"),
        ([[0.0, 1.0]], "integer"),
    ],
)
def test_bad_edges(edges, match):
    with pytest.raises((ValueError, TypeError), match=match):
        M.ising(4, edges=edges)
    with pytest.raises((ValueError, TypeError), match=match):
        M.potts(4, 3, edges=edges)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="domain"):
        M.ising(3, domain="ternary")
    with pytest.raises(TypeError, match="num_spins"):
        M.ising(3.0)
    with pytest.raises(ValueError, match="num_states"):
        M.potts(3, 1)
    with pytest.raises(ValueError, match="width"):
        M.lattice_ising(4, 2)
    with pytest.raises(ValueError, match="height"):
        M.lattice_edges(2, 5, periodic=True)
    M.lattice_ising(4, 2, periodic=False)
    with pytest.raises(TypeError, match="periodic"):
        M.lattice_ising(4, 4, periodic="yes")
    with pytest.raises(ValueError, match="num_hidden"):
        M.rbm(4, 0)
    with pytest.raises(TypeError, match="rng_key"):
        M.rbm(4, 2).init_params(None)
    with pytest.raises(ValueError, match="scale"):
        M.ising(3).init_params(jax.random.key(0), scale=-1.0)


# --------------------------------------------------------------------------------------
# declared structure vs probed structure
# --------------------------------------------------------------------------------------
def _cases():
    rng = _rng(4)
    random_edges = np.array([(i, j) for i in range(7) for j in range(i + 1, 7) if rng.random() < 0.4])
    return {
        "ising_dense": (M.ising(5), lambda m: m.init_params(jax.random.key(1), field_scale=0.5)),
        "ising_edges": (M.ising(7, edges=random_edges), lambda m: m.init_params(jax.random.key(1), field_scale=0.5)),
        "bm_edges": (M.boltzmann_machine(7, edges=random_edges), lambda m: m.init_params(jax.random.key(1))),
        "lattice_even": (M.lattice_ising(4, 6), lambda m: m.init_params(J=0.5, h=0.1)),
        "lattice_odd": (M.lattice_ising(5, 3), lambda m: m.init_params(J=0.5, h=0.1)),
        "lattice_open_odd": (M.lattice_ising(3, 5, periodic=False, domain="binary"), lambda m: m.init_params(J=0.5)),
        "potts_dense": (M.potts(4, 3), lambda m: m.init_params(jax.random.key(1), field_scale=0.5)),
        "potts_edges": (
            M.potts(6, 3, edges=random_edges[random_edges.max(1) < 6]),
            lambda m: m.init_params(jax.random.key(1)),
        ),
        "lattice_potts": (M.lattice_potts(3, 3, 3, periodic=True), lambda m: m.init_params(jax.random.key(1))),
        "rbm": (M.rbm(6, 4), lambda m: m.init_params(jax.random.key(1), scale=1.0)),
        "semi_rbm": (M.semi_rbm(4, 3), lambda m: m.init_params(jax.random.key(1), scale=1.0, lateral_scale=1.0)),
        "semi_rbm_edges": (
            M.semi_rbm(5, 3, edges=[[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]]),
            lambda m: m.init_params(jax.random.key(1), scale=1.0, lateral_scale=1.0),
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_blocks_cover_sites_and_are_conditionally_independent(name):
    model, make_params = CASES[name]
    params = make_params(model)
    model.validate_params(params)
    assert model.has_structure  # declared: no probing needed
    # every site in exactly one block
    seen = np.zeros(model.num_sites, int)
    for block in model.blocks:
        for n, idx in block.indices.items():
            seen[model.layout.offsets[model.layout.names.index(n)] + idx] += 1
    assert np.all(seen == 1)
    # no probed interaction inside a block
    edges = probe_interactions(jax.random.key(7), model.energy_fn, params, model.variables, model.multilinear)
    assert len(edges) > 0
    colour = np.zeros(model.num_sites, int)
    for c, block in enumerate(model.blocks):
        for n, idx in block.indices.items():
            colour[model.layout.offsets[model.layout.names.index(n)] + idx] = c
    inside = edges[colour[edges[:, 0]] == colour[edges[:, 1]]]
    assert inside.size == 0, f"{name}: interacting sites share a block: {inside[:5].tolist()}"
    # the declared multilinearity is true
    assert check_multilinear(jax.random.key(3), model.energy_fn, params, model.variables) == model.multilinear


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 7), (7, 4), (1, 5), (9, 9)])
def test_odd_periodic_lattice_colouring_is_valid_with_three_colours(shape):
    H, W = shape
    colors = M.lattice_colors(H, W, periodic=True).reshape(-1)
    edges = M.lattice_edges(H, W, periodic=True)
    assert np.all(colors[edges[:, 0]] != colors[edges[:, 1]])
    assert colors.max() + 1 == 3
    model = M.lattice_ising(H, W)
    assert len(model.blocks) == 3


@pytest.mark.parametrize("shape", [(4, 4), (4, 6), (1, 4), (6, 1)])
def test_even_periodic_and_open_lattices_use_the_checkerboard(shape):
    H, W = shape
    for periodic in (True, False):
        blocks = M.lattice_ising(H, W, periodic=periodic).blocks
        assert len(blocks) == 2
        board = M.checkerboard_blocks(H, W)
        assert np.array_equal(blocks[0].masks["s"], board[0]["s"])
        assert np.array_equal(blocks[1].masks["s"], board[1]["s"])
    for H2, W2 in [(3, 3), (5, 4)]:
        assert len(M.lattice_ising(H2, W2, periodic=False).blocks) == 2


def test_lattice_edges_counts_and_order():
    e = M.lattice_edges(4, 5, periodic=True)
    assert e.shape == (40, 2) and e.dtype == np.int32
    assert len({tuple(sorted(p)) for p in e.tolist()}) == 40
    assert M.lattice_edges(4, 5, periodic=False).shape == (4 * 4 + 3 * 5, 2)
    assert M.lattice_edges(1, 1).shape == (0, 2)


# --------------------------------------------------------------------------------------
# free energies
# --------------------------------------------------------------------------------------
def _all_binary(n):
    return np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.float32)


@pytest.mark.parametrize("kind", ["rbm", "semi_rbm", "semi_rbm_edges"])
def test_free_energies_equal_brute_force_logsumexp(kind):
    nv, nh = 4, 3
    if kind == "rbm":
        model = M.rbm(nv, nh)
        params = model.init_params(jax.random.key(0), scale=1.0)
        params = {**params, "b": jnp.asarray(_rng(5).normal(size=nv), jnp.float32), "c": jnp.linspace(-1, 1, nh)}
    else:
        edges = None if kind == "semi_rbm" else [[0, 1], [2, 3], [1, 2]]
        model = M.semi_rbm(nv, nh, edges=edges)
        params = model.init_params(jax.random.key(0), scale=1.0, lateral_scale=0.8)
    V, Hs = _all_binary(nv), _all_binary(nh)
    energy = jax.vmap(jax.vmap(lambda v, h: model.energy(params, {"v": v, "h": h}), (None, 0)), (0, None))
    E = np.asarray(energy(jnp.asarray(V), jnp.asarray(Hs)), np.float64)  # (2^nv, 2^nh)
    F_v = -logsumexp(-E, axis=1)
    got = np.asarray(jax.vmap(lambda v: model.free_energy_fns["h"](params, {"v": v}))(jnp.asarray(V)))
    np.testing.assert_allclose(got, F_v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.free_energy(params, jnp.asarray(V)), F_v, rtol=1e-5, atol=1e-5)  # batched
    if kind == "rbm":
        F_h = -logsumexp(-E, axis=0)
        got_h = np.asarray(jax.vmap(lambda h: model.free_energy_fns["v"](params, {"h": h}))(jnp.asarray(Hs)))
        np.testing.assert_allclose(got_h, F_h, rtol=1e-5, atol=1e-5)
        # conditionals: p(h_j=1|v) and p(v_i=1|h) from the joint table
        P = np.exp(-E - logsumexp(-E))
        p_h_given_v = (P @ Hs) / P.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(model.hidden_probs(params, jnp.asarray(V)), p_h_given_v, rtol=1e-4, atol=1e-6)
        p_v_given_h = (P.T @ V) / P.sum(axis=0)[:, None]
        np.testing.assert_allclose(model.visible_probs(params, jnp.asarray(Hs)), p_v_given_h, rtol=1e-4, atol=1e-6)
    else:
        assert set(model.free_energy_fns) == {"h"}
        with pytest.raises(NotImplementedError):
            model.visible_probs(params, jnp.zeros(nh))


def test_softplus_is_jax_softplus_bit_for_bit_with_the_sigmoid_derivative():
    from ugm_infer.models._common import softplus

    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 20.0, -20.0, 88.0, -88.0, 1e4, -1e4]
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
        x = jnp.concatenate([jnp.asarray(special, dtype), 12 * jax.random.normal(jax.random.key(0), (5000,), dtype)])
        got, want = np.asarray(softplus(x), np.float64), np.asarray(jax.nn.softplus(x), np.float64)
        assert softplus(x).dtype == dtype
        np.testing.assert_array_equal(got, want)  # NaN where NaN, same bits elsewhere
    x = jnp.linspace(-30.0, 30.0, 601)
    grad = jax.vmap(jax.grad(softplus))(x)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(jax.nn.sigmoid(x)))
    np.testing.assert_allclose(grad, jax.vmap(jax.grad(jax.nn.softplus))(x), rtol=2e-6, atol=1e-30)
    # the second derivative (a Hessian-vector product) is sigmoid's own derivative
    np.testing.assert_array_equal(jax.vmap(jax.grad(jax.grad(softplus)))(x), jax.vmap(jax.grad(jax.nn.sigmoid))(x))


def test_rbm_free_energy_gradient_is_the_brute_force_expectation():
    """dF/dW = -E[v h^T | v] etc., from enumeration over the hidden layer."""
    nv, nh = 4, 3
    model = M.rbm(nv, nh)
    params = model.init_params(jax.random.key(2), scale=1.5)
    params = {**params, "c": jnp.linspace(-1.0, 1.0, nh)}
    v = jnp.asarray([1.0, 0.0, 1.0, 1.0])
    Hs = _all_binary(nh)
    E = np.asarray([model.energy(params, {"v": v, "h": jnp.asarray(h)}) for h in Hs], np.float64)
    p = np.exp(-E - logsumexp(-E))
    mean_h = p @ Hs
    g = jax.grad(lambda prm: model.free_energy(prm, v))(params)
    np.testing.assert_allclose(g["W"], -np.outer(np.asarray(v), mean_h), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["c"], -mean_h, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["b"], -np.asarray(v), rtol=1e-6)


# --------------------------------------------------------------------------------------
# init_params
# --------------------------------------------------------------------------------------
def test_init_params_shapes_and_dtypes():
    key = jax.random.key(0)
    expected = {
        "ising": (M.ising(6).init_params(key), {"W": (6, 6), "h": (6,)}),
        "ising_edges": (M.ising(4, edges=[[0, 1], [1, 2]]).init_params(key), {"w": (2,), "h": (4,)}),
        "lattice": (M.lattice_ising(3, 4).init_params(), {"J": (), "h": ()}),
        "potts": (M.potts(3, 4).init_params(key), {"J": (3, 3, 4, 4), "h": (3, 4)}),
        "potts_edges": (M.potts(3, 4, edges=[[0, 2]]).init_params(key), {"J": (1, 4, 4), "h": (3, 4)}),
        "rbm": (M.rbm(7, 2).init_params(key), {"W": (7, 2), "b": (7,), "c": (2,)}),
        "semi": (M.semi_rbm(7, 2).init_params(key), {"W": (7, 2), "b": (7,), "c": (2,), "L": (7, 7)}),
    }
    for name, (params, shapes) in expected.items():
        assert set(params) == set(shapes), name
        for k, shape in shapes.items():
            assert params[k].shape == shape, (name, k)
            assert params[k].dtype == jnp.float32, (name, k)
    ising = M.ising(50).init_params(key, scale=2.0, field_scale=0.5)
    W = np.asarray(ising["W"])
    np.testing.assert_array_equal(W, W.T)
    assert np.all(np.diag(W) == 0)
    # couplings N(0, scale^2 / (n - 1)): the local fields' coupling part has sd ~ scale
    assert 0.8 < W[np.triu_indices(50, 1)].std() * np.sqrt(49) / 2.0 < 1.2
    assert M.lattice_ising(3, 3).init_params()["J"] == pytest.approx(0.44)
    rbm = M.rbm(30, 20).init_params(key)
    assert 0.007 < float(jnp.std(rbm["W"])) < 0.013
    assert not np.any(np.asarray(rbm["b"])) and not np.any(np.asarray(rbm["c"]))


def test_rbm_visible_bias_from_data():
    rng = _rng(6)
    data = (rng.random((200, 5)) < np.array([0.0, 0.1, 0.5, 0.9, 1.0])).astype(np.float32)
    params = M.rbm(5, 3).init_params(jax.random.key(0), data=data)
    p = (data.sum(0) + 1.0) / (200 + 2.0)
    np.testing.assert_allclose(params["b"], np.log(p / (1 - p)), rtol=1e-5)
    assert params["b"].dtype == jnp.float32 and np.all(np.isfinite(params["b"]))
    # with zero weights the model's visible marginals are the smoothed data marginals
    zero = {**params, "W": jnp.zeros_like(params["W"])}
    np.testing.assert_allclose(M.rbm(5, 3).visible_probs(zero, jnp.zeros(3)), p, rtol=1e-5)
    with pytest.raises(ValueError, match=r"`data` must have shape \(N, num_visible\) = \(N, 5\)"):
        M.rbm(5, 3).init_params(jax.random.key(0), data=data[:, :4])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        M.rbm(5, 3).init_params(jax.random.key(0), data=2 * data)
    with pytest.raises(ValueError, match="pseudo_count"):
        M.rbm(5, 3).init_params(jax.random.key(0), data=data, pseudo_count=0.0)
    semi = M.semi_rbm(5, 3).init_params(jax.random.key(0), data=data)
    np.testing.assert_allclose(semi["b"], params["b"])
    assert not np.any(np.asarray(semi["L"]))


# --------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------
# the other cases are sampled (and checked against enumeration) in the tests below
SMOKE = ["ising_dense", "bm_edges", "lattice_open_odd", "potts_dense", "lattice_potts", "rbm", "semi_rbm_edges"]


def _numpy_states(model, num_chains, seed=0):
    """Random states built on the host (no compilation), in the domains' dtypes."""
    rng = _rng(seed)
    return {
        n: np.asarray(d.values[rng.integers(0, d.num_states, (num_chains,) + d.shape)], dtype=d.dtype)
        for n, d in model.variables.items()
    }


@pytest.mark.parametrize("name", SMOKE)
def test_gibbs_runs_under_jit_and_vmap(name):
    model, make_params = CASES[name]
    params = make_params(model)
    gibbs = ui.kernels.gibbs(model, params)
    chains = 3
    state = jax.vmap(gibbs.init)(_numpy_states(model, chains))
    state, info = jax.jit(jax.vmap(gibbs.step))(jax.random.split(jax.random.key(1), chains), state)
    model.validate_state(state.position, batch_ndim=1)
    for n, d in model.variables.items():
        assert state.position[n].dtype == d.dtype
    assert info.num_changed.shape == (chains,)


def _exact_check(model, params, num_chains, num_steps, seed, wrong_params=None):
    kernel = ui.kernels.gibbs.build_kernel(model, "block")
    logdensity = model.logdensity_fn(params)
    pos = model.random_state(jax.random.key(seed), num_chains)
    final = run_chains(kernel, ui.kernels.gibbs.init, logdensity, pos, jax.random.key(seed + 1), num_steps)
    probs = brute_force(model, params)
    idx = state_index(final, model)
    assert_distribution_matches(idx, probs, label=model.name)
    if wrong_params is not None:
        assert_distribution_differs(idx, brute_force(model, wrong_params), label=model.name)


def test_gibbs_on_odd_periodic_lattice_matches_enumeration():
    """3 x 3 torus: three colour classes with masks, int8 states, spins with a field."""
    model = M.lattice_ising(3, 3, dtype=jnp.int8)
    params = model.init_params(J=0.35, h=0.15)
    _exact_check(model, params, 6000, 20, seed=10, wrong_params=model.init_params(J=0.25, h=0.15))


def test_gibbs_on_semi_rbm_and_potts_match_enumeration():
    semi = M.semi_rbm(3, 2)
    params = semi.init_params(jax.random.key(3), scale=1.0, lateral_scale=1.0)
    params["b"] = jnp.array([0.3, -0.4, 0.2])
    _exact_check(semi, params, 6000, 20, seed=20)
    potts = M.potts(3, 3, edges=[[0, 1], [1, 2]])
    pp = potts.init_params(jax.random.key(4), scale=1.0, field_scale=0.5)
    _exact_check(potts, pp, 6000, 15, seed=30)


def test_all_states_helper_consistent_with_models():
    """Sanity check of the enumeration order used above for a 2-variable model."""
    model = M.rbm(2, 1)
    states = all_states(model)
    assert np.array_equal(state_index(states, model), np.arange(8))
