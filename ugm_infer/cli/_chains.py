"""The persistent chains of a learner, continued at the kept parameters and diagnosed with ArviZ.

A stochastic-approximation learner (PCD/SAP, PT-SAP, Trans-SAP) keeps persistent
chains whose mixing decides how good its gradients are.  After training, every chain
is continued from where the learner left it, with the learner's own transition
operator, at the parameters that were kept: one draw is one update's worth of that
operator (PCD-k: ``k`` Gibbs sweeps; PT-SAP: one parallel-tempering step, i.e. one
Gibbs sweep per replica and a round of swaps), so the diagnosis measures the chains
at the cost the learner paid.  The draws go through
:func:`ugm_infer.diagnostics.to_arviz` and :func:`ugm_infer.diagnostics.diagnose`
(rank-normalised R-hat, bulk and tail ESS, swap rates or acceptance).
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import numpy as np

#: draws kept per chain (after WARMUP draws) in the diagnosis of persistent chains
DRAWS = 500
WARMUP = 10
#: the stored draws (chains x draws x sites x replicas, 4 bytes each) stay under this
MAX_BYTES = 256 * 2**20
#: fewest chains worth diagnosing (R-hat compares chains)
MIN_CHAINS = 4
#: learners whose particles are persistent Markov chains
PERSISTENT = ("pcd", "sap", "pt_sap", "trans_sap")


class ChainRun(NamedTuple):
    """Continued chains and their diagnosis.

    kernel
        What one draw is, in words ("5 Gibbs sweeps", "one parallel-tempering step").
    idata
        :class:`arviz.InferenceData` of :func:`ugm_infer.diagnostics.to_arviz`.
    diagnosis
        :class:`ugm_infer.diagnostics.Diagnosis` of ``idata``.
    last
        The last configuration of every chain (the ``beta = 1`` replica), ``{name: (chains, ...)}``.
    betas
        The inverse temperatures of a tempered kernel (``None`` otherwise).
    seconds
        Sampling time (compilation included).
    """

    kernel: str
    idata: Any
    diagnosis: Any
    last: dict
    betas: np.ndarray | None
    seconds: float


def chain_budget(num_chains: int, num_sites: int, replicas: int, draws: int = DRAWS) -> int:
    """How many of ``num_chains`` chains to continue within :data:`MAX_BYTES` (0: not even :data:`MIN_CHAINS`)."""
    per_chain = 4 * draws * max(num_sites, 1) * max(replicas, 1)
    fits = MAX_BYTES // per_chain
    if fits < MIN_CHAINS:
        return 0
    return int(min(num_chains, fits))


def diagnose_run(run, model, params, betas, kernel: str, seconds: float) -> ChainRun:
    """``to_arviz`` + ``diagnose`` of a ``ui.sample`` run, with the last state of every chain."""
    import ugm_infer as ui

    idata = ui.diagnostics.to_arviz(run, model=model, params=params, betas=betas)
    diagnosis = ui.diagnostics.diagnose(idata)
    last = {k: np.asarray(v[:, -1]) for k, v in run.states.items()}
    if betas is not None and "swap_acceptance" in idata.sample_stats:
        last = {k: v[:, -1] for k, v in last.items()}  # the beta = 1 replica
    return ChainRun(kernel, idata, diagnosis, last, None if betas is None else np.asarray(betas), seconds)


def continue_chains(
    rng_key,
    model,
    params,
    learner: str,
    particles: dict,
    *,
    sweeps: int = 1,
    kernel: str = "gibbs",
    betas: Any = None,
    replicas: dict | None = None,
    draws: int = DRAWS,
) -> ChainRun | None:
    """Continue a learner's persistent chains at ``params``; ``None`` if the learner has none.

    ``particles`` are the chains (``{name: (chains, ...)}``, every model variable);
    ``replicas`` the full parallel-tempering states of PT-SAP (``{name: (chains, R, ...)}``),
    from which its chains continue with every temperature in place.
    """
    import jax

    import ugm_infer as ui

    if learner not in PERSISTENT or not particles or set(particles) < set(model.variables):
        return None
    tempered = learner in ("pt_sap", "trans_sap")
    num_chains = int(next(iter(particles.values())).shape[0])
    num_sites = sum(math.prod(d.shape) for d in model.variables.values())
    keep = chain_budget(num_chains, num_sites, len(betas) if learner == "pt_sap" else 1, draws)
    if keep == 0:
        return None
    thin = 1
    if learner == "pt_sap":
        algorithm = ui.kernels.parallel_tempering(model, params, betas=betas)
        what = f"one parallel-tempering step ({len(betas)} Gibbs sweeps, one per temperature, and a round of swaps)"
    elif learner == "trans_sap":
        algorithm = ui.kernels.tempered_transitions(model, params, betas=betas)
        what = f"one tempered-transitions run over {len(betas)} temperatures (Trans-SAP's tempered kernel)"
    elif learner == "sap" and kernel == "metropolis":
        algorithm, thin = ui.kernels.metropolis(model, params), sweeps
        what = f"{sweeps} Metropolis step{'s' if sweeps > 1 else ''}"
    else:
        algorithm = ui.kernels.gibbs(model, params, num_sweeps=sweeps)
        what = f"{sweeps} Gibbs sweep{'s' if sweeps > 1 else ''}"
    start = {k: np.asarray(v)[:keep] for k, v in (replicas if replicas else particles).items()}
    t0 = time.perf_counter()
    # stacked replicas carry an axis that `ui.sample`'s state check does not expect: energies come from to_arviz
    run = ui.sample(
        rng_key, algorithm, start, draws, num_warmup=WARMUP, thin=thin,
        model=None if replicas else model, params=None if replicas else params,
    )  # fmt: skip
    jax.block_until_ready(run.states)
    return diagnose_run(run, model, params, np.asarray(betas) if tempered else None, what, time.perf_counter() - t0)
