"""ugm_infer kernels as the inner MCMC kernel of BlackJAX's adaptive tempered SMC.

Exactly the recipe of INTEGRATION.md section 1: ``blackjax.adaptive_tempered_smc`` with
``ui.kernels.<kernel>.build_kernel(model, ...)`` as ``mcmc_step_fn`` and
``ui.kernels.<kernel>.init`` as ``mcmc_init_fn``, a uniform prior (``logprior = 0``,
particles from ``model.random_state``) and ``loglik = -E``.  The SMC estimate
``log Z-hat = sum_t log_likelihood_increment_t + n log 2`` is compared with the exact
``log Z`` from brute-force enumeration (``conftest.brute_force_log_z``).

Tolerance.  ``Z-hat`` is unbiased for a fixed schedule, so by the delta method
``E[log Z-hat] ~= log Z - Var(log Z-hat) / 2``: log Z-hat is biased *low* by about half
its variance.  With ``R`` independent replicates (mean ``m``, sample sd ``s``) we assert

    |m - log Z| < 4 s / sqrt(R) + s^2,

i.e. a 4-sigma band for the Monte Carlo error of the mean plus a bias allowance of
``s^2``: twice the delta-method bias ``s^2 / 2``, because with ``R = 16`` the sample
variance itself has a relative sd of ``sqrt(2 / (R - 1)) ~= 0.37`` and the adaptive
(data-dependent) choice of temperatures adds a further ``O(1/N)`` bias.  The same
numbers are checked to *reject* the log Z of a different coupling (power).

The Metropolis state caches the log-density; that is fine inside SMC because BlackJAX
re-creates the inner state with ``mcmc_init_fn(position, tempered_logdensity)`` at every
SMC step (``blackjax/smc/base.py``, ``update_and_take_last``), so the cache always
matches the current temperature.
"""

from __future__ import annotations

import math

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.smc import resampling
from conftest import brute_force_log_z, lattice

import ugm_infer as ui

NUM_PARTICLES = 500
NUM_REPLICATES = 16
PARAMS = {"J": 0.4, "H": 0.05}  # 4x4 periodic lattice at beta = 0.4 (J = 1), small field


def smc_log_z(model, params, kernel, init, key):
    """log Z-hat of ``NUM_REPLICATES`` independent adaptive tempered SMC runs (vmapped, jitted)."""
    loglik = lambda x: -model.energy(params, x)
    logprior = lambda x: jnp.zeros(())
    smc = blackjax.adaptive_tempered_smc(
        logprior, loglik, kernel, init, {}, resampling.systematic, target_ess=0.6, num_mcmc_steps=2
    )
    log_num_states = model.num_sites * math.log(2.0)

    def one_run(k):
        key_init, key_run = jax.random.split(k)
        state = smc.init(model.random_state(key_init, NUM_PARTICLES))

        def cond(carry):
            return carry[1].tempering_param < 1.0

        def body(carry):
            k, state, log_z, steps = carry
            k, sub = jax.random.split(k)
            state, info = smc.step(sub, state)
            return k, state, log_z + info.log_likelihood_increment, steps + 1

        init_carry = (key_run, state, jnp.zeros(()), jnp.zeros((), jnp.int32))
        _, state, log_z, steps = jax.lax.while_loop(cond, body, init_carry)
        return log_z + log_num_states, steps

    return jax.jit(jax.vmap(one_run))(jax.random.split(key, NUM_REPLICATES))


@pytest.fixture(scope="module")
def lattice_case():
    model = lattice(4, 4)
    model.detect_structure(PARAMS)
    return model, brute_force_log_z(model, PARAMS)


def check_log_z(estimates, exact, label):
    estimates = np.asarray(estimates, dtype=np.float64)
    mean, sd = estimates.mean(), estimates.std(ddof=1)
    tolerance = 4 * sd / math.sqrt(len(estimates)) + sd**2
    return abs(mean - exact) < tolerance, f"{label}: mean {mean:.4f} vs exact {exact:.4f} (sd {sd:.4f}, tol {tolerance:.4f})"


@pytest.mark.parametrize(
    "name,make",
    [
        ("gibbs-block", lambda m: (ui.kernels.gibbs.build_kernel(m, "block", params=PARAMS), ui.kernels.gibbs.init)),
        pytest.param(  # the same SMC with another move kernel: CI runs the block-Gibbs one
            "metropolis-systematic",
            lambda m: (ui.kernels.metropolis.build_kernel(m, "systematic"), ui.kernels.metropolis.init),
            marks=pytest.mark.slow,
        ),
    ],
)
def test_adaptive_tempered_smc_log_z(lattice_case, name, make, key):
    model, exact = lattice_case
    kernel, init = make(model)
    estimates, steps = smc_log_z(model, PARAMS, kernel, init, jax.random.fold_in(key, 42))
    assert np.all(np.asarray(steps) >= 2), "the adaptive schedule should need several temperatures"
    ok, message = check_log_z(estimates, exact, name)
    assert ok, message
    # power: the same estimates reject log Z of a 10% stronger coupling
    wrong = brute_force_log_z(model, {"J": 0.44, "H": 0.05})
    ok_wrong, message_wrong = check_log_z(estimates, wrong, f"{name} vs J=0.44")
    assert not ok_wrong, message_wrong
