"""Tempered SMC log partition functions against exact enumeration.

Each estimate must agree with the exact ``log Z`` (``ui.exact.log_partition``) within
3 of its own reported standard errors (the spread of ``R`` independent replicates)
AND within 0.1 nats, at the particle counts used here (N = 1000 particles, R = 8
replicates, 2 kernel steps per SMC step -- block-Gibbs sweeps unless noted -- and an
adaptive ESS target of 0.5 unless noted).
Seeds are fixed; tolerances are not tuned to the seeds.

Compiled SMC programs are cached on the model instance and parameters are arguments,
so the tests reuse one model object per structure (new params or a new base do not
recompile).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer import exact, models
from ugm_infer.kernels import metropolis

N, R = 1000, 8


def _check_close(res, log_z, label):
    err = float(res.log_Z) - log_z
    se = float(res.log_Z_se)
    assert np.isfinite(se) and se > 0, f"{label}: bad se {se}"
    assert abs(err) < 3 * se, f"{label}: log Z {float(res.log_Z):.4f} vs exact {log_z:.4f} = {err / se:.2f} se (se {se:.4f})"
    assert abs(err) < 0.1, f"{label}: log Z error {err:.4f} nats"


@pytest.fixture(scope="module")
def dense():
    model = models.ising(16)
    params = model.init_params(jax.random.key(0), scale=1.0, field_scale=0.3)
    return model, params, float(exact.log_partition(model, params))


@pytest.fixture(scope="module")
def rbm_case():
    model = models.rbm(20, 8)
    params = model.init_params(jax.random.key(3), scale=1.0)
    params["b"] = 0.3 * jax.random.normal(jax.random.key(4), (20,))
    params["c"] = 0.3 * jax.random.normal(jax.random.key(5), (8,))
    data = exact.sample(jax.random.key(6), model, params, 500)
    return model, params, float(exact.log_partition(model, params)), {"v": data["v"]}


@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_dense_ising_uniform_and_logits_base(dense):
    model, params, log_z = dense
    res = ui.smc.tempered_smc(jax.random.key(1), model, params, num_particles=N, num_replicates=R)
    _check_close(res, log_z, "dense ising, uniform base")
    # bookkeeping: shapes, weights normalised, history consistent with num_steps
    assert res.log_Z_replicates.shape == (R,) and res.weights.shape == (R, N)
    assert res.particles["s"].shape == (R, N, 16)
    np.testing.assert_allclose(np.asarray(res.weights).sum(axis=1), 1.0, rtol=1e-4)
    steps = np.asarray(res.num_steps)
    lams = np.asarray(res.tempering_params)
    for r in range(R):
        assert lams[r, steps[r] - 1] == 1.0 and np.all(np.isnan(lams[r, steps[r] :]))
        assert np.all(np.diff(lams[r, : steps[r]]) > 0)
        np.testing.assert_allclose(np.nansum(np.asarray(res.log_Z_increments)[r]), float(res.log_Z_replicates[r]), rtol=1e-5)
    # a non-uniform independent-sites base (same compiled program: the base is an argument)
    logits = {"s": jnp.stack([jnp.zeros(16), 0.8 * jnp.ones(16)], axis=-1)}
    res = ui.smc.tempered_smc(jax.random.key(2), model, params, num_particles=N, num_replicates=R, base=logits)
    _check_close(res, log_z, "dense ising, logits base")


@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_lattice_fixed_schedule_residual_metropolis():
    """Fixed schedule (blackjax.tempered_smc), residual resampling, a custom kernel (Metropolis)."""
    model = models.lattice_ising(4, 4, periodic=True)
    params = model.init_params(J=0.44)
    log_z = float(exact.log_partition(model, params))
    schedule = np.linspace(0.0, 1.0, 16)
    res = ui.smc.tempered_smc(
        jax.random.key(7),
        model,
        params,
        num_particles=N,
        num_replicates=R,
        schedule=schedule,
        resampling="residual",
        kernel=metropolis.build_kernel(model, "systematic"),
        kernel_init=metropolis.init,
    )
    _check_close(res, log_z, "4x4 periodic lattice J=0.44, fixed schedule, Metropolis")
    assert np.all(np.asarray(res.num_steps) == 15)
    np.testing.assert_allclose(np.asarray(res.tempering_params)[0], schedule[1:], atol=1e-6)


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_rbm_data_base(rbm_case):
    model, params, log_z, data = rbm_case
    res = ui.smc.tempered_smc(jax.random.key(8), model, params, num_particles=N, num_replicates=R, base="data", data=data)
    _check_close(res, log_z, "rbm 20x8, data base")


def test_huge_energies_stay_finite(dense):
    """Energy gaps of order 1e4: all weights stay in log space, no overflow or NaN."""
    model, params, _ = dense
    big = jax.tree.map(lambda x: 1e4 * x, params)
    log_z = float(exact.log_partition(model, big))
    res = ui.smc.tempered_smc(jax.random.key(9), model, big, num_particles=N, num_replicates=R)
    assert np.all(np.isfinite(np.asarray(res.log_Z_replicates)))
    assert np.isfinite(float(res.log_Z))
    assert np.all(np.isfinite(np.asarray(res.weights)))
    # log Z ~ -E_min ~ 1e5 here: the estimate cannot exceed it by more than float32 rounding
    assert float(res.log_Z) <= log_z + 1e-4 * abs(log_z)
    assert float(res.log_Z) >= log_z - 0.05 * abs(log_z)


def test_bad_inputs(dense):
    model, params, _ = dense
    k = jax.random.key(0)
    with pytest.raises(ValueError, match="num_particles"):
        ui.smc.tempered_smc(k, model, params, num_particles=0)
    with pytest.raises(ValueError, match="num_replicates"):
        ui.smc.tempered_smc(k, model, params, num_replicates=0)
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="target_ess"):
            ui.smc.tempered_smc(k, model, params, target_ess=bad)
    for sched, msg in (
        ([0.0, 0.5, 0.4, 1.0], "increasing"),
        ([0.1, 0.5, 1.0], "start at 0"),
        ([0.0, 0.5, 0.9], "end at 1"),
        ([0.0], "at least 2"),
    ):
        with pytest.raises(ValueError, match=msg):
            ui.smc.tempered_smc(k, model, params, schedule=sched)
    with pytest.raises(ValueError, match="unknown variable 'x'"):
        ui.smc.tempered_smc(k, model, params, base={"x": np.zeros((16, 2))})
    with pytest.raises(ValueError, match=r"shape domain.shape \+ \(K,\)"):
        ui.smc.tempered_smc(k, model, params, base={"s": np.zeros((16, 3))})
    with pytest.raises(ValueError, match="finite"):
        ui.smc.tempered_smc(k, model, params, base={"s": np.full((16, 2), -np.inf)})
    with pytest.raises(ValueError, match="base"):
        ui.smc.tempered_smc(k, model, params, base="gaussian")
    with pytest.raises(ValueError, match="needs `data="):
        ui.smc.tempered_smc(k, model, params, base="data")
    with pytest.raises(ValueError, match="resampling"):
        ui.smc.tempered_smc(k, model, params, resampling="bootstrap")
    with pytest.raises(ValueError, match="kernel_init"):
        ui.smc.tempered_smc(k, model, params, kernel=lambda key, state, ld: (state, None))
    with pytest.raises(ValueError, match="params"):
        ui.smc.tempered_smc(k, model, {"W": params["W"], "h": jnp.zeros(15)})
    with pytest.raises(TypeError, match="rng_key"):
        ui.smc.tempered_smc(0, model, params)
