"""Bad input at every public entry point of the core raises a clear error naming the argument.

Errors must be ``ValueError`` (bad value) or ``TypeError`` (bad type), raised on the
host before anything is traced or compiled (checked with an energy that counts its
traces).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rbm_energy, rbm_params

import ugm_infer as ui


def counting_model():
    """An RBM-like model whose energy records every trace/call."""
    calls = []

    def energy(params, state):
        calls.append(1)
        return rbm_energy(params, state)

    # structure declared, so building a kernel probes nothing (keeps these tests fast)
    model = ui.EnergyModel(energy, {"v": ui.Binary(3), "h": ui.Binary(2)}, [{"v": True}, {"h": True}], multilinear=True)
    return model, calls


@pytest.fixture
def model():
    return ui.EnergyModel(rbm_energy, {"v": ui.Binary(3), "h": ui.Binary(2)}, [{"v": True}, {"h": True}], multilinear=True)


@pytest.fixture
def params():
    return rbm_params(3, 2)


# --------------------------------------------------------------------------------------
# domains
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make,error,match",
    [
        (lambda: ui.Binary(-1), ValueError, "`shape`"),
        (lambda: ui.Binary((3, 0)), ValueError, "`shape`"),
        (lambda: ui.Spin(3.5), TypeError, "`shape`"),
        (lambda: ui.Spin("abc"), TypeError, "`shape`"),
        (lambda: ui.Binary(None), TypeError, "`shape`"),
        (lambda: ui.Binary(3, dtype="not-a-dtype"), TypeError, "`dtype`"),
        (lambda: ui.Binary(3, dtype=jnp.complex64), TypeError, "`dtype`"),
        (lambda: ui.Spin(3, dtype=jnp.uint8), ValueError, "`dtype`"),
        (lambda: ui.Spin(3, dtype=jnp.bool_), TypeError, "`dtype`"),
        (lambda: ui.Categorical(3), TypeError, "`num_states`"),
        (lambda: ui.Categorical(3, 1), ValueError, "`num_states`"),
        (lambda: ui.Categorical(3, 2.5), TypeError, "`num_states`"),
        (lambda: ui.Categorical(3, True), TypeError, "`num_states`"),
        (lambda: ui.Categorical(3, 300, dtype=jnp.int8), ValueError, "`dtype`"),
        (lambda: ui.Categorical(3, 3, dtype=jnp.bool_), TypeError, "`dtype`"),
    ],
)
def test_domain_validation(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_domains_accept_documented_dtypes():
    assert ui.Spin(3, dtype=jnp.int8).dtype == jnp.int8
    assert ui.Binary(3, dtype=jnp.bool_).dtype == jnp.bool_
    assert ui.Categorical((2, 2), 21, dtype=jnp.int8).num_states == 21
    assert ui.Categorical(2, 2, dtype=jnp.bool_).dtype == jnp.bool_


# --------------------------------------------------------------------------------------
# EnergyModel construction
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"energy_fn": "energy"}, TypeError, "`energy_fn`"),
        ({"variables": {}}, ValueError, "`variables`"),
        ({"variables": [("v", ui.Binary(3))]}, ValueError, "`variables`"),
        ({"variables": {"v": (3,)}}, TypeError, "variable 'v'"),
        ({"variables": {1: ui.Binary(3)}}, TypeError, "variable names"),
        ({"blocks": [{"v": True}]}, ValueError, "`blocks` do not cover"),
        ({"blocks": [{"v": True, "h": True}, {"h": True}]}, ValueError, "more than one block"),
        ({"blocks": [{"w": True}]}, ValueError, "unknown variable 'w'"),
        ({"multilinear": "yes"}, TypeError, "`multilinear`"),
        ({"free_energy_fns": {"w": lambda p, s: 0.0}}, ValueError, "`free_energy_fns`"),
        ({"free_energy_fns": {"h": 3}}, TypeError, "`free_energy_fns"),
        ({"validate_params": 3}, TypeError, "`validate_params`"),
        ({"name": 3}, TypeError, "`name`"),
    ],
)
def test_energy_model_validation(kwargs, error, match):
    args = {"energy_fn": rbm_energy, "variables": {"v": ui.Binary(3), "h": ui.Binary(2)}}
    args.update(kwargs)
    energy_fn, variables = args.pop("energy_fn"), args.pop("variables")
    with pytest.raises(error, match=match):
        ui.EnergyModel(energy_fn, variables, **args)


def test_multilinear_true_refused_for_categorical():
    with pytest.raises(ValueError, match="multilinear=True"):
        ui.EnergyModel(lambda p, s: jnp.sum(s["x"]), {"x": ui.Categorical(3, 3)}, multilinear=True)


# --------------------------------------------------------------------------------------
# validate_state / validate_params / random_state / logdensity_fn
# --------------------------------------------------------------------------------------
GOOD = {"v": np.array([0.0, 1.0, 1.0]), "h": np.array([1.0, 0.0])}


@pytest.mark.parametrize(
    "state,kwargs,error,match",
    [
        ({**GOOD, "w": np.zeros(2)}, {}, ValueError, r"unknown variable\(s\) \['w'\]"),
        ({"v": GOOD["v"]}, {}, ValueError, r"missing variable\(s\) \['h'\]"),
        ({**GOOD, "v": np.zeros(4)}, {}, ValueError, r"`state\['v'\]` has shape \(4,\)"),
        ({**GOOD, "v": np.zeros((2, 3))}, {"batch_ndim": 0}, ValueError, r"`state\['v'\]` has shape"),
        ({**GOOD, "v": np.zeros((2, 3))}, {}, ValueError, "disagree on the batch shape"),
        ({**GOOD, "v": np.array([0.0, 2.0, 1.0])}, {}, ValueError, r"`state\['v'\]` has 1 value\(s\) outside"),
        ({**GOOD, "h": np.array([0.5, 1.0])}, {}, ValueError, r"`state\['h'\]` has 1 value\(s\) outside"),
        ({**GOOD, "v": np.array([0.0, np.nan, 1.0])}, {}, ValueError, r"`state\['v'\]` contains NaN"),
        ({**GOOD, "v": np.array([0.0, np.inf, 1.0])}, {}, ValueError, r"`state\['v'\]` contains NaN"),
        ({**GOOD, "v": np.array(["a", "b", "c"])}, {}, TypeError, r"`state\['v'\]` must be numeric"),
        ([GOOD["v"], GOOD["h"]], {}, TypeError, "`state` must be a dict"),
    ],
)
def test_validate_state(model, state, kwargs, error, match):
    with pytest.raises(error, match=match):
        model.validate_state(state, **kwargs)


def test_validate_state_other_domains_and_argname():
    spin = ui.EnergyModel(lambda p, s: jnp.sum(s["s"]), {"s": ui.Spin(3, dtype=jnp.int8)})
    with pytest.raises(ValueError, match=r"`initial_position\['s'\]` has 1 value"):
        spin.validate_state({"s": np.array([1, 0, -1])}, argname="initial_position")
    out = spin.validate_state({"s": np.array([[1, -1, -1]])}, batch_ndim=1)
    assert out["s"].dtype == jnp.int8
    cat = ui.EnergyModel(lambda p, s: jnp.sum(s["x"]), {"x": ui.Categorical(3, 3)})
    with pytest.raises(ValueError, match="outside the domain"):
        cat.validate_state({"x": np.array([0, 3, 1])})
    with pytest.raises(ValueError, match="outside the domain"):
        cat.validate_state({"x": np.array([0, -1, 1])})


@pytest.mark.parametrize(
    "bad,error,match",
    [
        ({"W": jnp.full((3, 2), jnp.nan)}, ValueError, r"`params` leaf \['W'\] contains NaN or inf"),
        ({"b": jnp.array([0.0, jnp.inf, 0.0])}, ValueError, r"`params` leaf \['b'\] contains NaN or inf"),
        ({"c": "zero"}, TypeError, r"`params` leaf \['c'\] is not a numeric array"),
    ],
)
def test_validate_params(model, params, bad, error, match):
    with pytest.raises(error, match=match):
        model.validate_params({**params, **bad})


def test_model_validate_params_hook(params):
    def check(p):
        if p["W"].shape != (3, 2):
            raise ValueError(f"params['W'] must have shape (3, 2), got {p['W'].shape}")

    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(3), "h": ui.Binary(2)}, validate_params=check)
    model.validate_params(params)
    with pytest.raises(ValueError, match=r"params\['W'\] must have shape"):
        model.validate_params({**params, "W": jnp.zeros((2, 3))})


@pytest.mark.parametrize("num_chains", [0, -2, 1.5, True, "4"])
def test_random_state_num_chains(model, num_chains):
    with pytest.raises(ValueError, match="`num_chains`"):
        model.random_state(jax.random.key(0), num_chains)


def test_logdensity_beta(model, params):
    with pytest.raises(ValueError, match="`beta` must be finite"):
        model.logdensity_fn(params, beta=float("nan"))
    with pytest.raises(TypeError, match="`beta`"):
        model.logdensity_fn(params, beta="hot")
    # traced beta is fine (tempering inside jit)
    f = jax.jit(lambda b: model.logdensity_fn(params, b)(model.random_state(jax.random.key(0))))
    assert jnp.isfinite(f(0.5))


def test_detect_structure_rejects_bad_params():
    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(3), "h": ui.Binary(2)})
    with pytest.raises(ValueError, match="NaN or inf"):
        model.detect_structure({**rbm_params(3, 2), "W": jnp.full((3, 2), jnp.nan)})


# --------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["gibbs", "metropolis"])
def test_kernel_static_config(model, params, kernel):
    module = getattr(ui.kernels, kernel)
    with pytest.raises(ValueError, match="`scan` must be one of"):
        module.build_kernel(model, "diagonal")
    for bad in [0, -1, 1.5, True, "2"]:
        with pytest.raises(ValueError, match="`num_sweeps`"):
            module.build_kernel(model, "systematic", bad)
    with pytest.raises(TypeError, match="`model`"):
        module.build_kernel("model", "systematic")
    # top-level API
    with pytest.raises(ValueError, match="exactly one of `params`"):
        module(model)
    with pytest.raises(ValueError, match="exactly one of `params`"):
        module(model, params, logdensity_fn=model.logdensity_fn(params))
    with pytest.raises(TypeError, match="`logdensity_fn` must be callable"):
        module(model, logdensity_fn=3.0)
    with pytest.raises(ValueError, match=r"`params` leaf \['W'\]"):
        module(model, {**params, "W": jnp.full((3, 2), jnp.nan)})
    with pytest.raises(ValueError, match="`beta` must be finite"):
        module(model, params, beta=float("inf"))
    algorithm = module(model, params, scan="systematic")
    with pytest.raises(ValueError, match=r"`position\['v'\]` has shape \(2, 3\)"):
        algorithm.init({"v": jnp.zeros((2, 3)), "h": jnp.zeros(2)})
    with pytest.raises(ValueError, match=r"`position` has unknown"):
        algorithm.init({"v": jnp.zeros(3), "h": jnp.zeros(2), "z": jnp.zeros(1)})
    with pytest.raises(ValueError, match=r"`position\['h'\]` has 1 value"):
        algorithm.init({"v": jnp.zeros(3), "h": jnp.array([0.0, 3.0])})


def test_metropolis_has_no_block_scan(model):
    with pytest.raises(ValueError, match="`scan` must be one of \\('systematic', 'random'\\)"):
        ui.kernels.metropolis.build_kernel(model, "block")


def test_block_scan_without_structure_needs_params():
    model = ui.EnergyModel(rbm_energy, {"v": ui.Binary(3), "h": ui.Binary(2)})
    with pytest.raises(ValueError, match="pass `params=`"):
        ui.kernels.gibbs.build_kernel(model, "block")


# --------------------------------------------------------------------------------------
# ui.sample
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"num_samples": 0}, ValueError, "`num_samples`"),
        ({"num_samples": -3}, ValueError, "`num_samples`"),
        ({"num_samples": 2.0}, ValueError, "`num_samples`"),
        ({"num_samples": True}, ValueError, "`num_samples`"),
        ({"thin": 0}, ValueError, "`thin`"),
        ({"thin": 1.5}, ValueError, "`thin`"),
        ({"num_warmup": -1}, ValueError, "`num_warmup`"),
        ({"num_warmup": None}, ValueError, "`num_warmup`"),
        ({"algorithm": "gibbs"}, TypeError, "`algorithm`"),
        ({"rng_key": 0}, TypeError, "`rng_key`"),
        ({"trace_fn": 3}, TypeError, "`trace_fn`"),
        ({"keep_states": "yes"}, TypeError, "`keep_states`"),
        ({"initial_position": {"v": jnp.zeros(3), "h": jnp.zeros(2)}}, ValueError, r"`initial_position\['v'\]`"),
        ({"initial_position": {"v": jnp.zeros((4, 3))}}, ValueError, r"`initial_position` is missing"),
        (
            {"initial_position": {"v": jnp.full((4, 3), 2.0), "h": jnp.zeros((4, 2))}},
            ValueError,
            r"`initial_position\['v'\]` has 12 value",
        ),
        ({"initial_position": {"v": jnp.zeros((4, 3)), "h": jnp.zeros((5, 2))}}, ValueError, "disagree"),
        ({"params": {**rbm_params(3, 2), "b": jnp.full(3, jnp.nan)}}, ValueError, r"`params` leaf \['b'\]"),
    ],
)
def test_sample_validation(kwargs, error, match):
    model, calls = counting_model()
    params = rbm_params(3, 2)
    args = {
        "rng_key": jax.random.key(0),
        "algorithm": ui.kernels.gibbs(model, params),
        "initial_position": {"v": np.zeros((4, 3), np.float32), "h": np.ones((4, 2), np.float32)},
        "num_samples": 2,
        "model": model,
        "params": params,
    }
    args.update(kwargs)
    del calls[:]
    with pytest.raises(error, match=match):
        ui.sample(args.pop("rng_key"), args.pop("algorithm"), args.pop("initial_position"), args.pop("num_samples"), **args)
    assert not calls, "the energy was traced before the input was rejected"


def test_sample_without_model_checks_chain_axis():
    model, calls = counting_model()
    algorithm = ui.kernels.gibbs(model, rbm_params(3, 2))
    del calls[:]
    with pytest.raises(ValueError, match="leading chain axis"):
        ui.sample(jax.random.key(0), algorithm, {"v": jnp.zeros((4, 3)), "h": jnp.zeros((3, 2))}, 2)
    with pytest.raises(ValueError, match="`initial_position` is empty"):
        ui.sample(jax.random.key(0), algorithm, {}, 2)
    assert not calls


# --------------------------------------------------------------------------------------
# the energy contract: every built-in model passes it
# --------------------------------------------------------------------------------------
def _crf_params(model):
    theta = model.init_params(jax.random.key(0))
    shapes = model.input_shapes
    zeros = {k: jnp.zeros(s) for k, s in shapes.items()} if isinstance(shapes, dict) else jnp.zeros(shapes)
    return model.condition(theta, zeros)


BUILT_IN = {
    "ising": lambda: ui.models.ising(5),
    "ising-edges": lambda: ui.models.ising(5, edges=[[0, 1], [1, 2], [3, 4]]),
    "boltzmann_machine": lambda: ui.models.boltzmann_machine(4),
    "lattice_ising": lambda: ui.models.lattice_ising(4, 4),
    "lattice_ising-binary-int8": lambda: ui.models.lattice_ising(3, 3, domain="binary", dtype=jnp.int8),
    "potts": lambda: ui.models.potts(4, 3),
    "lattice_potts": lambda: ui.models.lattice_potts(2, 2, 3),
    "rbm": lambda: ui.models.rbm(4, 3),
    "semi_rbm": lambda: ui.models.semi_rbm(4, 3),
    "dbm": lambda: ui.models.dbm([4, 3, 2]),
    "sigmoid_belief_net": lambda: ui.models.sigmoid_belief_net([4, 3]),
    "grid_hidden": lambda: ui.models.grid_hidden(3, 3, np.arange(9) % 2 == 0),
    "ergm": lambda: ui.models.ergm(5),
    "grid_crf": lambda: ui.models.grid_crf(2, 3),
}


@pytest.mark.parametrize("name", list(BUILT_IN))
def test_built_in_models_pass_the_energy_contract(name):
    model = BUILT_IN[name]()
    if isinstance(model, ui.models.CRF):
        params = _crf_params(model)
    elif isinstance(model, ui.models.LatticeIsing):
        params = model.init_params(J=0.3, h=0.1)
    else:
        params = model.init_params(jax.random.key(0))
    out = model.check_energy(params)
    assert out.shape == () and jnp.issubdtype(out.dtype, jnp.floating)
    assert model.validate_params(params) is params  # cached: the second check is free


def test_energy_check_runs_once_per_parameter_structure():
    calls = []

    def energy(params, state):
        calls.append(1)
        return -params["J"] * jnp.sum(state["s"])

    model = ui.EnergyModel(energy, {"s": ui.Spin(3)})
    model.validate_params({"J": jnp.asarray(0.5)})
    assert len(calls) == 1  # one trace
    model.validate_params({"J": jnp.asarray(-2.0)})  # same structure: cached
    assert len(calls) == 1
    model.validate_params({"J": jnp.asarray(0.5, jnp.float16)})  # new dtype: checked again
    assert len(calls) == 2
    with pytest.raises(ValueError, match="model 'energy'.*energy is nan"):
        model.check_energy({"J": float("nan")})  # a new structure (a Python float), NaN energy


def test_energy_check_under_tracing_checks_shapes_only():
    model = ui.EnergyModel(lambda p, s: -p["J"] * s["s"], {"s": ui.Spin(3)}, name="vec")
    with pytest.raises(ValueError, match=r"model 'vec'.*shape \(3,\)"):
        jax.jit(model.check_energy)({"J": 0.5})
    nan_model = ui.EnergyModel(lambda p, s: jnp.sqrt(-p["J"]) * jnp.sum(s["s"]), {"s": ui.Spin(3)})
    out = jax.jit(lambda p: nan_model.check_energy(p).shape)({"J": 0.5})  # values unknown: no finiteness test
    assert out == ()
