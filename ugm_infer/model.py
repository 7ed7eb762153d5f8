"""`EnergyModel`: a discrete undirected model declared by its energy function.

.. math::  p(x \\mid \\theta) = \\exp(-E(\\theta, x)) / Z(\\theta)

over named discrete variables.  ``energy_fn(params, state)`` returns the energy of
*one* configuration; ``state`` is a dict ``{name: array}`` whose arrays have the
shapes of the declared domains.  Chains and particles are a leading batch axis
handled with :func:`jax.vmap` (see :meth:`EnergyModel.energies`).

The energy contract (:meth:`EnergyModel.check_energy`): ``energy_fn`` returns a real
floating scalar, is traceable by JAX (no Python ``if``/``while``/``bool()`` or numpy on
traced values) and is finite at a random configuration.  Parameters are not known when
a model is built, so the contract is checked at the first use with parameters: the
first :meth:`EnergyModel.validate_params` call (every public entry point makes it on
the host before compiling: kernels built with ``params``, ``ui.exact``, ``ui.smc``,
``ui.sample``, learners and ``ui.fit``), once per parameter structure.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ugm_infer.domains import Categorical, Domain, _random_values
from ugm_infer.structure import (
    Block,
    analyze_energy,
    blocks_from_colors,
    color_graph,
    make_layout,
)

__all__ = ["EnergyModel"]

State = dict[str, jax.Array]

# what JAX raises when Python control flow or numpy needs the value of a traced array
_TRACED_VALUE_ERRORS = (
    jax.errors.ConcretizationTypeError,  # includes TracerBoolConversionError (`if x > 0:`)
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
    jax.errors.NonConcreteBooleanIndexError,
)


# one evaluation does not need an optimised executable: skipping LLVM's expensive passes
# roughly halves the compile time of the energy check
_ONE_SHOT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _compile_once(lowered: Any) -> Callable:
    """Compile a lowered function for a single call (unoptimised where the backend allows it)."""
    try:
        return lowered.compile(_ONE_SHOT_COMPILER_OPTIONS)
    except Exception:  # a backend that rejects these options: the default compile
        return lowered.compile()


def _params_signature(params: Any) -> tuple:
    """Tree structure, shapes and dtypes of ``params`` (what a trace of the energy depends on)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    sig = []
    for x in leaves:
        dtype = getattr(x, "dtype", None)
        sig.append((type(x).__name__, tuple(np.shape(x)), str(dtype) if dtype is not None else type(x).__name__))
    return treedef, tuple(sig)


def largest_param_note(params: Any) -> str:
    """``"; the largest parameter is params['W'] (|value| up to 3e+38)"`` ('' when traced or empty)."""
    best: tuple[str, float] | None = None
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        if isinstance(leaf, jax.core.Tracer):
            return ""
        arr = np.asarray(leaf)
        if arr.size and np.issubdtype(arr.dtype, np.number):
            size = float(np.max(np.abs(arr)))
            if best is None or size > best[1]:
                best = (jax.tree_util.keystr(path), size)
    return "" if best is None else f"; the largest parameter is params{best[0]} (|value| up to {best[1]:.3g})"


#: what to do when energies overflow float32
FLOAT64_HINT = (
    "use smaller parameters, or float64 (jax.config.update('jax_enable_x64', True) and float64 params), "
    "which extends the range to about 1.8e308"
)


class EnergyModel:
    """A discrete undirected graphical model declared by its energy.

    Parameters
    ----------
    energy_fn
        ``energy_fn(params, state) -> scalar``: the energy of one configuration.
        ``params`` is any pytree; ``state`` is ``{name: array}`` with the domain
        shapes.  Must be written with ``jax.numpy`` (it is jitted, vmapped and, for
        binary/spin models, differentiated).
    variables
        ``{name: domain}``, e.g. ``{"s": ui.Spin((16, 16))}``.
    blocks
        Optional list of groups of sites that are conditionally independent given
        the rest (updated in parallel by block Gibbs).  Each block is a dict
        ``{name: selector}`` where ``selector`` is ``True`` / ``None`` (the whole
        variable), a boolean mask of the variable's shape, or an array of flat
        indices.  Blocks must cover every site exactly once.  If omitted, blocks
        are found by probing the energy and colouring its interaction graph
        (see :mod:`ugm_infer.structure`) the first time a kernel is built.
    multilinear
        Whether the energy is affine in each binary/spin site (all pairwise and
        bilinear energies are).  ``None`` (default) checks it numerically.  When
        true, all conditionals of a block come from one gradient; when false, each
        value of each site is evaluated.  Declaring ``True`` for an energy that is
        not multilinear gives a wrong sampler.
    free_energy_fns
        Optional ``{name: fn}`` with ``fn(params, rest) = -log sum_{x_name}
        exp(-E(params, x))``: an analytic sum over variable ``name`` given the other
        variables ``rest`` (a dict without ``name``).  Used for exact positive
        phases, exact likelihoods and AIS.  Variables whose sites are mutually
        non-interacting are summed analytically even without it.
    validate_params
        Optional callable ``validate_params(params)`` raising ``ValueError`` on bad
        parameters (built-in models check shapes with it).
    name
        A short name for printing.

    Notes
    -----
    ``energy_fn`` is checked at the first use with parameters (see
    :meth:`check_energy`): a vector, an integer/boolean/complex result, Python control
    flow on traced values or a non-finite energy at a random configuration raise a
    ``ValueError`` naming the model.

    Examples
    --------
    >>> import jax.numpy as jnp, ugm_infer as ui
    >>> def energy(params, state):
    ...     s = state["s"]
    ...     return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1))
    >>> model = ui.EnergyModel(energy, {"s": ui.Spin((4, 4))})
    >>> float(model.energy({"J": 1.0}, {"s": jnp.ones((4, 4))}))
    -32.0
    """

    def __init__(
        self,
        energy_fn: Callable[[Any, State], jax.Array],
        variables: Mapping[str, Domain],
        blocks: Sequence[Mapping[str, Any]] | None = None,
        *,
        multilinear: bool | None = None,
        free_energy_fns: Mapping[str, Callable] | None = None,
        validate_params: Callable[[Any], None] | None = None,
        name: str | None = None,
    ):
        if not callable(energy_fn):
            raise TypeError(f"`energy_fn` must be callable, got {type(energy_fn).__name__}")
        if not isinstance(variables, Mapping) or not variables:
            raise ValueError("`variables` must be a non-empty dict {name: domain}")
        for n, d in variables.items():
            if not isinstance(n, str):
                raise TypeError(f"variable names must be strings, got {n!r}")
            if not isinstance(d, Domain):
                raise TypeError(
                    f"variable '{n}' must be a domain (ui.Binary, ui.Spin, ui.Categorical), got {type(d).__name__}"
                )
        if multilinear is not None and not isinstance(multilinear, bool):
            raise TypeError("`multilinear` must be True, False or None")
        self.energy_fn = energy_fn
        self.variables: dict[str, Domain] = dict(variables)
        self.layout = make_layout(self.variables)
        if free_energy_fns is not None and not isinstance(free_energy_fns, Mapping):
            raise TypeError(f"`free_energy_fns` must be a dict {{name: fn}}, got {type(free_energy_fns).__name__}")
        self.free_energy_fns = dict(free_energy_fns or {})
        for n, fn in self.free_energy_fns.items():
            if n not in self.variables:
                raise ValueError(f"`free_energy_fns` names unknown variable '{n}'; known: {list(self.variables)}")
            if not callable(fn):
                raise TypeError(f"`free_energy_fns['{n}']` must be callable, got {type(fn).__name__}")
        if validate_params is not None and not callable(validate_params):
            raise TypeError(f"`validate_params` must be callable or None, got {type(validate_params).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be a string, got {type(name).__name__}")
        self._validate_params_fn = validate_params
        self.name = name or getattr(energy_fn, "__name__", "EnergyModel")
        if multilinear and any(isinstance(d, Categorical) for d in self.variables.values()):
            raise ValueError("multilinear=True is only supported for Binary/Spin variables")
        self._multilinear = multilinear
        self._blocks: list[Block] | None = None
        self._edges: np.ndarray | None = None
        if blocks is not None:
            self._blocks = self._canonical_blocks(blocks)

    # ------------------------------------------------------------------------------
    # energies and densities
    # ------------------------------------------------------------------------------
    def energy(self, params: Any, state: State) -> jax.Array:
        """Energy of one configuration (no validation; safe inside ``jit``)."""
        return self.energy_fn(params, {n: state[n] for n in self.variables})

    def energies(self, params: Any, states: State) -> jax.Array:
        """Energies of a batch of configurations (leading axis)."""
        return jax.vmap(lambda s: self.energy(params, s))(states)

    def logdensity_fn(self, params: Any, beta: Any = 1.0) -> Callable[[State], jax.Array]:
        """Unnormalised log-density ``x -> -beta * E(params, x)`` of one configuration.

        ``beta`` may be traced (tempering inside ``jit``); a concrete ``beta`` must be
        finite.
        """
        if not isinstance(beta, jax.core.Tracer):
            try:
                finite = bool(np.all(np.isfinite(np.asarray(beta, dtype=np.float64))))
            except (TypeError, ValueError) as err:
                raise TypeError(f"`beta` must be a number or an array, got {type(beta).__name__}") from err
            if not finite:
                raise ValueError(f"`beta` must be finite, got {beta!r}")
        return lambda state: -beta * self.energy(params, state)

    # ------------------------------------------------------------------------------
    # states
    # ------------------------------------------------------------------------------
    @property
    def num_sites(self) -> int:
        """Total number of scalar sites over all variables."""
        return self.layout.num_sites

    @property
    def log_num_states(self) -> float:
        """log of the number of joint configurations."""
        return float(sum(d.size * np.log(d.num_states) for d in self.variables.values()))

    def random_state(self, rng_key: jax.Array, num_chains: int | None = None) -> State:
        """Uniformly random state(s); with ``num_chains`` a leading chain axis is added."""
        if num_chains is not None and (
            isinstance(num_chains, bool) or not isinstance(num_chains, (int, np.integer)) or num_chains < 1
        ):
            raise ValueError(f"`num_chains` must be a positive int or None, got {num_chains!r}")
        batch = () if num_chains is None else (int(num_chains),)
        return _random_values(rng_key, self.variables, batch)

    def validate_state(self, state: Any, batch_ndim: int | None = None, argname: str = "state") -> State:
        """Check a (possibly batched) state and cast it to the domain dtypes.

        Raises ``ValueError`` naming the variable for unknown or missing names, wrong
        shapes, values outside the domain and non-finite values.  Runs on the host;
        call it outside jitted loops.  ``batch_ndim=None`` accepts any number of
        leading batch axes, as long as all variables agree.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"`{argname}` must be a dict {{name: array}}, got {type(state).__name__}")
        unknown = set(state) - set(self.variables)
        if unknown:
            raise ValueError(f"`{argname}` has unknown variable(s) {sorted(unknown)}; the model has {list(self.variables)}")
        missing = [n for n in self.variables if n not in state]
        if missing:
            raise ValueError(f"`{argname}` is missing variable(s) {missing}")
        out, batch_shape = {}, None
        for n, d in self.variables.items():
            arr = np.asarray(state[n])
            if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
                raise TypeError(f"`{argname}['{n}']` must be numeric, got dtype {arr.dtype}")
            nd = arr.ndim - len(d.shape)
            if nd < 0 or tuple(arr.shape[nd:]) != d.shape or (batch_ndim is not None and nd != batch_ndim):
                expected = (
                    ("(..., " if batch_ndim is None else "(" + "batch, " * (batch_ndim or 0))
                    + ", ".join(map(str, d.shape))
                    + ")"
                )
                raise ValueError(f"`{argname}['{n}']` has shape {arr.shape}; expected {expected} for {d!r}")
            if batch_shape is None:
                batch_shape = arr.shape[:nd]
            elif arr.shape[:nd] != batch_shape:
                raise ValueError(
                    f"`{argname}` variables disagree on the batch shape: '{n}' has {arr.shape[:nd]}, expected {batch_shape}"
                )
            d.check_values(arr, f"`{argname}['{n}']`")
            out[n] = jnp.asarray(arr, dtype=d.dtype)
        return out

    def validate_params(self, params: Any, argname: str = "params") -> Any:
        """Check ``params``: numeric, finite float leaves, the model's own checks, then the energy contract.

        The energy contract (:meth:`check_energy`) is checked once per parameter
        structure; traced ``params`` are skipped (host-side validation only).
        """
        for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            if isinstance(leaf, jax.core.Tracer):
                continue  # traced params cannot be checked on the host
            arr = np.asarray(leaf)
            if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
                raise TypeError(
                    f"`{argname}` leaf {jax.tree_util.keystr(path)} is not a numeric array (got dtype {arr.dtype})"
                )
            if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
                raise ValueError(f"`{argname}` leaf {jax.tree_util.keystr(path)} contains NaN or inf")
        if self._validate_params_fn is not None:
            self._validate_params_fn(params)
        if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(params)):
            self.check_energy(params)
        return params

    def check_energy(self, params: Any) -> jax.ShapeDtypeStruct:
        """Check the energy contract at ``params``; return the energy's shape and dtype.

        ``energy_fn(params, state)`` must

        * be traceable: it is jitted, vmapped and differentiated, so Python control flow
          (``if``, ``while``, ``bool()``, ``int()``) or numpy on values derived from the
          state or the parameters fails; branch with ``jnp.where`` / ``jax.lax.cond``;
        * return one real floating scalar per configuration (a vector is usually a
          missing ``jnp.sum``; an integer result a missing ``.astype(jnp.float32)``);
        * be finite at a random configuration (NaN or infinite energies give no
          distribution; write a hard constraint as a large finite penalty).

        The check traces the energy once at abstract states and evaluates it once,
        compiled, at a fixed random configuration.  It runs once per parameter structure
        (tree, shapes, dtypes) and is cached on the model; :meth:`validate_params` calls
        it, so every public entry point checks the energy at its first use.  With traced
        ``params`` only the trace is checked.

        Raises
        ------
        ValueError
            Naming the model and the offending shape, dtype, value or construct.
        """
        cache = self.__dict__.setdefault("_energy_checked", {})
        try:
            key = _params_signature(params)
            hash(key)
        except TypeError:  # an unhashable tree node: check without caching
            key = None
        if key is not None and key in cache:
            return cache[key]
        concrete = not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(params))
        state = self._probe_state()
        try:
            if concrete:
                traced = jax.jit(self.energy).trace(params, state)
                out = traced.out_info
            else:
                out = jax.eval_shape(self.energy, params, state)
        except _TRACED_VALUE_ERRORS as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(
                f"model '{self.name}': `energy_fn` uses the value of a traced array in Python control flow or numpy "
                "(`if`, `while`, `and`/`or`, `bool()`, `int()`, `np.` functions on the state or the parameters). "
                "Energies are jitted and vmapped, so write branches with jnp.where(cond, a, b) or "
                f"jax.lax.cond and use jax.numpy instead of numpy. JAX said: {type(err).__name__}: {first}"
            ) from None
        if not isinstance(out, jax.ShapeDtypeStruct):
            got = jax.tree.map(lambda x: (x.shape, str(x.dtype)), out)
            raise ValueError(
                f"model '{self.name}': `energy_fn` must return one scalar (the energy of one configuration), "
                f"got a {type(out).__name__}: {got}"
            )
        if out.shape != ():
            raise ValueError(
                f"model '{self.name}': `energy_fn` must return a scalar for one configuration, got shape {out.shape} "
                "(sum the terms, e.g. jnp.sum(...); chains are batched by the library with jax.vmap)"
            )
        if not jnp.issubdtype(out.dtype, jnp.floating):
            hint = (
                "complex energies are not supported"
                if jnp.issubdtype(out.dtype, jnp.complexfloating)
                else "cast it, e.g. .astype(jnp.float32)"
            )
            raise ValueError(
                f"model '{self.name}': `energy_fn` must return a real floating scalar, got dtype {out.dtype} ({hint})"
            )
        if concrete:
            value = float(_compile_once(traced.lower())(params, state))
            if not np.isfinite(value):
                raise ValueError(
                    f"model '{self.name}': the energy is {value} at a random configuration; "
                    "energies must be finite (NaN gives no distribution; write a hard constraint as a large finite "
                    f"penalty instead of inf); if the energies overflow, {FLOAT64_HINT}{largest_param_note(params)}"
                )
        if key is not None:
            cache[key] = out
        return out

    def _probe_state(self) -> State:
        """A fixed random configuration as numpy arrays (nothing to compile; never a tracer, even inside a trace)."""
        rng = np.random.default_rng(0)
        return {
            n: np.asarray(d.values[rng.integers(0, d.num_states, d.shape)], dtype=d.dtype) for n, d in self.variables.items()
        }

    # ------------------------------------------------------------------------------
    # structure: multilinearity, interaction graph and blocks
    # ------------------------------------------------------------------------------
    @property
    def has_structure(self) -> bool:
        """Whether blocks and multilinearity are known (declared or detected)."""
        return self._blocks is not None and self._multilinear is not None

    @property
    def multilinear(self) -> bool:
        if self._multilinear is None:
            raise ValueError(
                f"model '{self.name}': multilinearity is unknown until probed; call "
                "model.detect_structure(params) or pass multilinear= to EnergyModel"
            )
        return self._multilinear

    @property
    def blocks(self) -> list[Block]:
        if self._blocks is None:
            raise ValueError(
                f"model '{self.name}' has no blocks yet; call model.detect_structure(params) "
                "or pass blocks= to EnergyModel (kernels built with params do this for you)"
            )
        return self._blocks

    def detect_structure(self, params: Any, rng_key: jax.Array | None = None) -> EnergyModel:
        """Resolve multilinearity and blocks by probing the energy at ``params``.

        Declared values are kept; only what is unknown is probed.  The result is
        cached on the model (it depends only on the energy's structure, not on the
        parameter values, which are randomly perturbed during probing).  Returns
        ``self``, so ``model = model.detect_structure(params)`` reads naturally.
        """
        if self.has_structure:
            return self
        self.validate_params(params)
        key = jax.random.key(0) if rng_key is None else rng_key
        report = analyze_energy(
            key, self.energy_fn, params, self.variables, multilinear=self._multilinear, need_edges=self._blocks is None
        )
        self._multilinear = report.multilinear
        if self._blocks is None:
            self._edges = report.edges
            colors = color_graph(self.num_sites, self._edges)
            self._blocks = blocks_from_colors(colors, self.layout, self.variables)
        return self

    def interaction_edges(self, params: Any) -> np.ndarray:
        """Probed interaction graph as an ``(m, 2)`` array of global site pairs (``i < j``)."""
        if self._edges is None:
            self.validate_params(params)
            report = analyze_energy(jax.random.key(0), self.energy_fn, params, self.variables, multilinear=self._multilinear)
            self._edges = report.edges
            if self._multilinear is None:
                self._multilinear = report.multilinear
        return self._edges

    def non_interacting_variables(self, params: Any | None = None) -> list[str]:
        """Variables all of whose sites lie in one block (mutually non-interacting)."""
        out = []
        for n in self.variables:
            owners = [b for b in self.blocks if n in b.indices]
            if len(owners) == 1 and len(owners[0].indices[n]) == self.variables[n].size:
                out.append(n)
        return out

    def _canonical_blocks(self, blocks: Sequence[Mapping[str, Any]]) -> list[Block]:
        if isinstance(blocks, Mapping) or not isinstance(blocks, Sequence) or not blocks:
            raise ValueError("`blocks` must be a non-empty list of dicts {name: selector}")
        colors = np.full(self.num_sites, -1, dtype=np.int64)
        for c, blk in enumerate(blocks):
            if not isinstance(blk, Mapping):
                raise ValueError(f"`blocks[{c}]` must be a dict {{name: selector}}, got {type(blk).__name__}")
            for n, sel in blk.items():
                if n not in self.variables:
                    raise ValueError(f"`blocks[{c}]` names unknown variable '{n}'; known: {list(self.variables)}")
                d = self.variables[n]
                if sel is None or sel is True:
                    idx = np.arange(d.size)
                else:
                    arr = np.asarray(sel)
                    if arr.dtype == bool:
                        if arr.shape != d.shape:
                            raise ValueError(f"`blocks[{c}]['{n}']` mask has shape {arr.shape}; expected {d.shape}")
                        idx = np.nonzero(arr.reshape(-1))[0]
                    elif np.issubdtype(arr.dtype, np.integer):
                        idx = arr.reshape(-1)
                        if idx.size and (idx.min() < 0 or idx.max() >= d.size):
                            raise ValueError(f"`blocks[{c}]['{n}']` has flat indices outside [0, {d.size})")
                    else:
                        raise ValueError(f"`blocks[{c}]['{n}']` must be True, a boolean mask or int indices")
                g = self.layout.offsets[self.layout.names.index(n)] + idx
                if np.any(colors[g] >= 0):
                    raise ValueError(f"`blocks` assign site(s) of '{n}' to more than one block (blocks[{c}])")
                colors[g] = c
        if np.any(colors < 0):
            n, i = self.layout.owner(int(np.nonzero(colors < 0)[0][0]))
            raise ValueError(f"`blocks` do not cover every site: e.g. flat index {i} of '{n}' is in no block")
        return blocks_from_colors(colors, self.layout, self.variables)

    def with_blocks(self, blocks: Sequence[Mapping[str, Any]]) -> EnergyModel:
        """A copy of this model with explicit blocks (overrides detection)."""
        new = copy.copy(self)
        new._blocks = self._canonical_blocks(blocks)
        return new

    def __repr__(self) -> str:
        vs = ", ".join(f"{n}: {d!r}" for n, d in self.variables.items())
        return f"EnergyModel('{self.name}', {{{vs}}})"
