"""Every benchmark script in ``benchmarks/`` runs in its ``--quick`` mode (a smoke test of the scripts).

Each script runs as its own subprocess with tiny sizes, writes its JSON to a temporary
folder (never over the committed results) and must exit cleanly with a JSON that parses.
These are not timings: the speed targets live in the scripts' full runs
(``docs/performance.md``).  Scripts that need a tool this environment lacks (adabmDCA's
CLI, the THRML package, the MNIST file) are skipped with the reason.

The scripts whose quick mode costs under ~15 s of CPU (mostly compilation) run by
default, about 60 s of CPU together; the others compile many programs (an RBM 784-500
under four contenders, several samplers in their own processes, an SMC and two AIS
runs, first calls in fresh interpreters) and are marked ``slow`` (``pytest -m slow tests/test_benchmarks_quick.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
MNIST = Path("/work/shared/data/binarized_mnist.npz")
ADABMDCA = Path("/work/dca-venv/bin/adabmDCA")


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


# script -> (extra arguments, reason to skip or None); extra arguments may name "{tmp}"
SCRIPTS = {
    "bench_paths.py": ([], None),
    "bench_cost_curves.py": (["--png", "{tmp}/cost_curves.png"], None),
    "bench_dca.py": (
        ["--workdir", "{tmp}/dca"],
        None if ADABMDCA.exists() else f"adabmDCA's CLI ({ADABMDCA}, a PyTorch virtual environment) is not installed",
    ),
    "bench_dense.py": ([], None),
    "bench_draws.py": ([], None),
    "bench_energy_check.py": ([], None),
    "bench_ergm_toggle.py": ([], None),
    "bench_first_call.py": ([], None),
    "bench_fit.py": ([], None if MNIST.exists() else f"{MNIST} not found"),
    "bench_import.py": ([], None),
    "bench_lattice.py": ([], None),
    "bench_lattice_potts.py": ([], None),
    "bench_log_z.py": ([], None),
    "bench_memory.py": ([], None),
    "bench_multispin.py": ([], None),
    "bench_numpyro_mixed.py": (["--problems", "spike_slab", "--samplers", "ugm_gibbs,discrete_hmc_gibbs"], None),
    "bench_pcd_sklearn.py": ([], None if MNIST.exists() else f"{MNIST} not found"),
    "bench_sweeps.py": ([], None),
    "bench_word_energy.py": ([], None),
    "bench_thrml.py": (
        [],
        "THRML is not installed here (it needs its own virtual environment with another jax)" if _missing("thrml") else None,
    ),
}


# quick modes that cost more than ~15 s of CPU (measured on the 2-core development machine)
SLOW = {
    "bench_paths.py",
    "bench_cost_curves.py",
    "bench_dense.py",
    "bench_draws.py",
    "bench_first_call.py",
    "bench_fit.py",
    "bench_lattice_potts.py",
    "bench_log_z.py",
    "bench_numpyro_mixed.py",
    "bench_pcd_sklearn.py",
}


def test_every_script_is_listed():
    scripts = {p.name for p in BENCH.glob("bench_*.py")}
    assert scripts == set(SCRIPTS), "add new benchmark scripts to SCRIPTS (with a --quick mode)"


@pytest.mark.parametrize(
    "script", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in sorted(SCRIPTS)]
)
def test_quick_mode_runs(script, tmp_path):
    extra, skip = SCRIPTS[script]
    if skip:
        pytest.skip(skip)
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(BENCH / script), "--quick", "--out", str(out)]
    cmd += [a.format(tmp=tmp_path) for a in extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", MPLBACKEND="Agg")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{script} --quick failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert out.exists(), f"{script} --quick wrote no {out}"
    json.loads(out.read_text())
