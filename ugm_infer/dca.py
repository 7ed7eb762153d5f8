"""Direct-coupling analysis (DCA): Potts models of protein sequence families.

A multiple sequence alignment of a protein family is read as ``N`` sequences of ``L``
aligned columns over ``q = 21`` states (20 amino acids and the gap), and a Potts model
(:func:`ugm_infer.models.potts`)

.. math::  p(x) \\propto \\exp\\Big(\\sum_{i<j} J_{ij}(x_i, x_j) + \\sum_i h_i(x_i)\\Big)

is fitted by maximum likelihood ("Boltzmann-machine DCA", bmDCA) so that its one- and
two-point marginals match the reweighted, pseudocount-regularised frequencies of the
alignment.  Strongly coupled column pairs (APC-corrected Frobenius norm of the
zero-sum-gauge couplings) predict residue contacts of the folded protein.

Pipeline (each step a function of this module):

1. :func:`read_fasta` -- aligned FASTA (plain or ``.gz``) to an ``(N, L)`` int8 array;
   lower-case letters and ``.`` (A2M/A3M insert states) are removed, the gap ``-`` is
   a state.  Alphabet :data:`ALPHABET` = ``"-ACDEFGHIKLMNPQRSTVWY"`` (gap = 0, the
   ordering of bmDCA/adabmDCA); :data:`ALPHABET_GAP_LAST` = ``"ACDEFGHIKLMNPQRSTVWY-"``
   is the ordering of Morcos et al. (2011) and plmDCA.
2. :func:`sequence_weights` -- :math:`w_n = 1 / |\\{m : \\mathrm{id}(x^n, x^m) \\ge
   \\theta\\}|` with the fractional identity over the ``L`` columns and
   :math:`\\theta = 0.8` (Morcos et al. 2011, eq. 2; the sum includes ``m = n``);
   :math:`M_{\\rm eff} = \\sum_n w_n`.
3. :func:`frequencies` -- weighted one- and two-point frequencies mixed with the
   uniform distribution, :math:`f_i(a) = (1-\\lambda) f^{\\rm emp}_i(a) + \\lambda/q`,
   :math:`f_{ij}(a,b) = (1-\\lambda) f^{\\rm emp}_{ij}(a,b) + \\lambda/q^2` (Morcos et
   al. 2011, eqs. 3-4; :math:`f_{ii}(a,b) = \\delta_{ab} f_i(a)`).
4. :func:`fit_dca` -- stochastic maximum likelihood (SAP / persistent contrastive
   divergence, Younes 1988; Tieleman 2008) with :func:`ugm_infer.learn.sap`, the fast
   Potts Gibbs kernel :data:`ugm_infer.models.potts.potts_gibbs` and an L2 penalty;
   gradient ascent on :math:`\\mathcal L(J, h) = \\sum_{i<j,ab} f_{ij}(a,b) J_{ij}(a,b)
   + \\sum_{i,a} f_i(a) h_i(a) - \\log Z - \\tfrac{\\gamma}{2} (\\|J\\|^2 + \\|h\\|^2)`,
   i.e. :math:`\\Delta J_{ij}(a,b) = \\eta\\,(f_{ij}(a,b) - p_{ij}(a,b) - \\gamma
   J_{ij}(a,b))`, :math:`\\Delta h_i(a) = \\eta\\,(f_i(a) - p_i(a) - \\gamma h_i(a))`
   with the model marginals :math:`p` estimated on persistent chains (Figliuzzi et al.
   2018; Muntoni et al. 2021).  Convergence is monitored as in those papers by the
   Pearson correlation between the data's and the model's connected correlations
   :math:`C_{ij}(a,b) = f_{ij}(a,b) - f_i(a) f_j(b)`, ``i < j``
   (:func:`pearson_connected`).
5. :func:`zero_sum_gauge`, :func:`frobenius_scores` (APC, Dunn et al. 2008),
   :func:`read_contact_map`, :func:`contact_precision` (precision of the top-``L``
   pairs with ``|i - j| >= 4``).

References
----------
Morcos, F. et al. (2011). Direct-coupling analysis of residue coevolution captures
native contacts across many protein families. PNAS 108, E1293-E1301.
Ekeberg, M., Lovkvist, C., Lan, Y., Weigt, M. and Aurell, E. (2013). Improved contact
prediction in proteins: using pseudolikelihoods to infer Potts models. Phys. Rev. E
87, 012707 (Frobenius norm in the zero-sum gauge, eqs. 27-29).
Dunn, S. D., Wahl, L. M. and Gloor, G. B. (2008). Mutual information without the
influence of phylogeny or entropy dramatically improves residue contact prediction.
Bioinformatics 24, 333-340 (average-product correction).
Figliuzzi, M., Barrat-Charlaix, P. and Weigt, M. (2018). How pairwise coevolutionary
models capture the collective residue variability in proteins. Mol. Biol. Evol. 35,
1018-1027 (bmDCA).
Muntoni, A. P., Pagnani, A., Weigt, M. and Zamponi, F. (2021). adabmDCA: adaptive
Boltzmann machine learning for biological sequences. BMC Bioinformatics 22, 528.
"""

from __future__ import annotations

import gzip
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ugm_infer.models.potts import potts_gibbs

__all__ = [
    "ALPHABET",
    "ALPHABET_GAP_LAST",
    "Alignment",
    "DCAResult",
    "chain_frequencies",
    "connected_correlations",
    "contact_precision",
    "fit_dca",
    "frequencies",
    "frobenius_scores",
    "gradient",
    "pearson_connected",
    "potts_gibbs",
    "read_contact_map",
    "read_fasta",
    "sequence_weights",
    "zero_sum_gauge",
]

#: Default alphabet: gap first (state 0), then the 20 amino acids in alphabetical
#: one-letter order -- the ordering of bmDCA / adabmDCA (Muntoni et al. 2021).
ALPHABET = "-ACDEFGHIKLMNPQRSTVWY"
#: The ordering of Morcos et al. (2011) and plmDCA: amino acids first, gap last (state 20).
ALPHABET_GAP_LAST = "ACDEFGHIKLMNPQRSTVWY-"


# ----------------------------------------------------------------------------------
# reading alignments
# ----------------------------------------------------------------------------------
class Alignment(NamedTuple):
    """An aligned sequence family.

    sequences
        ``(N, L)`` int8 array of states (indices into ``alphabet``).
    names
        The ``N`` FASTA header lines (without ``>``).
    alphabet
        The alphabet used (state ``a`` is ``alphabet[a]``).
    """

    sequences: np.ndarray
    names: list
    alphabet: str

    @property
    def num_sequences(self) -> int:
        return int(self.sequences.shape[0])

    @property
    def length(self) -> int:
        return int(self.sequences.shape[1])

    @property
    def num_states(self) -> int:
        return len(self.alphabet)

    @property
    def gap_state(self) -> int | None:
        """Index of ``-`` in the alphabet (``None`` if absent)."""
        k = self.alphabet.find("-")
        return None if k < 0 else k


def _check_alphabet(alphabet: Any) -> str:
    if not isinstance(alphabet, str) or len(alphabet) < 2:
        raise TypeError(f"`alphabet` must be a str of at least 2 symbols, got {alphabet!r}")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError(f"`alphabet` has repeated symbols: {alphabet!r}")
    if any(c.islower() or c == "." or c.isspace() for c in alphabet):
        raise ValueError(f"`alphabet` must not contain lower-case letters, '.' or spaces (insert states): {alphabet!r}")
    return alphabet


def read_fasta(path: Any, alphabet: str = ALPHABET, *, unknown: str = "error") -> Alignment:
    """Read an aligned FASTA file (plain text, or gzip when the name ends in ``.gz``).

    Every record is a header line ``>name`` followed by one or more sequence lines.
    Lower-case letters and ``.`` are insert states of A2M/A3M alignments and are
    removed; the remaining symbols (upper case and ``-``) are the aligned columns and
    must be the same number in every record.

    Parameters
    ----------
    path
        File name (``str`` or ``os.PathLike``).
    alphabet
        The states, in order (default :data:`ALPHABET`, gap = 0;
        :data:`ALPHABET_GAP_LAST` for the plmDCA ordering).
    unknown
        ``"error"`` (default): a symbol outside ``alphabet`` raises ``ValueError``;
        ``"gap"``: it is read as the gap ``-`` (e.g. ``X``, ``B``, ``Z``).

    Returns
    -------
    :class:`Alignment` with ``sequences`` of shape ``(N, L)`` (int8).

    Raises
    ------
    ValueError
        Empty file, no records, a sequence line before the first header, a record
        without sequence, unequal aligned lengths, or an unknown symbol -- naming the
        record and the line.
    """
    alphabet = _check_alphabet(alphabet)
    if unknown not in ("error", "gap"):
        raise ValueError(f"`unknown` must be 'error' or 'gap', got {unknown!r}")
    if unknown == "gap" and "-" not in alphabet:
        raise ValueError("`unknown='gap'` needs '-' in `alphabet`")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a file name (str or os.PathLike), got {type(path).__name__}")
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        lines = fh.read().splitlines()
    if not any(line.strip() for line in lines):
        raise ValueError(f"FASTA file {path!r} is empty")
    lut = np.full(256, -1, np.int16)
    for k, c in enumerate(alphabet):
        lut[ord(c)] = k
    gap = alphabet.find("-")
    names: list[str] = []
    rows: list[np.ndarray] = []
    current: list[str] = []
    start_line = 0

    def finish():
        if not names:
            return
        seq = "".join(current)
        seq = "".join(c for c in seq if not (c.islower() or c == "."))
        if not seq:
            raise ValueError(f"{path!r}: record {names[-1]!r} (line {start_line}) has no aligned sequence")
        if not seq.isascii():
            bad = next(c for c in seq if not c.isascii())
            raise ValueError(f"{path!r}: record {names[-1]!r} (line {start_line}): unknown symbol {bad!r}")
        codes = lut[np.frombuffer(seq.encode("ascii"), np.uint8)]
        if (codes < 0).any():
            bad = seq[int(np.argmax(codes < 0))]
            if unknown == "error":
                raise ValueError(
                    f"{path!r}: record {names[-1]!r} (line {start_line}): unknown symbol {bad!r} "
                    f"(alphabet {alphabet!r}; pass unknown='gap' to read it as a gap)"
                )
            codes = np.where(codes < 0, gap, codes)
        if rows and codes.size != rows[0].size:
            raise ValueError(
                f"{path!r}: record {names[-1]!r} (line {start_line}) has {codes.size} aligned columns but the first "
                f"record {names[0]!r} has {rows[0].size} (all aligned sequences must have the same length)"
            )
        rows.append(codes.astype(np.int8))

    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(">"):
            finish()
            names.append(line[1:].strip())
            current = []
            start_line = lineno
        else:
            if not names:
                raise ValueError(f"{path!r}: line {lineno} is sequence data before the first '>' header")
            current.append(line)
    finish()
    return Alignment(np.stack(rows), names, alphabet)


def _check_sequences(sequences: Any, num_states: int | None = None, argname: str = "sequences") -> np.ndarray:
    if isinstance(sequences, Alignment):
        sequences = sequences.sequences
    arr = np.asarray(sequences)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise ValueError(f"`{argname}` must be an (N, L) int array with N >= 1, L >= 2, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"`{argname}` must hold integer states, got dtype {arr.dtype}")
    if arr.min() < 0 or (num_states is not None and arr.max() >= num_states):
        raise ValueError(f"`{argname}` states must lie in [0, {num_states}), got [{arr.min()}, {arr.max()}]")
    return arr


# ----------------------------------------------------------------------------------
# reweighting and frequencies
# ----------------------------------------------------------------------------------
def sequence_weights(sequences: Any, threshold: float = 0.8, *, chunk_size: int = 512) -> np.ndarray:
    """Sequence weights :math:`w_n = 1/|\\{m : \\mathrm{id}(x^n, x^m) \\ge \\theta\\}|` (Morcos et al. 2011, eq. 2).

    :math:`\\mathrm{id}(x, y) = \\frac1L \\sum_i [x_i = y_i]` (gaps count as a state);
    the count includes the sequence itself, so ``w_n`` is in ``(0, 1]`` and
    :math:`M_{\\rm eff} = \\sum_n w_n`.  Computed in jitted chunks of ``chunk_size``
    rows against the whole alignment (memory ``chunk_size * N * L`` bytes).

    Parameters
    ----------
    sequences
        ``(N, L)`` int array or an :class:`Alignment`.
    threshold
        Identity threshold :math:`\\theta \\in (0, 1]` (0.8 in the DCA literature).
    chunk_size
        Rows per chunk.

    Returns
    -------
    ``(N,)`` float64 weights.
    """
    seqs = _check_sequences(sequences)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or not 0 < threshold <= 1:
        raise ValueError(f"`threshold` must be a number in (0, 1], got {threshold!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"`chunk_size` must be a positive int, got {chunk_size!r}")
    n, length = seqs.shape
    chunk = int(min(chunk_size, n))
    num_chunks = -(-n // chunk)
    padded = np.zeros((num_chunks * chunk, length), np.int8)
    padded[:n] = seqs
    # identity >= threshold  <=>  #equal >= ceil(threshold * L) (integer comparison, no rounding)
    need = int(np.ceil(threshold * length - 1e-9))
    acc_dtype = jnp.int8 if length <= 127 else (jnp.int16 if length <= 32767 else jnp.int32)
    counts = _neighbour_counts(jnp.asarray(padded.reshape(num_chunks, chunk, length)), jnp.asarray(seqs.T), need, acc_dtype)
    counts = np.asarray(counts).reshape(-1)[:n]
    return 1.0 / counts.astype(np.float64)


@partial(jax.jit, static_argnums=(3,))
def _neighbour_counts(chunks, seqs_t, need, acc_dtype):
    """``#{m : #equal columns(x^n, x^m) >= need}`` for every row of every chunk.

    Loops over the ``L`` columns (``lax.scan``) accumulating ``(chunk, N)`` equality
    counts, so each step is a contiguous vectorised comparison.
    """

    def one(block):
        def column(acc, col):
            b, s = col
            return acc + (b[:, None] == s[None, :]).astype(acc_dtype), None

        acc0 = jnp.zeros((block.shape[0], seqs_t.shape[1]), acc_dtype)
        acc, _ = jax.lax.scan(column, acc0, (block.T, seqs_t))
        return jnp.sum(acc >= need, axis=1)

    return jax.lax.map(one, chunks)


def frequencies(
    sequences: Any, num_states: int = 21, *, weights: Any = None, pseudocount: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted one- and two-point frequencies with a pseudocount (Morcos et al. 2011, eqs. 3-4).

    .. math::  f_i(a) = (1-\\lambda) \\tfrac{1}{M_{\\rm eff}} \\sum_n w_n \\delta(x^n_i, a) + \\tfrac{\\lambda}{q},\\qquad
               f_{ij}(a,b) = (1-\\lambda) \\tfrac{1}{M_{\\rm eff}} \\sum_n w_n \\delta(x^n_i, a)\\,\\delta(x^n_j, b)
               + \\tfrac{\\lambda}{q^2}

    for ``i != j`` and :math:`f_{ii}(a, b) = \\delta_{ab} f_i(a)`.

    Parameters
    ----------
    sequences
        ``(N, L)`` int array or :class:`Alignment`.
    num_states
        ``q``.
    weights
        ``(N,)`` non-negative weights (default all ones).
    pseudocount
        :math:`\\lambda \\in [0, 1)`.

    Returns
    -------
    ``(fi, fij)`` float64 arrays of shapes ``(L, q)`` and ``(L, L, q, q)``.
    """
    seqs = _check_sequences(sequences, num_states)
    n, length = seqs.shape
    w = _check_weights(weights, n)
    if isinstance(pseudocount, bool) or not isinstance(pseudocount, (int, float, np.floating)):
        raise TypeError(f"`pseudocount` must be a number in [0, 1), got {pseudocount!r}")
    if not 0 <= pseudocount < 1:
        raise ValueError(f"`pseudocount` must be in [0, 1), got {pseudocount!r}")
    q = num_states
    w = w / w.sum()
    onehot = np.zeros((n, length * q), np.float32)
    onehot[np.arange(n)[:, None], np.arange(length)[None, :] * q + seqs] = 1.0
    fi = (w[:, None] * onehot).sum(0).reshape(length, q)
    fij = np.asarray(_weighted_gram(jnp.asarray(onehot), jnp.asarray(w, jnp.float32)), np.float64)
    fij = fij.reshape(length, q, length, q).transpose(0, 2, 1, 3)
    lam = float(pseudocount)
    fi = (1 - lam) * fi + lam / q
    fij = (1 - lam) * fij + lam / q**2
    idx = np.arange(length)
    fij[idx, idx] = fi[:, :, None] * np.eye(q)[None]
    return fi, fij


@jax.jit
def _weighted_gram(onehot, w):
    return jnp.dot(onehot.T * w[None, :], onehot, precision=jax.lax.Precision.HIGHEST)


def _check_weights(weights: Any, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"`weights` must have shape ({n},) (one per sequence), got {w.shape}")
    if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError("`weights` must be finite, non-negative and not all zero")
    return w


def chain_frequencies(samples: Any, num_states: int) -> tuple[jax.Array, jax.Array]:
    """Unweighted one- and two-point frequencies ``(fi (L, q), fij (L, L, q, q))`` of samples ``(M, L)`` (jittable)."""
    x = jnp.asarray(samples)
    m, length = x.shape
    oh = jax.nn.one_hot(x.astype(jnp.int32), num_states, dtype=jnp.float32).reshape(m, length * num_states)
    fi = jnp.mean(oh, 0).reshape(length, num_states)
    fij = (jnp.dot(oh.T, oh) / m).reshape(length, num_states, length, num_states).transpose(0, 2, 1, 3)
    return fi, fij


def connected_correlations(fi: Any, fij: Any) -> jax.Array:
    """:math:`C_{ij}(a,b) = f_{ij}(a,b) - f_i(a) f_j(b)` for ``i < j``, flattened to ``(L(L-1)/2 * q^2,)``."""
    fi, fij = jnp.asarray(fi), jnp.asarray(fij)
    length = fi.shape[0]
    iu, ju = np.triu_indices(length, 1)
    return (fij[iu, ju] - fi[iu][:, :, None] * fi[ju][:, None, :]).reshape(-1)


def pearson_connected(fi_data: Any, fij_data: Any, fi_model: Any, fij_model: Any) -> jax.Array:
    """Pearson correlation between the data's and the model's connected correlations (the bmDCA convergence criterion)."""
    a = connected_correlations(fi_data, fij_data)
    b = connected_correlations(fi_model, fij_model)
    a = a - jnp.mean(a)
    b = b - jnp.mean(b)
    return jnp.sum(a * b) / jnp.sqrt(jnp.sum(a * a) * jnp.sum(b * b))


# ----------------------------------------------------------------------------------
# gauge, scores, contacts
# ----------------------------------------------------------------------------------
def _check_couplings(J: Any) -> np.ndarray:
    J = np.asarray(J, dtype=np.float64)
    if J.ndim != 4 or J.shape[0] != J.shape[1] or J.shape[2] != J.shape[3]:
        raise ValueError(f"`J` must have shape (L, L, q, q), got {J.shape}")
    return J


def zero_sum_gauge(J: Any, h: Any) -> tuple[np.ndarray, np.ndarray]:
    """Move dense Potts parameters to the zero-sum (Ising) gauge (Ekeberg et al. 2013, eqs. 27-28).

    .. math::  J'_{ij}(a,b) = J_{ij}(a,b) - J_{ij}(\\cdot,b) - J_{ij}(a,\\cdot) + J_{ij}(\\cdot,\\cdot),\\qquad
               h'_i(a) = h_i(a) - h_i(\\cdot) + \\sum_{j \\ne i} \\big(J_{ij}(a,\\cdot) - J_{ij}(\\cdot,\\cdot)\\big)

    (a dot is the mean over that state), so that :math:`\\sum_a J'_{ij}(a, b) = \\sum_b
    J'_{ij}(a, b) = \\sum_a h'_i(a) = 0`.  The energy changes by a constant only, so all
    energy differences (and the distribution) are unchanged.  ``J`` is read as the
    model uses it (symmetrised, zero diagonal).

    Returns
    -------
    ``(J', h')`` float64 of shapes ``(L, L, q, q)`` and ``(L, q)``.
    """
    J = _check_couplings(J)
    h = np.asarray(h, dtype=np.float64)
    length, q = J.shape[0], J.shape[2]
    if h.shape != (length, q):
        raise ValueError(f"`h` must have shape ({length}, {q}) to match `J`, got {h.shape}")
    J = 0.5 * (J + J.transpose(1, 0, 3, 2))
    J[np.arange(length), np.arange(length)] = 0.0
    row = J.mean(axis=3, keepdims=True)  # J_ij(a, .)
    col = J.mean(axis=2, keepdims=True)  # J_ij(., b)
    both = J.mean(axis=(2, 3), keepdims=True)
    Jz = J - row - col + both
    hz = h - h.mean(axis=1, keepdims=True) + (row[..., 0] - both[..., 0]).sum(axis=1)
    return Jz, hz


def frobenius_scores(J: Any, *, apc: bool = True, gap_state: int | None = None) -> np.ndarray:
    """Contact scores: Frobenius norms of the zero-sum-gauge couplings, APC-corrected.

    :math:`F_{ij} = \\|J'_{ij}\\|_F` over the states (without ``gap_state`` when given,
    as plmDCA does; Ekeberg et al. 2013, eq. 29) and, with ``apc``,
    :math:`F^{\\rm APC}_{ij} = F_{ij} - F_{i\\cdot} F_{\\cdot j} / F_{\\cdot\\cdot}` (Dunn et al.
    2008) with the means over the ``j != i`` entries.  The diagonal is set to 0.

    Returns
    -------
    ``(L, L)`` symmetric float64 scores.
    """
    J = _check_couplings(J)
    length, q = J.shape[0], J.shape[2]
    if gap_state is not None and (not isinstance(gap_state, (int, np.integer)) or not 0 <= gap_state < q):
        raise ValueError(f"`gap_state` must be None or an int in [0, {q}), got {gap_state!r}")
    Jz, _ = zero_sum_gauge(J, np.zeros((length, q)))
    if gap_state is not None:
        keep = np.delete(np.arange(q), gap_state)
        Jz = Jz[:, :, keep][:, :, :, keep]
    F = np.sqrt((Jz**2).sum(axis=(2, 3)))
    off = ~np.eye(length, dtype=bool)
    F = np.where(off, F, 0.0)
    if apc:
        mean_i = F.sum(1) / (length - 1)
        mean_all = F[off].mean()
        F = np.where(off, F - np.outer(mean_i, mean_i) / mean_all, 0.0)
    return F


def read_contact_map(path: Any, num_sites: int | None = None, *, distance_column: int = 4) -> np.ndarray:
    """Read a residue-pair distance file: one pair a line, ``i j ... d`` (1-based ``i``, ``j``).

    The format of the ``*_struct.dat`` files of the DCA benchmark sets (e.g.
    ``PF00014_struct.dat``): column 1 = ``i``, column 2 = ``j``, column
    ``distance_column`` (1-based, default 4) = minimal heavy-atom distance in Angstrom.
    Plain text or ``.gz``.

    Returns
    -------
    ``(L, L)`` symmetric float64 distance matrix, ``nan`` for pairs not in the file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a file name, got {type(path).__name__}")
    data = np.loadtxt(os.fspath(path), ndmin=2)
    if data.size == 0:
        raise ValueError(f"contact file {path!r} is empty")
    if data.shape[1] < max(distance_column, 2):
        raise ValueError(f"contact file {path!r} has {data.shape[1]} columns, need column {distance_column}")
    i = data[:, 0].astype(int) - 1
    j = data[:, 1].astype(int) - 1
    if (i < 0).any() or (j < 0).any():
        raise ValueError(f"contact file {path!r}: residue indices must be 1-based")
    length = int(max(i.max(), j.max())) + 1 if num_sites is None else int(num_sites)
    if i.max() >= length or j.max() >= length:
        raise ValueError(f"contact file {path!r} has residue index > num_sites={length}")
    dist = np.full((length, length), np.nan)
    dist[i, j] = data[:, distance_column - 1]
    dist[j, i] = data[:, distance_column - 1]
    return dist


def contact_precision(
    scores: Any,
    distances: Any,
    *,
    threshold: float = 8.0,
    min_separation: int = 4,
    num_pairs: int | None = None,
) -> dict:
    """Precision (positive predictive value) of the top-scoring pairs as contacts.

    Pairs ``i < j`` with ``j - i >= min_separation`` and a known distance are ranked by
    score; a pair is a contact when its distance is ``< threshold``.

    Returns
    -------
    dict with ``"precision"`` (of the top ``num_pairs``, default ``L``), ``"ppv"``
    (precision of the top ``k`` for ``k = 1..K``), ``"pairs"`` (``(K, 2)`` ranked
    pairs, 0-based) and ``"is_contact"`` (``(K,)`` bool).
    """
    S = np.asarray(scores, dtype=np.float64)
    D = np.asarray(distances, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or D.shape != S.shape:
        raise ValueError(f"`scores` and `distances` must be (L, L) of the same shape, got {S.shape} and {D.shape}")
    length = S.shape[0]
    num_pairs = length if num_pairs is None else int(num_pairs)
    iu, ju = np.triu_indices(length, min_separation)
    ok = ~np.isnan(D[iu, ju])
    iu, ju = iu[ok], ju[ok]
    order = np.argsort(-S[iu, ju], kind="stable")
    is_contact = D[iu, ju][order] < threshold
    ppv = np.cumsum(is_contact) / np.arange(1, is_contact.size + 1)
    k = min(num_pairs, is_contact.size)
    return {
        "precision": float(ppv[k - 1]) if k else float("nan"),
        "ppv": ppv,
        "pairs": np.stack([iu[order], ju[order]], 1),
        "is_contact": is_contact,
    }


# ----------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------
def gradient(params: Any, fi: Any, fij: Any, pi: Any, pij: Any, *, l2: float = 0.0, l2_fields: float = 0.0) -> dict:
    """Ascent direction of the penalised average log-likelihood in pair coordinates (jittable).

    .. math::  g^J_{ij}(a,b) = f_{ij}(a,b) - p_{ij}(a,b) - \\gamma J_{ij}(a,b)\\ (i \\ne j),\\qquad
               g^h_i(a) = f_i(a) - p_i(a) - \\gamma_h h_i(a),

    with :math:`f` the target and :math:`p` the model frequencies (``(L, q)`` and
    ``(L, L, q, q)``).  Each pair coupling :math:`J_{ij} = J_{ji}^\\top` is one
    parameter: :math:`g^J_{ij}` is the derivative of
    :math:`\\sum_n w_n \\log p(x^n)/M_{\\rm eff} - \\tfrac{\\gamma}{2}\\sum_{i<j}\\|J_{ij}\\|^2
    - \\tfrac{\\gamma_h}{2}\\|h\\|^2` along it, i.e. twice the derivative with respect to
    the entry ``J[i, j, a, b]`` of the symmetric ``(L, L, q, q)`` tensor of
    :func:`ugm_infer.models.potts` (which enters the energy as the mean of ``J[i, j]``
    and ``J[j, i].T``).  The diagonal blocks are zero.
    """
    J, h = params["J"], params["h"]
    length = J.shape[0]
    off = (1.0 - jnp.eye(length, dtype=J.dtype))[:, :, None, None]
    gJ = (jnp.asarray(fij, J.dtype) - jnp.asarray(pij, J.dtype) - l2 * J) * off
    gh = jnp.asarray(fi, h.dtype) - jnp.asarray(pi, h.dtype) - l2_fields * h
    return {"J": gJ, "h": gh}


class DCAResult(NamedTuple):
    """Result of :func:`fit_dca`.

    params
        ``{"J": (L, L, q, q), "h": (L, q)}`` as learned (symmetric ``J``, zero diagonal;
        parameters of :func:`ugm_infer.models.potts` ``(L, q)``).
    chains
        ``(num_chains, L)`` persistent chains at the end.
    fi, fij
        The target (reweighted, pseudocount) frequencies.
    history
        dict of lists: ``"update"``, ``"time"`` (seconds of training, compilation
        excluded), ``"pearson"`` (data vs chains connected correlations).
    meff
        Effective number of sequences :math:`\\sum_n w_n`.
    weights
        ``(N,)`` sequence weights.
    compile_time
        Seconds spent compiling the training chunk.
    """

    params: dict
    chains: np.ndarray
    fi: np.ndarray
    fij: np.ndarray
    history: dict
    meff: float
    weights: np.ndarray
    compile_time: float


def fit_dca(
    sequences: Any,
    num_states: int = 21,
    *,
    rng_key: jax.Array,
    weights: Any = "auto",
    threshold: float = 0.8,
    pseudocount: float | None = None,
    l2: float = 0.0,
    l2_fields: float = 0.0,
    learning_rate: float = 0.05,
    optimizer: Any = None,
    num_chains: int = 1000,
    num_sweeps: int = 10,
    num_updates: int = 1000,
    eval_every: int = 10,
    target_pearson: float | None = None,
    time_limit: float | None = None,
    kernel: Any = None,
    init_params: Any = None,
    callback: Callable | None = None,
) -> DCAResult:
    """Fit a dense Potts model to an alignment by stochastic maximum likelihood (bmDCA).

    Persistent-chain stochastic approximation (SAP / PCD-k; Younes 1988, Tieleman
    2008; the bmDCA loop of Figliuzzi et al. 2018 and adabmDCA, Muntoni et al. 2021):
    every update moves ``num_chains`` persistent chains by ``num_sweeps`` sweeps of
    :data:`~ugm_infer.models.potts.potts_gibbs` at the current parameters, estimates the
    model frequencies :math:`p_i, p_{ij}` on them and takes a step along
    :func:`gradient` (plain gradient ascent with ``learning_rate`` by default, or any
    optax ``optimizer``).  As in bmDCA/adabmDCA the fields start at the
    independent-site model :math:`h_i(a) = \\log f_i(a)`, ``J = 0``, and the chains
    are drawn from it.  Every ``eval_every`` updates the Pearson correlation of the
    connected correlations (target vs chains, :func:`pearson_connected`) is recorded;
    training stops after ``num_updates`` updates, when ``target_pearson`` is reached or
    after ``time_limit`` seconds.  The same model can be trained with the generic
    learners (``ui.learn.sap(ui.models.potts(L, q), kernel=potts_gibbs, ...)`` with a
    positive phase returning the target frequencies); this driver skips their
    autodiff of the particle energies (the statistics are one matrix product).

    Parameters
    ----------
    sequences
        ``(N, L)`` int array or :class:`Alignment`.
    num_states
        ``q`` (21 for proteins).
    rng_key
        A JAX PRNG key.
    weights
        ``"auto"`` (:func:`sequence_weights` at ``threshold``), ``None`` (uniform) or
        an ``(N,)`` array.
    pseudocount
        :math:`\\lambda`; default :math:`1/M_{\\rm eff}` (adabmDCA's default).
    l2, l2_fields
        L2 penalties on the pair couplings and on the fields (see :func:`gradient`).
    kernel
        ``(init_fn, kernel_fn)`` for one chain (default ``potts_gibbs`` with
        ``num_sweeps`` systematic sweeps); it is called once per update.
    init_params
        Optional starting ``{"J", "h"}`` (default: the independent-site model).
    callback
        ``callback(update, elapsed_seconds, pearson)`` after each evaluation.

    Returns
    -------
    :class:`DCAResult`.
    """
    from ugm_infer.models.potts import potts

    seqs = _check_sequences(sequences, num_states)
    n, length = seqs.shape
    q = int(num_states)
    for name, value in (
        ("num_chains", num_chains),
        ("num_sweeps", num_sweeps),
        ("num_updates", num_updates),
        ("eval_every", eval_every),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")
    for name, value in (("learning_rate", learning_rate), ("l2", l2), ("l2_fields", l2_fields)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative number, got {value!r}")
    if isinstance(weights, str):
        if weights != "auto":
            raise ValueError(f"`weights` must be 'auto', None or an (N,) array, got {weights!r}")
        w = sequence_weights(seqs, threshold)
    else:
        w = _check_weights(weights, n)
    meff = float(w.sum())
    lam = 1.0 / meff if pseudocount is None else pseudocount
    fi, fij = frequencies(seqs, q, weights=w, pseudocount=lam)

    model = potts(length, q, dtype=jnp.int8)
    if kernel is None:
        kernel = (potts_gibbs.init, potts_gibbs.build_kernel(model, "systematic", int(num_sweeps)))
    if not (isinstance(kernel, (tuple, list)) and len(kernel) == 2 and all(callable(f) for f in kernel)):
        raise TypeError("`kernel` must be a pair (init_fn, kernel_fn) acting on one chain {'x': (L,)}")
    init_fn, kernel_fn = kernel
    optimizer = optax.sgd(learning_rate) if optimizer is None else optimizer
    key_chains, key_train = jax.random.split(rng_key)
    if init_params is None:
        h0 = np.log(fi)
        params = {"J": jnp.zeros((length, length, q, q), jnp.float32), "h": jnp.asarray(h0 - h0.mean(1, keepdims=True))}
    else:
        model.validate_params(init_params)
        params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), dict(init_params))
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    chains = jax.random.categorical(key_chains, jnp.asarray(np.log(fi), jnp.float32), shape=(num_chains, length))
    chains = chains.astype(jnp.int8)
    opt_state = optimizer.init(params)
    fi_t, fij_t = jnp.asarray(fi, jnp.float32), jnp.asarray(fij, jnp.float32)

    def update(carry, key):
        params, opt_state, chains = carry
        ld = model.logdensity_fn(params)

        def move(k, x):
            state, _ = kernel_fn(k, init_fn({"x": x}, ld), ld)
            return state.position["x"]

        chains = jax.vmap(move)(jax.random.split(key, num_chains), chains)
        pi, pij = chain_frequencies(chains, q)
        g = gradient(params, fi_t, fij_t, pi, pij, l2=l2, l2_fields=l2_fields)
        updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, g), opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, chains), None

    @jax.jit
    def chunk(key, carry):
        carry, _ = jax.lax.scan(update, carry, jax.random.split(key, eval_every))
        pi, pij = chain_frequencies(carry[2], q)
        return carry, pearson_connected(fi_t, fij_t, pi, pij)

    carry = (params, opt_state, chains)
    t0 = time.perf_counter()
    compiled = chunk.lower(key_train, carry).compile()
    compile_time = time.perf_counter() - t0
    history: dict = {"update": [], "time": [], "pearson": []}
    elapsed = 0.0
    done = 0
    c = 0
    while done < num_updates:
        t0 = time.perf_counter()
        carry, pearson = compiled(jax.random.fold_in(key_train, c), carry)
        pearson = float(pearson)
        elapsed += time.perf_counter() - t0
        done += eval_every
        c += 1
        history["update"].append(done)
        history["time"].append(elapsed)
        history["pearson"].append(pearson)
        if callback is not None:
            callback(done, elapsed, pearson)
        if target_pearson is not None and pearson >= target_pearson:
            break
        if time_limit is not None and elapsed >= time_limit:
            break
    params = jax.tree.map(np.asarray, carry[0])
    return DCAResult(params, np.asarray(carry[2]), fi, fij, history, meff, w, compile_time)
