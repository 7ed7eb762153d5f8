"""The four-sub-lattice checkerboard sweep (``ugm_infer.kernels.checkerboard``) and user lattice energies.

The block Gibbs kernel runs the sweep when it gets a ``LatticeLogDensity`` (what
``lattice_ising(...).logdensity_fn`` returns for even sizes, and what the kernels make
of a user energy recognised as a uniform lattice energy).  Checked here:

* the fused hash equals ``jax.random``'s Threefry primitive; packing round-trips;
* the kernel's draws against brute-force enumeration (chi-square at alpha = 1e-6 with
  fixed seeds, ``stat_utils``): the full joint on open 2x4 lattices (spin and binary,
  int8 and float32 storage), the joint of (energy, magnetisation) on a 4x4 torus (also
  with the colours in reverse order and tempered), and power against the wrong beta;
* the fast path against the path it replaces (the generic block sweep given the same
  density as a plain function): a two-sample chi-square on the 4x4 torus;
* user energies: recognised (periodic ``jnp.roll`` energy, open slicing energy) or not
  (a per-site field, an odd size), and sampled exactly through ``ui.kernels.gibbs``.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import brute_force, covering_pairs, energy_magnetisation_cells, run_chains
from scipy import stats
from stat_utils import assert_distribution_differs, assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer.kernels import checkerboard
from ugm_infer.kernels._common import temper
from ugm_infer.kernels.lattice_form import lattice_form

gibbs_module = importlib.import_module("ugm_infer.kernels.gibbs")
CHAINS, SWEEPS = 20000, 30
# (num_sweeps, reverse) of the bit-for-bit checks: one sweep either way, and a loop of sweeps
SWEEP_CASES = [(1, False), (1, True), (3, False)]


def test_threefry_matches_jax_primitive():
    from jax.extend.random import threefry2x32_p

    x1 = jnp.arange(50, dtype=jnp.uint32) * jnp.uint32(2654435761)
    x2 = jnp.arange(50, dtype=jnp.uint32)
    for k1, k2 in ((0, 0), (123, 4567), (0xFFFFFFFF, 17)):
        k1, k2 = jnp.uint32(k1), jnp.uint32(k2)
        ours = checkerboard.threefry2x32(k1, k2, x1, x2)
        theirs = threefry2x32_p.bind(k1, k2, x1, x2)
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("domain,dtype", [("spin", "float32"), ("binary", "int8")])
def test_pack_unpack_roundtrip(domain, dtype):
    layout = checkerboard.LatticeLayout(6, 4, True, domain, dtype)
    rng = np.random.default_rng(0)
    values = [-1, 1] if domain == "spin" else [0, 1]
    x = jnp.asarray(rng.choice(values, (3, 6, 4)), dtype)
    even, odd = layout.pack(x)
    assert even.shape == odd.shape == (3, 3, 2) and even.dtype == jnp.uint16
    back = layout.unpack(even, odd)
    assert back.dtype == jnp.dtype(dtype)
    np.testing.assert_array_equal(back, x)
    y = x.at[1, 0, 0].set(values[0] if x[1, 0, 0] == values[1] else values[1]).at[2].set(x[2])
    np.testing.assert_array_equal(checkerboard.count_changed((even, odd), layout.pack(y)), [0, 1, 0])


def test_states_and_densities_stay_on_the_lattice_path():
    model = ui.models.lattice_ising(4, 6)
    ld = model.logdensity_fn(model.init_params(J=0.5))
    assert isinstance(ld, checkerboard.LatticeLogDensity)
    state = gibbs_module.init(model.random_state(jax.random.key(0)), ld)
    assert isinstance(state, checkerboard.LatticeGibbsState)
    assert state.position["s"].shape == (4, 6) and state.position["s"].dtype == jnp.float32
    hot = temper(ld, 0.5)  # parallel tempering / tempered transitions
    assert isinstance(hot, checkerboard.LatticeLogDensity) and float(hot.beta) == 0.5
    assert isinstance(gibbs_module.init(model.random_state(jax.random.key(0)), hot), checkerboard.LatticeGibbsState)
    # a plain function is not the lattice density: the generic state
    assert isinstance(gibbs_module.init(state.position, lambda x: ld(x)), gibbs_module.GibbsState)
    # odd sizes keep the site-logits path
    odd = ui.models.lattice_ising(5, 3)
    assert odd.logdensity_fn(odd.init_params()).layout("float32") is None


def _draws(model, logdensity_fn, seed, reverse=False, chains=CHAINS):
    kernel = gibbs_module.build_kernel(model, "block", reverse=reverse)
    start = model.random_state(jax.random.key(seed + 100), chains)
    return run_chains(kernel, gibbs_module.init, logdensity_fn, start, jax.random.key(seed), SWEEPS)


@pytest.mark.parametrize(
    "domain,dtype,J,h", [("spin", jnp.int8, 0.6, -0.3), ("binary", jnp.float32, 1.1, -0.7), ("spin", jnp.float32, -0.8, 0.2)]
)
def test_open_lattice_matches_enumeration(domain, dtype, J, h):
    model = ui.models.lattice_ising(2, 4, periodic=False, domain=domain, dtype=dtype)
    params = model.init_params(J=J, h=h)
    ld = model.logdensity_fn(params, 0.9)
    assert ld.layout(jnp.dtype(dtype)) is not None
    x = _draws(model, ld, 1)
    assert x["s"].dtype == jnp.dtype(dtype)
    assert_distribution_matches(state_index(x, model), brute_force(model, params, 0.9), label=f"2x4 open {domain}")


@pytest.mark.parametrize("reverse,temper_by", [(False, 1.0), pytest.param(True, 1.0, marks=pytest.mark.slow), (False, 0.5)])
def test_torus_matches_enumeration(reverse, temper_by):
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.35, h=0.15)
    ld = temper(model.logdensity_fn(params, 0.8), temper_by)
    probs, cell = energy_magnetisation_cells(model, params, 0.8 * temper_by)
    idx = cell(_draws(model, ld, 2, reverse=reverse))
    assert_distribution_matches(idx, probs, label=f"4x4 torus, reverse={reverse}, tempered x{temper_by}")
    if temper_by == 1.0 and not reverse:  # power: the same draws reject the target with beta ignored
        wrong, _ = energy_magnetisation_cells(model, params, 0.2)
        assert_distribution_differs(idx, wrong, label="beta ignored")


def _assert_same_distribution(a: np.ndarray, b: np.ndarray, alpha: float = 1e-6) -> None:
    """Two-sample chi-square (homogeneity) test; cells with fewer than 10 draws in all are pooled."""
    n = max(a.max(), b.max()) + 1
    ca, cb = np.bincount(a, minlength=n), np.bincount(b, minlength=n)
    big = (ca + cb) >= 10
    table = np.stack([np.append(ca[big], ca[~big].sum()), np.append(cb[big], cb[~big].sum())])
    table = table[:, table.sum(0) > 0]
    stat, _, dof, _ = stats.chi2_contingency(table, correction=False)
    assert stat <= stats.chi2.ppf(1 - alpha, dof), f"two-sample chi-square {stat:.1f} (dof {dof})"


def test_fast_path_agrees_with_the_generic_path():
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.3, h=-0.1)
    ld = model.logdensity_fn(params)
    plain = lambda x: ld(x)  # noqa: E731 - the same density, not recognisable: the generic block sweep
    probs, cell = energy_magnetisation_cells(model, params, 1.0)
    fast = cell(_draws(model, ld, 3))
    generic = cell(_draws(model, plain, 4))
    _assert_same_distribution(fast, generic)
    assert_distribution_matches(generic, probs, label="generic path")


def _roll_energy(params, state):
    s = state["x"]
    return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1)) - params["h"] * jnp.sum(s) + 3.0


def _open_energy(params, state):
    s = state["x"]
    pair = jnp.sum(s[1:] * s[:-1]) + jnp.sum(s[:, 1:] * s[:, :-1])
    return -params["J"] * pair - params["h"] * jnp.sum(s)


def _site_field_energy(params, state):
    s = state["x"]
    return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1)) - jnp.sum(params["h"] * s)


def test_user_lattice_energies_are_recognised_or_not():
    scalars = {"J": jnp.float32(0.4), "h": jnp.float32(0.1)}
    assert lattice_form(ui.EnergyModel(_roll_energy, {"x": ui.Spin((4, 6))}), scalars) == (4, 6, True, "spin")
    assert lattice_form(ui.EnergyModel(_open_energy, {"x": ui.Binary((2, 4))}), scalars) == (2, 4, False, "binary")
    # a per-site field (uniform at the given values) is not a uniform lattice energy
    field = {"J": jnp.float32(0.4), "h": jnp.zeros((4, 6))}
    assert lattice_form(ui.EnergyModel(_site_field_energy, {"x": ui.Spin((4, 6))}), field) is None
    # odd sizes (three colours) and non-lattice variables are left to the generic path
    assert lattice_form(ui.EnergyModel(_roll_energy, {"x": ui.Spin((5, 6))}), scalars) is None
    assert lattice_form(ui.EnergyModel(lambda p, s: -p["J"] * jnp.sum(s["x"]), {"x": ui.Spin((8,))}), scalars) is None


def test_recognised_user_lattice_skips_the_structure_probe(monkeypatch):
    """A recognised lattice needs no Hessian probe (its rows are as long as the lattice: gigabytes at 512^2)."""
    import ugm_infer.model as model_module

    def refuse(*args, **kwargs):
        raise AssertionError("analyze_energy called for a recognised lattice")

    monkeypatch.setattr(model_module, "analyze_energy", refuse)
    model = ui.EnergyModel(_roll_energy, {"x": ui.Spin((8, 8))})
    algorithm = ui.kernels.gibbs(model, {"J": jnp.float32(0.3), "h": jnp.float32(0.1)})
    assert isinstance(algorithm.init(model.random_state(jax.random.key(0))), checkerboard.LatticeGibbsState)


@pytest.mark.parametrize(
    "energy,domain,shape",
    [(_roll_energy, ui.Spin, (4, 4)), pytest.param(_open_energy, ui.Binary, (2, 4), marks=pytest.mark.slow)],
)
def test_user_lattice_energy_samples_exactly(energy, domain, shape):
    model = ui.EnergyModel(energy, {"x": domain(shape)})
    params = {"J": jnp.float32(0.3), "h": jnp.float32(-0.2)}  # weak enough to mix in 30 sweeps from random starts
    algorithm = ui.kernels.gibbs(model, params)
    state = algorithm.init(model.random_state(jax.random.key(0)))
    assert isinstance(state, checkerboard.LatticeGibbsState)  # the four-sub-lattice sweep
    run = ui.sample(jax.random.key(5), algorithm, model.random_state(jax.random.key(6), CHAINS), 1, num_warmup=SWEEPS)
    draws = {"x": run.states["x"][:, 0]}
    if shape == (4, 4):
        probs, cell = energy_magnetisation_cells(model, params, 1.0, name="x")
        assert_distribution_matches(cell(draws), probs, label="user roll energy, 4x4 torus")
    else:
        assert_distribution_matches(state_index(draws, model), brute_force(model, params), label="user open energy")


def _reference_sweep(layout, num_sweeps, reverse):
    """The sweep as ``2 num_sweeps`` half-sweeps with a traced colour: the random stream the fast form must keep."""
    first = 1 if reverse else 0

    def sweep(rng_key, even, odd, table):
        k1, k2 = checkerboard.key_pair(rng_key)

        def half(t, words):
            t = jnp.asarray(t, jnp.uint32)
            return words[1], checkerboard._update_colour(layout, words[1], (t + first) % 2, k1, k2, t, table)

        a, b = jax.lax.fori_loop(0, 2 * num_sweeps, half, (even, odd) if first == 0 else (odd, even))
        return (a, b) if first == 0 else (b, a)

    return sweep


@pytest.mark.parametrize(
    "periodic, domain, num_sweeps, reverse",
    covering_pairs([(True, "spin"), (False, "spin"), (False, "binary"), (True, "binary")], SWEEP_CASES),
)
def test_sweep_is_bit_identical_to_the_half_sweep_reference(periodic, domain, num_sweeps, reverse):
    layout = checkerboard.LatticeLayout(6, 8, periodic, domain, "float32")
    table = layout.thresholds(0.4, -0.2, 1.0)
    x = jax.random.bernoulli(jax.random.key(2), 0.5, (5, 6, 8)).astype(jnp.float32)
    words = jax.vmap(layout.pack)(x)
    keys = jax.random.split(jax.random.key(7), 5)
    run = jax.jit(jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse), in_axes=(0, 0, 0, None)))
    ref = jax.jit(jax.vmap(_reference_sweep(layout, num_sweeps, reverse), in_axes=(0, 0, 0, None)))
    got, want = run(keys, *words, table), ref(keys, *words, table)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert not np.array_equal(np.asarray(got[0]), np.asarray(words[0]))  # the sweep did change sites


@pytest.mark.parametrize(
    "periodic, domain, num_sweeps, reverse", covering_pairs([(True, "spin"), (False, "binary")], SWEEP_CASES)
)
def test_change_flags_count_the_sites_changed_by_a_step(periodic, domain, num_sweeps, reverse):
    # the flagged sweep gives the same values as the plain one; its flags mark exactly the sites whose
    # value differs from the step's input, also when the input words carry flags of an earlier step
    layout = checkerboard.LatticeLayout(6, 8, periodic, domain, "float32")
    table = layout.thresholds(0.2, -0.1, 1.0)
    x = jax.random.bernoulli(jax.random.key(3), 0.5, (40, 6, 8)).astype(jnp.float32)
    words = jax.vmap(layout.pack)(x)
    plain = jax.jit(jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse), in_axes=(0, 0, 0, None)))
    flagged = jax.jit(
        jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse, track_changes=True), in_axes=(0, 0, 0, None))
    )
    values = jnp.uint16(0x0101)
    for step in range(3):
        keys = jax.random.split(jax.random.key(10 + step), 40)
        want = plain(keys, *(w & values for w in words), table)
        got = flagged(keys, *words, table)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g & values), np.asarray(w))
        changed = np.asarray(checkerboard.count_changed(words, got))
        np.testing.assert_array_equal(np.asarray(checkerboard.count_flags(*got, reverse)), changed)
        assert changed.min() > 0 and (step == 0 or np.asarray(checkerboard.count_flags(*words, reverse)).max() > 0)
        words = got


@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 64, 64), (1, 1, 1), (4, 100, 130)])
def test_count_changed_counts_every_changed_site(shape):
    rng = np.random.default_rng(sum(shape))  # host draws: nothing to compile per shape
    old, new = [tuple(jnp.asarray(rng.integers(0, 2**16, shape, np.uint16)) for _ in range(2)) for _ in range(2)]
    bits = lambda w: np.stack([np.asarray(w) & 1, (np.asarray(w) >> 8) & 1])  # noqa: E731
    want = sum((bits(o) != bits(n)).sum(axis=(0, 2, 3)) for o, n in zip(old, new))
    np.testing.assert_array_equal(np.asarray(checkerboard.count_changed(old, new)), want)
    full = (jnp.full(shape, 0x0101, jnp.uint16),) * 2
    np.testing.assert_array_equal(
        np.asarray(checkerboard.count_changed(full, (jnp.zeros(shape, jnp.uint16),) * 2)), 4 * shape[1] * shape[2]
    )


def _check_byte_sum(byte_sum, shape, most, total):
    """``byte_sum(words, most)`` against ``total`` of the two bytes (numpy): random bytes, and all bytes at ``most``."""
    rng = np.random.default_rng(most + sum(shape))  # host draws: nothing to compile per shape
    low, high = (jnp.asarray(rng.integers(0, most + 1, shape, np.int32)) for _ in range(2))
    for lo, hi in ((low, high), (jnp.full(shape, most), jnp.full(shape, most))):
        words = (lo | (hi << 8)).astype(jnp.uint16)
        got = jax.jit(byte_sum, static_argnums=1)(words, most)
        assert got.dtype == jnp.int32
        np.testing.assert_array_equal(np.asarray(got), total(np.asarray(lo) + np.asarray(hi)))


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 4, 5), (7, 11, 3), (32, 32, 32), (64, 64, 8), (128, 2, 256)])
@pytest.mark.parametrize("most", [2, 4])
def test_byte_sum_leading_sums_both_bytes_over_the_leading_axes(shape, most):
    # grouped rows added in uint16 lanes must not carry between the bytes
    _check_byte_sum(checkerboard.byte_sum_leading, shape, most, lambda x: x.reshape(-1, shape[-1]).sum(axis=0))


@pytest.mark.parametrize("shape", [(1, 1), (3, 7, 5), (2, 16384, 1), (2, 24573, 2)])
@pytest.mark.parametrize("most", [2, 4])
def test_row_byte_sum_sums_both_bytes_over_the_last_two_axes(shape, most):
    # rows added in uint16 lanes must not overflow: 16384 and 24573 (= 3 x 8191) rows of words at `most`
    # need groups of rows (at most 65535 // (2 most) per group)
    _check_byte_sum(checkerboard._row_byte_sum, shape, most, lambda x: x.sum(axis=(-2, -1)))


# one torus and one open lattice by default; the other two sizes are second checks, run with `pytest -m slow`
@pytest.mark.parametrize(
    "height, width, periodic",
    [(6, 8, True), (2, 4, False), *(pytest.param(*c, marks=pytest.mark.slow) for c in [(4, 4, True), (6, 4, False)])],
)
@pytest.mark.parametrize("domain, dtype", [("spin", jnp.float32), ("binary", jnp.float32), ("spin", jnp.int8)])
def test_energy_of_words_equals_the_energy(height, width, periodic, domain, dtype):
    model = ui.models.lattice_ising(height, width, periodic=periodic, domain=domain, dtype=dtype)
    params = model.init_params(J=0.37, h=-0.23)
    x = model.random_state(jax.random.key(height + width), 64)
    layout = checkerboard.LatticeLayout(height, width, periodic, domain, jnp.dtype(dtype).name)
    got = model.energy_of_words(params, layout, *jax.vmap(layout.pack)(x["s"]))
    assert model.energy_of_words(params, layout._replace(periodic=not periodic), *jax.vmap(layout.pack)(x["s"])) is None
    words = jax.jit(lambda p, x: model.energy_of_words(p, layout, *jax.vmap(layout.pack)(x)))(params, x["s"])
    np.testing.assert_array_equal(np.asarray(got), np.asarray(model.energies(params, x)))
    last = model.energy_of_words(params, layout, *(jnp.moveaxis(w, 0, -1) for w in jax.vmap(layout.pack)(x["s"])), True)
    np.testing.assert_array_equal(np.asarray(last), np.asarray(got))  # the words with the chains last
    # compiled, the final -J pair - h total may round once (a fused multiply-add) on either path alike
    np.testing.assert_array_equal(np.asarray(words), np.asarray(jax.jit(model.energies)(params, x)))


@pytest.mark.parametrize("periodic", [True, False])
def test_sample_records_the_energies_of_its_states(periodic):
    model = ui.models.lattice_ising(6, 6, periodic=periodic)
    params = model.init_params(J=0.3, h=0.1)
    x0 = model.random_state(jax.random.key(0), 3)
    out = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), x0, 5, thin=2, model=model, params=params)
    want = jax.jit(jax.vmap(model.energies, in_axes=(None, 0)))(params, out.states)  # compiled like ui.sample's
    np.testing.assert_array_equal(np.asarray(out.energies), np.asarray(want))


@pytest.mark.parametrize("num_sweeps", [1, 2])
def test_sample_default_trace_counts_changed_sites(num_sweeps):
    # ui.sample's default trace on the lattice path: the number of sites each step changed, per chain
    model = ui.models.lattice_ising(6, 8)
    params = model.init_params(J=0.3, h=0.1)
    x0 = model.random_state(jax.random.key(0), 3)
    gibbs = ui.kernels.gibbs(model, params, num_sweeps=num_sweeps)
    out = ui.sample(jax.random.key(1), gibbs, x0, 6)
    states = np.concatenate([np.asarray(x0["s"])[:, None], np.asarray(out.states["s"])], axis=1)
    want = (states[:, 1:] != states[:, :-1]).sum(axis=(-2, -1))
    np.testing.assert_array_equal(np.asarray(out.infos.num_changed), want)
    assert want.min() > 0


@pytest.mark.parametrize(
    "periodic, domain, num_sweeps, reverse",
    covering_pairs([(True, "spin"), (False, "spin"), (False, "binary")], SWEEP_CASES),
)
def test_chains_last_sweep_is_the_chains_first_sweep_bit_for_bit(periodic, domain, num_sweeps, reverse):
    # the batching rule of chains_last=True on (h, w, chains) words: the same words and flags, and counts equal to
    # count_flags; a table per chain (parallel tempering's replicas) too
    layout = checkerboard.LatticeLayout(6, 8, periodic, domain, "float32")
    x = jax.random.bernoulli(jax.random.key(3), 0.5, (12, 6, 8)).astype(jnp.float32)
    words = jax.vmap(layout.pack)(x)
    keys = jax.random.split(jax.random.key(4), 12)
    for table, axis in (
        (layout.thresholds(0.4, -0.2, 1.0), None),
        (jax.vmap(lambda J: layout.thresholds(J, 0.2, 1.0))(0.1 * jnp.arange(12.0)), 0),
    ):
        first = jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse, True), in_axes=(0, 0, 0, axis))
        last = jax.vmap(
            checkerboard.build_sweep(layout, num_sweeps, reverse, True, chains_last=True),
            in_axes=(0, -1, -1, axis),
            out_axes=(-1, -1, 0),
        )
        want = jax.jit(first)(keys, *words, table)
        even, odd, changed = jax.jit(last)(keys, *(jnp.moveaxis(w, 0, -1) for w in words), table)
        np.testing.assert_array_equal(np.moveaxis(np.asarray(even), -1, 0), np.asarray(want[0]))
        np.testing.assert_array_equal(np.moveaxis(np.asarray(odd), -1, 0), np.asarray(want[1]))
        np.testing.assert_array_equal(np.asarray(changed), np.asarray(checkerboard.count_flags(*want, reverse)))
    # without change flags: the same values (the flag bits clear) and -1 (not counted) for every chain
    plain = jax.vmap(
        checkerboard.build_sweep(layout, num_sweeps, reverse, chains_last=True),
        in_axes=(0, -1, -1, None),
        out_axes=(-1, -1, 0),
    )
    even, odd, changed = jax.jit(plain)(keys, *(jnp.moveaxis(w, 0, -1) for w in words), layout.thresholds(0.4, -0.2, 1.0))
    want = jax.jit(jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse), in_axes=(0, 0, 0, None)))(
        keys, *words, layout.thresholds(0.4, -0.2, 1.0)
    )
    np.testing.assert_array_equal(np.moveaxis(np.asarray(even), -1, 0), np.asarray(want[0]))
    np.testing.assert_array_equal(np.moveaxis(np.asarray(odd), -1, 0), np.asarray(want[1]))
    np.testing.assert_array_equal(np.asarray(changed), np.full(12, -1))


@pytest.mark.parametrize(
    "periodic, domain, track_changes, num_sweeps, reverse",
    covering_pairs(
        [(True, "spin", True), (False, "binary", True), (True, "spin", False), (False, "binary", False)], SWEEP_CASES
    ),
)
def test_straight_line_sweep_is_the_half_sweep_loop_bit_for_bit(periodic, domain, num_sweeps, reverse, track_changes):
    # straight=True (the colours of a sweep as straight-line code, for carried words): the same words and flags
    layout = checkerboard.LatticeLayout(6, 8, periodic, domain, "float32")
    x = jax.random.bernoulli(jax.random.key(5), 0.5, (3, 6, 8)).astype(jnp.float32)
    words = jax.vmap(layout.pack)(x)
    keys = jax.random.split(jax.random.key(6), 3)
    table = layout.thresholds(0.4, -0.2, 1.0)
    runs = [
        jax.jit(jax.vmap(checkerboard.build_sweep(layout, num_sweeps, reverse, track_changes, straight=straight),
                         in_axes=(0, 0, 0, None)))(keys, *words, table)
        for straight in (False, True)
    ]  # fmt: skip
    jax.tree.map(np.testing.assert_array_equal, runs[0], runs[1])
    assert not np.array_equal(np.asarray(runs[0][0]), np.asarray(words[0]))


@pytest.mark.parametrize("chains", [1, 3])
def test_sample_steps_few_carried_chains_as_single_steps_bit_for_bit(chains):
    # fewer than MIN_CHAINS_LAST chains that ui.sample's loop carries are swept with straight-line colours: the
    # same draws, counts and final state as stepping the plain states one jitted step at a time
    model = ui.models.lattice_ising(6, 8)
    params = model.init_params(J=0.3, h=0.1)
    x0 = model.random_state(jax.random.key(0), chains)
    algorithm = ui.kernels.gibbs(model, params)
    out = ui.sample(jax.random.key(1), algorithm, x0, 4, thin=2)
    assert not type(out.final_state).carried and not type(out.final_state).chains_last
    keys = jax.random.split(jax.random.split(jax.random.key(1))[1], (4, 2, chains))  # ui.sample's chain keys
    step = jax.jit(jax.vmap(algorithm.step))
    state = jax.vmap(algorithm.init)(x0)
    assert not type(state).carried
    for draw in range(4):
        for j in range(2):
            state, info = step(keys[draw, j], state)
        np.testing.assert_array_equal(np.asarray(out.states["s"][:, draw]), np.asarray(state.position["s"]))
        np.testing.assert_array_equal(np.asarray(out.infos.num_changed[:, draw]), np.asarray(info.num_changed))
    jax.tree.map(np.testing.assert_array_equal, tuple(out.final_state), tuple(state))
    # the carried run has no conditional (no half-sweep switch); a lone step (one draw) keeps it
    from ugm_infer import sampling
    from ugm_infer.kernels._common import recipe_of

    def conditionals(num_samples):
        ui.sample(jax.random.key(1), algorithm, x0, num_samples)
        run = next(reversed(sampling._RUN_CACHE.values()))
        return run.lower(jax.random.key(1), x0, None, recipe_of(algorithm).args).compile().as_text().count(" conditional(")

    assert conditionals(4) == 0 and conditionals(1) >= 1


@pytest.mark.parametrize("periodic", [True, False])
def test_sample_steps_many_chains_last_bit_for_bit(periodic, monkeypatch):
    # ui.sample keeps 8 or more chains on the trailing axis: the same draws, energies, counts and final state as
    # stepping them chains-first
    from collections import OrderedDict

    from ugm_infer import sampling
    from ugm_infer.kernels import _common

    model = ui.models.lattice_ising(6, 8, periodic=periodic)
    params = model.init_params(J=0.3, h=0.1)
    x0 = model.random_state(jax.random.key(0), 16)
    runs = []
    for minimum in (_common.MIN_CHAINS_LAST, 10**9):
        monkeypatch.setattr(_common, "MIN_CHAINS_LAST", minimum)
        monkeypatch.setattr(sampling, "_RUN_CACHE", OrderedDict())
        out = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, params), x0, 4, thin=2, model=model, params=params)
        again = ui.sample(jax.random.key(2), ui.kernels.gibbs(model, params), out.final_state, 3)
        runs.append((out, again))
    (a, a2), (b, b2) = runs
    for x, y in ((a.states, b.states), (a.energies, b.energies), (a.infos, b.infos), (a2.states, b2.states)):
        jax.tree.map(np.testing.assert_array_equal, x, y)
    jax.tree.map(np.testing.assert_array_equal, tuple(a2.final_state), tuple(b2.final_state))
    assert type(a2.final_state) is type(b2.final_state) and not type(a2.final_state).chains_last


def test_sample_with_many_chains_matches_enumeration():
    # the chains-last form through ui.sample, against the exact joint of (energy, magnetisation) on a 4x4 torus
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.35, h=0.15)
    probs, cell = energy_magnetisation_cells(model, params, 0.8)
    start = model.random_state(jax.random.key(5), CHAINS)
    out = ui.sample(jax.random.key(6), ui.kernels.gibbs(model, params, beta=0.8), start, 1, num_warmup=SWEEPS - 1)
    idx = cell({"s": out.states["s"][:, 0]})
    assert_distribution_matches(idx, probs, label="ui.sample, 4x4 torus")
    wrong, _ = energy_magnetisation_cells(model, params, 0.2)
    assert_distribution_differs(idx, wrong, label="beta ignored")


def test_sample_with_few_carried_chains_matches_enumeration():
    # fewer than MIN_CHAINS_LAST chains in a loop: the straight-line chains-first sweep, draws SWEEPS sweeps apart,
    # against the exact joint of (energy, magnetisation) on a 4x4 torus
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.35, h=0.15)
    probs, cell = energy_magnetisation_cells(model, params, 0.8)
    start = model.random_state(jax.random.key(7), 4)
    gibbs = ui.kernels.gibbs(model, params, beta=0.8)
    out = ui.sample(jax.random.key(8), gibbs, start, CHAINS // 4, num_warmup=SWEEPS, thin=SWEEPS)
    idx = cell({"s": out.states["s"].reshape(-1, 4, 4)})
    assert_distribution_matches(idx, probs, label="ui.sample, 4 carried chains, 4x4 torus")
    wrong, _ = energy_magnetisation_cells(model, params, 0.2)
    assert_distribution_differs(idx, wrong, label="beta ignored")


def _magnetisation(state, info):
    """A trace that does not read the step's info."""
    return {"m": jnp.mean(state.position["s"], axis=(1, 2))}


@pytest.mark.parametrize("chains", [1, 3, 16])
def test_sample_with_a_trace_that_ignores_the_info_sweeps_without_counting(chains, monkeypatch):
    # a trace_fn that reads nothing of the info: the sweeps write no change flags (build_sweep with
    # track_changes=False), with the same draws, energies and final state as with the default trace, in both the
    # chains-first (1, 3 chains) and chains-last (16) layouts; a trace that reads the info keeps the counts
    from ugm_infer import sampling

    built = []
    build_sweep = checkerboard.build_sweep

    def spy(*args, **kwargs):
        built.append(kwargs.get("track_changes", args[3] if len(args) > 3 else False))
        return build_sweep(*args, **kwargs)

    monkeypatch.setattr(checkerboard, "build_sweep", spy)
    monkeypatch.setattr(sampling, "_RUN_CACHE", sampling.OrderedDict())
    model = ui.models.lattice_ising(6, 8)
    params = model.init_params(J=0.3, h=0.1)
    x0 = model.random_state(jax.random.key(0), chains)
    gibbs = ui.kernels.gibbs(model, params)
    for num_samples, thin in ((4, 2), (1, 1)):  # a loop of draws (carried words), a lone step
        want = ui.sample(jax.random.key(1), gibbs, x0, num_samples, thin=thin, model=model, params=params)
        built.clear()
        out = ui.sample(
            jax.random.key(1), gibbs, x0, num_samples, thin=thin, model=model, params=params, trace_fn=_magnetisation
        )
        assert built and not built[-1], built  # the run's sweep counts nothing
        jax.tree.map(np.testing.assert_array_equal, out.states, want.states)
        np.testing.assert_array_equal(np.asarray(out.energies), np.asarray(want.energies))
        np.testing.assert_allclose(np.asarray(out.infos["m"]), np.asarray(want.states["s"]).mean(axis=(2, 3)), rtol=1e-6)
        assert type(out.final_state) is type(want.final_state)  # plain chains-first words, counted by the next run
        np.testing.assert_array_equal(np.asarray(out.final_state.position["s"]), np.asarray(want.final_state.position["s"]))
        again = ui.sample(jax.random.key(2), gibbs, out.final_state, 3)
        reference = ui.sample(jax.random.key(2), gibbs, want.final_state, 3)
        jax.tree.map(np.testing.assert_array_equal, again.infos, reference.infos)
        built.clear()
        counted = ui.sample(jax.random.key(1), gibbs, x0, num_samples, thin=thin, trace_fn=lambda s, i: i.num_changed)
        assert all(built), built
        np.testing.assert_array_equal(np.asarray(counted.infos), np.asarray(want.infos.num_changed))


def test_the_uncounted_lattice_step_reports_minus_one():
    # a LatticeGibbsState marked without_counts: the kernel's step reports num_changed = -1 (not counted) and the
    # same values as the counted step
    model = ui.models.lattice_ising(6, 8)
    algorithm = ui.kernels.gibbs(model, model.init_params(J=0.3, h=0.1))
    state = jax.vmap(algorithm.init)(model.random_state(jax.random.key(0), 3))
    keys = jax.random.split(jax.random.key(1), 3)
    counted, info = jax.jit(jax.vmap(algorithm.step))(keys, state)
    plain, plain_info = jax.jit(jax.vmap(algorithm.step))(keys, type(state).without_counts(state))
    assert not type(plain).counts_changes and type(type(plain).with_chains_first(plain)) is type(state)
    np.testing.assert_array_equal(np.asarray(plain.position["s"]), np.asarray(counted.position["s"]))
    np.testing.assert_array_equal(np.asarray(plain_info.num_changed), [-1, -1, -1])
    assert np.asarray(info.num_changed).min() > 0


def test_sample_with_a_trace_that_ignores_the_info_matches_enumeration():
    # the uncounted chains-last sweep through ui.sample, against the exact joint of (energy, magnetisation)
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.35, h=0.15)
    probs, cell = energy_magnetisation_cells(model, params, 0.8)
    start = model.random_state(jax.random.key(9), CHAINS)
    gibbs = ui.kernels.gibbs(model, params, beta=0.8)
    out = ui.sample(jax.random.key(10), gibbs, start, 2, num_warmup=SWEEPS - 1, trace_fn=_magnetisation)
    idx = cell({"s": out.states["s"][:, 0]})
    assert_distribution_matches(idx, probs, label="ui.sample without counts, 4x4 torus")
    np.testing.assert_allclose(np.asarray(out.infos["m"][:, 0]), np.asarray(out.states["s"][:, 0]).mean(axis=(1, 2)))
    wrong, _ = energy_magnetisation_cells(model, params, 0.2)
    assert_distribution_differs(idx, wrong, label="beta ignored")


@pytest.mark.parametrize("num_sweeps", [1, 3])
def test_learners_step_many_particles_last_bit_for_bit(num_sweeps, monkeypatch):
    # a PCD learner advances 8 or more particles of a lattice model in the chains-last layout: the same
    # particles and parameters as chains-first, for the Ising and the Potts lattice sweeps
    from ugm_infer.kernels import _common

    for model, params in (
        (ui.models.lattice_ising(6, 8), {"J": jnp.float32(0.0), "h": jnp.float32(0.0)}),
        (ui.models.lattice_potts(4, 6, 3, periodic=True), None),
    ):
        params = params if params is not None else model.init_params(jax.random.key(0), scale=0.0)
        data = model.random_state(jax.random.key(1), 16)
        results = []
        for minimum in (_common.MIN_CHAINS_LAST, 10**9):
            monkeypatch.setattr(_common, "MIN_CHAINS_LAST", minimum)
            learner = ui.learn.pcd(model, num_particles=16, num_sweeps=num_sweeps)
            state = learner.init(jax.random.key(2), params)
            step = jax.jit(learner.step)
            for t in range(3):
                state, info = step(jax.random.key(3 + t), state, data)
            results.append((state.params, state.particles, info))
        jax.tree.map(np.testing.assert_array_equal, results[0], results[1])


def _xor_ops(compiled_text: str) -> int:
    """Bitwise-xor instructions in a compiled XLA program: about 20 per Threefry hash the program computes."""
    import re

    return len(re.findall(r"= \S+ xor\(", compiled_text))


def test_a_sweep_between_pack_and_unpack_hashes_each_colour_once():
    # XLA's CPU fusion recomputed a colour's update, hash included, in every reader of its words when the colours
    # were straight-line code and the caller read the lattice right after (a learner's single step, parallel
    # tempering, tempered transitions: 20-65x slower than the sweep).  Counted in the compiled programs: a pack, a
    # sweep and an unpack in a loop hash no more than the sweep of carried words
    layout = checkerboard.LatticeLayout(16, 16, True, "spin", "float32")
    table = layout.thresholds(0.44, 0.0, 1.0)
    x0 = jnp.ones((8, 16, 16), jnp.float32)
    keys = jax.random.split(jax.random.key(1), (3, 8))
    sweep = jax.vmap(checkerboard.build_sweep(layout, 1, False, track_changes=True), in_axes=(0, 0, 0, None))

    def through_positions(x):
        def body(x, k):
            return jax.vmap(layout.unpack)(*sweep(k, *jax.vmap(layout.pack)(x), table)), None

        return jax.lax.scan(body, x, keys)[0]

    def carried(x):
        words = jax.lax.scan(lambda w, k: (sweep(k, *w, table), None), jax.vmap(layout.pack)(x), keys)[0]
        return jax.vmap(layout.unpack)(*words)

    hashes = _xor_ops(jax.jit(through_positions).lower(x0).compile().as_text())
    reference = _xor_ops(jax.jit(carried).lower(x0).compile().as_text())
    assert 30 <= reference and hashes <= 1.2 * reference, (hashes, reference)


@pytest.mark.parametrize("name", ["ising", "potts"])
# 3 chains: a second check of the batched programs 16 chains check (CI time budget), run with `pytest -m slow`
@pytest.mark.parametrize("chains", [1, pytest.param(3, marks=pytest.mark.slow), 16])
def test_sample_programs_hash_each_colour_once(name, chains):
    # whatever the number of draws and the thinning, ui.sample's compiled run hashes each colour once per sweep:
    # the chains-last sweep (straight-line colours) is taken only where a loop carries every step
    if name == "ising":
        model = ui.models.lattice_ising(8, 8)
        params = model.init_params(J=0.4)
    else:
        model = ui.models.lattice_potts(4, 6, 3, periodic=True)
        params = model.init_params(jax.random.key(0), scale=0.5)
    from ugm_infer import sampling
    from ugm_infer.kernels._common import recipe_of

    algorithm = ui.kernels.gibbs(model, params)
    x0 = model.random_state(jax.random.key(1), chains)
    counts = {}
    for num_samples, thin in ((5, 1), (1, 1), (3, 2)):  # a loop of draws, one step, thinned draws
        ui.sample(jax.random.key(2), algorithm, x0, num_samples, thin=thin, keep_states=False)
        run = next(reversed(sampling._RUN_CACHE.values()))
        text = run.lower(jax.random.key(2), x0, None, recipe_of(algorithm).args).compile().as_text()
        counts[num_samples, thin] = _xor_ops(text)
    assert max(counts.values()) <= 1.5 * min(counts.values()), counts
