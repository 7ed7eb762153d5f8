"""Smoke test of examples/rbm_tempered_transitions.py (Salakhutdinov 2009, sec. 4.1).

Runs the example's ``main`` in a tiny configuration (a few hundred images, a few
dozen updates, a short TT ladder) and checks the written JSON/PNG.  Needs the shared
binarized MNIST; skipped when it is absent.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "rbm_tempered_transitions.py")


def _load_example():
    spec = importlib.util.spec_from_file_location("rbm_tempered_transitions_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()
needs_data = pytest.mark.skipif(not os.path.isfile(example.DEFAULT_DATA), reason="binarized MNIST not available")


@pytest.mark.slow  # CI runs this example's --quick mode in .ci/run; `pytest -m slow`
@needs_data
def test_tiny_run_writes_json_and_png(tmp_path):
    out = str(tmp_path / "out")
    argv = ["--quick", "--num-train", "300", "--num-test", "100", "--updates", "40", "--eval-every", "15"]
    # SAP is Trans-SAP without the TT runs: leave it out to save its compilation
    argv += ["--gibbs-per-tt", "10", "--num-betas", "4", "--methods", "exact ML", "Trans-SAP", "--out", out]
    result = example.main(argv)
    with open(os.path.join(out, "rbm_tempered_transitions.json")) as f:
        saved = json.load(f)
    assert os.path.getsize(os.path.join(out, "rbm_tempered_transitions.png")) > 0
    assert set(saved) == {"config", "curves", "final", "gap_to_exact_ml", "tt_acceptance", "timing"}
    assert set(saved["curves"]) == {"exact ML", "Trans-SAP"}
    for curve in saved["curves"].values():
        assert set(curve) == {"step", "gibbs_steps", "train_ll", "test_ll", "wall_time"}
        assert curve["step"][0] == 0
        assert all(math.isfinite(x) and x < 0 for x in curve["train_ll"] + curve["test_ll"])
    # a budget of 40 Gibbs steps: exact ML makes 40 updates; Trans-SAP (TT in the last 20 steps, one
    # run of 2 * (4 - 1) = 6 sweeps before update 20 and every 10 updates) fits 30 updates and one run
    assert saved["curves"]["exact ML"]["step"][-1] == 40 and saved["curves"]["exact ML"]["gibbs_steps"] is None
    assert saved["curves"]["Trans-SAP"]["step"][-1] == 30 and saved["curves"]["Trans-SAP"]["gibbs_steps"][-1] == 36
    # identical initial parameters for every learner
    assert len({c["train_ll"][0] for c in saved["curves"].values()}) == 1
    assert set(saved["gap_to_exact_ml"]) == {"Trans-SAP"}
    assert set(saved["gap_to_exact_ml"]["Trans-SAP"]) >= {"train_ll_tail_mean", "test_ll_tail_mean"}
    acc = saved["tt_acceptance"]
    # tt_start = 20: one TT run, before update 20 (0-based counter), i.e. on step 21
    assert acc["num_runs"] == 1 and acc["steps"] == [21]
    assert 0.0 <= acc["mean"] <= 1.0
    assert saved["config"]["tt_start"] == 20 and saved["config"]["num_train"] == 300
    assert saved["config"]["commit"]
    assert result["final"].keys() == saved["final"].keys()


def test_missing_data_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "nope.npz")
    with pytest.raises(SystemExit, match="binarized MNIST not found"):
        example.main(["--quick", "--data", missing, "--out", str(tmp_path / "o")])
    with pytest.raises(FileNotFoundError, match="--data"):
        example.load_mnist(missing, 10, 10, 0)


def test_trans_sap_budget_and_pseudo_likelihood():
    args = example.parse_args([])
    # the paper's budget: 100,000 Gibbs steps, TT (98 sweeps a run) every 200 updates in the last 50,000
    assert args.tt_start == 50_000 and args.constant_updates == 10_000
    updates = example.trans_sap_updates(args)
    spent = updates + 98 * int(example.tt_runs_before(updates, 50_000, 200))
    assert spent <= 100_000 < updates + 1 + 98 * int(example.tt_runs_before(updates + 1, 50_000, 200))
    assert example.check_pseudo_likelihood_against_library() < 1e-4


def test_tt_acceptance_counts_only_updates_with_a_tt_run():
    import numpy as np

    steps = {
        "step": np.arange(1, 6),
        "kernel_info.extra_ran": np.array([0.0, 1.0, 0.0, 1.0, 0.0]),
        "kernel_info.extra.acceptance_probability": np.array([0.0, 0.6, 0.0, 1.0, 0.0]),
    }
    acc = example.tt_acceptance(steps)
    assert acc["num_runs"] == 2 and acc["steps"] == [2, 4]
    assert acc["mean"] == pytest.approx(0.8)
    assert example.tt_acceptance({"step": np.arange(1, 3), "grad_norm": np.ones(2)}) is None


def test_bad_methods_are_rejected(tmp_path):
    with pytest.raises(SystemExit):
        example.parse_args(["--methods", "CD-1", "--out", str(tmp_path)])
