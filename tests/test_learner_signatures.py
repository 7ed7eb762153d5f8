"""The learners' public signatures and the documentation of their shared arguments.

The persistent-particle learners take their shared arguments through
``ugm_infer.learn.skeleton.particle_learner``; these checks pin the signatures users
call (positional order and defaults, keyword-only names and defaults), the routing of
the shared arguments, the ``TypeError`` of a wrong call, and that every argument is
documented in the learner's docstring.  No step is compiled.
"""

from __future__ import annotations

import inspect

import jax
import optax
import pytest

import ugm_infer as ui

EMPTY = inspect.Parameter.empty
HEAD = [("model", EMPTY), ("kernel", None), ("optimizer", None), ("num_particles", 100)]
TAIL = {"visible": None, "positive_phase": "auto", "negative_phase": "auto", "init_particles": None}

# name: (positional-or-keyword arguments in order with defaults, keyword-only arguments with defaults)
SIGNATURES = {
    "sap": (HEAD, {**TAIL, "num_steps_per_update": 1, "name": "sap"}),
    "mcmc_mle": (HEAD, {**TAIL, "num_mcmc_steps": 10, "grad_threshold": 1e-3, "max_inner_steps": 100}),
    "pf_mcmc_mle": (
        HEAD,
        {
            **TAIL,
            "ess_threshold": 0.9,
            "num_rejuvenation_steps": 1,
            "weight_temperature": 1.0,
            "resampling": "systematic",
            "unit_weights": False,
            "num_burnin_steps": None,
            "max_updates_between_rejuvenation": None,
            "max_param_distance": None,
        },
    ),
    "psmc": (
        HEAD,
        {**TAIL, "ess_threshold": 0.9, "reinit_fraction": 0.5, "max_bridges": 1000, "resampling": "systematic"},
    ),
    "smc_learner": (
        HEAD,
        {
            "visible": None,
            "positive_phase": "auto",
            "negative_phase": "auto",
            "ess_threshold": 0.9,
            "num_mcmc_steps": 1,
            "max_bridges": 100,
            "resampling": "systematic",
        },
    ),
    "cd": (
        [("model", EMPTY), ("k", 1), ("optimizer", None), ("kernel", None), ("visible", None)],
        {"latent_sweeps": 1, "positive_phase": "auto", "negative_phase": "auto"},
    ),
    "exact_ml": ([("model", EMPTY), ("optimizer", None), ("visible", None)], {}),
    "pseudo_likelihood": ([("model", EMPTY), ("optimizer", None), ("visible", None)], {}),
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature(name):
    params = inspect.signature(getattr(ui.learn, name)).parameters.values()
    positional = [(p.name, p.default) for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keyword = {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert len(positional) + len(keyword) == len(params)
    assert (positional, keyword) == SIGNATURES[name]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_argument_is_documented(name):
    fn = getattr(ui.learn, name)
    doc = inspect.getdoc(fn)
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\nReturns\n", 1)[0]
    documented = {n.strip() for line in section.splitlines() if line and not line[0].isspace() for n in line.split(",")}
    assert documented == set(inspect.signature(fn).parameters)


def test_shared_arguments_reach_the_learner():
    model = ui.models.ising(4)
    params = model.init_params(jax.random.key(0))
    learner = ui.learn.psmc(model, None, optax.sgd(0.1), 7, reinit_fraction=0.0, visible="s")
    state = learner.init(jax.random.key(1), params)
    assert state.particles["s"].shape == (7, 4)
    assert learner.visible == ("s",)
    assert learner.step.optimizer is not None
    start = {"s": model.random_state(jax.random.key(2), 5)["s"]}
    assert ui.learn.mcmc_mle(model, num_particles=5, init_particles=start).init(jax.random.key(3), params).particles[
        "s"
    ].shape == (5, 4)
    assert ui.learn.sap(model, name="mine").name == "mine"


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: ui.learn.sap(m, num_sweeps=2), r"sap\(\) got an unexpected keyword argument 'num_sweeps'"),
        (lambda m: ui.learn.psmc(m, None, None, 10, 3), r"psmc\(\) too many positional arguments"),
        (lambda m: ui.learn.smc_learner(m, init_particles={}), r"smc_learner\(\) .*'init_particles'"),
        (lambda m: ui.learn.mcmc_mle(kernel=None), r"mcmc_mle\(\) missing a required argument: 'model'"),
    ],
)
def test_a_wrong_call_is_a_type_error(call, match):
    with pytest.raises(TypeError, match=match):
        call(ui.models.ising(3))


def test_bad_shared_argument_is_named():
    with pytest.raises(ValueError, match="`num_particles`"):
        ui.learn.pf_mcmc_mle(ui.models.ising(3), num_particles=0)
