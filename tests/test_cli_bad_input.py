"""Bad input to the ``ugm-infer`` command line: one line naming the option, exit code 2, nothing written.

Every case runs ``main()`` in process on a shared folder of prepared files (good and
hostile data files, saved models, planted links) and checks that

* the exit code is 2 and stderr is exactly one line ``ugm-infer: error: ...``;
* that line names the option (or argument) at fault and says what is wrong;
* nothing was created, changed or removed in the folder (no empty output folders).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile

import jax
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer.cli import main


def _save_rbm(folder, num_visible=4, num_hidden=2):
    model = ui.models.rbm(num_visible, num_hidden)
    params = model.init_params(jax.random.key(0), 0.1)
    ui.save_model(folder, "rbm", {"num_visible": num_visible, "num_hidden": num_hidden}, params)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A folder of inputs: ``good.csv`` (20 x 4 binary) and friends, and saved models."""
    d = tmp_path_factory.mktemp("bad_input")
    rng = np.random.default_rng(0)
    good = (rng.random((20, 4)) < 0.5).astype(int)
    np.savetxt(d / "good.csv", good, delimiter=",", fmt="%d")
    np.savez(d / "good.npz", train=good.astype(np.float32))
    # a data archive whose member claims a 2x2 array but expands to 10 MB (checked before decompressing)
    member = io.BytesIO()
    np.lib.format.write_array(member, np.ones((2, 2), np.uint8))
    with zipfile.ZipFile(d / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("train.npy", member.getvalue() + b"\0" * 10**7)
    np.savetxt(d / "three_cols.csv", good[:, :3], delimiter=",", fmt="%d")
    np.savetxt(d / "forty_cols.csv", (rng.random((5, 40)) < 0.5).astype(int), delimiter=",", fmt="%d")
    (d / "header.csv").write_text("a,b,c,d\n" + "\n".join(",".join(map(str, r)) for r in good) + "\n")
    (d / "nan.csv").write_text("0,1,nan,0\n1,0,1,0\n")
    (d / "data.parquet").write_text("not really")
    np.save(d / "one_d.npy", good[0].astype(np.float32))
    np.save(d / "wide.npy", (rng.random((2, 100_000)) < 0.5).astype(np.uint8))
    (d / "adir").mkdir()
    (d / "existing.txt").write_text("keep me\n")
    # output folders with an earlier result / a planted link
    (d / "used").mkdir()
    (d / "used" / "index.html").write_text("earlier report\n")
    (d / "planted").mkdir()
    os.symlink(d / "existing.txt", d / "planted" / "model.json")
    (d / "planted_sample").mkdir()
    os.symlink(d / "existing.txt", d / "planted_sample" / "diagnosis.txt")
    # config files
    (d / "force.json").write_text('{"force": true}')
    (d / "unknown.json").write_text('{"epochz": 3}')
    (d / "nan_lr.json").write_text('{"learning-rate": NaN}')
    (d / "broken.json").write_text('{"epochs": ')
    # saved models: a good one and hostile ones
    _save_rbm(d / "model")
    _save_rbm(d / "big_model", 40, 40)

    def hostile(name, spec=None, params=None):
        shutil.copytree(d / "model", d / name)
        if spec is not None:
            (d / name / "model.json").write_text(json.dumps(spec) if not isinstance(spec, str) else spec)
        if params is not None:
            params(d / name / "params.npz")

    fmt = "ugm_infer.model/1"
    hostile("no_family", {"format": fmt, "kwargs": {"num_visible": 4, "num_hidden": 2}})
    hostile("huge_spec", {"format": fmt, "family": "ising", "kwargs": {"num_spins": 3_000_000}})
    hostile("unknown_key", {"format": fmt, "family": "rbm", "kwargs": {"num_visible": 4, "num_hidden": 2}, "code": "x"})
    hostile("bad_kwarg", {"format": fmt, "family": "rbm", "kwargs": {"num_visible": 4, "num_hidden": "2"}})
    hostile("not_json", "{family: rbm")

    def truncate(path):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    hostile("truncated_npz", params=truncate)
    hostile("wrong_shape", params=lambda p: np.savez(p, W=np.zeros((4, 3)), b=np.zeros(4), c=np.zeros(3)))
    # a small file that would expand to 64 MB: refused from the archive's headers
    hostile("zip_bomb", params=lambda p: np.savez_compressed(p, W=np.zeros((4000, 4000), np.float32), b=0, c=0))
    hostile("object_array", params=lambda p: np.savez(p, W=np.zeros((4, 2), object), b=np.zeros(4), c=np.zeros(2)))
    return d


def _snapshot(folder):
    return sorted(
        (str(p.relative_to(folder)), p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
        for p in folder.rglob("*")
    )


# (argv with {d} for the folder, words the one-line message must contain); --out is {d}/out unless given
CASES = {
    # ---- fit: data ----
    "fit without --data": (["fit"], ["--data is required"]),
    "--data without a value": (["fit", "--data"], ["--data", "expected one argument"]),
    "--data missing": (["fit", "--data", "{d}/missing.csv"], ["--data", "not found"]),
    "--data is a folder": (["fit", "--data", "{d}/adir"], ["--data", "is a folder"]),
    "--data 1-D array": (["fit", "--data", "{d}/one_d.npy"], ["--data", "1-D", "reshape"]),
    "--data header read as data": (["fit", "--data", "{d}/header.csv", "--header", "no"], ["--data", "--header yes"]),
    "--data NaN": (["fit", "--data", "{d}/nan.csv"], ["--data", "NaN"]),
    "--data unknown type": (["fit", "--data", "{d}/data.parquet"], ["--data", "unsupported data file type"]),
    "--data zip bomb": (["fit", "--data", "{d}/bomb.npz"], ["--data", "expands to", "more than its array"]),
    "--data-key unknown": (["fit", "--data", "{d}/good.npz", "--data-key", "nope"], ["--data", "no array named 'nope'"]),
    "--unpack-bits on floats": (["fit", "--data", "{d}/good.csv", "--unpack-bits", "8"], ["--data", "--unpack-bits"]),
    "--eval-data columns": (
        ["fit", "--data", "{d}/good.csv", "--eval-data", "{d}/three_cols.csv"],
        ["--eval-data", "columns"],
    ),
    "--model ising on 0/1": (["fit", "--data", "{d}/good.csv", "--model", "ising"], ["--data", "spins"]),
    "--header bad value": (["fit", "--data", "{d}/good.csv", "--header", "maybe"], ["--header must be one of"]),
    # ---- fit: options ----
    "--learning-rate nan": (["fit", "--data", "{d}/good.csv", "--learning-rate", "nan"], ["--learning-rate", "finite"]),
    "--learning-rate inf": (["fit", "--data", "{d}/good.csv", "--learning-rate", "inf"], ["--learning-rate", "finite"]),
    "--learning-rate 0": (["fit", "--data", "{d}/good.csv", "--learning-rate", "0"], ["--learning-rate", "positive"]),
    "--learning-rate diverges": (
        ["fit", "--data", "{d}/good.csv", "--model", "boltzmann_machine", "--learning-rate", "1e38", "--epochs", "2"],
        ["--learning-rate", "diverged", "nothing was saved"],
    ),
    "--learning-rate negative": (["fit", "--data", "{d}/good.csv", "--learning-rate=-0.1"], ["--learning-rate", "positive"]),
    "--epochs 0": (["fit", "--data", "{d}/good.csv", "--epochs", "0"], ["--epochs must be a positive integer"]),
    "--batch-size negative": (["fit", "--data", "{d}/good.csv", "--batch-size", "-3"], ["--batch-size must be a positive"]),
    "--sweeps 0": (["fit", "--data", "{d}/good.csv", "--sweeps", "0"], ["--sweeps must be a positive integer"]),
    "--seed negative": (["fit", "--data", "{d}/good.csv", "--seed", "-1"], ["--seed must be a non-negative integer"]),
    "--learner unknown": (["fit", "--data", "{d}/good.csv", "--learner", "nope"], ["--learner must be one of"]),
    "--model unknown": (["fit", "--data", "{d}/good.csv", "--model", "nope"], ["--model must be one of"]),
    "--beta-min 1.5": (["fit", "--data", "{d}/good.csv", "--beta-min", "1.5"], ["--beta-min must be a number in [0, 1)"]),
    "--num-betas 1": (["fit", "--data", "{d}/good.csv", "--num-betas", "1"], ["--num-betas must be an integer >= 2"]),
    "--kernel for sap": (
        ["fit", "--data", "{d}/good.csv", "--learner", "sap", "--kernel", "x"],
        ["--kernel must be one of"],
    ),
    "--max-model-bytes 0": (["fit", "--data", "{d}/good.csv", "--max-model-bytes", "0"], ["--max-model-bytes must be"]),
    "unknown option": (["fit", "--data", "{d}/good.csv", "--nope"], ["unrecognized arguments: --nope"]),
    "unknown command": (["nope"], ["COMMAND", "invalid choice"]),
    "demo --hidden 30": (["demo", "--hidden", "30"], ["--hidden must be between 1 and 24"]),
    # ---- fit: sizes estimated before allocation ----
    "--hidden too many": (["fit", "--data", "{d}/wide.npy", "--hidden", "100000"], ["--hidden", "GB", "fewer hidden units"]),
    "dense model too wide": (["fit", "--data", "{d}/wide.npy", "--model", "boltzmann_machine"], ["--data", "--model rbm"]),
    "--num-chains too many": (
        ["fit", "--data", "{d}/good.csv", "--num-chains", "10000000000000"],
        ["--num-chains", "fewer"],
    ),
    # ---- fit: output safety ----
    "--out is a file": (["fit", "--data", "{d}/good.csv", "--out", "{d}/existing.txt"], ["--out", "not a folder"]),
    "--out holds a report": (["fit", "--data", "{d}/good.csv", "--out", "{d}/used"], ["--out", "exists", "--force"]),
    "--out planted link": (["fit", "--data", "{d}/good.csv", "--out", "{d}/planted"], ["--out", "symbolic link"]),
    "--resume with --force": (["fit", "--data", "{d}/good.csv", "--resume", "--force"], ["--resume and --force"]),
    "--resume with nothing saved": (["fit", "--data", "{d}/good.csv", "--resume"], ["--resume", "no checkpoint"]),
    # ---- config files ----
    "--config sets force": (["fit", "--data", "{d}/good.csv", "--config", "{d}/force.json"], ["--config", "--force"]),
    "--config unknown key": (["fit", "--data", "{d}/good.csv", "--config", "{d}/unknown.json"], ["--config", "epochz"]),
    "--config NaN rate": (["fit", "--data", "{d}/good.csv", "--config", "{d}/nan_lr.json"], ["--learning-rate", "--config"]),
    "--config broken": (["fit", "--data", "{d}/good.csv", "--config", "{d}/broken.json"], ["--config", "cannot parse"]),
    "--config missing": (["fit", "--data", "{d}/good.csv", "--config", "{d}/nope.toml"], ["--config", "not found"]),
    # ---- evaluate ----
    "evaluate without --data": (["evaluate", "{d}/model"], ["--data is required"]),
    "evaluate without MODEL_DIR": (["evaluate"], ["MODEL_DIR"]),
    "evaluate --out existing": (
        ["evaluate", "{d}/model", "--data", "{d}/good.csv", "--out", "{d}/existing.txt"],
        ["--out", "--force"],
    ),
    "evaluate --out folder": (
        ["evaluate", "{d}/model", "--data", "{d}/good.csv", "--out", "{d}/adir"],
        ["--out", "is a folder"],
    ),
    "evaluate --data columns": (["evaluate", "{d}/model", "--data", "{d}/three_cols.csv"], ["--data", "columns"]),
    "evaluate --method unknown": (
        ["evaluate", "{d}/model", "--data", "{d}/good.csv", "--method", "x"],
        ["--method must be one of"],
    ),
    "evaluate --method exact too big": (
        ["evaluate", "{d}/big_model", "--data", "{d}/forty_cols.csv", "--method", "exact"],
        ["--method exact", "too large to enumerate", "--method ais"],
    ),
    "evaluate --num-runs 0": (
        ["evaluate", "{d}/model", "--data", "{d}/good.csv", "--num-runs", "0"],
        ["--num-runs must be"],
    ),
    # ---- saved models (loading is bounded and checked) ----
    "model folder missing": (["evaluate", "{d}/nowhere", "--data", "{d}/good.csv"], ["MODEL_DIR", "no saved model"]),
    "model.json without family": (["evaluate", "{d}/no_family", "--data", "{d}/good.csv"], ["MODEL_DIR", "family"]),
    "model.json too large a model": (
        ["evaluate", "{d}/huge_spec", "--data", "{d}/good.csv"],
        ["MODEL_DIR", "--max-model-bytes"],
    ),
    "model.json unknown key": (["evaluate", "{d}/unknown_key", "--data", "{d}/good.csv"], ["MODEL_DIR", "unknown key"]),
    "model.json bad kwarg": (["evaluate", "{d}/bad_kwarg", "--data", "{d}/good.csv"], ["MODEL_DIR", "num_hidden"]),
    "model.json not JSON": (["evaluate", "{d}/not_json", "--data", "{d}/good.csv"], ["MODEL_DIR", "not valid JSON"]),
    "params.npz truncated": (
        ["evaluate", "{d}/truncated_npz", "--data", "{d}/good.csv"],
        ["MODEL_DIR", "params.npz", "damaged"],
    ),
    "params.npz wrong shape": (["evaluate", "{d}/wrong_shape", "--data", "{d}/good.csv"], ["MODEL_DIR", "shape"]),
    "params.npz zip bomb": (["sample", "{d}/zip_bomb"], ["MODEL_DIR", "shape (4000, 4000)"]),
    "params.npz object array": (["sample", "{d}/object_array"], ["MODEL_DIR", "dtype object"]),
    "--max-model-bytes below the model": (["sample", "{d}/model", "--max-model-bytes", "10"], ["MODEL_DIR", "limit"]),
    # ---- sample ----
    "sample --num-chains 0": (["sample", "{d}/model", "--num-chains", "0"], ["--num-chains must be a positive integer"]),
    "sample --num-warmup negative": (["sample", "{d}/model", "--num-warmup=-1"], ["--num-warmup must be a non-negative"]),
    "sample --kernel unknown": (["sample", "{d}/model", "--kernel", "nope"], ["--kernel must be one of"]),
    "sample --out planted link": (["sample", "{d}/model", "--out", "{d}/planted_sample"], ["--out", "symbolic link"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(name, ws, capsys, monkeypatch):
    argv, words = CASES[name]
    argv = [a.replace("{d}", str(ws)) for a in argv]
    if argv and argv[0] in ("fit", "demo", "sample") and "--out" not in argv:
        argv += ["--out", str(ws / "out")]
    monkeypatch.delenv("UGM_MAX_MODEL_BYTES", raising=False)
    before = _snapshot(ws)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ugm-infer: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])
    assert _snapshot(ws) == before  # nothing created (no empty --out folder), nothing overwritten


def test_bad_size_limit_in_the_environment(ws, capsys, monkeypatch):
    monkeypatch.setenv("UGM_MAX_MODEL_BYTES", "lots")
    assert main(["evaluate", str(ws / "model"), "--data", str(ws / "good.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "UGM_MAX_MODEL_BYTES" in err[0]
    monkeypatch.setenv("UGM_MAX_MODEL_BYTES", "1e9")  # a valid limit: the same command works
    assert main(["evaluate", str(ws / "model"), "--data", str(ws / "good.csv")]) == 0


def test_load_model_errors_are_value_errors(ws):
    """The same hostile folders through the library: ``ValueError`` naming the file, before any large allocation."""
    for name, match in [
        ("no_family", "model.json: no 'family'"),
        ("huge_spec", "over the limit"),
        ("unknown_key", "unknown key"),
        ("bad_kwarg", "kwargs.num_hidden"),
        ("truncated_npz", "params.npz: not a readable .npz"),
        ("wrong_shape", "has shape"),
        ("zip_bomb", "has shape"),
        ("object_array", "dtype object"),
    ]:
        with pytest.raises(ValueError, match=match):
            ui.load_model(ws / name)
    with pytest.raises(ValueError, match="over the limit"):
        ui.load_model(ws / "model", max_bytes=10)
    with pytest.raises(FileNotFoundError, match="no saved model"):
        ui.load_model(ws / "nowhere")
