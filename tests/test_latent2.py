"""Latent-variable models, part 2: exact grid likelihoods by transfer matrix, row indices in
``ui.fit`` (APCD), the SBN mean-field learner under ``ui.fit``, and AIS-based DBM test
log-likelihoods.

Ground truth is exact enumeration (``ui.exact``) on models small enough for it.  The
transfer matrix is exact, so it must agree with enumeration to float32 rounding.
AIS estimates are checked against the exact values with tolerances built from their own
standard errors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ugm_infer as ui
from ugm_infer.learn.apcd import apcd
from ugm_infer.learn.base import Learner
from ugm_infer.learn.sbn_meanfield import mean_field_learner
from ugm_infer.models.dbm import dbm
from ugm_infer.models.grid_hidden import grid_hidden, grid_log_likelihood, grid_log_partition
from ugm_infer.models.sbn import sigmoid_belief_net
from ugm_infer.smc.ais import ais_latent_log_likelihood

# float32 rounding over ~10-20 logaddexp steps of values of size ~10-30
ATOL = 2e-5


@pytest.mark.parametrize(
    "height, width, periodic, domain",
    [
        (3, 4, False, "binary"),  # open grid, frontier along the 3-site columns
        (4, 3, True, "spin"),  # taller than wide (transposed scan), periodic both ways (wrap sum)
    ],
)
def test_grid_transfer_matrix_equals_enumeration(height, width, periodic, domain):
    rng = np.random.default_rng(height * 10 + width)
    hidden = np.sort(rng.permutation(height * width)[: (height * width) // 2])
    model = grid_hidden(height, width, hidden, periodic=periodic, domain=domain)
    params = model.random_params(jax.random.key(3))
    log_z = grid_log_partition(model, params)
    assert abs(float(log_z) - float(ui.exact.log_partition(model, params))) < ATOL
    v = ui.exact.sample(jax.random.key(4), model, params, 12)["v"]
    exact = ui.exact.log_likelihood(model, params, {"v": v})
    np.testing.assert_allclose(np.asarray(grid_log_likelihood(model, params, {"v": v})), np.asarray(exact), atol=ATOL)
    # log Z(v) for a batch of shape (3, 4) keeps it; one configuration gives a scalar
    log_z_v = grid_log_partition(model, params, v.reshape(3, 4, -1))
    assert log_z_v.shape == (3, 4)
    np.testing.assert_allclose(np.asarray(log_z_v).reshape(-1), np.asarray(exact + log_z), atol=ATOL)
    assert grid_log_partition(model, params, v[0]).shape == ()


def test_grid_transfer_matrix_rejects_bad_input():
    model = grid_hidden(3, 3, [0, 4])
    params = model.init_params(jax.random.key(0))
    with pytest.raises(ValueError, match=r"\(\.\.\., 7\)"):
        grid_log_partition(model, params, jnp.zeros((2, 5)))
    with pytest.raises(ValueError, match="key 'v'"):
        grid_log_partition(model, params, {"h": jnp.zeros(2)})
    with pytest.raises(TypeError, match="GridHidden"):
        grid_log_partition(ui.models.ising(3), params)
    big = grid_hidden(30, 30, [0])
    with pytest.raises(ValueError, match="AIS"):
        grid_log_partition(big, big.init_params(jax.random.key(0)))


def test_fit_passes_row_indices_to_learners_that_ask():
    """A learner whose step declares ``batch_index_key`` sees its rows' indices into the data."""
    model = grid_hidden(2, 2, [3])
    data = np.asarray(np.random.default_rng(0).integers(0, 2, (24, 3)), np.float32)
    table = jnp.asarray(data)

    class State(NamedTuple):
        params: dict
        step: jax.Array

    def init(rng_key, params, data=None):
        return State(params, jnp.zeros((), jnp.int32))

    def step(rng_key, state, batch):
        mismatch = jnp.max(jnp.abs(table[batch["_rows"]] - batch["v"]))
        return State(state.params, state.step + 1), {"mismatch": mismatch}

    step.batch_index_key = "_rows"
    learner = Learner(init, step, model, "spy", ("v",))
    res = ui.fit(
        learner,
        jax.random.key(1),
        data,
        params=model.init_params(jax.random.key(0)),
        num_epochs=2,
        batch_size=8,
        progress=False,
        eval_fn=None,
    )
    assert np.all(res.history["steps"]["mismatch"] == 0.0)
    bad = Learner(init, step, model, "spy", ("v",))
    step.batch_index_key = "v"
    with pytest.raises(ValueError, match="clashes"):
        ui.fit(bad, jax.random.key(1), data, params=model.init_params(jax.random.key(0)), num_epochs=1, batch_size=8)


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_apcd_under_fit_uses_indices_and_matches_the_hash_lookup():
    """ui.fit passes APCD its rows; the run equals the one that finds rows by hashing them."""
    model = grid_hidden(2, 3, [1, 4], domain="spin")
    truth = model.random_params(jax.random.key(0))
    data = ui.exact.sample(jax.random.key(1), model, truth, 60)["v"]
    p0 = model.init_params(jax.random.key(2))
    learner = apcd(model, optax.sgd(0.05), 20)
    assert learner.step.batch_index_key == "_index"

    def hashed_step(k, s, b):
        return learner.step(k, s, b)

    hashed = learner._replace(step=hashed_step)  # no batch_index_key: rows found by hashing
    kw = dict(params=p0, num_epochs=3, batch_size=20, progress=False, eval_fn=None)
    a = ui.fit(learner, jax.random.key(3), data, **kw)
    b = ui.fit(hashed, jax.random.key(3), data, **kw)
    for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert int(a.state.step) == 9 and int(jnp.min(a.state.visits)) > 0  # every distinct row was visited


def test_sbn_mean_field_learner_runs_under_fit():
    model = sigmoid_belief_net([5, 3])
    truth = model.init_params(jax.random.key(1), scale=2.0)
    data = ui.exact.sample(jax.random.key(2), model, truth, 100)["v"]
    p0 = model.init_params(jax.random.key(0), scale=0.1)
    res = ui.fit(
        mean_field_learner(model, optax.adam(0.05)),
        jax.random.key(3),
        data,
        params=p0,
        num_epochs=15,
        batch_size=50,
        progress=False,
        eval_every=15,
    )
    ll = res.history["evaluations"]["train_log_likelihood"]  # exact (ui.exact, 2^8 states)
    bound = res.history["steps"]["bound"]
    assert ll[-1] > ll[0] + 0.2, ll
    assert bound[-1] > bound[0] + 0.2, bound


def test_dbm_ais_log_likelihood_against_enumeration():
    model = dbm([6, 4, 3])
    rng = np.random.default_rng(0)
    params = {
        "W1": jnp.asarray(rng.normal(size=(6, 4)), jnp.float32),
        "W2": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),
        "b0": jnp.asarray(0.5 * rng.normal(size=6), jnp.float32),
        "b1": jnp.asarray(0.5 * rng.normal(size=4), jnp.float32),
        "b2": jnp.asarray(0.5 * rng.normal(size=3), jnp.float32),
    }
    v = ui.exact.sample(jax.random.key(0), model, params, 10)["v"]
    log_z = float(ui.exact.log_partition(model, params))
    exact = np.asarray(ui.exact.log_likelihood(model, params, {"v": v}))
    log_z_v = exact + log_z
    mf = ais_latent_log_likelihood(jax.random.key(1), model, params, {"v": v}, num_runs=64, num_betas=100)
    assert mf.estimator == "mean_field"
    # the mean-field value is a bound on log Z(v), always, and not a trivial one
    gap = log_z_v - np.asarray(mf.log_Z_v)
    assert np.all(gap >= -1e-5) and np.all(gap < 1.0), gap
    assert abs(float(mf.log_Z) - log_z) < 4 * float(mf.log_Z_se) + 1e-3, (float(mf.log_Z), log_z, float(mf.log_Z_se))
    np.testing.assert_allclose(np.asarray(mf.log_likelihoods), np.asarray(mf.log_Z_v) - float(mf.log_Z), rtol=1e-6)
    # saturated mean-field units (0 log 0) must give a finite bound (regression: it was NaN in float32)
    strong = jax.tree.map(lambda x: 40.0 * x, params)
    sat = ais_latent_log_likelihood(jax.random.key(1), model, strong, {"v": v}, num_runs=64, num_betas=100)
    exact_strong = np.asarray(ui.exact.log_likelihood(model, strong, {"v": v})) + float(
        ui.exact.log_partition(model, strong)
    )
    assert np.all(np.isfinite(np.asarray(sat.log_Z_v))) and np.all(np.asarray(sat.log_Z_v) <= exact_strong + 1e-3)
    est = ais_latent_log_likelihood(
        jax.random.key(2),
        model,
        params,
        {"v": v},
        estimator="ais",
        num_runs=64,
        num_betas=100,
        conditional_runs=32,
        conditional_betas=50,
    )
    err = np.asarray(est.log_Z_v) - log_z_v
    se = np.asarray(est.log_Z_v_se)
    assert np.all(se > 0) and np.all(np.abs(err) < 5 * se + 1e-3), (err, se)
    assert abs(float(est.log_likelihood) - exact.mean()) < 5 * float(est.log_likelihood_se) + 1e-3
    # a power check: the MF bound is detectably below the per-datum AIS estimate here
    assert np.mean(np.asarray(est.log_Z_v) - np.asarray(mf.log_Z_v)) > 10 * np.sqrt(np.mean(se**2) / se.size)
    with pytest.raises(ValueError, match="estimator"):
        ais_latent_log_likelihood(jax.random.key(2), model, params, {"v": v}, estimator="exact")
    with pytest.raises(ValueError, match="every variable"):
        ais_latent_log_likelihood(jax.random.key(2), model, params, ui.exact.sample(jax.random.key(0), model, params, 2))
