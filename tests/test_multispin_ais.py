"""AIS on the bit-packed lattice kernel (``ui.smc.multispin_ais``) and ``ui.smc.thermodynamic_schedule``.

Exactness of ``multispin_ais``: ``E[w] = Z``, so with ``M`` runs whose weights are not
heavy-tailed (ESS > 0.5 checked) ``log Z_hat`` is within a few delta-method standard
errors of the truth.  The truth is enumeration on 4x4 tori (spins with a field, binary
sites) and Kaufman's exact finite-torus formula on a 6x8 torus at K = 0.44 (wide enough
that the colour layout's left and right neighbours differ).  Each check asserts
``|error| <= 4 se`` (two-sided, p ~ 6e-5 per check under the normal approximation) and
``se <= 0.02`` (so the check has resolution); the power check runs the same estimator on
a model whose J is 0.02 off and must be rejected.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import numpy as np
import pytest

import ugm_infer as ui

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "kaufman.py"
_spec = importlib.util.spec_from_file_location("ugm_benchmarks_kaufman_ms", _PATH)
kaufman = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kaufman)


def _check(res, exact, label):
    err, se = float(res.log_Z) - exact, float(res.log_Z_se)
    assert float(res.ess) > 0.5, f"{label}: weights too uneven for the se (ESS {float(res.ess):.2f})"
    assert se <= 0.02, f"{label}: se {se:.4f} too large to test anything"
    assert abs(err) <= 4 * se, f"{label}: error {err:+.4f} vs se {se:.4f}"


@pytest.mark.parametrize(
    ("domain", "J", "h"),
    [("spin", 0.44, 0.15), pytest.param("binary", 0.9, -0.6, marks=pytest.mark.slow)],  # slow: CI time budget
)
def test_matches_enumeration(domain, J, h):
    model = ui.models.lattice_ising(4, 4, domain=domain)
    params = model.init_params(J=J, h=h)
    exact = float(ui.exact.log_partition(model, params))
    res = ui.smc.multispin_ais(jax.random.key(0), model, params, num_runs=2000, num_betas=150)
    _check(res, exact, f"4x4 {domain}")
    assert res.log_weights.shape == (2000,) and res.particles["s"].shape == (2000, 4, 4)
    assert res.log_weight_variance.shape == (149,)
    assert res.analytic == ""
    # power: the same estimator cannot pass for a coupling 0.02 off
    wrong = float(ui.exact.log_partition(model, model.init_params(J=J + 0.02, h=h)))
    assert abs(float(res.log_Z) - wrong) > 4 * float(res.log_Z_se)


# one model, one run shape (1024 runs, 400 betas, 2 sweeps): compiled once for the file
_TORUS = ui.models.lattice_ising(6, 8)


def test_matches_kaufman_on_a_6x8_torus():
    model = _TORUS
    params = model.init_params(J=0.44)
    exact = kaufman.kaufman_log_z(0.44, 6, 8)
    res = ui.smc.multispin_ais(jax.random.key(1), model, params, num_runs=1024, num_betas=400, num_sweeps=2)
    _check(res, exact, "6x8 torus")
    assert abs(float(res.log_Z) - kaufman.kaufman_log_z(0.46, 6, 8)) > 4 * float(res.log_Z_se)
    # the variance of the cumulative log-weights: after the first step it is
    # dbeta^2 Var_uniform(E) = dbeta^2 J^2 (number of bonds), 4.4 sd of a 1024-run sample
    # variance = 20 %; at the end it is the variance of the log-weights
    var = np.asarray(res.log_weight_variance)
    assert var[0] == pytest.approx((1 / 399) ** 2 * 0.44**2 * 96, rel=0.2)
    assert var[-1] == pytest.approx(np.var(np.asarray(res.log_weights, np.float64)), rel=1e-3, abs=1e-5)


def test_thermodynamic_schedule_from_a_pilot():
    model = _TORUS
    params = model.init_params(J=0.44)
    pilot = ui.smc.multispin_ais(jax.random.key(2), model, params, num_runs=1024, num_betas=400, num_sweeps=2)
    sched = ui.smc.thermodynamic_schedule(pilot.betas, pilot.log_weight_variance, 400, num_bins=20)
    betas = sched.betas
    assert betas[0] == 0.0 and betas[-1] == 1.0 and np.all(np.diff(betas) > 0) and betas.shape == (400,)
    # near criticality the friction grows towards beta = 1: the schedule is denser there
    assert np.sum(betas > 0.8) > 1.5 * 0.2 * 400
    assert sched.length**2 <= sched.linear_variance_times_steps
    res = ui.smc.multispin_ais(jax.random.key(3), model, params, num_runs=1024, betas=betas, num_sweeps=2)
    _check(res, kaufman.kaufman_log_z(0.44, 6, 8), "6x8 adapted schedule")


def test_thermodynamic_schedule_closed_form():
    # friction 100 on [0, 0.5] and 400 on [0.5, 1]: speed 10 and 20, length 15, and the
    # new schedule has twice the density above 0.5
    pilot = np.linspace(0.0, 1.0, 101)
    var = np.cumsum(np.where(pilot[1:] > 0.5, 4.0, 1.0)) * 0.01
    sched = ui.smc.thermodynamic_schedule(pilot, var, 31, num_bins=10)
    np.testing.assert_allclose(sched.friction, [100.0] * 5 + [400.0] * 5, rtol=1e-9)
    assert sched.length == pytest.approx(15.0)
    assert sched.linear_variance_times_steps == pytest.approx(250.0)
    np.testing.assert_allclose(sched.betas[:11], np.linspace(0.0, 0.5, 11), atol=1e-12)
    np.testing.assert_allclose(sched.betas[10:], np.linspace(0.5, 1.0, 21), atol=1e-12)


def test_bad_input():
    pilot = np.linspace(0.0, 1.0, 11)
    var = np.linspace(0.1, 1.0, 10)
    with pytest.raises(ValueError, match="log_weight_variance"):
        ui.smc.thermodynamic_schedule(pilot, var[:-1], 20)
    with pytest.raises(ValueError, match="log_weight_variance"):
        ui.smc.thermodynamic_schedule(pilot, -var, 20)
    with pytest.raises(ValueError, match="never grows"):
        ui.smc.thermodynamic_schedule(pilot, np.zeros(10), 20)
    with pytest.raises(ValueError, match="num_bins"):
        ui.smc.thermodynamic_schedule(pilot, var, 20, num_bins=11)
    with pytest.raises(ValueError, match="floor"):
        ui.smc.thermodynamic_schedule(pilot, var, 20, floor=1.0)
    with pytest.raises(ValueError, match="pilot_betas"):
        ui.smc.thermodynamic_schedule(pilot[::-1], var, 20)
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params()
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="periodic"):
        ui.smc.multispin_ais(key, ui.models.lattice_ising(4, 4, periodic=False), params)
    with pytest.raises(ValueError, match="even"):
        ui.smc.multispin_ais(key, ui.models.lattice_ising(5, 4), params)
    with pytest.raises(TypeError, match="lattice_ising"):
        ui.smc.multispin_ais(key, ui.models.ising(4), {"W": np.zeros((4, 4)), "b": np.zeros(4)})
    with pytest.raises(ValueError, match="num_runs"):
        ui.smc.multispin_ais(key, model, params, num_runs=0)
    with pytest.raises(ValueError, match="betas"):
        ui.smc.multispin_ais(key, model, params, betas=[0.0, 0.5, 0.4, 1.0])
    with pytest.raises(TypeError, match="key"):
        ui.smc.multispin_ais(0, model, params)
