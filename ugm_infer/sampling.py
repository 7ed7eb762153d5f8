"""Run many chains of any kernel: ``ui.sample``.

A thin, jitted driver: ``vmap`` over chains of a single-chain
:class:`blackjax.base.SamplingAlgorithm`, ``lax.scan`` over steps, recording a
user-chosen trace (positions, energies, infos) every ``thin`` steps after warm-up.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer import _compile
from ugm_infer._random import drawn_flat
from ugm_infer._random import split as split_key
from ugm_infer.kernels import _common, checkerboard
from ugm_infer.kernels._common import chain_group, chains_first, chains_last, recipe_of
from ugm_infer.kernels.parallel_tempering import ParallelTemperingState

__all__ = ["SampleResult", "sample"]


class SampleResult(NamedTuple):
    """Output of :func:`sample`.

    states
        Kept positions ``{name: (chain, draw, *shape)}`` (``None`` if not kept).
    energies
        ``(chain, draw)`` energies of the kept positions (``None`` without a model/params).
    infos
        Kernel infos of the kept steps, leaves ``(chain, draw, ...)``.
    final_state
        The kernel states after the last step (leading chain axis), to continue from.
    """

    states: Any
    energies: Any
    infos: Any
    final_state: Any


def _check_key(rng_key):
    """A typed key (``jax.random.key``) or a raw ``uint32`` key (``jax.random.PRNGKey``)."""
    dtype = getattr(rng_key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key) and jnp.ndim(rng_key) == 0:
        return
    if dtype == jnp.uint32 and jnp.ndim(rng_key) == 1:
        return
    raise TypeError(f"`rng_key` must be one PRNG key (jax.random.key(seed)), got {rng_key!r}")


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}")


def sample(
    rng_key: jax.Array,
    algorithm: SamplingAlgorithm,
    initial_position: dict,
    num_samples: int,
    *,
    num_warmup: int = 0,
    thin: int = 1,
    model=None,
    params: Any = None,
    keep_states: bool = True,
    trace_fn: Callable | None = None,
) -> SampleResult:
    # Long because its docstring documents every argument; the code is about 45 lines.
    """Run ``num_chains`` chains of ``algorithm`` (chains = leading axis of ``initial_position``).

    Parameters
    ----------
    rng_key
        PRNG key.
    algorithm
        A single-chain ``SamplingAlgorithm`` (e.g. ``ui.kernels.gibbs(model, params)``).
    initial_position
        ``{name: (num_chains, *shape)}`` starting configurations (validated if ``model``),
        or the ``final_state`` of an earlier result of the same algorithm, to continue
        those chains where they stopped (taken as it is: no validation and no
        conversion, e.g. a lattice chain stays in its packed layout).
    num_samples, num_warmup, thin
        Draws to keep, steps discarded first, and steps between kept draws.
    model, params
        If given, states are validated and ``energies`` are recorded (for parallel
        tempering, whose positions carry a replica axis, the energy of the ``beta = 1``
        replica).  ``params`` must be the parameters ``algorithm`` samples at (checked
        for ``ui.kernels.gibbs(model, params)``).
    keep_states
        Store the positions of every kept draw (memory ``chains x draws x sites``);
        set ``False`` for huge models and record statistics through ``trace_fn``.
    trace_fn
        Optional ``trace_fn(state, info) -> pytree`` recorded in ``infos`` instead of
        the raw info.  It is called once per kept draw with the states and infos of
        *all chains at once* (every leaf has a leading chain axis, as produced by
        ``jax.vmap`` of the kernel), inside the compiled run; every leaf it returns must
        keep that leading chain axis (e.g. ``lambda s, i: s.position["s"].mean(-1)``,
        not ``.mean()``), and comes back with shape ``(chain, draw, ...)``.  A
        ``trace_fn`` that reads nothing of the info lets the lattice Ising sweeps skip
        counting the changed sites (the same draws, a little faster).

    Raises
    ------
    ValueError
        Bad counts, states, params or zero chains; ``params`` other than the Gibbs
        kernel's; a non-finite initial energy (with ``model`` and ``params``); a
        ``trace_fn`` output without the chain axis.
    TypeError
        A wrong type of ``rng_key``, ``algorithm``, ``trace_fn`` or ``keep_states``.

    Notes
    -----
    Many devices: pass ``initial_position`` split across a mesh
    (``ui.sharding.shard_chains(x0, mesh)``); the compiled run is partitioned by chain
    and every output with a chain axis comes back split the same way.
    """
    _check_int(num_samples, "num_samples", 1)
    _check_int(num_warmup, "num_warmup", 0)
    _check_int(thin, "thin", 1)
    if not isinstance(algorithm, SamplingAlgorithm):
        raise TypeError(f"`algorithm` must be a blackjax SamplingAlgorithm, got {type(algorithm).__name__}")
    _check_key(rng_key)
    if trace_fn is not None and not callable(trace_fn):
        raise TypeError(f"`trace_fn` must be callable or None, got {type(trace_fn).__name__}")
    if not isinstance(keep_states, (bool, np.bool_)):
        raise TypeError(f"`keep_states` must be True or False, got {keep_states!r}")
    from_state = _is_kernel_state(initial_position)
    # a global array spanning several processes (jax.distributed) cannot be copied to
    # this host: each process validates its own slice before building it (docs/scaling.md)
    global_input = any(isinstance(x, jax.Array) and not x.is_fully_addressable for x in jax.tree.leaves(initial_position))
    with_energy = model is not None and params is not None
    if model is not None and not global_input and not from_state:
        initial_position = _validate_start(model, params if with_energy else None, initial_position)
    elif with_energy:
        model.validate_params(params)
    leaves = jax.tree.leaves(initial_position)
    if not leaves:
        raise ValueError("`initial_position` is empty")
    if any(jnp.ndim(x) == 0 for x in leaves) or len({jnp.shape(x)[0] for x in leaves}) != 1:
        raise ValueError(
            "`initial_position` needs a leading chain axis of the same length on every variable, got shapes "
            f"{jax.tree.map(jnp.shape, initial_position)}"
        )
    if jnp.shape(leaves[0])[0] == 0:
        raise ValueError("`initial_position` has 0 chains; pass at least one (leading axis = chains)")
    if from_state:
        _check_kernel_state(algorithm, initial_position)
    recipe = recipe_of(algorithm)
    if with_energy and recipe is not None and recipe.params is not None:
        _check_same_params(recipe.params, params)
    # groups of chains are for one CPU's caches; chains split across devices stay one group
    devices = {d for x in leaves if isinstance(x, jax.Array) for d in x.sharding.device_set}
    platform = next(iter(devices)).platform if len(devices) == 1 else jax.default_backend()
    group_bytes = _common.GROUP_BYTES if len(devices) <= 1 and platform == "cpu" else 0
    run = _compiled_run(
        algorithm,
        recipe,
        model if with_energy else None,
        num_samples,
        num_warmup,
        thin,
        keep_states,
        trace_fn,
        from_state,
        group_bytes,
    )
    build_args = recipe.args if recipe is not None else None
    final, (states, energies, infos) = run(rng_key, initial_position, params if with_energy else None, build_args)
    return SampleResult(states, energies, infos, final)


def _check_same_params(built_with, params) -> None:
    """``params`` (for the recorded energies) must be those the algorithm samples at."""
    if built_with is params:
        return
    a, b = jax.tree.flatten(built_with), jax.tree.flatten(params)
    same = a[1] == b[1] and all(
        np.shape(x) == np.shape(y) and np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a[0], b[0])
    )
    if not same:
        raise ValueError(
            "`params` differ from the parameters `algorithm` was built with: the energies recorded at `params` "
            "would not be those of the distribution it samples; pass the same parameters, or no `params` to record "
            "no energies"
        )


def _is_kernel_state(position) -> bool:
    """A kernel state (``SampleResult.final_state``: a NamedTuple with a ``position``), not a dict of positions."""
    # the class, not the instance: a lattice state's ``position`` is a property that unpacks the whole state
    return isinstance(position, tuple) and hasattr(type(position), "_fields") and hasattr(type(position), "position")


_STATE_CHECKS: dict = {}  # (init target, state structure and avals) -> None, when a check passed


def _check_kernel_state(algorithm, state) -> None:
    """``state`` must be what ``algorithm``'s ``init`` makes of its own position (same structure, shapes, dtypes)."""
    recipe = recipe_of(algorithm)
    got = jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), state)
    leaves, treedef = jax.tree.flatten(got)
    key = (recipe.key if recipe is not None else algorithm.init, treedef, tuple((x.shape, x.dtype) for x in leaves))
    try:
        if key in _STATE_CHECKS:
            return
    except TypeError:  # an unhashable piece: check without remembering
        key = None
    try:
        positions = jax.eval_shape(lambda s: s.position, state)
        expected = jax.eval_shape(jax.vmap(algorithm.init), positions)
    except Exception as err:  # noqa: BLE001 -- any failure means it is not this algorithm's state
        raise TypeError(
            f"`initial_position` is a {type(state).__name__} this algorithm cannot start from ({err}); pass "
            "{name: array} positions or the final_state of a run of the same algorithm"
        ) from err
    if treedef != jax.tree.structure(expected) or leaves != jax.tree.leaves(expected):
        raise TypeError(
            f"`initial_position` is a {type(state).__name__} that does not match this algorithm's state "
            f"({jax.tree.structure(expected)}); pass {{name: array}} positions or the final_state of a run of the "
            "same algorithm"
        )
    if key is not None and len(_STATE_CHECKS) < 256:
        _STATE_CHECKS[key] = None


def _validate_start(model, params, position):
    """Check the starting positions, then ``params`` and the starting energies; returns the positions.

    Names, shapes and dtypes are checked on the host from the arrays' metadata and
    the values (finite, in the domain) in one compiled pass that returns a count;
    inputs that are not JAX arrays, and any failure, go through the host-side checks,
    which raise the detailed errors.  Arrays already in the domain's dtype are
    returned as they are (no copy).  The energies are evaluated only where the model
    does not guarantee them finite (``model.finite_energy_on_domain(params)``).
    """
    variables = model.variables
    on_device = isinstance(position, dict) and set(position) == set(variables)
    on_device = on_device and all(
        isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.number) and jnp.shape(x)[1:] == d.shape and x.ndim > 0
        for x, d in ((position[n], d) for n, d in variables.items())
    )
    on_device = on_device and len({x.shape[0] for x in position.values()}) == 1
    if not on_device or int(_value_check(model)(position)) > 0:
        position = _validate_on_host(model, position)  # raises the detailed error for bad values
    else:
        position = {n: x if x.dtype == variables[n].dtype else x.astype(variables[n].dtype) for n, x in position.items()}
    if params is not None:
        model.validate_params(params)
        known_finite = getattr(model, "finite_energy_on_domain", None)  # a built-in model's own guarantee
        if not (callable(known_finite) and known_finite(params)):
            _check_initial_energies(model, params, position)
    return position


def _value_check(model):
    """The compiled ``check(position) -> number of non-finite or out-of-domain values`` (cached on the model)."""
    check = model.__dict__.get("_start_value_check")
    if check is None:

        def count(position):
            bad = jnp.int32(0)
            for n, d in model.variables.items():
                x = position[n]
                if jnp.issubdtype(x.dtype, jnp.floating):
                    bad += jnp.sum(~jnp.isfinite(x), dtype=jnp.int32)
                bad += jnp.sum(~d.contains(x, xp=jnp), dtype=jnp.int32)
            return bad

        check = model.__dict__.setdefault("_start_value_check", jax.jit(count))
    return check


def _validate_on_host(model, position):
    """The host-side checks (detailed errors); puts a chain-sharded input back where the caller placed it."""
    shardings = (
        {n: x.sharding for n, x in position.items() if isinstance(x, jax.Array) and len(x.devices()) > 1}
        if isinstance(position, dict)
        else {}
    )
    position = model.validate_state(position, batch_ndim=1, argname="initial_position")
    return {n: jax.device_put(x, shardings[n]) if n in shardings else x for n, x in position.items()}


def _check_initial_energies(model, params, position):
    """Host-side: the chains must start where the energy is finite."""
    energies = model.__dict__.setdefault("_jit_energies", jax.jit(model.energies))
    values = np.asarray(energies(params, position))
    bad = ~np.isfinite(values)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"the energy of model '{model.name}' is {values[i]} at `initial_position` chain {i} "
            f"({int(bad.sum())} of {values.size} chains non-finite); sampling from there would give meaningless "
            "states: check `params` and the energy function"
        )


# Compiled runs, reused by later calls with the same settings.  An algorithm built by
# ``ui.kernels.*`` from ``params`` carries a recipe (``kernels._common.Recipe``): its
# run is keyed by the recipe's static part and takes the parameters as an argument, so
# ``ui.sample(key, ui.kernels.gibbs(model, params), ...)`` compiles once however often
# it is called and whatever the parameter values.  Other algorithms are keyed by their
# ``init``/``step`` functions.  Bounded LRU: entries keep functions and models alive.
_RUN_CACHE: OrderedDict = OrderedDict()
_RUN_CACHE_SIZE = 32
# draws x chains up to which all per-step chain keys are drawn at once (8 bytes each)
_PRESPLIT_KEYS = 1 << 20


def _function_key(fn):
    """A hashable stand-in for ``fn``: its code and closure values for plain functions, else ``fn``.

    Two lambdas written at the same place and closing over equal values compute the
    same thing, so a ``trace_fn`` written inline in every call still reuses the run.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    try:
        cells = tuple(c.cell_contents for c in (fn.__closure__ or ()))
        key = (
            code,
            cells,
            fn.__defaults__,
            getattr(fn, "__kwdefaults__", None) and tuple(sorted(fn.__kwdefaults__.items())),
        )
        hash(key)
    except (TypeError, ValueError):  # an unhashable or empty cell
        return fn
    return key


def _reads_info(fn: Callable, state, info) -> bool:
    """Whether ``fn(state, info)``'s output may depend on ``info`` (False only when no operation reads it)."""
    try:
        closed = jax.make_jaxpr(fn)(state, info)
    except Exception:  # the trace reports its own error where the run calls it
        return True
    jaxpr = closed.jaxpr
    info_vars = {id(v) for v in jaxpr.invars[len(jax.tree.leaves(state)) :]}
    read = {id(v) for eqn in jaxpr.eqns for v in eqn.invars} | {id(v) for v in jaxpr.outvars}
    return bool(info_vars & read)


def _compiled_run(
    algorithm, recipe, model, num_samples, num_warmup, thin, keep_states, trace_fn, from_state=False, group_bytes=0
):
    target = ("recipe", recipe.key) if recipe is not None else (algorithm.init, algorithm.step)
    trace_key = None if trace_fn is None else _function_key(trace_fn)
    key = (target, model, num_samples, num_warmup, thin, bool(keep_states), trace_key, from_state, group_bytes)
    try:
        run = _RUN_CACHE.pop(key)
    except (KeyError, TypeError):  # TypeError: an unhashable piece; build without caching
        run = None
    if run is None:
        build = recipe.build if recipe is not None else (lambda _: algorithm)
        run = _build_run(build, model, num_samples, num_warmup, thin, keep_states, trace_fn, from_state, group_bytes)
    try:
        _RUN_CACHE[key] = run
        while len(_RUN_CACHE) > _RUN_CACHE_SIZE:
            _RUN_CACHE.popitem(last=False)
    except TypeError:
        pass
    return run


def _build_run(build, model, num_samples, num_warmup, thin, keep_states, trace_fn, from_state=False, group_bytes=0):
    """The jitted ``run(rng_key, position, params, build_args)``.

    ``group_bytes`` (0: one group): a lattice state runs in groups of chains of about
    that many bytes (:func:`~ugm_infer.kernels._common.chain_group`; only with the
    default trace, which does not mix chains).
    ``params`` only feeds the recorded energies; ``build(build_args)`` gives the
    algorithm (inside the trace, so the arguments may change between calls without
    recompiling).  With ``from_state`` the ``position`` argument is already the
    kernel states (a previous run's ``final_state``).
    """
    trace = trace_fn or (lambda state, info: info)

    def energy(params, pos):
        # parallel tempering keeps a replica axis in front of each variable: the sample
        # is the beta = 1 replica, the last one
        name = next(iter(model.variables))
        if jnp.ndim(pos[name]) == len(model.variables[name].shape) + 1:
            pos = jax.tree.map(lambda x: x[-1], pos)
        return model.energy(params, pos)

    def energies(params, state):
        if isinstance(state, ParallelTemperingState) and not isinstance(state.replicas, dict):
            # replicas kept in a lattice layout: the beta = 1 replica of every chain (chains lead, replicas next)
            state = jax.tree.map(lambda x: x[:, -1], state.replicas)
        # a lattice chain kept as four-sub-lattice words: the same energies from the words, not unpacked
        of_words = getattr(model, "energy_of_words", None)
        if of_words is not None and isinstance(state, checkerboard.LatticeGibbsState):
            out = of_words(params, type(state).layout, state.even, state.odd, type(state).chains_last)
            if out is not None:
                return out
        return jax.vmap(lambda pos: energy(params, pos))(chains_first(state).position)

    @_compile.jit
    def run(rng_key, position, params, build_args):
        algorithm = build(build_args)
        num_chains = jnp.shape(jax.tree.leaves(position)[0])[0]
        states = position if from_state else jax.vmap(algorithm.init)(position)
        # chains are independent: a lattice state on a CPU runs in groups of chains small enough to stay in
        # the caches, every step of one group before the next, with each chain's keys as in one group
        group = chain_group(states, num_chains, group_bytes) if group_bytes and trace_fn is None else num_chains
        carried = num_samples >= 2 or thin >= 2

        def chain_keys(key, shape):
            return drawn_flat(jax.random.split, key, shape + (num_chains,))

        key_warm, key_draw = split_key(rng_key)
        warm_keys = chain_keys(key_warm, (num_warmup,)) if 0 < num_warmup * num_chains <= _PRESPLIT_KEYS else None
        draw_keys = chain_keys(key_draw, (num_samples, thin)) if num_samples * thin * num_chains <= _PRESPLIT_KEYS else None

        def run_chains(states, first):
            """Warm-up and draws of the ``group`` chains from chain ``first`` on: ``(final, outs)``, chains first."""

            def mine(keys, lead):  # the group's keys: their chain axis follows ``lead`` axes
                return keys if group == num_chains else jax.lax.dynamic_slice_in_dim(keys, first, group, axis=lead)

            # the scan carries the chains in the layout the kernel's batched step prefers (e.g. trailing) when
            # every step's state passes through a loop (at least two draws, or thin steps in their own loop);
            # what a caller sees (trace, kept states, final_state) has them leading
            states, axis = chains_last(states, group, carried=carried)
            step = jax.vmap(algorithm.step, in_axes=(0, axis), out_axes=(axis, 0))
            without_counts = getattr(type(states), "without_counts", None)
            if trace_fn is not None and without_counts is not None:
                keys = jax.eval_shape(lambda k: chain_keys(k, ())[:group], key_draw)
                info = jax.eval_shape(step, keys, states)[1]
                if not _reads_info(lambda s, i: trace_fn(chains_first(s), i), states, info):
                    # nothing recorded reads the step's info: the sweep need not count the changed sites
                    states = without_counts(states)

            def record(state, info):
                recorded = energies(params, state) if model is not None else None
                state = chains_first(state)
                traced = trace(state, info)
                if trace_fn is not None and any(
                    jnp.ndim(x) < 1 or jnp.shape(x)[0] != num_chains for x in jax.tree.leaves(traced)
                ):
                    raise ValueError(
                        "`trace_fn(state, info)` receives all chains at once and must return leaves with a leading "
                        f"chain axis of length {num_chains}, got shapes {jax.tree.map(jnp.shape, traced)}"
                    )
                return state.position if keep_states else None, recorded, traced

            def one_draw(state, keys):
                # keys: (thin, chains) -- one key per chain for each step of the draw.  The thin steps run in
                # one loop (a single step sits in the loop over draws): every step's state is a loop carry
                if thin == 1:
                    state, info = step(keys[0], state)
                else:
                    info = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(step, keys[0], state)[1])
                    state, info = jax.lax.fori_loop(0, thin, lambda j, c: step(keys[j], c[0]), (state, info))
                return state, record(state, info)

            if num_warmup:
                if warm_keys is not None:  # all chain keys drawn at once
                    states, _ = jax.lax.scan(lambda s, k: (step(k, s)[0], None), states, mine(warm_keys, 1))
                else:
                    states, _ = jax.lax.scan(
                        lambda s, k: (step(mine(chain_keys(k, ()), 0), s)[0], None), states, split_key(key_warm, num_warmup)
                    )
            if draw_keys is not None:
                final, outs = jax.lax.scan(one_draw, states, mine(draw_keys, 2))
            else:
                final, outs = jax.lax.scan(
                    lambda s, k: one_draw(s, mine(chain_keys(k, (thin,)), 1)), states, split_key(key_draw, num_samples)
                )
            return chains_first(final), outs

        if group == num_chains:
            final, outs = run_chains(states, 0)
        else:
            n = num_chains // group
            split = jax.tree.map(lambda x: x.reshape((n, group) + x.shape[1:]), states)
            final, outs = jax.lax.map(lambda a: run_chains(*a), (split, jnp.arange(n) * group))
            final = jax.tree.map(lambda x: x.reshape((num_chains,) + x.shape[2:]), final)
            # (group, draw, chain in group, ...) -> (draw, chain, ...)
            outs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape((x.shape[1], num_chains) + x.shape[3:]), outs)
        # (draw, chain, ...) -> (chain, draw, ...)
        outs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), outs)
        return final, outs

    return run
