"""Statistical assertions with tolerances derived from the sample size.

The tests draw *independent* samples (the final states of many independent chains
after a burn-in, or ``ui.exact.sample``), so multinomial sampling theory applies:

``assert_distribution_matches``
    Pearson chi-square goodness of fit.  Cells with expected count < 5 are pooled
    into one cell; the statistic is compared with the chi-square quantile at
    ``1 - alpha`` (default ``alpha = 1e-6``: with fixed seeds a correct sampler fails
    with probability about one in a million, and a wrong one fails reliably because
    the statistic grows linearly in the number of samples).  The total-variation
    distance is reported in the message.
``tv_bound``
    A bound on the total-variation distance of an empirical distribution of ``n``
    iid draws: ``E[TV] <= 0.5 * sum_i sqrt(p_i (1 - p_i) / n)``, and by McDiarmid
    ``TV - E[TV] <= sqrt(log(1/alpha) / (2 n))`` with probability ``1 - alpha``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def state_index(states: dict, model) -> np.ndarray:
    """Mixed-radix index of every configuration (leading batch axis) in the model's site order."""
    index = None
    for name, domain in model.variables.items():
        x = np.asarray(states[name]).reshape(
            np.asarray(states[name]).shape[: np.asarray(states[name]).ndim - len(domain.shape)] + (-1,)
        )
        digits = np.asarray(domain.to_index(x))
        for j in range(digits.shape[-1]):
            d = digits[..., j].astype(np.int64)
            index = d if index is None else index * domain.num_states + d
    return index


def tv_bound(probs: np.ndarray, n: int, alpha: float = 1e-6) -> float:
    probs = np.asarray(probs, dtype=np.float64)
    expected = 0.5 * np.sum(np.sqrt(probs * (1 - probs) / n))
    return float(expected + np.sqrt(np.log(1 / alpha) / (2 * n)))


def empirical(indices: np.ndarray, num_states: int) -> np.ndarray:
    counts = np.bincount(np.asarray(indices).reshape(-1), minlength=num_states).astype(np.float64)
    return counts / counts.sum()


def chi_square(indices: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson statistic and degrees of freedom, pooling cells with expected count < 5."""
    probs = np.asarray(probs, dtype=np.float64)
    probs = probs / probs.sum()
    n = np.asarray(indices).size
    counts = np.bincount(np.asarray(indices).reshape(-1), minlength=probs.size).astype(np.float64)
    expected = n * probs
    big = expected >= 5
    obs = list(counts[big])
    exp = list(expected[big])
    if (~big).any():
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
    obs, exp = np.array(obs), np.array(exp)
    keep = exp > 0
    stat = float(np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep]))
    return stat, int(keep.sum() - 1)


def assert_distribution_matches(indices: np.ndarray, probs: np.ndarray, alpha: float = 1e-6, label: str = "") -> None:
    """Chi-square test of iid draws ``indices`` against exact ``probs`` (see module docstring)."""
    stat, dof = chi_square(indices, probs)
    threshold = stats.chi2.ppf(1 - alpha, max(dof, 1))
    tv = 0.5 * np.abs(empirical(indices, len(probs)) - probs).sum()
    assert stat <= threshold, (
        f"{label}: chi-square {stat:.1f} > {threshold:.1f} (dof {dof}, alpha {alpha}); "
        f"TV {tv:.4f} vs bound {tv_bound(probs, np.asarray(indices).size, alpha):.4f}"
    )


def assert_distribution_differs(indices: np.ndarray, probs: np.ndarray, alpha: float = 1e-6, label: str = "") -> None:
    """The opposite assertion, used to show a test has power (a wrong target is rejected)."""
    stat, dof = chi_square(indices, probs)
    threshold = stats.chi2.ppf(1 - alpha, max(dof, 1))
    assert stat > threshold, f"{label}: chi-square {stat:.1f} <= {threshold:.1f}: the test cannot tell"
