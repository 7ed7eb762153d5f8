"""The ``ugm-infer`` command line: fit / evaluate / sample round trip, and user errors.

User errors exit with code 2 and one line on stderr, no traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

import arviz as az
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer.cli import main


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "ugm_infer.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_bad_options_exit_2_with_one_line(capsys):
    # the console entry point in a real interpreter once ...
    proc = _cli("demo", "--epochs", "0", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--epochs must be a positive integer" in lines[0]
    assert lines[0].startswith("ugm-infer: error:") and "Traceback" not in proc.stderr
    # ... and the same code path in process (one interpreter start less)
    assert main(["demo", "--hidden", "30"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--hidden must be between 1 and 24" in lines[0]
    assert lines[0].startswith("ugm-infer: error:")


def test_unknown_option_is_a_one_line_error(capsys):
    # argparse's own errors (unknown options, missing arguments) are one line too, not the usage block
    assert main(["demo", "--nope"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "unrecognized arguments: --nope" in lines[0]


@pytest.fixture(scope="module")
def binary_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = (rng.random((200, 6)) < 0.3).astype(int)
    x[:, 1] = x[:, 0]  # a strong pair correlation for the model to learn
    path = tmp_path_factory.mktemp("data") / "train.csv"
    np.savetxt(path, x, delimiter=",", fmt="%d")
    return path, x.astype(np.float32)


def test_fit_evaluate_sample_round_trip(binary_csv, tmp_path):
    path, x = binary_csv
    out = tmp_path / "fit"
    proc = _cli(
        "fit", "--data", str(path), "--model", "boltzmann_machine", "--learner", "pcd", "--epochs", "4",
        "--batch-size", "50", "--learning-rate", "0.1", "--num-chains", "50", "--progress", "off", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name in ("index.html", "metrics.json", "history.nc", "model.json", "params.npz", "learning_curve.png"):
        assert (out / name).is_file(), name
    # the saved model reloads in one call, and the reported likelihood is the exact one
    model, params = ui.load_model(out)
    exact = float(ui.exact.average_log_likelihood(model, params, {"s": x}))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["final"]["train_log_likelihood"] == pytest.approx(exact, abs=1e-4)
    # learning moved the parameters towards the data: the duplicated pair gets a positive coupling
    assert float(params["W"][0, 1]) > 0.1
    assert az.from_netcdf(out / "history.nc").learning_history["train_log_likelihood"].size >= 2

    proc = _cli("evaluate", str(out), "--data", str(path), "--out", str(tmp_path / "ev.json"))
    assert proc.returncode == 0, proc.stderr
    ev = json.loads((tmp_path / "ev.json").read_text())
    assert ev["method"] == "exact" and ev["log_likelihood"] == pytest.approx(exact, abs=1e-4)

    # sampling in process (same code path as the console script, one interpreter less)
    assert main(["sample", str(out), "--num-chains", "3", "--num-steps", "60", "--num-warmup", "10",
                 "--out", str(tmp_path / "smp")]) == 0  # fmt: skip
    idata = az.from_netcdf(tmp_path / "smp" / "samples.nc")
    assert idata.posterior["energy"].shape == (3, 60)
    assert (tmp_path / "smp" / "diagnosis.txt").read_text().strip()
    assert np.load(tmp_path / "smp" / "final_states.npz")["s"].shape == (3, 6)


@pytest.mark.parametrize(
    "content, extra, message",
    [
        ("0,1,0\n1,0\n", [], "malformed .csv"),
        ("", [], "empty file"),
        ("0,1,2\n1,0,1\n", [], "needs binary values"),
        ("0,1,0\n1,0,1\n", ["--learner", "nope"], "--learner must be one of"),
        ("0,1,0\n1,0,1\n", ["--batch-size", "-3"], "--batch-size must be a positive integer"),
        ("0,1,0\n1,0,1\n", ["--model", "ising"], "needs spins in {-1, +1}"),
    ],
)
def test_fit_user_errors(tmp_path, capsys, content, extra, message):
    path = tmp_path / "d.csv"
    path.write_text(content)
    assert main(["fit", "--data", str(path), "--model", "boltzmann_machine", "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_missing_files_and_bad_config(tmp_path, capsys):
    assert main(["fit", "--data", str(tmp_path / "none.npz")]) == 2
    assert "data file not found" in capsys.readouterr().err
    assert main(["fit"]) == 2
    assert "--data is required" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path), "--data", "x.csv"]) == 2
    assert "no saved model" in capsys.readouterr().err
    cfg = tmp_path / "c.json"
    cfg.write_text('{"epochz": 3}')
    assert main(["fit", "--config", str(cfg), "--data", "x.csv"]) == 2
    assert "unknown option 'epochz'" in capsys.readouterr().err


def test_config_file_sets_defaults_and_command_line_wins(tmp_path):
    from ugm_infer.cli import _parse, build_parser

    cfg = tmp_path / "c.toml"
    cfg.write_text('learner = "cd"\nepochs = 7\nnum-chains = 11\n')
    args = _parse(build_parser(), ["fit", "--config", str(cfg), "--epochs", "2"])
    assert (args.learner, args.epochs, args.num_chains) == ("cd", 2, 11)


def test_save_load_model_round_trip(tmp_path):
    import jax

    model = ui.models.rbm(5, 3)
    params = model.init_params(jax.random.key(0), 0.5)
    ui.save_model(tmp_path, "rbm", {"num_visible": 5, "num_hidden": 3}, params)
    model2, params2 = ui.load_model(tmp_path)
    assert model2.variables.keys() == model.variables.keys()
    for k in params:
        np.testing.assert_array_equal(np.asarray(params2[k]), np.asarray(params[k]))
    with pytest.raises(ValueError, match="family"):
        ui.save_model(tmp_path, "nope", {}, params)
