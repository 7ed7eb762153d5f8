"""examples/vbm_particle_filter_summary.py on hand-made run folders with known answers."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    path = os.path.join(ROOT, "examples", "vbm_particle_filter_summary.py")
    spec = importlib.util.spec_from_file_location("vbm_particle_filter_summary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _curve(test_ll, wall_time):
    return {"epoch": list(range(len(test_ll))), "test_ll": test_ll, "wall_time": wall_time, "train_ll": test_ll}


def _write_run(folder, seed, true_ll, curves):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vbm_particle_filter.json"), "w") as f:
        json.dump({"config": {"seed": seed}, "true_params_test_ll": true_ll, "curves": curves}, f)


def test_counts_and_differences_per_update_and_at_pf_time(tmp_path):
    summary_module = _load()
    # seed 0, two initialisations: PF ends at -5.0 and -6.0 after 1 s of training.
    # PCD ends at -5.5 (PF ahead) and -5.8 (PF behind); it is slower, so at PF's time
    # (its evaluations at 0, 0.6, 2.0 s) it stands at its 0.6 s value: -7.0 and -5.9.
    _write_run(
        tmp_path / "seed0",
        0,
        -4.0,
        {
            "PF": [_curve([-9.0, -6.0, -5.0], [0.0, 0.5, 1.0]), _curve([-9.0, -7.0, -6.0], [0.0, 0.5, 1.0])],
            "PCD": [_curve([-9.0, -7.0, -5.5], [0.0, 0.6, 2.0]), _curve([-9.0, -5.9, -5.8], [0.0, 0.6, 2.0])],
        },
    )
    # seed 1, one initialisation: PCD's first evaluation after its start is later than PF's
    # whole run, so at PF's time PCD is at its start (-9.0).
    _write_run(
        tmp_path / "seed1",
        1,
        -4.5,
        {"PF": [_curve([-9.0, -5.2], [0.0, 0.1])], "PCD": [_curve([-9.0, -5.0], [0.0, 3.0])]},
    )
    summary = summary_module.summarise(summary_module.load_runs([str(tmp_path / "seed1"), str(tmp_path / "seed0")]))
    assert summary["experiments"] == 3 and summary["true_models"] == 2 and summary["seeds"] == [0, 1]
    pcd = summary["versus"]["PCD"]
    # per update: PF - PCD = +0.5, -0.2, -0.2
    assert pcd["pf_ahead_per_update"] == 1
    assert pcd["difference_per_update_median_iqr"][0] == pytest.approx(-0.2)
    # at PF's time: -5.0 - (-7.0) = +2.0, -6.0 - (-5.9) = -0.1, -5.2 - (-9.0) = +3.8
    assert pcd["pf_ahead_at_pf_time"] == 2
    assert pcd["difference_at_pf_time_median_iqr"][0] == pytest.approx(2.0)
    # final minus the true parameters': PF -1.0, -2.0, -0.7; PCD -1.5, -1.8, -0.5
    assert summary["final_minus_true_median_iqr"]["PF"][0] == pytest.approx(-1.0)
    assert summary["final_minus_true_median_iqr"]["PCD"][0] == pytest.approx(-1.5)


def test_main_writes_json_and_figure_and_refuses_repeated_seeds(tmp_path):
    summary_module = _load()
    curves = {"PF": [_curve([-9.0, -5.0], [0.0, 1.0])], "PCD": [_curve([-9.0, -5.5], [0.0, 1.0])]}
    _write_run(tmp_path / "a", 3, -4.0, curves)
    out = tmp_path / "out"
    summary = summary_module.main([str(tmp_path / "a"), "--out", str(out)])
    assert summary["versus"]["PCD"]["pf_ahead_per_update"] == 1
    assert (out / "summary.png").stat().st_size > 0
    with open(out / "summary.json") as f:
        assert json.load(f)["experiments"] == 1
    _write_run(tmp_path / "b", 3, -4.0, curves)
    with pytest.raises(SystemExit, match="same seed"):
        summary_module.load_runs([str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(SystemExit, match="not found"):
        summary_module.load_runs([str(tmp_path / "missing")])
