"""Exponential random graph models (ERGMs) for undirected graphs.

An undirected simple graph on ``n`` nodes is the binary vector ``y`` of its
``m = n (n - 1) / 2`` dyads (variable ``"y"``: ``ui.Binary((m,))``), ordered as the
upper triangle of the adjacency matrix in row-major order (``numpy.triu_indices(n,
1)``; :func:`to_adjacency` / :func:`from_adjacency` convert).  The model is the
exponential family

.. math::  p(y \\mid \\theta) = \\exp(\\theta^\\top g(y)) / Z(\\theta), \\qquad
           E(\\theta, y) = -\\theta^\\top g(y),

``params = {"theta": (K,)}``, one natural parameter per statistic ``g_k``.
Statistics (statnet ``ergm`` names in brackets; Morris, Handcock & Hunter 2008):

``"edges"`` [``edges``]
    :math:`\\sum_{i<j} y_{ij}`.
``"kstar2"``, ``"kstar3"``, ... [``kstar(k)``]
    :math:`\\sum_i \\binom{d_i}{k}` with :math:`d_i` the degree of node ``i``.
``"triangles"`` [``triangle``]
    the number of triangles, :math:`\\tfrac16 \\operatorname{tr} A^3`.
``("gwesp", alpha)`` [``gwesp(alpha, fixed=TRUE)``]
    geometrically weighted edgewise shared partners (Snijders, Pattison, Robins &
    Handcock 2006, eq. 31; Hunter & Handcock 2006, eq. 5; Hunter 2007, eq. 14):
    :math:`e^{\\alpha} \\sum_{k \\ge 1} \\{1 - (1 - e^{-\\alpha})^k\\}\\, EP_k(y)`,
    :math:`EP_k` the number of edges whose endpoints share exactly ``k`` partners;
    equivalently :math:`e^{\\alpha} \\sum_{i<j} y_{ij} \\{1 - r^{s_{ij}}\\}` with
    :math:`r = 1 - e^{-\\alpha}` and :math:`s_{ij} = (A^2)_{ij}`.
``("gwd", alpha)`` [``gwdegree(alpha, fixed=TRUE)``]
    geometrically weighted degree (Hunter 2007, eq. 9):
    :math:`e^{\\alpha} \\sum_{k \\ge 1} \\{1 - r^k\\} D_k(y) = e^{\\alpha} \\sum_i \\{1 - r^{d_i}\\}`.

The decays are fixed (a curved family with a known curvature parameter is an
ordinary exponential family in ``theta``).

Change statistics
-----------------
:math:`\\delta_{ij} g(y) = g(y^+_{ij}) - g(y^-_{ij})` (edge ``ij`` present minus
absent, the rest as in ``y``); with :math:`d_i, d_j` the degrees and
:math:`s_{kl}` the shared-partner counts of :math:`y^-_{ij}`:

* edges: 1;  ``kstar(k)``: :math:`\\binom{d_i}{k-1} + \\binom{d_j}{k-1}` (2-stars:
  :math:`d_i + d_j`);  triangles: :math:`c_{ij} = \\sum_k A_{ik} A_{jk}`, the common
  neighbours;
* GWD: :math:`e^{\\alpha}(r^{d_i} - r^{d_i+1}) + (\\text{same for } j) = r^{d_i} + r^{d_j}`
  because :math:`e^{\\alpha}(1 - r) = 1`;
* GWESP: the new edge contributes :math:`e^{\\alpha}(1 - r^{c_{ij}})`, and every
  common neighbour ``k`` gives edges ``ik`` and ``jk`` one more shared partner, each
  adding :math:`e^{\\alpha}(r^{s} - r^{s+1}) = r^{s}`:
  :math:`\\delta = e^{\\alpha}(1 - r^{c_{ij}}) + \\sum_k A_{ik} A_{jk} (r^{s_{ik}} + r^{s_{jk}})`.

:func:`change_stats` evaluates these from an adjacency matrix in O(n) (GWESP O(n^2),
for the ``s_{ik}``); the edge-toggle kernel :data:`ergm_toggle` caches the degrees
and the shared-partner matrix :math:`A^2` and updates them in O(n) per accepted
toggle, so every toggle, GWESP included, costs O(n).

Fitting
-------
:func:`ergm_mple` (maximum pseudo-likelihood: logistic regression of the dyads on
their change statistics, Strauss & Ikeda 1990) and :func:`ergm_mcmc_mle`
(Geyer & Thompson 1992 importance-sampled likelihood ratio, iterated as statnet
does, Hunter & Handcock 2006; standard errors from the inverse Fisher information,
the covariance of the statistics under MCMC samples at the estimate).  The generic
learners of :mod:`ugm_infer.learn` accept the model too (it is an
:class:`~ugm_infer.EnergyModel`) and accept :data:`ergm_toggle` as their kernel.

References
----------
Frank, O. and Strauss, D. (1986). Markov graphs. JASA 81, 832-842.
Strauss, D. and Ikeda, M. (1990). Pseudolikelihood estimation for social networks. JASA 85, 204-212.
Geyer, C. J. and Thompson, E. A. (1992). Constrained Monte Carlo maximum likelihood for
dependent data. JRSS B 54, 657-699.
Snijders, T. A. B., Pattison, P. E., Robins, G. L. and Handcock, M. S. (2006). New
specifications for exponential random graph models. Sociological Methodology 36, 99-153.
Hunter, D. R. and Handcock, M. S. (2006). Inference in curved exponential family models
for networks. JCGS 15, 565-583.
Hunter, D. R. (2007). Curved exponential family models for social networks. Social
Networks 29, 216-230.
Hummel, R. M., Hunter, D. R. and Handcock, M. S. (2012). Improving simulation-based
algorithms for fitting ERGMs. JCGS 21, 920-939.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE with
connections to contrastive divergence. ICML (section 4.2: the triad model).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax import GenerateSamplingAPI
from blackjax.base import SamplingAlgorithm

from ugm_infer.domains import Binary
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import check_int, check_key, check_params

__all__ = [
    "ERGM",
    "ERGMLogDensity",
    "ERGMToggleState",
    "ERGMToggleInfo",
    "MPLEResult",
    "MCMCMLEResult",
    "ergm",
    "to_adjacency",
    "from_adjacency",
    "change_stats",
    "ergm_toggle",
    "ergm_simulate",
    "ergm_mple",
    "ergm_mcmc_mle",
]

_KSTAR = re.compile(r"^kstar(\d+)$")


# ----------------------------------------------------------------------------------
# terms
# ----------------------------------------------------------------------------------
def _parse_terms(terms: Any, gwesp_decay: float, gwd_decay: float) -> tuple[tuple[str, float], ...]:
    if isinstance(terms, str):
        terms = (terms,)
    try:
        items = list(terms)
    except TypeError as err:
        raise TypeError(f"`terms` must be a sequence of term names, got {type(terms).__name__}") from err
    if not items:
        raise ValueError("`terms` must name at least one statistic, e.g. ('edges', 'kstar2', 'triangles')")
    out = []
    for t in items:
        arg = None
        if isinstance(t, (tuple, list)):
            if len(t) != 2 or not isinstance(t[0], str):
                raise ValueError(f"`terms` entry {t!r} must be a name or a pair (name, decay), e.g. ('gwesp', 0.25)")
            t, arg = t
        if not isinstance(t, str):
            raise TypeError(f"`terms` entries must be strings, got {t!r}")
        name = {"triangle": "triangles", "gwdegree": "gwd", "edge": "edges"}.get(t, t)
        m = _KSTAR.match(name)
        if name == "edges" or name == "triangles":
            if arg is not None:
                raise ValueError(f"term '{t}' takes no argument, got {arg!r}")
            out.append((name, 0.0))
        elif m:
            k = int(m.group(1))
            if k < 2:
                raise ValueError(f"term '{t}': k-stars need k >= 2 (kstar1 is 2 * edges)")
            if arg is not None:
                raise ValueError(f"term '{t}' takes no argument, got {arg!r}")
            out.append((name, float(k)))
        elif name in ("gwesp", "gwd"):
            decay = (gwesp_decay if name == "gwesp" else gwd_decay) if arg is None else arg
            if isinstance(decay, bool) or not isinstance(decay, (int, float, np.integer, np.floating)):
                raise TypeError(f"the decay of term '{t}' must be a number, got {decay!r}")
            if not (np.isfinite(decay) and decay >= 0):
                raise ValueError(f"the decay of term '{t}' must be finite and >= 0, got {decay!r}")
            out.append((name, float(decay)))
        else:
            raise ValueError(
                f"unknown ERGM term {t!r}; known: 'edges', 'kstar<k>' (k >= 2), 'triangles', 'gwesp', 'gwd' "
                "(the last two optionally as (name, decay))"
            )
    if len(set(out)) != len(out):
        raise ValueError(f"`terms` lists a statistic more than once: {items}")
    return tuple(out)


def _label(name: str, arg: float) -> str:
    if name == "gwesp":
        return f"gwesp.fixed.{arg:g}"
    if name == "gwd":
        return f"gwdeg.fixed.{arg:g}"
    return name


def _binom_float(d: jax.Array, k: int) -> jax.Array:
    """:math:`\\binom{d}{k}` for float ``d >= 0`` (exact for integer-valued ``d``)."""
    out = jnp.ones_like(d)
    for r in range(k):
        out = out * (d - r) / (r + 1)
    return jnp.where(d >= k, out, 0.0)


# ----------------------------------------------------------------------------------
# adjacency helpers
# ----------------------------------------------------------------------------------
def _num_nodes_from_dyads(m: int) -> int:
    n = int(round((1 + math.sqrt(1 + 8 * m)) / 2))
    if n * (n - 1) // 2 != m:
        raise ValueError(f"{m} dyads is not n(n-1)/2 for any number of nodes n")
    return n


def to_adjacency(y: Any, num_nodes: int | None = None) -> jax.Array:
    """Symmetric ``(..., n, n)`` adjacency matrices (zero diagonal) from dyad vectors ``(..., m)``.

    The dyads are the upper triangle in row-major order (``numpy.triu_indices(n, 1)``);
    the dtype of ``y`` is kept.  Works under ``jit``/``vmap``.
    """
    y = jnp.asarray(y)
    m = y.shape[-1]
    n = _num_nodes_from_dyads(m) if num_nodes is None else int(num_nodes)
    if n * (n - 1) // 2 != m:
        raise ValueError(f"`y` has {m} dyads; {n} nodes need {n * (n - 1) // 2}")
    iu, ju = np.triu_indices(n, 1)
    A = jnp.zeros(y.shape[:-1] + (n, n), y.dtype)
    A = A.at[..., iu, ju].set(y)
    return A.at[..., ju, iu].set(y)


def from_adjacency(adjacency: Any) -> jax.Array:
    """Dyad vectors ``(..., n(n-1)/2)`` (upper triangle, row-major) from ``(..., n, n)`` matrices.

    Raises ``ValueError`` for a concrete matrix that is not square, not symmetric,
    has a non-zero diagonal or entries outside {0, 1}.
    """
    A = adjacency
    shape = np.shape(A)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"`adjacency` must have shape (..., n, n), got {shape}")
    n = shape[-1]
    if not isinstance(A, jax.core.Tracer):
        arr = np.asarray(A)
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError("`adjacency` must contain only 0 and 1")
        if not np.array_equal(arr, np.swapaxes(arr, -1, -2)):
            raise ValueError("`adjacency` must be symmetric (undirected graphs)")
        if np.any(np.diagonal(arr, axis1=-2, axis2=-1) != 0):
            raise ValueError("`adjacency` must have a zero diagonal (no self-loops)")
    iu, ju = np.triu_indices(n, 1)
    return jnp.asarray(A)[..., iu, ju]


# ----------------------------------------------------------------------------------
# statistics and change statistics
# ----------------------------------------------------------------------------------
def _statistics(terms, A: jax.Array) -> jax.Array:
    """``g(y)`` from one float adjacency matrix."""
    deg = A.sum(-1)
    sp = A @ A
    out = []
    for name, arg in terms:
        if name == "edges":
            out.append(0.5 * A.sum())
        elif name.startswith("kstar"):
            out.append(_binom_float(deg, int(arg)).sum())
        elif name == "triangles":
            out.append(jnp.sum(A * sp) / 6.0)
        elif name == "gwesp":
            r = 1.0 - math.exp(-arg)
            out.append(math.exp(arg) * 0.5 * jnp.sum(A * (1.0 - jnp.power(r, sp))))
        elif name == "gwd":
            r = 1.0 - math.exp(-arg)
            out.append(math.exp(arg) * jnp.sum(1.0 - jnp.power(r, deg)))
    return jnp.stack(out)


def _change_core(terms, a_i, a_j, a_ij, deg_i, deg_j, sp_i, sp_j, dtype):
    """Change statistics for dyad ``ij`` from rows of ``A`` and (optionally) ``A^2``.

    ``a_i, a_j``: rows ``i`` and ``j`` of the adjacency matrix (``a_ij`` its ``ij``
    entry); ``deg_i, deg_j`` the degrees; ``sp_i, sp_j`` rows ``i``, ``j`` of
    ``A^2`` (only read for GWESP).  All counts may include edge ``ij``; it is
    removed here, so the result is the same whether ``ij`` is present or not.
    """
    a_i = a_i.astype(dtype)
    a_j = a_j.astype(dtype)
    a_ij = a_ij.astype(dtype)
    d_i = deg_i.astype(dtype) - a_ij
    d_j = deg_j.astype(dtype) - a_ij
    common = a_i * a_j  # A_ik A_jk (zero at k = i, j: zero diagonal)
    c_ij = common.sum()
    out = []
    for name, arg in terms:
        if name == "edges":
            out.append(jnp.ones((), dtype))
        elif name.startswith("kstar"):
            k = int(arg)
            out.append(_binom_float(d_i, k - 1) + _binom_float(d_j, k - 1))
        elif name == "triangles":
            out.append(c_ij)
        elif name == "gwesp":
            r = 1.0 - math.exp(-arg)
            # shared partners of ik and jk without edge ij: remove j (resp. i) as a partner
            s_ik = sp_i.astype(dtype) - a_ij * a_j
            s_jk = sp_j.astype(dtype) - a_ij * a_i
            others = jnp.sum(common * (jnp.power(r, s_ik) + jnp.power(r, s_jk)))
            out.append(math.exp(arg) * (1.0 - jnp.power(r, c_ij)) + others)
        elif name == "gwd":
            r = 1.0 - math.exp(-arg)
            out.append(jnp.power(r, d_i) + jnp.power(r, d_j))
    return jnp.stack(out).astype(dtype)


def change_stats(params: Any, adjacency: Any, i: Any, j: Any, *, model: ERGM | None = None) -> jax.Array:
    """Change statistics :math:`\\delta_{ij} g(y) = g(y^+_{ij}) - g(y^-_{ij})` of dyad ``ij``.

    Prefer the bound method :meth:`ERGM.change_stats`; this function needs
    ``model=``.  With ``params=None`` returns the ``(K,)`` vector of change
    statistics; with params returns :math:`\\theta^\\top \\delta_{ij} g(y)`, the
    conditional log-odds of edge ``ij`` given the rest of the graph.  The
    ``ij`` entry of ``adjacency`` is ignored (the result is the same whether the
    edge is present).  Cost O(n) (GWESP O(n^2); the kernel caches ``A^2`` to make it
    O(n)).  Jittable in ``adjacency``, ``i``, ``j`` and ``params``.
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM (ui.models.ergm.ergm(...)), got {type(model).__name__}")
    return model.change_stats(params, adjacency, i, j)


# ----------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------
class ERGMLogDensity:
    """``y -> -beta E(params, y)`` that also tells the edge-toggle kernel its natural parameters.

    Returned by :meth:`ERGM.logdensity_fn`.  Calling it evaluates the log-density
    like any ``logdensity_fn``; :data:`ergm_toggle` reads ``natural_params`` (``beta
    * theta``) and ``terms`` to compute conditional log-odds from change statistics
    in O(n) instead of two full energy evaluations.
    """

    def __init__(self, fn: Callable, natural_params: jax.Array, terms: tuple):
        self._fn = fn
        self.natural_params = natural_params
        self.terms = terms

    def __call__(self, state):
        return self._fn(state)


class ERGM(EnergyModel):
    """Exponential random graph model on ``num_nodes`` nodes (see the module docstring).

    Variable ``"y"``: ``Binary((m,))`` with ``m = n(n-1)/2`` dyads; params
    ``{"theta": (K,)}`` with ``K = len(terms)``.

    Attributes
    ----------
    num_nodes, num_dyads
        ``n`` and ``m``.
    terms
        Normalised terms, a tuple of ``(name, argument)`` (the ``k`` of a k-star, the
        decay of GWESP / GWD, 0 otherwise).
    term_names
        statnet-style labels (``"edges"``, ``"kstar2"``, ``"triangles"``,
        ``"gwesp.fixed.0.25"``, ``"gwdeg.fixed.0.25"``).
    dyads
        ``(m, 2)`` int32 array of the node pairs ``(i, j)``, ``i < j``.
    """

    def __init__(self, num_nodes: int, terms: Any = ("edges", "kstar2", "triangles"), *, gwesp_decay=0.25, gwd_decay=0.25):
        n = check_int(num_nodes, "num_nodes")
        if n < 2:
            raise ValueError(f"`num_nodes` must be >= 2 (a graph needs a dyad), got {num_nodes!r}")
        self.num_nodes = n
        self.num_dyads = n * (n - 1) // 2
        self.terms = _parse_terms(terms, gwesp_decay, gwd_decay)
        self.term_names = tuple(_label(*t) for t in self.terms)
        iu, ju = np.triu_indices(n, 1)
        self.dyads = np.stack([iu, ju], 1).astype(np.int32)
        self.dyads.setflags(write=False)
        m, terms_ = self.num_dyads, self.terms
        if all(name == "edges" for name, _ in terms_):
            blocks = [{"y": np.arange(m)}]  # dyad-independent: one block
        else:
            blocks = [{"y": np.array([k])} for k in range(m)]

        def energy(params, state):
            theta = params["theta"]
            A = to_adjacency(state["y"].astype(theta.dtype), n)
            return -jnp.dot(theta, _statistics(terms_, A))

        super().__init__(
            energy,
            {"y": Binary((m,))},
            blocks,
            multilinear=False,
            validate_params=self._check_params,
            name=f"ergm({n}; {' + '.join(self.term_names)})",
        )

    @property
    def num_terms(self) -> int:
        return len(self.terms)

    def _check_params(self, params: Any) -> None:
        check_params(self.name, params, {"theta": (self.num_terms,)}, ["(num_terms,)"])

    def init_params(self, rng_key: jax.Array, scale: float = 0.0, dtype: Any = jnp.float32) -> dict:
        """``{"theta": scale * N(0, 1)}`` (zeros by default: the uniform distribution over graphs)."""
        check_key(rng_key)
        return {"theta": (scale * jax.random.normal(rng_key, (self.num_terms,))).astype(dtype)}

    def params_from_theta(self, theta: Any, dtype: Any = jnp.float32) -> dict:
        """``{"theta": theta}`` after checking its length."""
        arr = np.asarray(theta, dtype=np.float64)
        if arr.shape != (self.num_terms,):
            raise ValueError(f"`theta` must have shape ({self.num_terms},) for terms {self.term_names}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("`theta` contains NaN or inf")
        return {"theta": jnp.asarray(arr, dtype)}

    def logdensity_fn(self, params: Any, beta: Any = 1.0) -> ERGMLogDensity:
        fn = super().logdensity_fn(params, beta)
        theta = jnp.asarray(params["theta"])
        return ERGMLogDensity(fn, jnp.asarray(beta, theta.dtype) * theta, self.terms)

    # ---------------------------------------------------------------------------
    def statistics(self, y: Any, dtype: Any = jnp.float32) -> jax.Array:
        """``g(y)``: ``(..., K)`` statistics of dyad vectors ``y`` of shape ``(..., m)``."""
        y = jnp.asarray(y)
        if y.ndim < 1 or y.shape[-1] != self.num_dyads:
            raise ValueError(f"`y` must have shape (..., {self.num_dyads}) for {self.num_nodes} nodes, got {y.shape}")
        flat = y.reshape((-1, self.num_dyads)).astype(dtype)
        stats = jax.vmap(lambda v: _statistics(self.terms, to_adjacency(v, self.num_nodes)))(flat)
        return stats.reshape(y.shape[:-1] + (self.num_terms,))

    def change_stats(self, params: Any, adjacency: Any, i: Any, j: Any) -> jax.Array:
        """Change statistics of dyad ``ij`` in graph ``adjacency`` (see :func:`change_stats`)."""
        A = jnp.asarray(adjacency)
        n = self.num_nodes
        if A.shape != (n, n):
            raise ValueError(f"`adjacency` must have shape ({n}, {n}), got {A.shape}")
        for name, v in (("i", i), ("j", j)):
            if not isinstance(v, jax.core.Tracer):
                if isinstance(v, bool) or not np.issubdtype(np.asarray(v).dtype, np.integer) or np.ndim(v) != 0:
                    raise TypeError(f"`{name}` must be an integer node index, got {v!r}")
                if not 0 <= int(v) < n:
                    raise ValueError(f"`{name}` must be a node index in [0, {n}), got {int(v)}")
        if not isinstance(i, jax.core.Tracer) and not isinstance(j, jax.core.Tracer) and int(i) == int(j):
            raise ValueError(f"`i` and `j` must differ (no self-loops), got {int(i)} twice")
        dtype = jnp.float32 if params is None else jnp.asarray(params["theta"]).dtype
        Af = A.astype(dtype)
        a_i, a_j = Af[i], Af[j]
        needs_sp = any(name == "gwesp" for name, _ in self.terms)
        sp_i = (a_i @ Af) if needs_sp else a_i
        sp_j = (a_j @ Af) if needs_sp else a_j
        delta = _change_core(self.terms, a_i, a_j, Af[i, j], a_i.sum(), a_j.sum(), sp_i, sp_j, dtype)
        if params is None:
            return delta
        if not isinstance(params["theta"], jax.core.Tracer):
            self.validate_params(params)
        return jnp.dot(jnp.asarray(params["theta"]), delta)

    def all_change_stats(self, y: Any, dtype: Any = jnp.float32) -> jax.Array:
        """Change statistics of every dyad: ``(..., m, K)`` for dyad vectors ``(..., m)`` (the MPLE design)."""
        y = jnp.asarray(y)
        if y.ndim < 1 or y.shape[-1] != self.num_dyads:
            raise ValueError(f"`y` must have shape (..., {self.num_dyads}), got {y.shape}")
        flat = y.reshape((-1, self.num_dyads)).astype(dtype)
        iu, ju = jnp.asarray(self.dyads[:, 0]), jnp.asarray(self.dyads[:, 1])
        terms, n = self.terms, self.num_nodes

        def one_graph(v):
            A = to_adjacency(v, n)
            deg = A.sum(-1)
            sp = A @ A

            def one(i, j):
                return _change_core(terms, A[i], A[j], A[i, j], deg[i], deg[j], sp[i], sp[j], dtype)

            return jax.vmap(one)(iu, ju)

        out = jax.jit(jax.vmap(one_graph))(flat)
        return out.reshape(y.shape[:-1] + (self.num_dyads, self.num_terms))


def ergm(
    num_nodes: int, terms: Any = ("edges", "kstar2", "triangles"), *, gwesp_decay: float = 0.25, gwd_decay: float = 0.25
) -> ERGM:
    """An exponential random graph model over undirected graphs on ``num_nodes`` nodes.

    .. math::  p(y \\mid \\theta) \\propto \\exp(\\theta^\\top g(y)), \\qquad E = -\\theta^\\top g(y)

    Parameters
    ----------
    num_nodes
        Number of nodes ``n >= 2``; the variable ``"y"`` holds the ``n(n-1)/2`` dyads.
    terms
        Statistic names in order: ``"edges"``, ``"kstar2"`` (``"kstar3"``, ...),
        ``"triangles"`` (alias ``"triangle"``), ``"gwesp"``, ``"gwd"`` (alias
        ``"gwdegree"``); GWESP / GWD may be given as ``("gwesp", decay)``.
    gwesp_decay, gwd_decay
        Fixed decays used when GWESP / GWD are named without one (statnet's
        ``gwesp(decay, fixed=TRUE)``).

    Returns
    -------
    An :class:`ERGM` with params ``{"theta": (len(terms),)}``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from ugm_infer.models.ergm import ergm, from_adjacency
    >>> model = ergm(4, ("edges", "kstar2", "triangles"))
    >>> A = jnp.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]])
    >>> model.statistics(from_adjacency(A)).tolist()
    [4.0, 5.0, 1.0]
    """
    return ERGM(num_nodes, terms, gwesp_decay=gwesp_decay, gwd_decay=gwd_decay)


# ----------------------------------------------------------------------------------
# the edge-toggle kernel
# ----------------------------------------------------------------------------------
class ERGMToggleState(NamedTuple):
    """State of one edge-toggle chain.

    position
        ``{"y": (m,)}``: the dyad vector (what learners and SMC read).
    adjacency
        ``(n, n)`` int32 symmetric adjacency matrix of ``y`` (cached).
    degrees
        ``(n,)`` int32 node degrees (cached).
    shared_partners
        ``(n, n)`` int32 matrix :math:`A^2` (shared-partner counts; its diagonal is
        the degrees), cached for GWESP change statistics.
    """

    position: dict
    adjacency: jax.Array
    degrees: jax.Array
    shared_partners: jax.Array


class ERGMToggleInfo(NamedTuple):
    """Per-step diagnostics.

    acceptance_rate
        Mean over the toggles of the probability that the dyad changed (Gibbs: the
        conditional probability of the other value; Metropolis: the acceptance
        probability of the flip).
    num_changed
        Number of dyads whose value changed during the step.
    """

    acceptance_rate: jax.Array
    num_changed: jax.Array


def toggle_init(position: dict, logdensity_fn: Callable | None = None) -> ERGMToggleState:
    """Build the cached adjacency matrix, degrees and :math:`A^2` of a position ``{"y": (m,)}``."""
    del logdensity_fn
    if not isinstance(position, dict) or "y" not in position:
        raise ValueError("`position` must be a dict {'y': (num_dyads,)} (an ERGM state)")
    y = jnp.asarray(position["y"])
    A = to_adjacency(y.astype(jnp.int32))
    return ERGMToggleState(dict(position), A, A.sum(-1), A @ A)


def toggle_build_kernel(model: ERGM, scan: str = "systematic", update: str = "gibbs", num_toggles: int | None = None):
    """Edge-toggle kernel ``kernel(rng_key, state, logdensity_fn) -> (state, info)``.

    Each toggle visits one dyad ``ij`` and, with :math:`\\eta_{ij} = \\log p(y^+_{ij})
    - \\log p(y^-_{ij})` (the conditional log-odds of the edge),

    ``update="gibbs"``
        redraws :math:`y_{ij} \\sim \\mathrm{Bernoulli}(\\sigma(\\eta_{ij}))` (heat bath);
    ``update="metropolis"``
        proposes the flip and accepts with probability :math:`\\min(1, e^{\\pm\\eta_{ij}})`
        (``+`` when adding the edge).

    Both leave :math:`p(y)` invariant at every toggle, so any scan order does.
    When ``logdensity_fn`` is an :class:`ERGMLogDensity` for this model's terms (what
    :meth:`ERGM.logdensity_fn` returns, and so what every learner passes),
    :math:`\\eta_{ij} = \\beta\\theta^\\top \\delta_{ij} g(y)` from the cached degrees and
    :math:`A^2` in O(n); otherwise (an arbitrary density, e.g. a tempered SMC
    bridge) it is computed from two log-density evaluations (exact, slower).
    After a toggle the caches (adjacency, degrees) are updated in O(1) and, for
    models with GWESP, the shared-partner matrix :math:`A^2` in O(n); otherwise
    :math:`A^2` is recomputed once at the end of the step (O(n) amortised per toggle).

    Parameters
    ----------
    model
        The :class:`ERGM` (fixes ``n`` and the terms).
    scan
        ``"systematic"`` (dyads in order) or ``"random"`` (uniformly random dyads).
    update
        ``"gibbs"`` or ``"metropolis"``.
    num_toggles
        Toggles per step; default one sweep, ``m = n(n-1)/2``.
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM (ui.models.ergm.ergm(...)), got {type(model).__name__}")
    if scan not in ("systematic", "random"):
        raise ValueError(f"`scan` must be 'systematic' or 'random', got {scan!r}")
    if update not in ("gibbs", "metropolis"):
        raise ValueError(f"`update` must be 'gibbs' or 'metropolis', got {update!r}")
    m = model.num_dyads
    num_toggles = m if num_toggles is None else check_int(num_toggles, "num_toggles")
    dyads = jnp.asarray(model.dyads)
    terms = model.terms
    # only GWESP change statistics read A^2 during a step; without GWESP, and on the
    # generic path, A^2 is refreshed once at the end of the step instead
    needs_sp_fast = any(name == "gwesp" for name, _ in terms)

    def kernel(rng_key, state: ERGMToggleState, logdensity_fn: Callable):
        fast = isinstance(logdensity_fn, ERGMLogDensity) and logdensity_fn.terms == terms
        needs_sp = fast and needs_sp_fast
        if fast:
            lin = logdensity_fn.natural_params
            dtype = lin.dtype
        else:
            dtype = jnp.float32
        y_dtype = state.position["y"].dtype
        key_sites, key_toggles = jax.random.split(rng_key)
        if scan == "systematic":
            sites = jnp.arange(num_toggles) % m
        else:
            sites = jax.random.randint(key_sites, (num_toggles,), 0, m)

        def toggle(carry, inp):
            y, A, deg, sp = carry
            k, key = inp
            i, j = dyads[k, 0], dyads[k, 1]
            a_ij = A[i, j]
            if fast:
                delta = _change_core(terms, A[i], A[j], a_ij, deg[i], deg[j], sp[i], sp[j], dtype)
                eta = jnp.dot(lin, delta)
            else:
                eta = logdensity_fn({"y": y.at[k].set(jnp.ones((), y_dtype))}) - logdensity_fn(
                    {"y": y.at[k].set(jnp.zeros((), y_dtype))}
                )
            u = jax.random.uniform(key, dtype=jnp.float32)
            if update == "gibbs":
                p_one = jax.nn.sigmoid(eta)
                new = (u < p_one).astype(jnp.int32)
                p_change = jnp.where(a_ij == 1, 1.0 - p_one, p_one)
            else:
                log_ratio = jnp.where(a_ij == 1, -eta, eta)
                p_change = jnp.exp(jnp.minimum(log_ratio, 0.0))
                new = jnp.where(u < p_change, 1 - a_ij, a_ij)
            d = new - a_ij  # -1, 0 or +1
            # A^2 update for A' = A + d (e_i e_j^T + e_j e_i^T), with the old A:
            # A'^2 = A^2 + d (A E + E A) + d^2 (e_i e_i^T + e_j e_j^T)
            if needs_sp:
                row_i, row_j = A[i], A[j]
                sp = sp.at[i, :].add(d * row_j).at[j, :].add(d * row_i)
                sp = sp.at[:, i].add(d * row_j).at[:, j].add(d * row_i)
                sp = sp.at[i, i].add(d * d).at[j, j].add(d * d)
            A = A.at[i, j].set(new).at[j, i].set(new)
            deg = deg.at[i].add(d).at[j].add(d)
            y = y.at[k].set(new.astype(y_dtype))
            return (y, A, deg, sp), (p_change.astype(jnp.float32), d != 0)

        carry = (state.position["y"], state.adjacency, state.degrees, state.shared_partners)
        keys = jax.random.split(key_toggles, num_toggles)
        (y, A, deg, sp), (p, changed) = jax.lax.scan(toggle, carry, (sites, keys))
        if not needs_sp:
            # no toggle read A^2: refresh it once per step (O(n^3) per O(n^2) toggles,
            # O(n) amortised) instead of four O(n) scatters per toggle
            sp = A @ A
        y0 = state.position["y"]
        info = ERGMToggleInfo(jnp.mean(p), jnp.sum(y != y0).astype(jnp.int32))
        del changed
        new_position = dict(state.position)
        new_position["y"] = y
        return ERGMToggleState(new_position, A, deg, sp), info

    return kernel


def toggle_as_top_level_api(
    model: ERGM, logdensity_fn: Callable, scan: str = "systematic", update: str = "gibbs", num_toggles: int | None = None
) -> SamplingAlgorithm:
    """``SamplingAlgorithm(init, step)`` bound to ``logdensity_fn`` (BlackJAX top-level API)."""
    kernel = toggle_build_kernel(model, scan, update, num_toggles)

    def init_fn(position, rng_key=None):
        del rng_key
        return toggle_init(position, logdensity_fn)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)


#: The edge-toggle kernel in BlackJAX style: ``ergm_toggle.init(position)``,
#: ``ergm_toggle.build_kernel(model, scan, update, num_toggles)``, and
#: ``ergm_toggle(model, logdensity_fn, ...)`` for a ``SamplingAlgorithm``.  Pass it
#: as ``kernel=`` to any learner of :mod:`ugm_infer.learn`.
ergm_toggle = GenerateSamplingAPI(toggle_as_top_level_api, toggle_init, toggle_build_kernel)


# ----------------------------------------------------------------------------------
# simulation
# ----------------------------------------------------------------------------------
def _check_graphs(model: ERGM, graphs: Any, argname: str = "graphs") -> np.ndarray:
    """Graphs as ``(N, m)`` 0/1 int8: accepts ``(m,)``, ``(N, m)``, ``(n, n)``, ``(N, n, n)`` or ``{"y": ...}``."""
    if isinstance(graphs, dict):
        if set(graphs) != {"y"}:
            raise ValueError(f"`{argname}` as a dict must be {{'y': (N, {model.num_dyads})}}, got keys {sorted(graphs)}")
        graphs = graphs["y"]
    arr = np.asarray(graphs)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"`{argname}` must be numeric 0/1 arrays, got dtype {arr.dtype}")
    n, m = model.num_nodes, model.num_dyads
    if arr.ndim >= 2 and arr.shape[-2:] == (n, n) and not (arr.ndim == 2 and n * (n - 1) // 2 == n):
        arr = np.asarray(from_adjacency(arr.reshape((-1, n, n))))
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != m:
        raise ValueError(
            f"`{argname}` must have shape (N, {m}) dyad vectors or (N, {n}, {n}) adjacency matrices, got {np.shape(graphs)}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"`{argname}` is empty")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"`{argname}` must contain only 0 and 1")
    return arr.astype(np.int8)


def ergm_simulate(
    model: ERGM,
    rng_key: jax.Array,
    params: Any,
    num_samples: int,
    *,
    num_chains: int = 1,
    burn_in: int = 100,
    thin: int = 1,
    init: Any = None,
    update: str = "gibbs",
) -> dict:
    """Draw graphs with :data:`ergm_toggle` (systematic sweeps).

    Runs ``num_chains`` chains (vmapped) from ``init`` (``(num_chains, m)``; default
    the empty graph), ``burn_in`` sweeps, then records ``num_samples`` graphs per
    chain, ``thin`` sweeps apart.

    Returns
    -------
    ``{"y": (num_chains, num_samples, m) int8, "stats": (num_chains, num_samples, K),
    "acceptance_rate": (num_chains,)}`` (numpy).
    """
    if not isinstance(model, ERGM):
        raise TypeError(f"`model` must be an ERGM, got {type(model).__name__}")
    check_key(rng_key)
    model.validate_params(params)
    num_samples = check_int(num_samples, "num_samples")
    num_chains = check_int(num_chains, "num_chains")
    thin = check_int(thin, "thin")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValueError(f"`burn_in` must be an int >= 0, got {burn_in!r}")
    m = model.num_dyads
    if init is None:
        y0 = np.zeros((num_chains, m), np.int8)
    else:
        y0 = _check_graphs(model, init, "init")
        if y0.shape[0] != num_chains:
            raise ValueError(f"`init` has {y0.shape[0]} graphs but `num_chains` is {num_chains}")
    return _simulate_jit(model, update, int(num_samples), int(burn_in), int(thin))(rng_key, params, jnp.asarray(y0))


_SIM_CACHE: dict = {}


def _simulate_jit(model: ERGM, update: str, num_samples: int, burn_in: int, thin: int):
    key = (id(model), update, num_samples, burn_in, thin)
    if key in _SIM_CACHE and _SIM_CACHE[key][0] is model:
        return _SIM_CACHE[key][1]
    kernel = toggle_build_kernel(model, "systematic", update)

    @jax.jit
    def run(rng_key, params, y0):
        logdensity = model.logdensity_fn(params)

        def chain(key, y):
            state = toggle_init({"y": y})
            key_burn, key_draw = jax.random.split(key)

            def step(s, k):
                s, info = kernel(k, s, logdensity)
                return s, info.acceptance_rate

            if burn_in:
                state, _ = jax.lax.scan(step, state, jax.random.split(key_burn, burn_in))

            def draw(s, k):
                s, acc = jax.lax.scan(step, s, jax.random.split(k, thin))
                return s, (s.position["y"], acc.mean())

            _, (ys, acc) = jax.lax.scan(draw, state, jax.random.split(key_draw, num_samples))
            return ys, acc.mean()

        ys, acc = jax.vmap(chain)(jax.random.split(rng_key, y0.shape[0]), y0)
        stats = model.statistics(ys.reshape((-1, ys.shape[-1])), params["theta"].dtype)
        return ys.astype(jnp.int8), stats.reshape(ys.shape[:2] + (-1,)), acc

    def wrapped(rng_key, params, y0):
        ys, stats, acc = run(rng_key, params, y0)
        return {"y": np.asarray(ys), "stats": np.asarray(stats), "acceptance_rate": np.asarray(acc)}

    _SIM_CACHE[key] = (model, wrapped)
    return wrapped


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
    y = _check_graphs(model, graphs)
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
    y = _check_graphs(model, graphs)
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
