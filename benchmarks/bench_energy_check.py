"""Cost of the energy contract check: model construction and the first ``validate_params``.

Every public entry point calls ``model.validate_params(params)`` on the host; its first
call per parameter structure also checks the energy function (one trace, one compiled
evaluation at a fixed random configuration: ``EnergyModel.check_energy``).  Model
construction does not evaluate the energy (parameters are unknown then).  For each
built-in model this prints and records

* ``construct_ms``: median wall time of building the model (20 repeats);
* ``first_validate_ms``: the first ``validate_params`` call (includes the check);
* ``next_validate_ms``: median of later calls (cached check).

A tiny model is checked first so JAX's one-time start-up is not charged to the first
row.  Run it against another checkout (``PYTHONPATH=/path/to/checkout``) to compare;
without ``check_energy`` the first call is only the finiteness test of the leaves::

    python benchmarks/bench_energy_check.py     # writes benchmarks/results/bench_energy_check.json
    python benchmarks/bench_energy_check.py --quick   # two small models (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402

MODELS = {
    "rbm(784, 500)": (lambda: ui.models.rbm(784, 500), lambda m: m.init_params(jax.random.key(0))),
    "dbm(784, 500, 500)": (lambda: ui.models.dbm([784, 500, 500]), lambda m: m.init_params(jax.random.key(0))),
    "lattice_ising(256, 256)": (lambda: ui.models.lattice_ising(256, 256), lambda m: m.init_params(J=0.44)),
    "ising(200)": (lambda: ui.models.ising(200), lambda m: m.init_params(jax.random.key(0))),
    "potts(53, 21)": (lambda: ui.models.potts(53, 21), lambda m: m.init_params(jax.random.key(0))),
}

QUICK_MODELS = {
    "rbm(20, 10)": (lambda: ui.models.rbm(20, 10), lambda m: m.init_params(jax.random.key(0))),
    "lattice_ising(8, 8)": (lambda: ui.models.lattice_ising(8, 8), lambda m: m.init_params(J=0.44)),
}


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small models, 3 repeats (a smoke test)")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = parser.parse_args(argv)
    args.out = args.out or "benchmarks/results/bench_energy_check.json"
    if args.quick and args.out == "benchmarks/results/bench_energy_check.json":
        args.out = args.out.replace(".json", "_quick.json")
    warm = ui.models.ising(4)
    warm.validate_params(warm.init_params(jax.random.key(0)))
    rows = []
    models, repeats = (QUICK_MODELS, 3) if args.quick else (MODELS, 20)
    for name, (build, init) in models.items():
        construct = median_ms(build, repeats)
        model = build()
        params = jax.block_until_ready(init(model))
        t = time.perf_counter()
        model.validate_params(params)
        first = 1e3 * (time.perf_counter() - t)
        later = median_ms(lambda: model.validate_params(params), repeats)
        rows.append({"model": name, "construct_ms": construct, "first_validate_ms": first, "next_validate_ms": later})
        print(f"{name:26s} construct {construct:8.3f} ms   first validate_params {first:8.1f} ms   next {later:7.3f} ms")
    out = {
        "benchmark": "energy contract check",
        "has_check_energy": hasattr(ui.EnergyModel, "check_energy"),
        "ugm_infer": os.path.dirname(ui.__file__),
        "load_average": os.getloadavg(),
        "machine": machine_info(),
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
