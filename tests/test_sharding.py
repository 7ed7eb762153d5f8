"""Sharded runs on 4 CPU devices match the one-device runs (ugm_infer.sharding).

The device count of JAX's CPU backend is fixed when the backend starts, and this
pytest process already runs with one device, so the multi-device checks run in a
fresh interpreter (``tests/_sharded_checks.py``, with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before JAX is imported)
that runs each computation once unsharded and once sharded and reports, as JSON,
the differences and how the outputs are laid out across the devices.

What is bit-identical and what is not: per-chain work (Gibbs sweeps, energies) uses the
same random bits per chain on any device count (partitionable threefry), so sampled
states and energies are bit-identical.  Sums across chains / particles are reduced per
device and then across devices, a different float order: SMC log Z increments and the
SAP gradient then agree to float32 rounding (we allow 8 ulps, relative 1e-6), and the
particles themselves stay bit-identical as long as no uniform draw falls within that
rounding of an acceptance threshold (true for these fixed seeds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import once_per_run

import ugm_infer as ui
from ugm_infer import sharding

SCRIPT = Path(__file__).resolve().parent / "_sharded_checks.py"
NUM_DEVICES = 4
F32_RTOL = 8 * float(np.finfo(np.float32).eps)  # 8 ulps: reductions in a different order


def _run_checks():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={NUM_DEVICES}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"{SCRIPT.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return once_per_run(tmp_path_factory, "sharded_checks", _run_checks)


def assert_split(layout, leading_axis=0, num_chains=None):
    """Split over 4 devices along ``leading_axis``, each device holding 1/4 of that axis."""
    assert layout["num_devices"] == NUM_DEVICES
    spec = layout["spec"] + [None] * (leading_axis + 1 - len(layout["spec"]))
    assert spec[leading_axis] == sharding.AXIS
    shapes = layout["shard_shapes"]
    assert len(shapes) == NUM_DEVICES
    assert all(s == shapes[0] for s in shapes)
    if num_chains is not None:
        assert shapes[0][leading_axis] * NUM_DEVICES == num_chains


def test_sample_sharded_is_bit_identical(report):
    assert report["num_devices"] == NUM_DEVICES
    r = report["sample"]
    assert r["states_identical"] and r["energies_identical"] and r["final_identical"]
    for name in ("input", "states", "energies", "final"):
        assert_split(r[name], 0, num_chains=8)


def test_smc_sharded_log_z_matches(report):
    r = report["smc"]
    # same particles, weights and log Z up to the rounding of the cross-device sums
    assert r["particles_identical"]
    assert r["log_Z_replicates_max_abs_diff"] <= F32_RTOL * abs(r["log_Z_one"])
    assert abs(r["log_Z_many"] - r["log_Z_one"]) <= F32_RTOL * abs(r["log_Z_one"])
    assert r["weights_max_abs_diff"] <= 1e-6
    # particles (replicate, particle, H, W): the particle axis is split
    assert_split(r["particles"], 1, num_chains=64)


def test_sap_fit_sharded_matches(report):
    r = report["fit"]
    assert r["num_steps"] == 12
    assert r["params_moved"] > 0.05  # learning did something, so agreement is informative
    assert r["particles_identical"]
    assert r["params_max_abs_diff"] <= F32_RTOL * max(1.0, r["params_max_abs"])
    assert_split(r["particles"], 0, num_chains=32)
    # parameters replicated: a full copy on every device
    assert r["params_W"]["num_devices"] == NUM_DEVICES
    assert all(s is None for s in r["params_W"]["spec"])
    assert all(s == [6, 3] for s in r["params_W"]["shard_shapes"])


def test_pcd_fit_on_a_lattice_splits_its_kept_chains(report):
    r = report["fit_lattice"]
    # lattice Ising gradients sum small integers: exact in any order, so everything is bit-identical
    assert r["params_moved"] > 0.01
    assert r["params_identical"] and r["particles_identical"] and r["words_identical"]
    assert_split(r["particles"], 0, num_chains=32)
    # the kept words (h/2, w/2, chains): split along the trailing chain axis
    assert r["words"]["spec"][:2] == [None, None]
    assert_split(r["words"], 2, num_chains=32)


# ---------------------------------------------------------------------------------
# argument checks (one device, nothing compiled)
# ---------------------------------------------------------------------------------
def test_chain_mesh_and_bad_input():
    mesh = sharding.chain_mesh()
    assert mesh.axis_names == (sharding.AXIS,)
    assert mesh.devices.size == len(jax.devices())
    with pytest.raises(ValueError, match="`devices`"):
        sharding.chain_mesh([])
    with pytest.raises(TypeError, match="`devices`"):
        sharding.chain_mesh(["cpu:0"])
    with pytest.raises(TypeError, match="`mesh`"):
        sharding.chain_sharding("chains")
    with pytest.raises(ValueError, match=r"`x0` leaf \['s'\] has shape \(\)"):
        sharding.shard_chains({"s": np.float32(1.0)}, mesh, argname="x0")
    with pytest.raises(TypeError, match="`learner`"):
        sharding.shard_learner(object(), mesh)


def test_tempered_smc_rejects_bad_sharding():
    model = ui.models.lattice_ising(4, 4)
    with pytest.raises(TypeError, match="`particle_sharding`"):
        ui.smc.tempered_smc(jax.random.key(0), model, model.init_params(), particle_sharding="chains")
