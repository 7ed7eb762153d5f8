"""Energies of lattice Ising chains from their packed words, and what they cost an AIS step.

AIS, tempered SMC, parallel tempering and tempered transitions weigh their lattice
chains by energies read from the four-sub-lattice words
(``ugm_infer.kernels.checkerboard.pair_and_total``, reached through
``LatticeIsing.energy_of_words``).  Every bond joins a word of colour 0 to one of
colour 1; the bonds between neighbouring words need shifted reads of the words, which
XLA's CPU compiler writes out as padded copies.  The library reads each bond direction
through one shifted array (a word paired with the previous one, one end of each bond in
each byte of the pair).  This script times it against ``two_reads``, the same sums with
two shifted reads of the colour-1 words per direction (one per end), in two settings,
alternated repeat by repeat in one process (compilation excluded):

``energy``
    the energies of ``(h/2, w/2, chains)`` words in a ``lax.scan`` of 48 evaluations
    (the words change at every evaluation, so nothing is hoisted out of the loop);
``ais``
    ``ui.smc.ais(key, model, params, num_runs=chains, num_betas=49)`` with each form
    of the energy (a model instance per form, each its own compiled run).

Both forms give the same integers (checked before timing).  Reported: microseconds per
evaluation and milliseconds per AIS step (median), and the paired ratio
``library / two_reads`` (median and min-max over the repeats; below 1: the library's
form is faster).

Run::

    python benchmarks/bench_word_energy.py                  # 64 and 128, 32 chains, 11 repeats
    python benchmarks/bench_word_energy.py --sizes 256 --chains 32 256
    python benchmarks/bench_word_energy.py --quick          # one 8x8 case, a few seconds

Prints a markdown table and writes ``benchmarks/results/bench_word_energy.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweeps import machine_info  # noqa: E402

import ugm_infer as ui  # noqa: E402
from ugm_infer import _compile  # noqa: E402
from ugm_infer.kernels import checkerboard  # noqa: E402

STEPS = 48


def two_reads(e, q, rows, cols, periodic):
    """``checkerboard._bonds_between_words`` with two shifted reads per direction (one per end of the bonds)."""
    low, high, shifted = checkerboard._LOW, checkerboard._HIGH, checkerboard._shifted
    low_bit, high_bit = jnp.uint16(1 << low), jnp.uint16(1 << high)
    left, right = shifted(q, -1, cols, periodic), shifted(q, 1, cols, periodic)
    up, down = shifted(q, -1, rows, periodic), shifted(q, 1, rows, periodic)
    return ((e & left & low_bit) | (e & right & high_bit)) + ((e & (up >> high) & low_bit) | (e & (down << high) & high_bit))


FORMS = {"library": checkerboard._bonds_between_words, "two_reads": two_reads}


@contextlib.contextmanager
def bonds_form(name: str):
    """``checkerboard.pair_and_total`` reads the bonds between words with form ``name`` while programs are traced."""
    checkerboard._bonds_between_words = FORMS[name]
    try:
        yield
    finally:
        checkerboard._bonds_between_words = FORMS["library"]


def energy_runs(size: int, chains: int) -> tuple[dict, tuple]:
    layout = checkerboard.LatticeLayout(size, size, True, "spin", "float32")
    x = 2.0 * jax.random.bernoulli(jax.random.key(0), 0.5, (chains, size, size)).astype(jnp.float32) - 1.0
    even, odd = (jnp.moveaxis(w, 0, -1) for w in jax.vmap(layout.pack)(x))

    def run_of():
        @_compile.jit  # the options the drivers compile with
        def run(e, o):
            def body(total, t):
                flip = (t & 1).astype(jnp.uint16)  # new words at every evaluation
                pair, ups = checkerboard.pair_and_total(layout, e ^ flip, o ^ flip, True)
                return total + pair + ups, None

            return jax.lax.scan(body, jnp.zeros(chains, jnp.int32), jnp.arange(STEPS))[0]

        return lambda: run(even, odd)

    runs = {}
    for name in FORMS:
        with bonds_form(name):  # each form its own jitted function, traced by this first call
            runs[name] = run_of()
            jax.block_until_ready(runs[name]())
    return runs


def ais_runs(size: int, chains: int) -> dict:
    runs = {}
    for name in FORMS:
        model = ui.models.lattice_ising(size, size)  # a model instance per form: its own compiled AIS run
        params = model.init_params(J=0.44)

        def run(key, model=model, params=params):
            return ui.smc.ais(key, model, params, num_runs=chains, num_betas=STEPS + 1).log_Z

        with bonds_form(name):
            jax.block_until_ready(run(jax.random.key(0)))
        runs[name] = run
    return runs


def timed(fn, repeats_inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeats_inner):
        jax.block_until_ready(fn())
    return (time.perf_counter() - t0) / repeats_inner


def time_case(size: int, chains: int, repeats: int, inner: int) -> dict:
    energy = energy_runs(size, chains)
    values = {name: np.asarray(run()) for name, run in energy.items()}
    assert np.array_equal(values["library"], values["two_reads"]), "the two forms disagree"
    ais = ais_runs(size, chains)
    log_z = {name: float(run(jax.random.key(5))) for name, run in ais.items()}
    assert log_z["library"] == log_z["two_reads"], "AIS differs between the two forms"
    times = {f"{kind}_{name}": [] for kind in ("energy", "ais") for name in FORMS}
    for r in range(repeats):
        for name in FORMS:
            times[f"energy_{name}"].append(timed(energy[name], inner) / STEPS * 1e6)
            times[f"ais_{name}"].append(timed(lambda: ais[name](jax.random.key(r)), inner) / STEPS * 1e3)
    row = {"size": size, "chains": chains, "times": times}
    for kind in ("energy", "ais"):
        ratio = np.asarray(times[f"{kind}_library"]) / np.asarray(times[f"{kind}_two_reads"])
        row[f"{kind}_ratio"] = [float(np.median(ratio)), float(ratio.min()), float(ratio.max())]
        for name in FORMS:
            row[f"{kind}_{name}_median"] = float(np.median(times[f"{kind}_{name}"]))
    row["load_average"] = os.getloadavg()[0]
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+")
    p.add_argument("--chains", type=int, nargs="+")
    p.add_argument("--repeats", type=int)
    p.add_argument("--quick", action="store_true", help="one 8x8 case with 4 chains, 2 repeats")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "bench_word_energy.json"))
    args = p.parse_args(argv)
    sizes = args.sizes or ([8] if args.quick else [64, 128])
    chains = args.chains or ([4] if args.quick else [32])
    repeats = args.repeats or (2 if args.quick else 11)
    inner = 1 if args.quick else 5
    rows = [time_case(s, c, repeats, inner) for s in sizes for c in chains]
    header = "| L | chains | energy us / eval (library / two reads) | **energy library / two reads** "
    print(header + "| AIS ms / step (library / two reads) | **AIS library / two reads** | load |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        e, a = r["energy_ratio"], r["ais_ratio"]
        print(
            f"| {r['size']} | {r['chains']} | {r['energy_library_median']:.1f} / {r['energy_two_reads_median']:.1f} "
            f"| **{e[0]:.2f}** ({e[1]:.2f}-{e[2]:.2f}) | {r['ais_library_median']:.3f} / {r['ais_two_reads_median']:.3f} "
            f"| **{a[0]:.2f}** ({a[1]:.2f}-{a[2]:.2f}) | {r['load_average']:.1f} |"
        )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": machine_info(), "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
