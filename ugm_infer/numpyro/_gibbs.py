"""HMC-within-Gibbs for mixed discrete-continuous NumPyro models with ugm_infer kernels.

One MCMC step of :class:`UGMGibbs` is two Gibbs moves (NumPyro's
:class:`numpyro.infer.Gibbs` composite):

1. the discrete latent sites :math:`x` move with a ugm_infer kernel that leaves the
   conditional :math:`p(x \\mid z, y) \\propto \\exp(\\log p(x, z, y))` invariant, at the
   current values of the continuous sites :math:`z`;
2. the continuous sites move with NumPyro's HMC or NUTS on :math:`p(z \\mid x, y)`,
   which adapts its step size and mass matrix during warm-up as usual.

Each move leaves the joint posterior invariant, so their composition does (Gibbs
sampling; Geman and Geman 1984).  The discrete kernel (:class:`UGMBlock`) reads the
conditional through the ``logdensity_fn`` it is handed at every step, which closes over
the current continuous values; only the block structure (which discrete sites are
mutually conditionally independent) is fixed, detected once (see :class:`UGMBlock`).

References
----------
Geman, S. and Geman, D. (1984). Stochastic relaxation, Gibbs distributions, and the
Bayesian restoration of images. IEEE TPAMI 6, 721-741.
Neal, R. M. (1996). Sampling from multimodal distributions using tempered transitions.
Statistics and Computing 6, 353-366.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm
from numpyro.distributions.transforms import biject_to
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, Gibbs, GibbsState, conditioned, prototype_trace, with_conditioning
from numpyro.infer.hmc import HMC
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from ugm_infer.model import EnergyModel
from ugm_infer.numpyro._energy import latent_sites, log_joint, site_domain, trace_model
from ugm_infer.numpyro._kernel import KERNELS, _builtin_kernel, _kernel_name

__all__ = ["UGMBlock", "UGMBlockState", "UGMGibbs", "UGMGibbsState", "discrete_sites"]

#: kernels that can move the discrete block: their state is a function of the position
#: (or is re-created from it by ``init`` when the continuous values change)
BLOCK_KERNELS = tuple(k for k in KERNELS if k != "parallel_tempering")

_PT_REFUSED = (
    "parallel tempering cannot be the discrete move of HMC-within-Gibbs: its hot replicas target tempered "
    "conditionals p(x | z)^beta that depend on the continuous values z, so after every HMC move they are stale "
    "and the swaps no longer leave the posterior invariant. Use ui.numpyro.ParallelTempering(UGMGibbs(...), betas) "
    "(every temperature carries its own continuous values) or kernel='tempered_transitions' (no persistent replicas)"
)


def discrete_sites(model_trace: Mapping[str, dict]) -> tuple[str, ...]:
    """Names of the discrete latent sample sites of a trace, checked for ugm_infer kernels.

    A site selector for :class:`numpyro.infer.Gibbs`.  Raises ``ValueError`` naming the
    site for unbounded supports (``Poisson``), event dimensions (``.to_event``),
    supports not starting at 0 and sites marked ``infer={"enumerate": "parallel"}``.
    """
    discrete, _ = latent_sites(model_trace)
    for name, site in discrete.items():
        if site["infer"].get("enumerate", "") == "parallel":
            raise ValueError(
                f"discrete site '{name}' is marked infer={{'enumerate': 'parallel'}}; ugm_infer kernels sample "
                "discrete sites instead of summing them out: remove the mark, or use NUTS with enumeration"
            )
        site_domain(name, site["fn"], site["value"])
    return tuple(discrete)


def _check_same_sites(old: dict, new: dict) -> None:
    """The discrete sites of this run are those the kernel was set up for, with the same shapes."""
    for n in sorted(set(old) | set(new)):
        if n not in old or n not in new or old[n].shape != new[n].shape:
            then = old[n].shape if n in old else "was absent"
            now = new[n].shape if n in new else "is absent"
            raise ValueError(
                f"discrete site '{n}' has shape {now} in this run but {then} when the kernel was set up; "
                "sites cannot change shape between runs: build a new kernel"
            )


class UGMBlockState(NamedTuple):
    """State of the discrete block.

    z
        ``{site: array}``: the discrete values (the sample field), in the dtype NumPyro
        samples them in.
    potential_energy
        :math:`-\\log p(x, z, y)` at ``z`` under the current conditioning.
    kernel_state
        The ugm_infer kernel's state.
    info
        The kernel's info of the last step (zeros before the first); collect a field of
        :class:`UGMGibbs` with ``extra_fields=("info.num_changed",)``.
    rng_key
        PRNG key for the next step.
    """

    z: dict
    potential_energy: jax.Array
    kernel_state: Any
    info: Any
    rng_key: jax.Array


class _Setup(NamedTuple):
    """What :class:`UGMBlock` resolves once per model: sites, domains, structure and the kernel."""

    sites: tuple
    energy_model: EnergyModel
    probe_params: dict
    step: Callable
    init: Callable
    position_fn: Callable


class UGMBlock(MCMCKernel):
    """A ugm_infer kernel on the discrete latent sites of a NumPyro model, given the other sites.

    A block kernel for :class:`numpyro.infer.Gibbs` (``refresh`` and ``wrap_model`` are
    implemented), used by :class:`UGMGibbs`; alone, it samples a model whose latent
    sites are all discrete.

    Parameters
    ----------
    model
        The NumPyro model.
    kernel
        ``"gibbs"`` (block Gibbs, the default), ``"metropolis"`` or
        ``"tempered_transitions"``, the object ``ui.kernels.<name>``, or a user-written
        BlackJAX-style inner kernel ``kernel(rng_key, state, logdensity_fn) -> (state,
        info)`` together with ``init_fn``.  The kernel acts on ``{site: array}``
        positions and receives the current conditional
        ``logdensity_fn(x) = log p(x, z, y)`` at every call.
    blocks, multilinear
        Passed to the conditional :class:`~ugm_infer.EnergyModel` (``blocks=[{site:
        mask}, ...]``); ``None`` detects them.
    init_fn
        ``init(position, logdensity_fn) -> state`` of a user-written kernel.  It is
        called again whenever the other sites change, so the state must hold nothing
        that ``init`` cannot re-create from the position (as in BlackJAX's SMC).
    position_fn
        ``position_fn(kernel_state) -> {site: array}`` (default ``state.position``).
    **kernel_kwargs
        Passed to ``ui.kernels.<name>.build_kernel`` (``scan="systematic"``,
        ``num_sweeps=3``, ``betas=...``).

    Notes
    -----
    **Block structure.**  The conditional energy is probed once, at the first ``init``:
    its parameters are the *unconstrained* values of the other latent sites, at a draw
    from the prior and at a random perturbation of it (:mod:`ugm_infer.structure`).
    Two discrete sites are put in one block only if their interaction vanishes at both,
    i.e. (for interactions that are analytic functions of the continuous values)
    identically.  The blocks are then reused for every value of the continuous sites:
    the assumption is that conditional independence between discrete sites is a
    property of the model's structure (plates, which sites enter which likelihood
    term), not of particular continuous values.  Pass ``blocks=`` when it is not, or
    when the probe is too expensive (it costs ``n^2`` model evaluations for ``n``
    discrete sites).  Sites that change shape between runs raise a ``ValueError``.
    """

    sample_field = "z"

    def __init__(
        self,
        model: Callable,
        kernel: Any = "gibbs",
        *,
        blocks: Any = None,
        multilinear: bool | None = None,
        init_fn: Callable | None = None,
        position_fn: Callable | None = None,
        **kernel_kwargs: Any,
    ):
        if not callable(model):
            raise TypeError(f"`model` must be a NumPyro model (a callable), got {type(model).__name__}")
        if isinstance(kernel, SamplingAlgorithm):
            raise TypeError(
                "a SamplingAlgorithm has its target bound in; the discrete block's target changes with the continuous "
                "values, so pass an inner kernel `kernel(rng_key, state, logdensity_fn)` with its `init_fn`, or a name"
            )
        name = _kernel_name(kernel)
        if name == "parallel_tempering":
            raise ValueError(_PT_REFUSED)
        if name is None:
            if not callable(kernel):
                raise TypeError(
                    f"`kernel` must be a name in {BLOCK_KERNELS} or an inner kernel, got {type(kernel).__name__}"
                )
            if init_fn is None or not callable(init_fn):
                raise ValueError(
                    "an inner kernel `kernel(rng_key, state, logdensity_fn)` needs its `init_fn(position, logdensity_fn)`"
                )
            if kernel_kwargs:
                raise ValueError(f"kernel keyword arguments {sorted(kernel_kwargs)} are only for named kernels")
        elif init_fn is not None:
            raise ValueError(f"`init_fn` is only for a custom inner kernel; kernel {name!r} has its own init")
        if position_fn is not None and not callable(position_fn):
            raise TypeError(f"`position_fn` must be callable, got {type(position_fn).__name__}")
        self._model = model
        self._kernel, self._name = kernel, name
        self.kernel_name = name or getattr(kernel, "__name__", type(kernel).__name__)
        self._blocks, self._multilinear = blocks, multilinear
        self._init_fn, self._position_fn = init_fn, position_fn
        self._kernel_kwargs = kernel_kwargs
        self._setup: _Setup | None = None
        self._sample_fn = self._sample_one

    @property
    def model(self):
        return self._model

    @property
    def energy_model(self) -> EnergyModel | None:
        """The conditional :class:`~ugm_infer.EnergyModel` (after ``init``): params are the
        unconstrained values of the other latent sites, ``{site: array}``."""
        return None if self._setup is None else self._setup.energy_model

    # -- static set-up -------------------------------------------------------------------
    def setup(self, model_args: tuple, model_kwargs: dict | None, sites: Any = None) -> _Setup:
        """Resolve the sites, the conditional energy, its blocks and the kernel (once per model).

        Uses a trace of the model with a fixed key (concrete values, also when ``init``
        runs under ``vmap``); later calls check that the sites kept their shapes.
        """
        with jax.ensure_compile_time_eval():  # concrete even when NumPyro runs init under pmap
            return self._resolve(tuple(model_args), model_kwargs, sites)

    def _resolve(self, args: tuple, model_kwargs: dict | None, sites: Any) -> _Setup:
        kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != GIBBS_SITES_KWARG}
        trace = trace_model(conditioned(self._model), args, kwargs)
        discrete, continuous = latent_sites(trace)
        sites = discrete_sites(trace) if sites is None else tuple(sites)
        domains = {n: site_domain(n, trace[n]["fn"], trace[n]["value"], jnp.result_type(trace[n]["value"])) for n in sites}
        if self._setup is not None:
            _check_same_sites(self._setup.energy_model.variables, domains)
            return self._setup
        others = {n: s for n, s in {**discrete, **continuous}.items() if n not in sites}
        transforms = {n: biject_to(s["fn"].support) for n, s in others.items() if not s["fn"].support.is_discrete}
        probe = {n: transforms[n].inv(s["value"]) if n in transforms else s["value"] for n, s in others.items()}
        model = conditioned(self._model)

        def energy_fn(unconstrained, x):  # the conditional energy, for structure detection
            values = {n: transforms[n](v) if n in transforms else v for n, v in unconstrained.items()}
            return -log_joint(model, args, kwargs, {**values, **x})

        energy_model = EnergyModel(
            energy_fn, domains, self._blocks, multilinear=self._multilinear, name="numpyro-conditional"
        )
        if self._name is not None:
            step, init, _ = _builtin_kernel(self._name, energy_model, probe, dict(self._kernel_kwargs))
        else:
            step, init = self._kernel, self._init_fn
        self._setup = _Setup(sites, energy_model, probe, step, init, self._position_fn or (lambda s: s.position))
        return self._setup

    def _logdensity(self, model_args, model_kwargs) -> Callable:
        # conditioned() is idempotent: inside numpyro.infer.Gibbs the model is conditioned already
        model, kwargs = conditioned(self._model), model_kwargs or {}
        return lambda x: log_joint(model, model_args, with_conditioning(kwargs, x), {})

    def _position(self, kernel_state) -> dict:
        z = self._setup.position_fn(kernel_state)
        variables = self._setup.energy_model.variables
        if not isinstance(z, Mapping) or set(z) != set(variables):
            raise ValueError(
                f"the discrete kernel's position must be a dict over the sites {list(variables)}, got "
                f"{type(z).__name__} {list(z) if isinstance(z, Mapping) else ''}; pass `position_fn=`"
            )
        return {n: z[n] for n in variables}

    # -- numpyro protocol ----------------------------------------------------------------
    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        del num_warmup
        model_kwargs = {} if model_kwargs is None else model_kwargs
        self.setup(model_args, model_kwargs, None if not init_params else tuple(init_params))
        if is_prng_key(rng_key):
            self._sample_fn = self._sample_one
            return self._init_one(rng_key, init_params, model_args, model_kwargs)
        # alone with chain_method="vectorized": a batch of keys (and of init_params)
        self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
        init_one = jax.vmap(lambda key, params: self._init_one(key, params, model_args, model_kwargs))
        return jax.jit(init_one)(rng_key, init_params)

    def _init_one(self, rng_key, init_params, model_args, model_kwargs):
        setup = self._setup
        if not init_params:  # alone, on a model whose latent sites are all discrete
            rng_key, key_trace = jax.random.split(rng_key)
            trace = prototype_trace(conditioned(self._model), key_trace, model_args, model_kwargs)
            free = [n for n, s in latent_sites(trace)[1].items()]
            if free:
                raise ValueError(
                    f"UGMBlock samples the discrete sites only, but the continuous latent sites {free} are free; "
                    "use ui.numpyro.UGMGibbs(NUTS(model), ...) or a block of numpyro.infer.Gibbs"
                )
            init_params = {n: trace[n]["value"] for n in setup.sites}
        position = {}
        for n, d in setup.energy_model.variables.items():
            if n not in init_params:
                raise ValueError(f"no initial value for discrete site '{n}'")
            if tuple(jnp.shape(init_params[n])) != d.shape:
                raise ValueError(
                    f"initial value of discrete site '{n}' has shape {tuple(jnp.shape(init_params[n]))}; expected {d.shape}"
                )
            position[n] = jnp.asarray(init_params[n], d.dtype)
        logdensity_fn = self._logdensity(model_args, model_kwargs)
        kernel_state = setup.init(position, logdensity_fn)
        info = jax.eval_shape(lambda k, s: setup.step(k, s, logdensity_fn), rng_key, kernel_state)[1]
        info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info)
        z = self._position(kernel_state)
        return UGMBlockState(z, -logdensity_fn(z), kernel_state, info, rng_key)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, model_args, model_kwargs)

    def _sample_one(self, state, model_args, model_kwargs):
        key_next, key_step = jax.random.split(state.rng_key)
        logdensity_fn = self._logdensity(model_args, model_kwargs)
        kernel_state, info = self._setup.step(key_step, state.kernel_state, logdensity_fn)
        z = self._position(kernel_state)
        return UGMBlockState(z, -logdensity_fn(z), kernel_state, info, key_next)

    def refresh(self, state, model_args, model_kwargs):
        """Re-create the kernel state at the same position under the new conditioning."""
        logdensity_fn = self._logdensity(model_args, model_kwargs)
        kernel_state = self._setup.init(state.z, logdensity_fn)
        return state._replace(potential_energy=-logdensity_fn(state.z), kernel_state=kernel_state)

    def wrap_model(self, wrapper):
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        kernel._setup = None
        kernel._sample_fn = kernel._sample_one
        return kernel

    def get_constrain_fn(self, model_args, model_kwargs):
        return identity

    def get_diagnostics_str(self, state):
        return ""

    def __repr__(self) -> str:
        return f"UGMBlock({self.kernel_name!r})"


class UGMGibbsState(GibbsState):
    """:class:`numpyro.infer.gibbs.GibbsState` of :class:`UGMGibbs` with named views.

    ``discrete_state`` (:class:`UGMBlockState`) and ``hmc_state`` are the two block
    states; ``info`` is the discrete kernel's info and ``diverging`` the HMC flag, so
    ``extra_fields=("info.acceptance_probability", "hmc_state.num_steps")`` works.
    """

    __slots__ = ()

    @property
    def discrete_state(self) -> UGMBlockState:
        return self.block_states[0]

    @property
    def hmc_state(self):
        return self.block_states[-1]

    @property
    def info(self):
        return self.block_states[0].info

    @property
    def diverging(self):
        return self.block_states[-1].diverging


class UGMGibbs(Gibbs):
    """HMC-within-Gibbs: NumPyro's HMC/NUTS for the continuous sites, a ugm_infer kernel for the discrete ones.

    ``UGMGibbs(NUTS(model), kernel=...)`` is used like
    ``numpyro.infer.DiscreteHMCGibbs(NUTS(model))``: ``numpyro.infer.MCMC`` supplies
    warm-up (NUTS adapts on the continuous conditional), ``num_chains`` with
    ``chain_method="vectorized"`` (which NumPyro's own discrete kernels refuse),
    ``"sequential"`` or ``"parallel"``, the progress bar, ``print_summary``,
    ``extra_fields`` and ``arviz.from_numpyro``.

    Parameters
    ----------
    inner_kernel
        :class:`numpyro.infer.HMC` or :class:`numpyro.infer.NUTS` built on the model.
    kernel, blocks, multilinear, init_fn, position_fn, **kernel_kwargs
        The discrete move, see :class:`UGMBlock`: ``"gibbs"`` (block Gibbs over blocks
        detected on the conditional energy), ``"metropolis"``,
        ``"tempered_transitions"`` (``betas=...``), or a user-written inner kernel.
        For parallel tempering wrap the sampler in :class:`ParallelTempering`.

    Notes
    -----
    Differences from NumPyro's samplers for discrete sites:

    * ``DiscreteHMCGibbs`` / ``MixedHMC`` update one discrete coordinate at a time in a
      ``fori_loop``, each update re-evaluating the whole model ``K`` times; block
      Gibbs here draws all sites of a block at once (their conditionals are evaluated
      in vmapped batches), and tempered transitions move many sites jointly.
    * ``HMCGibbs(NUTS(model), gibbs_fn, gibbs_sites)`` runs a user function that must
      sample the exact conditional, which the user derives by hand; here the
      conditional is read off the model by NumPyro's ``log_density`` and any
      ugm_infer kernel that leaves it invariant can move it.
    * Multiple chains run vectorized (one compiled step for all chains).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist, ugm_infer as ui
    >>> from numpyro.infer import MCMC, NUTS
    >>> def mixture(y):
    ...     mu = numpyro.sample("mu", dist.Normal(jnp.array([-2.0, 2.0]), 1.0).to_event(1))
    ...     with numpyro.plate("data", y.shape[0]):
    ...         c = numpyro.sample("c", dist.Bernoulli(0.5))
    ...         numpyro.sample("y", dist.Normal(mu[c], 1.0), obs=y)
    >>> kernel = ui.numpyro.UGMGibbs(NUTS(mixture), kernel="gibbs")
    >>> mcmc = MCMC(kernel, num_warmup=50, num_samples=50, num_chains=2, chain_method="vectorized",
    ...             progress_bar=False)
    >>> mcmc.run(jax.random.key(0), jnp.array([-2.1, -1.5, 1.8, 2.4]))
    >>> mcmc.get_samples()["c"].shape
    (100, 4)
    """

    _state_cls = UGMGibbsState

    def __init__(
        self,
        inner_kernel: HMC,
        kernel: Any = "gibbs",
        *,
        blocks: Any = None,
        multilinear: bool | None = None,
        init_fn: Callable | None = None,
        position_fn: Callable | None = None,
        **kernel_kwargs: Any,
    ):
        if not isinstance(inner_kernel, HMC):
            raise TypeError(f"`inner_kernel` must be numpyro.infer.NUTS or HMC, got {type(inner_kernel).__name__}")
        if inner_kernel.model is None:
            raise ValueError("`inner_kernel` must be built on a NumPyro model (NUTS(model)), not on a potential function")
        #: the discrete move's arguments (``UGMGibbs(other_inner_kernel, **options)`` rebuilds it)
        self.options = dict(
            kernel=kernel, blocks=blocks, multilinear=multilinear, init_fn=init_fn, position_fn=position_fn, **kernel_kwargs
        )
        block = UGMBlock(inner_kernel.model, **self.options)
        super().__init__([(block, discrete_sites), (inner_kernel, None)])
        self.discrete_kernel, self.inner_kernel = self._kernels

    @property
    def default_fields(self):
        return ("z", "diverging")

    def setup(self, model_args, model_kwargs):
        """Resolve the discrete block (sites, blocks, kernel) outside any ``vmap``; see :class:`UGMBlock`."""
        return self.discrete_kernel.setup(model_args, model_kwargs)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
        self.setup(model_args, model_kwargs)
        if is_prng_key(rng_key):
            return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)
        # chain_method="vectorized": NumPyro hands over a batch of keys (and of init_params); jitted,
        # because op-by-op execution of the model's log density under vmap costs more than compiling it
        state = jax.jit(jax.vmap(lambda key, params: Gibbs.init(self, key, num_warmup, params, model_args, model_kwargs)))(
            rng_key, init_params
        )
        self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
        return state

    def __repr__(self) -> str:
        return f"UGMGibbs({type(self.inner_kernel).__name__}, kernel={self.discrete_kernel.kernel_name!r})"
