"""Tests of ``ugm_infer.diagnostics``: InferenceData conversion, netCDF, and ``diagnose``.

The central test runs two Gibbs samplers on 6-spin dense Ising models: one weakly
coupled (mixes: every draw is nearly independent) and one strongly ferromagnetic with
chains started in opposite modes (the energy barrier between the modes is
``J (n^2 - 0) / 2 + ... = 18 J = 12.6`` nats; single spins flip back and forth, the
modes are not crossed in 300 sweeps).  ``diagnose`` must call the first ok and report the R-hat
problem of the second.  Kernel-signal logic (low swap rates, low TT acceptance, SMC
collapse, PF resampling) is checked on hand-made results, so no extra compilation is
needed.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import ugm_infer as ui
import ugm_infer.diagnostics as dg
from ugm_infer.fit import FitResult
from ugm_infer.kernels.gibbs import GibbsInfo
from ugm_infer.kernels.parallel_tempering import ParallelTemperingInfo
from ugm_infer.kernels.tempered_transitions import TemperedTransitionsInfo
from ugm_infer.sampling import SampleResult
from ugm_infer.smc import AISResult, TemperedSMCResult

N = 6
MODEL = ui.models.ising(N)


def _params(coupling: float, field: float) -> dict:
    w = np.full((N, N), coupling, np.float32)
    np.fill_diagonal(w, 0.0)
    return {"W": jnp.asarray(w), "h": jnp.full((N,), field, jnp.float32)}


WEAK = _params(0.05, 0.1)
STRONG = _params(0.7, 0.05)
# For the stuck run: with all couplings J the energy of a state with magnetisation M is
# -J (M^2 - N) / 2 - h M, so at J = 1 the free-energy barrier between the two modes is
# 17.7 - log C(6, 3) ~ 14.7 nats; a crossing in 4 chains x 300 sweeps has probability
# of order 1200 e^-14.7 ~ 5e-4 (at J = 0.7 the barrier is ~9.3 nats, ~0.1: too likely).
STUCK = _params(1.0, 0.05)
# two chains in each mode: all +1 and all -1
OPPOSITE = {"s": jnp.concatenate([jnp.ones((2, N)), -jnp.ones((2, N))]).astype(jnp.float32)}
NUM_UP = {"num_up": lambda x: jnp.sum(x["s"] > 0)}


@pytest.fixture(scope="module")
def mixing_run():
    x0 = MODEL.random_state(jax.random.key(1), 4)
    return ui.sample(jax.random.key(2), ui.kernels.gibbs(MODEL, WEAK), x0, 1000, model=MODEL, params=WEAK)


@pytest.fixture(scope="module")
def stuck_run():
    return ui.sample(jax.random.key(3), ui.kernels.gibbs(MODEL, STUCK), OPPOSITE, 300, model=MODEL, params=STUCK)


def test_diagnose_tells_mixing_from_stuck_chains(mixing_run, stuck_run):
    good = dg.diagnose(mixing_run, model=MODEL, params=WEAK, statistics=NUM_UP)
    assert good.ok, str(good)
    assert str(good).startswith("OK")
    for name in ("energy", "mean_s", "num_up"):
        assert good.table[name]["rhat"] < dg.RHAT_THRESHOLD
        assert good.table[name]["ess_bulk"] > dg.ESS_THRESHOLD

    bad = dg.diagnose(stuck_run, model=MODEL, params=STUCK, statistics={**NUM_UP, "spins": lambda x: x["s"][:2]})
    assert not bad.ok
    errors = {f.statistic: f for f in bad.errors}
    # the chains sit in opposite modes: magnetisation, number of up spins and single spins disagree
    assert {"mean_s", "num_up"} <= set(errors)
    assert any(name in errors for name in ("spins[0]", "spins[1]"))  # the worst element is named
    f = errors["mean_s"]
    assert f.value > dg.RHAT_THRESHOLD and f.threshold == dg.RHAT_THRESHOLD
    assert "R-hat" in f.message and "parallel_tempering" in f.message
    # the R-hat reported is ArviZ's rank-normalised split R-hat of the statistic
    magnetisation = dg.to_arviz(stuck_run, model=MODEL).posterior["mean_s"].values
    assert np.all(magnetisation[:2] > 0) and np.all(magnetisation[2:] < 0)  # never crossed
    with np.errstate(all="ignore"):
        arviz_rhat = float(az.rhat(magnetisation))
    if np.all(magnetisation.std(axis=1) == 0):  # constant chains at different values: R-hat is infinite
        assert f.value == np.inf and arviz_rhat > 1e10  # (ArviZ's rank normalisation gives a huge finite number)
    else:
        assert f.value == pytest.approx(arviz_rhat)
    assert bad.findings[0].severity == "error"  # most serious first
    text = str(bad)
    assert text.startswith("PROBLEMS") and "[error] mean_s: chains disagree on mean_s" in text


def test_posterior_statistics_match_the_states(mixing_run):
    stats = {"num_up": NUM_UP["num_up"], "pair": lambda x: x["s"][:3] * x["s"][1:4]}
    idata = dg.to_arviz(mixing_run, model=MODEL, params=WEAK, statistics=stats, raw=True)
    s = np.asarray(mixing_run.states["s"], np.float64)
    post = idata.posterior
    assert post.sizes["chain"] == 4 and post.sizes["draw"] == 1000
    np.testing.assert_array_equal(post["num_up"].values, (s > 0).sum(-1))
    np.testing.assert_array_equal(post["pair"].values, s[..., :3] * s[..., 1:4])
    assert post["pair"].dims == ("chain", "draw", "pair_dim_0")
    np.testing.assert_allclose(post["mean_s"].values, s.mean(-1))
    np.testing.assert_allclose(post["energy"].values, np.asarray(mixing_run.energies))
    # raw configurations as int8 spins, flagged so diagnose skips them
    assert post["s"].dtype == np.int8
    np.testing.assert_array_equal(post["s"].values, s)
    assert post.attrs["raw_variables"] == "s"
    assert idata.sample_stats["num_changed"].dims == ("chain", "draw")
    assert idata.attrs["kernel_info"] == "GibbsInfo"


def test_netcdf_round_trip(tmp_path, stuck_run):
    betas = np.array([0.2, 0.6, 1.0])
    idata = dg.to_arviz(stuck_run, model=MODEL, statistics=NUM_UP, raw=True, betas=betas, attrs={"note": "x"})
    path = dg.to_netcdf(idata, tmp_path / "run.nc")
    back = dg.from_netcdf(path)
    assert set(back.groups()) == set(idata.groups())
    for group in idata.groups():
        xr.testing.assert_identical(back[group], idata[group])
    assert back.attrs["note"] == "x" and back.attrs["ugm_infer_result"] == "sample"
    assert back.posterior["s"].dtype == np.int8
    # a diagnosis of the reloaded data is the same
    assert str(dg.diagnose(back)) == str(dg.diagnose(idata))


def test_parallel_tempering_infos_and_target_replica():
    betas = np.array([0.1, 0.4, 0.7, 1.0])
    algo = ui.kernels.parallel_tempering(MODEL, STRONG, betas=betas)
    run = ui.sample(jax.random.key(4), algo, OPPOSITE, 60)
    idata = dg.to_arviz(run, model=MODEL, params=STRONG, betas=betas)
    ss = idata.sample_stats
    assert ss["swap_acceptance"].dims == ("chain", "draw", "pair") and ss.sizes["pair"] == 3
    assert ss["swap_attempted"].dtype == np.int8  # booleans stored as int8 for netCDF
    assert ss["replica_energy"].dims == ("chain", "draw", "replica") and ss.sizes["replica"] == 4
    # posterior statistics describe the beta = 1 replica (the last)
    target = np.asarray(run.states["s"])[:, :, -1]
    np.testing.assert_allclose(idata.posterior["mean_s"].values, target.mean(-1))
    energies = np.asarray(jax.vmap(jax.vmap(lambda x: MODEL.energy(STRONG, {"s": x})))(target))
    np.testing.assert_allclose(idata.posterior["energy"].values, energies, rtol=1e-6)
    np.testing.assert_allclose(ss["replica_energy"].values[:, :, -1], energies, rtol=1e-6)
    # per-pair swap rate = accepted probability over attempted steps, all chains
    acc = np.asarray(run.infos.swap_acceptance, np.float64)
    att = np.asarray(run.infos.swap_attempted, np.float64)
    expected = (acc * att).sum((0, 1)) / att.sum((0, 1))
    np.testing.assert_allclose(dg.swap_rates(idata), expected, rtol=1e-6)
    np.testing.assert_allclose(dg.swap_rates(run), expected, rtol=1e-6)
    diagnosis = dg.diagnose(idata)
    np.testing.assert_allclose(diagnosis.table["swap_rate"], expected, rtol=1e-6)
    assert any(f.statistic == "swap_rate" and f.severity == "info" for f in diagnosis.findings)


def test_tempered_transitions_infos():
    betas = np.array([0.3, 0.6, 1.0])
    algo = ui.kernels.tempered_transitions(MODEL, STRONG, betas=betas)
    run = ui.sample(jax.random.key(5), algo, OPPOSITE, 8, model=MODEL, params=STRONG)
    idata = dg.to_arviz(run, model=MODEL, betas=betas)
    ss = idata.sample_stats
    assert ss["log_ratio_terms"].dims == ("chain", "draw", "rung") and ss.sizes["rung"] == 2
    np.testing.assert_allclose(ss["acceptance_probability"].values, np.asarray(run.infos.acceptance_probability))
    np.testing.assert_allclose(ss["log_ratio_terms"].values.sum(-1), ss["log_acceptance_ratio"].values, rtol=1e-5, atol=1e-4)
    diagnosis = dg.diagnose(idata, ess_threshold=1)
    assert diagnosis.table["tt_acceptance"] == pytest.approx(float(np.mean(run.infos.acceptance_probability)))


# --------------------------------------------------------------------------------------
# kernel signals on hand-made results (no compilation)
# --------------------------------------------------------------------------------------
def _fake_pt(rates_per_pair, chains=2, draws=50, round_trips=0):
    pairs = len(rates_per_pair)
    attempted = np.zeros((chains, draws, pairs), bool)
    for t in range(draws):
        attempted[:, t, t % 2 :: 2] = True
    acc = np.where(attempted, np.asarray(rates_per_pair, np.float32), 0.0).astype(np.float32)
    info = ParallelTemperingInfo(acc, attempted, attempted & (acc > 0.5), np.full((chains, draws), round_trips))
    return SampleResult(None, None, info, None)


def test_low_swap_rate_names_the_pair_and_betas():
    betas = np.array([0.1, 0.3, 0.5, 1.0])
    d = dg.diagnose(_fake_pt([0.6, 0.02, 0.5]), betas=betas)
    assert not d.ok
    (low,) = [f for f in d.warnings if f.statistic.startswith("swap_rate[")]
    assert low.statistic == "swap_rate[1,2]" and low.value == pytest.approx(0.02)
    assert "beta=0.3 and beta=0.5" in low.message and "adapt_ladder" in low.message
    assert any(f.statistic == "round_trips" for f in d.warnings)
    assert dg.diagnose(_fake_pt([0.6, 0.4, 0.5], round_trips=3)).ok


def test_low_tempered_transitions_acceptance():
    chains, draws, rungs = 2, 40, 3
    terms = np.zeros((chains, draws, rungs), np.float32)
    terms[..., 2] = np.linspace(-8, -2, draws)  # rung 2 carries the rejection
    acc = np.full((chains, draws), 0.01, np.float32)
    info = TemperedTransitionsInfo(acc, acc > 0.5, terms.sum(-1), terms)
    d = dg.diagnose(SampleResult(None, None, info, None), betas=[0.5, 0.7, 0.9, 1.0])
    (f,) = d.warnings
    assert f.statistic == "tt_acceptance" and f.value == pytest.approx(0.01)
    assert "rung 2 (beta=0.9 to 1)" in f.message


def test_constant_chains_in_different_modes_and_frozen_chains():
    s = np.ones((4, 30, N), np.float32)
    s[2:] = -1
    run = SampleResult({"s": s}, None, None, None)
    d = dg.diagnose(run, model=MODEL)
    (f,) = [f for f in d.errors if f.statistic == "mean_s"]
    assert math.isinf(f.value) and "stuck in different modes" in f.message
    frozen = SampleResult({"s": s}, None, GibbsInfo(np.zeros((4, 30), np.int32)), None)
    assert any(f.statistic == "num_changed" for f in dg.diagnose(frozen).errors)


def test_smc_and_ais_results():
    r, steps, n = 2, 5, 32
    ess = np.full((r, 8), np.nan, np.float32)
    ess[:, :steps] = 0.5
    ess[1, 3] = 0.02  # collapse
    lam = np.full((r, 8), np.nan, np.float32)
    lam[:, :steps] = np.linspace(0.2, 1.0, steps)
    particles = {"s": np.ones((r, n, N), np.float32)}
    res = TemperedSMCResult(
        np.float32(3.0), np.float32(0.1), np.array([2.9, 3.1]), np.array([steps, steps]), lam, ess,
        np.where(np.isnan(lam), np.nan, 0.5), particles, np.full((r, n), 1.0 / n),
    )  # fmt: skip
    idata = dg.to_arviz(res, model=MODEL, params=WEAK)
    assert idata.posterior.sizes == {"chain": r, "draw": n}
    assert idata.smc.sizes["step"] == steps and idata.smc.attrs["log_Z"] == pytest.approx(3.0)
    np.testing.assert_allclose(idata.sample_stats["log_weight"].values, -np.log(n))
    d = dg.diagnose(idata)
    (f,) = d.warnings
    assert f.statistic == "smc_ess" and "step 3 of replicate 1" in f.message and "lambda=0.8" in f.message
    assert not any("R-hat" in g.message for g in d.findings)  # particles are not Markov chains

    ais = AISResult(np.float32(3.0), np.float32(0.5), np.zeros(16), np.float32(0.03), {"s": np.ones((16, N))},
                    np.linspace(0, 1, 5), "")  # fmt: skip
    d = dg.diagnose(ais, model=MODEL, params=WEAK)
    assert [f.statistic for f in d.warnings] == ["ais_ess"]


def test_fit_result_delegates_and_checks_learner_signals():
    steps = np.arange(1, 11)
    history = {
        "evaluations": {"step": np.array([5, 10]), "train_log_likelihood": np.array([-4.0, -3.5])},
        "steps": {"step": steps, "epoch_index": np.zeros(10), "ess": np.full(10, 1.0), "resampled": np.ones(10)},
        "epochs": {},
        "timing": {},
    }
    state = SimpleNamespace(particles={"s": np.ones((20, N), np.float32)})
    result = FitResult(WEAK, history, state, MODEL, "pf_mcmc_mle")
    idata = dg.to_arviz(result, statistics=NUM_UP)
    assert {"learning_history", "learner_stats", "posterior"} <= set(idata.groups())
    np.testing.assert_array_equal(idata.posterior["num_up"].values, np.full((1, 20), N))
    d = dg.diagnose(idata)
    stats = {f.statistic for f in d.warnings}
    assert stats == {"resampled", "ess"}  # resampling at every update; ESS 1 of 20 particles
    assert d.table["resample_fraction"] == 1.0
    # the result's own to_arviz is read the same way: learner checks, no mixing checks on the particles
    own = dg.diagnose(result.to_arviz())
    assert [(f.severity, f.statistic) for f in own.findings] == [(f.severity, f.statistic) for f in d.findings]
    assert own.table["resample_fraction"] == 1.0


def test_bad_input():
    run = SampleResult({"s": np.ones((2, 5, N), np.float32)}, None, None, None)
    with pytest.raises(TypeError, match="result"):
        dg.to_arviz(42)
    with pytest.raises(TypeError, match="statistics"):
        dg.to_arviz(run, statistics=[len])
    with pytest.raises(TypeError, match="statistics\\['f'\\]"):
        dg.to_arviz(run, statistics={"f": 3})
    with pytest.raises(ValueError, match="clashes"):
        dg.to_arviz(run, statistics={"mean_s": lambda x: 0.0})
    with pytest.raises(ValueError, match="'broken'"):
        dg.to_arviz(run, statistics={"broken": lambda x: x["missing"]})
    with pytest.raises(ValueError, match="do not match"):
        dg.to_arviz(SampleResult({"s": np.ones((2, 5, N + 1))}, None, None, None), model=MODEL)
    with pytest.raises(ValueError, match="keep_states"):
        dg.to_arviz(SampleResult(None, np.zeros((2, 5)), None, None), statistics=NUM_UP)
    with pytest.raises(ValueError, match="betas"):
        dg.to_arviz(run, betas=[1.0, 0.5])
    with pytest.raises(ValueError, match="rhat_threshold"):
        dg.diagnose(run, rhat_threshold=0.9)
    with pytest.raises(TypeError, match="ess_threshold"):
        dg.diagnose(run, ess_threshold="many")
    idata = dg.to_arviz(run)
    with pytest.raises(ValueError, match="var_names"):
        dg.diagnose(idata, var_names=["nope"])
    with pytest.raises(ValueError, match="only apply"):
        dg.diagnose(idata, model=MODEL)
    with pytest.raises(ValueError, match="parallel-tempering"):
        dg.swap_rates(idata)
    with pytest.raises(TypeError, match="InferenceData"):
        dg.to_netcdf({"a": 1}, "x.nc")
