"""Estimation of ERGM parameters: MPLE and MCMC-MLE.

:func:`ergm_mple` (maximum pseudo-likelihood: logistic regression of the dyads on
their change statistics, Strauss & Ikeda 1990) and :func:`ergm_mcmc_mle`
(Geyer & Thompson 1992 importance-sampled likelihood ratio, iterated as statnet
does, Hunter & Handcock 2006; standard errors from the inverse Fisher information,
the covariance of the statistics under MCMC samples at the estimate).  The generic
learners of :mod:`ugm_infer.learn` accept the model too (it is an
:class:`~ugm_infer.EnergyModel`) and accept :data:`ergm_toggle` as their kernel.

References
----------
Besag, J. (1974). Spatial interaction and the statistical analysis of lattice systems.
JRSS B 36, 192-236.
Strauss, D. and Ikeda, M. (1990). Pseudolikelihood estimation for social networks. JASA 85, 204-212.
Geyer, C. J. and Thompson, E. A. (1992). Constrained Monte Carlo maximum likelihood for
dependent data. JRSS B 54, 657-699.
Hunter, D. R. and Handcock, M. S. (2006). Inference in curved exponential family models
for networks. JCGS 15, 565-583.
Hummel, R. M., Hunter, D. R. and Handcock, M. S. (2012). Improving simulation-based
algorithms for fitting ERGMs. JCGS 21, 920-939.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE with
connections to contrastive divergence. ICML (section 4.2: the triad model).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.applications.ergm.model import ERGM, check_graphs
from ugm_infer.applications.ergm.simulation import ergm_simulate
from ugm_infer.models._common import check_int, check_key

__all__ = ["MPLEResult", "MCMCMLEResult", "MAX_ABS_MPLE", "ergm_mple", "ergm_mcmc_mle"]


# ----------------------------------------------------------------------------------
# MPLE
# ----------------------------------------------------------------------------------
class MPLEResult(NamedTuple):
    """Output of :func:`ergm_mple`.

    theta
        ``(K,)`` float64 maximum pseudo-likelihood estimate.
    stderr
        ``(K,)`` logistic-regression standard errors (inverse observed information of
        the pseudo-likelihood; known to be too small for dependent dyads, reported as
        statnet does, for reference only).
    log_pseudo_likelihood
        Total log pseudo-likelihood at ``theta``.
    num_iterations
        Newton iterations used.
    converged
        Whether the gradient's max-norm fell below ``tol``.
    """

    theta: np.ndarray
    stderr: np.ndarray
    log_pseudo_likelihood: float
    num_iterations: int
    converged: bool


def _logistic_nll(theta, X, y):
    eta = X @ theta
    return float(np.sum(np.logaddexp(0.0, eta) - y * eta))


def ergm_mple(model: ERGM, graphs: Any, *, max_iter: int = 100, tol: float = 1e-8) -> MPLEResult:
    """Maximum pseudo-likelihood estimate (Strauss & Ikeda 1990; Besag 1974).

    The pseudo-likelihood :math:`\\prod_{n}\\prod_{i<j} p(y^{(n)}_{ij} \\mid
    y^{(n)}_{-ij})` with :math:`\\operatorname{logit} p(y_{ij} = 1 \\mid y_{-ij}) =
    \\theta^\\top \\delta_{ij} g(y)` is the likelihood of a logistic regression of the
    dyads on their change statistics (no intercept: the edges term plays its role).
    Maximised by Newton-Raphson in float64 with step halving (the objective is convex).

    Parameters
    ----------
    model
        An :class:`ERGM`.
    graphs
        One or more observed graphs: ``(m,)``, ``(N, m)``, ``(n, n)``, ``(N, n, n)`` or
        ``{"y": (N, m)}``.
    max_iter, tol
        Newton iterations; convergence when the max-norm of the gradient of the
        average negative log pseudo-likelihood per dyad is below ``tol``.

    Raises
    ------
    ValueError
        Bad graphs; or when the MPLE does not exist (perfect separation, e.g. an
        empty or complete graph, or a statistic whose change statistic is constant
        across dyads), detected as a singular or divergent fit.
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM, got {type(model).__name__}")
    y = check_graphs(model, graphs)
    X = np.asarray(model.all_change_stats(jnp.asarray(y)), np.float64).reshape(-1, model.num_terms)
    t = y.reshape(-1).astype(np.float64)
    return _newton_logistic(X, t, max_iter, tol)


#: a pseudo-likelihood whose maximiser has a coordinate beyond this is treated as
#: maximised at infinity: at |theta_k| = 50 a unit change statistic moves the log-odds
#: by 50, i.e. probabilities within e^-50 of 0 or 1 -- a separated fit, not an estimate
MAX_ABS_MPLE = 50.0


def _newton_logistic(X: np.ndarray, t: np.ndarray, max_iter: int, tol: float) -> MPLEResult:
    K = X.shape[1]
    rows = X.shape[0]
    if np.linalg.matrix_rank(X) < K:
        raise ValueError(
            "the MPLE does not exist: the change statistics are linearly dependent over the dyads "
            "(a term is redundant or constant for these graphs)"
        )
    theta = np.zeros(K)
    f = _logistic_nll(theta, X, t)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ theta)))  # stable sigmoid
        grad = X.T @ (p - t)
        if np.max(np.abs(grad)) / rows < tol:
            converged = True
            it -= 1
            break
        H = (X * (p * (1 - p))[:, None]).T @ X
        try:
            step = np.linalg.solve(H + 1e-12 * np.eye(K) * np.trace(H), grad)
        except np.linalg.LinAlgError as err:
            raise ValueError("the MPLE does not exist: singular pseudo-likelihood Hessian (separation)") from err
        lr = 1.0
        while lr > 1e-10:
            cand = theta - lr * step
            fc = _logistic_nll(cand, X, t)
            if fc <= f + 1e-12 * abs(f):
                break
            lr *= 0.5
        theta, f = cand, fc
        if np.max(np.abs(theta)) > MAX_ABS_MPLE:
            raise ValueError(
                f"the MPLE does not exist (or is useless): |theta| exceeded {MAX_ABS_MPLE:g} on the way to a "
                "maximum at infinity (separation; e.g. an empty or complete graph, or too few graphs for the terms)"
            )
    p = 0.5 * (1.0 + np.tanh(0.5 * (X @ theta)))
    H = (X * (p * (1 - p))[:, None]).T @ X
    stderr = np.sqrt(np.diag(np.linalg.pinv(H)))
    if not converged:
        grad = X.T @ (p - t)
        converged = bool(np.max(np.abs(grad)) / rows < tol)
    return MPLEResult(theta, stderr, -f, it, converged)


# ----------------------------------------------------------------------------------
# MCMC-MLE (Geyer & Thompson 1992, as in statnet)
# ----------------------------------------------------------------------------------
class MCMCMLEResult(NamedTuple):
    """Output of :func:`ergm_mcmc_mle`.

    theta
        ``(K,)`` float64 estimate.
    stderr
        ``(K,)`` standard errors :math:`\\sqrt{\\operatorname{diag} I(\\hat\\theta)^{-1}}`
        with the Fisher information :math:`I = N \\operatorname{Cov}_{\\hat\\theta}[g(y)]`
        estimated from the final MCMC sample (``N`` observed graphs).
    covariance
        ``(K, K)`` the inverse Fisher information.
    mple
        The :class:`MPLEResult` used as the start (``None`` if ``theta0`` was given).
    history
        ``{"theta": (iterations + 1, K), "ess": (iterations,), "t_ratio": (iterations + 1,)}``:
        the estimate after each iteration, the effective sample size of the
        importance weights at the accepted step, and the largest
        :math:`|\\bar g_{\\rm obs} - \\bar g_{\\rm sim}| / \\mathrm{sd}(g_{\\rm sim})`.
    num_iterations
        Iterations run.
    converged
        Whether the final t-ratios were all below ``t_tol``.
    sample_stats
        ``(S, K)`` statistics of the final MCMC sample (at ``theta``).
    """

    theta: np.ndarray
    stderr: np.ndarray
    covariance: np.ndarray
    mple: MPLEResult | None
    history: dict
    num_iterations: int
    converged: bool
    sample_stats: np.ndarray


def ergm_mcmc_mle(
    model: ERGM,
    graphs: Any,
    rng_key: jax.Array,
    *,
    theta0: Any = None,
    num_samples: int = 1000,
    num_chains: int = 4,
    burn_in: int = 200,
    thin: int = 5,
    max_iterations: int = 20,
    min_iterations: int = 1,
    min_ess_fraction: float = 0.25,
    t_tol: float = 0.05,
) -> MCMCMLEResult:
    # Long because its docstring documents every argument of the estimator; the code is about 60 lines.
    """MCMC maximum likelihood, iterated as statnet's ``ergm`` does.

    Starting from the MPLE (or ``theta0``), each iteration draws ``num_samples``
    graphs (over ``num_chains`` chains, after ``burn_in`` sweeps, ``thin`` sweeps
    apart) from :math:`p(\\cdot \\mid \\theta_0)` with :data:`ergm_toggle`, and
    maximises the Geyer-Thompson importance-sampling approximation of the average
    log-likelihood ratio

    .. math::  \\ell(\\theta) - \\ell(\\theta_0) \\approx (\\theta - \\theta_0)^\\top \\bar g_{\\rm obs}
       - \\log \\frac1S \\sum_s \\exp\\{(\\theta - \\theta_0)^\\top g(y_s)\\}

    (Geyer & Thompson 1992, eq. 2.3; Hunter & Handcock 2006, eq. 11) by Newton's
    method (gradient :math:`\\bar g_{\\rm obs} - \\mathbb E_w[g]`, Hessian
    :math:`-\\operatorname{Cov}_w[g]`, log-sum-exp weights).  The approximation is
    only trusted near :math:`\\theta_0`: a Newton step is halved until the effective
    sample size of the weights stays above ``min_ess_fraction * S`` (the role of
    statnet's step-length control, Hummel et al. 2012).  Then :math:`\\theta_0` moves
    to the maximiser and the next iteration re-samples, until every t-ratio
    :math:`|\\bar g_{\\rm obs} - \\bar g_{\\rm sim}|_k / \\mathrm{sd}_k(g_{\\rm sim})` is
    below ``t_tol`` and at least ``min_iterations`` Geyer-Thompson steps were taken
    (default 1: even when the MPLE already matches the moments within ``t_tol``, one
    step refines it; statnet's convergence check is a Hotelling test of the same
    difference).  Standard errors: the inverse Fisher information, estimated as the
    covariance of the statistics of the final sample (Hunter & Handcock 2006,
    section 3.3); statnet additionally adds an MCMC-error term, not included here.

    Returns
    -------
    :class:`MCMCMLEResult`.
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM, got {type(model).__name__}")
    check_key(rng_key)
    y = check_graphs(model, graphs)
    max_iterations = check_int(max_iterations, "max_iterations")
    if isinstance(min_iterations, bool) or not isinstance(min_iterations, (int, np.integer)) or min_iterations < 0:
        raise ValueError(f"`min_iterations` must be an int >= 0, got {min_iterations!r}")
    if min_iterations > max_iterations:
        raise ValueError(f"`min_iterations` ({min_iterations}) exceeds `max_iterations` ({max_iterations})")
    num_samples = check_int(num_samples, "num_samples")
    num_chains = check_int(num_chains, "num_chains")
    if num_samples % num_chains:
        raise ValueError(f"`num_samples` ({num_samples}) must be a multiple of `num_chains` ({num_chains})")
    if not (0 < float(min_ess_fraction) < 1):
        raise ValueError(f"`min_ess_fraction` must lie in (0, 1), got {min_ess_fraction!r}")
    if not (float(t_tol) > 0):
        raise ValueError(f"`t_tol` must be > 0, got {t_tol!r}")
    K = model.num_terms
    g_obs = np.asarray(model.statistics(jnp.asarray(y), jnp.float32), np.float64).mean(0)
    mple = None
    if theta0 is None:
        mple = ergm_mple(model, y)
        theta = mple.theta.copy()
    else:
        theta = np.asarray(model.params_from_theta(theta0)["theta"], np.float64)
    per_chain = num_samples // num_chains
    init = np.repeat(y[:1], num_chains, axis=0)  # statnet starts the chains at the observed graph
    thetas, esss, tratios = [theta.copy()], [], []
    converged = False
    it = 0
    stats = None
    for it in range(1, max_iterations + 2):
        rng_key, key = jax.random.split(rng_key)
        params = model.params_from_theta(theta)
        sim = ergm_simulate(model, key, params, per_chain, num_chains=num_chains, burn_in=burn_in, thin=thin, init=init)
        init = sim["y"][:, -1]
        stats = sim["stats"].reshape(-1, K).astype(np.float64)
        sd = stats.std(0)
        diff = g_obs - stats.mean(0)
        tr = float(np.max(np.abs(diff) / np.maximum(sd, 1e-12)))
        tratios.append(tr)
        if tr < t_tol and it > min_iterations:
            converged = True
            it -= 1
            break
        if it > max_iterations:
            it -= 1
            break
        theta, ess = _geyer_thompson_step(theta, g_obs, stats, min_ess_fraction)
        thetas.append(theta.copy())
        esss.append(ess)
    cov_g = np.cov(stats, rowvar=False).reshape(K, K)
    n_obs = y.shape[0]
    try:
        covariance = np.linalg.inv(n_obs * cov_g)
    except np.linalg.LinAlgError:
        covariance = np.linalg.pinv(n_obs * cov_g)
    stderr = np.sqrt(np.clip(np.diag(covariance), 0, None))
    history = {"theta": np.array(thetas), "ess": np.array(esss), "t_ratio": np.array(tratios)}
    return MCMCMLEResult(theta, stderr, covariance, mple, history, it, converged, stats)


def _geyer_thompson_step(theta0: np.ndarray, g_obs: np.ndarray, stats: np.ndarray, min_ess_fraction: float):
    """Maximise the importance-sampled log-likelihood ratio around ``theta0`` (Newton, ESS-limited)."""
    S = stats.shape[0]
    centred = stats - stats.mean(0)

    def weights(delta):
        lw = centred @ delta
        lw = lw - lw.max()
        w = np.exp(lw)
        return w / w.sum()

    delta = np.zeros_like(theta0)
    for _ in range(50):
        w = weights(delta)
        mean = w @ stats
        grad = g_obs - mean
        cov = (stats - mean).T @ ((stats - mean) * w[:, None])
        try:
            step = np.linalg.solve(cov + 1e-10 * np.eye(len(theta0)) * max(np.trace(cov), 1e-12), grad)
        except np.linalg.LinAlgError:
            step = np.linalg.pinv(cov) @ grad
        lr = 1.0
        while lr > 1e-6:
            cand = delta + lr * step
            wc = weights(cand)
            if 1.0 / np.sum(wc**2) >= min_ess_fraction * S:
                break
            lr *= 0.5
        delta = cand
        if lr < 1.0 or np.max(np.abs(lr * step)) < 1e-10:
            break
    w = weights(delta)
    return theta0 + delta, float(1.0 / np.sum(w**2))
