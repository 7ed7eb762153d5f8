"""One way to build a learner: the construction steps every algorithm module shares.

An algorithm module (``sap.py``, ``mcmc_mle.py``, ...) holds what its paper's
pseudo-code says; everything else goes through these steps, in the manner of optax's
``GradientTransformation`` (a factory returning ``init``/``update`` closures over
NamedTuple states) and BlackJAX's ``init``/``build_kernel``/``as_top_level_api``:

1. :func:`setup` checks and resolves the shared arguments once, on the host: the
   model, the visible variables, the optax optimizer, the positive phase (the data
   term), the kernel of the particles, their number and optional initial values.
2. The module writes ``init(rng_key, params, data) -> State`` with :func:`start`
   (initial particles, positive-phase state, optimizer state) and
   ``step(rng_key, state, batch) -> (State, Info)``, whose model term is its own and
   whose parameter update is :func:`ascend` (data term + model term, one optax step).
   ``State`` and ``Info`` are NamedTuples of arrays.
3. :func:`build` wraps the two with the input checks of :class:`Inputs` (parameters,
   training data, minibatch; kernel built from concrete parameters at ``init``) and
   returns the :class:`~ugm_infer.learn.Learner`.

The persistent-particle learners (``sap``, ``mcmc_mle``, ``pf_mcmc_mle``, ``psmc``,
``smc_learner``) share their arguments ``model, kernel, optimizer, num_particles`` and
``visible, positive_phase, negative_phase, init_particles``: the algorithm is written as
``algorithm(args, *, <its own keyword arguments>)`` decorated with
:func:`particle_learner`, which gives the public function the whole signature, hands
the shared arguments over as one :class:`ParticleArguments` (checked by
:func:`particle_setup`) and documents them from :data:`LEARNER_ARGUMENT_DOCS`
(:func:`shared_argument_docs` does the same for learners with a signature of their own).

Learners whose update is plain gradient ascent on a deterministic objective (exact
ML, pseudo-likelihood) are :func:`objective_learner`.  Conditional models supply
their own :class:`Inputs` and positive phase and reuse the rest.

A persistent-particle learner in full (PCD-k, as :func:`~ugm_infer.learn.sap` does it)::

    def my_pcd(model, optimizer=None, num_particles=100, *, k=1, visible=None):
        s = setup(model, optimizer, visible=visible, positive_phase="auto",
                  kernel=gibbs_builder(model, "block", k), num_particles=num_particles)
        negative = resolve_negative_phase(model, s.visible, "auto")

        def init(rng_key, params, data):
            fresh = start(s, rng_key, params, data)
            return MyState(params, fresh.opt_state, fresh.particles, fresh.aux_state, initial_step())

        def step(rng_key, state, batch):
            key_move, key_data = split_key(rng_key)
            logdensity_fn = model.logdensity_fn(jax.lax.stop_gradient(state.params))
            particles, _ = advance(s.kernel, key_move, state.particles, logdensity_fn, state.params, 1)
            new = ascend(s, key_data, state.params, state.opt_state, state.aux_state, batch,
                         jax.grad(negative)(state.params, particles))
            return MyState(new.params, new.opt_state, particles, new.aux_state, state.step + 1), MyInfo(
                global_norm(new.direction))

        return build(s, "my_pcd", init, step)

with ``MyState`` and ``MyInfo`` NamedTuples, ``advance`` and ``gibbs_builder`` from
:mod:`ugm_infer.learn.particles` and ``resolve_negative_phase`` from
:mod:`ugm_infer.learn.phases`.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ugm_infer._random import split as split_key
from ugm_infer.learn.base import (
    Learner,
    apply_ascent,
    check_batch,
    check_data,
    check_model,
    check_params,
    check_positive_int,
    check_same_structure,
    global_norm,
    resolve_optimizer,
    resolve_visible,
)
from ugm_infer.learn.particles import LazyKernel, check_init_particles, initial_particles, resolve_kernel
from ugm_infer.learn.phases import PositivePhase, resolve_positive_phase

__all__ = [
    "NO_KERNEL",
    "LEARNER_ARGUMENT_DOCS",
    "Ascent",
    "Inputs",
    "ObjectiveState",
    "ParticleArguments",
    "Setup",
    "Start",
    "ascend",
    "build",
    "initial_step",
    "joint_inputs",
    "objective_learner",
    "particle_learner",
    "particle_setup",
    "setup",
    "shared_argument_docs",
    "start",
]

NO_KERNEL = object()  # ``setup(kernel=NO_KERNEL)``: the learner has no particles to move


class Inputs(NamedTuple):
    """How a learner checks what it is given (host side, before tracing where possible).

    check_params
        ``check_params(params) -> None``.
    check_data
        ``check_data(data) -> data``: all the training data given to ``init`` (may be ``None``).
    check_batch
        ``check_batch(batch) -> batch``: a minibatch given to ``step``.
    kernel_params
        ``kernel_params(params, data) -> params``: the parameters the kernel is built at.
    """

    check_params: Callable
    check_data: Callable
    check_batch: Callable
    kernel_params: Callable


def joint_inputs(model: Any, visible: tuple[str, ...]) -> Inputs:
    """Inputs of a joint model: data and batches ``{visible name: (batch, *shape)}``."""
    return Inputs(
        lambda params: check_params(model, params),
        lambda data: check_data(model, visible, data),
        lambda batch: check_batch(model, visible, batch),
        lambda params, data: params,
    )


class Setup(NamedTuple):
    """A learner's shared arguments, checked and resolved once (see :func:`setup`)."""

    model: Any
    visible: tuple[str, ...]
    optimizer: optax.GradientTransformation
    inputs: Inputs
    positive: PositivePhase | None = None
    kernel: LazyKernel | None = None
    num_particles: int | None = None
    init_particles: dict | None = None


def setup(
    model: Any,
    optimizer: Any = None,
    *,
    visible: Any = None,
    positive_phase: Any = None,
    kernel: Any = NO_KERNEL,
    num_particles: int | None = None,
    init_particles: dict | None = None,
    inputs: Inputs | None = None,
) -> Setup:
    """Check and resolve the arguments every learner shares.

    ``optimizer=None`` is ``optax.sgd(0.01)``; ``positive_phase=None`` means the
    learner computes its data term itself; ``kernel`` takes the forms of
    :func:`~ugm_infer.learn.particles.resolve_kernel` (``None``: block Gibbs), and
    ``NO_KERNEL`` (the default) means the learner moves no particles.
    ``num_particles`` and ``init_particles`` are checked together; ``inputs``
    defaults to :func:`joint_inputs` of the visible variables.
    """
    check_model(model)
    if num_particles is not None:
        num_particles = check_positive_int(num_particles, "num_particles")
    visible = resolve_visible(model, visible)
    optimizer = resolve_optimizer(optimizer)
    positive = None if positive_phase is None else resolve_positive_phase(model, visible, positive_phase)
    lazy = None if kernel is NO_KERNEL else resolve_kernel(model, kernel)
    if init_particles is not None:
        init_particles = check_init_particles(model, init_particles, num_particles)
    inputs = joint_inputs(model, visible) if inputs is None else inputs
    return Setup(model, visible, optimizer, inputs, positive, lazy, num_particles, init_particles)


class ParticleArguments(NamedTuple):
    """The arguments every persistent-particle learner shares, as its caller gave them.

    :func:`particle_learner` collects them from the public call; :func:`particle_setup`
    checks them.  The defaults are those of the public signature.
    """

    model: Any
    kernel: Any = None
    optimizer: Any = None
    num_particles: int = 100
    visible: Any = None
    positive_phase: Any = "auto"
    negative_phase: str = "auto"
    init_particles: dict | None = None


def particle_setup(args: ParticleArguments) -> Setup:
    """:func:`setup` of a learner with persistent particles (the negative phase is the learner's own)."""
    return setup(
        args.model,
        args.optimizer,
        visible=args.visible,
        positive_phase=args.positive_phase,
        kernel=args.kernel,
        num_particles=args.num_particles,
        init_particles=args.init_particles,
    )


_POSITIONAL = ("model", "kernel", "optimizer", "num_particles")
_KEYWORD = ("visible", "positive_phase", "negative_phase", "init_particles")

LEARNER_ARGUMENT_DOCS = {
    "model": "The :class:`~ugm_infer.EnergyModel` to fit.",
    "kernel": """\
The transition operator of the particles: ``None`` (default, block Gibbs), a kernel
module with ``.init`` and ``.build_kernel`` (``ui.kernels.metropolis``, ...), or a
pair ``(init_fn, kernel_fn)`` for ONE particle (see *Plugging a kernel* in
:mod:`ugm_infer.learn.sap`).  Before every move the kernel state is initialised with
``init_fn(position, logdensity_fn)`` at the **current** parameters (so cached
log-densities are never stale; only positions persist), except for the
:class:`~ugm_infer.learn.Persistent` kernels of :func:`~ugm_infer.learn.sap`.""",
    "optimizer": """\
An optax ``GradientTransformation``; default ``optax.sgd(learning_rate=0.01)``.
Use a decreasing schedule (:func:`ugm_infer.learn.robbins_monro`) for
convergence; momentum / weight decay: :func:`ugm_infer.learn.sgd`.""",
    "num_particles": "Number of particles (a positive int).",
    "visible": """\
Names of the variables the data provides (see
:func:`ugm_infer.learn.base.resolve_visible`); default: all variables except
those the model sums out in ``free_energy_fns``.""",
    "positive_phase": """\
The data term (see :mod:`ugm_infer.learn.phases`):

* ``"auto"`` (default): exact ``-grad mean F(v)`` when the model is fully
  visible or its one latent variable has ``free_energy_fns``; otherwise the
  Monte-Carlo E-step of :func:`~ugm_infer.learn.mc_positive_phase` (5 Gibbs
  sweeps of the latents clamped at the data, started from random latents at
  every step);
* ``"free_energy"`` / ``"mc"``: force one of those;
* a callable ``(rng_key, params, batch, aux_state) -> (positive_grad,
  aux_state)`` returning :math:`\\mathbb E_{\\text{batch}}[-\\partial E /
  \\partial \\theta]` (a pytree like ``params``), or a
  :class:`~ugm_infer.learn.PositivePhase` ``(init, update)`` whose
  ``init(rng_key, params, data)`` creates ``aux_state``.  This is the seam for
  adiabatic PCD (persistent latent chains) and mean-field PCD (variational
  E-step).""",
    "negative_phase": """\
``"auto"`` (default), ``"energy"`` or ``"free_energy"``: how the particles
enter the model term.  ``"energy"`` differentiates their (weighted) mean joint
energy; ``"free_energy"`` the (weighted) mean free energy of their visible part
(latents summed out analytically -- same expectation, lower variance).
``"auto"`` uses the free energy when the model has latents and it is analytic.""",
    "init_particles": """\
Optional initial particles ``{name: (num_particles, *shape)}`` (all
variables); default uniformly random.""",
}
"""The documentation of the arguments learners share, one entry per name (see :func:`shared_argument_docs`)."""


def shared_argument_docs(fn: Callable) -> Callable:
    """Decorator: completes the *Parameters* section of a learner's docstring from :data:`LEARNER_ARGUMENT_DOCS`.

    Every argument of the signature that the docstring does not document and that
    :data:`LEARNER_ARGUMENT_DOCS` does gets that entry; the section lists the
    arguments in the order of the signature.
    """
    fn.__doc__ = _complete_parameters(fn.__doc__, tuple(inspect.signature(fn).parameters))
    return fn


def particle_learner(algorithm: Callable | None = None, *, init_particles: bool = True) -> Callable[..., Learner]:
    """Decorator: the public function of a persistent-particle learner, from its algorithm.

    ``algorithm(args, *, <its own keyword arguments>) -> Learner`` receives the shared
    arguments as one :class:`ParticleArguments`.  The public function takes them as

    ``(model, kernel=None, optimizer=None, num_particles=100, *, <its own keyword
    arguments>, visible=None, positive_phase="auto", negative_phase="auto",
    init_particles=None)``

    (without ``init_particles`` when ``init_particles=False``), shows that signature to
    ``inspect.signature`` and ``help``, and has the docstring of the algorithm
    completed as :func:`shared_argument_docs` does.
    """
    if algorithm is None:
        return functools.partial(particle_learner, init_particles=init_particles)
    keyword = _KEYWORD if init_particles else _KEYWORD[:-1]
    own = list(inspect.signature(algorithm).parameters.values())[1:]
    if any(p.kind is not inspect.Parameter.KEYWORD_ONLY for p in own):
        raise TypeError(f"{algorithm.__name__}: the arguments after `args` must be keyword-only")
    signature = inspect.Signature(
        [_shared_parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in _POSITIONAL]
        + own
        + [_shared_parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in keyword],
        return_annotation=inspect.signature(algorithm).return_annotation,
    )

    @functools.wraps(algorithm)
    def learner(*args, **kwargs):
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError as err:
            raise TypeError(f"{algorithm.__name__}() {err}") from None
        shared = ParticleArguments(**{n: given.pop(n) for n in _POSITIONAL + keyword if n in given})
        return algorithm(shared, **given)

    learner.__signature__ = signature
    learner.__doc__ = _complete_parameters(algorithm.__doc__, tuple(signature.parameters))
    return learner


def _shared_parameter(name: str, kind) -> inspect.Parameter:
    default = ParticleArguments._field_defaults.get(name, inspect.Parameter.empty)
    annotation = ParticleArguments.__annotations__[name]  # a string, as the algorithm's own (postponed evaluation)
    return inspect.Parameter(name, kind, default=default, annotation=getattr(annotation, "__forward_arg__", annotation))


def _complete_parameters(doc: str, names: tuple[str, ...]) -> str:
    """``doc`` whose *Parameters* section documents ``names`` in order, the missing ones from :data:`LEARNER_ARGUMENT_DOCS`.

    An entry of ``doc`` may document several names (``"a, b"``); it stays where its
    first name is.  Entries for names not in ``names`` stay last.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Parameters" not in lines:
        raise ValueError(f"a learner's docstring needs a 'Parameters' section for its shared arguments, got {doc!r}")
    start = lines.index("Parameters") + 2  # below the underline
    end = next((i for i in range(start, len(lines) - 1) if lines[i] and set(lines[i + 1]) == {"-"}), len(lines))
    while lines[end - 1] == "":
        end -= 1
    entries: list[list[str]] = []  # the section's entries: a line of names, then the indented text
    for line in lines[start:end]:
        if line and not line[0].isspace():
            entries.append([])
        entries[-1].append(line)
    own = {name.strip(): i for i, entry in enumerate(entries) for name in entry[0].split(",")}
    order: list[int | str] = []  # an entry of the docstring by its index, a shared one by its name
    for name in names:
        if name in own and own[name] not in order:
            order.append(own[name])
        elif name not in own and name in LEARNER_ARGUMENT_DOCS:
            order.append(name)
    order += [i for i in range(len(entries)) if i not in order]

    def entry(e: int | str) -> list[str]:
        return entries[e] if isinstance(e, int) else [e, *textwrap.indent(LEARNER_ARGUMENT_DOCS[e], "    ").splitlines()]

    section = [line for e in order for line in entry(e)]
    return "\n".join(lines[:start] + section + lines[end:])


def initial_step() -> jax.Array:
    """The update counter of a fresh state (int32 0)."""
    return jnp.zeros((), jnp.int32)


class Start(NamedTuple):
    """What :func:`start` makes for a fresh state.

    particles
        ``{name: (num_particles, *shape)}`` (``None`` without ``num_particles``).
    aux_state
        State of the positive phase (``()`` without one).
    opt_state
        The optimizer state.
    particle_key
        The key the particles were drawn from (``None`` without particles), for
        learners that go on moving them in ``init``.
    """

    particles: dict | None
    aux_state: Any
    opt_state: Any
    particle_key: jax.Array | None


def start(s: Setup, rng_key: jax.Array, params: Any, data: Any) -> Start:
    """Initial particles, positive-phase state and optimizer state.

    With particles the key is split into one for the particles and one for the
    positive phase; without, the positive phase gets the key.
    """
    if s.num_particles is None:
        particles, key_particles, key_aux = None, None, rng_key
    else:
        key_particles, key_aux = split_key(rng_key)
        particles = initial_particles(s.model, key_particles, s.num_particles, s.init_particles)
    aux_state = () if s.positive is None else s.positive.init(key_aux, params, data)
    return Start(particles, aux_state, s.optimizer.init(params), key_particles)


class Ascent(NamedTuple):
    """What :func:`ascend` returns: the new ``params``, ``opt_state`` and ``aux_state``, and
    the ascent ``direction`` (data term + model term) they moved along."""

    params: Any
    opt_state: Any
    aux_state: Any
    direction: Any


def ascend(s: Setup, rng_key, params: Any, opt_state: Any, aux_state: Any, batch: Any, negative_grad: Any) -> Ascent:
    """One optax step along the data term of the positive phase plus ``negative_grad``, both at ``params``.

    ``negative_grad`` is the model term :math:`-\\mathbb E_{p_\\theta}[-\\partial_\\theta
    E]` (the gradient of the particles' mean energy); the direction is the estimated
    gradient of the average log-likelihood.
    """
    positive_grad, aux_state = s.positive.update(rng_key, params, batch, aux_state)
    check_same_structure(params, positive_grad, "the positive phase's gradient")
    direction = jax.tree.map(jnp.add, positive_grad, negative_grad)
    new_params, opt_state = apply_ascent(s.optimizer, direction, opt_state, params)
    return Ascent(new_params, opt_state, aux_state, direction)


def build(
    s: Setup,
    name: str,
    init: Callable,
    step: Callable,
    *,
    requires_data: str | None = None,
    index_key: str | None = None,
) -> Learner:
    """The :class:`~ugm_infer.learn.Learner` of an algorithm's ``init`` and ``step``, with the input checks.

    ``init(rng_key, params, data)`` receives checked parameters and data, after the
    kernel (if any) was built at concrete parameters; ``step(rng_key, state, batch)``
    a checked batch.  ``requires_data``: the error message when ``init`` gets no data
    (learners with per-datum state).  ``index_key``: the name of the row indices of a
    minibatch (``ui.fit`` passes them, see :func:`ugm_infer.fit.batch_index_key`);
    the step then receives them as a fourth argument (``None`` when absent).
    """
    inputs = s.inputs

    def checked_init(rng_key, params, data=None):
        inputs.check_params(params)
        if data is None and requires_data is not None:
            raise ValueError(requires_data)
        data = inputs.check_data(data)
        if s.kernel is not None:
            s.kernel.get(inputs.kernel_params(params, data))
        return init(rng_key, params, data)

    if index_key is None:

        def checked_step(rng_key, state, batch):
            return step(rng_key, state, inputs.check_batch(batch))

    else:

        def checked_step(rng_key, state, batch):
            batch = dict(batch)
            index = batch.pop(index_key, None)
            return step(rng_key, state, inputs.check_batch(batch), index)

        checked_step.batch_index_key = index_key
    checked_step.optimizer = s.optimizer  # read by ui.fit's learning-rate check (fit._arguments.learner_optimizer)
    return Learner(checked_init, checked_step, s.model, name, s.visible)


class ObjectiveState(NamedTuple):
    """State of a learner without particles: ``params``, optax ``opt_state``, ``step`` (int32)."""

    params: Any
    opt_state: Any
    step: jax.Array


def objective_learner(
    s: Setup,
    name: str,
    objective: Callable,
    state_type: type,
    info_type: type,
    prepare: Callable | None = None,
) -> Learner:
    """Gradient ascent on a deterministic objective ``objective(params, batch)`` (the key is unused).

    ``state_type(params, opt_state, step)`` and ``info_type(grad_norm, value)`` are the
    learner's NamedTuples; ``prepare(params, data)`` runs at ``init`` on concrete
    parameters (e.g. to plan an enumeration).
    """

    def init(rng_key, params, data):
        del rng_key
        if prepare is not None:
            prepare(params, data)
        return state_type(params, s.optimizer.init(params), initial_step())

    def step(rng_key, state, batch):
        del rng_key
        value, direction = jax.value_and_grad(objective)(state.params, batch)
        params, opt_state = apply_ascent(s.optimizer, direction, state.opt_state, state.params)
        return state_type(params, opt_state, state.step + 1), info_type(global_norm(direction), value)

    return build(s, name, init, step)
