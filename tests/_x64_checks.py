"""Run every numerical path with ``jax_enable_x64`` and float64 parameters.

Executed by ``tests/test_x64.py`` in a fresh interpreter: 64-bit mode is a process-wide
JAX flag, fixed before the first computation, and the pytest process runs in 32 bits.
Paths: exact enumeration (``log_partition``, ``log_prob``, ``marginals``), Gibbs /
Metropolis / tempered transitions / parallel tempering through ``ui.sample``, AIS and
reverse AIS, tempered SMC with an adaptive and a fixed schedule, and ``ui.fit`` with
exact ML, pseudo-likelihood and PCD.  The references are computed here by brute force
in float64 with numpy and ``jax.grad`` of the model's energy (independent of
``ui.exact`` and the learners), plus float32 runs of the deterministic paths.  Prints
one JSON object on the last line of stdout.

Usage: ``python tests/_x64_checks.py [--core]`` (``--core``: only the samplers and
estimators in ``CORE_SAMPLERS`` and ``CORE_ESTIMATORS``).
"""

from __future__ import annotations

import os

os.environ["JAX_ENABLE_X64"] = "1"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import itertools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import ugm_infer as ui  # noqa: E402


def to64(tree):
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), tree)


MODEL = dict(height=3, width=3, periodic=False)
PARAMS = {"J": 0.4, "h": 0.15}
NUM_CHAINS, NUM_DRAWS, NUM_WARMUP = 64, 100, 20
LEARNING_RATE, NUM_EPOCHS = 0.05, 3


def brute_force(model, params):
    """float64 ``log Z``, probabilities, states and energy gradients of all configurations."""
    ((name, domain),) = model.variables.items()
    states = np.array(list(itertools.product(domain.values, repeat=domain.size)), np.float64)
    states = jnp.asarray(states.reshape((-1,) + domain.shape), domain.dtype)
    energies = np.asarray(jax.vmap(lambda s: model.energy(params, {name: s}))(states), np.float64)
    grads = jax.vmap(jax.grad(lambda p, s: model.energy(p, {name: s})), in_axes=(None, 0))(params, states)
    m = (-energies).max()
    log_z = m + np.log(np.sum(np.exp(-energies - m)))
    return float(log_z), np.exp(-energies - log_z), np.asarray(states, np.float64), energies, grads


def exact_ml_reference(model, start, data):
    """Full-batch gradient ascent on the exact average log-likelihood, by enumeration (float64)."""
    params = dict(start)
    for _ in range(NUM_EPOCHS):
        _, probs, _, _, grads = brute_force(model, params)
        data_grads = jax.vmap(jax.grad(lambda p, s: model.energy(p, {"s": s})), in_axes=(None, 0))(params, data["s"])
        # d/dtheta [-mean E(data) - log Z] = -mean dE(data) + E_p[dE]
        params = {
            k: params[k] + LEARNING_RATE * (-np.mean(np.asarray(data_grads[k])) + np.sum(probs * np.asarray(grads[k])))
            for k in params
        }
    return {k: float(v) for k, v in params.items()}


def chain_mean_test(energies, exact_mean):
    """Mean energy over independent chains against the exact one, in standard errors of the chain means."""
    chain_means = np.asarray(energies, np.float64).mean(axis=1)
    se = chain_means.std(ddof=1) / np.sqrt(len(chain_means))
    return {"mean": float(chain_means.mean()), "exact": exact_mean, "se": float(se)}


def dtypes(tree):
    return sorted({str(x.dtype) for x in jax.tree.leaves(tree)})


#: ``--core`` (what CI runs): these samplers and estimators only; the others are slow tests
CORE_SAMPLERS = ("gibbs", "parallel_tempering")
CORE_ESTIMATORS = ("ais", "tsmc_fixed")


def main(core: bool = False) -> dict:
    out: dict = {"x64": bool(jax.config.jax_enable_x64), "core": core, "section_seconds": {}}
    clock = [time.perf_counter()]

    def lap(name):
        now = time.perf_counter()
        out["section_seconds"][name] = round(now - clock[0], 2)
        clock[0] = now

    model = ui.models.lattice_ising(**MODEL)
    p32 = model.init_params(**PARAMS)
    p64 = to64(p32)
    log_z_ref, probs, states, energies, _ = brute_force(model, p64)
    out["log_z_ref"] = log_z_ref
    mean_energy = float(np.sum(probs * energies))

    # exact enumeration, float64 against brute force and float32 against float64
    log_z = ui.exact.log_partition(model, p64)
    plus = (states.reshape(len(states), -1) > 0).astype(np.float64)
    p_plus = probs @ plus
    out["exact"] = {
        "log_z": float(log_z),
        "dtype": str(log_z.dtype),
        "log_z_f32": float(ui.exact.log_partition(model, p32)),
        "log_prob": np.asarray(ui.exact.log_prob(model, p64, {"s": jnp.asarray(states[:5])}), np.float64).tolist(),
        "log_prob_ref": np.log(probs[:5]).tolist(),
        "marginal": np.asarray(ui.exact.marginals(model, p64)["s"], np.float64).reshape(-1).tolist(),
        "marginal_ref": np.stack([1.0 - p_plus, p_plus], axis=-1).reshape(-1).tolist(),
    }

    lap("exact")

    # samplers through ui.sample: mean energy of independent chains against the exact one
    x0 = model.random_state(jax.random.key(1), NUM_CHAINS)
    ladder = np.linspace(0.5, 1.0, 4)
    algorithms = {
        "gibbs": lambda: ui.kernels.gibbs(model, p64),
        "metropolis": lambda: ui.kernels.metropolis(model, p64),
        "tempered_transitions": lambda: ui.kernels.tempered_transitions(model, p64, betas=ladder),
        "parallel_tempering": lambda: ui.kernels.parallel_tempering(model, p64, betas=ladder),
    }
    out["sampling"] = {}
    for name, make in algorithms.items():
        if core and name not in CORE_SAMPLERS:
            continue
        algorithm = make()
        r = ui.sample(jax.random.key(2), algorithm, x0, NUM_DRAWS, num_warmup=NUM_WARMUP, model=model, params=p64)
        out["sampling"][name] = {**chain_mean_test(r.energies, mean_energy), "dtype": str(r.energies.dtype)}

    lap("sampling")

    # annealed importance sampling (reverse AIS reuses the forward run's compilation) and tempered SMC
    estimators = {
        "ais": lambda: ui.smc.ais(jax.random.key(3), model, p64, num_runs=64, num_betas=50),
        "reverse_ais": lambda: ui.smc.reverse_ais(
            jax.random.key(4), model, p64, ui.exact.sample(jax.random.key(5), model, p64, 64), num_betas=50
        ),
        "tsmc_adaptive": lambda: ui.smc.tempered_smc(jax.random.key(6), model, p64, num_particles=256, num_replicates=8),
        "tsmc_fixed": lambda: ui.smc.tempered_smc(
            jax.random.key(7), model, p64, num_particles=256, num_replicates=8, schedule=np.linspace(0.0, 1.0, 12)
        ),
    }
    out["smc"] = {}
    for name, run in estimators.items():
        if core and name not in CORE_ESTIMATORS:
            continue
        r = run()
        out["smc"][name] = [float(r.log_Z), float(r.log_Z_se), str(r.log_Z.dtype)]

    lap("smc")

    # learners through ui.fit (full batch: one step per epoch)
    data = ui.exact.sample(jax.random.key(8), model, p64, 64)
    start = {"J": 0.1, "h": 0.0}
    kwargs = dict(num_epochs=NUM_EPOCHS, batch_size=64, progress=False, eval_fn=None)
    fits = {"exact_ml_ref": exact_ml_reference(model, start, data)}
    learners = {
        "exact_ml": lambda: ui.learn.exact_ml(model, optimizer=optax.sgd(LEARNING_RATE)),
        "pseudo_likelihood": lambda: ui.learn.pseudo_likelihood(model, optimizer=optax.sgd(LEARNING_RATE)),
        "pcd": lambda: ui.learn.pcd(model, optimizer=optax.sgd(LEARNING_RATE), num_particles=16),
    }
    for name, make in learners.items():
        r = ui.fit(make(), jax.random.key(9), data, params=to64(start), **kwargs)
        fits[name] = {"params": {k: float(v) for k, v in r.params.items()}, "dtypes": dtypes(r.params)}
    f32 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), start)
    r = ui.fit(learners["pseudo_likelihood"](), jax.random.key(9), data, params=f32, **kwargs)
    fits["pseudo_likelihood_f32"] = {k: float(v) for k, v in r.params.items()}
    out["fit"] = fits
    lap("fit")
    return out


if __name__ == "__main__":
    t0 = time.perf_counter()
    report = main(core="--core" in sys.argv[1:])
    report["seconds"] = time.perf_counter() - t0
    print(json.dumps(report))
