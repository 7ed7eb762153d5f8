"""DCA tooling (ugm_infer.dca) and the fast Potts Gibbs kernel (ugm_infer.models.potts.potts_gibbs).

* FASTA reader: inserts removed, gz, clear errors (empty, unequal lengths, unknown symbols);
* sequence weights and weighted frequencies against brute-force loops;
* the DCA gradient equals the exact gradient (jax.grad of the exact weighted average
  log-likelihood, ui.exact) on a tiny alignment (L = 3, q = 3);
* zero-sum gauge leaves energy differences unchanged; Frobenius + APC against a hand
  computation; top-L precision on a hand example;
* potts_gibbs (fast path, dense and edge list, beta != 1; generic fallback) against
  enumeration by chi-square; it plugs into ui.learn.sap and the parallel-tempering SAP.
"""

from __future__ import annotations

import gzip

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import all_states, brute_force, run_chains
from stat_utils import assert_distribution_matches, state_index

import ugm_infer as ui
from ugm_infer import dca
from ugm_infer.models.potts import PottsLogDensity, dense_local_field, potts_gibbs


# ----------------------------------------------------------------------------------
# FASTA
# ----------------------------------------------------------------------------------
def _write(tmp_path, name, text):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return str(path)


def test_read_fasta_inserts_gz_and_alphabets(tmp_path):
    text = ">s1 first\nAC-D\nEf\n>s2\nac..C-DEY\n\n>s3\n-ACDE\n"
    for name in ("a.fasta", "a.fasta.gz"):
        aln = dca.read_fasta(_write(tmp_path, name, text))
        assert aln.names == ["s1 first", "s2", "s3"]
        assert aln.sequences.dtype == np.int8 and aln.sequences.shape == (3, 5)
        want = [[dca.ALPHABET.index(c) for c in s] for s in ("AC-DE", "C-DEY", "-ACDE")]
        np.testing.assert_array_equal(aln.sequences, want)
        assert aln.gap_state == 0 and aln.num_states == 21
    last = dca.read_fasta(_write(tmp_path, "b.fasta", text), dca.ALPHABET_GAP_LAST)
    assert last.sequences[2, 0] == 20 and last.gap_state == 20
    gapped = dca.read_fasta(_write(tmp_path, "x.fasta", ">a\nAXC\n>b\nACB\n"), unknown="gap")
    np.testing.assert_array_equal(gapped.sequences, [[1, 0, 2], [1, 2, 0]])


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("\n  \n", "empty"),
        (">a\nACD\n>b\nAC\n", r"record 'b' \(line 3\) has 2 aligned columns but the first record 'a' has 3"),
        (">a\nACD\n>b\nAXD\n", r"record 'b' \(line 3\): unknown symbol 'X'"),
        (">a\nAC*\n", "unknown symbol '\\*'"),
        ("ACD\n>a\nACD\n", "line 1 is sequence data before the first '>' header"),
        (">a\nACD\n>b\n>c\nACD\n", "record 'b' .* has no aligned sequence"),
        (">a\nacd\n", "record 'a' .* has no aligned sequence"),
    ],
)
def test_read_fasta_errors(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        dca.read_fasta(_write(tmp_path, "bad.fasta", text))


def test_read_fasta_bad_arguments(tmp_path):
    path = _write(tmp_path, "ok.fasta", ">a\nAC\n")
    with pytest.raises(TypeError, match="`path`"):
        dca.read_fasta(3)
    with pytest.raises(ValueError, match="`alphabet` has repeated"):
        dca.read_fasta(path, "AAC")
    with pytest.raises(ValueError, match="`unknown`"):
        dca.read_fasta(path, unknown="skip")


# ----------------------------------------------------------------------------------
# weights and frequencies
# ----------------------------------------------------------------------------------
def _toy_alignment(n=40, length=6, q=3, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, q, (8, length))
    seqs = base[rng.integers(0, 8, n)]
    flip = rng.random((n, length)) < 0.15
    seqs = np.where(flip, rng.integers(0, q, (n, length)), seqs)
    return seqs.astype(np.int8)


def test_sequence_weights_brute_force():
    seqs = _toy_alignment()
    n, length = seqs.shape
    for threshold in (0.8, 0.5, 1.0):
        want = np.array([1.0 / sum(np.mean(seqs[a] == seqs[b]) >= threshold - 1e-12 for b in range(n)) for a in range(n)])
        got = dca.sequence_weights(seqs, threshold, chunk_size=7)  # chunks that do not divide N
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="`threshold`"):
        dca.sequence_weights(seqs, 1.5)
    with pytest.raises(ValueError, match="`sequences`"):
        dca.sequence_weights(seqs[0])


def test_frequencies_brute_force():
    seqs = _toy_alignment()
    n, length = seqs.shape
    q, lam = 3, 0.1
    w = dca.sequence_weights(seqs)
    fi, fij = dca.frequencies(seqs, q, weights=w, pseudocount=lam)
    wn = w / w.sum()
    fi_want = np.zeros((length, q))
    fij_want = np.zeros((length, length, q, q))
    for s, ws in zip(seqs, wn):
        for i in range(length):
            fi_want[i, s[i]] += ws
            for j in range(length):
                fij_want[i, j, s[i], s[j]] += ws
    fi_want = (1 - lam) * fi_want + lam / q
    fij_want = (1 - lam) * fij_want + lam / q**2
    for i in range(length):
        fij_want[i, i] = np.diag(fi_want[i])
    np.testing.assert_allclose(fi, fi_want, atol=1e-6)
    np.testing.assert_allclose(fij, fij_want, atol=1e-6)
    np.testing.assert_allclose(fij.sum(axis=(2, 3)), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="`weights` must have shape"):
        dca.frequencies(seqs, q, weights=np.ones(3))
    with pytest.raises(ValueError, match=r"states must lie in \[0, 2\)"):
        dca.frequencies(seqs, 2)


# ----------------------------------------------------------------------------------
# gradient = exact gradient
# ----------------------------------------------------------------------------------
def _exact_pair_marginals(model, params):
    states = all_states(model)
    p = brute_force(model, params)
    oh = np.eye(model.num_states)[np.asarray(states["x"])]  # (S, L, q)
    pi = np.einsum("s,sia->ia", p, oh)
    pij = np.einsum("s,sia,sjb->ijab", p, oh, oh)
    return pi, pij


def test_gradient_equals_exact_gradient():
    length, q, l2, l2h = 3, 3, 0.3, 0.2
    model = ui.models.potts(length, q)
    params = model.init_params(jax.random.key(0), scale=1.0, field_scale=0.5)
    seqs = _toy_alignment(n=25, length=length, q=q, seed=3)
    w = np.random.default_rng(1).uniform(0.2, 1.0, len(seqs))
    fi, fij = dca.frequencies(seqs, q, weights=w)
    pi, pij = _exact_pair_marginals(model, params)
    got = dca.gradient(params, fi, fij, pi, pij, l2=l2, l2_fields=l2h)

    states = all_states(model)

    def objective(p):  # exact: log Z by enumeration of the q^L configurations
        log_z = jax.scipy.special.logsumexp(-model.energies(p, states))
        ll = -model.energies(p, {"x": jnp.asarray(seqs)}) - log_z
        iu = np.triu_indices(length, 1)
        penalty = 0.5 * l2 * jnp.sum(p["J"][iu] ** 2) + 0.5 * l2h * jnp.sum(p["h"] ** 2)
        return jnp.sum(jnp.asarray(w / w.sum()) * ll) - penalty

    exact = jax.jit(jax.grad(objective))(params)
    # pair coordinates: J_ij and J_ji^T are one parameter, so the pair derivative is
    # d/dJ[i,j] + d/dJ[j,i]^T of the tensor (the penalty is written on i < j only)
    exact_pair = exact["J"] + jnp.transpose(exact["J"], (1, 0, 3, 2))
    np.testing.assert_allclose(got["J"], exact_pair, atol=2e-5)
    np.testing.assert_allclose(got["h"], exact["h"], atol=2e-5)
    assert float(jnp.abs(got["J"]).max()) > 1e-2  # not trivially zero


# ----------------------------------------------------------------------------------
# gauge, scores, precision
# ----------------------------------------------------------------------------------
def test_zero_sum_gauge_keeps_energy_differences():
    length, q = 4, 3
    model = ui.models.potts(length, q)
    params = model.init_params(jax.random.key(1), scale=1.0, field_scale=1.0)
    Jz, hz = dca.zero_sum_gauge(params["J"], params["h"])
    np.testing.assert_allclose(Jz.sum(2), 0.0, atol=1e-6)
    np.testing.assert_allclose(Jz.sum(3), 0.0, atol=1e-6)
    np.testing.assert_allclose(hz.sum(1), 0.0, atol=1e-6)
    np.testing.assert_allclose(Jz, Jz.transpose(1, 0, 3, 2), atol=1e-12)
    states = all_states(model)
    energies = jax.jit(model.energies)
    e0 = np.asarray(energies(params, states), np.float64)
    e1 = np.asarray(energies({"J": jnp.asarray(Jz, jnp.float32), "h": jnp.asarray(hz, jnp.float32)}, states), np.float64)
    shift = e1 - e0
    np.testing.assert_allclose(shift, shift[0], atol=1e-5)
    assert np.abs(Jz - np.asarray(params["J"])).max() > 0.1  # the gauge did change J


def test_frobenius_apc_hand_computation():
    # J_ij = F_ij * M with M zero-sum and unit Frobenius norm: the scores are F
    F = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
    M = np.array([[0.5, -0.5], [-0.5, 0.5]])
    J = F[:, :, None, None] * M
    np.testing.assert_allclose(dca.frobenius_scores(J, apc=False), F, atol=1e-12)
    # row means over j != i: 1.5, 2, 2.5; overall mean 2
    want = F - np.outer([1.5, 2.0, 2.5], [1.5, 2.0, 2.5]) / 2.0
    np.fill_diagonal(want, 0.0)
    np.testing.assert_allclose(dca.frobenius_scores(J), want, atol=1e-12)
    assert dca.frobenius_scores(J)[0, 1] == pytest.approx(1.0 - 1.5 * 2.0 / 2.0)
    # excluding a state: with q = 3 and the gap (state 0) carrying all the coupling
    J3 = np.zeros((3, 3, 3, 3))
    J3[0, 1, 0, 0] = J3[1, 0, 0, 0] = 5.0
    with_gap = dca.frobenius_scores(J3, apc=False)  # entries 5 * (4/9, -2/9 x4, 1/9 x4)
    without_gap = dca.frobenius_scores(J3, apc=False, gap_state=0)
    assert with_gap[0, 1] == pytest.approx(10.0 / 3)
    assert without_gap[0, 1] == pytest.approx(10.0 / 9)  # its 2x2 non-gap block is 5/9 everywhere


def test_contact_map_and_precision(tmp_path):
    path = _write(tmp_path, "s.dat.gz", "1 5 0 3.0\n1 6 0 9.0\n2 6 0 7.5\n1 2 0 2.0\n")
    D = dca.read_contact_map(path, 6)
    assert D[0, 4] == D[4, 0] == 3.0 and np.isnan(D[2, 5])
    S = np.zeros((6, 6))
    S[0, 5] = S[5, 0] = 3.0  # top pair: not a contact (9 A)
    S[1, 5] = S[5, 1] = 2.0  # contact
    S[0, 4] = S[4, 0] = 1.0  # contact
    S[0, 1] = S[1, 0] = 9.0  # separation 1 < 4: ignored
    res = dca.contact_precision(S, D, num_pairs=2)
    np.testing.assert_array_equal(res["pairs"][:3], [[0, 5], [1, 5], [0, 4]])
    assert res["precision"] == pytest.approx(0.5)
    np.testing.assert_allclose(res["ppv"], [0.0, 0.5, 2 / 3])


# ----------------------------------------------------------------------------------
# fast Potts Gibbs kernel: exact against enumeration; plugs into the learners
# ----------------------------------------------------------------------------------
NUM_CHAINS, NUM_STEPS = 20000, 12


@pytest.mark.parametrize("graph", ["dense", "edges", "fallback"])
def test_potts_gibbs_exact(graph):
    n, q, beta = 4, 3, 0.8
    edges = None if graph != "edges" else np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    model = ui.models.potts(n, q, edges=edges, dtype=jnp.int8)
    params = model.init_params(jax.random.key(5), scale=1.5, field_scale=0.7)
    ld = model.logdensity_fn(params, beta)
    assert isinstance(ld, PottsLogDensity)
    if graph == "fallback":
        fn = ld
        ld = lambda s: fn(s)  # noqa: E731  (a plain callable: the generic path)
    scan = "random" if graph == "edges" else "systematic"
    kernel = potts_gibbs.build_kernel(model, scan, 2)
    start = {"x": jnp.zeros((NUM_CHAINS, n), jnp.int8)}
    x = run_chains(kernel, potts_gibbs.init, ld, start, jax.random.key(7), NUM_STEPS)
    probs = brute_force(model, params, beta)
    assert_distribution_matches(state_index(x, model), probs, label=f"potts_gibbs {graph}")
    assert x["x"].dtype == jnp.int8


@pytest.mark.parametrize("n, q", [(5, 3), (16, 21), (37, 4)])
def test_dense_local_field_is_the_exact_conditional(n, q):
    """The dense field (straight-line for n <= 16, groups of 16 above, padded) against energy differences."""
    model = ui.models.potts(n, q)
    params = model.init_params(jax.random.key(n), scale=0.8, field_scale=0.5)
    ld = model.logdensity_fn(params)
    x = jax.random.randint(jax.random.key(q), (3, n), 0, q)
    fields = jax.jit(jax.vmap(lambda xc: jax.vmap(lambda i: dense_local_field(ld.J, ld.h, xc, i))(jnp.arange(n))))(x)

    def at(xc, i, a):
        return ld({"x": xc.at[i].set(a)})

    at = jax.vmap(jax.vmap(jax.vmap(at, (None, None, 0)), (None, 0, None)), (0, None, None))
    exact = at(x, jnp.arange(n), jnp.arange(q))  # (chains, n, q) log-densities with site i set to a
    np.testing.assert_allclose(fields - fields[..., :1], exact - exact[..., :1], rtol=1e-5, atol=1e-5)
    # a field that drops one other site's coupling (the last of a padded group) is caught
    off = jax.vmap(lambda xc: dense_local_field(ld.J.at[:, n - 1].set(0.0).at[n - 1, :].set(0.0), ld.h, xc, 0))(x)
    assert not np.allclose(off - off[:, :1], exact[:, 0] - exact[:, 0, :1], atol=1e-3)


def test_potts_gibbs_in_learners():
    n, q = 4, 3
    model = ui.models.potts(n, q)
    params = model.init_params(jax.random.key(0), scale=0.5)
    data = {"x": jnp.asarray(_toy_alignment(n=16, length=n, q=q))}
    sap = ui.learn.sap(model, potts_gibbs, optax.sgd(0.1), num_particles=8)
    state = sap.init(jax.random.key(1), params, data)
    state, info = jax.jit(sap.step)(jax.random.key(2), state, data)
    assert info.kernel_info.num_changed.shape == (8,)
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree.leaves(state.params))
    assert not np.allclose(state.params["h"], params["h"])
    ld = model.logdensity_fn(params, 0.5)
    hot = ld.tempered(0.4)
    x0 = {"x": data["x"][0]}
    assert isinstance(hot, PottsLogDensity) and float(hot.beta) == pytest.approx(0.2)
    assert float(hot(x0)) == pytest.approx(0.4 * float(ld(x0)), rel=1e-6)
    with pytest.raises(TypeError, match="Potts model"):
        potts_gibbs.build_kernel(ui.models.ising(3))
    with pytest.raises(ValueError, match="`scan`"):
        potts_gibbs.build_kernel(model, "block")


@pytest.mark.slow
def test_potts_gibbs_in_parallel_tempering_sap():
    n, q = 4, 3
    model = ui.models.potts(n, q)
    params = model.init_params(jax.random.key(0), scale=0.5)
    data = {"x": jnp.asarray(_toy_alignment(n=16, length=n, q=q))}
    pt = ui.learn.sap(
        model,
        ui.learn.parallel_tempering_kernel(
            model, [0.5, 1.0], base_kernel=potts_gibbs.build_kernel(model), base_init=potts_gibbs.init
        ),
        optax.sgd(0.1),
        num_particles=8,
    )
    state = pt.init(jax.random.key(1), params, data)
    state, _ = jax.jit(pt.step)(jax.random.key(2), state, data)
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree.leaves(state.params))
    assert not np.allclose(state.params["h"], params["h"])


def test_fit_dca_matches_target_statistics():
    """A short bmDCA fit on a tiny alignment: the model's exact marginals approach the targets."""
    length, q = 3, 3
    seqs = _toy_alignment(n=60, length=length, q=q, seed=4)
    res = dca.fit_dca(
        seqs,
        q,
        rng_key=jax.random.key(0),
        pseudocount=0.05,
        optimizer=optax.sgd(optax.polynomial_schedule(0.5, 0.02, 1.0, 300)),
        num_chains=2000,
        num_sweeps=2,
        num_updates=400,
        eval_every=100,
    )
    model = ui.models.potts(length, q)
    pi, pij = _exact_pair_marginals(model, {k: jnp.asarray(v) for k, v in res.params.items()})
    np.testing.assert_allclose(pi, res.fi, atol=0.02)
    np.testing.assert_allclose(pij, res.fij, atol=0.02)
    assert res.history["pearson"][-1] > 0.9
    assert len(res.history["update"]) == 4


def test_tempering_kernels_keep_the_potts_fast_path():
    """Parallel tempering and tempered transitions hand potts_gibbs a PottsLogDensity at every beta."""
    from ugm_infer.kernels._common import temper

    model = ui.models.potts(3, 3)
    params = model.init_params(jax.random.key(0), scale=0.5)
    ld = model.logdensity_fn(params)
    x0 = {"x": jnp.array([0, 1, 2])}
    assert isinstance(temper(ld, 0.5), PottsLogDensity)
    plain = temper(lambda s: ld(s), 0.5)
    assert not isinstance(plain, PottsLogDensity)
    assert float(plain(x0)) == pytest.approx(0.5 * float(ld(x0)), rel=1e-6)

    seen = []
    fast = potts_gibbs.build_kernel(model)

    def spy(key, state, logdensity_fn):
        seen.append(type(logdensity_fn))
        return fast(key, state, logdensity_fn)

    pt = ui.kernels.parallel_tempering.build_kernel(betas=[0.5, 1.0], base_kernel=spy, base_init=potts_gibbs.init)
    pt_state = ui.kernels.parallel_tempering.init(x0, ld, num_replicas=2)
    pt(jax.random.key(1), pt_state, ld)
    tt = ui.kernels.tempered_transitions.build_kernel(betas=[0.5, 1.0], base_kernel=spy, base_init=potts_gibbs.init)
    tt(jax.random.key(2), ui.kernels.tempered_transitions.init(x0, ld), ld)
    assert seen and all(t is PottsLogDensity for t in seen)
