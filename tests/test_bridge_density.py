"""The annealing path's densities in the models' fast forms (``ugm_infer.smc._paths.bridge_logdensity``).

AIS and tempered SMC move their particles with block Gibbs on
:math:`f_\\beta(x) = p_0(x)^{1-\\beta} e^{-\\beta E(x)}`.  The density they hand the kernel
keeps the form the kernel has fast exact sweeps for: the model's own density when the
base is uniform (lattice Ising and Potts sweeps), pairwise couplings for a semi-RBM or a
dense Boltzmann machine, shifted site log-odds for a lattice Ising model under a
non-uniform base.  Checked here:

* which form each case gets, and that it evaluates to :math:`f_\\beta` up to a constant;
* block Gibbs on it, run from uniform random states, reaches :math:`f_\\beta` (the full
  joint against enumeration, chi-square at alpha = 1e-6, fixed seeds), and the draws
  reject the distribution without the base (power against a dropped base term);
* tempered SMC hands its default move the tempering parameter BlackJAX's own density
  is at (the move targets the same :math:`\\pi_\\lambda`);
* AIS on a semi-RBM with a data base (hiddens summed) against the exact ``log Z``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import all_states, brute_force_energies, run_chains
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer._resampling import resolve_resampling
from ugm_infer.kernels import SiteLogitsLogDensity, gibbs
from ugm_infer.kernels.checkerboard import LatticeLogDensity
from ugm_infer.kernels.pairwise import CouplingLogDensity
from ugm_infer.kernels.potts_lattice import PottsLogDensity
from ugm_infer.smc import _paths, tempered

CHAINS = 20000
BETA = 0.6


def _logits(rng, model, scale):
    return {n: scale * rng.normal(size=d.shape + (d.num_states,)) for n, d in model.variables.items()}


def _case(name):
    """``(model, params, log_probs, expected density type)``."""
    rng = np.random.default_rng(3)
    if name == "semi_rbm, logits base":
        model = ui.models.semi_rbm(5, 3)
        params = model.init_params(jax.random.key(0), scale=0.8, lateral_scale=0.8)
        base, kind = {"v": _logits(rng, model, 1.5)["v"]}, CouplingLogDensity
    elif name == "dense ising, logits base":
        model = ui.models.ising(8)
        params = model.init_params(jax.random.key(1), scale=0.6, field_scale=0.3)
        base, kind = _logits(rng, model, 1.5), CouplingLogDensity
    elif name == "lattice ising, logits base":
        model = ui.models.lattice_ising(2, 4, periodic=False)
        params = model.init_params(J=0.5, h=0.2)
        base, kind = _logits(rng, model, 1.5), SiteLogitsLogDensity
    elif name == "lattice ising, uniform base":
        model = ui.models.lattice_ising(2, 4, periodic=False)
        params = model.init_params(J=0.8, h=0.3)
        base, kind = "uniform", LatticeLogDensity
    else:  # lattice potts, uniform base
        model = ui.models.lattice_potts(2, 4, 3, periodic=False)
        params = model.init_params(jax.random.key(2), scale=1.2, field_scale=0.5)
        base, kind = "uniform", PottsLogDensity
    log_probs = _paths.base_log_probs(model, base, tuple(model.variables))
    return model, params, log_probs, kind


CASES = [
    "semi_rbm, logits base",
    "dense ising, logits base",
    "lattice ising, logits base",
    "lattice ising, uniform base",
    "lattice potts, uniform base",
]


def _exact(model, params, log_probs, beta, with_base=True):
    """Exact :math:`f_\\beta` over all configurations (``state_index`` order)."""
    states = all_states(model)
    log_f = -beta * brute_force_energies(model, params)
    if with_base:
        base = jax.vmap(lambda x: _paths.base_logdensity(model.variables, log_probs, x))(states)
        log_f = log_f + (1.0 - beta) * np.asarray(base, np.float64)
    p = np.exp(log_f - log_f.max())
    return p / p.sum()


@pytest.mark.parametrize("name", CASES)
def test_bridge_keeps_the_fast_form_and_the_values(name):
    model, params, log_probs, kind = _case(name)
    uniform = _paths.is_uniform_base(log_probs)
    assert uniform == ("uniform" in name)
    density = _paths.bridge_logdensity(model, params, model.variables, log_probs, BETA, uniform)
    assert isinstance(density, kind), type(density)
    states = all_states(model)
    got = np.asarray(jax.vmap(density)(states), np.float64)
    base = np.asarray(jax.vmap(lambda x: _paths.base_logdensity(model.variables, log_probs, x))(states), np.float64)
    want = -BETA * brute_force_energies(model, params) + (1.0 - BETA) * base
    np.testing.assert_allclose(got - got[0], want - want[0], rtol=1e-5, atol=1e-4)  # equal up to a constant


@pytest.mark.parametrize("name", CASES)
def test_block_gibbs_on_the_bridge_reaches_it(name):
    model, params, log_probs, _ = _case(name)
    density = _paths.bridge_logdensity(model, params, model.variables, log_probs, BETA, _paths.is_uniform_base(log_probs))
    kernel = gibbs.build_kernel(model, "block")
    start = model.random_state(jax.random.key(5), CHAINS)
    x = run_chains(kernel, gibbs.init, density, start, jax.random.key(6), 30)
    idx = state_index(x, model)
    assert_distribution_matches(idx, _exact(model, params, log_probs, BETA), label=name)
    if "uniform" not in name:  # power: a dropped base term would be caught
        assert_distribution_differs(idx, _exact(model, params, log_probs, BETA, with_base=False), label=name + ", no base")


def test_tempered_smc_default_move_targets_blackjax_density():
    """The default move's density is BlackJAX's ``logprior + lambda * loglik`` at the *current* lambda.

    One fixed-schedule SMC step from lambda = 0.3 to 0.5: BlackJAX moves the particles at
    0.3 (then reweights), so the density the move hands the Gibbs kernel must equal
    ``logprior + 0.3 * loglik`` up to a constant, not the one at 0.5.
    """
    from blackjax.smc.tempered import TemperedSMCState
    from blackjax.smc.tempered import build_kernel as fixed_kernel

    model, params, log_probs, _ = _case("lattice ising, logits base")
    states = all_states(model)
    probes = jax.tree.map(lambda a: a[:: len(a) // 8], states)  # 8 configurations

    def logprior(x):
        return _paths.base_logdensity(model.variables, log_probs, x)

    def loglik(x):
        return -model.energy(params, x) - logprior(x)

    def spy(rng_key, state, density):  # the Gibbs kernel's place: report the density it is handed
        return state, jax.vmap(density)(probes)

    move = tempered._path_move(spy, model, params, log_probs, False)
    smc = fixed_kernel(logprior, loglik, move, gibbs.init, resolve_resampling("systematic"))
    lam = jnp.asarray(0.3, jnp.float32)
    state = TemperedSMCState(model.random_state(jax.random.key(8), 16), jnp.full((16,), 1 / 16), lam)
    _, info = smc(jax.random.key(9), state, 1, jnp.asarray(0.5, jnp.float32), tempered._tempering_param(state))
    got = np.asarray(info.update_info, np.float64).reshape(-1, 8)[0]
    for at, match in ((0.3, True), (0.5, False)):
        want = np.asarray(jax.vmap(lambda x, a=at: logprior(x) + a * loglik(x))(probes), np.float64)
        same = np.allclose(got - got[0], want - want[0], atol=1e-4)
        assert same == match, (at, got - got[0], want - want[0])


def test_ais_semi_rbm_data_base_against_exact():
    model = ui.models.semi_rbm(12, 6)
    params = model.init_params(jax.random.key(4), scale=0.5, lateral_scale=0.5)
    log_z = float(ui.exact.log_partition(model, params))
    data = ui.exact.sample(jax.random.key(5), model, params, 200)
    res = ui.smc.ais(jax.random.key(6), model, params, num_runs=64, num_betas=1000, base="data", data={"v": data["v"]})
    assert res.analytic == "h"
    assert abs(float(res.log_Z) - log_z) < 4 * float(res.log_Z_se) + 0.02, (float(res.log_Z), float(res.log_Z_se), log_z)


@pytest.mark.parametrize("name", ["ising 4x4 periodic", "potts 2x4 open"])
def test_ais_on_a_lattice_against_exact(name):
    """Uniform base: the chains stay in the lattice sweep's layout along the path (Ising: increments from the words)."""
    if name.startswith("ising"):
        model = ui.models.lattice_ising(4, 4)
        params = model.init_params(J=0.44, h=0.1)
    else:
        model = ui.models.lattice_potts(2, 4, 3, periodic=False)
        params = model.init_params(jax.random.key(2), scale=1.2, field_scale=0.5)
    log_z = float(ui.exact.log_partition(model, params))
    res = ui.smc.ais(jax.random.key(7), model, params, num_runs=64, num_betas=500)
    assert abs(float(res.log_Z) - log_z) < 4 * float(res.log_Z_se) + 0.02, (float(res.log_Z), float(res.log_Z_se), log_z)
    assert res.particles[next(iter(model.variables))].shape[0] == 64
