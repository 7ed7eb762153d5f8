"""Contacts from a fitted Potts model: zero-sum gauge, Frobenius/APC scores, contact maps, precision.

Strongly coupled column pairs of a Potts model fitted to an alignment predict residue
contacts of the folded protein: :func:`zero_sum_gauge` (Ekeberg et al. 2013, eqs.
27-28), :func:`frobenius_scores` (the Frobenius norm of the zero-sum-gauge couplings,
eq. 29, with the average-product correction of Dunn et al. 2008),
:func:`read_contact_map` (residue-pair distances) and :func:`contact_precision`
(precision of the top-``L`` pairs with ``|i - j| >= 4``).

References
----------
Ekeberg, M., Lovkvist, C., Lan, Y., Weigt, M. and Aurell, E. (2013). Improved contact
prediction in proteins: using pseudolikelihoods to infer Potts models. Phys. Rev. E
87, 012707 (Frobenius norm in the zero-sum gauge, eqs. 27-29).
Dunn, S. D., Wahl, L. M. and Gloor, G. B. (2008). Mutual information without the
influence of phylogeny or entropy dramatically improves residue contact prediction.
Bioinformatics 24, 333-340 (average-product correction).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["contact_precision", "frobenius_scores", "read_contact_map", "zero_sum_gauge"]


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
