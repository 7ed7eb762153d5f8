"""Parallel tempering of a mixed discrete-continuous NumPyro model (power posteriors, replica exchange).

Replica :math:`h` targets the power posterior

.. math::  p_h(x, z) \\propto p(x, z)\\, p(y \\mid x, z)^{\\beta_h},
           \\qquad 0 \\le \\beta_0 < \\dots < \\beta_{R-1} = 1,

(prior untempered, likelihood and ``numpyro.factor`` terms raised to
:math:`\\beta_h`) and carries its own discrete values :math:`x` *and* continuous values
:math:`z`, moved by a :class:`~ugm_infer.numpyro.UGMGibbs` step at its temperature
(NUTS adapts separately at every temperature during warm-up).  Adjacent replicas then
swap their values, the even pairs on even steps and the odd pairs on odd steps, with
probability

.. math::  \\min\\{1, \\exp((\\beta_{h+1} - \\beta_h)(\\ell_h - \\ell_{h+1}))\\},
           \\qquad \\ell = \\log p(y \\mid x, z),

and the replica at :math:`\\beta = 1` is the sample.

Tempering the discrete conditional alone (replicas of :math:`x` at a shared :math:`z`)
would not be valid here: the hot replicas' targets :math:`p(x \\mid z)^{\\beta}` change
with every HMC move of :math:`z`, so their states are stale and the swaps no longer
leave the posterior invariant.  With a full copy of the model per temperature the
extended target :math:`\\prod_h p_h(x_h, z_h)` is fixed and every move leaves it
invariant.

References
----------
Geyer, C. J. (1991). Markov chain Monte Carlo maximum likelihood. Computing Science
and Statistics: Proc. 23rd Symposium on the Interface, 156-163.
Friel, N. and Pettitt, A. N. (2008). Marginal likelihood estimation via power
posteriors. JRSS B 70, 589-607.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpyro
from numpyro.infer.gibbs import Gibbs, with_conditioning
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import compute_log_probs
from numpyro.util import is_prng_key

from ugm_infer.kernels.parallel_tempering import ParallelTemperingInfo
from ugm_infer.kernels.tempered_transitions import check_ladder
from ugm_infer.numpyro._gibbs import UGMGibbs, UGMGibbsState

__all__ = ["ParallelTempering", "ParallelTemperingState", "tempered"]

#: reserved model keyword through which a replica's inverse temperature travels
BETA_KWARG = "_ugm_beta"


class _temper_likelihood(numpyro.primitives.Messenger):
    """Scale the log density of the sites observed *in the model* (``obs=``, factors) by ``beta``.

    Must run before any ``condition`` handler marks latent sites observed, i.e. be the
    innermost handler: :func:`tempered` wraps the user's model directly.
    """

    def __init__(self, fn=None, beta=1.0):
        self.beta = beta
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["scale"] = self.beta if msg["scale"] is None else self.beta * msg["scale"]


def _tempered_model(model, *args, **kwargs):
    beta = kwargs.pop(BETA_KWARG, 1.0)
    with _temper_likelihood(beta=beta):
        return model(*args, **kwargs)


def tempered(model):
    """The model with its likelihood raised to the power of the model keyword ``_ugm_beta`` (default 1)."""
    return functools.partial(_tempered_model, model)


def _log_likelihood(model, model_args, model_kwargs, values) -> jax.Array:
    """:math:`\\log p(y \\mid x, z)`: observed sites and factors of ``model`` at the latent ``values``."""
    log_probs, trace = compute_log_probs(numpyro.handlers.seed(model, 0), model_args, model_kwargs, values)
    return sum((lp for n, lp in log_probs.items() if trace[n]["is_observed"]), start=jnp.zeros(()))


class ParallelTemperingState(NamedTuple):
    """State of one chain of :class:`ParallelTempering`.

    z
        The sample field: ``z`` of the replica at ``beta = 1`` (NUTS sites unconstrained).
    replicas
        The :class:`~ugm_infer.numpyro.UGMGibbsState` of every replica, stacked on a
        leading axis ordered like ``betas``.
    info
        :class:`~ugm_infer.kernels.parallel_tempering.ParallelTemperingInfo` of the last
        swap step (``extra_fields=("info.swap_acceptance",)``).
    walker, direction, step
        Walker id per temperature slot, direction of each walker (``+1`` after visiting
        the hottest slot, ``-1`` after the coldest) and the step counter (its parity
        selects the swap pairs), as in :mod:`ugm_infer.kernels.parallel_tempering`.
    rng_key
        PRNG key for the next step.
    """

    z: dict
    replicas: UGMGibbsState
    info: ParallelTemperingInfo
    walker: jax.Array
    direction: jax.Array
    step: jax.Array
    rng_key: jax.Array

    @property
    def diverging(self):
        """Divergence of the NUTS move of the ``beta = 1`` replica."""
        return self.replicas.block_states[-1].diverging[..., -1]  # [..., -1]: also with a chain axis


class ParallelTempering(MCMCKernel):
    """Replica exchange over power posteriors of a :class:`~ugm_infer.numpyro.UGMGibbs` sampler.

    Parameters
    ----------
    sampler
        ``UGMGibbs(NUTS(model), kernel=...)``: every replica runs a copy of it (its own
        NUTS adaptation) on the model with the likelihood raised to its ``beta``.
    betas
        Ascending inverse temperatures ending at 1, e.g. ``[0.1, 0.3, 0.6, 1.0]``.
        Each costs one full ``UGMGibbs`` step per iteration.  ``beta = 0`` samples the
        prior, which must then be proper.

    Notes
    -----
    ``extra_fields=("info.swap_acceptance", "info.swap_attempted", "info.round_trips")``
    collects the swap diagnostics; :func:`ugm_infer.numpyro.to_arviz` and
    ``ui.diagnostics.diagnose`` read them (per-pair swap rates, round trips).
    """

    sample_field = "z"

    def __init__(self, sampler: UGMGibbs, betas: Any):
        if not isinstance(sampler, UGMGibbs):
            raise TypeError(
                f"`sampler` must be a ui.numpyro.UGMGibbs (e.g. UGMGibbs(NUTS(model))), got {type(sampler).__name__}"
            )
        self.betas = jnp.asarray(check_ladder(betas))
        self._model = sampler.model
        inner = sampler.inner_kernel.wrap_model(lambda _: tempered(self._model))
        self.sampler = UGMGibbs(inner, **sampler.options)
        self._sample_fn = None

    @property
    def model(self):
        return self._model

    @property
    def default_fields(self):
        return ("z", "diverging")

    def postprocess_fn(self, model_args, model_kwargs):
        return self.sampler.postprocess_fn(model_args, model_kwargs)

    def get_diagnostics_str(self, state):
        return self.sampler.get_diagnostics_str(jax.tree.map(lambda x: x[-1], state.replicas))

    def _replica_kwargs(self, model_kwargs, beta):
        return {**model_kwargs, BETA_KWARG: beta}

    def _init_one(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        num = self.betas.shape[0]
        key_next, *keys = jax.random.split(rng_key, num + 1)

        def init_replica(key, beta):
            kwargs = self._replica_kwargs(model_kwargs, beta)
            return Gibbs.init(self.sampler, key, num_warmup, init_params, model_args, kwargs)

        replicas = jax.vmap(init_replica)(jnp.stack(keys), self.betas)
        zeros = jnp.zeros(num - 1)
        info = ParallelTemperingInfo(zeros, zeros.astype(bool), zeros.astype(bool), jnp.zeros((), jnp.int32))
        walker = jnp.arange(num, dtype=jnp.int32)
        direction = jnp.zeros(num, jnp.int32).at[0].set(1)
        z = jax.tree.map(lambda x: x[-1], replicas.z)
        return ParallelTemperingState(z, replicas, info, walker, direction, jnp.zeros((), jnp.int32), key_next)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
        self.sampler.setup(model_args, model_kwargs)
        init_one = functools.partial(self._init_one, num_warmup=num_warmup, model_args=model_args, model_kwargs=model_kwargs)
        if is_prng_key(rng_key):
            self._sample_fn = self._sample_one
            return jax.jit(init_one)(rng_key, init_params=init_params)
        self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
        return jax.jit(jax.vmap(lambda key, params: init_one(key, init_params=params)))(rng_key, init_params)

    def _log_likelihoods(self, replicas, model_args, model_kwargs):
        sampler = self.sampler

        def one(state):
            hmc_values = sampler.inner_kernel.get_constrain_fn(model_args, model_kwargs)(state.hmc_state.z)
            return _log_likelihood(self._model, model_args, model_kwargs, {**hmc_values, **state.discrete_state.z})

        return jax.vmap(one)(replicas)

    def _with_positions(self, replicas, source, model_args, model_kwargs):
        """Replicas whose discrete and continuous values are taken from slots ``source``, refreshed."""
        sampler = self.sampler
        discrete = jax.tree.map(lambda x: x[source], replicas.discrete_state.z)
        hmc_z = jax.tree.map(lambda x: x[source], replicas.hmc_state.z)

        def refresh(state, x, u, beta):
            kwargs = self._replica_kwargs(model_kwargs, beta)
            constrained = sampler.inner_kernel.get_constrain_fn(model_args, kwargs)(u)
            block = sampler.discrete_kernel.refresh(
                state.discrete_state._replace(z=x), model_args, with_conditioning(kwargs, constrained)
            )
            hmc = sampler.inner_kernel.refresh(state.hmc_state._replace(z=u), model_args, with_conditioning(kwargs, x))
            return state._replace(z={**x, **u}, block_states=(block, hmc))

        return jax.vmap(refresh)(replicas, discrete, hmc_z, self.betas)

    def _sample_one(self, state, model_args, model_kwargs):
        num = self.betas.shape[0]
        key_next, key_swap = jax.random.split(state.rng_key)
        sampler = self.sampler
        replicas = jax.vmap(lambda s, b: sampler._sample_one(s, model_args, self._replica_kwargs(model_kwargs, b)))(
            state.replicas, self.betas
        )
        loglik = self._log_likelihoods(replicas, model_args, model_kwargs)
        pairs = jnp.arange(num - 1)
        attempted = (pairs % 2) == (state.step % 2)
        log_ratio = (self.betas[1:] - self.betas[:-1]) * (loglik[:-1] - loglik[1:])
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        accepted = attempted & (jnp.log(jax.random.uniform(key_swap, (num - 1,))) < log_ratio)
        swap_up = jnp.concatenate([accepted, jnp.zeros(1, bool)])  # slot h takes h+1
        swap_down = jnp.concatenate([jnp.zeros(1, bool), accepted])  # slot h takes h-1
        slots = jnp.arange(num)
        source = jnp.where(swap_up, slots + 1, jnp.where(swap_down, slots - 1, slots))
        replicas = self._with_positions(replicas, source, model_args, model_kwargs)
        walker = state.walker[source]
        hot, cold = walker[0], walker[num - 1]
        completed = state.direction[hot] == -1
        direction = state.direction.at[hot].set(1)
        direction = direction.at[cold].set(jnp.where(direction[cold] == 1, -1, direction[cold]))
        round_trips = state.info.round_trips + completed.astype(jnp.int32)
        info = ParallelTemperingInfo(
            jnp.where(attempted, jnp.exp(jnp.minimum(log_ratio, 0.0)), 0.0), attempted, accepted, round_trips
        )
        z = jax.tree.map(lambda x: x[-1], replicas.z)
        return ParallelTemperingState(z, replicas, info, walker, direction, state.step + 1, key_next)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, model_args, model_kwargs or {})

    def __repr__(self) -> str:
        return f"ParallelTempering({self.sampler!r}, betas={self.betas.tolist()})"
