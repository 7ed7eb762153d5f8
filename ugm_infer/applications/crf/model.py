"""Conditional random fields: energies :math:`E(\\theta, x, y)` whose potentials depend on inputs.

A CRF (Lafferty, McCallum & Pereira 2001) is a family of discrete models indexed by an
input :math:`x` (continuous features, images, ...):

.. math::  p(y \\mid x, \\theta) = \\exp(-E(\\theta, x, y)) / Z(\\theta, x).

:class:`CRF` is an :class:`~ugm_infer.EnergyModel` over the labels :math:`y` whose
parameters are the **conditioned parameters** ``model.condition(theta, x) ==
{"theta": theta, "x": x}``: one input and the learnable weights.  So every kernel
(Gibbs, Metropolis, tempered transitions, parallel tempering, SMC), exact enumeration
(:mod:`ugm_infer.exact`) and the prediction functions of :mod:`ugm_infer.applications.crf.predict`
work on :math:`p(y \\mid x, \\theta)` unchanged::

    cp = model.condition(theta, x)              # one input
    kernel(rng_key, state, model.logdensity_fn(cp))
    ui.exact.marginals(model, cp)

Batches of inputs are a leading axis of ``x`` handled with :func:`jax.vmap`; the
learners of :mod:`ugm_infer.learn.conditional` keep one particle set per training
input.  ``model.init_params`` returns the learnable :math:`\\theta` only.

Built-in CRFs (all binary labels, multilinear energies, declared blocks):

``pairwise_crf(shape, edges, num_node_features, num_edge_features, edge_potential="agree")``
    labels ``y`` Binary ``shape`` (``n`` sites, flat row-major), input
    ``x = {"node": (n, F_n), "edge": (m, F_e)}`` (one feature vector per node and per
    edge), ``theta = {"node": (F_n,), "edge": (F_e,)}`` shared by all nodes / edges:

    .. math::  E(\\theta, x, y) = -\\sum_i y_i\\, \\theta_n^\\top x^{\\rm node}_i
               - \\sum_{e=(i,j)} \\phi(y_i, y_j)\\, \\theta_e^\\top x^{\\rm edge}_e,

    with :math:`\\phi(y_i, y_j) = [y_i = y_j]` (``"agree"``, a Potts / agreement
    potential) or :math:`y_i y_j` (``"product"``).
``grid_crf(height, width, num_node_features=2, num_edge_features=2)``
    ``pairwise_crf`` on the open 4-neighbour grid, ``y`` of shape ``(height, width)``;
    :func:`difference_features` makes the features of Asuncion et al. (2010, sec. 4.3)
    from an observed image :math:`o`: node :math:`[1, o_i]`, edge
    :math:`[1, |o_i - o_j|]`.
``multilabel_crf(num_labels, num_features)``
    labels ``y`` Binary ``(L,)``, input ``x`` ``(D,)``,
    ``theta = {"W": (D, L), "b": (L,), "V": (L, L)}`` (``V`` symmetric, zero diagonal):
    :math:`E = -y^\\top (W^\\top x + b) - \\tfrac12 y^\\top V y`, node potentials linear
    in the features and a coupling between every pair of labels (the multi-label CRF
    of the PSMC paper, sec. 7.1).

References
----------
Lafferty, J., McCallum, A. and Pereira, F. (2001). Conditional random fields:
probabilistic models for segmenting and labeling sequence data. ICML.
Asuncion, A., Liu, Q., Ihler, A. and Smyth, P. (2010). Particle filtered MCMC-MLE with
connections to contrastive divergence. ICML (sec. 4.3, CRF denoising).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Binary, Domain
from ugm_infer.model import EnergyModel
from ugm_infer.models._common import (
    check_edges,
    check_int,
    check_key,
    check_scale,
    colour_blocks,
    spin_or_binary,
    symmetric_offdiagonal,
)
from ugm_infer.models.lattice import lattice_edges

__all__ = [
    "CRF",
    "crf",
    "pairwise_crf",
    "grid_crf",
    "multilabel_crf",
    "difference_features",
    "RESERVED_NAMES",
]

#: Keys of a CRF data dict that are not label variables: the inputs and minibatch indices.
RESERVED_NAMES = ("x", "index")

Shapes = Any  # a tuple of ints, or a dict {name: tuple of ints}


def _check_input_shapes(input_shapes: Any) -> Shapes:
    def one(shape, where):
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1 for s in shape
        ):
            raise ValueError(f"`input_shapes{where}` must be a tuple of positive ints, got {shape!r}")
        return tuple(int(s) for s in shape)

    if isinstance(input_shapes, Mapping):
        if not input_shapes:
            raise ValueError("`input_shapes` must be a shape tuple or a non-empty dict {name: shape}")
        return {str(k): one(v, f"['{k}']") for k, v in input_shapes.items()}
    return one(input_shapes, "")


class CRF(EnergyModel):
    """A conditional random field :math:`p(y \\mid x, \\theta)` (see the module docstring).

    As an :class:`~ugm_infer.EnergyModel` its variables are the labels and its params
    are ``{"theta": theta, "x": x}`` (:meth:`condition`) for ONE input ``x``.

    Attributes
    ----------
    conditional_energy_fn
        ``fn(theta, x, y_state) -> scalar``.
    input_shapes
        Shape of one input: a tuple (``x`` an array) or ``{name: shape}`` (``x`` a dict).
    theta_shapes
        ``{name: shape}`` of the learnable parameters, or ``None`` if not declared.
    """

    def __init__(
        self,
        energy_fn: Callable,
        variables: Mapping[str, Domain],
        input_shapes: Any,
        *,
        blocks: Any = None,
        multilinear: bool | None = None,
        theta_shapes: Mapping[str, tuple[int, ...]] | None = None,
        validate_theta: Callable | None = None,
        name: str = "crf",
    ):
        if not callable(energy_fn):
            raise TypeError(f"`energy_fn` must be callable, got {type(energy_fn).__name__}")
        if isinstance(variables, Mapping):
            bad = [n for n in variables if n in RESERVED_NAMES]
            if bad:
                raise ValueError(
                    f"`variables` may not be named {bad}: {list(RESERVED_NAMES)} are reserved by CRF data dicts"
                )
        self.conditional_energy_fn = energy_fn
        self.input_shapes = _check_input_shapes(input_shapes)
        if theta_shapes is not None:
            if not isinstance(theta_shapes, Mapping):
                raise TypeError(f"`theta_shapes` must be a dict {{name: shape}}, got {type(theta_shapes).__name__}")
            theta_shapes = {k: tuple(int(s) for s in v) for k, v in theta_shapes.items()}
        self.theta_shapes = theta_shapes
        if validate_theta is not None and not callable(validate_theta):
            raise TypeError(f"`validate_theta` must be callable or None, got {type(validate_theta).__name__}")
        self._validate_theta_fn = validate_theta

        def conditioned_energy(cp, state):
            return energy_fn(cp["theta"], cp["x"], state)

        super().__init__(
            conditioned_energy,
            variables,
            blocks,
            multilinear=multilinear,
            validate_params=self._check_conditioned,
            name=name,
        )

    # ------------------------------------------------------------------------------
    # parameters and inputs
    # ------------------------------------------------------------------------------
    def condition(self, theta: Any, x: Any) -> dict:
        """The :class:`~ugm_infer.EnergyModel` params of :math:`p(y \\mid x, \\theta)`: ``{"theta": theta, "x": x}``.

        ``x`` is ONE input (no batch axis); vmap over a batch of inputs.  Concrete
        arguments are validated (``ValueError`` naming ``theta`` or ``x``).
        """
        if _concrete(x):
            x = self.validate_inputs(x, batch_ndim=0)
        if _concrete(theta):
            self.validate_theta(theta)
        return {"theta": theta, "x": x}

    def _check_conditioned(self, cp: Any) -> None:
        if not isinstance(cp, Mapping) or set(cp) != {"theta", "x"}:
            raise ValueError(
                f"{self.name}: the params of a CRF (as an EnergyModel) are model.condition(theta, x) == "
                f"{{'theta': ..., 'x': ...}}; got {type(cp).__name__}"
                + (f" with keys {sorted(cp)}" if isinstance(cp, Mapping) else "")
            )
        self.validate_theta(cp["theta"])
        if _concrete(cp["x"]):
            self.validate_inputs(cp["x"], batch_ndim=0)

    def validate_theta(self, theta: Any, argname: str = "theta") -> Any:
        """Check the learnable parameters (keys, float dtype, shapes, finiteness)."""
        if self.theta_shapes is not None:
            if not isinstance(theta, Mapping):
                raise ValueError(
                    f"{self.name}: `{argname}` must be a dict with keys {list(self.theta_shapes)}, "
                    f"got {type(theta).__name__}"
                )
            missing = [k for k in self.theta_shapes if k not in theta]
            extra = [k for k in theta if k not in self.theta_shapes]
            if missing or extra:
                raise ValueError(
                    f"{self.name}: `{argname}` must have keys {list(self.theta_shapes)}; "
                    f"missing {missing}, unexpected {extra}"
                )
            for k, shape in self.theta_shapes.items():
                leaf = theta[k]
                dtype = jnp.result_type(leaf)
                if not jnp.issubdtype(dtype, jnp.floating):
                    raise ValueError(f"{self.name}: `{argname}['{k}']` must be a float array, got dtype {dtype}")
                if tuple(np.shape(leaf)) != shape:
                    raise ValueError(f"{self.name}: `{argname}['{k}']` must have shape {shape}, got {tuple(np.shape(leaf))}")
        for path, leaf in jax.tree_util.tree_flatten_with_path(theta)[0]:
            if isinstance(leaf, jax.core.Tracer):
                continue
            arr = np.asarray(leaf)
            if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
                raise ValueError(f"{self.name}: `{argname}` leaf {jax.tree_util.keystr(path)} contains NaN or inf")
        if self._validate_theta_fn is not None:
            self._validate_theta_fn(theta)
        return theta

    def validate_inputs(self, x: Any, batch_ndim: int = 1, argname: str = "x") -> Any:
        """Check inputs against ``input_shapes`` with ``batch_ndim`` leading axes; cast to float32.

        Returns the inputs as jax arrays (a dict when ``input_shapes`` is a dict).
        Traced inputs are checked for shapes only.
        """
        if isinstance(self.input_shapes, dict):
            if not isinstance(x, Mapping):
                raise ValueError(
                    f"{self.name}: `{argname}` must be a dict with keys {list(self.input_shapes)}, got {type(x).__name__}"
                )
            if set(x) != set(self.input_shapes):
                raise ValueError(f"{self.name}: `{argname}` must have keys {list(self.input_shapes)}, got {sorted(x)}")
            out = {
                k: self._check_input_leaf(x[k], shape, batch_ndim, f"{argname}['{k}']")
                for k, shape in self.input_shapes.items()
            }
            sizes = {np.shape(v)[:batch_ndim] for v in out.values()}
            if len(sizes) > 1:
                raise ValueError(f"{self.name}: the entries of `{argname}` disagree on the batch shape: {sorted(sizes)}")
            return out
        return self._check_input_leaf(x, self.input_shapes, batch_ndim, argname)

    def _check_input_leaf(self, leaf, shape, batch_ndim, argname):
        if isinstance(leaf, Mapping):
            raise ValueError(
                f"{self.name}: `{argname}` must be an array of shape {('batch',) * batch_ndim + shape}, got a dict"
            )
        got = tuple(np.shape(leaf))
        if len(got) != batch_ndim + len(shape) or got[batch_ndim:] != shape:
            expected = "(" + "batch, " * batch_ndim + ", ".join(map(str, shape)) + ")"
            raise ValueError(f"{self.name}: `{argname}` has shape {got}; expected {expected}")
        if _concrete(leaf):
            arr = np.asarray(leaf)
            if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
                raise TypeError(f"{self.name}: `{argname}` must be numeric, got dtype {arr.dtype}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{self.name}: `{argname}` contains NaN or inf")
        return jnp.asarray(leaf, jnp.float32)

    def num_inputs(self, x: Any) -> int:
        """Number of inputs of a batch ``x`` (its leading axis)."""
        return int(jax.tree.leaves(x)[0].shape[0])

    # ------------------------------------------------------------------------------
    # energies
    # ------------------------------------------------------------------------------
    def conditional_energy(self, theta: Any, x: Any, state: dict) -> jax.Array:
        """:math:`E(\\theta, x, y)` for one input and one labelling (no validation)."""
        return self.conditional_energy_fn(theta, x, {n: state[n] for n in self.variables})

    def pair_energies(self, theta: Any, x: Any, labels: dict) -> jax.Array:
        """``(N,)`` energies of N (input, labelling) pairs (leading axes of ``x`` and ``labels``)."""
        return jax.vmap(lambda xi, yi: self.conditional_energy(theta, xi, yi))(x, labels)

    def particle_energies(self, theta: Any, x: Any, particles: dict) -> jax.Array:
        """``(N, M)`` energies of per-input particle sets ``{name: (N, M, *shape)}``."""
        return jax.vmap(lambda xi, p: self.energies(self.condition(theta, xi), p))(x, particles)

    def validate_labels(self, labels: Any, batch_ndim: int = 1, argname: str = "y") -> dict:
        """Check labels ``{name: (batch..., *shape)}`` (values in the domains); cast to domain dtypes."""
        return self.validate_state(labels, batch_ndim=batch_ndim, argname=argname)

    def validate_data(self, data: Any, argname: str = "data") -> tuple[Any, dict]:
        """Split and check a data dict ``{"x": inputs, <label name>: (N, *shape), ...}`` into ``(x, labels)``."""
        if not isinstance(data, Mapping):
            raise TypeError(
                f"`{argname}` must be a dict {{'x': inputs, {', '.join(repr(n) + ': labels' for n in self.variables)}}}, "
                f"got {type(data).__name__}"
            )
        if "x" not in data:
            raise ValueError(f"`{argname}` is missing the inputs 'x'")
        labels = {k: v for k, v in data.items() if k not in RESERVED_NAMES}
        x = self.validate_inputs(data["x"], batch_ndim=1, argname=f"{argname}['x']")
        if _concrete(labels):
            labels = self.validate_labels(labels, batch_ndim=1, argname=argname)
        else:
            missing = [n for n in self.variables if n not in labels]
            if missing or set(labels) - set(self.variables):
                raise ValueError(f"`{argname}` must hold the labels {list(self.variables)}, got {sorted(labels)}")
            labels = {n: jnp.asarray(labels[n]).astype(self.variables[n].dtype) for n in self.variables}
        n_x = self.num_inputs(x)
        n_y = int(jax.tree.leaves(labels)[0].shape[0])
        if n_x != n_y:
            raise ValueError(f"`{argname}` has {n_x} inputs 'x' but {n_y} labellings")
        if n_x == 0:
            raise ValueError(f"`{argname}` is empty")
        return x, labels

    def init_params(self, rng_key: jax.Array, scale: float = 0.0, dtype: Any = jnp.float32) -> dict:
        """Learnable parameters ``theta``: i.i.d. :math:`\\mathcal N(0, \\mathrm{scale}^2)` (zeros by default).

        Needs declared ``theta_shapes``.  A symmetric zero-diagonal ``"V"`` of a
        :func:`multilabel_crf` is symmetrised.
        """
        check_key(rng_key)
        scale = check_scale(scale, "scale")
        if self.theta_shapes is None:
            raise ValueError(f"{self.name}: init_params needs `theta_shapes` declared when the CRF was built")
        keys = jax.random.split(rng_key, len(self.theta_shapes))
        out = {k: scale * jax.random.normal(key, shape, dtype) for key, (k, shape) in zip(keys, self.theta_shapes.items())}
        if isinstance(self, MultilabelCRF):
            out["V"] = symmetric_offdiagonal(out["V"])
        return out

    def __repr__(self) -> str:
        vs = ", ".join(f"{n}: {d!r}" for n, d in self.variables.items())
        return f"CRF('{self.name}', labels {{{vs}}}, input {self.input_shapes})"


def _concrete(tree: Any) -> bool:
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


def crf(
    energy_fn: Callable,
    variables: Mapping[str, Domain],
    input_shapes: Any,
    *,
    blocks: Any = None,
    multilinear: bool | None = None,
    theta_shapes: Mapping[str, tuple[int, ...]] | None = None,
    validate_theta: Callable | None = None,
    name: str = "crf",
) -> CRF:
    """A CRF from its conditional energy ``energy_fn(theta, x, y_state) -> scalar``.

    Parameters
    ----------
    energy_fn
        :math:`E(\\theta, x, y)` for one input ``x`` and one labelling ``y_state``
        (``{name: array}``), written in ``jax.numpy``.
    variables
        ``{name: domain}`` of the labels (not named ``"x"`` or ``"index"``).
    input_shapes
        Shape of one input: a tuple (``x`` an array) or ``{name: shape}``.
    blocks, multilinear
        As in :class:`~ugm_infer.EnergyModel` (probed from the energy when omitted).
    theta_shapes
        Optional ``{name: shape}`` of ``theta`` (validation and ``init_params``).
    validate_theta
        Optional extra check ``validate_theta(theta)`` raising ``ValueError``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ugm_infer as ui
    >>> def energy(theta, x, y):
    ...     return -jnp.dot(y["y"], theta["w"] * x) - theta["c"] * y["y"][0] * y["y"][1]
    >>> model = ui.models.crf(energy, {"y": ui.Binary(2)}, (2,), theta_shapes={"w": (), "c": ()})
    >>> cp = model.condition({"w": jnp.float32(1.0), "c": jnp.float32(0.5)}, jnp.array([0.3, -1.0]))
    >>> float(ui.exact.log_partition(model, cp)) > 0
    True
    """
    return CRF(
        energy_fn,
        variables,
        input_shapes,
        blocks=blocks,
        multilinear=multilinear,
        theta_shapes=theta_shapes,
        validate_theta=validate_theta,
        name=name,
    )


# ----------------------------------------------------------------------------------
# pairwise CRFs with shared node and edge weights (grids: Asuncion et al. 2010, sec. 4.3)
# ----------------------------------------------------------------------------------
EDGE_POTENTIALS = ("agree", "product")


class PairwiseCRF(CRF):
    """:func:`pairwise_crf` / :func:`grid_crf`; attributes ``shape``, ``edges``, ``edge_potential``, ``domain``."""

    def __init__(self, shape, edges, num_node_features, num_edge_features, edge_potential, domain, name):
        dom = spin_or_binary(domain, shape, jnp.float32)
        n = dom.size
        self.shape = dom.shape
        self.edges = check_edges(edges, n)
        self.domain = domain
        if edge_potential not in EDGE_POTENTIALS:
            raise ValueError(f"`edge_potential` must be one of {EDGE_POTENTIALS}, got {edge_potential!r}")
        self.edge_potential = edge_potential
        fn_ = check_int(num_node_features, "num_node_features")
        fe = check_int(num_edge_features, "num_edge_features")
        m = len(self.edges)
        if m == 0:
            raise ValueError("`edges` must list at least one pair (a CRF without edges is a logistic regression)")
        i_idx, j_idx = self.edges[:, 0], self.edges[:, 1]
        spin = domain == "spin"

        def energy(theta, x, state):
            y = state["y"].reshape(-1).astype(jnp.float32)
            node_field = x["node"] @ theta["node"]
            edge_weight = x["edge"] @ theta["edge"]
            yi, yj = y[i_idx], y[j_idx]
            if edge_potential == "product":
                phi = yi * yj
            elif spin:
                phi = 0.5 * (1.0 + yi * yj)
            else:
                phi = yi * yj + (1.0 - yi) * (1.0 - yj)
            return -jnp.dot(node_field, y) - jnp.dot(edge_weight, phi)

        blocks = colour_blocks(n, self.edges, "y")
        super().__init__(
            energy,
            {"y": dom},
            {"node": (n, fn_), "edge": (m, fe)},
            blocks=blocks,
            multilinear=True,
            theta_shapes={"node": (fn_,), "edge": (fe,)},
            name=name,
        )


def pairwise_crf(
    shape: Any,
    edges: Any,
    num_node_features: int,
    num_edge_features: int,
    *,
    edge_potential: str = "agree",
    domain: str = "binary",
) -> PairwiseCRF:
    """Pairwise CRF with node and edge features and shared weights (see the module docstring).

    Parameters
    ----------
    shape
        Shape of the label variable ``"y"`` (``n`` sites, numbered row-major).
    edges
        ``(m, 2)`` int array of site pairs (flat indices), ``m >= 1``.
    num_node_features, num_edge_features
        ``F_n`` and ``F_e``: the input is ``x = {"node": (n, F_n), "edge": (m, F_e)}``
        and ``theta = {"node": (F_n,), "edge": (F_e,)}``.
    edge_potential
        ``"agree"``: :math:`\\phi = [y_i = y_j]`; ``"product"``: :math:`\\phi = y_i y_j`.
    domain
        ``"binary"`` (``y`` in {0, 1}, default) or ``"spin"`` (``y`` in {-1, +1}).
    """
    return PairwiseCRF(
        tuple(np.atleast_1d(shape).tolist()) if not isinstance(shape, tuple) else shape,
        edges,
        num_node_features,
        num_edge_features,
        edge_potential,
        domain,
        "pairwise_crf",
    )


def grid_crf(
    height: int,
    width: int,
    num_node_features: int = 2,
    num_edge_features: int = 2,
    *,
    edge_potential: str = "agree",
    domain: str = "binary",
) -> PairwiseCRF:
    """:func:`pairwise_crf` on the open ``height x width`` 4-neighbour grid; ``y`` has shape ``(height, width)``.

    Blocks are the checkerboard (greedy colouring of the grid).  Use
    :func:`difference_features` for the features of Asuncion et al. (2010, sec. 4.3).

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.grid_crf(4, 5)
    >>> noisy = jax.random.normal(jax.random.key(0), (4, 5))
    >>> x = ui.models.difference_features(noisy, model.edges)
    >>> cp = model.condition({"node": jax.numpy.array([-0.5, 1.0]), "edge": jax.numpy.array([1.0, -0.5])}, x)
    >>> model.energy(cp, {"y": (noisy > 0).astype("float32")}).shape
    ()
    """
    h = check_int(height, "height")
    w = check_int(width, "width")
    if h * w < 2:
        raise ValueError(f"`height * width` must be >= 2 (a grid with an edge), got {h}x{w}")
    model = PairwiseCRF(
        (h, w), lattice_edges(h, w, periodic=False), num_node_features, num_edge_features, edge_potential, domain, "grid_crf"
    )
    return model


def difference_features(images: Any, edges: Any) -> dict:
    """Node features :math:`[1, o_i]` and edge features :math:`[1, |o_i - o_j|]` of observed images.

    ``images`` has shape ``(..., *image_shape)`` with any leading batch axes: pass
    ``image_shape`` = the label shape of the :func:`grid_crf` / :func:`pairwise_crf`
    via its ``edges`` (flat row-major site indices).  Returns
    ``{"node": (..., n, 2), "edge": (..., m, 2)}`` (float32), the input ``x`` of the
    CRF denoising experiment of Asuncion et al. (2010, sec. 4.3).
    """
    edges = np.asarray(edges)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"`edges` must have shape (m, 2), got {edges.shape}")
    arr = jnp.asarray(images, jnp.float32)
    n = int(edges.max()) + 1 if edges.size else 0
    # the trailing axes whose product is >= n are the image
    k, size = 0, 1
    while size < n and k < arr.ndim:
        size *= arr.shape[arr.ndim - 1 - k]
        k += 1
    if size < n:
        raise ValueError(f"`images` of shape {arr.shape} have fewer pixels than the largest site index {n - 1} of `edges`")
    flat = arr.reshape(arr.shape[: arr.ndim - k] + (size,))
    ones_n = jnp.ones_like(flat)
    node = jnp.stack([ones_n, flat], axis=-1)
    diff = jnp.abs(flat[..., edges[:, 0]] - flat[..., edges[:, 1]])
    edge = jnp.stack([jnp.ones_like(diff), diff], axis=-1)
    return {"node": node, "edge": edge}


# ----------------------------------------------------------------------------------
# multi-label CRF (PSMC paper, sec. 7.1)
# ----------------------------------------------------------------------------------
class MultilabelCRF(CRF):
    """:func:`multilabel_crf`; attributes ``num_labels``, ``num_features``."""

    def __init__(self, num_labels: int, num_features: int):
        L = check_int(num_labels, "num_labels", minimum=2)
        D = check_int(num_features, "num_features")
        self.num_labels, self.num_features = L, D

        def energy(theta, x, state):
            y = state["y"].astype(jnp.float32)
            field = x @ theta["W"] + theta["b"]
            V = symmetric_offdiagonal(theta["V"])
            return -jnp.dot(field, y) - 0.5 * jnp.dot(y, V @ y)

        super().__init__(
            energy,
            {"y": Binary((L,))},
            (D,),
            blocks=[{"y": np.array([i])} for i in range(L)],
            multilinear=True,
            theta_shapes={"W": (D, L), "b": (L,), "V": (L, L)},
            name="multilabel_crf",
        )


def multilabel_crf(num_labels: int, num_features: int) -> MultilabelCRF:
    """Multi-label CRF with a coupling between every pair of labels (PSMC paper, sec. 7.1).

    .. math::  E(\\theta, x, y) = -y^\\top (W^\\top x + b) - \\tfrac12\\, y^\\top V y,
       \\qquad y \\in \\{0, 1\\}^L,\\ x \\in \\mathbb R^D,

    ``theta = {"W": (D, L), "b": (L,), "V": (L, L)}``; ``V`` is used symmetrised with a
    zero diagonal (:math:`(V + V^\\top)/2`, so learning keeps it so).  Every pair of
    labels interacts, so the blocks are single labels.  With ``V = 0`` it is ``L``
    independent logistic regressions.
    """
    return MultilabelCRF(num_labels, num_features)
