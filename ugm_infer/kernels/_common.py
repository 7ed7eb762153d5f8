"""Helpers shared by the kernel modules (argument resolution and validation)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import jax
import numpy as np

from ugm_infer.kernels import lattice_form


def temper(logdensity_fn: Callable, beta: Any) -> Callable:
    """``x -> beta * logdensity_fn(x)``, keeping a model's fast-kernel log-density recognisable.

    A log-density object with a ``tempered(beta)`` method (e.g.
    :class:`~ugm_infer.models.potts.PottsLogDensity`) returns its own tempered copy, so
    a specialised base kernel (``potts_gibbs``) stays on its fast path inside parallel
    tempering and tempered transitions; any other callable is wrapped.
    """
    tempered = getattr(logdensity_fn, "tempered", None)
    if callable(tempered):
        return tempered(beta)
    return lambda x: beta * logdensity_fn(x)


def is_concrete(tree) -> bool:
    """True when no leaf is a tracer (so host-side validation is possible)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def check_model(model) -> None:
    """Kernels are built for an :class:`~ugm_infer.EnergyModel` (or a subclass)."""
    from ugm_infer.model import EnergyModel

    if not isinstance(model, EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")


# models recognised as lattices, with their checkerboard blocks (copies; the user's model is untouched)
_WITH_LATTICE_BLOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def resolve_structure(model, params: Any):
    """The model with blocks/multilinearity resolved, probing at ``params`` if needed."""
    if model.has_structure:
        return model
    if model in _WITH_LATTICE_BLOCKS:
        return _WITH_LATTICE_BLOCKS[model]
    if params is None:
        raise ValueError(
            f"model '{model.name}' declares no blocks; pass `params=` when building the kernel "
            "(used only to probe the energy's interaction graph) or declare `blocks=`"
        )
    form = lattice_form.lattice_form(model, params)
    if form is not None and getattr(model, "_blocks", None) is None:
        # a recognised lattice (even sizes): its checkerboard colours are the blocks (no interaction-graph probe)
        colours = np.add.outer(np.arange(form[0]), np.arange(form[1])) % 2
        name = next(iter(model.variables))
        structured = model.with_blocks([{name: colours == c} for c in range(int(colours.max()) + 1)])
        # the recognition compared the energy with the lattice form on real states, so it is multilinear:
        # no Hessian probe (whose rows are as long as the lattice: gigabytes at 512 x 512)
        structured._multilinear = True
        _WITH_LATTICE_BLOCKS[model] = structured.detect_structure(params)
        return _WITH_LATTICE_BLOCKS[model]
    return model.detect_structure(params)


def resolve_logdensity(model, params: Any, logdensity_fn: Callable | None, beta: Any = 1.0) -> Callable:
    """Exactly one of ``params`` / ``logdensity_fn`` defines the target."""
    check_model(model)
    if (params is None) == (logdensity_fn is None):
        raise ValueError("pass exactly one of `params` (target exp(-beta E(params, x))) or `logdensity_fn`")
    if logdensity_fn is not None:
        if not callable(logdensity_fn):
            raise TypeError("`logdensity_fn` must be callable")
        return logdensity_fn
    if is_concrete(params):
        model.validate_params(params)
    fn = model.logdensity_fn(params, beta)
    form = lattice_form.lattice_form(model, params)
    if form is not None:  # a user energy with the uniform lattice form: the four-sub-lattice sweep applies
        return lattice_form.lattice_logdensity(model, params, beta, form, fn)
    return fn


def validate_position(model, position):
    """Validate a single-chain position when it is concrete (skipped under tracing)."""
    if is_concrete(position):
        return model.validate_state(position, batch_ndim=0, argname="position")
    return position


class Recipe(NamedTuple):
    """How a top-level sampling algorithm was built, so a driver can compile it once.

    ``build(args)`` returns the :class:`blackjax.base.SamplingAlgorithm` again, with the
    dynamic values ``args`` (e.g. ``(params, beta)``) possibly traced; ``key`` (hashable)
    holds everything else that defines it (kernel, model, static options).  Algorithms
    with equal keys compile to the same program, whatever their ``args``.  ``params``:
    the model parameters the algorithm samples at (``None``: not known).
    """

    key: Hashable
    args: Any
    build: Callable
    params: Any = None


def attach_recipe(algorithm, key: Hashable, args: Any, build: Callable, params: Any = None):
    """Record on ``algorithm.step`` how to rebuild ``algorithm`` (read by ``ui.sample``); returns ``algorithm``."""
    algorithm.step.ugm_recipe = Recipe(key, args, build, params)
    return algorithm


def recipe_of(algorithm) -> Recipe | None:
    """The :class:`Recipe` attached to ``algorithm`` (``None`` for algorithms built otherwise)."""
    recipe = getattr(algorithm.step, "ugm_recipe", None)
    return recipe if isinstance(recipe, Recipe) else None


def check_initial_logdensity(logdensity_fn: Callable, position, value: Any = None) -> None:
    """A concrete starting position must have a finite log-density (skipped under tracing).

    ``value`` is the log-density when the caller has already computed it.
    """
    if not (is_concrete(position) and (value is None or is_concrete(value))):
        return
    ld = float(logdensity_fn(position) if value is None else value)
    if not np.isfinite(ld):
        raise ValueError(
            f"the log-density is {ld} at the initial `position`: a chain cannot start where the energy is "
            "NaN or infinite (check `params` and the energy function)"
        )


#: from this many chains a kernel state that offers it is stepped with the chains on the trailing axis
MIN_CHAINS_LAST = 8
#: on a CPU, a driver runs the chains of a lattice state in groups of about this many bytes of state each
#: (see :func:`chain_group`)
GROUP_BYTES = 8 << 20
#: the fewest chains in a group (16 ``uint16`` words fill a 256-bit vector along the trailing chain axis)
MIN_GROUP = 16


def chain_group(states, num_chains: int, budget: int | None = None) -> int:
    """How many chains of ``states`` a driver steps together, all its steps one group after another.

    Chains are independent, so a run may take every step of one group of chains before
    the next group's, with the same draws.  A state type with a ``with_chains_last``
    class method (the lattice sweeps, whose step costs about one read of the state) is
    run in groups of the largest divisor of ``num_chains`` of at least
    :data:`MIN_GROUP` chains whose states take at most ``budget`` bytes (default :data:`GROUP_BYTES`; the
    smallest such divisor when none fits), so that a group stays in the CPU's caches
    from sweep to sweep (docs/performance.md, "Groups of chains", has the figures).
    Any other state, or no divisor of at least :data:`MIN_GROUP`, gives ``num_chains``
    (one group).
    """
    if getattr(type(states), "with_chains_last", None) is None:
        return num_chains
    per_chain = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(states))
    per_chain //= max(num_chains, 1)
    divisors = [g for g in range(MIN_GROUP, num_chains + 1) if num_chains % g == 0]
    if not divisors:
        return num_chains
    budget = GROUP_BYTES if budget is None else budget
    fits = [g for g in divisors if g * per_chain <= budget]
    return max(fits) if fits else min(divisors)


def chains_last(states, num_chains: int, carried: bool = True) -> tuple[Any, int]:
    """``(states, axis)``: batched kernel states in the layout their batched step runs fastest on.

    A state type with a ``with_chains_last`` class method (the lattice sweeps'
    :class:`~ugm_infer.kernels.checkerboard.LatticeGibbsState` and
    :class:`~ugm_infer.kernels.potts_lattice.PottsLatticeState`) keeps many chains on the
    trailing axis of every leaf: its states are converted once (one transpose) and
    ``axis = -1``, for ``jax.vmap(step, in_axes=(0, axis), out_axes=(axis, 0))``.  Fewer
    than :data:`MIN_CHAINS_LAST` chains stay chains-first (``axis = 0``), marked as a
    loop's carry where the type offers it (``as_carried``: the lattice Ising sweep then
    writes its colours as straight-line code).  Any other state, or ``carried=False``,
    is returned as it is with ``axis = 0``.  :func:`chains_first` converts back.

    ``carried`` says that the driver runs every step inside a loop that carries the
    states (a scan of at least two steps, or a step in the body of one): the
    chains-last sweeps write their colours as straight-line code, and XLA's CPU fusion
    writes a colour once only where a loop carries it; a lone step whose states flow
    straight into another step or into the conversion back would have each colour's
    update recomputed by every reader (tens of times slower).
    """
    to_last = getattr(type(states), "with_chains_last", None)
    if to_last is None or not carried:
        return states, 0
    if num_chains < MIN_CHAINS_LAST:
        as_carried = getattr(type(states), "as_carried", None)
        return (states if as_carried is None else as_carried(states)), 0
    return to_last(states), -1


def chains_first(states):
    """Batched kernel states with the chain axis leading again (inverse of :func:`chains_last`)."""
    to_first = getattr(type(states), "with_chains_first", None)
    return states if to_first is None else to_first(states)
