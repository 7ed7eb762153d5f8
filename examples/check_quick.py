"""Re-run every example's ``--quick`` mode and compare its numbers with the committed reference.

Each example's quick mode writes a JSON result into ``--out``.  This script runs them
(``--jobs`` at a time, default 2), flattens every JSON into ``path -> number`` pairs
(nested keys and list indices joined by ``/``), drops what depends on the machine rather
than on the computation (timings, dates, load, versions, paths, the commit), and compares
the rest with ``docs/results/quick/<example>.json``::

    |x - x_ref| <= atol + rtol * |x_ref|       (defaults: rtol = atol = 1e-3)

A quick run is deterministic given the code, the JAX version and the CPU, so on the
machine the references were made on it reproduces them to the last digit; a difference
above the tolerance means that a random stream, an algorithm or a setting changed (or
the CPU's floating-point path did -- re-run with ``--update`` on the reference machine
after checking why).  Missing numbers fail; new numbers are listed, not failed.  The
references record the CPU model and the JAX version they were made with; on another
CPU or JAX version (where a Markov chain may legitimately take another path after a
last-bit difference) differences are listed as warnings and only crashes and missing
numbers fail.

Usage::

    python examples/check_quick.py                 # run all, compare, exit 1 on a mismatch
    python examples/check_quick.py --update        # run all and rewrite the references
    python examples/check_quick.py --only rbm_ais dbm_mnist
    python examples/check_quick.py --compare-only --out out/quick   # compare existing runs

The references record the commit and command they were made with.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO_ROOT, git_commit  # noqa: E402

REFERENCE_DIR = os.path.join(REPO_ROOT, "docs", "results", "quick")

#: example -> (extra arguments after ``--quick --out DIR``, the JSON file it writes in DIR; None: figures only,
#: so only its exit status is checked). The longest quick runs first (about 50 s down to 15 s on two cores), so that
#: the jobs finish together
EXAMPLES: dict[str, tuple[list[str], str | None]] = {
    "rbm_tempered_transitions": ([], "rbm_tempered_transitions.json"),
    "dbm_mnist": ([], "results.json"),
    "rbm_ais": ([], "results.json"),
    "numpyro_mixed": ([], "summary.json"),
    "vbm_learning": ([], "vbm_learning.json"),
    "custom_kernel": ([], "custom_kernel.json"),
    "semi_rbm_mnist": ([], "semi_rbm_mnist.json"),
    "vbm_learning_rates": ([], "vbm_learning_rates.json"),
    "sbn_digits": ([], "sbn_digits.json"),
    "crf_denoising": ([], "crf_denoising.json"),
    "grid_apcd": ([], "results.json"),
    "crf_multilabel": ([], "crf_multilabel.json"),
    "psmc_rbm": ([], "psmc_rbm.json"),
    "ergm_triad": ([], "ergm_triad.json"),
    "diagnose_mixing": ([], None),
    "dca_pf00014": ([], "dca_pf00014.json"),
    "vbm_particle_filter": ([], "vbm_particle_filter.json"),
    "ergm_florentine": ([], "ergm_florentine.json"),
}

#: a flattened key is dropped when one of its components matches this (case-insensitive)
MACHINE_DEPENDENT = re.compile(
    r"(time|timing|second|at_budget|wall|_s$|^s$|date|load|commit|command|machine|platform|python|jax|numpy|backend|version|"
    r"path|data$|^out$|elapsed|duration|ms_per|per_second|speed|throughput|cpu|host|progress|quick$)",
    re.IGNORECASE,
)


def flatten(obj, prefix: str = "") -> dict[str, float]:
    """``{"a/b/0": 1.5, ...}`` for every finite-or-not number (bools as 0/1) in a JSON tree."""
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if MACHINE_DEPENDENT.search(str(k)):
                continue
            out.update(flatten(v, f"{prefix}{k}/"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}{i}/"))
    elif isinstance(obj, bool):
        out[prefix.rstrip("/")] = float(obj)
    elif isinstance(obj, (int, float)):
        out[prefix.rstrip("/")] = float(obj)
    return out


def find_commit(obj):
    """The first ``commit`` value in a JSON tree (the run's own provenance), or ``None``."""
    if isinstance(obj, dict):
        if isinstance(obj.get("commit"), str):
            return obj["commit"]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for child in children:
        found = find_commit(child)
        if found:
            return found
    return None


def machine() -> dict[str, str]:
    """What a quick run's last digits depend on besides the code: the CPU model and the JAX version."""
    import jax

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu_model": cpu, "jax": jax.__version__}


def run_one(name: str, out_root: str) -> dict:
    extra, json_name = EXAMPLES[name]
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, os.path.join(REPO_ROOT, "examples", f"{name}.py"), "--quick", "--out", out, *extra]
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    res = {"name": name, "rc": proc.returncode, "seconds": time.time() - t}
    res["json"] = None if json_name is None else os.path.join(out, json_name)
    if proc.returncode != 0:
        res["tail"] = (proc.stdout + proc.stderr)[-3000:]
    return res


def compare(name: str, numbers: dict[str, float], reference: dict[str, float], rtol: float, atol: float):
    """Mismatches ``[(key, value, reference)]``, missing keys and new keys."""
    bad = []
    for k, ref in reference.items():
        if k not in numbers:
            continue
        x = numbers[k]
        if math.isnan(ref) and math.isnan(x):
            continue
        if not abs(x - ref) <= atol + rtol * abs(ref):  # also catches a NaN on one side
            bad.append((k, x, ref))
    missing = sorted(set(reference) - set(numbers))
    new = sorted(set(numbers) - set(reference))
    return bad, missing, new


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "out", "quick"), help="where the quick runs write")
    p.add_argument("--only", nargs="*", default=None, help=f"a subset of {list(EXAMPLES)}")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument("--update", action="store_true", help="rewrite docs/results/quick/*.json from these runs")
    p.add_argument("--compare-only", action="store_true", help="do not run; compare the JSON already in --out")
    args = p.parse_args(argv)
    names = args.only or list(EXAMPLES)
    unknown = sorted(set(names) - set(EXAMPLES))
    if unknown:
        p.error(f"--only: unknown {unknown}; choose from {list(EXAMPLES)}")
    if args.compare_only:
        runs = []
        for n in names:
            json_name = EXAMPLES[n][1]
            path = None if json_name is None else os.path.join(args.out, n, json_name)
            runs.append({"name": n, "rc": 0, "seconds": float("nan"), "json": path})
    else:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            runs = list(pool.map(lambda n: run_one(n, args.out), names))
    commit, failures, here = git_commit(), 0, machine()
    os.makedirs(REFERENCE_DIR, exist_ok=True)
    for r in runs:
        name, ref_path = r["name"], os.path.join(REFERENCE_DIR, f"{r['name']}.json")
        head = f"{name:26s} {r['seconds']:6.0f} s  "
        if r["rc"] != 0:
            failures += 1
            print(f"{head}FAILED (exit {r['rc']})\n{r.get('tail', '')}")
            continue
        if r["json"] is None:
            print(f"{head}ok (ran; writes figures only)")
            continue
        if not os.path.isfile(r["json"]):
            failures += 1
            print(f"{head}FAILED: no JSON written at {r['json']}")
            continue
        with open(r["json"]) as f:
            tree = json.load(f)
        numbers = flatten(tree)
        if args.update:
            extra = EXAMPLES[name][0]
            ref = {
                "example": name,
                "command": " ".join(["python", f"examples/{name}.py", "--quick", "--out", "OUT", *extra]),
                "commit": find_commit(tree) or commit,
                "tolerance": {"rtol": args.rtol, "atol": args.atol},
                "machine": here,
                "numbers": numbers,
            }
            with open(ref_path, "w") as f:
                json.dump(ref, f, indent=0, sort_keys=True)
            print(f"{head}reference written ({len(numbers)} numbers)")
            continue
        if not os.path.isfile(ref_path):
            failures += 1
            print(f"{head}FAILED: no reference {os.path.relpath(ref_path, REPO_ROOT)} (run with --update)")
            continue
        with open(ref_path) as f:
            reference = json.load(f)
        bad, missing, new = compare(name, numbers, reference["numbers"], args.rtol, args.atol)
        same_machine = reference.get("machine") == here
        status = "ok" if not bad and not missing else "MISMATCH"
        if bad and not missing and not same_machine:
            status = "differs (reference made on another CPU or JAX version: a warning, not a failure)"
        failures += status == "MISMATCH"
        print(
            f"{head}{status}: {len(reference['numbers']) - len(bad) - len(missing)}/{len(reference['numbers'])} "
            f"numbers within tolerance (reference at {reference.get('commit', '?')})"
        )
        for k, x, ref in bad[:8]:
            print(f"    {k}: {x!r} vs reference {ref!r}")
        if len(bad) > 8:
            print(f"    ... and {len(bad) - 8} more")
        if missing:
            print(f"    missing: {missing[:8]}{' ...' if len(missing) > 8 else ''}")
        if new:
            print(f"    new (not compared): {new[:8]}{' ...' if len(new) > 8 else ''}")
    print(f"{len(runs) - failures}/{len(runs)} examples reproduce their quick-mode reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
