"""ui.numpyro: NumPyro models as energies, ugm_infer kernels under numpyro.infer.MCMC.

Ground truth is exact enumeration: the NumPyro-declared model's energies and exact
marginals are compared with the equivalent built-in ``ui.models.ising``, and samples
drawn under ``numpyro.infer.MCMC`` are tested with a chi-square test against the
brute-force distribution (``stat_utils``).  Draws are made independent by taking the
last state of each of many vectorized chains after a burn-in far longer than the
mixing time of a 4-site model (couplings |J| <= 0.8).
"""

from __future__ import annotations

import os
import re

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from conftest import all_states, brute_force
from numpyro.infer import MCMC
from scipy import stats
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer import numpyro as unp

EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
PARAMS = {"J": jnp.array([0.5, -0.3, 0.8, 0.4]), "h": jnp.array([0.2, 0.0, -0.1, 0.3])}
NUM_CHAINS = 1000  # independent draws for the chi-square tests
BURN_IN = 30  # sweeps; the 4-site model forgets its start in a handful


def ring(J, h):
    """A 4-spin Ising ring in NumPyro syntax: x in {0,1}, s = 2x - 1, E = -sum J s_i s_j - h.s."""
    with numpyro.plate("site", 4):
        x = numpyro.sample("x", dist.Bernoulli(0.5))
    s = 2.0 * x - 1.0
    numpyro.factor("coupling", jnp.sum(J * s[EDGES[:, 0]] * s[EDGES[:, 1]]) + h @ s)


@pytest.fixture(scope="module")
def ring_model():
    return unp.energy_model_from_numpyro(ring, **PARAMS)


@pytest.fixture(scope="module")
def ring_probs():
    ising = ui.models.ising(4, edges=EDGES)
    return brute_force(ising, {"w": PARAMS["J"], "h": PARAMS["h"]})


def _last_draws(mcmc, model):
    """Last draw of every chain (independent across chains) as mixed-radix indices."""
    samples = mcmc.get_samples(group_by_chain=True)
    return state_index({n: np.asarray(samples[n])[:, -1] for n in model.variables}, model)


# --------------------------------------------------------------------------------------
# (b) NumPyro model -> EnergyModel
# --------------------------------------------------------------------------------------
def test_numpyro_ising_equals_builtin_ising(ring_model):
    ising = ui.models.ising(4, edges=EDGES)
    ip = {"w": PARAMS["J"], "h": PARAMS["h"]}
    assert ring_model.variables == {"x": ui.Binary(4)}
    # energies agree on every configuration up to the prior's constant 4 log 2
    states = all_states(ring_model)
    e_np = np.asarray(ring_model.energies(PARAMS, states), np.float64)
    e_is = np.asarray(ising.energies(ip, {"s": 2.0 * states["x"] - 1.0}), np.float64)
    np.testing.assert_allclose(e_np - e_is, 4 * np.log(2.0), atol=2e-5)
    # exact marginals (index 0: x = 0, spin -1) equal those of the built-in model (brute force)
    probs = brute_force(ising, ip).reshape(2, 2, 2, 2)
    expected = np.stack([probs.sum(axis=tuple(j for j in range(4) if j != i)) for i in range(4)])
    np.testing.assert_allclose(ui.exact.marginals(ring_model, PARAMS)["x"], expected, atol=2e-6)
    # structure detection finds the ring (non-smooth energy: probed by second differences)
    assert ring_model.multilinear is False
    assert sorted(map(tuple, ring_model.interaction_edges(PARAMS))) == [(0, 1), (0, 3), (1, 2), (2, 3)]


def test_categorical_and_observed_sites_exact():
    y = jnp.array([0.3, 1.8, 1.1])

    def potts(y, h, J):
        with numpyro.plate("n", 3):
            c = numpyro.sample("c", dist.Categorical(logits=h))
            numpyro.sample("y", dist.Normal(c.astype(jnp.float32), 1.0), obs=y)
        numpyro.factor("agree", J * jnp.sum(c[:-1] == c[1:]))

    def potts_unobserved(h, J):  # the same model, `y` conditioned with observed=
        with numpyro.plate("n", 3):
            c = numpyro.sample("c", dist.Categorical(logits=h))
            numpyro.sample("y", dist.Normal(c.astype(jnp.float32), 1.0))
        numpyro.factor("agree", J * jnp.sum(c[:-1] == c[1:]))

    h = jnp.array([[0.0, 0.5, -0.5], [0.2, 0.0, 0.1], [-0.3, 0.4, 0.0]])
    params = {"h": h, "J": jnp.float32(0.7)}
    model = unp.energy_model_from_numpyro(potts, y, **params)
    assert model.variables == {"c": ui.Categorical(3, 3)}
    assert set(model.observed) == {"y"}
    # independent ground truth: the posterior over the 27 configurations in numpy
    grid = np.stack(np.unravel_index(np.arange(27), (3, 3, 3)), axis=1)
    logits = np.asarray(h, np.float64)
    logp = (
        np.take_along_axis(logits - np.log(np.exp(logits).sum(1, keepdims=True)), grid.T, axis=1).sum(0)
        + stats.norm.logpdf(np.asarray(y, np.float64), grid, 1.0).sum(1)
        + 0.7 * (grid[:, :-1] == grid[:, 1:]).sum(1)
    )
    # the energy is the negative log joint on every configuration (so exp(-E) is the
    # posterior and log Z the log evidence), with obs= and with observed=
    states = {"c": jnp.asarray(grid, jnp.int32)}
    np.testing.assert_allclose(model.energies(params, states), -logp, rtol=1e-5, atol=1e-4)
    # observed= gives the same energy as obs=
    cond = unp.energy_model_from_numpyro(potts_unobserved, observed={"y": y}, **params)
    np.testing.assert_allclose(cond.energies(params, states), model.energies(params, states), atol=1e-5)


def test_bad_numpyro_models_raise():
    def continuous():
        numpyro.sample("z", dist.Normal(0.0, 1.0))

    def to_event():
        numpyro.sample("x", dist.Bernoulli(0.5).expand([3]).to_event(1))

    def poisson():
        numpyro.sample("k", dist.Poisson(2.0))

    def shifted():
        numpyro.sample("k", dist.DiscreteUniform(1, 3))

    def with_param():
        p = numpyro.param("p", 0.3)
        numpyro.sample("x", dist.Bernoulli(p))

    def all_observed(y):
        numpyro.sample("y", dist.Bernoulli(0.5), obs=y)

    with pytest.raises(ValueError, match="latent site 'z' is continuous"):
        unp.energy_model_from_numpyro(continuous)
    with pytest.raises(ValueError, match=r"'x' has event shape \(3,\).*plate"):
        unp.energy_model_from_numpyro(to_event)
    with pytest.raises(ValueError, match="'k' has support.*unbounded"):
        unp.energy_model_from_numpyro(poisson)
    with pytest.raises(ValueError, match="'k' has support"):
        unp.energy_model_from_numpyro(shifted)
    with pytest.raises(ValueError, match="numpyro.param sites"):
        unp.energy_model_from_numpyro(with_param)
    with pytest.raises(ValueError, match="no latent"):
        unp.energy_model_from_numpyro(all_observed, jnp.array(1.0))
    with pytest.raises(ValueError, match="not sample sites"):
        unp.energy_model_from_numpyro(ring, observed={"nope": 1.0}, **PARAMS)
    with pytest.raises(TypeError, match="keyword argument 'J'"):
        unp.energy_model_from_numpyro(ring, J="strong", h=PARAMS["h"])
    with pytest.raises(ValueError, match="tracing the NumPyro model"):
        unp.energy_model_from_numpyro(ring, J=PARAMS["J"])  # h missing
    with pytest.raises(TypeError, match="numpyro_model"):
        unp.energy_model_from_numpyro("ring")
    model = unp.energy_model_from_numpyro(ring, **PARAMS)
    with pytest.raises(ValueError, match=r"missing \['h'\]"):
        model.validate_params({"J": PARAMS["J"]})
    with pytest.raises(ValueError, match=r"params\['h'\]` has shape"):
        model.validate_params({"J": PARAMS["J"], "h": jnp.zeros(3)})


# --------------------------------------------------------------------------------------
# (a) ugm_infer kernels under numpyro.infer.MCMC
# --------------------------------------------------------------------------------------
def test_gibbs_under_numpyro_mcmc_matches_exact(ring_model, ring_probs):
    """Vectorized chains match the exact distribution; sequential chains equal them; ArviZ reads the run."""
    keys = jax.random.split(jax.random.key(0), NUM_CHAINS)
    kernel = unp.as_numpyro_kernel(ring_model, PARAMS, "gibbs")
    mcmc = MCMC(
        kernel, num_warmup=BURN_IN, num_samples=4, num_chains=NUM_CHAINS, chain_method="vectorized", progress_bar=False
    )
    mcmc.run(keys, extra_fields=("info.num_changed",))
    draws = _last_draws(mcmc, ring_model)
    assert_distribution_matches(draws, ring_probs, label="gibbs under MCMC (vectorized)")
    # power: the same draws reject the model with the couplings' signs flipped
    wrong = brute_force(ui.models.ising(4, edges=EDGES), {"w": -PARAMS["J"], "h": PARAMS["h"]})
    assert_distribution_differs(draws, wrong, label="flipped couplings")
    # potential_energy is E(params, z)
    z = mcmc.get_samples()
    np.testing.assert_allclose(mcmc.get_extra_fields()["potential_energy"], ring_model.energies(PARAMS, z), atol=1e-5)

    # the same chains run one after the other (with NumPyro's progress bar) give the same draws
    seq = MCMC(
        unp.NumPyroKernel(ring_model, PARAMS, ui.kernels.gibbs),
        num_warmup=BURN_IN,
        num_samples=4,
        num_chains=3,
        chain_method="sequential",
        progress_bar=True,
    )
    seq.run(keys[:3], extra_fields=("info.num_changed",))
    s = seq.get_samples(group_by_chain=True)["x"]
    np.testing.assert_array_equal(s, mcmc.get_samples(group_by_chain=True)["x"][:3])

    idata = az.from_numpyro(seq, log_likelihood=False)  # the default (with it) runs in test_docs_snippets_run
    assert list(idata.posterior.data_vars) == ["x"]
    assert idata.posterior["x"].dims == ("chain", "draw", "site")  # the plate's name, from the NumPyro model
    energies = mcmc.get_extra_fields(group_by_chain=True)["potential_energy"][:3]
    np.testing.assert_allclose(idata.sample_stats["lp"].values, -energies, atol=1e-6)
    assert idata.sample_stats["info.num_changed"].shape == (3, 4)


ISING = ui.models.ising(4, edges=EDGES)
ISING_PARAMS = {"w": PARAMS["J"], "h": PARAMS["h"]}


def test_tempered_transitions_warmup_then_run():
    """A built-in model (no NumPyro model behind it), TT over a random-scan Metropolis base kernel:
    warmup() then run() from init_params; ArviZ names the dims after the variable."""
    base = ui.kernels.metropolis.build_kernel(ISING, scan="random")
    kernel = unp.NumPyroKernel(
        ISING,
        ISING_PARAMS,
        "tempered_transitions",
        betas=np.array([0.4, 0.7, 1.0]),
        base_kernel=base,
        base_init=ui.kernels.metropolis.init,
    )
    mcmc = MCMC(kernel, num_warmup=3, num_samples=5, progress_bar=False)
    mcmc.warmup(jax.random.key(1), init_params={"s": -jnp.ones(4)})
    mcmc.run(jax.random.key(2), extra_fields=("info.acceptance_probability",))
    assert mcmc.get_samples()["s"].shape == (5, 4)
    assert set(np.unique(mcmc.get_samples()["s"])) <= {-1.0, 1.0}
    assert mcmc.get_extra_fields()["info.acceptance_probability"].shape == (5,)
    assert az.from_numpyro(mcmc).posterior["s"].dims == ("chain", "draw", "s_dim_0")


def test_parallel_tempering_under_numpyro_mcmc(ring_probs):
    """Vectorized chains from init_params; the sample is the beta = 1 replica; its distribution is exact."""
    kernel = unp.as_numpyro_kernel(ISING, ISING_PARAMS, "parallel_tempering", betas=np.array([0.5, 1.0]))
    mcmc = MCMC(kernel, num_warmup=20, num_samples=1, num_chains=NUM_CHAINS, chain_method="vectorized", progress_bar=False)
    x0 = {"s": jnp.ones((NUM_CHAINS, 4))}  # one configuration per chain, copied to both replicas
    mcmc.run(jax.random.key(7), init_params=x0, extra_fields=("info.swap_acceptance",))
    samples = mcmc.get_samples(group_by_chain=True)["s"]
    assert samples.shape == (NUM_CHAINS, 1, 4)
    assert mcmc.get_extra_fields()["info.swap_acceptance"].shape == (NUM_CHAINS, 1)
    assert_distribution_matches(state_index({"s": samples[:, -1]}, ISING), ring_probs, label="PT under MCMC")


def test_bad_kernel_arguments_raise(ring_model):
    with pytest.raises(TypeError, match="`model` must be a ui.EnergyModel"):
        unp.NumPyroKernel(ring, PARAMS)
    with pytest.raises(ValueError, match="`params` is required"):
        unp.NumPyroKernel(ring_model, None)
    with pytest.raises(ValueError, match="`kernel` must be one of"):
        unp.NumPyroKernel(ring_model, PARAMS, "hmc")
    with pytest.raises(TypeError, match="`kernel` must be a name"):
        unp.NumPyroKernel(ring_model, PARAMS, 3)
    with pytest.raises(ValueError, match="needs its `init_fn"):
        unp.NumPyroKernel(ring_model, PARAMS, lambda key, state, logdensity_fn: (state, None))
    with pytest.raises(ValueError, match="only for a custom inner kernel"):
        unp.NumPyroKernel(ring_model, PARAMS, "gibbs", init_fn=lambda position, logdensity_fn: position)
    with pytest.raises(TypeError, match="num_sweep"):
        unp.NumPyroKernel(ring_model, PARAMS, "gibbs", num_sweep=2)
    assert unp.NumPyroKernel(ISING, ISING_PARAMS, "metropolis", num_sweeps=2).kernel_name == "metropolis"
    bad_position = unp.NumPyroKernel(ring_model, PARAMS, "gibbs", position_fn=lambda state: {"y": state.position["x"]})
    with pytest.raises(ValueError, match="must be a dict over the model's variables"):
        bad_position.init(jax.random.key(0), 0, None, (), {})
    kernel = unp.NumPyroKernel(ring_model, PARAMS)
    with pytest.raises(ValueError, match=r"`init_params\['x'\]` has 1 value\(s\) outside the domain"):
        kernel.init(jax.random.key(0), 0, {"x": jnp.array([0.0, 2.0, 1.0, 0.0])}, (), {})
    with pytest.raises(ValueError, match=r"`init_params\['x'\]` has shape"):
        kernel.init(jax.random.key(0), 0, {"x": jnp.zeros(3)}, (), {})
    with pytest.raises(ValueError, match="takes no model arguments"):
        kernel.init(jax.random.key(0), 0, None, (PARAMS,), {})


def _docs_blocks() -> list[str]:
    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "numpyro.md")
    with open(path) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def _exec_blocks(blocks: list[str]) -> dict:
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/numpyro.md", "exec"), namespace)  # noqa: S102 - the page's own snippets
    return namespace


def test_docs_snippets_run(ring_probs):
    """The ```python blocks of docs/numpyro.md on energy models and NumPyroKernel run, in order, in one namespace
    (the two mixed-model blocks that follow them: test_docs_mixed_snippets_run)."""
    blocks = _docs_blocks()
    assert len(blocks) == 6
    namespace = _exec_blocks(blocks[:4])
    assert namespace["idata"].posterior["x"].dims == ("chain", "draw", "site")
    # the user-written kernel of the page samples the ring exactly (1000 independent chains);
    # the page's ring is this file's ring
    np.testing.assert_array_equal(namespace["edges"], EDGES)
    for k in PARAMS:
        np.testing.assert_array_equal(namespace["params"][k], PARAMS[k])
    model, mcmc = namespace["model"], namespace["mcmc"]
    assert_distribution_matches(_last_draws(mcmc, model), ring_probs, label="docs: user kernel under MCMC")
    assert 0.0 < float(mcmc.get_extra_fields()["info.acceptance_rate"].mean()) < 1.0


@pytest.mark.slow
def test_docs_mixed_snippets_run():
    """All blocks of docs/numpyro.md, including the UGMGibbs and ParallelTempering snippets."""
    namespace = _exec_blocks(_docs_blocks())
    run, replicas = namespace["run"], namespace["replicas"]
    assert run.get_samples()["gamma"].shape == (2000, 5)
    assert replicas.get_samples()["gamma"].shape == (600, 5)
    assert replicas.get_extra_fields()["info.swap_acceptance"].shape == (600, 2)
