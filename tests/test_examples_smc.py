"""Smoke tests of examples/vbm_learning_rates.py (PSMC paper) and
examples/vbm_particle_filter.py (Asuncion et al. 2010, sec. 4.1).

Each runs the example's ``main`` in a tiny configuration and checks the written JSON
and PNGs.  The assertions can fail: every sampling-based learner must recover most of
the log-likelihood gain of exact ML from the same start.  A learner following the
exact gradient up to Monte Carlo noise ends close to exact ML; one with a broken
negative phase (wrong sign, stale or missing particles) stalls or diverges, far
outside the 15% band used below (the runs use fixed seeds, so they are reproducible).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"{name}_example", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _finite(values):
    return all(math.isfinite(v) for v in values)


# fraction of exact ML's gain (final minus initial LL) a sampling learner must reach
GAIN_FRACTION = 0.85


@pytest.mark.slow  # CI runs this example's --quick mode in .ci/run; `pytest -m slow`
def test_vbm_learning_rates_tiny(tmp_path):
    example = _load("vbm_learning_rates")
    out = str(tmp_path / "rates")
    methods = ["exact ML", "PSMC"]  # PCD-1 is the same compiled path as other PCD tests: leave it out
    argv = ["--trials", "1", "--epochs", "60", "--eval-every", "20", "--num-particles", "100"]
    argv += ["--schemes", "1/(10+0.1t)", "--methods", *methods, "--out", out]
    result = example.main(argv)
    with open(os.path.join(out, "vbm_learning_rates.json")) as f:
        saved = json.load(f)
    for png in ("vbm_learning_rates.png", "vbm_learning_rates_betas.png"):
        assert os.path.getsize(os.path.join(out, png)) > 0
    assert set(saved) == {
        "config",
        "true_params_train_ll",
        "true_params_test_ll",
        "table",
        "gap_to_exact_ml",
        "psmc_bridges_summary",
        "psmc_bridges",
        "smc_bridges",
        "timing",
        "curves",
    }
    scheme = "1/(10+0.1t)"
    assert set(saved["curves"]) == {scheme} and set(saved["curves"][scheme]) == set(methods)
    curves = saved["curves"][scheme]
    for curve in curves.values():
        (run,) = curve
        assert run["epoch"] == [0, 20, 40, 60]
        assert _finite(run["train_ll"] + run["test_ll"]) and max(run["train_ll"]) < 0
    # identical start (zero parameters: LL = -10 log 2) for every learner
    assert {c[0]["train_ll"][0] for c in curves.values()} == {curves["exact ML"][0]["train_ll"][0]}
    assert math.isclose(curves["exact ML"][0]["train_ll"][0], -10 * math.log(2), rel_tol=1e-5)
    start = curves["exact ML"][0]["train_ll"][0]
    exact_final = saved["table"][scheme]["exact ML"]["final_train_ll"]["mean"]
    gain = exact_final - start
    assert gain > 1.0
    final = saved["table"][scheme]["PSMC"]["final_train_ll"]["mean"]
    assert abs(final - exact_final) <= (1 - GAIN_FRACTION) * gain, (final, exact_final)
    assert math.isclose(saved["gap_to_exact_ml"][scheme]["PSMC"]["mean"], final - exact_final, abs_tol=1e-6)
    (bridges,) = saved["psmc_bridges"][scheme]
    assert len(bridges["num_bridges"]) == 60 and min(bridges["num_bridges"]) >= 1
    summary = saved["psmc_bridges_summary"][scheme]
    assert 1.0 <= summary["mean"] <= summary["max"] <= saved["config"]["max_bridges"]
    assert saved["config"]["schemes"] == {scheme: "10.0 / (100.0 + t)"}
    assert result["table"].keys() == saved["table"].keys()


@pytest.mark.slow  # CI runs this example's --quick mode in .ci/run; `pytest -m slow`
def test_vbm_particle_filter_tiny(tmp_path):
    example = _load("vbm_particle_filter")
    out = str(tmp_path / "pf")
    argv = ["--trials", "1", "--epochs", "60", "--eval-every", "20", "--num-train", "200", "--out", out]
    argv += ["--methods", "PF", "PCD"]  # MCMC-MLE left out to save its compilation
    example.main(argv)
    with open(os.path.join(out, "vbm_particle_filter.json")) as f:
        saved = json.load(f)
    assert os.path.getsize(os.path.join(out, "vbm_particle_filter.png")) > 0
    assert set(saved) == {"config", "true_params_test_ll", "target_test_ll", "table", "curves"}
    assert set(saved["curves"]) == {"PF", "PCD"}
    for curve in saved["curves"].values():
        (run,) = curve
        assert run["epoch"] == [0, 20, 40, 60]
        assert _finite(run["test_ll"] + run["train_ll"] + run["wall_time"])
    starts = {c[0]["test_ll"][0] for c in saved["curves"].values()}
    assert len(starts) == 1
    start = starts.pop()
    pcd_final = saved["table"]["PCD"]["final_test_ll_mean"]
    gain = pcd_final - start
    assert gain > 1.0
    pf_final = saved["table"]["PF"]["final_test_ll_mean"]
    assert abs(pf_final - pcd_final) <= (1 - GAIN_FRACTION) * gain, (pf_final, pcd_final)
    pf = saved["curves"]["PF"][0]
    # PF skipped the rejuvenation at some updates but not at all of them
    assert 0.0 < pf["resampled_fraction"] < 1.0
    assert len(pf["resample_steps"]) == round(pf["resampled_fraction"] * 60)
    assert saved["table"]["PF"]["resampled_fraction_mean"] == pf["resampled_fraction"]
    assert "resampled_fraction_mean" not in saved["table"]["PCD"]
