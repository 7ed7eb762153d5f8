"""Tests of ``ugm_infer.plots``: every function draws on tiny inputs and saves a PNG.

Inputs are hand-made (no sampling, no compilation) except where the conversion itself
is under test elsewhere (tests/test_diagnostics.py).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import ugm_infer as ui  # noqa: E402
import ugm_infer.diagnostics as dg  # noqa: E402
import ugm_infer.plots as plots  # noqa: E402
from ugm_infer.fit import FitResult  # noqa: E402
from ugm_infer.kernels.parallel_tempering import ParallelTemperingInfo  # noqa: E402
from ugm_infer.sampling import SampleResult  # noqa: E402
from ugm_infer.smc import TemperedSMCResult  # noqa: E402

RNG = np.random.default_rng(0)


def _saved(fig, tmp_path, name):
    assert isinstance(fig, Figure)
    path = tmp_path / f"{name}.png"
    fig.savefig(path, dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 300
    return path


def _history(scale=1.0, with_pf=False):
    steps = np.arange(1, 21)
    st = {"step": steps, "epoch_index": steps // 10, "grad_norm": scale / steps}
    if with_pf:
        st.update(ess=np.linspace(50, 20, 20), resampled=(steps % 3 == 0).astype(float))
    else:
        st.update(min_ess=np.linspace(90, 60, 20), num_bridges=1.0 + steps % 4)
    return {
        "evaluations": {
            "step": np.array([5, 10, 15, 20]),
            "epoch": np.array([0.5, 1.0, 1.5, 2.0]),
            "wall_time": np.array([0.1, 0.2, 0.3, 0.4]) * scale,
            "train_log_likelihood": -np.array([5.0, 4.5, 4.2, 4.1]) * scale,
        },
        "steps": st,
        "epochs": {},
        "timing": {},
    }


def test_learning_curves(tmp_path):
    model = ui.models.ising(3)
    a = FitResult({}, _history(1.0), None, model, "psmc")
    fig = plots.plot_learning_curves([("psmc", a), ("other", _history(1.2))], x="wall_time")
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and ax.get_xlabel() == "training time (s)"
    np.testing.assert_allclose(ax.lines[1].get_ydata(), _history(1.2)["evaluations"]["train_log_likelihood"])
    _saved(fig, tmp_path, "curves")
    fig = plots.plot_learning_curves(a, metric="grad_norm")  # a per-step field
    assert len(fig.axes[0].lines[0].get_xdata()) == 20
    with pytest.raises(ValueError, match="x"):
        plots.plot_learning_curves(a, x="time")
    with pytest.raises(ValueError, match="nope"):
        plots.plot_learning_curves(a, metric="nope")
    with pytest.raises(TypeError, match="results\\[0\\]"):
        plots.plot_learning_curves([a])


def test_sample_grid_and_ax(tmp_path):
    from matplotlib.figure import Figure as F

    spins = RNG.choice([-1.0, 1.0], size=(10, 12))
    fig = plots.plot_sample_grid({"v": spins, "h": np.zeros((10, 2))}, (3, 4), num_columns=5)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (2 * 4 + 1, 5 * 5 + 1)  # 2 rows x 5 columns of 3x4 images with 1-pixel gaps
    np.testing.assert_array_equal(image[1:4, 1:5], (spins[0].reshape(3, 4) + 1) / 2)
    _saved(fig, tmp_path, "grid")
    host = F()
    ax = host.add_subplot()
    assert plots.plot_sample_grid(spins, (3, 4), ax=ax) is host
    with pytest.raises(ValueError, match="image_shape"):
        plots.plot_sample_grid(spins, (5, 5))
    with pytest.raises(TypeError, match="ax"):
        plots.plot_sample_grid(spins, (3, 4), ax="here")


def _idata():
    s = RNG.choice([-1.0, 1.0], size=(2, 60, 4)).astype(np.float32)
    return dg.to_arviz(SampleResult({"s": s}, RNG.normal(size=(2, 60)), None, None), raw=True)


def test_trace_and_autocorr(tmp_path):
    idata = _idata()
    fig = plots.plot_trace(idata)
    assert len(fig.axes) == 4  # energy, mean_s: density + trace each; raw "s" skipped
    _saved(fig, tmp_path, "trace")
    _saved(plots.plot_autocorr(idata, var_names=["energy"], max_lag=20), tmp_path, "autocorr")
    with pytest.raises(TypeError, match="InferenceData"):
        plots.plot_trace(42)


def test_ladder(tmp_path):
    betas = np.array([0.1, 0.3, 0.6, 1.0])
    fig = plots.plot_ladder(betas, [0.5, 0.05, 0.8])
    bars = fig.axes[0].patches
    assert [round(p.get_height(), 2) for p in bars] == [0.5, 0.05, 0.8]
    assert bars[1].get_facecolor()[0] > bars[0].get_facecolor()[0]  # the slow pair is highlighted (red)
    _saved(fig, tmp_path, "ladder")
    # from a PT run's InferenceData: betas from constant_data, measured rates
    attempted = np.zeros((1, 10, 3), bool)
    attempted[:, ::2, 0::2] = True
    attempted[:, 1::2, 1] = True
    info = ParallelTemperingInfo(attempted * np.float32(0.4), attempted, attempted, np.zeros((1, 10), np.int32))
    idata = dg.to_arviz(SampleResult(None, None, info, None), betas=betas)
    fig = plots.plot_ladder(idata)
    np.testing.assert_allclose([p.get_height() for p in fig.axes[0].patches], 0.4, rtol=1e-6)
    with pytest.raises(ValueError, match="swap_rates"):
        plots.plot_ladder(betas, [0.5])
    with pytest.raises(ValueError, match="betas"):
        plots.plot_ladder([1.0, 0.5])


def test_smc_diagnostics(tmp_path):
    model = ui.models.ising(3)
    for name, hist in (("psmc", _history()), ("pf", _history(with_pf=True))):
        fig = plots.plot_smc_diagnostics(FitResult({}, hist, None, model, name))
        assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 1
        _saved(fig, tmp_path, name)
    r, steps = 2, 4
    lam = np.full((r, 6), np.nan)
    lam[:, :steps] = np.linspace(0.25, 1.0, steps)
    res = TemperedSMCResult(0.0, 0.1, np.zeros(r), np.full(r, steps), lam, np.where(np.isnan(lam), np.nan, 0.6),
                            np.zeros_like(lam), {"s": np.ones((r, 5, 3))}, np.full((r, 5), 0.2))  # fmt: skip
    fig = plots.plot_smc_diagnostics(res)
    assert len(fig.axes[1].lines) == r and "4-4" in fig.axes[1].get_title()
    _saved(fig, tmp_path, "smc")
    with pytest.raises(TypeError, match="source"):
        plots.plot_smc_diagnostics(3)
    with pytest.raises(ValueError, match="ESS"):
        plots.plot_smc_diagnostics({"steps": {"step": np.arange(3), "grad_norm": np.ones(3)}})


def test_import_does_not_load_pyplot():
    import subprocess
    import sys

    code = "import ugm_infer.diagnostics, ugm_infer.plots, sys; print('matplotlib.pyplot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
