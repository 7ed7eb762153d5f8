"""Bad input anywhere in the Python API gets a clear error naming the argument (or the model).

One table, :data:`CASES`: each row is a bad call, the exception (or warning, turned
into an error for the row) it must raise, and a regular expression the message must contain -- the name of the argument
(``\\`num_chains\\```) or, for a broken energy function, the model's name and what is
wrong.  To cover a new entry point, add rows; nothing else changes.

Rows marked ``xfail(strict=True)`` describe errors the library does not raise yet (the
reason says which); ``strict`` makes them fail loudly once the error is raised, so the
mark is removed then.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ugm_infer as ui

KEY = jax.random.key(0)
SPIN3 = {"s": ui.Spin(3)}


class Case(NamedTuple):
    """A bad call, the exception (or warning) class it raises and a regex its message contains."""

    id: str
    call: Any
    error: type
    match: str
    xfail: str | None = None


# --------------------------------------------------------------------------------------
# small models (built once; every call below is cheap)
# --------------------------------------------------------------------------------------
@functools.cache
def lattice():
    model = ui.models.lattice_ising(3, 3, periodic=False)
    return model, model.init_params(J=0.3, h=0.1)


@functools.cache
def lattice4():
    model = ui.models.lattice_ising(4, 4)
    return model, model.init_params(J=2e37)


@functools.cache
def rbm():
    model = ui.models.rbm(4, 2)
    return model, model.init_params(jax.random.key(1), scale=0.5)


def energy_model(energy_fn, name):
    return ui.EnergyModel(energy_fn, SPIN3, name=name)


def field(p, x):
    return -p["J"] * jnp.sum(x["s"])


P = {"J": jnp.asarray(0.5)}


@functools.cache
def nan_at_all_up_model():
    """12 spins, NaN at the all-(+1) configuration only (finite at random ones)."""
    return ui.EnergyModel(
        lambda p, x: jnp.where(jnp.all(x["s"] > 0), jnp.nan, field(p, x)), {"s": ui.Spin(12)}, name="nan_at_all_up"
    )


def control_flow(p, x):
    if x["s"].sum() > 0:  # Python control flow on a traced value
        return field(p, x)
    return -field(p, x)


def uses_numpy(p, x):
    return jnp.asarray(np.sum(np.asarray(x["s"]))) * p["J"]


BROKEN_ENERGIES = {
    "vector": (lambda p, x: -p["J"] * x["s"], r"model 'vector'.*scalar.*shape \(3,\)"),
    "matrix": (lambda p, x: jnp.outer(x["s"], x["s"]) * p["J"], r"model 'matrix'.*shape \(3, 3\)"),
    "int": (lambda p, x: jnp.sum(x["s"].astype(jnp.int32)), r"model 'int'.*dtype int32"),
    "bool": (lambda p, x: jnp.all(x["s"] > 0), r"model 'bool'.*dtype bool"),
    "complex": (lambda p, x: field(p, x) * (1 + 1j), r"model 'complex'.*complex64"),
    "tuple": (lambda p, x: (field(p, x), field(p, x)), r"model 'tuple'.*one scalar.*tuple"),
    "nan": (lambda p, x: field(p, x) * jnp.nan, r"model 'nan'.*energy is nan"),
    "inf": (lambda p, x: field(p, x) + jnp.inf, r"model 'inf'.*energy is inf"),
    "nan_from_params": (lambda p, x: jnp.sqrt(-p["J"]) * jnp.sum(x["s"]), r"model 'nan_from_params'.*energy is nan"),
    "control_flow": (control_flow, r"model 'control_flow'.*control flow.*jnp.where"),
    "numpy": (uses_numpy, r"model 'numpy'.*numpy"),
}


def broken(name):
    return energy_model(BROKEN_ENERGIES[name][0], name)


def fit(data=None, params=None, **kwargs):
    model, p = lattice()
    data = model.random_state(jax.random.key(2), 8) if data is None else data
    learner = ui.learn.exact_ml(model, optimizer=optax.sgd(0.1))
    kwargs.setdefault("batch_size", 8)
    return ui.fit(learner, KEY, data, params=p if params is None else params, progress=False, eval_fn=None, **kwargs)


def sample(x0=None, algorithm=None, **kwargs):
    model, p = lattice()
    x0 = model.random_state(jax.random.key(3), 2) if x0 is None else x0
    algorithm = ui.kernels.gibbs(model, p) if algorithm is None else algorithm
    return ui.sample(KEY, algorithm, x0, 2, **kwargs)


def smc(**kwargs):
    model, p = lattice()
    kwargs.setdefault("num_particles", 8)
    return ui.smc.tempered_smc(KEY, model, p, **kwargs)


def ais(**kwargs):
    model, p = lattice()
    kwargs.setdefault("num_runs", 4)
    kwargs.setdefault("num_betas", 5)
    return ui.smc.ais(KEY, model, p, **kwargs)


def lat():
    return lattice()[0]


def lat_p():
    return lattice()[1]


S3 = np.ones((3, 3), np.float32)  # a valid 3x3 lattice configuration

# --------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------
CASES = [
    # ---- domains and models -----------------------------------------------------------
    Case("domain-negative-dim", lambda: ui.Binary((2, -1)), ValueError, "`shape`"),
    Case("domain-zero-states", lambda: ui.Categorical(3, num_states=0), ValueError, "`num_states`"),
    Case("domain-unsigned-spin", lambda: ui.Spin(3, dtype=jnp.uint16), ValueError, "`dtype`"),
    Case("domain-complex", lambda: ui.Binary(3, dtype="complex64"), TypeError, "`dtype`"),
    Case("model-energy-none", lambda: ui.EnergyModel(None, SPIN3), TypeError, "`energy_fn`"),
    Case("model-domain-str", lambda: ui.EnergyModel(field, {"s": "spin"}), TypeError, "variable 's'"),
    Case("model-blocks-dict", lambda: ui.EnergyModel(field, SPIN3, blocks={"s": True}), ValueError, "`blocks`"),
    Case(
        "model-block-index-range",
        lambda: ui.EnergyModel(field, SPIN3, blocks=[{"s": np.array([0, 5])}]),
        ValueError,
        r"`blocks\[0\]\['s'\]`",
    ),
    Case("rbm-zero-visible", lambda: ui.models.rbm(0, 3), ValueError, "`num_visible`"),
    Case("rbm-init-data-shape", lambda: rbm()[0].init_params(KEY, data=np.zeros((5, 3))), ValueError, "`data`"),
    Case("random-state-zero-chains", lambda: lat().random_state(KEY, 0), ValueError, "`num_chains`"),
    Case("params-missing-leaf", lambda: ui.exact.log_partition(lat(), {"J": 0.3}), ValueError, "h"),
    Case("params-string-leaf", lambda: lat().validate_params({"J": "x", "h": 0.0}), TypeError, "`params`"),
    Case("params-inf", lambda: ui.exact.log_partition(lat(), {"J": jnp.inf, "h": 0.0}), ValueError, "`params`"),
    # ---- the energy contract: every entry point refuses a broken energy -----------------
    *[
        Case(f"energy-{n}-exact", lambda n=n: ui.exact.log_partition(broken(n), P), ValueError, m)
        for n, (_, m) in BROKEN_ENERGIES.items()
    ],
    Case("energy-vector-gibbs", lambda: ui.kernels.gibbs(broken("vector"), P), ValueError, "model 'vector'"),
    Case("energy-nan-gibbs", lambda: ui.kernels.gibbs(broken("nan"), P), ValueError, "model 'nan'"),
    Case("energy-nan-metropolis", lambda: ui.kernels.metropolis(broken("nan"), P), ValueError, "model 'nan'"),
    Case("energy-int-smc", lambda: ui.smc.tempered_smc(KEY, broken("int"), P), ValueError, "model 'int'"),
    Case("energy-vector-ais", lambda: ui.smc.ais(KEY, broken("vector"), P), ValueError, "model 'vector'"),
    Case(
        "energy-control-flow-learner",
        lambda: ui.learn.exact_ml(broken("control_flow")).init(KEY, P),
        ValueError,
        "model 'control_flow'",
    ),
    Case("energy-nan-detect-structure", lambda: broken("nan").detect_structure(P), ValueError, "model 'nan'"),
    Case(
        "gibbs-logdensity-nan-init",
        lambda: ui.kernels.gibbs(lat(), logdensity_fn=lambda x: jnp.nan * jnp.sum(x["s"])).init({"s": S3}),
        ValueError,
        "log-density is nan",
    ),
    Case(
        "metropolis-logdensity-nan-init",
        lambda: ui.kernels.metropolis(lat(), logdensity_fn=lambda x: jnp.nan * jnp.sum(x["s"])).init({"s": S3}),
        ValueError,
        "log-density is nan",
    ),
    Case(
        "sample-nan-initial-energy",
        lambda: ui.sample(
            KEY,
            ui.kernels.gibbs(nan_at_all_up_model(), P),
            {"s": np.ones((2, 12), np.float32)},
            2,
            model=nan_at_all_up_model(),
            params=P,
        ),
        ValueError,
        r"model 'nan_at_all_up'.*`initial_position` chain 0",
    ),
    # ---- exact enumeration ----------------------------------------------------------------
    Case("exact-chunk-size", lambda: ui.exact.log_partition(lat(), lat_p(), chunk_size=0), ValueError, "`chunk_size`"),
    Case(
        "exact-too-large",
        lambda: ui.exact.log_partition(ui.models.lattice_ising(8, 8), {"J": 0.3, "h": 0.0}),
        ValueError,
        "max_configurations",
    ),
    Case("exact-log-prob-unknown-var", lambda: ui.exact.log_prob(lat(), lat_p(), {"x": S3}), ValueError, "unknown"),
    Case("exact-log-prob-value", lambda: ui.exact.log_prob(lat(), lat_p(), {"s": 0 * S3}), ValueError, r"\['s'\]"),
    Case("exact-sample-zero", lambda: ui.exact.sample(KEY, lat(), lat_p(), 0), ValueError, "`num_samples`"),
    Case("exact-expectation-fn", lambda: ui.exact.expectation(lat(), lat_p(), 3), TypeError, "`fn`"),
    Case(
        "exact-log-likelihood-data",
        lambda: ui.exact.log_likelihood(lat(), lat_p(), {"s": np.full((2, 3, 3), 2.0)}),
        ValueError,
        r"`data\['s'\]`",
    ),
    Case(
        "exact-overflow-log-partition",
        lambda: ui.exact.log_partition(*lattice4()),
        ValueError,
        "params",
    ),
    Case(
        "exact-overflow-log-prob",
        lambda: ui.exact.log_prob(*lattice4(), {"s": np.ones((4, 4), np.float32)}),
        ValueError,
        "params",
    ),
    # ---- kernels ------------------------------------------------------------------------
    Case("gibbs-scan", lambda: ui.kernels.gibbs(lat(), lat_p(), scan="diagonal"), ValueError, "`scan`"),
    Case("gibbs-num-sweeps", lambda: ui.kernels.gibbs(lat(), lat_p(), num_sweeps=0), ValueError, "`num_sweeps`"),
    Case("gibbs-beta-nan", lambda: ui.kernels.gibbs(lat(), lat_p(), beta=float("nan")), ValueError, "`beta`"),
    Case("gibbs-no-target", lambda: ui.kernels.gibbs(lat()), ValueError, "`params`"),
    Case("metropolis-block-scan", lambda: ui.kernels.metropolis(lat(), lat_p(), scan="block"), ValueError, "`scan`"),
    Case("gibbs-init-shape", lambda: ui.kernels.gibbs(lat(), lat_p()).init({"s": np.ones(9)}), ValueError, "`position"),
    Case(
        "tt-betas-not-increasing",
        lambda: ui.kernels.tempered_transitions(lat(), lat_p(), betas=[0.5, 0.9, 0.8, 1.0]),
        ValueError,
        "`betas`",
    ),
    Case(
        "tt-betas-end",
        lambda: ui.kernels.tempered_transitions(lat(), lat_p(), betas=[0.5, 0.9]),
        ValueError,
        "`betas`",
    ),
    Case(
        "pt-betas-negative",
        lambda: ui.kernels.parallel_tempering(lat(), lat_p(), betas=[-0.5, 1.0]),
        ValueError,
        "`betas`",
    ),
    Case("pt-betas-nan", lambda: ui.kernels.parallel_tempering(lat(), lat_p(), betas=[np.nan, 1.0]), ValueError, "`betas`"),
    # ---- ui.sample ------------------------------------------------------------------------
    Case("sample-zero-chains", lambda: sample({"s": np.ones((0, 3, 3), np.float32)}), ValueError, "0 chains"),
    Case(
        "sample-zero-chains-with-model",
        lambda: sample({"s": np.ones((0, 3, 3), np.float32)}, model=lat(), params=lat_p()),
        ValueError,
        "0 chains",
    ),
    Case(
        "sample-trace-fn-drops-chain-axis",
        lambda: sample(trace_fn=lambda state, info: jnp.mean(state.position["s"])),
        ValueError,
        "`trace_fn",
    ),
    Case("sample-position-list", lambda: sample([S3, S3], model=lat()), TypeError, "`initial_position`"),
    Case("sample-thin", lambda: sample(thin=0), ValueError, "`thin`"),
    Case("sample-algorithm", lambda: sample(algorithm=ui.kernels.gibbs), TypeError, "`algorithm`"),
    Case("sample-key", lambda: ui.sample(42, ui.kernels.gibbs(*lattice()), {"s": S3[None]}, 2), TypeError, "`rng_key`"),
    # ---- AIS and tempered SMC -------------------------------------------------------------
    Case("ais-num-runs", lambda: ais(num_runs=0), ValueError, "`num_runs`"),
    Case("ais-betas-decreasing", lambda: ais(betas=[0.0, 0.6, 0.5, 1.0]), ValueError, "`betas`"),
    Case("ais-betas-start", lambda: ais(betas=[0.1, 1.0]), ValueError, "`betas`"),
    Case("ais-schedule", lambda: ais(schedule="cubic"), ValueError, "`schedule`"),
    Case("ais-schedule-kind", lambda: ui.smc.ais_schedule(10, "cubic"), ValueError, "`kind`"),
    Case("ais-base", lambda: ais(base="gaussian"), ValueError, "`base`"),
    Case("ais-base-unknown-var", lambda: ais(base={"x": np.zeros((3, 3, 2))}), ValueError, "`base`"),
    Case("ais-base-logits-shape", lambda: ais(base={"s": np.zeros((3, 3))}), ValueError, r"`base\['s'\]`"),
    Case("ais-base-data-missing", lambda: ais(base="data"), ValueError, "`data="),
    Case(
        "ais-pseudo-count", lambda: ais(base="data", data={"s": S3[None]}, pseudo_count=-1.0), ValueError, "`pseudo_count`"
    ),
    Case("ais-analytic", lambda: ais(analytic="nope"), ValueError, "`analytic`"),
    Case("ais-key", lambda: ui.smc.ais(0, *lattice()), TypeError, "`rng_key`"),
    Case("ais-schedule-num-betas", lambda: ui.smc.ais_schedule(1), ValueError, "num_betas"),
    Case(
        "reverse-ais-missing-state",
        lambda: ui.smc.reverse_ais(KEY, *lattice(), {}, num_betas=5),
        ValueError,
        "`initial_state`",
    ),
    Case("multispin-not-lattice", lambda: ui.smc.multispin_ais(KEY, *rbm()), (TypeError, ValueError), "model"),
    Case(
        "thermodynamic-variance-length",
        lambda: ui.smc.thermodynamic_schedule(np.linspace(0, 1, 11), np.ones(5), 20),
        ValueError,
        "`log_weight_variance`",
    ),
    Case("smc-target-ess", lambda: smc(target_ess=1.5), ValueError, "`target_ess`"),
    Case("smc-resampling", lambda: smc(resampling="magic"), ValueError, "`resampling`"),
    Case("smc-kernel-without-init", lambda: smc(kernel=lambda k, s, f: (s, None)), ValueError, "`kernel_init"),
    Case("smc-sharding", lambda: smc(particle_sharding="cpu"), TypeError, "`particle_sharding`"),
    Case("smc-schedule-repeats", lambda: smc(schedule=[0.0, 0.5, 0.5, 1.0]), ValueError, "`schedule`"),
    Case("smc-max-num-steps", lambda: smc(max_num_steps=0), ValueError, "`max_num_steps`"),
    Case(
        "smc-few-replicates-se",
        lambda: smc(num_replicates=4, schedule=[0.0, 0.5, 1.0]),
        UserWarning,
        "num_replicates=4",
    ),
    # ---- learners and ui.fit ----------------------------------------------------------------
    Case("pcd-num-particles", lambda: ui.learn.pcd(lat(), num_particles=0), ValueError, "`num_particles`"),
    Case("sap-optimizer", lambda: ui.learn.sap(lat(), optimizer="adam"), TypeError, "`optimizer`"),
    Case("sap-kernel-name", lambda: ui.learn.sap(lat(), kernel="gibbs"), TypeError, "`kernel`"),
    Case("learner-int-params", lambda: ui.learn.exact_ml(lat()).init(KEY, {"J": 1, "h": 0}), TypeError, "float"),
    Case("fit-data-shape", lambda: fit({"s": np.ones((8, 9), np.float32)}), ValueError, r"`data\['s'\]`"),
    Case("fit-data-values", lambda: fit({"s": np.zeros((8, 3, 3), np.float32)}), ValueError, r"`data\['s'\]`"),
    Case("fit-data-unknown-var", lambda: fit({"x": np.ones((8, 3, 3), np.float32)}), ValueError, "`data`"),
    Case("fit-data-nan", lambda: fit({"s": np.full((8, 3, 3), np.nan, np.float32)}), ValueError, r"`data\['s'\]`"),
    Case("fit-num-epochs", lambda: fit(num_epochs=0), ValueError, "`num_epochs`"),
    Case("fit-batch-size", lambda: fit(batch_size=0), ValueError, "`batch_size`"),
    Case("fit-params-nan", lambda: fit(params={"J": jnp.nan, "h": 0.0}), ValueError, "`params`"),
]


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


def test_the_table_is_large_and_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input(case: Case):
    with warnings.catch_warnings():
        # a warning row is raised as an error: the call stops at the warning (nothing runs)
        if isinstance(case.error, type) and issubclass(case.error, Warning):
            warnings.simplefilter("error", case.error)
        with pytest.raises(case.error, match=case.match):
            case.call()
