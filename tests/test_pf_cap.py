"""The staleness safeguards of ``pf_mcmc_mle`` (ours, not in Asuncion et al. 2010).

``max_updates_between_rejuvenation=K`` must resample + rejuvenate after at most ``K``
reweighting updates even when the ESS never drops (here: a zero learning rate keeps
the weights exactly uniform, so the ESS test of Alg. 2 never fires), and
``max_param_distance=d`` must do so exactly when the parameters have moved more than
``d`` (global L2) from those of the last rejuvenation.  With both options ``None``
(default) the learner must be Alg. 2 update for update: the same trajectory, bit for
bit, as with triggers that never fire.  Tiny 5-spin Ising model, one jitted scan per
configuration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ugm_infer as ui
from ugm_infer.models.ising import ising

N_SPINS = 5
STEPS = 16


def _setup():
    model = ising(N_SPINS)
    rng = np.random.default_rng(0)
    upper = np.triu(rng.normal(size=(N_SPINS, N_SPINS)), 1)
    params = {
        "W": jnp.asarray(0.3 * (upper + upper.T), jnp.float32),
        "h": jnp.asarray(rng.normal(size=N_SPINS), jnp.float32),
    }
    batch = model.random_state(jax.random.key(7), 64)
    return model, params, batch


def _run(learner, params, batch):
    """STEPS updates in one jitted scan: (final state, params before each update, resampled, ess)."""
    state = learner.init(jax.random.key(0), params)

    @jax.jit
    def go(state, key):
        def body(state, k):
            new, info = learner.step(k, state, batch)
            return new, (state.params, info.resampled, info.ess)

        return jax.lax.scan(body, state, jax.random.split(key, STEPS))

    final, (trail, resampled, ess) = go(state, jax.random.key(1))
    return state, final, trail, np.asarray(resampled), np.asarray(ess)


def test_cap_and_distance_force_rejuvenation_exactly_when_due():
    """ESS threshold 1e-6: the ESS (>= 1 > 1e-6 S) can never trigger, so every
    rejuvenation comes from the safeguards; the host replays the rule on the
    parameter trail and must get exactly the same resampling steps."""
    model, params, batch = _setup()
    cap, d = 4, 0.15
    # step sizes 0.2 * 0.7^t: early moves are large (the distance trigger fires), late
    # ones tiny (only the cap fires)
    learner = ui.learn.pf_mcmc_mle(
        model,
        None,
        optax.sgd(lambda t: 0.2 * 0.7**t),
        16,
        ess_threshold=1e-6,
        max_updates_between_rejuvenation=cap,
        max_param_distance=d,
    )
    init, final, trail, resampled, _ = _run(learner, params, batch)
    trail = [{k: np.asarray(v[t], np.float64) for k, v in trail.items()} for t in range(STEPS)]
    anchor, since, expected, by_cap, by_distance = trail[0], 0, [], 0, 0
    for theta in trail:
        far = np.sqrt(sum(np.sum((theta[k] - anchor[k]) ** 2) for k in theta)) > d
        stale = since >= cap
        expected.append(far or stale)
        by_cap += stale and not far
        by_distance += far and not stale
        if far or stale:
            anchor, since = theta, 1
        else:
            since += 1
    np.testing.assert_array_equal(resampled, np.array(expected))
    # both triggers fire on their own at least once, and not every update rejuvenates
    assert by_cap > 0 and by_distance > 0 and resampled.sum() < STEPS, (by_cap, by_distance, resampled)
    assert int(final.num_resampled) == resampled.sum()
    assert int(final.updates_since_rejuvenation) == since
    np.testing.assert_allclose(np.asarray(final.anchor_params["h"]), anchor["h"], rtol=1e-6, atol=1e-7)
    assert not np.array_equal(np.asarray(final.particles["s"]), np.asarray(init.particles["s"]))


def test_defaults_are_algorithm_2_update_for_update():
    model, params, batch = _setup()
    runs = []
    for kw in ({}, {"max_updates_between_rejuvenation": 10**6, "max_param_distance": 1e6}):
        learner = ui.learn.pf_mcmc_mle(model, None, optax.sgd(0.05), 16, ess_threshold=0.9, **kw)
        runs.append(_run(learner, params, batch))
    base = runs[0]
    assert 0 < base[3].sum() < STEPS  # the ESS test itself fires sometimes
    for other in runs[1:]:
        np.testing.assert_array_equal(other[3], base[3])
        for k in params:
            np.testing.assert_array_equal(np.asarray(other[1].params[k]), np.asarray(base[1].params[k]))
        np.testing.assert_array_equal(np.asarray(other[1].particles["s"]), np.asarray(base[1].particles["s"]))


def test_bad_safeguard_arguments():
    model = ising(N_SPINS)
    for bad in (0, -2, 1.5):
        with pytest.raises((ValueError, TypeError), match="max_updates_between_rejuvenation"):
            ui.learn.pf_mcmc_mle(model, max_updates_between_rejuvenation=bad)
    for bad in (0.0, -1.0, float("nan"), "far"):
        with pytest.raises((ValueError, TypeError), match="max_param_distance"):
            ui.learn.pf_mcmc_mle(model, max_param_distance=bad)
