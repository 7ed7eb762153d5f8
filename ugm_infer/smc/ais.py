r"""Annealed importance sampling (AIS) for discrete models, forward and reverse.

Forward AIS (Neal 2001) anneals from a normalised independent-sites base :math:`p_0`
to :math:`p \propto e^{-E}` through :math:`f_\beta(x) = p_0(x)^{1-\beta} e^{-\beta E(x)}`,
:math:`0 = \beta_0 < \beta_1 < \dots < \beta_K = 1` (see :mod:`ugm_infer.smc._paths`;
:math:`Z_0 = 1`).  Each run draws :math:`x \sim p_0` and, for :math:`k = 1..K`,

.. math::  \log w \mathrel{+}= \log f_{\beta_k}(x) - \log f_{\beta_{k-1}}(x), \qquad
           x \sim T_{\beta_k}(x, \cdot),

where :math:`T_\beta` is ``num_sweeps`` block-Gibbs sweeps invariant for
:math:`f_\beta`, handed :math:`f_\beta` in the model's fast form
(:func:`~ugm_infer.smc._paths.bridge_logdensity`: the lattice Ising and Potts
sweeps under a uniform base, incremental fields for dense pairwise models, closed-form
site log-odds), the chains kept in the kernel's own layout along the path.  Then
:math:`\mathbb E[w] = Z` exactly, and with ``M`` runs

.. math::  \log \hat Z = \log \frac1M \sum_m w_m, \qquad
           \mathrm{se} \approx \frac{\mathrm{sd}(w)}{\sqrt M\, \mathrm{mean}(w)}

(delta method, computed with the largest weight factored out).  Because
:math:`\hat Z` is unbiased, :math:`\mathbb E[\log \hat Z] \le \log Z` (Jensen): forward
AIS is a **stochastic lower bound** on :math:`\log Z`; for one run the gap is the KL
divergence between the forward and the reverse path distributions.  The se is only
trustworthy when the weights' effective sample size (``ess``) is not small: when a few
runs dominate, or all runs miss a mode, AIS underestimates and the se misses it.

**Analytic latent layer.**  With ``analytic="auto"`` a variable whose sites do not
interact (a layer of an RBM) is summed in closed form along the path,
:math:`f_\beta(x) = \sum_h (p_0(x) p_0(h))^{1-\beta} e^{-\beta E(x, h)}`
(Salakhutdinov & Murray 2008, section 4.1, where ``h`` are the hiddens).  The
transition is block Gibbs on the joint :math:`(x, h)` with log-density
:math:`(1-\beta)\log p_0(x, h) - \beta E(x, h)`, whose :math:`x`-marginal is
:math:`f_\beta`; the block holding ``h`` is updated first, so the stale ``h`` carried
between temperatures never matters and the move is invariant for :math:`f_\beta`.

**Reverse AIS** (:func:`reverse_ais`) runs the same chain backwards, from states
:math:`x \sim p` to :math:`p_0` (schedule :math:`\beta_K \to \beta_0`), accumulating
:math:`\log w' \mathrel{+}= \log f_{\beta_{k-1}}(x) - \log f_{\beta_k}(x)`.  **If the
starting states are exact independent samples of** :math:`p` (its marginal over the
annealed variables), :math:`\mathbb E[w'] = 1 / Z`, so
:math:`\log \hat Z' = -\log \mathrm{mean}(w')` satisfies
:math:`\mathbb E[\log \hat Z'] \ge \log Z`: a **stochastic upper bound**, and the two
bracket the truth (Grosse, Ghahramani & Adams 2015, "sandwiching").  Started from
*data* or from approximate samples (e.g. long Gibbs chains) the upper-bound guarantee
is lost: it holds only to the extent the starting distribution equals :math:`p` (the
RAISE estimator of Burda, Grosse & Salakhutdinov 2015 instead bounds the likelihood of
a slightly different, annealed model).  Treat such values as a heuristic.

References
----------
Neal, R. M. (2001). Annealed importance sampling. Statistics and Computing 11, 125-139.
Salakhutdinov, R. and Murray, I. (2008). On the quantitative analysis of deep belief
networks. ICML (base-rate base, the schedule of :func:`ais_schedule`, analytic hiddens).
Grosse, R. B., Maddison, C. J. and Salakhutdinov, R. (2013). Annealing between
distributions by averaging moments. NIPS (the sigmoid schedule).
Burda, Y., Grosse, R. B. and Salakhutdinov, R. (2015). Accurate and conservative
estimates of MRF log-likelihood using reverse annealing. AISTATS.
Grosse, R. B., Ghahramani, Z. and Adams, R. P. (2015). Sandwiching the marginal
likelihood using bidirectional Monte Carlo. arXiv:1511.02543.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.smc.ess import log_ess
from jax.scipy.special import xlogy

from ugm_infer import _compile
from ugm_infer._random import fold_in as fold_in_key
from ugm_infer._random import split as split_key
from ugm_infer.kernels import checkerboard, potts_lattice
from ugm_infer.kernels._common import chains_first, chains_last
from ugm_infer.kernels.gibbs import build_kernel as build_gibbs_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.latent import conditional_model, mean_field
from ugm_infer.smc import _paths
from ugm_infer.smc.tempered import _cache, log_mean_exp_and_se

__all__ = [
    "AISResult",
    "LatentLogLikelihoodResult",
    "LogLikelihoodResult",
    "ais",
    "ais_latent_log_likelihood",
    "ais_log_likelihood",
    "ais_schedule",
    "reverse_ais",
    "SCHEDULES",
]

SCHEDULES = ("sm08", "linear", "sigmoid")

#: Salakhutdinov & Murray (2008, section 4.2): 500 betas spaced uniformly on [0, 0.5],
#: 4,000 on [0.5, 0.9] and 10,000 on [0.9, 1] -- steps of 1e-3, 1e-4 and 1e-5, 14,500
#: intermediate distributions.
_SM08 = ((0.0, 0.5, 500), (0.5, 0.9, 4000), (0.9, 1.0, 10000))


class AISResult(NamedTuple):
    """Result of :func:`ais` and :func:`reverse_ais`.

    log_Z
        The estimate of :math:`\\log Z` (a stochastic lower bound for :func:`ais`, an
        upper bound for :func:`reverse_ais` from exact samples).
    log_Z_se
        Delta-method standard error :math:`\\mathrm{sd}(w)/(\\sqrt M \\mathrm{mean}(w))`.
    log_weights
        ``(M,)`` log importance weights of the runs (reverse: :math:`\\log w'`).
    ess
        Effective sample size of the weights, :math:`(\\sum w)^2 / \\sum w^2`, as a
        fraction of ``M`` (a small value means ``log_Z_se`` itself is unreliable).
    particles
        ``{name: (M, *shape)}`` final states (forward: weighted samples of :math:`p`,
        weights ``exp(log_weights)``; reverse: states after annealing to the base).
    betas
        The schedule used (forward order, from 0 to 1).
    analytic
        Name of the variable summed in closed form along the path (``""`` for none;
        a static field, not an array).
    log_weight_variance
        ``(K,)`` the across-run variance of the cumulative log-weights after each step
        (:func:`~ugm_infer.smc.multispin_ais` only; ``None`` otherwise): the input of
        :func:`~ugm_infer.smc.thermodynamic_schedule`.
    """

    log_Z: jax.Array
    log_Z_se: jax.Array
    log_weights: jax.Array
    ess: jax.Array
    particles: dict
    betas: jax.Array
    analytic: str
    log_weight_variance: Any = None


class LogLikelihoodResult(NamedTuple):
    """Result of :func:`ais_log_likelihood`.

    log_likelihood
        Mean over the examples of :math:`-F(x_n) - \\log \\hat Z`.
    log_likelihood_se
        Its standard error due to the AIS estimate of :math:`\\log Z` (the free
        energies are exact), i.e. ``log_Z_se``; the sampling error of the test set
        itself is ``log_likelihoods.std() / sqrt(N)`` and is not included.
    log_likelihoods
        ``(N,)`` per-example values.
    log_Z, log_Z_se
        The AIS estimate used.
    ais
        The full :class:`AISResult`.
    """

    log_likelihood: jax.Array
    log_likelihood_se: jax.Array
    log_likelihoods: jax.Array
    log_Z: jax.Array
    log_Z_se: jax.Array
    ais: AISResult


# ======================================================================================
# schedules
# ======================================================================================
def ais_schedule(num_betas: int = 1000, kind: str = "linear", *, sharpness: float = 4.0) -> np.ndarray:
    """Inverse temperatures :math:`0 = \\beta_0 < \\dots < \\beta_{K} = 1` (``num_betas = K + 1`` values).

    Parameters
    ----------
    num_betas
        Number of betas including both ends (>= 2).
    kind
        ``"sm08"``: the piecewise-linear schedule of Salakhutdinov & Murray (2008),
        scaled to ``num_betas``: the steps are split over [0, 0.5], [0.5, 0.9], [0.9, 1]
        in the proportions 500 : 4,000 : 10,000 of the original (``num_betas=14501``
        reproduces it exactly: steps 1e-3, 1e-4, 1e-5), i.e. ever denser towards
        :math:`\\beta = 1`, where a trained RBM's distribution changes fastest.  ``"linear"``: uniform steps.  ``"sigmoid"``:
        :math:`\\tilde\\beta_k = \\sigma(s(2k/K - 1))` rescaled to [0, 1] (Grosse,
        Maddison & Salakhutdinov 2013), dense at both ends.
    sharpness
        ``s`` of the sigmoid schedule.

    Returns
    -------
    A float64 numpy array of length ``num_betas``.
    """
    num_betas = _paths.check_positive_int(num_betas, "num_betas", minimum=2)
    if kind not in SCHEDULES:
        raise ValueError(f"`kind` must be one of {SCHEDULES}, got {kind!r}")
    steps = num_betas - 1
    if kind == "linear" or (kind == "sm08" and steps < 3):
        return np.linspace(0.0, 1.0, num_betas)
    if kind == "sigmoid":
        t = np.linspace(-1.0, 1.0, num_betas)
        s = 1.0 / (1.0 + np.exp(-float(sharpness) * t))
        out = (s - s[0]) / (s[-1] - s[0])
        out[0], out[-1] = 0.0, 1.0
        return out
    total = sum(n for _, _, n in _SM08)
    counts = [max(1, int(round(steps * n / total))) for _, _, n in _SM08[:-1]]
    counts.append(steps - sum(counts))
    if counts[-1] < 1:
        counts[1] -= 1 - counts[-1]
        counts[-1] = 1
    parts = [np.linspace(lo, hi, c + 1)[:-1] for (lo, hi, _), c in zip(_SM08, counts)]
    return np.concatenate(parts + [np.array([1.0])])


def _resolve_betas(betas: Any, num_betas: Any, schedule: str) -> np.ndarray:
    if betas is not None:
        return _paths.check_schedule(betas, "betas")
    if schedule not in SCHEDULES:
        raise ValueError(f"`schedule` must be one of {SCHEDULES} (or pass `betas=`), got {schedule!r}")
    return ais_schedule(num_betas, schedule)


# ======================================================================================
# the annealing run
# ======================================================================================
def _latent_first(model: Any, latent: str | None) -> Any:
    """The model with the block holding ``latent`` moved first (see the module docstring)."""
    if latent is None:
        return model
    blocks = model.blocks
    first = [b for b in blocks if latent in b.indices]
    if len(first) != 1:  # resolve_latent guarantees one block
        raise ValueError(f"variable '{latent}' is spread over {len(first)} blocks; it cannot be summed analytically")
    others = [b for b in blocks if latent not in b.indices]
    if blocks[0] is first[0]:
        return model
    return model.with_blocks([dict(b.indices) for b in first + others])


def _kahan_add(total: jax.Array, comp: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    # compensated summation: thousands of small increments accumulate without drift
    y = x - comp
    t = total + y
    return t, (t - total) - y


def _build_run(
    model: Any, latent: str | None, method: str | None, num_sweeps: int, num_runs: int, uniform_base: bool = False
):
    variables = model.variables
    names = tuple(n for n in variables if n != latent)
    kernel_model = _latent_first(model, latent)
    kernel = build_gibbs_kernel(kernel_model, "block", num_sweeps)

    def run(rng_key, params, log_probs, betas, x_init):
        annealed_probs = {n: log_probs[n] for n in names}

        def logbase(x):  # all variables: the joint density the Gibbs moves target
            return _paths.base_logdensity(variables, log_probs, x)

        def increment(x, a, b):
            """log f_b(x) - log f_a(x), the summed variable (if any) integrated out."""
            if latent is None:
                return (b - a) * (-_paths._as_float(model.energy(params, x)) - logbase(x))
            e0, delta = _paths.latent_deltas(model, params, x, latent, method)
            log_base_x = _paths.base_logdensity(variables, annealed_probs, x)
            return -(b - a) * log_base_x - _paths.free_energy_difference(e0, delta, a, b, log_probs[latent])

        def joint_logdensity(beta):  # the model's fast form where it has one (lattice, pairwise, site log-odds)
            return _paths.bridge_logdensity(model, params, variables, log_probs, beta, uniform_base)

        own_layout = latent is None and uniform_base  # the runs are the model's own lattice chains
        of_words = getattr(model, "energy_of_words", None) if own_layout else None
        potts = potts_lattice.lattice_of(model.logdensity_fn(params), model) if own_layout else None
        potts_tables = model.logdensity_fn(params).tables[: potts_lattice.NUM_TABLES] if potts is not None else None
        # a uniform base: log p_0 is the same at every configuration
        uniform_log_base = sum(jnp.sum(lp[..., 0]) for lp in log_probs.values()) if own_layout else None

        def increments(states, axis, a, b):
            """:func:`increment` at every run's configuration; a lattice chain's energies from its own layout."""
            energy = None
            if of_words is not None and isinstance(states, checkerboard.LatticeGibbsState):
                energy = of_words(params, type(states).layout, states.even, states.odd, type(states).chains_last)
            elif potts is not None and isinstance(states, potts_lattice.PottsLatticeState):
                sub, lat = tuple(states), type(states).lattice
                energy = potts_lattice.energy_of_sublattices(lat, sub, potts_tables, type(states).chains_last)
            if energy is not None:
                return (b - a) * (-_paths._as_float(energy) - uniform_log_base)
            return jax.vmap(lambda state: increment(state.position, a, b), in_axes=axis)(states)

        key_latent, key_runs = split_key(rng_key)
        x = {n: x_init[n] for n in names}
        if latent is not None:
            x[latent] = variables[latent].random(key_latent, (num_runs,))
        x = {n: x[n] for n in variables}
        keys = split_key(key_runs, num_runs)
        # the runs stay in the kernel's own layout (a lattice's sub-lattices, many runs with the chains last)
        # along the path: converting configurations in and out of it at every step costs many sweeps
        states = jax.vmap(lambda xx: gibbs_init(xx, joint_logdensity(betas[0])))(x)
        states, axis = chains_last(states, num_runs, carried=betas.shape[0] >= 3)  # a loop of 2 or more steps
        move = jax.vmap(lambda kk, state, b: kernel(kk, state, joint_logdensity(b)), (0, axis, None), (axis, 0))

        def step(carry, inp):
            states, total, comp = carry
            a, b, k = inp
            total, comp = _kahan_add(total, comp, increments(states, axis, a, b))
            states, _ = move(jax.vmap(lambda kk: fold_in_key(kk, k))(keys), states, b)
            return (states, total, comp), None

        zero = jnp.zeros((num_runs,), betas.dtype)  # float32, or float64 with x64 and float64 params
        steps = (betas[:-1], betas[1:], jnp.arange(betas.shape[0] - 1))
        (states, total, _), _ = jax.lax.scan(step, (states, zero, zero), steps)
        return jax.vmap(lambda state: state.position)(chains_first(states)), total

    return _compile.jit(run)


def _check_states(model: Any, state: Any, names: tuple[str, ...], argname: str) -> tuple[dict, int]:
    if not isinstance(state, Mapping):
        raise TypeError(f"`{argname}` must be a dict {{name: array (num_runs, *shape)}}, got {type(state).__name__}")
    unknown = [n for n in state if n not in model.variables]
    if unknown:
        raise ValueError(f"`{argname}` names unknown variable(s) {unknown}; the model has {list(model.variables)}")
    missing = [n for n in names if n not in state]
    if missing:
        raise ValueError(f"`{argname}` is missing the annealed variable(s) {missing}")
    arrays, num = _paths.check_batched(model, {n: state[n] for n in names}, argname, "runs")
    return {n: jnp.asarray(arr, dtype=model.variables[n].dtype) for n, arr in arrays.items()}, num


def _anneal(model, latent, method, num_sweeps: int, num_runs: int, *, reverse: bool, uniform_base: bool) -> Callable:
    """``run(rng_key, params, log_probs, betas, dtype, x_init) -> AISResult``: the cached annealing runs.

    Forward AIS anneals along ``betas``; reverse AIS along them reversed, from ``x_init``.
    ``uniform_base``: the base is uniform at every site (:func:`~ugm_infer.smc._paths.is_uniform_base`).
    """
    run = _cache(
        model,
        ("ais", latent, method, num_sweeps, num_runs, uniform_base),
        lambda: _build_run(model, latent, method, num_sweeps, num_runs, uniform_base),
    )

    def anneal(rng_key, params, log_probs, betas, dtype, x_init) -> AISResult:
        ladder = betas[::-1].copy() if reverse else betas
        particles, log_w = run(rng_key, params, log_probs, jnp.asarray(ladder, dtype), x_init)
        return _finish(log_w, particles, betas, latent, reverse=reverse)

    return anneal


def _prepare(model, params, base, data, pseudo_count, analytic, num_sweeps):
    _paths.check_model(model)
    num_sweeps = _paths.check_positive_int(num_sweeps, "num_sweeps")
    _paths.check_params(model, params)
    model = _paths.resolve_structure(model, params)
    with_base: tuple[str, ...] = ()
    if isinstance(base, str) and base == "data" and isinstance(data, Mapping):
        with_base = tuple(data)
    elif isinstance(base, Mapping):
        with_base = tuple(base)
    latent, method = _paths.resolve_latent(model, params, analytic, with_base)
    names = tuple(n for n in model.variables if n != latent)
    dtype = _paths.float_dtype(model, params)
    log_probs = _paths.base_log_probs(model, base, tuple(model.variables), data, pseudo_count, dtype=dtype)
    return model, latent, method, names, log_probs, num_sweeps, dtype


def _finish(log_w, particles, betas, latent, reverse, log_weight_variance=None):
    if np.any(np.isnan(np.asarray(log_w))):
        raise RuntimeError("AIS log-weights are NaN (the energy returned NaN somewhere; check `params`)")
    log_mean, se = log_mean_exp_and_se(log_w)
    log_z = -log_mean if reverse else log_mean
    ess = jnp.exp(log_ess(log_w)) / log_w.shape[0]
    return AISResult(log_z, se, log_w, ess, particles, jnp.asarray(betas, log_w.dtype), latent or "", log_weight_variance)


def ais(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    *,
    num_runs: int = 100,
    betas: Any = None,
    num_betas: int = 1000,
    schedule: str = "linear",
    base: Any = "uniform",
    data: Any = None,
    pseudo_count: float = 1.0,
    analytic: Any = "auto",
    num_sweeps: int = 1,
) -> AISResult:
    r"""Forward annealed importance sampling estimate of :math:`\log Z` (a stochastic lower bound).

    See the module docstring for the algorithm, the bound and the analytic latent sum.

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        An :class:`~ugm_infer.EnergyModel` and its parameters.
    num_runs
        Independent annealing runs ``M`` (vmapped).
    betas
        An explicit schedule, strictly increasing from 0 to 1; overrides ``num_betas``
        and ``schedule``.
    num_betas, schedule
        Number of betas (both ends included) and shape of the schedule
        (:func:`ais_schedule`: ``"linear"`` (default), ``"sm08"``, ``"sigmoid"``).
        ``num_betas=14501`` with ``"sm08"`` is Salakhutdinov & Murray's schedule.
        Linear is the default: on the small models measured (16-spin dense Ising,
        4x4 lattice at J = 0.44, RBM 20x8 with a uniform base) it gave the smallest
        log-weight spread at equal cost (sd(log w) 0.18-0.30 against 0.48-0.54 for
        ``"sm08"`` at 300 betas), and on a PCD-trained 784x20 MNIST RBM with a
        base-rate base the two were within noise of each other from 1,000 betas up
        (``docs/results/rbm_ais.md``), while the scaled SM08 shape failed badly at 300.
    base
        ``"uniform"``, ``"data"`` (Laplace-smoothed site marginals of ``data``: the
        base-rate model of SM08) or ``{name: logits of shape domain.shape + (K,)}``;
        unnamed variables are uniform.  A base over the analytically summed variable
        enters the closed-form sum.
    data
        ``{name: (N, *shape)}`` for ``base="data"``.
    pseudo_count
        Laplace smoothing of the base rates.
    analytic
        ``"auto"`` (sum the non-interacting variable with the most configurations,
        if another variable remains, passing over variables given a non-uniform base
        when possible: an RBM sums ``v`` with a uniform base and ``h`` with a data
        base), ``None`` (anneal every variable), or a variable name whose sites do not
        interact.
    num_sweeps
        Block-Gibbs sweeps per intermediate distribution.

    Returns
    -------
    :class:`AISResult`.

    Raises
    ------
    ValueError
        Bad arguments: ``num_runs < 1``, a schedule not strictly increasing from 0 to 1,
        unknown base or data variable names, logits of the wrong shape, an ``analytic``
        variable whose sites interact.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.rbm(20, 8)
    >>> params = model.init_params(jax.random.key(0), scale=0.5)
    >>> res = ui.smc.ais(jax.random.key(1), model, params, num_runs=64, num_betas=200)
    >>> bool(abs(float(res.log_Z) - float(ui.exact.log_partition(model, params))) < 0.2)
    True
    """
    _paths.check_key(rng_key)
    num_runs = _paths.check_positive_int(num_runs, "num_runs")
    betas = _resolve_betas(betas, num_betas, schedule)
    model, latent, method, names, log_probs, num_sweeps, dtype = _prepare(
        model, params, base, data, pseudo_count, analytic, num_sweeps
    )
    key_init, key_run = split_key(rng_key)
    x_init = _paths.sample_base(key_init, model.variables, {n: log_probs[n] for n in names}, num_runs)
    run = _anneal(model, latent, method, num_sweeps, num_runs, reverse=False, uniform_base=_paths.is_uniform_base(log_probs))
    return run(key_run, params, log_probs, betas, dtype, x_init)


def reverse_ais(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    initial_state: Mapping[str, Any],
    *,
    betas: Any = None,
    num_betas: int = 1000,
    schedule: str = "linear",
    base: Any = "uniform",
    data: Any = None,
    pseudo_count: float = 1.0,
    analytic: Any = "auto",
    num_sweeps: int = 1,
) -> AISResult:
    r"""Reverse AIS: anneal from states of :math:`p` down to the base; a stochastic *upper* bound on :math:`\log Z`.

    One run per starting state.  :math:`\log \hat Z' = -\log \frac1M \sum_m w'_m`
    with :math:`\mathbb E[w'] = 1/Z`, hence :math:`\mathbb E[\log \hat Z'] \ge \log Z`
    **provided the starting states are exact independent draws from** :math:`p`
    (marginally over the annealed variables), e.g. ``ui.exact.sample`` on small models.
    From data or from approximate MCMC samples this is a heuristic, not a bound (see
    the module docstring).  Together with :func:`ais` (same schedule and base) it
    brackets :math:`\log Z` in expectation.

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        The model and its parameters.
    initial_state
        ``{name: (M, *shape)}`` starting states of the annealed variables (a value for
        the analytically summed variable, if given, is ignored).
    betas, num_betas, schedule, base, data, pseudo_count, analytic, num_sweeps
        As in :func:`ais` (the schedule is traversed from 1 to 0).

    Returns
    -------
    :class:`AISResult` (``log_weights`` are the reverse weights :math:`\log w'`).
    """
    _paths.check_key(rng_key)
    betas = _resolve_betas(betas, num_betas, schedule)
    model, latent, method, names, log_probs, num_sweeps, dtype = _prepare(
        model, params, base, data, pseudo_count, analytic, num_sweeps
    )
    x_init, num_runs = _check_states(model, initial_state, names, "initial_state")
    run = _anneal(model, latent, method, num_sweeps, num_runs, reverse=True, uniform_base=_paths.is_uniform_base(log_probs))
    return run(rng_key, params, log_probs, betas, dtype, x_init)


def _free_energy_fn(model: Any, missing: tuple[str, ...]):
    """A jitted ``fn(params, observed batch) -> (n,)`` free energies of the observed variables."""
    if not missing:
        one = lambda params, x: _paths._as_float(model.energy(params, x))
    elif len(missing) > 1:
        raise ValueError(
            f"`data` leaves {list(missing)} unobserved; ais_log_likelihood can sum out at most one "
            "variable in closed form (use ui.exact.log_likelihood for small models)"
        )
    else:
        (name,) = missing
        if name in model.free_energy_fns:
            fe = model.free_energy_fns[name]
            one = lambda params, x: _paths._as_float(fe(params, x))
        elif name in model.non_interacting_variables():
            method = _paths.latent_method(model, name)
            one = lambda params, x: _paths.tempered_free_energy(model, params, x, name, 1.0, method)
        else:
            raise ValueError(
                f"the unobserved variable '{name}' has interacting sites and no free_energy_fns entry; "
                "its free energy has no closed form"
            )
    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def ais_log_likelihood(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    data: Mapping[str, Any],
    *,
    base: Any = "data",
    base_data: Mapping[str, Any] | None = None,
    batch_size: int = 4096,
    **ais_kwargs: Any,
) -> LogLikelihoodResult:
    r"""Average log-likelihood :math:`\frac1N \sum_n [-F(x_n) - \log \hat Z]` with :math:`\log Z` from AIS.

    :math:`F` is exact: the energy if ``data`` holds every variable, otherwise the one
    missing variable is summed in closed form (``model.free_energy_fns[name]`` if the
    model declares it, e.g. the RBM visible free energy, else the generic sum over
    its non-interacting sites, :func:`ugm_infer.smc.tempered_free_energy` at
    :math:`\beta = 1`).  Because :math:`\log \hat Z` is a stochastic lower bound, the
    result is a stochastic *upper* bound on the average log-likelihood (an
    overestimate when AIS misses modes).

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        The model and its parameters.
    data
        ``{name: (N, *shape)}`` examples of the observed variables.
    base
        AIS base (default ``"data"``: the Laplace-smoothed base-rate model of
        ``base_data``).
    base_data
        Examples the base rates are fitted to (default ``data``; pass the training set
        to follow SM08).
    batch_size
        Examples per batch when computing the free energies.
    **ais_kwargs
        Passed to :func:`ais` (``num_runs``, ``num_betas``, ``betas``, ``schedule``,
        ``num_sweeps``, ``pseudo_count``, ``analytic``).

    Returns
    -------
    :class:`LogLikelihoodResult`.
    """
    _paths.check_key(rng_key)
    _paths.check_model(model)
    observed, num = _check_states(model, data, tuple(data) if isinstance(data, Mapping) else (), "data")
    batch_size = _paths.check_positive_int(batch_size, "batch_size")
    _paths.check_params(model, params)
    model = _paths.resolve_structure(model, params)
    missing = tuple(n for n in model.variables if n not in observed)
    fn = _cache(model, ("free_energy", missing), lambda: _free_energy_fn(model, missing))
    parts = [
        fn(params, {n: x[start : start + batch_size] for n, x in observed.items()}) for start in range(0, num, batch_size)
    ]
    free = jnp.concatenate(parts)
    if isinstance(base, str) and base == "data":
        ais_kwargs["data"] = observed if base_data is None else base_data
    elif base_data is not None:
        raise ValueError('`base_data` is only used with base="data"')
    res = ais(rng_key, model, params, base=base, **ais_kwargs)
    lls = -free - res.log_Z
    return LogLikelihoodResult(jnp.mean(lls), res.log_Z_se, lls, res.log_Z, res.log_Z_se, res)


# ======================================================================================
# models whose latent variables interact (DBMs, grids with hidden units)
# ======================================================================================
class LatentLogLikelihoodResult(NamedTuple):
    """Result of :func:`ais_latent_log_likelihood`.

    log_likelihood
        Mean over the examples of :math:`\\widehat{\\log Z(v_n)} - \\log \\hat Z`.
    log_likelihood_se
        Its standard error from the AIS noise: ``log_Z_se`` combined with the per-datum
        ``log_Z_v_se`` (:math:`\\sqrt{\\mathrm{se}_Z^2 + \\overline{\\mathrm{se}_n^2}/N}`); the
        sampling error of the test set itself (``log_likelihoods.std() / sqrt(N)``) is
        not included.
    log_likelihoods
        ``(N,)`` per-example values.
    log_Z_v, log_Z_v_se
        ``(N,)`` the per-example estimates of :math:`\\log Z(v_n) = \\log \\sum_h e^{-E(v_n, h)}`
        and their standard errors (``estimator="mean_field"``: the variational bound
        :math:`-F_{MF}(v_n) \\le \\log Z(v_n)`, se 0).
    log_Z, log_Z_se
        The AIS estimate of :math:`\\log Z` of the full model.
    ais
        The full :class:`AISResult` of :math:`\\log Z`.
    estimator
        ``"mean_field"`` or ``"ais"`` (a static field).
    """

    log_likelihood: jax.Array
    log_likelihood_se: jax.Array
    log_likelihoods: jax.Array
    log_Z_v: jax.Array
    log_Z_v_se: jax.Array
    log_Z: jax.Array
    log_Z_se: jax.Array
    ais: AISResult
    estimator: str


def _binary_entropy(mu: jax.Array, domain) -> jax.Array:
    p = (1.0 + mu) / 2.0 if domain.values[0] < 0 else mu  # P(unit in its upper state)
    p = jnp.clip(p, 0.0, 1.0)
    # xlogy: 0 log 0 = 0 exactly (saturated units, e.g. MNIST-trained DBMs, are common)
    return -jnp.sum(xlogy(p, p) + xlogy(1.0 - p, 1.0 - p))


def _mean_field_log_z_v(model, visible, latent, mean_field_kwargs):
    """A jitted ``fn(params, batch) -> (n,)`` mean-field bounds :math:`-F_{MF}(v) \\le \\log Z(v)`."""
    solve = mean_field(model, visible, **mean_field_kwargs)

    def one(params, v):
        means, _ = solve(params, v)
        # multilinear energy: E_q[E(v, h)] = E(v, E_q[h]) for a factorised q
        energy = _paths._as_float(model.energy(params, {**v, **means}))
        entropy = sum(_binary_entropy(_paths._as_float(means[n]), model.variables[n]) for n in latent)
        return -energy + entropy

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def _conditional_ais_fn(model, visible, params, v0, num_runs, num_sweeps, analytic):
    """A jitted ``fn(keys (n,), params, batch, betas) -> (log Z(v), se)`` by AIS on p(h | v_n)."""
    cond = conditional_model(model, visible, params, "block")
    cond_params = (params, v0)
    cond = _paths.resolve_structure(cond, cond_params)
    latent, method = _paths.resolve_latent(cond, cond_params, analytic)
    names = tuple(n for n in cond.variables if n != latent)
    log_probs = _paths.base_log_probs(cond, "uniform", tuple(cond.variables), dtype=_paths.float_dtype(cond, cond_params))
    run = _build_run(cond, latent, method, num_sweeps, num_runs, uniform_base=True)

    def one(key, params, v, betas):
        key_init, key_run = split_key(key)
        x_init = _paths.sample_base(key_init, cond.variables, {n: log_probs[n] for n in names}, num_runs)
        _, log_w = run(key_run, (params, v), log_probs, betas, x_init)
        return log_mean_exp_and_se(log_w)

    return jax.jit(jax.vmap(one, in_axes=(0, None, 0, None)))


def ais_latent_log_likelihood(
    rng_key: jax.Array,
    model: Any,
    params: Any,
    data: Mapping[str, Any],
    *,
    estimator: str = "mean_field",
    base: Any = "data",
    base_data: Mapping[str, Any] | None = None,
    batch_size: int = 256,
    conditional_runs: int = 16,
    conditional_betas: int = 1000,
    conditional_schedule: str = "linear",
    mean_field_kwargs: dict | None = None,
    **ais_kwargs: Any,
) -> LatentLogLikelihoodResult:
    # Long because its docstring documents every argument and the estimator; the code is about 50 lines.
    r"""Test log-likelihood of a model whose latent variables interact (a DBM), :math:`\log Z` by AIS.

    Salakhutdinov and Hinton (2009, section 4) evaluate a DBM by

    .. math::  \log p(v) = \log Z(v) - \log Z, \qquad
               \log Z(v) = \log \sum_h e^{-E(v, h)},

    with :math:`\log Z` from AIS on the full model (:func:`ais`, here with a base-rate
    base over the observed variables and one non-interacting variable summed in
    closed form) and, per test vector, either

    * ``estimator="mean_field"`` (their reported numbers): the variational bound
      :math:`\log Z(v) \ge -F_{MF}(v) = -\mathbb E_q[E(v, h)] + \mathcal H(q)` of the
      naive mean-field fixed point :math:`q(h \mid v) = \prod_j q_j(h_j)`
      (:func:`ugm_infer.learn.mean_field`; the energy must be multilinear, so
      :math:`\mathbb E_q[E] = E(v, \mu)`).  Given the exact :math:`\log Z` this is a
      **lower bound** on :math:`\log p(v)`; with AIS's :math:`\log \hat Z` (itself a
      stochastic lower bound on :math:`\log Z`) it is a lower bound only to the extent
      AIS is accurate.
    * ``estimator="ais"``: AIS on the clamped model :math:`p(h \mid v_n)` for every
      test vector (``conditional_runs`` runs over ``conditional_betas`` betas, uniform
      base, one latent variable summed in closed form when its sites do not interact:
      for a 2-layer DBM the clamped model is an RBM over ``(h1, h2)``), vmapped over
      the examples.  :math:`\widehat{\log Z(v)}` is a stochastic lower bound on
      :math:`\log Z(v)`, so the difference is an **estimate, not a bound** (both
      terms are biased low; the biases cancel only in part).  Costs
      ``N x conditional_runs x conditional_betas`` Gibbs sweeps of the latents.

    Parameters
    ----------
    rng_key
        A JAX PRNG key.
    model, params
        A model with (interacting) latent variables, e.g. ``ui.models.dbm`` or
        ``ui.models.grid_hidden``, and its parameters.
    data
        ``{visible name: (N, *shape)}``; the variables not in ``data`` are latent.
    estimator
        ``"mean_field"`` (default) or ``"ais"`` (see above).
    base, base_data
        The base of the :math:`\log Z` AIS run, as in :func:`ais_log_likelihood`
        (default: the base rates of ``base_data``, itself defaulting to ``data``; pass
        the training set to follow Salakhutdinov & Murray 2008).
    batch_size
        Examples per compiled batch of the per-datum computation.
    conditional_runs, conditional_betas, conditional_schedule
        Per-datum AIS (``estimator="ais"`` only): runs, number of betas and schedule.
    mean_field_kwargs
        ``damping``, ``tol``, ``max_iterations`` of :func:`ugm_infer.learn.mean_field`.
    **ais_kwargs
        Passed to :func:`ais` for :math:`\log Z` (``num_runs``, ``num_betas``,
        ``betas``, ``schedule``, ``num_sweeps``, ``pseudo_count``, ``analytic``);
        ``num_sweeps`` is also used by the per-datum runs.

    Returns
    -------
    :class:`LatentLogLikelihoodResult`.

    References
    ----------
    Salakhutdinov, R. and Hinton, G. E. (2009). Deep Boltzmann machines. AISTATS
    (section 4: AIS for :math:`\log Z`, the mean-field lower bound per test vector).
    Salakhutdinov, R. and Murray, I. (2008). On the quantitative analysis of deep
    belief networks. ICML (base-rate base).
    """
    _paths.check_key(rng_key)
    _paths.check_model(model)
    if estimator not in ("mean_field", "ais"):
        raise ValueError(f"`estimator` must be 'mean_field' or 'ais', got {estimator!r}")
    if not isinstance(data, Mapping):
        raise TypeError(f"`data` must be a dict {{visible name: (N, *shape)}}, got {type(data).__name__}")
    observed, num = _check_states(model, data, tuple(data), "data")
    visible = tuple(observed)
    latent = tuple(n for n in model.variables if n not in observed)
    if not latent:
        raise ValueError("`data` observes every variable: use ais_log_likelihood (no latent variable to sum)")
    batch_size = _paths.check_positive_int(batch_size, "batch_size")
    conditional_runs = _paths.check_positive_int(conditional_runs, "conditional_runs", 2)
    _paths.check_params(model, params)
    if mean_field_kwargs is not None and estimator != "mean_field":
        raise ValueError("`mean_field_kwargs` only applies to estimator='mean_field'")
    model = _paths.resolve_structure(model, params)
    key_z, key_v = split_key(rng_key)
    batches = [{n: x[s : s + batch_size] for n, x in observed.items()} for s in range(0, num, batch_size)]
    if estimator == "mean_field":
        if not model.multilinear:
            raise ValueError(f"estimator='mean_field' needs a multilinear energy; model '{model.name}' is not")
        kw = dict(mean_field_kwargs or {})
        fn = _cache(
            model,
            ("mf_log_z_v", visible, tuple(sorted(kw.items()))),
            lambda: _mean_field_log_z_v(model, visible, latent, kw),
        )
        log_z_v = jnp.concatenate([fn(params, b) for b in batches])
        log_z_v_se = jnp.zeros_like(log_z_v)
    else:
        betas = jnp.asarray(ais_schedule(conditional_betas, conditional_schedule), _paths.float_dtype(model, params))
        num_sweeps = _paths.check_positive_int(ais_kwargs.get("num_sweeps", 1), "num_sweeps")
        v0 = {n: x[0] for n, x in observed.items()}
        fn = _cache(
            model,
            ("cond_ais", visible, conditional_runs, num_sweeps),
            lambda: _conditional_ais_fn(model, visible, params, v0, conditional_runs, num_sweeps, "auto"),
        )
        keys = split_key(key_v, num)
        outs = [fn(keys[s : s + batch_size], params, b, betas) for s, b in zip(range(0, num, batch_size), batches)]
        log_z_v = jnp.concatenate([o[0] for o in outs])
        log_z_v_se = jnp.concatenate([o[1] for o in outs])
    if isinstance(base, str) and base == "data":
        ais_kwargs["data"] = observed if base_data is None else base_data
    elif base_data is not None:
        raise ValueError('`base_data` is only used with base="data"')
    res = ais(key_z, model, params, base=base, **ais_kwargs)
    lls = log_z_v - res.log_Z
    se = jnp.sqrt(res.log_Z_se**2 + jnp.mean(log_z_v_se**2) / num)
    return LatentLogLikelihoodResult(jnp.mean(lls), se, lls, log_z_v, log_z_v_se, res.log_Z, res.log_Z_se, res, estimator)
