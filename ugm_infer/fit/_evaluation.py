"""What :func:`ugm_infer.fit` evaluates, and when.

What: the exact average log-likelihood when the model enumerates in at most
``2**22`` configurations, else the pseudo-log-likelihood of fully visible models, or a
user function (see :func:`build_evaluation`).

When (:class:`EvalSchedule`): before the first step of a fresh run, after the last
step, and in between either every ``eval_every`` epochs or, by default, at the end of
an epoch whenever the evaluations so far plus one more stay within
``EVAL_BUDGET = 10%`` of the training time so far.  The default therefore adapts to
the ratio of evaluation cost to step cost: an exact evaluation of a 16-unit model
(65,536 configurations, a few milliseconds) against sub-millisecond steps runs every
few dozen epochs, a pseudo-log-likelihood against an epoch of seconds runs every
epoch.  The evaluated steps depend on measured times, so two runs may evaluate at
different epochs; parameters never depend on them.  Pass ``eval_every`` for a fixed
cadence.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["EVAL_BUDGET", "EvalSchedule", "Evaluation", "build_evaluation"]

# largest number of configurations the automatic evaluation enumerates exactly
MAX_EXACT_CONFIGURATIONS = 2**22
# at most this many examples are used by the automatic pseudo-log-likelihood
MAX_PLL_EXAMPLES = 2000
# default cadence: evaluation time at most this fraction of training time
EVAL_BUDGET = 0.1


class Evaluation(NamedTuple):
    """``fn(params) -> {metric: float}`` and what it computes (``kind``)."""

    fn: Callable[[Any], dict[str, float]] | None
    kind: str

    def __call__(self, params: Any) -> dict[str, float]:
        return self.fn(params)


def _exact_feasible(exact: Any, model: Any, params: Any, visible: tuple[str, ...]) -> bool:
    """Whether ``log Z`` and the likelihood enumerate at most ``2**22`` configurations."""
    try:
        for observed in ((), visible):
            exact.enumeration_plan(model, params, observed, max_configurations=MAX_EXACT_CONFIGURATIONS)
    except ValueError:
        return False
    return True


def _user_evaluation(eval_fn: Callable) -> Evaluation:
    def user(params):
        out = eval_fn(params)
        if not isinstance(out, Mapping):
            raise TypeError(f"`eval_fn` must return a dict of floats, got {type(out).__name__}")
        res = {}
        for k, v in out.items():
            arr = np.asarray(v)
            if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
                raise TypeError(f"`eval_fn` returned a non-scalar value for '{k}': {v!r}")
            res[str(k)] = float(arr.reshape(()))
        return res

    return Evaluation(user, "user")


def _pll_evaluation(model: Any, sets: dict[str, dict[str, np.ndarray]]) -> Evaluation:
    from ugm_infer.learn.pseudo_likelihood import pseudo_log_likelihood  # noqa: PLC0415 - imported when needed

    subsets = {}
    for name, d in sets.items():
        n = next(iter(d.values())).shape[0]
        if n > MAX_PLL_EXAMPLES:
            idx = np.linspace(0, n - 1, MAX_PLL_EXAMPLES).round().astype(np.int64)
            d = {k: v[idx] for k, v in d.items()}
        subsets[name] = {k: jnp.asarray(v, model.variables[k].dtype) for k, v in d.items()}
    pll = jax.jit(lambda params, d: jnp.mean(pseudo_log_likelihood(model, params, d)))

    def pll_eval(params):
        return {f"{name}_pseudo_log_likelihood": float(pll(params, d)) for name, d in subsets.items()}

    return Evaluation(pll_eval, "pseudo_log_likelihood")


def build_evaluation(eval_fn: Any, learner: Any, params: Any, sets: Callable[[], dict[str, dict]]) -> Evaluation:
    """The evaluation for ``eval_fn`` (``"auto"``, ``None`` or a callable).

    ``sets()`` returns ``{"train": host data, "eval": held-out data}`` (the latter only
    when given) as integer codes; it is called only when an automatic evaluation needs
    the data.
    """
    if eval_fn is None:
        return Evaluation(None, "none")
    if callable(eval_fn):
        return _user_evaluation(eval_fn)
    if eval_fn != "auto":
        raise ValueError(f"`eval_fn` must be 'auto', None or a callable params -> dict, got {eval_fn!r}")
    from ugm_infer import exact  # noqa: PLC0415

    model = learner.model
    visible = tuple(learner.visible)
    if _exact_feasible(exact, model, params, visible):
        data = sets()

        def exact_eval(params):
            return {
                f"{name}_log_likelihood": float(exact.average_log_likelihood(model, params, d)) for name, d in data.items()
            }

        return Evaluation(exact_eval, "exact")
    if set(visible) == set(model.variables):
        return _pll_evaluation(model, sets())
    warnings.warn(
        f"fit: no automatic evaluation for model '{model.name}' (too large to enumerate and not fully visible); "
        "pass eval_fn=callable to record metrics",
        stacklevel=4,
    )
    return Evaluation(None, "none")


class EvalSchedule:
    """When to evaluate: at step 0, at the end, and every ``every`` epochs or within the time budget.

    ``every=None`` is the budgeted default (see the module docstring): an evaluation at
    the end of an epoch is due when ``eval_seconds + last_cost <= EVAL_BUDGET *
    train_seconds``, with ``last_cost`` the duration of the last evaluation.
    """

    def __init__(self, enabled: bool, every: int | None, steps_per_epoch: int, total_steps: int):
        self.enabled = enabled
        self.every = every
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = total_steps
        self.last_cost: float | None = None

    def record(self, seconds: float) -> None:
        """Remember the cost of an evaluation that just ran."""
        self.last_cost = seconds

    def _budget_allows(self, timing: Mapping[str, float], extra_train: float = 0.0) -> bool:
        cost = self.last_cost if self.last_cost is not None else 0.0
        return timing["eval_seconds"] + cost <= EVAL_BUDGET * (timing["train_seconds"] + extra_train)

    def due(self, step: int, timing: Mapping[str, float]) -> bool:
        """Whether to evaluate now, after ``step`` steps."""
        if not self.enabled:
            return False
        if step == self.total_steps:
            return True
        if step % self.steps_per_epoch:
            return False
        if self.every is not None:
            return step % (self.every * self.steps_per_epoch) == 0
        return self._budget_allows(timing)

    def next_due(self, step: int, timing: Mapping[str, float], seconds_per_step: float | None) -> int:
        """The next step (> ``step``) at which an evaluation may be due: where a chunk must stop."""
        if not self.enabled:
            return self.total_steps
        spe = self.steps_per_epoch
        next_epoch_end = (step // spe + 1) * spe
        if self.every is not None:
            period = self.every * spe
            return min((step // period + 1) * period, self.total_steps)
        if not seconds_per_step or self.last_cost is None:
            return min(next_epoch_end, self.total_steps)
        cost = self.last_cost
        needed = (timing["eval_seconds"] + cost) / EVAL_BUDGET - timing["train_seconds"]
        steps = max(0, math.ceil(needed / seconds_per_step))
        target = max(step + steps, next_epoch_end)
        return min(-(-target // spe) * spe, self.total_steps)
