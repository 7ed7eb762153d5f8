"""ERGMs of the Florentine marriage network: MPLE and MCMC-MLE with standard errors.

Data: Padgett's Florentine families (Padgett & Ansell 1993; Breiger & Pattison 1986),
the marriage ties among 16 families: 20 edges; the Pucci family has no marriage tie
(networkx's ``florentine_families_graph`` drops it and has 15 nodes; statnet's
``data(florentine); flomarriage`` keeps all 16, in the alphabetical order used
below).  The edge list is written out here so that the script needs no network
package.

Models (statnet notation) and fits:

* ``flomarriage ~ edges``: the MLE has the closed form ``logit(20 / 120)``, a check;
* ``flomarriage ~ edges + triangle``;
* ``flomarriage ~ edges + gwesp(0.5, fixed = TRUE)``;

each by MPLE (:func:`ugm_infer.applications.ergm.ergm_mple`) and by statnet-style MCMC-MLE
(:func:`ugm_infer.applications.ergm.ergm_mcmc_mle`: Geyer-Thompson iterations from the
MPLE, standard errors from the inverse Fisher information estimated by the
covariance of the statistics of MCMC draws at the estimate).

The estimates are printed next to statnet's (R 4.6.1, ``ergm`` 4.12.0), as recorded
in the golden test fixtures of the ERGM.jl repository (generated there by R scripts
that call statnet; addresses in ``STATNET_SOURCES`` and ``docs/ergm.md``):
``edges + triangle`` at high MCMC precision (``MCMC.samplesize=50000``) and its MPLE,
``edges + gwesp(0.5, fixed=TRUE)`` by MCMLE with the spread over five further seeds.
The observed statistics, including ``gwesp(0, fixed)``, ``gwdegree(0, fixed)`` and
``gwdegree(1, fixed)``, are checked against statnet's ``summary()`` values from the
same fixtures, and the ``edges + triangle`` MPLE against statnet's MPLE.

Run ``python examples/ergm_florentine.py`` (20,000 draws per iteration) or
``--quick`` (4,000 draws; the two-term models only).  Writes ``ergm_florentine.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import numpy as np

from ugm_infer.applications.ergm import ergm, ergm_mcmc_mle, ergm_mple

FAMILIES = (
    "Acciaiuoli",
    "Albizzi",
    "Barbadori",
    "Bischeri",
    "Castellani",
    "Ginori",
    "Guadagni",
    "Lamberteschi",
    "Medici",
    "Pazzi",
    "Peruzzi",
    "Pucci",
    "Ridolfi",
    "Salviati",
    "Strozzi",
    "Tornabuoni",
)

# the 20 marriage ties (Padgett & Ansell 1993; the same list as networkx's florentine_families_graph)
MARRIAGES = (
    ("Acciaiuoli", "Medici"),
    ("Castellani", "Peruzzi"),
    ("Castellani", "Strozzi"),
    ("Castellani", "Barbadori"),
    ("Medici", "Barbadori"),
    ("Medici", "Ridolfi"),
    ("Medici", "Tornabuoni"),
    ("Medici", "Albizzi"),
    ("Medici", "Salviati"),
    ("Salviati", "Pazzi"),
    ("Peruzzi", "Strozzi"),
    ("Peruzzi", "Bischeri"),
    ("Strozzi", "Ridolfi"),
    ("Strozzi", "Bischeri"),
    ("Ridolfi", "Tornabuoni"),
    ("Tornabuoni", "Guadagni"),
    ("Albizzi", "Ginori"),
    ("Albizzi", "Guadagni"),
    ("Bischeri", "Guadagni"),
    ("Guadagni", "Lamberteschi"),
)

_ERGM_JL = "https://github.com/statistical-network-analysis-with-Julia/ERGM.jl/blob"
#: where the statnet numbers below were read (statnet ergm 4.12.0, R 4.6.1, via ERGM.jl's golden fixtures)
STATNET_SOURCES = {
    "edges + triangle": f"{_ERGM_JL}/55fb888132142d78763540bfd537cfc2cad2a9c1/test/fixtures/mcmle_ergm.toml",
    "edges + gwesp(0.5, fixed)": f"{_ERGM_JL}/3d7fc1dfe0b007a63607f60a65611b812ec4dc13/test/fixtures/flomarriage_ergm.toml",
    "summary statistics": f"{_ERGM_JL}/55fb888132142d78763540bfd537cfc2cad2a9c1/test/fixtures/ergm_terms.toml",
}
#: flomarriage ~ edges + triangle, statnet MCMLE at high precision (tri_mle_precise, tri_mle_precise_se)
STATNET_EDGES_TRIANGLE = {
    "edges": (-1.6726817422948972, 0.35147170499807928),
    "triangles": (0.1563106458253323, 0.59377230881566079),
}
#: ... and its MPLE (tri_mple): the same logistic regression, so it must agree to optimizer precision
STATNET_EDGES_TRIANGLE_MPLE = (-1.7009354945816306, 0.22084884956677767)
#: flomarriage ~ edges + gwesp(0.5, fixed=TRUE), statnet MCMLE at seed 20260713 (dd_coefficients, dd_std_errors)
STATNET_EDGES_GWESP05 = {
    "edges": (-1.7213977237745193, 0.36646598434780725),
    "gwesp.fixed.0.5": (0.10480453255429474, 0.26293248950816361),
}
#: ... mean and sd of five further statnet fits (mcmle_seed_mean, mcmle_seed_sd)
STATNET_EDGES_GWESP05_SEEDS = {
    "mean": (-1.7116734309284136, 0.0981854608767532),
    "sd": (0.0056728247741288972, 0.0059057237789553376),
}
#: statnet summary() of flomarriage (ergm_terms.toml, flomarriage_ergm.toml; triangle from triadcensus.3)
STATNET_SUMMARY = {
    "edges": 20.0,
    "triangles": 3.0,
    "gwesp.fixed.0.5": 8.3934693402873677,
    "gwesp.fixed.0": 8.0,
    "gwdeg.fixed.0": 15.0,
    "gwdeg.fixed.1": 26.567841619066677,
}
#: flomarriage ~ edges: the closed form logit(20/120) = -1.609, se 1/sqrt(120 p (1-p)) = 0.245
EDGES_ONLY_EXACT = (float(np.log(20 / 100)), float(1 / np.sqrt(120 * (1 / 6) * (5 / 6))))


def adjacency() -> np.ndarray:
    index = {f: k for k, f in enumerate(FAMILIES)}
    A = np.zeros((16, 16), np.int8)
    for a, b in MARRIAGES:
        A[index[a], index[b]] = A[index[b], index[a]] = 1
    return A


def fit(terms, A, key, args):
    model = ergm(16, terms)
    t0 = time.perf_counter()
    mple = ergm_mple(model, A)
    t_mple = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = ergm_mcmc_mle(
        model,
        A,
        key,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        burn_in=args.burn_in,
        thin=args.thin,
        max_iterations=args.max_iterations,
    )
    t_mle = time.perf_counter() - t0
    observed = np.asarray(model.statistics(model_y(model, A)), np.float64)
    return {
        "terms": list(model.term_names),
        "observed_statistics": observed.tolist(),
        "mple": mple.theta.tolist(),
        "mple_stderr_logistic": mple.stderr.tolist(),
        "mcmc_mle": res.theta.tolist(),
        "mcmc_mle_stderr": res.stderr.tolist(),
        "converged": bool(res.converged),
        "iterations": int(res.num_iterations),
        "t_ratio_history": res.history["t_ratio"].tolist(),
        "simulated_mean_statistics": res.sample_stats.mean(0).tolist(),
        "seconds_mple": t_mple,
        "seconds_mcmc_mle": t_mle,
    }


def check_statistics(A) -> dict:
    """Our observed statistics against statnet's summary() (deterministic: float32 precision)."""
    model = ergm(16, ("edges", "triangles", ("gwesp", 0.5), ("gwesp", 0.0), ("gwd", 0.0), ("gwd", 1.0)))
    ours = np.asarray(model.statistics(model_y(model, A)), np.float64)
    rows = {name: {"ours": float(v), "statnet": STATNET_SUMMARY[name]} for name, v in zip(model.term_names, ours)}
    for r in rows.values():
        r["rel_error"] = abs(r["ours"] - r["statnet"]) / abs(r["statnet"])
    assert max(r["rel_error"] for r in rows.values()) < 1e-6, rows
    return rows


def model_y(model, A):
    iu, ju = np.triu_indices(model.num_nodes, 1)
    return A[iu, ju]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="4,000 draws per iteration")
    p.add_argument("--out", default="out/ergm_florentine")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-samples", type=int, default=None, help="MCMC draws per iteration (20000; quick 4000)")
    p.add_argument("--num-chains", type=int, default=8)
    p.add_argument("--burn-in", type=int, default=None, help="sweeps (of 120 toggles) before recording (100; quick 50)")
    p.add_argument("--thin", type=int, default=2, help="sweeps between recorded draws")
    p.add_argument("--max-iterations", type=int, default=20)
    args = p.parse_args(argv)
    args.num_samples = args.num_samples or (4000 if args.quick else 20000)
    args.burn_in = args.burn_in or (50 if args.quick else 100)
    os.makedirs(args.out, exist_ok=True)
    A = adjacency()
    assert A.sum() // 2 == 20 and A[FAMILIES.index("Pucci")].sum() == 0
    t0 = time.perf_counter()
    keys = jax.random.split(jax.random.key(args.seed), 3)
    fits = {}
    if not args.quick:  # the closed-form check (skipped by --quick to save a compilation)
        fits["edges"] = fit(("edges",), A, keys[0], args)
    fits["edges + triangle"] = fit(("edges", "triangles"), A, keys[1], args)
    fits["edges + gwesp(0.5, fixed)"] = fit(("edges", ("gwesp", 0.5)), A, keys[2], args)
    stats_check = check_statistics(A)
    mple_gap = float(np.max(np.abs(np.asarray(fits["edges + triangle"]["mple"]) - STATNET_EDGES_TRIANGLE_MPLE)))
    result = {
        "data": {"families": list(FAMILIES), "marriages": [list(e) for e in MARRIAGES], "nodes": 16, "edges": 20},
        "args": vars(args),
        "fits": fits,
        "reference": {
            "edges (closed form)": {"edges": EDGES_ONLY_EXACT},
            "edges + triangle (statnet 4.12.0, high-precision MCMLE)": STATNET_EDGES_TRIANGLE,
            "edges + triangle (statnet 4.12.0, MPLE)": STATNET_EDGES_TRIANGLE_MPLE,
            "edges + gwesp(0.5, fixed) (statnet 4.12.0, MCMLE seed 20260713)": STATNET_EDGES_GWESP05,
            "edges + gwesp(0.5, fixed) (statnet 4.12.0, five further seeds)": STATNET_EDGES_GWESP05_SEEDS,
            "sources": STATNET_SOURCES,
        },
        "statistics_check": stats_check,
        "mple_edges_triangle_max_abs_diff_to_statnet": mple_gap,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "load_average": list(os.getloadavg())},
        "total_seconds": time.perf_counter() - t0,
    }
    print("| model | term | observed | MPLE | MCMC-MLE (se) | statnet (se) | difference / statnet se |")
    print("|---|---|---|---|---|---|---|")
    refs = {
        "edges": {"edges": EDGES_ONLY_EXACT},
        "edges + triangle": STATNET_EDGES_TRIANGLE,
        "edges + gwesp(0.5, fixed)": STATNET_EDGES_GWESP05,
    }
    for name, f in fits.items():
        for k, term in enumerate(f["terms"]):
            ref = refs.get(name, {}).get(term)
            ref_s = f"{ref[0]:.3f} ({ref[1]:.3f})" if ref else "-"
            z_s = f"{(f['mcmc_mle'][k] - ref[0]) / ref[1]:+.3f}" if ref else "-"
            print(
                f"| {name} | {term} | {f['observed_statistics'][k]:.3f} | {f['mple'][k]:.3f} | "
                f"{f['mcmc_mle'][k]:.3f} ({f['mcmc_mle_stderr'][k]:.3f}) | {ref_s} | {z_s} |"
            )
    print(f"edges + triangle MPLE vs statnet's MPLE: max |difference| {mple_gap:.2e}")
    print("observed statistics vs statnet summary():")
    for name, r in stats_check.items():
        print(f"  {name}: ours {r['ours']:.6f}, statnet {r['statnet']:.6f} (relative error {r['rel_error']:.1e})")
    for name, f in fits.items():
        print(f"{name}: converged {f['converged']} after {f['iterations']} iterations, {f['seconds_mcmc_mle']:.1f} s")
    with open(os.path.join(args.out, "ergm_florentine.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"total {result['total_seconds']:.1f} s; wrote {args.out}/ergm_florentine.json")


if __name__ == "__main__":
    main()
