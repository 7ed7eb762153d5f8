"""Gibbs sampling (heat bath) for discrete models.

Each site (or block of conditionally independent sites) is redrawn from its full
conditional

.. math::  p(x_i = k \\mid x_{-i}) \\propto \\exp(\\log p(x_{-i}, x_i = k)),

computed from ``logdensity_fn`` only, so the kernel targets whatever density it is
handed: ``-E`` (sampling), ``-beta E`` (tempering), or a geometric bridge (SMC, AIS,
learners).  Three scan orders:

``"block"``
    one pass over the model's blocks (declared or detected colour classes); all
    sites of a block are drawn in parallel.  For multilinear binary/spin energies
    the conditionals of a block come from one ``jax.grad`` of ``logdensity_fn``;
    otherwise every value of every site is evaluated.  Two densities get faster
    exact sweeps automatically: a lattice Ising density
    (:class:`~ugm_infer.kernels.checkerboard.LatticeLogDensity`, from
    ``lattice_ising`` or a user energy recognised as one, even sizes) runs the
    four-sub-lattice sweep of :mod:`~ugm_infer.kernels.checkerboard`, with the chain
    kept in that layout between steps (:class:`~ugm_infer.kernels.checkerboard.LatticeGibbsState`);
    a density with pairwise couplings
    (:class:`~ugm_infer.kernels.pairwise.CouplingLogDensity`, dense Boltzmann
    machines and semi-RBMs) updates its single-site blocks from incrementally
    maintained fields (:mod:`~ugm_infer.kernels.pairwise`); the density of a
    ``lattice_potts`` model with even sizes
    (:class:`~ugm_infer.kernels.potts_lattice.PottsLogDensity`) runs the
    four-sub-lattice Potts sweep of :mod:`~ugm_infer.kernels.potts_lattice`, the chain
    kept in that layout (:class:`~ugm_infer.kernels.potts_lattice.PottsLatticeState`).
    ``method="multispin"``
    selects the bit-packed lattice sweep (:mod:`~ugm_infer.kernels.multispin`).
``"systematic"``
    single-site updates in a fixed order (variables in declaration order, sites in
    row-major order), ``K`` log-density evaluations per site.
``"random"``
    ``num_sites`` single-site updates at uniformly random sites.

One ``step`` performs ``num_sweeps`` sweeps.  The built kernel has BlackJAX's
inner-kernel signature ``kernel(rng_key, state, logdensity_fn) -> (state, info)``,
so it can be the ``mcmc_step_fn`` of :func:`blackjax.adaptive_tempered_smc`.

References
----------
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE TPAMI 6, 721-741.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer._random import split as split_key
from ugm_infer.kernels import _updates, checkerboard, multispin, pairwise, potts_lattice
from ugm_infer.kernels._common import (
    attach_recipe,
    check_initial_logdensity,
    check_model,
    resolve_logdensity,
    resolve_structure,
    validate_position,
)

__all__ = ["GibbsState", "GibbsInfo", "init", "build_kernel", "as_top_level_api", "is_layout_state", "state_logdensity"]

SCANS = ("block", "systematic", "random")
# above this many blocks a sweep is one lax.scan over stacked blocks instead of unrolled
# updates, so compilation time does not grow with the number of blocks (dense models)
MAX_UNROLLED_BLOCKS = 4


class GibbsState(NamedTuple):
    """State of one Gibbs chain.

    position
        The configuration, a dict ``{name: array}``.
    """

    position: dict


class GibbsInfo(NamedTuple):
    """Per-step diagnostics.

    num_changed
        Number of sites whose value differs after the step (a cheap mixing signal;
        dead chains show zeros).  ``-1`` (not counted) for lattice states a driver
        marked as not reading it (``LatticeGibbsState.without_counts``: ``ui.sample``
        with a ``trace_fn`` that ignores the info).
    """

    num_changed: jax.Array


def init(position: dict, logdensity_fn: Callable | None = None) -> GibbsState | checkerboard.LatticeGibbsState:
    """Wrap a position in a chain state.

    For the log-density of a lattice Ising model with even sizes
    (:class:`~ugm_infer.kernels.checkerboard.LatticeLogDensity`) the state is a
    :class:`~ugm_infer.kernels.checkerboard.LatticeGibbsState`, which stores the
    chain in the four-sub-lattice layout the block sweep works on; its ``position``
    is unpacked when read.  Otherwise a :class:`GibbsState`.
    """
    layout = _lattice_layout(position, logdensity_fn)
    if layout is not None:
        return checkerboard.state_type(layout)(*layout.pack(position[layout.name]))
    potts = potts_lattice.lattice_of(logdensity_fn)
    if potts is not None and isinstance(position, dict) and set(position) == {"x"}:
        x = position["x"]
        if jnp.shape(x) == (potts.height * potts.width,):
            return potts_lattice.state_type(potts, jnp.result_type(x)).of(potts.split(x))
    return GibbsState(dict(position))


def is_layout_state(state) -> bool:
    """True for a chain kept in a lattice sweep's own layout (lattice Ising words, lattice Potts sub-lattices).

    Such a state holds the configuration only (no cached density), so a driver may
    keep it between steps, permute it between temperatures (parallel tempering) and
    read its position when it needs one.
    """
    return isinstance(state, (checkerboard.LatticeGibbsState, potts_lattice.PottsLatticeState))


def state_logdensity(state, logdensity_fn: Callable) -> jax.Array:
    """``logdensity_fn`` at the configuration of one chain's ``state``, up to a constant of the density.

    ``state`` is one chain as a kernel sees it (``vmap`` over chains for many).

    A lattice chain kept in its sweep's layout under its own lattice density is
    evaluated from that layout, without rebuilding the configuration: for a lattice
    Ising density ``beta (J sum_<ij> s_i s_j + h sum_i s_i)`` from the words
    (:func:`~ugm_infer.kernels.checkerboard.pair_and_total`; for ``lattice_ising``
    exactly its log-density, for a user energy recognised as a lattice that minus its
    constant term), for a lattice Potts density ``-beta E`` from the sub-lattices
    (:func:`~ugm_infer.kernels.potts_lattice.energy_of_sublattices`, equal up to float
    rounding).  Any other state or density: ``logdensity_fn(state.position)``.  Meant
    for differences between chains under one density (swap and acceptance ratios),
    where the constant cancels.
    """
    if isinstance(state, checkerboard.LatticeGibbsState) and isinstance(logdensity_fn, checkerboard.LatticeLogDensity):
        layout = type(state).layout
        if logdensity_fn.layout(layout.dtype) == layout and layout.height * layout.width <= 1 << 22:
            pair, total = checkerboard.pair_and_total(layout, state.even, state.odd)  # one chain: (h, w) words
            J, h = (jnp.asarray(v) for v in (logdensity_fn.J, logdensity_fn.h))
            dtype = jnp.result_type(J, h, jnp.float32)
            # the model's arithmetic: -beta E with E = -J pair - h total, the sums exact in the float dtype
            energy = -J.astype(dtype) * pair.astype(dtype) - h.astype(dtype) * total.astype(dtype)
            return -logdensity_fn.beta * energy
    if isinstance(state, potts_lattice.PottsLatticeState):
        lat = type(state).lattice
        if potts_lattice.lattice_of(logdensity_fn) == lat:
            tables = logdensity_fn.tables[: potts_lattice.NUM_TABLES]
            energy = potts_lattice.energy_of_sublattices(lat, tuple(x[None] for x in state), tables)[0]  # one chain
            return -logdensity_fn.beta * energy
    return logdensity_fn(state.position)


def _lattice_layout(position, logdensity_fn):
    """The four-sub-lattice layout of ``position`` under ``logdensity_fn``, or ``None``."""
    if not isinstance(logdensity_fn, checkerboard.LatticeLogDensity) or not isinstance(position, dict):
        return None
    name = logdensity_fn.name
    if set(position) != {name}:
        return None
    layout = logdensity_fn.layout(jnp.result_type(position[name]))
    if layout is None or jnp.shape(position[name]) != (layout.height, layout.width):
        return None
    return layout


def build_sweep(model, scan: str = "block", params: Any = None, reverse: bool = False):
    """One Gibbs sweep ``sweep(rng_key, position, logdensity_fn) -> position``.

    ``reverse=True`` applies the same updates in the opposite order (the reverse
    operator tempered transitions need).
    """
    check_model(model)
    if scan not in SCANS:
        raise ValueError(f"`scan` must be one of {SCANS}, got {scan!r}")
    variables = model.variables
    if scan == "block":
        model = resolve_structure(model, params)
        built: list = []  # (generic, pairwise) sweeps, built at the first call: the lattice path never calls them

        def sweep(rng_key, position, logdensity_fn):
            if not built:  # possibly inside a trace: the set-up's arrays must be constants, not tracers
                with jax.ensure_compile_time_eval():
                    built.append((_block_sweep(model, reverse), _pairwise_sweep(model, reverse)))
            generic, pairwise_sweep = built[0]
            if pairwise_sweep is not None and pairwise_sweep.applies(logdensity_fn):
                return pairwise_sweep(rng_key, position, logdensity_fn)
            return generic(rng_key, position, logdensity_fn)

        return sweep

    def sweep(rng_key, position, logdensity_fn):
        # logdensity_fn is a Python closure, not an array: close over it instead of carrying it
        def fn(k, c, n, d, i):
            return _updates.heat_bath_site(k, c, n, d, i, logdensity_fn)

        if scan == "systematic":
            inner = _updates.systematic_scan(variables, fn, reverse=reverse)
        else:

            def global_fn(k, c, sites, g):
                return _updates.heat_bath_global(k, c, sites, g, logdensity_fn)

            inner = _updates.random_scan(variables, fn, num_updates=model.num_sites, global_fn=global_fn)
        return inner(rng_key, position)

    return sweep


def _block_sweep(model, reverse: bool):
    """The generic block sweep: one update per block, from a gradient or by enumeration."""
    variables = model.variables
    if len(model.blocks) > MAX_UNROLLED_BLOCKS:
        stacked = _updates.stacked_block_sweep(model.blocks, variables, gradient=model.multilinear)

        def sweep(rng_key, position, logdensity_fn):
            return stacked(rng_key, position, logdensity_fn, reverse=reverse)

        return sweep
    make = _updates.gradient_block_update if model.multilinear else _updates.enumeration_block_update
    updates = [make(block, variables) for block in model.blocks]
    if reverse:
        updates = updates[::-1]

    def sweep(rng_key, position, logdensity_fn):
        keys = split_key(rng_key, len(updates))
        for key, update in zip(keys, updates):
            position = update(key, position, logdensity_fn)
        return position

    return sweep


class _PairwiseSweep:
    """A block sweep whose runs of single-site blocks use incrementally updated fields.

    Applies to a :class:`~ugm_infer.kernels.pairwise.CouplingLogDensity` giving the
    couplings of every variable with such a run (:mod:`ugm_infer.kernels.pairwise`);
    the other blocks are updated as in the generic sweep.
    """

    def __init__(self, model, segments, reverse: bool):
        self.names = {seg[1] for seg in segments if seg[0] == "run"}
        self.updates = []
        for seg in segments[::-1] if reverse else segments:
            if seg[0] == "run":
                sites = seg[2][::-1].copy() if reverse else seg[2]
                self.updates.append(pairwise.sequential_update(seg[1], model.variables[seg[1]], sites))
            else:
                make = _updates.gradient_block_update if model.multilinear else _updates.enumeration_block_update
                self.updates.append(make(seg[1], model.variables))

    def applies(self, logdensity_fn) -> bool:
        if not isinstance(logdensity_fn, pairwise.CouplingLogDensity):
            return False
        return self.names <= set(logdensity_fn.couplings())

    def __call__(self, rng_key, position, logdensity_fn):
        if len(self.updates) == 1:
            return self.updates[0](rng_key, position, logdensity_fn)
        keys = split_key(rng_key, len(self.updates))
        for key, update in zip(keys, self.updates):
            position = update(key, position, logdensity_fn)
        return position


def _pairwise_sweep(model, reverse: bool):
    """The :class:`_PairwiseSweep` of ``model``'s blocks, or ``None`` if they have no run of single sites."""
    if not model.multilinear:
        return None
    segments = pairwise.single_site_runs(model.blocks, model.variables)
    if not any(seg[0] == "run" and len(seg[2]) > 1 for seg in segments):
        return None
    return _PairwiseSweep(model, segments, reverse)


METHODS = ("auto", "multispin")


def build_kernel(
    model, scan: str = "block", num_sweeps: int = 1, *, params: Any = None, reverse: bool = False, method: str = "auto"
):
    """Build a Gibbs kernel for ``model``.

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel`.
    scan
        ``"block"``, ``"systematic"`` or ``"random"`` (see the module docstring).
    num_sweeps
        Sweeps per step (a Python int >= 1).
    params
        Example parameters, used only to detect blocks and multilinearity when the
        model does not declare them (``scan="block"``).
    reverse
        Apply the sweep's updates in reverse order.
    method
        ``"auto"`` (default): the fastest exact update the model and the density allow
        (the four-sub-lattice sweep for lattice Ising densities, incremental fields
        for dense pairwise models, else one gradient or enumeration per block).
        ``"multispin"``: the bit-packed sweep of :mod:`ugm_infer.kernels.multispin`
        (periodic ``lattice_ising`` with even sizes >= 4, ``scan="block"``, the
        model's own log-density); vectorised over chains it packs 32 chains per
        word (see :func:`~ugm_infer.kernels.multispin.build_chain_kernel`).

    Returns
    -------
    kernel(rng_key, state, logdensity_fn) -> (GibbsState, GibbsInfo)
    """
    if isinstance(num_sweeps, bool) or not isinstance(num_sweeps, (int, np.integer)) or num_sweeps < 1:
        raise ValueError(f"`num_sweeps` must be a positive int, got {num_sweeps!r}")
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
    if method == "multispin":
        return _multispin_kernel(model, scan, num_sweeps, reverse)
    sweep = build_sweep(model, scan, params, reverse)
    lattice_sweeps: dict = {}  # four-sub-lattice sweeps by layout, built at first use
    potts_steps: dict = {}  # four-sub-lattice Potts sweeps by lattice, built at first use

    def run(rng_key, start, logdensity_fn):
        if num_sweeps == 1:
            return sweep(rng_key, start, logdensity_fn)
        position, _ = jax.lax.scan(lambda p, k: (sweep(k, p, logdensity_fn), None), start, split_key(rng_key, num_sweeps))
        return position

    def run_lattice(rng_key, layout, words, logdensity_fn, chains_last=False, straight=False, counts=True):
        """The new words (with change flags); with ``chains_last`` (a batched state's layout) also the count.

        ``straight``: words a loop carries (:meth:`~ugm_infer.kernels.checkerboard.LatticeGibbsState.as_carried`);
        ``counts=False``: no change flags (the count, with ``chains_last``, is -1).
        """
        if (layout, chains_last, straight, counts) not in lattice_sweeps:
            sweep = checkerboard.build_sweep(
                layout, num_sweeps, reverse, track_changes=counts, chains_last=chains_last, straight=straight
            )
            lattice_sweeps[layout, chains_last, straight, counts] = sweep
        table = layout.thresholds(logdensity_fn.J, logdensity_fn.h, logdensity_fn.beta)
        return lattice_sweeps[layout, chains_last, straight, counts](rng_key, *words, table)

    def run_potts(rng_key, lat, sites, logdensity_fn, chains_last=False):
        """``(a, b, c, d, num_changed)`` after the sweeps (``chains_last``: the layout of a batched state)."""
        if (lat, chains_last) not in potts_steps:
            potts_steps[lat, chains_last] = potts_lattice.build_step(lat, num_sweeps, reverse, chains_last)
        # a density lattice_of accepts made its sweep tables when it was created
        step = potts_steps[lat, chains_last]
        return step(rng_key, sites, logdensity_fn.J, logdensity_fn.tables, logdensity_fn.beta)

    def kernel(rng_key, state: GibbsState, logdensity_fn: Callable) -> tuple[GibbsState, GibbsInfo]:
        if isinstance(state, checkerboard.LatticeGibbsState):
            layout = type(state).layout
            same = isinstance(logdensity_fn, checkerboard.LatticeLogDensity) and logdensity_fn.layout(layout.dtype) == layout
            counts = type(state).counts_changes  # False: a driver that does not read the info (-1, not counted)
            if scan == "block" and same and type(state).chains_last:  # counted inside the batched sweep
                even, odd, changed = run_lattice(
                    rng_key, layout, tuple(state), logdensity_fn, chains_last=True, counts=counts
                )
                return type(state)(even, odd), GibbsInfo(changed)
            if scan == "block" and same:  # the words carry change flags: counted without the old words
                words = run_lattice(
                    rng_key, layout, tuple(state), logdensity_fn, straight=type(state).carried, counts=counts
                )
                changed = checkerboard.count_flags(*words, reverse) if counts else jnp.int32(-1)
                return type(state)(*words), GibbsInfo(changed)
            # another target or scan order: the generic sweep of the unpacked position
            words = layout.pack(run(rng_key, state.position, logdensity_fn)[layout.name])
            return type(state)(*words), GibbsInfo(checkerboard.count_changed(tuple(state), words))
        if isinstance(state, potts_lattice.PottsLatticeState):
            lat = type(state).lattice
            if scan == "block" and potts_lattice.lattice_of(logdensity_fn, model) == lat:
                *sub, changed = run_potts(rng_key, lat, tuple(state), logdensity_fn, type(state).chains_last)
                return type(state)(*sub), GibbsInfo(changed)
            else:  # another target or scan order: the generic sweep of the joined position
                new = type(state).of(lat.split(run(rng_key, state.position, logdensity_fn)["x"]))
            return new, GibbsInfo(potts_lattice.count_changed(state, new))
        start = state.position
        potts = potts_lattice.lattice_of(logdensity_fn, model) if scan == "block" else None
        if potts is not None and set(start) == {"x"}:  # a plain state under a lattice Potts density
            sub = tuple(potts_lattice.PottsLatticeState.of(potts.split(start["x"])))
            *sub, _ = run_potts(rng_key, potts, sub, logdensity_fn)
            x = potts.join(jnp.stack(sub, axis=-3), start["x"].dtype)
            return GibbsState({"x": x}), GibbsInfo(_updates.count_changed(start, {"x": x}))
        layout = _lattice_layout(start, logdensity_fn) if scan == "block" else None
        if layout is not None:  # a plain state under a lattice density: sweep in the lattice layout
            words = run_lattice(rng_key, layout, layout.pack(start[layout.name]), logdensity_fn)
            position = {layout.name: layout.unpack(*words)}
            return GibbsState(position), GibbsInfo(checkerboard.count_flags(*words, reverse))
        position = run(rng_key, start, logdensity_fn)
        return GibbsState(position), GibbsInfo(_updates.count_changed(start, position))

    return kernel


def _multispin_kernel(model, scan: str, num_sweeps: int, reverse: bool):
    """The ``method="multispin"`` kernel (see :func:`build_kernel`)."""
    if scan != "block" or reverse:
        raise ValueError("method='multispin' is a checkerboard block sweep: use scan='block' and reverse=False")
    step = multispin.build_chain_kernel(model, num_sweeps)
    structure = (model.height, model.width, model.periodic, model.domain)

    def kernel(rng_key, state, logdensity_fn: Callable) -> tuple[GibbsState, GibbsInfo]:
        if not (isinstance(logdensity_fn, checkerboard.LatticeLogDensity) and logdensity_fn.structure == structure):
            raise TypeError(
                "method='multispin' samples the lattice's own log-density (model.logdensity_fn(params, beta) or a "
                f"tempered copy of it), got {type(logdensity_fn).__name__}"
            )
        start = state.position
        spins = step(rng_key, start["s"], logdensity_fn.J, logdensity_fn.h, logdensity_fn.beta)
        info = GibbsInfo(_updates.count_changed(start, {"s": spins}))
        if isinstance(state, checkerboard.LatticeGibbsState):
            return type(state)(*type(state).layout.pack(spins)), info
        return GibbsState({"s": spins}), info

    return kernel


def as_top_level_api(
    model,
    params: Any = None,
    *,
    logdensity_fn: Callable | None = None,
    beta: float = 1.0,
    scan: str = "block",
    num_sweeps: int = 1,
    method: str = "auto",
) -> SamplingAlgorithm:
    """Gibbs sampler for ``model`` at ``params`` (or any ``logdensity_fn``).

    Returns a :class:`blackjax.base.SamplingAlgorithm` acting on one chain; ``vmap``
    ``init`` and ``step`` over chains (``ui.sample`` does).  Not jitted.  ``method``
    chooses the update as in :func:`build_kernel`: ``"auto"``, or ``"multispin"`` for
    the bit-packed lattice sweep (32 chains per word under ``vmap``).  Built from
    ``params``, the algorithm carries a recipe so ``ui.sample`` compiles it once for
    any parameter values.

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.lattice_ising(4, 4)
    >>> params = model.init_params(jax.random.key(0))
    >>> gibbs = ui.kernels.gibbs(model, params)
    >>> state = gibbs.init(model.random_state(jax.random.key(1)))
    >>> state, info = gibbs.step(jax.random.key(2), state)
    """
    given = logdensity_fn is not None
    logdensity_fn = resolve_logdensity(model, params, logdensity_fn, beta)
    kernel = build_kernel(model, scan, num_sweeps, params=params, method=method)
    state_init = (lambda position, _: GibbsState(dict(position))) if method == "multispin" else init

    def init_fn(position, rng_key=None):
        del rng_key
        position = validate_position(model, position)
        check_initial_logdensity(logdensity_fn, position)
        return state_init(position, logdensity_fn)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    algorithm = SamplingAlgorithm(init_fn, step_fn)
    if given:
        return algorithm
    return attach_recipe(
        algorithm,
        ("gibbs", model, scan, num_sweeps, method),
        (params, beta),
        lambda args: as_top_level_api(model, args[0], beta=args[1], scan=scan, num_sweeps=num_sweeps, method=method),
        params=params,
    )
