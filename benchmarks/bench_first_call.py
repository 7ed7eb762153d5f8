"""First-call latency of a model's random start and of ``ui.sample``, in fresh interpreters.

A user's first ``model.random_state(key, chains)`` and first ``ui.sample`` compile their
programs; this script times both (wall time of the call, trace + compile + run) in a
fresh interpreter per measurement, with the persistent compilation cache off, after one
trivial JAX operation (so the backend's start-up is not counted). Contenders for the
random start, the same integers bit for bit:

* ``random_state``: ``model.random_state(key, chains)`` (one compiled program: the
  key split and the fused hash of ``ugm_infer._random``);
* ``jax_randint``: what a plain-JAX user writes, ``jax.random.randint(k, (chains, *shape),
  0, num_states)`` per variable after ``jax.random.split`` (eager);
* ``jax_randint_flat``: the same drawn flat and reshaped (XLA compiles ``jax.random``'s
  hash loop over a rank-1 array several times faster than over a batch of lattices).

``ui.sample``'s first call (5 draws, from a start drawn before the timer) is reported next
to a second call's time. The contenders run alternately, repeat
by repeat; figures are medians over repeats and paired ratios.

Run::

    python benchmarks/bench_first_call.py            # 5 repeats, writes benchmarks/results/bench_first_call.json
    python benchmarks/bench_first_call.py --quick    # 1 repeat, an 8x8 lattice, for CI
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: name -> (model expression, chains)
CASES = {
    "lattice_ising 64x64": ("ui.models.lattice_ising(64, 64)", 32),
    "lattice_potts 32x32 q=3": ("ui.models.lattice_potts(32, 32, 3)", 32),
    "rbm 784x500": ("ui.models.rbm(784, 500)", 100),
    "ising 16 (dense)": ("ui.models.ising(16)", 32),
}
CONTENDERS = ("random_state", "jax_randint", "jax_randint_flat", "sample")

CHILD = """
import json, math, time
import jax, jax.numpy as jnp
jax.config.update("jax_enable_compilation_cache", False)
import ugm_infer as ui
jax.block_until_ready(jnp.zeros(3) + 1)  # the backend's start-up, not counted
model = {model}
chains = {chains}
key = jax.random.key(1)
def jax_randint(key, flat):
    keys = jax.random.split(key, len(model.variables))
    out = {{}}
    for k, (n, d) in zip(keys, model.variables.items()):
        shape = (chains,) + d.shape
        if flat:
            idx = jax.random.randint(k, (math.prod(shape),), 0, d.num_states).reshape(shape)
        else:
            idx = jax.random.randint(k, shape, 0, d.num_states)
        out[n] = jnp.take(jnp.asarray(d.values, d.dtype), idx, axis=0)
    return out
def timed(fn):
    t0 = time.perf_counter()
    value = jax.block_until_ready(fn())
    seconds = time.perf_counter() - t0
    if isinstance(value, dict):  # a random start: a fingerprint of its values, the same for every contender
        weight = lambda v: 1 + jnp.arange(v.size).reshape(v.shape) % 7
        out["checksum"] = [float(jnp.sum(v.astype(jnp.float32) * weight(v))) for v in value.values()]
    return seconds
out = {{}}
if "{contender}" == "random_state":
    out["first"] = timed(lambda: model.random_state(key, chains))
    out["second"] = timed(lambda: model.random_state(jax.random.key(2), chains))
elif "{contender}".startswith("jax_randint"):
    flat = "{contender}" == "jax_randint_flat"
    out["first"] = timed(lambda: jax_randint(key, flat))
    out["second"] = timed(lambda: jax_randint(jax.random.key(2), flat))
else:
    params = model.init_params(jax.random.key(0))
    x0 = model.random_state(key, chains)
    gibbs = ui.kernels.gibbs(model, params)
    out["first"] = timed(lambda: ui.sample(jax.random.key(3), gibbs, x0, 5).final_state)
    out["second"] = timed(lambda: ui.sample(jax.random.key(4), gibbs, x0, 5).final_state)
print(json.dumps(out))
"""


def run_child(model: str, chains: int, contender: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    code = CHILD.format(model=model, chains=chains, contender=contender)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{contender} on {model} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="an 8x8 lattice, one repeat")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = parser.parse_args(argv)
    out_path = args.out or f"benchmarks/results/bench_first_call{'_quick' if args.quick else ''}.json"
    repeats = args.repeats or (1 if args.quick else 5)
    cases = {"lattice_ising 8x8": ("ui.models.lattice_ising(8, 8)", 3)} if args.quick else CASES
    load_before = os.getloadavg()
    rows = []
    for name, (model, chains) in cases.items():
        runs = {c: [] for c in CONTENDERS}
        for r in range(repeats):
            order = CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]
            for contender in order:
                runs[contender].append(run_child(model, chains, contender))
        starts = {json.dumps(x["checksum"]) for c in ("random_state", "jax_randint", "jax_randint_flat") for x in runs[c]}
        if len(starts) != 1:
            raise RuntimeError(f"{name}: the random starts differ between contenders: {starts}")
        med = {c: {k: float(np.median([x[k] for x in v])) for k in ("first", "second")} for c, v in runs.items()}
        paired = {
            base: float(np.median([b["first"] / a["first"] for a, b in zip(runs["random_state"], runs[base])]))
            for base in ("jax_randint", "jax_randint_flat")
        }
        rows.append(
            {"case": name, "chains": chains, "median": med, "first_call_ratio_over_random_state": paired, "runs": runs}
        )
        print(
            f"{name:26s} {chains:4d} chains | random_state first {med['random_state']['first']:.3f} s "
            f"| jax.random.randint {med['jax_randint']['first']:.3f} s "
            f"({paired['jax_randint']:.2f}x) | flat {med['jax_randint_flat']['first']:.3f} s "
            f"({paired['jax_randint_flat']:.2f}x) | ui.sample first {med['sample']['first']:.3f} s "
            f"(second call {med['sample']['second']:.3f})",
            flush=True,
        )
    import jax

    result = {
        "script": "benchmarks/bench_first_call.py",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "repeats": repeats,
        "machine": {
            "cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
            if os.path.exists("/proc/cpuinfo")
            else "?",
            "cpu_count": os.cpu_count(),
            "jax": jax.__version__,
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        },
        "rows": rows,
    }
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
