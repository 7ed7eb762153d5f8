"""Parallel tempering / replica exchange for discrete models (Swendsen & Wang 1986; Geyer 1991).

One replica per inverse temperature :math:`\\beta_0 < \\dots < \\beta_{R-1} = 1`, each
targeting :math:`p_h(x) \\propto p^*(x)^{\\beta_h}`.  A step moves every replica with
the base kernel on its tempered density, then proposes swaps between adjacent
temperatures — the even pairs ``(0,1), (2,3), ...`` on even steps and the odd pairs
``(1,2), (3,4), ...`` on odd steps — accepted with probability

.. math::

    \\min\\{1, \\exp((\\beta_h - \\beta_{h+1})(E(x_h) - E(x_{h+1})))\\}
    = \\min\\{1, \\exp((\\beta_{h+1} - \\beta_h)(\\log p^*(x_h) - \\log p^*(x_{h+1})))\\},

computed in log space.  The replica at :math:`\\beta = 1` (the last one) is the sample:
:func:`target_position` extracts it.

Each replica position is tagged with a *walker* id so that the info can report round
trips (a walker travelling from the hottest temperature to the coldest and back), the
standard measure of how well the ladder mixes; swap acceptance is reported per
adjacent pair.

References
----------
Swendsen, R. H. and Wang, J.-S. (1986). Replica Monte Carlo simulation of spin
glasses. Phys. Rev. Lett. 57, 2607.
Geyer, C. J. (1991). Markov chain Monte Carlo maximum likelihood. Computing Science
and Statistics: Proc. 23rd Symposium on the Interface, 156-163.
Desjardins, G., Courville, A., Bengio, Y., Vincent, P. and Delalleau, O. (2010).
Tempered Markov chain Monte Carlo for training of restricted Boltzmann machines.
AISTATS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm

from ugm_infer._random import split as split_key
from ugm_infer._random import uniform
from ugm_infer.kernels._common import is_concrete, resolve_logdensity, temper
from ugm_infer.kernels.gibbs import build_kernel as gibbs_build_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.kernels.gibbs import is_layout_state, state_logdensity
from ugm_infer.kernels.tempered_transitions import check_ladder

__all__ = [
    "ParallelTemperingState",
    "ParallelTemperingInfo",
    "init",
    "build_kernel",
    "as_top_level_api",
    "target_position",
    "target_state",
]


class ParallelTemperingState(NamedTuple):
    """State of one parallel-tempering chain.

    replicas
        The replicas stacked on a leading axis ordered like ``betas`` (the last one is
        at ``beta = 1``): configurations ``{name: (R, ...)}``, or, with the default
        block-Gibbs base kernel on a lattice, its chains in the sweep's own layout
        (:func:`~ugm_infer.kernels.gibbs.is_layout_state`), kept between steps.
    walker
        ``(R,)`` id of the walker at each temperature slot.
    direction
        ``(R,)`` per walker: ``+1`` if it last visited the hottest slot, ``-1`` if the
        coldest, ``0`` if neither yet.
    round_trips
        Number of completed hottest -> coldest -> hottest trips (all walkers).
    step
        Step counter (its parity selects the even or odd swap pairs).
    position
        The replica configurations ``{name: (R, ...)}`` (rebuilt from the layout when
        the replicas are kept in one).
    """

    replicas: Any
    walker: jax.Array
    direction: jax.Array
    round_trips: jax.Array
    step: jax.Array

    @property
    def position(self) -> dict:
        return dict(self.replicas) if isinstance(self.replicas, dict) else self.replicas.position


class ParallelTemperingInfo(NamedTuple):
    """Per-step diagnostics (``R - 1`` adjacent pairs, pair ``h`` = ``(h, h+1)``).

    swap_acceptance
        Acceptance probability of each pair's swap (0 for pairs not attempted).
    swap_attempted
        Which pairs were attempted this step.
    swap_accepted
        Which pairs swapped.
    round_trips
        Cumulative round trips after this step.
    """

    swap_acceptance: jax.Array
    swap_attempted: jax.Array
    swap_accepted: jax.Array
    round_trips: jax.Array


def init(
    position: dict, logdensity_fn: Callable | None = None, *, num_replicas: int | None = None, keep_layout: bool = False
):
    """Start all replicas at ``position`` (``num_replicas`` given) or from stacked replicas.

    ``keep_layout=True`` (with ``logdensity_fn``; for the default block-Gibbs base
    kernel): replicas of a lattice density are kept in the lattice sweep's layout
    (:func:`ugm_infer.kernels.gibbs.init`), so that a step neither converts them nor
    evaluates their densities from configurations.
    """
    if keep_layout and logdensity_fn is None:
        raise ValueError("`keep_layout=True` needs the `logdensity_fn` whose lattice layout the replicas are kept in")
    if num_replicas is not None:
        position = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_replicas,) + jnp.shape(x)), position)
    num = jax.tree.leaves(position)[0].shape[0]
    replicas = dict(position)
    if keep_layout:
        states = jax.vmap(lambda x: gibbs_init(x, logdensity_fn))(replicas)
        if is_layout_state(states):
            replicas = states
    walker = jnp.arange(num, dtype=jnp.int32)
    direction = jnp.zeros(num, jnp.int32).at[0].set(1)
    return ParallelTemperingState(replicas, walker, direction, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def target_position(state: ParallelTemperingState) -> dict:
    """The replica at ``beta = 1``."""
    target = target_state(state)
    return target if isinstance(target, dict) else target.position


def target_state(state: ParallelTemperingState):
    """The replica at ``beta = 1`` as it is stored (a configuration, or a chain in a lattice sweep's layout)."""
    return jax.tree.map(lambda x: x[-1], state.replicas)


def build_kernel(
    model=None,
    betas: Any = None,
    *,
    base_kernel: Callable | None = None,
    base_init: Callable | None = None,
    params: Any = None,
):
    """Build a parallel-tempering kernel ``kernel(rng_key, state, logdensity_fn)``.

    Parameters
    ----------
    model
        Model for the default base kernel (one block-Gibbs sweep per replica).
    betas
        Ascending inverse temperatures ending at 1 (one replica each).
    base_kernel, base_init
        Any ugm_infer kernel and its ``init(position, logdensity_fn)``.
    params
        Example parameters for block detection of the default Gibbs kernel.
    """
    if betas is None:
        raise ValueError("`betas` is required (ascending, ending at 1)")
    ladder = jnp.asarray(check_ladder(betas))
    num = ladder.shape[0]
    default_base = base_kernel is None
    if default_base:
        if model is None:
            raise ValueError("pass a `model` (default Gibbs base kernel) or a `base_kernel`")
        base_kernel = gibbs_build_kernel(model, "block", 1, params=params)
        base_init = gibbs_init
    elif base_init is None:
        raise ValueError("a custom `base_kernel` needs its `base_init(position, logdensity_fn)`")
    pairs = jnp.arange(num - 1)

    def kernel(rng_key, state: ParallelTemperingState, logdensity_fn: Callable):
        key_move, key_swap = split_key(rng_key)

        kept = not isinstance(state.replicas, dict)  # replicas in a lattice sweep's layout (see init)

        def move(key, replica, beta):
            tempered = temper(logdensity_fn, beta)
            if kept and default_base:  # the Gibbs kernel steps its own layout
                return base_kernel(key, replica, tempered)[0]
            if kept:  # a custom kernel: its state made from the configuration, the result put back in the layout
                new_state, _ = base_kernel(key, base_init(replica.position, tempered), tempered)
                return gibbs_init(new_state.position, logdensity_fn)
            new_state, _ = base_kernel(key, base_init(replica, tempered), tempered)
            return new_state.position

        replicas = jax.vmap(move)(split_key(key_move, num), state.replicas, ladder)
        if kept:  # from the layout (up to a constant, which cancels in the swap ratios)
            log_p = jax.vmap(lambda r: state_logdensity(r, logdensity_fn))(replicas)
        else:
            log_p = jax.vmap(logdensity_fn)(replicas)
        # attempted pairs alternate: even pairs on even steps, odd pairs on odd steps
        attempted = (pairs % 2) == (state.step % 2)
        log_ratio = (ladder[1:] - ladder[:-1]) * (log_p[:-1] - log_p[1:])
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        log_u = jnp.log(uniform(key_swap, (num - 1,)))
        accepted = attempted & (log_u < log_ratio)
        # attempted pairs are disjoint, so the swap is a permutation applied at once
        swap_up = jnp.concatenate([accepted, jnp.zeros(1, bool)])  # slot h takes h+1
        swap_down = jnp.concatenate([jnp.zeros(1, bool), accepted])  # slot h takes h-1
        slots = jnp.arange(num)
        source = jnp.where(swap_up, slots + 1, jnp.where(swap_down, slots - 1, slots))
        replicas = jax.tree.map(lambda x: x[source], replicas)
        walker = state.walker[source]
        # round trips: a walker that went hottest -> coldest completes one on reaching the hottest
        direction = state.direction
        hot, cold = walker[0], walker[num - 1]
        completed = direction[hot] == -1
        direction = direction.at[hot].set(1)
        direction = direction.at[cold].set(jnp.where(direction[cold] == 1, -1, direction[cold]))
        round_trips = state.round_trips + completed.astype(jnp.int32)
        info = ParallelTemperingInfo(
            jnp.where(attempted, jnp.exp(jnp.minimum(log_ratio, 0.0)), 0.0), attempted, accepted, round_trips
        )
        return ParallelTemperingState(replicas, walker, direction, round_trips, state.step + 1), info

    return kernel


def as_top_level_api(
    model,
    params: Any = None,
    *,
    betas: Any = None,
    logdensity_fn: Callable | None = None,
    base_kernel: Callable | None = None,
    base_init: Callable | None = None,
) -> SamplingAlgorithm:
    """Parallel tempering for ``model`` at ``params`` (one chain of ``len(betas)`` replicas).

    ``init(position)`` accepts one configuration (copied to every replica) or replicas
    stacked on a leading axis of size ``len(betas)``.
    """
    logdensity_fn = resolve_logdensity(model, params, logdensity_fn)
    kernel = build_kernel(model, betas, base_kernel=base_kernel, base_init=base_init, params=params)
    num = len(check_ladder(betas))

    def init_fn(position, rng_key=None):
        del rng_key
        leaves = jax.tree.leaves(position)
        first = next(iter(model.variables.values()))
        stacked = leaves and jnp.ndim(position[next(iter(model.variables))]) == len(first.shape) + 1
        if is_concrete(position):
            position = model.validate_state(position, batch_ndim=1 if stacked else 0, argname="position")
            if stacked and jax.tree.leaves(position)[0].shape[0] != num:
                raise ValueError(f"stacked `position` must have {num} replicas (one per beta)")
        return init(position, logdensity_fn, num_replicas=None if stacked else num, keep_layout=base_kernel is None)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)
