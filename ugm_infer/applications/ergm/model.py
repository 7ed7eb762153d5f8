"""The ERGM itself: statistics, change statistics, the energy and :func:`ergm`.

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

The edge-toggle sampler is :mod:`ugm_infer.applications.ergm.sampler`, simulation
:mod:`ugm_infer.applications.ergm.simulation`, estimation (MPLE, MCMC-MLE)
:mod:`ugm_infer.applications.ergm.estimation`.

References
----------
Frank, O. and Strauss, D. (1986). Markov graphs. JASA 81, 832-842.
Snijders, T. A. B., Pattison, P. E., Robins, G. L. and Handcock, M. S. (2006). New
specifications for exponential random graph models. Sociological Methodology 36, 99-153.
Hunter, D. R. and Handcock, M. S. (2006). Inference in curved exponential family models
for networks. JCGS 15, 565-583.
Hunter, D. R. (2007). Curved exponential family models for social networks. Social
Networks 29, 216-230.
Morris, M., Handcock, M. S. and Hunter, D. R. (2008). Specification of
exponential-family random graph models: terms and computational aspects. J. Stat.
Softw. 24(4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import check_int, check_key, check_params

__all__ = [
    "ERGM",
    "ERGMLogDensity",
    "ergm",
    "to_adjacency",
    "from_adjacency",
    "change_stats",
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
    >>> from ugm_infer.applications.ergm import ergm, from_adjacency
    >>> model = ergm(4, ("edges", "kstar2", "triangles"))
    >>> A = jnp.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]])
    >>> model.statistics(from_adjacency(A)).tolist()
    [4.0, 5.0, 1.0]
    """
    return ERGM(num_nodes, terms, gwesp_decay=gwesp_decay, gwd_decay=gwd_decay)


# ----------------------------------------------------------------------------------
# observed graphs
# ----------------------------------------------------------------------------------
def check_graphs(model: ERGM, graphs: Any, argname: str = "graphs") -> np.ndarray:
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
