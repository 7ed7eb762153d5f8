"""Alignments of protein families: reading, sequence weights and frequencies.

A multiple sequence alignment of a protein family is read as ``N`` sequences of ``L``
aligned columns over ``q = 21`` states (20 amino acids and the gap):

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
4. :func:`chain_frequencies`, :func:`connected_correlations` and
   :func:`pearson_connected` -- the same statistics of model samples, and the Pearson
   correlation of the connected correlations :math:`C_{ij}(a,b) = f_{ij}(a,b) - f_i(a)
   f_j(b)`, ``i < j``, between data and model (the bmDCA convergence criterion,
   Figliuzzi et al. 2018).

References
----------
Morcos, F. et al. (2011). Direct-coupling analysis of residue coevolution captures
native contacts across many protein families. PNAS 108, E1293-E1301.
Figliuzzi, M., Barrat-Charlaix, P. and Weigt, M. (2018). How pairwise coevolutionary
models capture the collective residue variability in proteins. Mol. Biol. Evol. 35,
1018-1027 (bmDCA).
"""

from __future__ import annotations

import gzip
import os
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ALPHABET",
    "ALPHABET_GAP_LAST",
    "Alignment",
    "chain_frequencies",
    "connected_correlations",
    "frequencies",
    "pearson_connected",
    "read_fasta",
    "sequence_weights",
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


def check_sequences(sequences: Any, num_states: int | None = None, argname: str = "sequences") -> np.ndarray:
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
    seqs = check_sequences(sequences)
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
    seqs = check_sequences(sequences, num_states)
    n, length = seqs.shape
    w = check_weights(weights, n)
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


def check_weights(weights: Any, n: int) -> np.ndarray:
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
