"""Mixed discrete-continuous NumPyro models with exact posteriors (enumeration of the discrete sites).

Used by ``benchmarks/bench_numpyro_mixed.py`` and ``tests/test_numpyro_mixed.py``.

Gaussian mixture (:func:`mixture`)
    ``w ~ Dirichlet(alpha 1_K)``, ``mu_k ~ N(m_k, s^2)``, ``c_i ~ Categorical(w)``,
    ``y_i ~ N(mu_{c_i}, sigma^2)`` with ``sigma`` known.  Given the assignments ``c``
    the weights and the means are conjugate, so :func:`mixture_exact` sums the
    posterior over all ``K^N`` assignments in closed form: posterior moments of ``w``
    and ``mu`` and co-clustering probabilities ``P(c_i = c_j | y)``.
Spike-and-slab regression (:func:`spike_slab`)
    ``sigma^2 ~ InvGamma(a, b)``, ``gamma_j ~ Bernoulli(pi)``,
    ``beta_j ~ N(0, tau^2 sigma^2)``, ``y ~ N(X (gamma * beta), sigma^2 I)``
    (Kuo and Mallick 1998).  Coefficients of excluded predictors do not enter the
    likelihood, so ``p(y | gamma)`` is the normal-inverse-gamma marginal likelihood of
    the included predictors and :func:`spike_slab_exact` enumerates the ``2^p`` models:
    posterior inclusion probabilities and the distribution of the model size.

References
----------
Kuo, L. and Mallick, B. (1998). Variable selection for regression models. Sankhya B 60, 65-81.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from scipy.special import gammaln, logsumexp

__all__ = [
    "collinear_design",
    "mixture",
    "mixture_data",
    "mixture_exact",
    "mixture_marginal",
    "spike_slab",
    "spike_slab_exact",
]


# --------------------------------------------------------------------------------------
# Gaussian mixture
# --------------------------------------------------------------------------------------
def mixture(y, m, s=1.0, sigma=1.0, alpha=1.0):
    """Mixture of ``K = len(m)`` normals with known ``sigma``; latent ``w``, ``mu`` (continuous) and ``c`` (discrete)."""
    m = jnp.asarray(m, jnp.float32)
    num_components = m.shape[0]
    w = numpyro.sample("w", dist.Dirichlet(jnp.full(num_components, alpha)))
    mu = numpyro.sample("mu", dist.Normal(m, s).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        c = numpyro.sample("c", dist.Categorical(probs=w))
        numpyro.sample("y", dist.Normal(mu[c], sigma), obs=y)


def mixture_marginal(y, m, s=1.0, sigma=1.0, alpha=1.0):
    """:func:`mixture` with the assignments summed out by hand (``logsumexp``): for NUTS alone."""
    m = jnp.asarray(m, jnp.float32)
    num_components = m.shape[0]
    w = numpyro.sample("w", dist.Dirichlet(jnp.full(num_components, alpha)))
    mu = numpyro.sample("mu", dist.Normal(m, s).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.MixtureSameFamily(dist.Categorical(probs=w), dist.Normal(mu, sigma)), obs=y)


def mixture_data(rng: np.random.Generator, num_points: int, centers, sigma: float = 1.0) -> np.ndarray:
    """``num_points`` draws, assigned to ``centers`` in turn (balanced), plus ``N(0, sigma^2)`` noise."""
    centers = np.asarray(centers, np.float64)
    labels = np.arange(num_points) % len(centers)
    return (centers[labels] + sigma * rng.normal(size=num_points)).astype(np.float32)


def _assignments(num_points: int, num_components: int) -> np.ndarray:
    return np.array(list(itertools.product(range(num_components), repeat=num_points)), dtype=np.int64)


def mixture_exact(y, m, s=1.0, sigma=1.0, alpha=1.0) -> dict:
    """Exact posterior of :func:`mixture` by enumerating the ``K^N`` assignments (float64).

    Returns ``{"mean": {"w": (K,), "mu": (K,)}, "second": {"w": (K,), "mu": (K,)},
    "coclustering": (N, N), "log_evidence": float}`` (``second`` are the second moments
    ``E[w_k^2]``, ``E[mu_k^2]``).
    """
    y = np.asarray(y, np.float64)
    m = np.asarray(m, np.float64)
    num_points, num_components = y.shape[0], m.shape[0]
    c = _assignments(num_points, num_components)  # (M, N)
    onehot = c[:, :, None] == np.arange(num_components)  # (M, N, K)
    counts = onehot.sum(1)  # (M, K)
    s1 = (onehot * y[None, :, None]).sum(1)
    s2 = (onehot * (y**2)[None, :, None]).sum(1)
    # Dirichlet-multinomial prior of the assignments
    log_prior = (
        gammaln(num_components * alpha)
        - gammaln(num_components * alpha + num_points)
        + (gammaln(alpha + counts) - gammaln(alpha)).sum(1)
    )
    # conjugate normal mean of each component
    precision = 1.0 / s**2 + counts / sigma**2
    post_mean = (m / s**2 + s1 / sigma**2) / precision
    log_lik = (
        -0.5 * counts * np.log(2 * np.pi * sigma**2)
        - 0.5 * np.log(s**2 * precision)
        - 0.5 * (s2 / sigma**2 + m**2 / s**2 - post_mean**2 * precision)
    ).sum(1)
    log_joint = log_prior + log_lik
    log_evidence = float(logsumexp(log_joint))
    weight = np.exp(log_joint - log_evidence)
    total = num_components * alpha + num_points
    w_mean = (alpha + counts) / total
    w_second = (alpha + counts) * (alpha + counts + 1) / (total * (total + 1))
    same = c[:, :, None] == c[:, None, :]
    return {
        "mean": {"w": weight @ w_mean, "mu": weight @ post_mean},
        "second": {"w": weight @ w_second, "mu": weight @ (post_mean**2 + 1.0 / precision)},
        "coclustering": np.tensordot(weight, same, axes=1),
        "log_evidence": log_evidence,
    }


# --------------------------------------------------------------------------------------
# spike-and-slab linear regression
# --------------------------------------------------------------------------------------
def spike_slab(X, y, tau=1.0, a=2.0, b=1.0, pi=0.5):
    """Spike-and-slab regression (Kuo-Mallick): latent ``sigma2``, ``beta`` (continuous) and ``gamma`` (discrete)."""
    num_predictors = X.shape[1]
    sigma2 = numpyro.sample("sigma2", dist.InverseGamma(a, b))
    with numpyro.plate("predictors", num_predictors):
        gamma = numpyro.sample("gamma", dist.Bernoulli(pi))
        beta = numpyro.sample("beta", dist.Normal(0.0, tau * jnp.sqrt(sigma2)))
    numpyro.sample("y", dist.Normal(X @ (gamma * beta), jnp.sqrt(sigma2)), obs=y)


def spike_slab_exact(X, y, tau=1.0, a=2.0, b=1.0, pi=0.5) -> dict:
    """Exact posterior of :func:`spike_slab` over the ``2^p`` models (float64).

    .. math::  \\log p(y \\mid \\gamma) = -\\tfrac{n}{2}\\log 2\\pi - \\tfrac{k}{2}\\log\\tau^2
               - \\tfrac12 \\log|A| + a \\log b - \\log\\Gamma(a) + \\log\\Gamma(a_n) - a_n \\log b_n,

    with :math:`A = X_\\gamma^T X_\\gamma + I/\\tau^2`, :math:`a_n = a + n/2`,
    :math:`b_n = b + (y^T y - y^T X_\\gamma A^{-1} X_\\gamma^T y)/2`, :math:`k = |\\gamma|`.

    Returns ``{"inclusion": (p,), "model_size": (p + 1,) probabilities, "models": (2^p, p),
    "posterior": (2^p,), "log_evidence": float}``.
    """
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    n, p = X.shape
    models = np.array(list(itertools.product((0, 1), repeat=p)), dtype=np.int64)
    a_n = a + n / 2
    log_post = np.empty(len(models))
    for row, gamma in enumerate(models):
        idx = np.nonzero(gamma)[0]
        k = len(idx)
        quad, logdet = float(y @ y), 0.0
        if k:
            Xg = X[:, idx]
            A = Xg.T @ Xg + np.eye(k) / tau**2
            chol = np.linalg.cholesky(A)
            v = np.linalg.solve(chol, Xg.T @ y)
            quad -= float(v @ v)
            logdet = 2.0 * float(np.log(np.diag(chol)).sum())
        log_lik = (
            -0.5 * n * np.log(2 * np.pi)
            - 0.5 * k * np.log(tau**2)
            - 0.5 * logdet
            + a * np.log(b)
            - gammaln(a)
            + gammaln(a_n)
            - a_n * np.log(b + 0.5 * quad)
        )
        log_post[row] = log_lik + k * np.log(pi) + (p - k) * np.log1p(-pi)
    log_evidence = float(logsumexp(log_post))
    weight = np.exp(log_post - log_evidence)
    sizes = models.sum(1)
    return {
        "inclusion": weight @ models,
        "model_size": np.bincount(sizes, weights=weight, minlength=p + 1),
        "models": models,
        "posterior": weight,
        "log_evidence": log_evidence,
    }


def collinear_design(rng: np.random.Generator, n: int, p: int, rho: float = 0.0, pair_corr: float | None = None):
    """Standardised ``(n, p)`` design with equicorrelation ``rho``; columns 0 and 1 with
    correlation ``pair_corr`` (near-collinear) when given."""
    cov = np.full((p, p), rho) + (1.0 - rho) * np.eye(p)
    if pair_corr is not None:
        cov[0, 1] = cov[1, 0] = pair_corr
    X = rng.multivariate_normal(np.zeros(p), cov, size=n)
    X = (X - X.mean(0)) / X.std(0)
    return X.astype(np.float32)
