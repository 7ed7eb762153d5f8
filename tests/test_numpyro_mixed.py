"""ui.numpyro.UGMGibbs / ParallelTempering: ugm_infer kernels for the discrete sites of mixed NumPyro models.

Ground truth is exact enumeration of the discrete sites with the continuous ones
integrated in closed form (``benchmarks/numpyro_mixed_models.py``): posterior moments of
the weights and means of a small Gaussian mixture (``2^8`` assignments), and posterior
inclusion probabilities of spike-and-slab regression with a conjugate
normal-inverse-gamma prior (``2^p`` models).  A sampled mean passes when it lies within
``z`` Monte-Carlo standard errors of the exact value, with MCSE = sd / sqrt(ESS)
(ArviZ's rank-normalised bulk ESS over all chains) and ``z`` the two-sided normal
quantile of a false-failure rate of 1e-4 per test, Bonferroni-split over the
statistics; every such test also checks that the same draws reject the exact answer of
a wrong model (power).  Fixed seeds make the runs deterministic.
"""

from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from conftest import brute_force
from numpyro.infer import HMC, MCMC, NUTS, DiscreteHMCGibbs
from scipy import stats
from stat_utils import assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer import numpyro as unp

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "numpyro_mixed_models.py")
_spec = importlib.util.spec_from_file_location("ugm_benchmarks_numpyro_mixed_models", _PATH)
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)

FALSE_FAILURE = 1e-4
Y = jnp.array([-2.3, -1.6, -0.9, -0.2, 0.4, 1.1, 1.7, 2.5], jnp.float32)
MIX = (Y, [-1.5, 1.5], 1.0, 1.0)  # data, prior means, prior sd, noise sd
MIX_WRONG = (Y, [-1.5, 1.5], 1.0, 1.2)  # the same data under a different noise sd


def _z(num_statistics: int) -> float:
    return float(stats.norm.isf(FALSE_FAILURE / (2 * num_statistics)))


def _mixture_statistics(samples) -> dict[str, np.ndarray]:
    """(chain, draw) draws of the first and second moments of w_0, mu_0 and mu_1."""
    w, mu = np.asarray(samples["w"], np.float64), np.asarray(samples["mu"], np.float64)
    return {
        "w0": w[..., 0],
        "mu0": mu[..., 0],
        "mu1": mu[..., 1],
        "w0^2": w[..., 0] ** 2,
        "mu0^2": mu[..., 0] ** 2,
        "mu1^2": mu[..., 1] ** 2,
    }


def _mixture_exact(args) -> dict[str, float]:
    ex = mm.mixture_exact(*args)
    m, s = ex["mean"], ex["second"]
    return {
        "w0": m["w"][0],
        "mu0": m["mu"][0],
        "mu1": m["mu"][1],
        "w0^2": s["w"][0],
        "mu0^2": s["mu"][0],
        "mu1^2": s["mu"][1],
    }


def _z_scores(draws: dict[str, np.ndarray], exact: dict[str, float], variances: dict[str, float] | None = None):
    """(estimate - exact) / MCSE per statistic; MCSE from ArviZ's bulk ESS."""
    out = {}
    for name, x in draws.items():
        x = np.asarray(x, np.float64)
        ess = float(az.ess(x, method="bulk"))
        ess = x.size if not np.isfinite(ess) else ess  # a constant statistic: only with an exact variance below
        var = max(float(x.var()), (variances or {}).get(name, 0.0))
        mcse = np.sqrt(var / ess)
        out[name] = (x.mean() - exact[name]) / mcse if mcse > 0 else (0.0 if x.mean() == exact[name] else np.inf)
    return out


def assert_matches_exact(draws, exact, label, variances=None):
    scores = _z_scores(draws, exact, variances)
    bound = _z(len(scores))
    bad = {n: round(float(v), 2) for n, v in scores.items() if not abs(v) <= bound}
    assert not bad, f"{label}: |estimate - exact| / MCSE exceeds {bound:.2f} for {bad} (all: {scores})"


def assert_rejects(draws, wrong, label, variances=None):
    scores = _z_scores(draws, wrong, variances)
    bound = _z(len(scores))
    assert max(abs(v) for v in scores.values()) > bound, f"{label}: the draws do not reject a wrong model ({scores})"


def _run(kernel, args, *, num_warmup=400, num_samples=1000, num_chains=4, seed=0, **run_kwargs):
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(seed), *args, **run_kwargs)
    return mcmc


# --------------------------------------------------------------------------------------
# exact answers (closed form) against NumPyro's own inference on the marginal model
# --------------------------------------------------------------------------------------
def test_exact_mixture_matches_marginal_density():
    """The enumeration's evidence equals NumPyro's marginal likelihood integrated numerically (1-D check)."""
    y = Y[:3]
    args = (y, [0.0], 1.0, 0.7)  # K = 1: the mixture is a conjugate normal model, evidence in closed form
    ex = mm.mixture_exact(*args)
    cov = 0.7**2 * np.eye(3) + 1.0
    assert ex["log_evidence"] == pytest.approx(stats.multivariate_normal(np.zeros(3), cov).logpdf(np.asarray(y)), abs=1e-9)


# --------------------------------------------------------------------------------------
# HMC-within-Gibbs against exact enumeration
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixture_gibbs_run():
    kernel = unp.UGMGibbs(NUTS(mm.mixture), kernel="gibbs")
    return kernel, _run(kernel, MIX, num_samples=1500, extra_fields=("info.num_changed",))


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_block_gibbs_mixture_moments_match_exact(mixture_gibbs_run):
    """Block Gibbs (one block: the assignments are independent given w and mu) within NUTS, 4 vectorized chains."""
    kernel, mcmc = mixture_gibbs_run
    blocks = kernel.discrete_kernel.energy_model.blocks
    assert len(blocks) == 1 and blocks[0].num_sites == Y.shape[0]
    draws = _mixture_statistics(mcmc.get_samples(group_by_chain=True))
    assert_matches_exact(draws, _mixture_exact(MIX), "block Gibbs + NUTS")
    assert_rejects(draws, _mixture_exact(MIX_WRONG), "block Gibbs + NUTS (noise sd 1.2)")
    samples = mcmc.get_samples()
    assert samples["c"].dtype == jnp.int32 and samples["c"].shape == (6000, 8)
    assert mcmc.get_extra_fields()["diverging"].shape == (6000,)


def test_arviz_and_diagnose_read_the_run(mixture_gibbs_run, capsys):
    kernel, mcmc = mixture_gibbs_run
    mcmc.print_summary()  # NumPyro's summary table: continuous and discrete sites, divergences
    printed = capsys.readouterr().out
    assert all(name in printed for name in ("mu[0]", "w[1]", "c[7]", "Number of divergences"))
    idata = az.from_numpyro(mcmc, log_likelihood=False)
    assert idata.posterior["c"].dims == ("chain", "draw", "data")  # the plate's name
    assert "info.num_changed" in idata.sample_stats and "diverging" in idata.sample_stats
    diagnosis = ui.diagnostics.diagnose(idata)  # plain ArviZ data: info.<field> read as <field>
    assert "mu" in diagnosis.table and "num_changed" not in diagnosis.table
    full = unp.to_arviz(mcmc)
    assert full.posterior.attrs["raw_variables"] == "c"
    num_c = full.posterior["num_c"].values  # default statistic: the number of points in component 1
    np.testing.assert_array_equal(num_c, np.asarray(mcmc.get_samples(group_by_chain=True)["c"]).sum(-1))
    diagnosis = ui.diagnostics.diagnose(mcmc)  # the MCMC run itself
    assert diagnosis.ok, str(diagnosis)
    assert str(diagnosis).startswith("OK: no mixing problems found.") and "num_c" in str(diagnosis)
    assert set(diagnosis.table) >= {"mu", "w", "num_c"} and diagnosis.table["num_c"]["rhat"] < 1.01


def test_spike_and_slab_inclusion_probabilities_match_exact():
    """Block Gibbs on the inclusion indicators (detected as singletons: they interact through y) within NUTS."""
    rng = np.random.default_rng(1)
    X = mm.collinear_design(rng, 30, 6, rho=0.3)
    y = (X @ np.array([1.0, 0.0, 0.5, 0.0, 0.3, 0.0]) + 0.8 * rng.normal(size=30)).astype(np.float32)
    kernel = unp.UGMGibbs(NUTS(mm.spike_slab), kernel="gibbs")
    mcmc = _run(kernel, (jnp.asarray(X), jnp.asarray(y)), num_samples=1000)
    assert len(kernel.discrete_kernel.energy_model.blocks) == 6
    gamma = np.asarray(mcmc.get_samples(group_by_chain=True)["gamma"], np.float64)
    exact = mm.spike_slab_exact(X, y)["inclusion"]
    draws = {f"gamma{j}": gamma[..., j] for j in range(6)}
    variances = {f"gamma{j}": exact[j] * (1 - exact[j]) for j in range(6)}
    assert_matches_exact(draws, {f"gamma{j}": exact[j] for j in range(6)}, "spike-and-slab PIP", variances)
    wrong = mm.spike_slab_exact(X, y, tau=3.0)["inclusion"]  # a wider slab penalises inclusion
    assert_rejects(draws, {f"gamma{j}": wrong[j] for j in range(6)}, "spike-and-slab PIP (tau 3)", variances)


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_parallel_tempering_mixture_moments_match_exact():
    """Replica exchange over power posteriors, each replica a UGMGibbs copy with its own HMC adaptation."""
    kernel = unp.ParallelTempering(unp.UGMGibbs(HMC(mm.mixture, trajectory_length=1.0)), betas=[0.3, 0.6, 1.0])
    fields = ("info.swap_acceptance", "info.swap_attempted", "info.round_trips")
    mcmc = _run(kernel, MIX, num_samples=1000, extra_fields=fields)
    draws = _mixture_statistics(mcmc.get_samples(group_by_chain=True))
    assert_matches_exact(draws, _mixture_exact(MIX), "parallel tempering")
    assert_rejects(draws, _mixture_exact(MIX_WRONG), "parallel tempering (noise sd 1.2)")
    diagnosis = ui.diagnostics.diagnose(mcmc)
    rates = diagnosis.table["swap_rate"]
    assert rates.shape == (2,) and np.all((rates > 0.05) & (rates < 1.0))
    assert np.all(diagnosis.table["round_trips"] > 0)


def _chain4(J):
    """Four spins in a chain (x in {0, 1}, s = 2x - 1) with a field on the first: a purely discrete model."""
    with numpyro.plate("site", 4):
        x = numpyro.sample("x", dist.Bernoulli(0.5))
    s = 2.0 * x - 1.0
    numpyro.factor("coupling", J * jnp.sum(s[:-1] * s[1:]) + 0.3 * s[0])


def test_ugm_block_alone_on_a_discrete_model_matches_exact():
    """UGMBlock without a Gibbs composite, 1000 vectorized chains, last draws chi-square tested (alpha 1e-6)."""
    block = unp.UGMBlock(_chain4)
    mcmc = MCMC(block, num_warmup=30, num_samples=2, num_chains=1000, chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.key(0), J=0.8)
    assert [sorted(b.indices["x"].tolist()) for b in block.energy_model.blocks] == [[0, 2], [1, 3]]
    energy = unp.energy_model_from_numpyro(_chain4, J=0.8)
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"][:, -1])
    assert_distribution_matches(state_index({"x": draws}, energy), brute_force(energy, {"J": 0.8}), label="UGMBlock alone")


# --------------------------------------------------------------------------------------
# the likelihood tempering behind ParallelTempering
# --------------------------------------------------------------------------------------
def test_tempered_model_scales_only_the_likelihood():
    from ugm_infer.numpyro._tempering import _log_likelihood, tempered

    values = {"w": jnp.array([0.3, 0.7]), "mu": jnp.array([-1.0, 1.2]), "c": jnp.array([0, 0, 1, 0, 1, 1, 1, 0])}
    model = tempered(mm.mixture)
    full = float(numpyro.infer.util.log_density(mm.mixture, MIX, {}, values)[0])
    loglik = float(_log_likelihood(mm.mixture, MIX, {}, values))
    expected = float(np.sum(stats.norm.logpdf(np.asarray(Y), np.asarray(values["mu"])[np.asarray(values["c"])], 1.0)))
    assert loglik == pytest.approx(expected, rel=1e-5)
    for beta in (0.0, 0.4, 1.0):
        got = float(numpyro.infer.util.log_density(model, MIX, {"_ugm_beta": beta}, values)[0])
        assert got == pytest.approx(full - (1 - beta) * loglik, rel=1e-5)
    # with the latent sites conditioned (as in Gibbs), they still count as prior
    from numpyro.infer.gibbs import conditioned, with_conditioning

    got = float(
        numpyro.infer.util.log_density(conditioned(model), MIX, with_conditioning({"_ugm_beta": 0.4}, values), {})[0]
    )
    assert got == pytest.approx(full - 0.6 * loglik, rel=1e-5)


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------
def _poisson_model(y):
    k = numpyro.sample("k", dist.Poisson(3.0))
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu + k, 1.0), obs=y)


def _to_event_model(y):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([3]).to_event(1))
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu + x.sum(), 1.0), obs=y)


def _enumerated_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    c = numpyro.sample("c", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
    numpyro.sample("y", dist.Normal(mu + c, 1.0), obs=y)


def test_bad_models_and_arguments_raise():
    y = jnp.array(1.0)
    with pytest.raises(ValueError, match="latent site 'k' has support.*unbounded"):
        unp.UGMGibbs(NUTS(_poisson_model)).init(jax.random.key(0), 5, None, (y,), {})
    with pytest.raises(ValueError, match=r"latent site 'x' has event shape \(3,\).*plate"):
        unp.UGMGibbs(NUTS(_to_event_model)).init(jax.random.key(0), 5, None, (y,), {})
    with pytest.raises(ValueError, match="discrete site 'c' is marked"):
        unp.UGMGibbs(NUTS(_enumerated_model)).init(jax.random.key(0), 5, None, (y,), {})
    with pytest.raises(ValueError, match="parallel tempering cannot be the discrete move"):
        unp.UGMGibbs(NUTS(mm.mixture), kernel="parallel_tempering", betas=[0.5, 1.0])
    with pytest.raises(TypeError, match="SamplingAlgorithm has its target bound in"):
        ising = ui.models.ising(3)
        unp.UGMGibbs(NUTS(mm.mixture), kernel=ui.kernels.gibbs(ising, ising.init_params(jax.random.key(0))))
    with pytest.raises(ValueError, match="needs its `init_fn"):
        unp.UGMGibbs(NUTS(mm.mixture), kernel=lambda key, state, logdensity_fn: (state, None))
    with pytest.raises(ValueError, match="`kernel` must be one of"):
        unp.UGMGibbs(NUTS(mm.mixture), kernel="hmc")
    with pytest.raises(TypeError, match="`inner_kernel` must be numpyro.infer.NUTS or HMC"):
        unp.UGMGibbs(DiscreteHMCGibbs(NUTS(mm.mixture)))
    with pytest.raises(TypeError, match="`sampler` must be a ui.numpyro.UGMGibbs"):
        unp.ParallelTempering(NUTS(mm.mixture), betas=[0.5, 1.0])
    with pytest.raises(ValueError, match="last entry of `betas` must be 1"):
        unp.ParallelTempering(unp.UGMGibbs(NUTS(mm.mixture)), betas=[0.5, 0.9])
    # sites that change shape between runs
    kernel = unp.UGMGibbs(HMC(mm.mixture), blocks=[{"c": True}], multilinear=False)
    kernel.setup(MIX, {})
    with pytest.raises(ValueError, match=r"discrete site 'c' has shape \(5,\) in this run but \(8,\)"):
        kernel.setup((Y[:5],) + MIX[1:], {})


# --------------------------------------------------------------------------------------
# energy_model_from_numpyro: the conditional of the discrete sites given the continuous ones
# --------------------------------------------------------------------------------------
def test_energy_model_conditions_on_continuous_sites():
    model = unp.energy_model_from_numpyro(mm.mixture, *MIX)
    assert model.variables == {"c": ui.Categorical(8, 2)}
    assert model.continuous_sites == ("w", "mu")
    params = {"w": jnp.array([0.3, 0.7]), "mu": jnp.array([-1.0, 1.2])}
    assert set(model.example_params) == {"w", "mu"}
    # exact conditional: independent assignments, p(c_i = k) proportional to w_k N(y_i | mu_k, 1)
    logits = np.log(np.asarray(params["w"]))[None, :] + stats.norm.logpdf(
        np.asarray(Y)[:, None], np.asarray(params["mu"]), 1.0
    )
    expected = np.exp(logits - np.logaddexp(logits[:, :1], logits[:, 1:]))
    np.testing.assert_allclose(ui.exact.marginals(model, params)["c"], expected, atol=1e-5)
    with pytest.raises(ValueError, match=r"missing \['mu'\]"):
        model.validate_params({"w": params["w"]})


# --------------------------------------------------------------------------------------
# second checks (slow): other discrete moves, NumPyro's enumeration, chain methods
# --------------------------------------------------------------------------------------
class FlipState(NamedTuple):
    position: dict
    logdensity: jax.Array


def flip_init(position, logdensity_fn):
    return FlipState(position, logdensity_fn(position))


def flip_kernel(rng_key, state, logdensity_fn):
    """A user-written Metropolis move: flip random assignments of the 2-component mixture, 8 proposals."""

    def flip(carry, key):
        c, logdensity = carry
        key_site, key_accept = jax.random.split(key)
        i = jax.random.randint(key_site, (), 0, c.shape[0])
        proposal = c.at[i].set(1 - c[i])
        new = logdensity_fn({"c": proposal})
        accept = jnp.log(jax.random.uniform(key_accept)) < new - logdensity
        return (jnp.where(accept, proposal, c), jnp.where(accept, new, logdensity)), accept

    (c, logdensity), accepted = jax.lax.scan(flip, (state.position["c"], state.logdensity), jax.random.split(rng_key, 8))
    return FlipState({"c": c}, logdensity), accepted.mean()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["metropolis", "user", "tempered_transitions"])
def test_other_discrete_moves_match_exact(which):
    """Metropolis and a user kernel cache the log density: refresh must re-create it when mu, w move."""
    options = {
        "metropolis": {"kernel": "metropolis"},
        "user": {"kernel": flip_kernel, "init_fn": flip_init},
        "tempered_transitions": {"kernel": "tempered_transitions", "betas": np.linspace(0.3, 1.0, 4)},
    }[which]
    mcmc = _run(unp.UGMGibbs(NUTS(mm.mixture), **options), MIX, num_samples=1500)
    draws = _mixture_statistics(mcmc.get_samples(group_by_chain=True))
    assert_matches_exact(draws, _mixture_exact(MIX), which)
    assert_rejects(draws, _mixture_exact(MIX_WRONG), f"{which} (noise sd 1.2)")


@pytest.mark.slow
def test_moments_match_nuts_with_enumeration():
    """NUTS on the model with the assignments summed out by NumPyro (funsor) agrees with the exact moments and,
    within the MCSE of both runs, with UGMGibbs."""
    pytest.importorskip("funsor")
    from numpyro.contrib.funsor import config_enumerate

    exact = _mixture_exact(MIX)
    enumerated = _run(NUTS(config_enumerate(mm.mixture)), MIX, num_samples=1500, seed=3)
    reference = _mixture_statistics(enumerated.get_samples(group_by_chain=True))
    assert_matches_exact(reference, exact, "NUTS with enumeration")
    ours = _mixture_statistics(
        _run(unp.UGMGibbs(NUTS(mm.mixture)), MIX, num_samples=1500, seed=4).get_samples(group_by_chain=True)
    )
    bound = _z(len(ours))
    for name in ours:
        se = [np.sqrt(x.var() / float(az.ess(x))) for x in (ours[name], reference[name])]
        diff = ours[name].mean() - reference[name].mean()
        assert abs(diff) <= bound * np.hypot(*se), (
            f"{name}: UGMGibbs {ours[name].mean()} vs NUTS+enumeration {reference[name].mean()}"
        )


@pytest.mark.slow
def test_sequential_chains_and_warmup_then_run_give_the_vectorized_draws():
    kernel = unp.UGMGibbs(NUTS(mm.mixture), kernel="tempered_transitions", betas=[0.5, 1.0])
    vectorized = _run(kernel, MIX, num_warmup=20, num_samples=10, num_chains=2)
    sequential = MCMC(
        unp.UGMGibbs(NUTS(mm.mixture), kernel="tempered_transitions", betas=[0.5, 1.0]),
        num_warmup=20,
        num_samples=10,
        num_chains=2,
        chain_method="sequential",
        progress_bar=True,
    )
    sequential.run(jax.random.key(0), *MIX)
    for site in ("c", "mu", "w"):
        np.testing.assert_allclose(
            sequential.get_samples(group_by_chain=True)[site], vectorized.get_samples(group_by_chain=True)[site], atol=1e-5
        )
    split = MCMC(kernel, num_warmup=20, num_samples=10, num_chains=2, chain_method="vectorized", progress_bar=False)
    split.warmup(jax.random.key(0), *MIX)
    split.run(jax.random.key(1), *MIX, extra_fields=("info.acceptance_probability",))
    assert split.get_samples()["c"].shape == (20, 8)
    assert split.get_extra_fields()["info.acceptance_probability"].shape == (20,)


@pytest.mark.slow
def test_parallel_chain_method_on_two_host_devices():
    """chain_method="parallel" (NumPyro pmaps init and sampling): the block is set up outside the trace."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import importlib.util, os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
        import jax, numpy as np
        from numpyro.infer import MCMC, NUTS
        import ugm_infer as ui
        spec = importlib.util.spec_from_file_location("m", {_PATH!r})
        mm = importlib.util.module_from_spec(spec); spec.loader.exec_module(mm)
        assert len(jax.devices()) == 2
        mcmc = MCMC(ui.numpyro.UGMGibbs(NUTS(mm.mixture)), num_warmup=50, num_samples=50, num_chains=2,
                    chain_method="parallel", progress_bar=False)
        mcmc.run(jax.random.key(0), jax.numpy.asarray({np.asarray(Y).tolist()!r}), [-1.5, 1.5], 1.0, 1.0)
        assert mcmc.get_samples(group_by_chain=True)["c"].shape == (2, 50, 8)
        """
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(__file__), os.pardir), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_tempered_transitions_spike_and_slab_collinear_pair():
    """p = 10 with two near-collinear predictors: the posterior splits between them; TT on the indicators."""
    rng = np.random.default_rng(2)
    X = mm.collinear_design(rng, 40, 10, rho=0.2, pair_corr=0.95)
    y = (X @ np.r_[0.8, 0.0, 0.6, np.zeros(7)] + 0.8 * rng.normal(size=40)).astype(np.float32)
    exact = mm.spike_slab_exact(X, y)["inclusion"]
    kernel = unp.UGMGibbs(NUTS(mm.spike_slab), kernel="tempered_transitions", betas=np.linspace(0.2, 1.0, 6))
    mcmc = _run(kernel, (jnp.asarray(X), jnp.asarray(y)), num_samples=1500)
    gamma = np.asarray(mcmc.get_samples(group_by_chain=True)["gamma"], np.float64)
    draws = {f"gamma{j}": gamma[..., j] for j in range(10)}
    variances = {f"gamma{j}": exact[j] * (1 - exact[j]) for j in range(10)}
    assert_matches_exact(draws, {f"gamma{j}": exact[j] for j in range(10)}, "TT spike-and-slab", variances)
