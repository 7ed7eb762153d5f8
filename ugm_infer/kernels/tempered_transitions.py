"""Tempered transitions (Neal 1996; Algorithm 2 of Salakhutdinov 2009).

A ladder of inverse temperatures :math:`\\beta_0 < \\beta_1 < \\dots < \\beta_S = 1`
defines :math:`p_s(x) \\propto p^*(x)^{\\beta_s}`.  Starting from the current state, a
*down* pass applies, for :math:`s = S-1, \\dots, 0`, a transition :math:`T_s` that
leaves :math:`p_s` invariant; an *up* pass then applies the reverse operators
:math:`\\tilde T_s` for :math:`s = 0, \\dots, S-1`.  Write :math:`\\hat x^{(s)}` for the
state the down pass *enters* temperature :math:`\\beta_s` with and
:math:`\\check x^{(s)}` for the state the up pass *leaves* it with (the last one is
the proposal).  The proposal is accepted with probability

.. math::

    \\min\\Bigl\\{1, \\prod_{s=0}^{S-1}
        p^*(\\hat x^{(s)})^{\\beta_s - \\beta_{s+1}}\\,
        p^*(\\check x^{(s)})^{\\beta_{s+1} - \\beta_s}\\Bigr\\}

(Neal 1996, section 3, with ``p_{s+1}/p_s = p^{*\\,\\beta_{s+1}-\\beta_s}``), i.e.
:math:`\\log A = \\sum_s (\\beta_{s+1} - \\beta_s)\\,(\\log p^*(\\check x^{(s)}) -
\\log p^*(\\hat x^{(s)}))`.  Normalising constants cancel; the ratio is accumulated
in log space as a sum of paired differences, so energies of order ``1e4`` neither
overflow nor lose the acceptance to cancellation.

Any ugm_infer kernel can be the base operator: ``T_s`` is ``base_kernel`` run on the
tempered density ``beta_s * logdensity_fn``, and ``T~_s`` is ``reverse_kernel`` (for a
Gibbs sweep: the same updates in reverse order — ``ui.kernels.gibbs.build_kernel(...,
reverse=True)``; for a reversible kernel the kernel itself).

References
----------
Neal, R. M. (1996). Sampling from multimodal distributions using tempered
transitions. Statistics and Computing 6, 353-366.
Salakhutdinov, R. (2009). Learning in Markov random fields using tempered
transitions. NIPS 22.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.base import SamplingAlgorithm

from ugm_infer._random import split as split_key
from ugm_infer._random import uniform
from ugm_infer.kernels._common import resolve_logdensity, temper, validate_position
from ugm_infer.kernels.gibbs import build_kernel as gibbs_build_kernel
from ugm_infer.kernels.gibbs import init as gibbs_init
from ugm_infer.kernels.gibbs import is_layout_state, state_logdensity

__all__ = [
    "TemperedTransitionsState",
    "TemperedTransitionsInfo",
    "init",
    "build_kernel",
    "as_top_level_api",
    "uniform_ladder",
    "check_ladder",
]


class TemperedTransitionsState(NamedTuple):
    """position: the current configuration (the chain at beta = 1)."""

    position: dict


class TemperedTransitionsInfo(NamedTuple):
    """Per-run diagnostics.

    acceptance_probability
        :math:`\\min(1, A)` of this run.
    is_accepted
        Whether the proposal was accepted.
    log_acceptance_ratio
        :math:`\\log A` (may be ``+large``; never overflows).
    log_ratio_terms
        ``(S,)`` contribution of each temperature ``beta_0 .. beta_{S-1}`` to
        :math:`\\log A` (used by ladder adaptation to find the rungs that reject).
    """

    acceptance_probability: jax.Array
    is_accepted: jax.Array
    log_acceptance_ratio: jax.Array
    log_ratio_terms: jax.Array


def uniform_ladder(num_betas: int, beta_min: float, beta_max: float = 1.0) -> np.ndarray:
    """``num_betas`` inverse temperatures uniform in ``[beta_min, beta_max]``, ascending.

    Salakhutdinov (2009) uses ``uniform_ladder(50, 0.9)``.
    """
    if not isinstance(num_betas, (int, np.integer)) or num_betas < 2:
        raise ValueError(f"`num_betas` must be an int >= 2, got {num_betas!r}")
    if not 0.0 <= beta_min < beta_max:
        raise ValueError(f"need 0 <= beta_min < beta_max, got {beta_min}, {beta_max}")
    return np.linspace(beta_min, beta_max, num_betas)


def check_ladder(betas: Any) -> np.ndarray:
    """Validate an ascending ladder ending at 1 (host-side); returns float32 numpy."""
    arr = np.asarray(betas, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(f"`betas` must be a 1-D array of at least 2 inverse temperatures, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("`betas` must be finite and >= 0")
    if np.any(np.diff(arr) <= 0):
        raise ValueError("`betas` must be strictly increasing (beta_0 < ... < beta_S = 1)")
    if not np.isclose(arr[-1], 1.0):
        raise ValueError(f"the last entry of `betas` must be 1 (the target), got {arr[-1]}")
    return arr.astype(np.float32)


def init(position: dict, logdensity_fn: Callable | None = None) -> TemperedTransitionsState:
    del logdensity_fn
    return TemperedTransitionsState(dict(position))


def _default_base(model, params, base_kernel, reverse_kernel, base_init):
    if base_kernel is None:
        base_kernel = gibbs_build_kernel(model, "block", 1, params=params)
        reverse_kernel = gibbs_build_kernel(model, "block", 1, params=params, reverse=True)
        base_init = gibbs_init
    if reverse_kernel is None:
        reverse_kernel = base_kernel
    if base_init is None:
        raise ValueError("a custom `base_kernel` needs its `base_init(position, logdensity_fn)`")
    return base_kernel, reverse_kernel, base_init


def build_kernel(
    model=None,
    betas: Any = None,
    *,
    base_kernel: Callable | None = None,
    reverse_kernel: Callable | None = None,
    base_init: Callable | None = None,
    params: Any = None,
):
    """Build a tempered-transitions kernel.

    Parameters
    ----------
    model
        The model (used to build the default Gibbs base operator; may be ``None``
        when ``base_kernel`` is given).
    betas
        Ascending inverse temperatures ending at 1, e.g. ``uniform_ladder(50, 0.9)``.
    base_kernel, reverse_kernel, base_init
        The operator ``T_s`` as a ugm_infer kernel ``kernel(rng_key, state,
        logdensity_fn)`` with its ``init(position, logdensity_fn)``, and its reverse
        ``T~_s`` (defaults to ``base_kernel``: right for reversible kernels).  Default:
        one block-Gibbs sweep and the reversed sweep.
    params
        Example parameters for block detection of the default Gibbs operator.

    Returns
    -------
    kernel(rng_key, state, logdensity_fn) -> (TemperedTransitionsState, TemperedTransitionsInfo)
    """
    if betas is None:
        raise ValueError("`betas` is required, e.g. ui.kernels.tempered_transitions.uniform_ladder(50, 0.9)")
    ladder = jnp.asarray(check_ladder(betas))
    if model is None and base_kernel is None:
        raise ValueError("pass a `model` (default Gibbs operator) or a `base_kernel`")
    default_base = base_kernel is None
    forward, backward, base_init = _default_base(model, params, base_kernel, reverse_kernel, base_init)
    # down pass visits beta_{S-1}, ..., beta_0; the up pass the same in reverse order
    down_betas = ladder[:-1][::-1]
    # weight of temperature s: beta_{s+1} - beta_s, aligned with down_betas
    down_gaps = (ladder[1:] - ladder[:-1])[::-1]

    def kernel(rng_key, state: TemperedTransitionsState, logdensity_fn: Callable):
        key_down, key_up, key_accept = split_key(rng_key, 3)
        # the default Gibbs operator on a lattice: the run stays in the sweep's layout (converted once each
        # way per run, not per sweep) and the densities come from that layout (up to a constant, which
        # cancels in every term of the acceptance ratio)
        start = gibbs_init(state.position, logdensity_fn) if default_base else None
        kept = start is not None and is_layout_state(start)

        def move(op, key, chain, beta):
            tempered = temper(logdensity_fn, beta)
            if kept:
                return op(key, chain, tempered)[0]
            new_state, _ = op(key, base_init(chain, tempered), tempered)
            return new_state.position

        def log_p(chain):
            return state_logdensity(chain, logdensity_fn) if kept else logdensity_fn(chain)

        def down(chain, inp):
            beta, key = inp
            entering = log_p(chain)  # log p*(x^_{s+1}): the state entering beta_s
            return move(forward, key, chain, beta), entering

        chain = start if kept else state.position
        bottom, log_p_down = jax.lax.scan(down, chain, (down_betas, split_key(key_down, len(down_betas))))

        def up(chain, inp):
            beta, key = inp
            new = move(backward, key, chain, beta)
            return new, log_p(new)  # log p*(x~_{s+1}): the state leaving beta_s

        up_betas = down_betas[::-1]
        proposal, log_p_up = jax.lax.scan(up, bottom, (up_betas, split_key(key_up, len(up_betas))))
        proposal = proposal.position if kept else proposal
        # align: log_p_up[k] belongs to temperature up_betas[k] = down_betas[S-1-k]
        terms = (down_gaps * (log_p_up[::-1] - log_p_down))[::-1]  # ordered like betas[:-1]
        log_ratio = jnp.sum(terms)
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        accept = jnp.log(uniform(key_accept)) < log_ratio
        position = jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposal, state.position)
        info = TemperedTransitionsInfo(jnp.exp(jnp.minimum(log_ratio, 0.0)), accept, log_ratio, terms)
        return TemperedTransitionsState(position), info

    return kernel


def as_top_level_api(
    model,
    params: Any = None,
    *,
    betas: Any = None,
    logdensity_fn: Callable | None = None,
    base_kernel: Callable | None = None,
    reverse_kernel: Callable | None = None,
    base_init: Callable | None = None,
) -> SamplingAlgorithm:
    """Tempered-transitions sampler for ``model`` at ``params`` (one chain; not jitted).

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> model = ui.models.lattice_ising(4, 4)
    >>> params = model.init_params(jax.random.key(0))
    >>> tt = ui.kernels.tempered_transitions(model, params, betas=ui.kernels.tempered_transitions.uniform_ladder(10, 0.5))
    >>> state = tt.init(model.random_state(jax.random.key(1)))
    >>> state, info = tt.step(jax.random.key(2), state)
    """
    logdensity_fn = resolve_logdensity(model, params, logdensity_fn)
    kernel = build_kernel(
        model, betas, base_kernel=base_kernel, reverse_kernel=reverse_kernel, base_init=base_init, params=params
    )

    def init_fn(position, rng_key=None):
        del rng_key
        return init(validate_position(model, position))

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)
