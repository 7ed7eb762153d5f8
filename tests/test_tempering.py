"""Tempered transitions, parallel tempering and ladder adaptation against exact enumeration."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui

TT = ui.kernels.tempered_transitions
PT = ui.kernels.parallel_tempering


def dense_ising(n):
    def energy(params, state):
        s = state["s"].astype(jnp.float32)
        return -0.5 * s @ params["W"] @ s - params["h"] @ s

    return ui.EnergyModel(
        energy, {"s": ui.Spin((n,))}, blocks=[{"s": np.arange(n) == i} for i in range(n)], multilinear=True
    )


def exact_probs(params, n, beta=1.0):
    W, h = np.asarray(params["W"], np.float64), np.asarray(params["h"], np.float64)
    states = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))
    logp = beta * (0.5 * np.einsum("ki,ij,kj->k", states, W, states) + states @ h)
    p = np.exp(logp - logp.max())
    return states, p / p.sum()


def random_params(seed, n, scale=0.5):
    rng = np.random.default_rng(seed)
    W = rng.normal(0, scale, (n, n))
    W = np.triu(W, 1)
    W = W + W.T
    return {"W": jnp.asarray(W, jnp.float32), "h": jnp.asarray(rng.normal(0, 0.3, n), jnp.float32)}


def final_states(algorithm, x0, num_steps, key):
    step = jax.jit(jax.vmap(algorithm.step))
    state = jax.vmap(algorithm.init)(x0)

    @jax.jit
    def run(state, key):
        def body(s, k):
            return step(jax.random.split(k, x0["s"].shape[0]), s)[0], None

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))[0]

    return run(state, key)


# ----------------------------------------------------------------------------------
# exactness (stationarity) on a small model: iid final states of independent chains
# ----------------------------------------------------------------------------------
N_SPINS = 7
NUM_CHAINS = 20000


def exact_draws(params, n, num, seed, beta=1.0):
    """Exact iid configurations (numpy, independent of the library)."""
    states, probs = exact_probs(params, n, beta)
    idx = np.random.default_rng(seed).choice(len(probs), size=num, p=probs)
    return jnp.asarray(states[idx], jnp.float32)


@pytest.fixture(scope="module")
def small_case():
    model = dense_ising(N_SPINS)
    params = random_params(3, N_SPINS, scale=0.7)
    _, probs = exact_probs(params, N_SPINS)
    x0 = model.random_state(jax.random.key(0), NUM_CHAINS)
    return model, params, probs, x0


def mean_moved(before, after):
    return float(jnp.mean(jnp.any(before["s"] != after["s"], axis=-1)))


def test_tempered_transitions_is_exact(small_case):
    model, params, probs, x0 = small_case
    tt = TT(model, params, betas=TT.uniform_ladder(6, 0.3))
    state = final_states(tt, x0, 6, jax.random.key(1))
    idx = state_index(state.position, model)
    assert_distribution_matches(idx, probs, label="tempered transitions")
    # power: the same draws are rejected against the distribution at beta = 0.8
    assert_distribution_differs(idx, exact_probs(params, N_SPINS, beta=0.8)[1], label="TT vs beta 0.8")


def test_tempered_transitions_with_metropolis_base_leaves_p_invariant(small_case):
    # stationarity: started from exact draws, the chain must stay exactly distributed,
    # and it must actually move (a kernel that never accepts would pass otherwise)
    model, params, probs, _ = small_case
    x0 = {"s": exact_draws(params, N_SPINS, NUM_CHAINS, seed=11)}
    base = ui.kernels.metropolis.build_kernel(model, "random")
    tt = TT(model, params, betas=TT.uniform_ladder(4, 0.5), base_kernel=base, base_init=ui.kernels.metropolis.init)
    state = final_states(tt, x0, 3, jax.random.key(2))
    assert_distribution_matches(state_index(state.position, model), probs, label="TT with Metropolis base")
    assert mean_moved(x0, state.position) > 0.3


def test_parallel_tempering_is_exact(small_case):
    model, params, probs, x0 = small_case
    pt = PT(model, params, betas=np.linspace(0.4, 1.0, 4))
    state = final_states(pt, x0, 10, jax.random.key(3))
    target = PT.target_position(state)
    idx = state_index(target, model)
    assert_distribution_matches(idx, probs, label="parallel tempering (beta=1 replica)")
    # every replica targets its own tempered distribution
    hot = jax.tree.map(lambda x: x[:, 0], state.position)
    assert_distribution_matches(state_index(hot, model), exact_probs(params, N_SPINS, beta=0.4)[1], label="PT hot")


def test_parallel_tempering_leaves_tempered_product_invariant(small_case):
    model, params, _, _ = small_case
    betas = np.linspace(0.4, 1.0, 4)
    replicas = jnp.stack([exact_draws(params, N_SPINS, NUM_CHAINS, seed=20 + k, beta=b) for k, b in enumerate(betas)], 1)
    pt = PT(model, params, betas=betas)
    state = final_states(pt, {"s": replicas}, 2, jax.random.key(7))
    for k, b in enumerate(betas):
        rep = jax.tree.map(lambda x, k=k: x[:, k], state.position)
        assert_distribution_matches(
            state_index(rep, model), exact_probs(params, N_SPINS, beta=b)[1], label=f"PT replica {k}"
        )


# ----------------------------------------------------------------------------------
# a bimodal model: Gibbs started in the minority mode stays there, TT and PT do not
# ----------------------------------------------------------------------------------
def test_tempering_recovers_mode_probabilities_where_gibbs_does_not():
    n = 10
    model = dense_ising(n)
    # mean-field coupling J n = 6: two modes separated by a barrier of ~ J n^2 / 4 = 15 nats
    W = np.full((n, n), 0.6)
    np.fill_diagonal(W, 0.0)
    params = {"W": jnp.asarray(W, jnp.float32), "h": jnp.full((n,), 0.05, jnp.float32)}
    states, probs = exact_probs(params, n)
    p_plus = float(probs[states.sum(1) > 0].sum())  # about exp(2 h n) : 1 = 2.7 : 1 -> 0.73
    num_chains = 500
    se = np.sqrt(p_plus * (1 - p_plus) / num_chains)
    x0 = {"s": -jnp.ones((num_chains, n), jnp.float32)}  # every chain starts in the minority mode

    gibbs = ui.kernels.gibbs(model, params)
    g = final_states(gibbs, x0, 200, jax.random.key(4))
    frac_gibbs = float((g.position["s"].sum(-1) > 0).mean())
    assert frac_gibbs < p_plus - 20 * se, f"Gibbs unexpectedly mixed: {frac_gibbs} vs exact {p_plus}"

    betas = TT.uniform_ladder(12, 0.1)  # J n beta_0 = 0.6: the hottest rung has one mode
    tt = final_states(TT(model, params, betas=betas), x0, 30, jax.random.key(5))
    frac_tt = float((tt.position["s"].sum(-1) > 0).mean())
    assert abs(frac_tt - p_plus) < 5 * se, f"TT: {frac_tt} vs exact {p_plus} (se {se:.4f})"

    # PT needs walkers to diffuse down 12 rungs (~ 12^2 steps): 400 steps
    pt = final_states(PT(model, params, betas=betas), x0, 400, jax.random.key(6))
    frac_pt = float((PT.target_position(pt)["s"].sum(-1) > 0).mean())
    assert abs(frac_pt - p_plus) < 5 * se, f"PT: {frac_pt} vs exact {p_plus} (se {se:.4f})"


# ----------------------------------------------------------------------------------
# numerics, infos and ladders
# ----------------------------------------------------------------------------------
@pytest.mark.slow  # left out of CI for its time budget; `pytest -m slow` runs it
def test_log_space_acceptance_does_not_overflow():
    n = 8
    model = dense_ising(n)
    params = random_params(0, n)
    params = jax.tree.map(lambda x: 2000.0 * x, params)  # energies of order 1e4
    x0 = model.random_state(jax.random.key(0), 64)
    tt = TT(model, params, betas=TT.uniform_ladder(5, 0.9))
    state = jax.vmap(tt.init)(x0)
    _, info = jax.vmap(tt.step)(jax.random.split(jax.random.key(1), 64), state)
    assert np.all(np.isfinite(np.asarray(info.acceptance_probability)))
    assert np.all((np.asarray(info.acceptance_probability) >= 0) & (np.asarray(info.acceptance_probability) <= 1))
    assert not np.any(np.isnan(np.asarray(info.log_acceptance_ratio)))
    assert float(jnp.max(jnp.abs(model.energies(params, x0)))) > 1e3
    pt = PT(model, params, betas=np.linspace(0.9, 1.0, 4))
    _, pinfo = jax.vmap(pt.step)(jax.random.split(jax.random.key(2), 64), jax.vmap(pt.init)(x0))
    assert np.all(np.isfinite(np.asarray(pinfo.swap_acceptance)))


def test_parallel_tempering_info_and_round_trips():
    n = 6
    model = dense_ising(n)
    params = random_params(1, n, scale=0.3)
    pt = PT(model, params, betas=np.linspace(0.2, 1.0, 5))
    result = ui.sample(jax.random.key(0), pt, model.random_state(jax.random.key(1), 4), 300)
    info = result.infos
    assert info.swap_acceptance.shape == (4, 300, 4)
    attempted = np.asarray(info.swap_attempted)
    # even pairs on even steps, odd pairs on odd steps
    assert np.all(attempted[:, 0, :] == np.array([True, False, True, False]))
    assert np.all(attempted[:, 1, :] == np.array([False, True, False, True]))
    assert np.all(np.asarray(info.swap_acceptance)[~attempted] == 0)
    rates = np.asarray(info.swap_acceptance).sum((0, 1)) / attempted.sum((0, 1))
    assert np.all(rates > 0.3)  # a weakly coupled model swaps easily
    assert int(info.round_trips[:, -1].min()) > 0
    # round-trip counts never decrease
    assert np.all(np.diff(np.asarray(info.round_trips), axis=1) >= 0)


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_adapt_ladder_equalises_swap_rates():
    def energy(params, state):
        s = state["s"]
        return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1))

    model = ui.EnergyModel(energy, {"s": ui.Spin((6, 6))})
    params = {"J": jnp.float32(0.5)}
    betas = np.linspace(0.05, 1.0, 6)
    report = ui.kernels.adapt_ladder(
        jax.random.key(0), model, params, model.random_state(jax.random.key(1), 16), betas, num_rounds=4, steps_per_round=100
    )
    assert report.betas.shape == betas.shape
    assert report.betas[0] == pytest.approx(0.05) and report.betas[-1] == pytest.approx(1.0)
    assert np.all(np.diff(report.betas) > 0)
    assert report.history.shape == (5, 6) and report.rejection.shape == (4, 5)
    spread_first = np.ptp(report.rejection[0])
    spread_last = np.ptp(report.rejection[-1])
    assert spread_last < spread_first, (spread_first, spread_last)


def test_respace_ladder_equal_shares():
    betas = np.array([0.0, 0.5, 1.0])
    new = ui.kernels.respace_ladder(betas, np.array([0.9, 0.1]), damping=0.0)
    # cumulative rejection 0, 0.9, 1.0: the middle beta moves to where it reaches 0.5
    assert new[1] == pytest.approx(0.5 * 0.5 / 0.9)


@pytest.mark.parametrize(
    "betas, message",
    [
        ([0.5, 0.4, 1.0], "increasing"),
        ([0.1, 0.5, 0.9], "must be 1"),
        ([1.0], "at least 2"),
        ([-0.1, 1.0], ">= 0"),
    ],
)
def test_bad_ladders(betas, message):
    model = dense_ising(3)
    params = random_params(0, 3)
    with pytest.raises(ValueError, match=message):
        TT(model, params, betas=betas)
    with pytest.raises(ValueError, match=message):
        PT(model, params, betas=betas)


def test_bad_arguments():
    model = dense_ising(3)
    params = random_params(0, 3)
    with pytest.raises(ValueError, match="betas"):
        TT.build_kernel(model)
    with pytest.raises(ValueError, match="base_init"):
        TT.build_kernel(model, [0.5, 1.0], base_kernel=ui.kernels.metropolis.build_kernel(model))
    with pytest.raises(ValueError, match="method"):
        ui.kernels.adapt_ladder(
            jax.random.key(0), model, params, model.random_state(jax.random.key(0), 2), [0.5, 1.0], method="x"
        )
    with pytest.raises(ValueError, match="num_betas"):
        TT.uniform_ladder(1, 0.5)
    pt = PT(model, params, betas=[0.5, 0.75, 1.0])
    with pytest.raises(ValueError, match="replicas"):
        pt.init({"s": jnp.ones((2, 3))})


def test_sample_records_the_beta_one_replica_energy_for_parallel_tempering():
    """``ui.sample(..., model=, params=)`` with PT: energies are those of the last (beta = 1) replica."""
    model = ui.models.ising(6)
    params = model.init_params(jax.random.key(0))
    pt = ui.kernels.parallel_tempering(model, params, betas=ui.kernels.tempered_transitions.uniform_ladder(4, 0.5))
    run = ui.sample(jax.random.key(1), pt, model.random_state(jax.random.key(2), 3), 5, model=model, params=params)
    assert run.states["s"].shape == (3, 5, 4, 6) and run.energies.shape == (3, 5)
    expected = jax.vmap(jax.vmap(lambda s: model.energy(params, {"s": s})))(run.states["s"][:, :, -1])
    np.testing.assert_allclose(run.energies, expected, rtol=1e-6)
