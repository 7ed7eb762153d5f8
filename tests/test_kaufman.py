"""Kaufman's finite-torus Ising partition function (benchmarks/kaufman.py) against enumeration."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import ugm_infer as ui

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "kaufman.py"
_spec = importlib.util.spec_from_file_location("ugm_benchmarks_kaufman", _PATH)
kaufman = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kaufman)


@pytest.mark.parametrize(
    ("height", "width"),
    [(4, 4), (3, 4), (4, 5)],  # 3x4: an odd periodic size (non-bipartite torus, 3 colours)
)
def test_matches_exact_enumeration(height, width):
    import jax

    couplings = (0.2, 0.44, 0.9)  # high temperature, near K_c = 0.4407, low temperature
    jax.config.update("jax_enable_x64", True)  # 1e-8 needs float64 enumeration (2**20 terms for 4x5)
    try:
        model = ui.models.lattice_ising(height, width, periodic=True, dtype=jax.numpy.float64)
        exact = [
            float(ui.exact.log_partition(model, model.init_params(J=K, h=0.0, dtype=jax.numpy.float64))) for K in couplings
        ]
    finally:
        jax.config.update("jax_enable_x64", False)
    for K, ref in zip(couplings, exact):
        value = kaufman.kaufman_log_z(K, height, width)
        assert abs(value - ref) <= 1e-8 * abs(ref), (K, value, ref)
        # the formula is symmetric in the two directions
        assert abs(kaufman.kaufman_log_z(K, width, height) - value) <= 1e-12 * abs(value)


def test_large_lattice_approaches_onsager():
    # log Z / N -> Onsager's free energy; the finite-size correction at K = 0.44 (near
    # K_c) is positive and shrinks with the size
    limit = kaufman.onsager_free_energy(0.44)
    per_site = [kaufman.kaufman_log_z(0.44, n, n) / n**2 for n in (16, 32, 64)]
    gaps = [p - limit for p in per_site]
    assert gaps[0] > gaps[1] > gaps[2] > 0.0
    assert gaps[2] < 2e-4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(K=0.0, n=4, m=4), "`K`"),
        (dict(K=float("nan"), n=4, m=4), "`K`"),
        (dict(K=0.4, n=2, m=4), "`n`"),
        (dict(K=0.4, n=4, m=4.0), "`m`"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kaufman.kaufman_log_z(**kwargs)
