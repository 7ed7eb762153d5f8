"""The hand-written dense Boltzmann-machine sweep that ``benchmarks/`` times ``ui.learn.pcd`` against
samples the model: chains of ``handwritten.bm_sweep`` (uniforms from ``fused_uniform``) end
in the exact distribution (chi-square against enumeration, fixed seeds), so the speed
comparison is with code that does the same job.  The packed lattice sweep run in groups of
chains gives the words of the same sweep run on all chains at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from conftest import brute_force
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import handwritten  # noqa: E402


def test_dense_bm_sweep_samples_the_model():
    n, chains, sweeps = 5, 20000, 30
    model = ui.models.boltzmann_machine(n)
    params = model.init_params(jax.random.key(0), scale=1.5, field_scale=0.5)
    W, b = params["W"], params["h"]

    @jax.jit
    def run(key, s):
        def body(s, k):
            return handwritten.bm_sweep(W, b, s, handwritten.fused_uniform(k, (n, chains))), None

        return jax.lax.scan(body, s, jax.random.split(key, sweeps))[0]

    s0 = jnp.zeros((chains, n), jnp.float32)
    s = run(jax.random.key(1), s0)
    idx = state_index({"s": np.asarray(s)}, model)
    assert_distribution_matches(idx, brute_force(model, params), label="handwritten.bm_sweep")
    assert_distribution_differs(idx, brute_force(model, params, 0.5), label="another temperature")


def test_fused_uniform_rows_are_uniform_and_independent_halves():
    """The plain-JAX PCD loop's draws: on [0, 1), each of 16 equal bins within a chi-square bound, and
    the top and bottom halves (the hash's two words) uncorrelated."""
    rows, cols = 200, 500
    u = np.asarray(jax.jit(lambda k: handwritten.fused_uniform_rows(k, (rows, cols)))(jax.random.key(4)), np.float64)
    assert u.shape == (rows, cols) and u.min() >= 0.0 and u.max() < 1.0
    counts = np.bincount((u * 16).astype(int).ravel(), minlength=16)
    expected = u.size / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 37.7, chi2  # chi-square(15) 0.999 quantile
    top, bottom = u[: rows // 2].ravel(), u[rows // 2 :].ravel()
    # correlation of 50,000 independent pairs: sd 1/sqrt(50,000); bound 5 sd
    assert abs(np.corrcoef(top, bottom)[0, 1]) < 5 / np.sqrt(top.size)


def test_packed_sweep_in_groups_of_chains_gives_the_same_words():
    # the chain-grouped hand sweep (bench_lattice's hand_last on large states) is the same sweep as in one group
    x = jax.random.bernoulli(jax.random.key(0), 0.5, (48, 8, 8)).astype(jnp.float32) * 2 - 1
    words = tuple(jnp.moveaxis(w, 0, -1) for w in handwritten.packed_from_spins(x))
    whole = handwritten.packed_sweep(0.44, 0.0, 3, chains_last=True)(jax.random.key(1), words)
    grouped = handwritten.packed_sweep(0.44, 0.0, 3, chains_last=True, group=16)(jax.random.key(1), words)
    for a, b, w in zip(grouped, whole, words):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert not np.array_equal(np.asarray(a), np.asarray(w))
