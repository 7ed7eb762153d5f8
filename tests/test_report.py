"""The report pages of ``ugm-infer demo / fit / sample / evaluate``: what they show is what was computed.

Cheap checks of the pieces (number formatting, readings, the metrics table, keeping the
best model) and end-to-end runs on tiny budgets: the demo's two learners share a budget
and the better model by held-out log-likelihood is the one saved; every command's page
has the sections that apply to it and no others.  The page in a real browser:
``tests/test_browser.py``.
"""

from __future__ import annotations

import html
import json
import re
from types import SimpleNamespace

import jax
import numpy as np
import pytest

import ugm_infer as ui
from ugm_infer.cli import _best, _figures, _report, main
from ugm_infer.cli._page import Page, fmt
from ugm_infer.datasets import load_digits14


def _history(eval_ll, train_ll=None, steps_per_epoch=10):
    n = len(eval_ll)
    steps = np.arange(n) * steps_per_epoch
    ev = {"step": steps, "epoch": steps / steps_per_epoch, "eval_log_likelihood": np.asarray(eval_ll, float)}
    ev["train_log_likelihood"] = np.asarray(train_ll if train_ll is not None else eval_ll, float) + 1.0
    return {"evaluations": ev, "timing": {"train_seconds": 1.5}}


def _learner(label, eval_ll, kept_index, chains=None):
    hist = _history(eval_ll)
    ev = hist["evaluations"]
    metrics = {k: float(ev[k][kept_index]) for k in ("eval_log_likelihood", "train_log_likelihood")}
    kept = {"step": int(ev["step"][kept_index]), "epoch": float(ev["epoch"][kept_index]), "metrics": metrics}
    return _report.LearnerReport(label.lower(), label, SimpleNamespace(history=hist), kept, 2.0, 5, chains)


def test_numbers_never_read_nan_or_none():
    assert fmt(float("nan")) == fmt(None) == "n/a"
    assert fmt(-0.001) == "0.00" and fmt(-3.14159, 3) == "−3.142" and fmt(12345.6, 0) == "12,346"
    assert fmt(0.5, 2, signed=True) == "+0.50" and fmt(float("inf")) == "∞"
    page = Page("t <b>", "intro & more")
    page.table(["a", "b"], [["x", fmt(float("nan"))]])
    text = page.render()
    assert "t &lt;b&gt;" in text and "intro &amp; more" in text and "n/a" in text
    assert not re.search(r"\b(nan|None)\b", text)


def test_metrics_table_has_one_row_per_quantity():
    a = _learner("PCD-5", [-73.0, -60.0, -55.0, -56.0], kept_index=2)
    b = _learner("PT-SAP", [-73.0, -61.0, -58.0, -54.0], kept_index=3)
    rows = _report._metrics_rows([a, b], "log_likelihood")
    firsts = [r[0] for r in rows]
    assert len(firsts) == len(set(firsts)), firsts
    assert all(len(r) == 3 for r in rows)
    by_name = {r[0]: r[1:] for r in rows}
    assert by_name["held-out log-likelihood, kept model"] == ["−55.00", "−54.00"]
    assert by_name["held-out log-likelihood, last epoch"] == ["−56.00", "−54.00"]
    assert by_name["kept model from"] == ["epoch 2", "epoch 3"]
    # a model kept at the last evaluation: no separate "last epoch" row (it would repeat the kept one)
    rows = _report._metrics_rows([b], "log_likelihood")
    assert not any("last epoch" in r[0] for r in rows)


def test_readings_are_computed_from_the_numbers():
    a = _learner("PCD-5", [-73.0, -60.0, -55.0, -56.0], kept_index=2)
    b = _learner("PT-SAP", [-73.0, -61.0, -58.0, -54.0], kept_index=3)
    reference = {"independent_sites": {"train": -61.0, "eval": -73.3}, "uniform": {"train": -135.9, "eval": -135.9}}
    text = _figures._curves_reading([a, b], reference, "log_likelihood", "eval", "pixels")
    assert "PCD-5 −55.00 at epoch 2, 1.00 lower at the end" in text
    assert "PT-SAP −54.00 at epoch 3;" not in text and "PT-SAP −54.00 at epoch 3." in text
    assert "Independent pixels: −73.30 (+19.30 for the best)" in text
    data = np.zeros((10, 4))
    data[:, 0] = 1  # a quarter of the sites on
    samples = [("A", np.ones((5, 4))), ("B", data[:5])]
    text = _figures._samples_reading(data, samples)
    assert "data 0.250, A 1.000, B 0.250" in text and "A 0.750, B 0.000" in text

    def chains(ess):
        diagnosis = SimpleNamespace(table={"energy": {"rhat": 1.002, "ess_bulk": ess, "ess_tail": ess / 2}})
        return SimpleNamespace(
            diagnosis=diagnosis, idata=SimpleNamespace(posterior=SimpleNamespace(sizes={"chain": 4, "draw": 50}))
        )

    text = _figures._traces_reading([("A", chains(100.0)), ("B", chains(250.0))], "energy")
    assert "4 chains x 50 draws" in text and "B's chains give 2.5x the bulk ESS of A's" in text


class _State(SimpleNamespace):
    pass


def test_keep_best_saves_the_first_best_held_out_model(tmp_path):
    """Only a held-out value above every earlier one is saved; ties keep the earlier model."""
    model = ui.models.boltzmann_machine(3)
    folder = tmp_path / "best"
    keep = _best.KeepBest(folder, "boltzmann_machine", {"num_units": 3})
    values, steps, params = [], [], []
    for step, value in [(0, -3.0), (10, -2.5), (20, -2.7), (30, -2.5), (40, -2.6)]:
        p = model.init_params(jax.random.key(step), 0.5)
        values.append(value)
        steps.append(step)
        params.append(p)
        history = {"evaluations": {"step": np.asarray(steps), "eval_log_likelihood": np.asarray(values)}}
        state = _State(params=p, particles={"s": np.full((2, 3), step, np.float32)})
        if step:  # ui.fit calls back after a chunk, never for the evaluation before training
            keep(SimpleNamespace(step=step, metrics={"eval_log_likelihood": value}, state=state, history=history))
    assert json.loads((folder / "best.json").read_text())["step"] == 10
    result = SimpleNamespace(history=history, params=params[-1], state=_State(params=params[-1], particles={}))
    kept = _best.kept_model(folder, result, params[0])
    assert kept.step == 10 and np.all(kept.particles["s"] == 10)
    np.testing.assert_allclose(np.asarray(kept.params["W"]), np.asarray(params[1]["W"]), rtol=1e-6)
    # the evaluation before training is the best: the initial parameters are kept
    history["evaluations"]["eval_log_likelihood"] = np.asarray([-1.0, -2.5, -2.7, -2.5, -2.6])
    assert _best.kept_model(folder, result, params[0]).params is params[0]
    # no held-out data: the last model
    del history["evaluations"]["eval_log_likelihood"]
    assert _best.kept_model(folder, result, params[0]).step == 40


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    argv = ["demo", "--quick", "--epochs", "3", "--eval-every", "1", "--hidden", "3", "--num-betas", "3"]
    argv += ["--num-chains", "8", "--learning-rate", "0.2", "--progress", "off", "--out", str(out)]
    assert main(argv) == 0
    return out


def _sections(index) -> list[str]:
    return re.findall(r'<h2 id="([a-z]+)">', index.read_text())


def test_demo_compares_two_learners_on_one_budget_and_saves_the_better(demo):
    metrics = json.loads((demo / "metrics.json").read_text())
    learners = metrics["learners"]
    assert list(learners) == ["pcd", "pt_sap"]
    # the same budget: PCD makes one Gibbs sweep per temperature of PT-SAP
    assert learners["pcd"]["sweeps_per_update"] == learners["pt_sap"]["sweeps_per_update"] == 3
    assert learners["pcd"]["evaluations"]["step"] == learners["pt_sap"]["evaluations"]["step"]
    # the same starting point: the evaluation before training is identical
    for key in ("train_log_likelihood", "eval_log_likelihood"):
        assert learners["pcd"]["evaluations"][key][0] == learners["pt_sap"]["evaluations"][key][0]
    # each learner keeps its first best held-out evaluation; the better one is saved
    best = {}
    for name, entry in learners.items():
        values = entry["evaluations"]["eval_log_likelihood"]
        i = int(np.argmax(values))
        assert entry["kept"]["step"] == entry["evaluations"]["step"][i]
        best[name] = values[i]
    winner = max(best, key=best.get)
    assert metrics["saved"]["learner"] == winner and metrics["final"]["eval_log_likelihood"] == best[winner]
    model, params = ui.load_model(demo)
    test = load_digits14()["test"]
    exact = float(ui.exact.average_log_likelihood(model, params, {"v": test}))
    assert exact == pytest.approx(best[winner], abs=1e-3)
    # the page: every section, the numbers of metrics.json, no row twice
    assert _sections(demo / "index.html") == ["curves", "samples", "mixing", "ladder", "metrics", "files"]
    text = html.unescape((demo / "index.html").read_text())
    assert f"{best[winner]:.2f}".replace("-", "−") in text
    page = (demo / "index.html").read_text()
    metrics_section = page[page.index('<h2 id="metrics">') : page.index('<h2 id="files">')]
    rows = re.findall(r"<tr><th>(.*?)</th>", metrics_section)
    assert len(rows) == len(set(rows)), rows
    for name in ("history_pcd.nc", "history_pt_sap.nc", "chains_pcd.nc", "chains_pt_sap.nc"):
        assert (demo / name).is_file(), name
    chains = ui.diagnostics.from_netcdf(demo / "chains_pt_sap.nc")
    assert chains.posterior["energy"].shape == (8, 500) and "swap_acceptance" in chains.sample_stats


def test_sample_and_evaluate_pages_keep_the_layout(demo, tmp_path):
    """`sample` and `evaluate --report` write the same page shape, with only the sections that apply."""
    smp = tmp_path / "smp"
    argv = ["sample", str(demo), "--kernel", "parallel_tempering", "--num-betas", "3", "--num-chains", "4"]
    assert main([*argv, "--num-steps", "40", "--num-warmup", "5", "--out", str(smp)]) == 0
    assert _sections(smp / "index.html") == ["samples", "mixing", "ladder", "metrics", "files"]
    for name in ("samples.png", "trace.png", "ladder.png", "samples.nc", "diagnosis.txt", "final_states.npz"):
        assert (smp / name).is_file(), name
    digits = tmp_path / "test.npy"
    np.save(digits, load_digits14()["test"][:50])
    assert main(["evaluate", str(demo), "--data", str(digits), "--report", str(tmp_path / "ev")]) == 0
    assert _sections(tmp_path / "ev" / "index.html") == ["metrics", "files"]
    row = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert row["method"] == "exact" and row["num_examples"] == 50
    text = (tmp_path / "ev" / "index.html").read_text()
    assert not re.search(r"\b(nan|None)\b", text)
