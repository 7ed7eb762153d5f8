"""float64 end to end: every numerical path runs with ``jax_enable_x64`` and float64 parameters.

64-bit mode is a process-wide JAX flag and this pytest process runs in 32 bits, so the
computations run once in a fresh interpreter (``tests/_x64_checks.py``) that reports
its results as JSON; the tests below check them.  By default (CI) the script runs Gibbs
and parallel tempering, AIS and fixed-schedule tempered SMC (``--core``); Metropolis,
tempered transitions, reverse AIS and adaptive tempered SMC are checked in float64 by
the slow tests (``pytest -m slow tests/test_x64.py``), in a second run of the script.

Tolerances: the deterministic paths (exact enumeration, exact ML by full-batch gradient
ascent) must agree with float64 brute force to 1e-12 (relative), i.e. be computed in
float64 throughout; float32 runs of them must agree to float32 rounding.  The Monte Carlo
paths are checked against the exact values in units of their own standard errors
(chain means of 64 independent chains; AIS runs; SMC replicates), at 5 se: a false
failure has probability below 1e-5 for the chain means (t with 63 degrees of freedom)
and 0.2% for tempered SMC's 8 replicates (t with 7); the seeds are fixed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import once_per_run

SCRIPT = Path(__file__).resolve().parent / "_x64_checks.py"
F32_RTOL = 1e-6


# what CI checks; the other samplers and estimators run with `pytest -m slow` (CI time budget)
CORE_SAMPLERS = ("gibbs", "parallel_tempering")
CORE_ESTIMATORS = ("ais", "tsmc_fixed")


def _run_checks(*args):
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    cmd = [sys.executable, str(SCRIPT), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"{SCRIPT.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["x64"] is True
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return once_per_run(tmp_path_factory, "x64_checks_core", lambda: _run_checks("--core"))


@pytest.fixture(scope="module")
def report_full(tmp_path_factory):
    return once_per_run(tmp_path_factory, "x64_checks", _run_checks)


def _core_first(names, core):
    return [n if n in core else pytest.param(n, marks=pytest.mark.slow) for n in names]


def test_exact_enumeration_in_float64(report):
    ex, ref = report["exact"], report["log_z_ref"]
    assert ex["dtype"] == "float64"
    np.testing.assert_allclose(ex["log_z"], ref, rtol=1e-12)
    np.testing.assert_allclose(ex["log_prob"], ex["log_prob_ref"], rtol=1e-12)
    np.testing.assert_allclose(ex["marginal"], ex["marginal_ref"], rtol=1e-12, atol=1e-14)
    # float32 params under x64 stay float32, within float32 rounding of the float64 result
    np.testing.assert_allclose(ex["log_z_f32"], ref, rtol=F32_RTOL)
    assert ex["log_z_f32"] != ex["log_z"]


@pytest.mark.parametrize(
    "kernel", _core_first(["gibbs", "metropolis", "tempered_transitions", "parallel_tempering"], CORE_SAMPLERS)
)
def test_samplers_in_float64(request, kernel):
    report = request.getfixturevalue("report" if kernel in CORE_SAMPLERS else "report_full")
    r = report["sampling"][kernel]
    assert r["dtype"] == "float64"
    assert 0 < r["se"] < 0.1, r
    assert abs(r["mean"] - r["exact"]) < 5 * r["se"], r


@pytest.mark.parametrize("method", _core_first(["ais", "reverse_ais", "tsmc_adaptive", "tsmc_fixed"], CORE_ESTIMATORS))
def test_log_partition_estimators_in_float64(request, method):
    report = request.getfixturevalue("report" if method in CORE_ESTIMATORS else "report_full")
    log_z, se, dtype = report["smc"][method]
    assert dtype == "float64"
    assert 0 < se < 0.1, (log_z, se)
    assert abs(log_z - report["log_z_ref"]) < 5 * se, (log_z, se, report["log_z_ref"])


def test_learners_in_float64(report):
    fits = report["fit"]
    for name in ("exact_ml", "pseudo_likelihood", "pcd"):
        assert fits[name]["dtypes"] == ["float64"], name
        assert all(np.isfinite(v) for v in fits[name]["params"].values()), name
    ref = fits["exact_ml_ref"]
    for k in ref:
        np.testing.assert_allclose(fits["exact_ml"]["params"][k], ref[k], rtol=1e-12)
        np.testing.assert_allclose(fits["pseudo_likelihood"]["params"][k], fits["pseudo_likelihood_f32"][k], rtol=1e-5)
