"""Import time of ``ugm_infer`` next to ``import jax``.

Each repeat starts fresh interpreters, one per case, in alternating order, and times the
import statement inside the interpreter (``time.perf_counter`` around it, so the start
of the interpreter itself is excluded).  The figure to quote is the median over repeats
of the paired difference ``import ugm_infer`` minus ``import jax`` (both measured in the
same repeat, so load drift cancels); the target is at most 0.3 s.  The script also
records which heavy optional packages ``import ugm_infer`` loaded (none of numpyro,
matplotlib, arviz should be).

Run::

    python benchmarks/bench_import.py                # 15 repeats, writes benchmarks/results/bench_import.json
    python benchmarks/bench_import.py --quick        # 1 repeat, for CI

The machine may be shared: the JSON records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: name -> the statement timed in a fresh interpreter
CASES = {
    "import jax": "import jax",
    "import jax, blackjax": "import jax, blackjax",
    "import ugm_infer": "import ugm_infer",
}

HEAVY = ("numpyro", "matplotlib", "arviz", "blackjax", "optax", "scipy", "tqdm")

PROBE = """
import json, sys, time
t0 = time.perf_counter()
{stmt}
t = time.perf_counter() - t0
print(json.dumps([t, [m for m in {heavy!r} if m in sys.modules]]))
"""


def time_import(stmt: str) -> tuple[float, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(stmt=stmt, heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    seconds, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    return float(seconds), list(loaded)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--quick", action="store_true", help="1 repeat (smoke test)")
    p.add_argument("--out", default=None, help="JSON output (default: benchmarks/results/, *_quick.json with --quick)")
    args = p.parse_args()
    args.out = args.out or str(ROOT / "benchmarks" / "results" / "bench_import.json")
    if args.quick and args.out == str(ROOT / "benchmarks" / "results" / "bench_import.json"):
        args.out = args.out.replace(".json", "_quick.json")
    repeats = 1 if args.quick else args.repeats
    load_before = os.getloadavg()
    names = list(CASES)
    times: dict[str, list[float]] = {n: [] for n in names}
    loaded: dict[str, list[str]] = {}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t, mods = time_import(CASES[name])
            times[name].append(t)
            loaded[name] = mods
        print(f"repeat {r}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names), flush=True)
    load_after = os.getloadavg()
    t = {n: np.array(v) for n, v in times.items()}
    base = t["import jax"]
    rows = {
        n: {
            "median_s": float(np.median(v)),
            "min_s": float(v.min()),
            "max_s": float(v.max()),
            "median_minus_jax_s": float(np.median(v - base)),
            "heavy_modules_loaded": loaded[n],
        }
        for n, v in t.items()
    }
    print()
    print("| statement | median (s) | min-max (s) | median of (this - import jax) (s) | heavy modules loaded |")
    print("|---|---|---|---|---|")
    for n, row in rows.items():
        print(
            f"| `{n}` | {row['median_s']:.3f} | {row['min_s']:.3f}-{row['max_s']:.3f} | "
            f"{row['median_minus_jax_s']:+.3f} | {', '.join(row['heavy_modules_loaded']) or '-'} |"
        )
    gap = rows["import ugm_infer"]["median_minus_jax_s"]
    print(f"\nimport ugm_infer - import jax: {gap:+.3f} s (target <= 0.3 s: {'met' if gap <= 0.3 else 'not met'})")
    result = {
        "benchmark": "bench_import",
        "repeats": repeats,
        "cases": rows,
        "times_s": times,
        "target_s": 0.3,
        "target_met": bool(gap <= 0.3),
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
