r"""Mean-field theory for sigmoid belief networks (Saul, Jaakkola and Jordan 1996).

For the network of :func:`ugm_infer.models.sbn.sigmoid_belief_net` (units
:math:`S_i`, :math:`z_i = \sum_j J_{ij} S_j + h_i` over the parents :math:`j` of
:math:`i`, :math:`\ln P(S) = \sum_i [S_i z_i - \ln(1 + e^{z_i})]`), the posterior of
the hidden units given the visibles :math:`V` is approximated by a factorised
:math:`Q(H \mid V) = \prod_{i \in H} \mu_i^{S_i} (1 - \mu_i)^{1 - S_i}`, and
:math:`\ln P(V) \ge \sum_H Q \ln P(H, V) - \sum_H Q \ln Q` (their eq. 7-8).  The
term :math:`\mathbb E_Q[\ln(1 + e^{z_i})]` has no closed form; it is bounded with one
extra variational parameter :math:`\xi_i` per unit that has parents (their eq. 11-12):

.. math::  \mathbb E[\ln(1 + e^{z_i})] \le \xi_i \mathbb E[z_i]
           + \ln \mathbb E\big[e^{-\xi_i z_i} + e^{(1 - \xi_i) z_i}\big],

exact in :math:`\xi_i` for a deterministic :math:`z_i` and convex in :math:`\xi_i`.
Under the factorised :math:`Q` the moment generating function factorises over the
parents, :math:`\mathbb E[e^{a z_i}] = e^{a h_i} \prod_j (1 - \mu_j + \mu_j e^{a J_{ij}})`,
and with visible units at their data values (:math:`\mu_i = V_i`) the bound is
(their eq. 13)

.. math::  \mathcal L(V; \mu, \xi) = \sum_i \Big[(\mu_i - \xi_i)\langle z_i\rangle
           - \ln\big(\langle e^{-\xi_i z_i}\rangle + \langle e^{(1 - \xi_i) z_i}\rangle\big)\Big]
           - \sum_{i \in H} \big[\mu_i \ln \mu_i + (1 - \mu_i) \ln(1 - \mu_i)\big]
           \le \ln P(V),

with :math:`\langle z_i \rangle = \sum_j J_{ij} \mu_j + h_i`; for the top layer
(no parents) the term is the exact :math:`\mu_i h_i - \ln(1 + e^{h_i})`.  Every
:math:`(\mu, \xi)` gives a valid lower bound; the updates below tighten it.

Updates (one sweep; ``num_iterations`` sweeps or until the largest change of a mean
is below ``tol``)

* :math:`\xi` for fixed :math:`\mu`: :math:`\mathcal L` separates over units and is
  concave in each :math:`\xi_i`, with its maximiser in :math:`[0, 1]` (the derivative
  is :math:`\ge 0` at 0 and :math:`\le 0` at 1 by the covariance inequality), so
  ``xi_iterations`` bisection steps on :math:`\partial \mathcal L / \partial \xi_i`
  (from :func:`jax.grad`) find it to :math:`2^{-\text{xi\_iterations}}`.  (Saul et al.
  also minimise this one-dimensional convex function numerically.)
* :math:`\mu` for fixed :math:`\xi`, one hidden layer at a time from the bottom: the
  stationarity condition is the mean-field equation (their eq. 15)

  .. math::  \mu_i = \sigma\Big(\sum_j \big[J_{ij} \mu_j + J_{ji}(\mu_j - \xi_j) + K_{ji}\big]
             + h_i\Big), \qquad K_{ji} = -\frac{\partial}{\partial \mu_i}
             \ln\big\langle e^{-\xi_j z_j} + e^{(1 - \xi_j) z_j}\big\rangle ,

  whose right-hand side is :math:`\sigma(\partial \mathcal L_{\rm energy} / \partial
  \mu_i)` (:math:`\mathcal L` without the entropy), computed with :func:`jax.grad`.
  Units of one layer are co-parents and interact through :math:`K`, so the parallel
  update of a layer is followed by a line search over the step
  :math:`\mu \leftarrow \mu + \lambda(\mu^{\rm new} - \mu)`,
  :math:`\lambda \in \{1, \tfrac12, \tfrac14, 0\}`, keeping the best bound: every
  sweep is monotone (the bound never decreases).

Learning (their section 4): the average bound over the data is maximised over the
weights and biases by gradient ascent with :math:`\mu, \xi` held at their optimised
values (an EM-like variational step; by the envelope theorem it is the total
gradient at the optimum), through any optax optimizer: :func:`mean_field_learner`
(a :class:`~ugm_infer.learn.Learner`, so :func:`ugm_infer.fit` drives it).

Cost per datum and sweep: :math:`O((\text{xi\_iterations} + 6) \sum_k n_{k-1} n_k)`
(one exponential per weight per evaluation); memory :math:`O(\sum_k n_{k-1} n_k)`.

References
----------
Saul, L. K., Jaakkola, T. and Jordan, M. I. (1996). Mean field theory for sigmoid
belief networks. Journal of Artificial Intelligence Research 4, 61-76 (bound eq. 11-13,
mean-field equations eq. 15, learning section 4, digit classification section 5).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.learn.base import (
    Learner,
    apply_ascent,
    check_batch,
    check_nonnegative_float,
    check_positive_int,
    global_norm,
)
from ugm_infer.learn.skeleton import ObjectiveState, build, initial_step, setup

__all__ = [
    "SBNBound",
    "SBNMeanFieldInfo",
    "SBNMeanFieldState",
    "bound_value",
    "mean_field_bound",
    "mean_field_learner",
]

_EPS = 1e-6
_STEPS = (1.0, 0.5, 0.25, 0.0)


class SBNBound(NamedTuple):
    """Result of :func:`mean_field_bound` (leading batch axis when ``v`` is batched).

    bound
        :math:`\\mathcal L(V; \\mu, \\xi) \\le \\ln P(V)`.
    mu
        ``{"h1": (..., n_1), ..., "hL": (..., n_L)}``: the mean-field means.
    xi
        ``{"v": (..., n_0), "h1": ..., "h(L-1)": ...}``: the :math:`\\xi_i` of every unit
        with parents (all but the top layer).
    """

    bound: jax.Array
    mu: dict
    xi: dict


SBNMeanFieldState = ObjectiveState  # the state of :func:`mean_field_learner`: params, opt_state, step


class SBNMeanFieldInfo(NamedTuple):
    """Per-step diagnostics of :func:`mean_field_learner`.

    bound
        Mean of the optimised bound over the minibatch (before the update).
    grad_norm
        Global L2 norm of the ascent direction.
    max_change
        Largest change of a mean in the last mean-field sweep (over the batch).
    """

    bound: jax.Array
    grad_norm: jax.Array
    max_change: jax.Array


# ----------------------------------------------------------------------------------
# the bound
# ----------------------------------------------------------------------------------
def _check_model(model: Any) -> None:
    from ugm_infer.models.sbn import SigmoidBeliefNet

    if not isinstance(model, SigmoidBeliefNet):
        raise TypeError(f"`model` must be a sigmoid belief net (ui.models.sigmoid_belief_net), got {type(model).__name__}")


def _layer(W: jax.Array, b: jax.Array, x: jax.Array, p: jax.Array, xi: jax.Array):
    r"""Bound term of one layer of units with parents, and its derivatives.

    ``x``: means of the child units (data for the visibles), ``p``: means of their
    parents, ``W`` child-by-parent weights, ``b`` the children's biases.  With
    :math:`X^a_{ij} = a_i W_{ij}`, :math:`\ln \langle e^{a_i z_i} \rangle = a_i b_i +
    \sum_j [\ln(1 - p_j) + \mathrm{softplus}(\mathrm{logit}\, p_j + X^a_{ij})]` and
    :math:`r^a_{ij} = \sigma(\mathrm{logit}\, p_j + X^a_{ij})` its derivative
    weights.  Returns ``(term, dL/dxi, dL/dp)`` where ``term`` is
    :math:`\sum_i (x_i - \xi_i) \langle z_i \rangle - \ln(\langle e^{-\xi_i z_i}
    \rangle + \langle e^{(1 - \xi_i) z_i} \rangle)` and the derivatives are the
    closed forms behind Saul et al.'s eq. 15 (:math:`K_{ji}`).
    """
    log_1m = jnp.log1p(-p)
    logit = jnp.log(p) - log_1m
    a = jnp.stack([-xi, 1.0 - xi])  # (2, n): the two exponents of the xi bound
    u = logit + a[:, :, None] * W  # (2, n, m)
    log_m = a * b + jnp.sum(log_1m) + jnp.sum(jax.nn.softplus(u), axis=-1)  # ln <e^{a z}>
    weights = jax.nn.softmax(log_m, axis=0)
    # posterior-weighted r: d/da ln <e^{a z_i}> = b_i + sum_j W_ij r_ij
    r_bar = jnp.sum(weights[:, :, None] * jax.nn.sigmoid(u), axis=0) - p
    term = jnp.sum((x - xi) * (b + W @ p) - jax.nn.logsumexp(log_m, axis=0))
    d_xi = jnp.sum(W * r_bar, axis=-1)
    # d/dp_j ln(1 - p_j + p_j e^X) = (e^X - 1) / (1 - p_j + p_j e^X) = (r - p_j) / (p_j (1 - p_j))
    d_p = (x - xi) @ W - jnp.sum(r_bar, axis=0) / (p * (1 - p))
    return term, d_xi, d_p


def _energy_part(params: Any, num_hidden: int, v: jax.Array, mu: list, xi: list) -> jax.Array:
    r""":math:`\mathcal L` without the entropy (one datum; ``mu``/``xi`` are lists by layer)."""
    means = [v] + list(mu)
    total = 0.0
    for k in range(num_hidden):
        total = total + _layer(params[f"W{k + 1}"], params[f"b{k}"], means[k], means[k + 1], xi[k])[0]
    b_top = params[f"b{num_hidden}"]
    return total + jnp.sum(means[num_hidden] * b_top - jax.nn.softplus(b_top))


def _entropy(mu: list) -> jax.Array:
    return sum(-jnp.sum(m * jnp.log(m) + (1 - m) * jnp.log1p(-m)) for m in mu)


def _bound(params: Any, num_hidden: int, v: jax.Array, mu: list, xi: list) -> jax.Array:
    return _energy_part(params, num_hidden, v, mu, xi) + _entropy(mu)


def bound_value(model: Any, params: Any, v: jax.Array, mu: dict, xi: dict) -> jax.Array:
    """:math:`\\mathcal L(V; \\mu, \\xi)` for given variational parameters (one datum, jittable).

    Any ``mu`` in :math:`(0, 1)` and any ``xi`` give a lower bound on :math:`\\ln P(v)`.
    Differentiable in ``params`` (the learning objective) and in ``mu``, ``xi``.
    """
    L = model.num_hidden_layers
    dt = jnp.result_type(params["W1"], jnp.float32)
    mus = [jnp.clip(jnp.asarray(mu[f"h{k}"], dt), _EPS, 1 - _EPS) for k in range(1, L + 1)]
    xis = [jnp.asarray(xi[model.layer_names[k]], dt) for k in range(L)]
    return _bound(params, L, jnp.asarray(v).astype(dt), mus, xis)


def _optimise_xi(params, L, v, mu, xi_iterations):
    r"""Bisection on dL/dxi (separable and concave in every xi_i; maximiser in [0, 1])."""
    means = [v] + mu
    lo = [jnp.zeros_like(means[k]) for k in range(L)]
    hi = [jnp.ones_like(means[k]) for k in range(L)]

    def body(_, bounds):
        lo, hi = bounds
        mid = [(a + b) / 2 for a, b in zip(lo, hi)]
        g = [_layer(params[f"W{k + 1}"], params[f"b{k}"], means[k], means[k + 1], mid[k])[1] for k in range(L)]
        lo = [jnp.where(gi > 0, m, a) for gi, m, a in zip(g, mid, lo)]
        hi = [jnp.where(gi > 0, b, m) for gi, m, b in zip(g, mid, hi)]
        return lo, hi

    lo, hi = jax.lax.fori_loop(0, xi_iterations, body, (lo, hi))
    return [(a + b) / 2 for a, b in zip(lo, hi)]


def _own_field(params, L, mu, m):
    r"""Layer ``m``'s own :math:`\langle z \rangle` (its bias at the top): the coefficient of
    :math:`\mu_m` in its own term :math:`(\mu_m - \xi_m) \langle z_m \rangle`."""
    return params[f"b{m}"] if m == L else params[f"b{m}"] + params[f"W{m + 1}"] @ mu[m]


def _update_mu(params, L, v, mu, xi):
    r"""One monotone sweep over the hidden layers (bottom first) of the mean-field equations.

    The field of layer ``m`` (Saul et al.'s eq. 15 argument,
    :math:`\partial \mathcal L_{\rm energy} / \partial \mu_m`) is its own
    :math:`\langle z \rangle` plus the closed-form terms from its children (layer
    ``m - 1``).  The line search compares the part of :math:`\mathcal L` that depends
    on :math:`\mu_m`: the children's term, :math:`\mu_m \cdot \langle z_m \rangle`
    and the entropy of layer ``m``.
    """
    for k in range(L):
        m = k + 1
        child = [v] + mu
        W, b = params[f"W{m}"], params[f"b{m - 1}"]
        own = _own_field(params, L, mu, m)
        field = own + _layer(W, b, child[m - 1], mu[k], xi[m - 1])[2]
        target = jnp.clip(jax.nn.sigmoid(field), _EPS, 1 - _EPS)
        steps = jnp.asarray(_STEPS, mu[k].dtype)[:, None]
        cands = mu[k][None] + steps * (target - mu[k])[None]

        def local(c, W=W, b=b, x=child[m - 1], s=xi[m - 1], own=own):
            return _layer(W, b, x, c, s)[0] + jnp.dot(c, own) + _entropy([c])

        values = jax.vmap(local)(cands)
        best = jnp.argmax(values)  # ties -> the first (largest) step
        mu = mu[:k] + [cands[best]] + mu[k + 1 :]
    return mu


def _solve_one(params, L, sizes, v, mu0, num_iterations, xi_iterations, tol):
    dt = v.dtype
    mu = (
        [jnp.clip(m.astype(dt), _EPS, 1 - _EPS) for m in mu0]
        if mu0 is not None
        else [jnp.full((n,), 0.5, dt) for n in sizes[1:]]
    )

    def cond(carry):
        it, _, change = carry
        return (it < num_iterations) & (change >= tol)

    def body(carry):
        it, mu, _ = carry
        xi = _optimise_xi(params, L, v, mu, xi_iterations)
        new = _update_mu(params, L, v, mu, xi)
        change = jnp.max(jnp.stack([jnp.max(jnp.abs(a - b)) for a, b in zip(new, mu)]))
        return it + 1, new, change

    _, mu, change = jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), mu, jnp.asarray(jnp.inf, dt)))
    xi = _optimise_xi(params, L, v, mu, xi_iterations)
    return _bound(params, L, v, mu, xi), mu, xi, change


def _solve_batch(model, params, v, mu0, num_iterations, xi_iterations, tol):
    L, sizes = model.num_hidden_layers, model.layer_sizes
    return jax.vmap(lambda x, m: _solve_one(params, L, sizes, x, m, num_iterations, xi_iterations, tol))(v, mu0)


def mean_field_bound(
    model: Any,
    params: Any,
    v: Any,
    *,
    num_iterations: int = 50,
    xi_iterations: int = 20,
    tol: float = 1e-5,
    mu_init: dict | None = None,
) -> SBNBound:
    """Saul et al.'s mean-field lower bound on :math:`\\ln P(v)`, optimised over :math:`\\mu, \\xi`.

    Parameters
    ----------
    model
        A :class:`~ugm_infer.models.sbn.SigmoidBeliefNet`.
    params
        Its parameters.
    v
        Visible vector(s): ``(n_0,)`` or ``(batch, n_0)`` of 0/1.
    num_iterations
        Most mean-field sweeps (each: optimal :math:`\\xi`, then one monotone
        :math:`\\mu` update per hidden layer; see the module docstring).
    xi_iterations
        Bisection steps for every :math:`\\xi` update.
    tol
        Stop when the largest change of a mean in a sweep is below ``tol``.
    mu_init
        Optional starting means ``{"h1": ..., ...}`` (same batch shape as ``v``);
        default 0.5.

    Returns
    -------
    :class:`SBNBound` ``(bound, mu, xi)``; ``bound <= ln P(v)`` for every datum.
    Not jitted as a whole; the solve is compiled once per shape and setting.
    """
    _check_model(model)
    model.validate_params(params)
    num_iterations = check_positive_int(num_iterations, "num_iterations")
    xi_iterations = check_positive_int(xi_iterations, "xi_iterations")
    tol = check_nonnegative_float(tol, "tol")
    arr = np.asarray(v)
    single = arr.ndim == 1
    batch = check_batch(model, ("v",), {"v": arr[None] if single else arr}, argname="v")["v"]
    num = batch.shape[0]
    mu0 = None
    if mu_init is not None:
        if not isinstance(mu_init, dict) or sorted(mu_init) != sorted(model.layer_names[1:]):
            raise ValueError(f"`mu_init` must be a dict with keys {list(model.layer_names[1:])}")
        mu0 = []
        for k, name in enumerate(model.layer_names[1:], start=1):
            m = np.asarray(mu_init[name], dtype=np.float64)
            m = m[None] if single else m
            if m.shape != (num, model.layer_sizes[k]):
                raise ValueError(f"`mu_init['{name}']` has shape {m.shape}; expected {(num, model.layer_sizes[k])}")
            if not np.all((m >= 0) & (m <= 1)):
                raise ValueError(f"`mu_init['{name}']` must lie in [0, 1]")
            mu0.append(jnp.asarray(m, jnp.float32))
    fn = _solver(model, num_iterations, xi_iterations, tol, mu0 is not None)
    dt = jnp.result_type(params["W1"], jnp.float32)
    bound, mu, xi, _ = fn(params, batch.astype(dt), mu0)
    mu_d = {f"h{k}": m for k, m in enumerate(mu, start=1)}
    xi_d = {model.layer_names[k]: x for k, x in enumerate(xi)}
    if single:
        bound = bound[0]
        mu_d = {n: m[0] for n, m in mu_d.items()}
        xi_d = {n: x[0] for n, x in xi_d.items()}
    return SBNBound(bound, mu_d, xi_d)


def _solver(model, num_iterations, xi_iterations, tol, warm):
    cache = model.__dict__.setdefault("_mean_field_cache", {})
    key = (num_iterations, xi_iterations, tol, warm)
    if key not in cache:

        def run(params, v, mu0):
            if mu0 is None:
                L, sizes = model.num_hidden_layers, model.layer_sizes
                return jax.vmap(lambda x: _solve_one(params, L, sizes, x, None, num_iterations, xi_iterations, tol))(v)
            return _solve_batch(model, params, v, mu0, num_iterations, xi_iterations, tol)

        cache[key] = jax.jit(run)
    return cache[key]


# ----------------------------------------------------------------------------------
# learning
# ----------------------------------------------------------------------------------
def mean_field_learner(
    model: Any,
    optimizer: Any = None,
    *,
    num_iterations: int = 20,
    xi_iterations: int = 16,
    tol: float = 1e-4,
) -> Learner:
    """Learning by maximising the mean-field bound (Saul et al. 1996, section 4).

    Each step solves the mean-field equations for every datum of the minibatch
    (:func:`mean_field_bound`, started at :math:`\\mu = 0.5`), then moves the weights
    and biases along :math:`\\nabla_\\theta \\frac1B \\sum_n \\mathcal L(v_n; \\mu_n, \\xi_n)`
    with :math:`\\mu, \\xi` held fixed, through ``optimizer`` (default
    ``optax.sgd(0.01)``; Saul et al. used gradient ascent).

    Returns
    -------
    A :class:`~ugm_infer.learn.Learner` (``name="sbn_mean_field"``, ``visible=("v",)``);
    its ``init(rng_key, params, data=None)`` and ``step(rng_key, state, batch)`` are
    pure; ``batch = {"v": (B, n_0)}``.  :func:`ugm_infer.fit` drives it.
    """
    _check_model(model)
    s = setup(model, optimizer, visible=("v",))
    num_iterations = check_positive_int(num_iterations, "num_iterations")
    xi_iterations = check_positive_int(xi_iterations, "xi_iterations")
    tol = check_nonnegative_float(tol, "tol")
    L, sizes = model.num_hidden_layers, model.layer_sizes

    def init(rng_key, params, data) -> SBNMeanFieldState:
        del rng_key, data
        return SBNMeanFieldState(params, s.optimizer.init(params), initial_step())

    def step(rng_key, state: SBNMeanFieldState, batch) -> tuple[SBNMeanFieldState, SBNMeanFieldInfo]:
        del rng_key  # deterministic
        params = state.params
        v = batch["v"].astype(jnp.result_type(params["W1"], jnp.float32))
        # E step: the mean-field (mu, xi) of every datum, held fixed in the M step
        bounds, mu, xi, change = jax.vmap(
            lambda x: _solve_one(params, L, sizes, x, None, num_iterations, xi_iterations, tol)
        )(v)
        mu, xi = jax.lax.stop_gradient((mu, xi))

        def objective(p):
            return jnp.mean(jax.vmap(lambda x, m, s: _bound(p, L, x, m, s))(v, mu, xi))

        # M step: one optax step up the bound
        direction = jax.grad(objective)(params)
        new_params, opt_state = apply_ascent(s.optimizer, direction, state.opt_state, params)
        info = SBNMeanFieldInfo(jnp.mean(bounds), global_norm(direction), jnp.max(change))
        return SBNMeanFieldState(new_params, opt_state, state.step + 1), info

    return build(s, "sbn_mean_field", init, step)
