r"""Writing your own kernel: Gibbs-with-gradients, plugged into ``ui.sample``, tempered SMC and SAP.

This file is the worked example of ``docs/extending.md``.  Everything below is *user
code*: it uses only the public API of ``ugm_infer`` and BlackJAX's conventions, and
the same kernel then runs under three drivers of the library.

The kernel is **Gibbs with gradients** (GWG; Grathwohl, Swersky, Hashemi, Duvenaud
and Maddison 2021, *Oops I took a gradient: scalable sampling for discrete
distributions*, ICML, Algorithm 1) for two-valued sites (``ui.Binary`` in {0, 1},
``ui.Spin`` in {-1, +1}).  Flipping site :math:`i` of :math:`x` gives :math:`x^{(i)}`;
the change of log-density is estimated from one gradient of the log-density
:math:`f` taken at a *float copy* of the state (paper, eq. 3 and section 4):

.. math::  \tilde d_i(x) = (x^{(i)}_i - x_i)\, \frac{\partial f}{\partial x_i}(x)
           \;\approx\; f(x^{(i)}) - f(x),

i.e. :math:`(1 - 2x_i)\,\partial_i f` for binary and :math:`-2 x_i\,\partial_i f` for
spins (exact when :math:`f` is affine in each site, as for every pairwise model).  One
proposal draws a site from

.. math::  q(i \mid x) = \operatorname{softmax}\big(\tilde d(x) / 2\big)_i,

flips it, and accepts :math:`x' = x^{(i)}` with the Metropolis-Hastings probability

.. math::  \min\Big\{1,\; \exp\big(f(x') - f(x)\big)\,
           \frac{q(i \mid x')}{q(i \mid x)}\Big\},

where the reverse probability :math:`q(i \mid x')` (flipping the same site back) uses
the gradient at :math:`x'`.  The ratio makes the kernel exact for *any* estimate
:math:`\tilde d`: a poor gradient only costs acceptance, never correctness.

The three uses (``python examples/custom_kernel.py [--quick] [--out DIR]``):

(a) ``ui.sample`` with a ``blackjax.base.SamplingAlgorithm`` built from the kernel,
    on a small Ising model, against the exact marginals of ``ui.exact.marginals``;
(b) the MCMC move of ``ui.smc.tempered_smc``: :math:`\log \hat Z` against
    ``ui.exact.log_partition``;
(c) the kernel of ``ui.learn.sap(model, kernel=(init, kernel_fn))`` fitting a fully
    visible Boltzmann machine with ``ui.fit``: exact log-likelihood before and after.

``--out DIR`` writes ``DIR/custom_kernel.json`` with every number printed.

References
----------
Grathwohl, W., Swersky, K., Hashemi, M., Duvenaud, D. and Maddison, C. J. (2021).
Oops I took a gradient: scalable sampling for discrete distributions. ICML.
Zanella, G. (2020). Informed proposals for local MCMC in discrete spaces. JASA 115
(locally balanced proposals, :math:`g(t) = \sqrt t`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.base import SamplingAlgorithm

import ugm_infer as ui

__all__ = ["GWGState", "GWGInfo", "init", "build_kernel", "as_top_level_api"]


# --------------------------------------------------------------------------------------
# the kernel: state, info, init, build_kernel (BlackJAX conventions)
# --------------------------------------------------------------------------------------
class GWGState(NamedTuple):
    """State of one chain.

    position
        The configuration ``{name: array}`` (domain dtype).
    logdensity
        :math:`f(x)`, cached.
    logdensity_grad
        :math:`\\partial f / \\partial x` at a float32 copy of ``position`` (same
        structure), cached: it gives the flip scores :math:`\\tilde d(x)`.
    """

    position: dict
    logdensity: jax.Array
    logdensity_grad: dict


class GWGInfo(NamedTuple):
    """acceptance_rate: mean Metropolis-Hastings acceptance probability of the step's proposals."""

    acceptance_rate: jax.Array


def _value_and_grad(logdensity_fn: Callable, position: dict) -> tuple[jax.Array, dict]:
    """:math:`f(x)` and :math:`\\nabla f(x)` at a float32 copy of the (binary/spin) state."""
    as_float = {name: jnp.asarray(x, jnp.float32) for name, x in position.items()}
    value, grad = jax.value_and_grad(lambda z: jnp.asarray(logdensity_fn(z), jnp.float32))(as_float)
    return value, grad


def init(position: dict, logdensity_fn: Callable) -> GWGState:
    """Initial state of one chain (BlackJAX ``init(position, logdensity_fn)``)."""
    position = dict(position)
    logdensity, grad = _value_and_grad(logdensity_fn, position)
    return GWGState(position, logdensity, grad)


def build_kernel(model, num_proposals: int | None = None, *, reverse_proposal: bool = True) -> Callable:
    """Build the Gibbs-with-gradients kernel ``kernel(rng_key, state, logdensity_fn) -> (state, info)``.

    Parameters
    ----------
    model
        A :class:`ugm_infer.EnergyModel` whose variables all have two values
        (``ui.Binary``, ``ui.Spin``, or ``ui.Categorical`` with 2 states).  Only its
        structure is used (names, shapes, values); the target arrives through
        ``logdensity_fn`` at call time.
    num_proposals
        Flip proposals per kernel step (a positive int); default ``model.num_sites``,
        so that one step is comparable with one sweep of a single-site sampler.
    reverse_proposal
        Keep the reverse-proposal factor :math:`q(i \\mid x') / q(i \\mid x)` of the
        acceptance ratio.  ``False`` gives a **wrong** sampler (it does not leave
        :math:`e^{f}` invariant); it exists only to show that the exactness test of
        ``tests/test_custom_kernel.py`` can fail.

    Returns
    -------
    ``kernel(rng_key, state, logdensity_fn) -> (GWGState, GWGInfo)`` for ONE chain;
    callers ``vmap`` it over chains or particles.
    """
    if not isinstance(model, ui.EnergyModel):
        raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")
    for name, domain in model.variables.items():
        if domain.num_states != 2:
            raise ValueError(
                f"Gibbs-with-gradients flips two-valued sites, but variable {name!r} is {domain!r} "
                f"with {domain.num_states} states"
            )
    if num_proposals is None:
        num_proposals = model.num_sites
    if isinstance(num_proposals, bool) or not isinstance(num_proposals, (int, np.integer)) or num_proposals < 1:
        raise ValueError(f"`num_proposals` must be a positive int or None, got {num_proposals!r}")
    if not isinstance(reverse_proposal, bool):
        raise TypeError(f"`reverse_proposal` must be True or False, got {reverse_proposal!r}")

    # static structure: per variable, its two values, shape and offset in the flat site vector
    layout = []
    offset = 0
    for name, domain in model.variables.items():
        v0, v1 = (float(v) for v in domain.values)
        layout.append((name, v0 + v1, domain.shape, domain.size, offset))
        offset += domain.size

    def flip_logits(position: dict, grad: dict) -> jax.Array:
        """:math:`\\tilde d(x) / 2` over all sites, flattened in the model's site order."""
        parts = []
        for name, total, _, _, _ in layout:
            x = jnp.asarray(position[name], jnp.float32)
            flipped = total - x  # the other value: 1 - x (binary), -x (spin)
            parts.append(((flipped - x) * grad[name]).reshape(-1))
        return 0.5 * jnp.concatenate(parts)

    def flip(position: dict, site: jax.Array) -> dict:
        """``position`` with global site ``site`` set to its other value (no loop over sites)."""
        out = {}
        for name, total, shape, size, start in layout:
            x = position[name]
            mask = (jnp.arange(size) + start == site).reshape(shape)
            out[name] = jnp.where(mask, jnp.asarray(total, x.dtype) - x, x)
        return out

    def one_proposal(logdensity_fn, carry, rng_key):
        state, acceptance = carry
        key_site, key_accept = jax.random.split(rng_key)
        log_q = jax.nn.log_softmax(flip_logits(state.position, state.logdensity_grad))
        site = jax.random.categorical(key_site, log_q)
        position = flip(state.position, site)
        logdensity, grad = _value_and_grad(logdensity_fn, position)
        log_ratio = logdensity - state.logdensity
        if reverse_proposal:
            log_q_reverse = jax.nn.log_softmax(flip_logits(position, grad))
            log_ratio = log_ratio + log_q_reverse[site] - log_q[site]
        # NaN (e.g. -inf - -inf at a forbidden state) rejects: the comparison is False
        accept = jnp.log(jax.random.uniform(key_accept)) < log_ratio
        proposal = GWGState(position, logdensity, grad)
        new_state = jax.tree.map(lambda new, old: jnp.where(accept, new, old), proposal, state)
        probability = jnp.where(jnp.isnan(log_ratio), 0.0, jnp.exp(jnp.minimum(log_ratio, 0.0)))
        return (new_state, acceptance + probability), None

    def kernel(rng_key: jax.Array, state: GWGState, logdensity_fn: Callable) -> tuple[GWGState, GWGInfo]:
        keys = jax.random.split(rng_key, num_proposals)
        carry = (state, jnp.zeros((), jnp.float32))
        (state, acceptance), _ = jax.lax.scan(lambda c, k: one_proposal(logdensity_fn, c, k), carry, keys)
        return state, GWGInfo(acceptance / num_proposals)

    return kernel


def as_top_level_api(
    model, params: Any = None, *, logdensity_fn: Callable | None = None, num_proposals: int | None = None
) -> SamplingAlgorithm:
    """A single-chain ``SamplingAlgorithm(init, step)`` targeting ``exp(-E(params, x))`` (or ``logdensity_fn``)."""
    if (params is None) == (logdensity_fn is None):
        raise ValueError("pass exactly one of `params` or `logdensity_fn`")
    if logdensity_fn is None:
        model.validate_params(params)
        logdensity_fn = model.logdensity_fn(params)
    kernel = build_kernel(model, num_proposals)

    def init_fn(position, rng_key=None):
        del rng_key
        return init(position, logdensity_fn)

    def step_fn(rng_key, state):
        return kernel(rng_key, state, logdensity_fn)

    return SamplingAlgorithm(init_fn, step_fn)


# --------------------------------------------------------------------------------------
# the three uses
# --------------------------------------------------------------------------------------
def ising_problem(num_spins: int, seed: int):
    """A dense Ising model with random couplings (scale 1) and fields (scale 0.5)."""
    model = ui.models.ising(num_spins)
    params = model.init_params(jax.random.key(seed), scale=1.0, field_scale=0.5)
    return model, params


def use_sample(args) -> dict:
    """(a) ``ui.sample`` with a SamplingAlgorithm built from the kernel vs exact marginals."""
    model, params = ising_problem(args.num_spins, args.seed)
    algorithm = as_top_level_api(model, params)
    start = model.random_state(jax.random.key(args.seed + 1), args.num_chains)
    t = time.perf_counter()
    result = ui.sample(
        jax.random.key(args.seed + 2),
        algorithm,
        start,
        args.num_samples,
        num_warmup=args.num_warmup,
        model=model,
        params=params,
    )
    spins = np.asarray(result.states["s"], np.float64)  # (chain, draw, n)
    seconds = time.perf_counter() - t
    estimate = (spins > 0).mean(axis=(0, 1))  # P(s_i = +1)
    exact_p = np.asarray(ui.exact.marginals(model, params)["s"][..., 1], np.float64)
    # standard error from the spread of the chain means (chains are independent)
    chain_means = (spins > 0).mean(axis=1)
    se = chain_means.std(axis=0, ddof=1) / np.sqrt(args.num_chains)
    z = np.abs(estimate - exact_p) / se
    out = {
        "num_spins": args.num_spins,
        "num_chains": args.num_chains,
        "num_samples": args.num_samples,
        "num_warmup": args.num_warmup,
        "acceptance_rate": float(np.mean(np.asarray(result.infos.acceptance_rate))),
        "max_abs_marginal_error": float(np.max(np.abs(estimate - exact_p))),
        "max_z": float(z.max()),
        "marginals_estimate": estimate.tolist(),
        "marginals_exact": exact_p.tolist(),
        "seconds": seconds,
    }
    print(
        f"(a) ui.sample, {args.num_spins}-spin Ising, {args.num_chains} chains x {args.num_samples} draws: "
        f"max |P(s_i=+1) - exact| = {out['max_abs_marginal_error']:.4f} (max z {out['max_z']:.2f}), "
        f"acceptance {out['acceptance_rate']:.3f}  [{seconds:.1f}s]",
        flush=True,
    )
    return out


def use_smc(args) -> dict:
    """(b) the kernel as the MCMC move of tempered SMC: log Z vs exact enumeration."""
    model, params = ising_problem(args.num_spins, args.seed)
    t = time.perf_counter()
    res = ui.smc.tempered_smc(
        jax.random.key(args.seed + 3),
        model,
        params,
        kernel=build_kernel(model),
        kernel_init=init,
        num_particles=args.num_particles,
        num_replicates=args.num_replicates,
        num_mcmc_steps=2,
    )
    seconds = time.perf_counter() - t
    exact_log_z = float(ui.exact.log_partition(model, params))
    out = {
        "num_particles": args.num_particles,
        "num_replicates": args.num_replicates,
        "log_Z": float(res.log_Z),
        "log_Z_se": float(res.log_Z_se),
        "exact_log_Z": exact_log_z,
        "error_in_se": float((res.log_Z - exact_log_z) / res.log_Z_se),
        "mean_num_steps": float(np.mean(np.asarray(res.num_steps))),
        "seconds": seconds,
    }
    print(
        f"(b) tempered SMC ({args.num_particles} particles x {args.num_replicates} replicates, "
        f"{out['mean_num_steps']:.1f} steps): log Z = {out['log_Z']:.4f} +- {out['log_Z_se']:.4f}, "
        f"exact {exact_log_z:.4f} ({out['error_in_se']:+.2f} se)  [{seconds:.1f}s]",
        flush=True,
    )
    return out


def use_sap(args) -> dict:
    """(c) the kernel inside SAP: fit a fully visible Boltzmann machine, exact LL before/after."""
    model = ui.models.boltzmann_machine(args.num_units)
    key_true, key_data, key_fit = jax.random.split(jax.random.key(args.seed + 4), 3)
    true_params = model.init_params(key_true, scale=1.5, field_scale=1.0)
    data = {"s": np.asarray(ui.exact.sample(key_data, model, true_params, args.num_data)["s"])}
    start = jax.tree.map(jnp.zeros_like, true_params)
    learner = ui.learn.sap(
        model,
        kernel=(init, build_kernel(model)),
        optimizer=optax.adam(args.learning_rate),
        num_particles=args.num_particles_sap,
    )
    t = time.perf_counter()
    res = ui.fit(
        learner,
        key_fit,
        data,
        params=start,
        num_epochs=args.num_epochs,
        batch_size=args.batch_size,
        eval_every=max(args.num_epochs // 5, 1),
        progress=False,
    )
    seconds = time.perf_counter() - t
    ev = res.history["evaluations"]
    before = float(ui.exact.average_log_likelihood(model, start, data))
    after = float(ui.exact.average_log_likelihood(model, res.params, data))
    true_ll = float(ui.exact.average_log_likelihood(model, true_params, data))
    acceptance = np.asarray(res.history["steps"]["kernel_info.acceptance_rate"])
    out = {
        "num_units": args.num_units,
        "num_data": args.num_data,
        "num_epochs": args.num_epochs,
        "num_updates": int(res.history["steps"]["step"][-1]) if "step" in res.history["steps"] else None,
        "train_ll_before": before,
        "train_ll_after": after,
        "train_ll_true_params": true_ll,
        "eval_epochs": np.asarray(ev["epoch"]).tolist(),
        "eval_train_ll": np.asarray(ev["train_log_likelihood"]).tolist(),
        "mean_acceptance_rate": float(acceptance.mean()),
        "seconds": seconds,
    }
    print(
        f"(c) SAP + GWG, {args.num_units}-unit Boltzmann machine, {args.num_data} examples, {args.num_epochs} epochs: "
        f"exact train LL {before:.4f} -> {after:.4f} (true params {true_ll:.4f}), "
        f"acceptance {out['mean_acceptance_rate']:.3f}  [{seconds:.1f}s]",
        flush=True,
    )
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small settings (< 90 s on 2 cores)")
    p.add_argument("--out", default=None, help="directory for custom_kernel.json")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    quick = args.quick
    args.num_spins = 10
    args.num_chains = 32 if quick else 128
    args.num_samples = 200 if quick else 2000
    args.num_warmup = 50 if quick else 200
    args.num_particles = 500 if quick else 2000
    args.num_replicates = 8 if quick else 16
    args.num_units = 8
    args.num_data = 500
    args.num_epochs = 40 if quick else 200
    args.batch_size = 100
    args.num_particles_sap = 100
    args.learning_rate = 0.05 if quick else 0.02
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    t = time.perf_counter()
    cpu = time.process_time()
    results = {
        "config": {"quick": args.quick, "seed": args.seed, "jax": jax.__version__},
        "sample": use_sample(args),
        "smc": use_smc(args),
        "sap": use_sap(args),
    }
    results["total_seconds"] = time.perf_counter() - t
    results["total_cpu_seconds"] = time.process_time() - cpu
    print(f"total {results['total_seconds']:.1f}s wall, {results['total_cpu_seconds']:.1f}s cpu")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "custom_kernel.json")
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
        print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
