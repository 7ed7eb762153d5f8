"""Run sampling, tempered SMC and SAP learning (an RBM and a lattice) on one device and on a 4-device CPU mesh.

Executed by ``tests/test_sharding.py`` in a fresh interpreter: the device count of the
CPU backend is fixed when JAX starts, and the pytest process has already started it
with one device.  Prints one JSON object on the last line of stdout.

Usage: ``python tests/_sharded_checks.py [sample|smc|fit|fit_lattice ...]`` (default: all four).
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import ugm_infer as ui  # noqa: E402
from ugm_infer import sharding  # noqa: E402

NUM_DEVICES = 4


def describe(x) -> dict:
    """How an array is placed: device count, the spec, and the shapes of its shards."""
    spec = getattr(x.sharding, "spec", None)
    return {
        "num_devices": len(x.sharding.device_set),
        "spec": None if spec is None else [None if s is None else str(s) for s in spec],
        "shard_shapes": [list(s.data.shape) for s in x.addressable_shards],
    }


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def check_sample(mesh) -> dict:
    model = ui.models.lattice_ising(6, 6)
    params = model.init_params(J=0.35, h=0.05)
    x0 = model.random_state(jax.random.key(1), 8)
    algorithm = ui.kernels.gibbs(model, params)
    key = jax.random.key(2)
    one = ui.sample(key, algorithm, x0, 6, model=model, params=params)
    x0_sharded = sharding.shard_chains(x0, mesh, argname="x0")
    many = ui.sample(key, algorithm, x0_sharded, 6, model=model, params=params)
    return {
        "states_identical": bool(np.array_equal(one.states["s"], many.states["s"])),
        "energies_identical": bool(np.array_equal(one.energies, many.energies)),
        "final_identical": bool(np.array_equal(one.final_state.position["s"], many.final_state.position["s"])),
        "input": describe(x0_sharded["s"]),
        "states": describe(many.states["s"]),
        "energies": describe(many.energies),
        "final": describe(many.final_state.position["s"]),
    }


def check_smc(mesh) -> dict:
    model = ui.models.lattice_ising(4, 4)
    params = model.init_params(J=0.4, h=0.1)
    kwargs = dict(num_particles=64, num_replicates=2, schedule=np.linspace(0.0, 1.0, 9), num_mcmc_steps=2)
    key = jax.random.key(3)
    one = ui.smc.tempered_smc(key, model, params, **kwargs)
    many = ui.smc.tempered_smc(key, model, params, particle_sharding=sharding.chain_sharding(mesh), **kwargs)
    return {
        "log_Z_one": float(one.log_Z),
        "log_Z_many": float(many.log_Z),
        "log_Z_exact": float(ui.exact.log_partition(model, params)),
        "log_Z_replicates_max_abs_diff": max_abs_diff(one.log_Z_replicates, many.log_Z_replicates),
        "log_Z_replicates_identical": bool(np.array_equal(one.log_Z_replicates, many.log_Z_replicates)),
        "particles_identical": bool(np.array_equal(one.particles["s"], many.particles["s"])),
        "weights_max_abs_diff": max_abs_diff(one.weights, many.weights),
        "particles": describe(many.particles["s"]),
    }


def check_fit(mesh) -> dict:
    # an RBM: the gradient averages sigmoid expectations and float products over the
    # examples and particles, so the cross-device reduction order matters (a lattice
    # Ising model would sum small integers, exact in any order)
    model = ui.models.rbm(6, 3)
    true_params = model.init_params(jax.random.key(6), scale=1.0)
    data = ui.exact.sample(jax.random.key(4), model, true_params, 64)["v"]
    kwargs = dict(num_epochs=3, batch_size=16, eval_fn=None, progress=False, params=model.init_params(jax.random.key(7)))
    learner = ui.learn.pcd(model, optimizer=optax.sgd(0.05), num_particles=32)
    key = jax.random.key(5)
    one = ui.fit(learner, key, data, **kwargs)
    many = ui.fit(sharding.shard_learner(learner, mesh), key, data, **kwargs)
    flat_one = np.concatenate([np.ravel(x) for x in jax.tree.leaves(one.params)])
    flat_many = np.concatenate([np.ravel(x) for x in jax.tree.leaves(many.params)])
    flat_init = np.concatenate([np.ravel(x) for x in jax.tree.leaves(kwargs["params"])])
    return {
        "num_steps": int(one.history["steps"]["step"][-1]),
        "params_moved": max_abs_diff(flat_one, flat_init),
        "params_max_abs": float(np.max(np.abs(flat_one))),
        "params_max_abs_diff": max_abs_diff(flat_one, flat_many),
        "params_identical": bool(np.array_equal(flat_one, flat_many)),
        "particles_identical": bool(np.array_equal(one.state.particles["v"], many.state.particles["v"])),
        "particles": describe(many.state.particles["v"]),
        "params_W": describe(many.state.params["W"]),
    }


def check_fit_lattice(mesh) -> dict:
    # PCD on a lattice keeps its particles as chains-last words (``kernel_state``): split along that last axis
    model = ui.models.lattice_ising(4, 6)
    data = model.random_state(jax.random.key(8), 32)
    kwargs = dict(num_epochs=2, batch_size=16, eval_fn=None, progress=False, params=model.init_params(J=0.1))
    learner = ui.learn.pcd(model, optimizer=optax.sgd(0.05), num_particles=32)
    key = jax.random.key(9)
    one = ui.fit(learner, key, data, **kwargs)
    many = ui.fit(sharding.shard_learner(learner, mesh), key, data, **kwargs)
    return {
        "params_identical": all(bool(np.array_equal(one.params[k], many.params[k])) for k in one.params),
        "params_moved": max_abs_diff(one.params["J"], kwargs["params"]["J"]),
        "particles_identical": bool(np.array_equal(one.state.particles["s"], many.state.particles["s"])),
        "words_identical": bool(np.array_equal(one.state.kernel_state.even, many.state.kernel_state.even)),
        "words": describe(many.state.kernel_state.even),
        "particles": describe(many.state.particles["s"]),
    }


def main(argv: list[str]) -> None:
    if len(jax.devices()) != NUM_DEVICES:
        raise SystemExit(f"expected {NUM_DEVICES} CPU devices, got {jax.devices()}")
    mesh = sharding.chain_mesh()
    checks = {"sample": check_sample, "smc": check_smc, "fit": check_fit, "fit_lattice": check_fit_lattice}
    names = argv or list(checks)
    out = {"num_devices": len(jax.devices()), "jax": jax.__version__}
    for name in names:
        t0 = time.perf_counter()
        out[name] = checks[name](mesh)
        out[name]["seconds"] = time.perf_counter() - t0
    print(json.dumps(out))


if __name__ == "__main__":
    jnp.zeros(())  # start the backend before timing anything else
    main(sys.argv[1:])
