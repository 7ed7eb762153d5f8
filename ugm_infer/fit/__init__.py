"""``ui.fit``: the training driver for any learner, with evaluation, history and checkpoints.

A learner (see :mod:`ugm_infer.learn`) is a pair of pure functions
``init(rng_key, params, data=None) -> state`` and ``step(rng_key, state, batch) ->
(state, info)``.  :func:`fit` runs it over minibatches and epochs, in named steps:

* **validate** -- the data (names, shapes, values inside the domains, no NaN), the
  parameters, the optimizer's learning rate (when it can be probed) and every argument
  are checked on the host before anything is traced or compiled, and a bad one raises
  ``ValueError``/``TypeError`` naming it.  The data are checked in a few passes and
  kept as small integer codes or packed bits (:class:`PackedBits`), decoded one
  minibatch at a time on the device (:mod:`ugm_infer.fit._data`);
* **build the evaluation** -- exact average log-likelihood when the model is small
  enough to enumerate, else the pseudo-log-likelihood for fully visible models, or a
  user function, on a cadence that keeps it within 10% of the training time by default
  (:mod:`ugm_infer.fit._evaluation`);
* **start or resume** -- the learner's initial state, or the state of the checkpoint
  in ``checkpoint_dir`` after checking that it belongs to this run.  ``learner.init``
  gets the data as a :class:`~ugm_infer.learn.base.CheckedData`, decoded on the device
  only if the learner reads it;
* **run chunks** -- one compiled program runs any number of steps, across epochs,
  without returning to the host (:mod:`ugm_infer.fit._chunk`); whole blocks of an
  epoch's steps run in a loop of known length (no host round trip between steps on a
  GPU).  The program is compiled ahead of time and cached per learner, so fitting the
  same learner again on data of the same shapes neither traces nor compiles, and its
  first chunk is sized from the step time the earlier fit measured.  After every chunk
  the parameters and the learner's reported numbers are checked for NaN/inf
  (:class:`FitDiverged`);
* **checkpoint** -- every ``checkpoint_every`` steps or, by default, every 30 s of
  training, at the end and on Ctrl-C (:class:`FitInterrupted`); resuming reproduces
  the uninterrupted run *bit for bit* (:mod:`ugm_infer.fit._checkpoint`);
* **finish** -- a :class:`FitResult` with the parameters, the final learner state
  (persistent particles included), the history, and :meth:`FitResult.to_arviz`.

Reproducible randomness: with ``key_init, key_params, key_train =
jax.random.split(rng_key, 3)``, epoch ``e`` uses ``epoch_key = fold_in(key_train,
e)``, ``key_perm, key_steps = split(epoch_key)``, the minibatch order
``permutation(key_perm, N)`` and, for its ``s``-th step, ``fold_in(key_steps, s)``.
Every step's randomness is a function of ``(rng_key, epoch, s)`` only, so a run can be
stopped and resumed at any step, and where chunks start and stop never matters.

Row indices for learners with per-datum state: when ``learner.step`` has a string
attribute ``batch_index_key`` (see :func:`batch_index_key`), every minibatch also
carries that key, holding the ``(batch_size,)`` int32 row indices of the batch into the
``data`` that was given to ``learner.init`` (e.g. :func:`ugm_infer.learn.apcd`, which
then reads its per-datum chains and running statistics by index instead of by hashing
the rows).  Other learners see the same batches as before.

Minibatches keep static shapes: an epoch has ``N // batch_size`` steps and the last
``N % batch_size`` examples of each epoch's permutation are dropped (with
``shuffle=True`` a different subset each epoch; a warning says so once).

References
----------
Robbins, H. and Monro, S. (1951). A stochastic approximation method.
Ann. Math. Statist. 22, 400-407.
Younes, L. (1989). Parametric inference for imperfectly observed Gibbsian fields.
Probab. Theory Related Fields 82, 625-645.
Tieleman, T. (2008). Training restricted Boltzmann machines using approximations to
the likelihood gradient. ICML.
"""

from ugm_infer.fit._arguments import resolve_progress as _resolve_progress  # noqa: F401 (tests and old imports)
from ugm_infer.fit._checkpoint import CHECKPOINT_HISTORY, CHECKPOINT_JSON, CHECKPOINT_NPZ, load_checkpoint
from ugm_infer.fit._chunk import batch_index_key
from ugm_infer.fit._data import PackedBits
from ugm_infer.fit._driver import fit
from ugm_infer.fit._evaluation import EVAL_BUDGET
from ugm_infer.fit._result import FitDiverged, FitInterrupted, FitProgress, FitResult

__all__ = [
    "CHECKPOINT_HISTORY",
    "CHECKPOINT_JSON",
    "CHECKPOINT_NPZ",
    "EVAL_BUDGET",
    "FitDiverged",
    "FitInterrupted",
    "FitProgress",
    "FitResult",
    "PackedBits",
    "batch_index_key",
    "fit",
    "load_checkpoint",
]

# ``ui.fit`` (the package attribute ``ugm_infer.fit``) is the function; its public
# companions are attributes of it too, so ``ui.fit.FitDiverged`` and
# ``ui.fit.load_checkpoint`` work as well as ``from ugm_infer.fit import ...``.
for _name in __all__:
    if _name != "fit":
        setattr(fit, _name, globals()[_name])
del _name
