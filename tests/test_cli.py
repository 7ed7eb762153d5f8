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


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
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


# ----------------------------------------------------------------------------------
# defaults that learn, references, checkpoints and resume, output safety
# ----------------------------------------------------------------------------------
@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_defaults_learn_and_the_report_shows_references(binary_csv, tmp_path, capsys):
    """With no training options, fit beats the independent-sites model on data with a pair correlation.

    Column 1 duplicates column 0 (p = 0.3): independent sites miss exactly the mutual
    information H(0.3) = 0.611 nats per example, which a model that learned the pair recovers.
    """
    path, x = binary_csv
    out = tmp_path / "fit"
    assert main(["fit", "--data", str(path), "--out", str(out), "--progress", "off"]) == 0
    printed = capsys.readouterr().out
    assert "independent sites" in printed and "uniform" in printed and "verdict" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["optimizer"] == "adam" and metrics["updates"] >= 3000
    ref = metrics["reference"]
    assert ref["uniform"]["train"] == pytest.approx(-6 * np.log(2))
    p = (x.sum(0) + 1) / (len(x) + 2)  # add-one smoothed marginals
    indep = float(np.mean(np.sum(x * np.log(p) + (1 - x) * np.log(1 - p), axis=1)))
    assert ref["independent_sites"]["train"] == pytest.approx(indep, abs=1e-6)
    gain = metrics["final"]["train_log_likelihood"] - indep
    assert gain > 0.4, gain  # most of the 0.611 nats
    assert metrics["verdict"].startswith("learned")
    # the saved model keeps the training marginals: `evaluate` prints the same references
    assert main(["evaluate", str(out), "--data", str(path)]) == 0
    printed = capsys.readouterr().out
    assert f"independent sites (training marginals): {indep:.4f}" in printed
    assert "load_model" in (out / "index.html").read_text()


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_resume_continues_bit_for_bit_and_refuses_changes(binary_csv, tmp_path, capsys):
    path, _ = binary_csv
    common = ["fit", "--data", str(path), "--model", "boltzmann_machine", "--batch-size", "50", "--num-chains", "20"]
    common += ["--sweeps", "1", "--progress", "off"]
    assert main([*common, "--epochs", "6", "--out", str(tmp_path / "straight")]) == 0
    part = str(tmp_path / "part")
    assert main([*common, "--epochs", "3", "--out", part]) == 0
    capsys.readouterr()
    # the folder holds a run: neither silently overwritten nor silently resumed
    assert main([*common, "--epochs", "6", "--out", part]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*common, "--epochs", "6", "--out", part, "--resume", "--learning-rate", "0.5"]) == 2
    assert "--learning-rate is 0.5 but the run" in capsys.readouterr().err
    assert main([*common, "--epochs", "6", "--out", part, "--resume"]) == 0
    assert "resuming the run" in capsys.readouterr().err
    a = np.load(tmp_path / "straight" / "params.npz")
    b = np.load(tmp_path / "part" / "params.npz")
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])
    metrics = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert metrics["resumed_from_step"] == 12 and metrics["evaluations"]["step"][-1] == 24


def test_ctrl_c_saves_the_run_and_says_how_to_continue(tmp_path):
    """SIGINT in a real interpreter: exit 130, a checkpoint on disk, and the command that continues it."""
    import os
    import signal
    import time

    rng = np.random.default_rng(1)
    data = tmp_path / "d.csv"
    np.savetxt(data, (rng.random((20, 4)) < 0.5).astype(int), delimiter=",", fmt="%d")
    out = tmp_path / "run"
    argv = ["fit", "--data", str(data), "--model", "boltzmann_machine", "--batch-size", "10", "--num-chains", "8"]
    argv += ["--sweeps", "1", "--epochs", "100000", "--eval-every", "1", "--progress", "off", "--out", str(out)]
    # SIGINT back to its default in the child: a test run started in the background (``cmd &``) ignores SIGINT, and
    # an interpreter that starts with SIGINT ignored never raises KeyboardInterrupt
    restore_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(
        [sys.executable, "-m", "ugm_infer.cli", *argv], stderr=subprocess.PIPE, text=True, preexec_fn=restore_sigint
    )
    try:
        deadline = time.time() + 300
        while not (out / "checkpoint" / "checkpoint.json").exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)  # a guard against a hang, generous for a loaded machine
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted; the run is saved at step" in err and "Traceback" not in err
    resume = [line for line in err.splitlines() if "continue it with:" in line]
    assert len(resume) == 1 and resume[0].endswith("--resume")
    step = json.loads((out / "checkpoint" / "checkpoint.json").read_text())["step"]
    assert step > 0 and os.path.isfile(out / "run.json")
    # the printed command continues the run (here with fewer epochs, enough to finish quickly)
    epochs = step // 2 + 1
    assert main([*argv, "--resume", "--epochs", str(epochs)]) == 0
    assert json.loads((out / "metrics.json").read_text())["resumed_from_step"] == step


def test_outputs_replace_links_only_with_force(binary_csv, tmp_path, capsys):
    import os

    path, _ = binary_csv
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    model = tmp_path / "model"
    m = ui.models.boltzmann_machine(6)
    ui.save_model(model, "boltzmann_machine", {"num_units": 6}, m.init_params(__import__("jax").random.key(0), 0.1))
    smp = tmp_path / "smp"
    smp.mkdir()
    os.symlink(victim, smp / "diagnosis.txt")
    argv = ["sample", str(model), "--num-chains", "2", "--num-steps", "20", "--num-warmup", "0", "--out", str(smp)]
    assert main(argv) == 2
    assert main([*argv, "--force"]) == 0
    assert victim.read_text() == "keep me\n"  # the link was replaced, its target untouched
    assert not (smp / "diagnosis.txt").is_symlink() and (smp / "diagnosis.txt").read_text().strip()
    assert "load_model" not in (smp / "index.html").read_text()  # no model is saved there
    # evaluate --out: an existing file only with --force
    assert main(["evaluate", str(model), "--data", str(path), "--out", str(victim)]) == 2
    assert victim.read_text() == "keep me\n"
    assert main(["evaluate", str(model), "--data", str(path), "--out", str(victim), "--force"]) == 0
    assert json.loads(victim.read_text())["method"] == "exact"


def test_config_cannot_redirect_output_silently(binary_csv, tmp_path, capsys):
    from ugm_infer.cli import _parse, build_parser

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'out = "{tmp_path / "elsewhere"}"\n')
    args = _parse(build_parser(), ["fit", "--config", str(cfg), "--data", "x.csv"])
    assert args.out == str(tmp_path / "elsewhere")
    assert "output goes to" in capsys.readouterr().err
    args = _parse(build_parser(), ["fit", "--config", str(cfg), "--data", "x.csv", "--out", "mine"])
    assert args.out == "mine" and capsys.readouterr().err == ""


def test_help_shows_defaults_and_required_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "usage: ugm-infer fit --data FILE" in text and "required:" in text
    assert "(default: adam)" in text and "(default: auto)" in text and "(default: out/fit)" in text


def test_metrics_json_is_valid_json_without_finite_numbers():
    from ugm_infer.cli._report import json_text

    text = json_text({"final": {"train_log_likelihood": float("-inf"), "ok": 1.5}, "curve": [float("nan"), 2.0]})
    data = json.loads(text)  # json.loads accepts NaN; the strict check is allow_nan=False below
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))
    assert data["final"] == {"train_log_likelihood": None, "ok": 1.5} and data["curve"] == [None, 2.0]
    assert len(data["notes"]) == 2 and "final.train_log_likelihood was -inf" in data["notes"][0]


def test_csv_header_is_detected(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("# a comment\nx1,x2,x3\n0,1,0\n1,1,0\n")
    np.testing.assert_array_equal(ui.io.load_data(path), [[0, 1, 0], [1, 1, 0]])
    with pytest.raises(ValueError, match="header=True"):
        ui.io.load_data(path, header=False)


def test_verdict_needs_a_real_gain():
    from ugm_infer.cli._report import verdict

    ref = {"independent_sites": {"train": -73.3, "eval": -73.3}, "uniform": {"train": -135.9, "eval": -135.9}}
    assert verdict({"eval_log_likelihood": -53.0}, ref, "log_likelihood").startswith("learned: 20.300")
    assert verdict({"eval_log_likelihood": -73.27}, ref, "log_likelihood").startswith("barely better")
    assert verdict({"train_log_likelihood": -74.0}, ref, "log_likelihood").startswith("not better")
    assert "evaluate" in verdict({}, ref, None)
