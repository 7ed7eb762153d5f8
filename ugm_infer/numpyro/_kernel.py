"""ugm_infer kernels as a :class:`numpyro.infer.mcmc.MCMCKernel` for energy models (:class:`NumPyroKernel`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from ugm_infer.model import EnergyModel

__all__ = ["KERNELS", "NumPyroKernel", "NumPyroKernelState", "as_numpyro_kernel"]

#: names accepted by ``kernel=`` (the ugm_infer kernels of :mod:`ugm_infer.kernels`)
KERNELS = ("gibbs", "metropolis", "tempered_transitions", "parallel_tempering")


class NumPyroKernelState(NamedTuple):
    """State of one chain under ``numpyro.infer.MCMC``.

    z
        The configuration at the target, ``{name: array}`` (the sample field).
    potential_energy
        :math:`E(\\theta, z)` (ArviZ: ``lp = -potential_energy``).
    kernel_state
        The ugm_infer kernel's own state (e.g. ``GibbsState``; all replicas for
        parallel tempering).
    info
        The kernel's info of the last step (zeros before the first step); collect a
        field with ``extra_fields=("info.acceptance_rate",)``.
    rng_key
        The chain's PRNG key (NumPyro replaces it between ``warmup`` and ``run``).
    """

    z: dict
    potential_energy: jax.Array
    kernel_state: Any
    info: Any
    rng_key: jax.Array


def _builtin_kernel(name: str, model: EnergyModel, params: Any, kwargs: dict):
    """(inner kernel, init(position, logdensity_fn), position_fn) of a ugm_infer kernel by name."""
    if name == "gibbs":
        from ugm_infer.kernels.gibbs import build_kernel, init

        return build_kernel(model, params=params, **kwargs), init, None
    if name == "metropolis":
        from ugm_infer.kernels.metropolis import build_kernel, init

        return build_kernel(model, **kwargs), init, None
    if name == "tempered_transitions":
        from ugm_infer.kernels.tempered_transitions import build_kernel, init

        return build_kernel(model, params=params, **kwargs), init, None
    from ugm_infer.kernels.parallel_tempering import build_kernel, init, target_position
    from ugm_infer.kernels.tempered_transitions import check_ladder

    kernel = build_kernel(model, params=params, **kwargs)
    num_replicas = len(check_ladder(kwargs.get("betas")))
    return kernel, functools.partial(init, num_replicas=num_replicas), target_position


def _kernel_name(kernel: Any) -> str | None:
    """The name of a ugm_infer kernel given as a string or as ``ui.kernels.<name>``."""
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            raise ValueError(f"`kernel` must be one of {KERNELS}, a SamplingAlgorithm or an inner kernel; got {kernel!r}")
        return kernel
    import ugm_infer.kernels as uk

    for name in KERNELS:
        if kernel is getattr(uk, name):
            return name
    return None


def _default_position(kernel_state) -> dict:
    """``kernel_state.position``; for parallel tempering its ``beta = 1`` replica."""
    from ugm_infer.kernels.parallel_tempering import ParallelTemperingState, target_position

    if isinstance(kernel_state, ParallelTemperingState):
        return target_position(kernel_state)
    return kernel_state.position


class NumPyroKernel(MCMCKernel):
    """Any ugm_infer kernel as a :class:`numpyro.infer.mcmc.MCMCKernel`.

    Parameters
    ----------
    model
        An :class:`~ugm_infer.EnergyModel`.
    params
        Its parameters: the chains target :math:`\\exp(-E(\\theta, x))`.  Also used to
        detect blocks for block Gibbs and to report ``potential_energy``.
    kernel
        One of

        * a name in :data:`KERNELS` or the object ``ui.kernels.<name>``; the inner
          kernel is ``ui.kernels.<name>.build_kernel(model, **kernel_kwargs)`` (e.g.
          ``scan="systematic"``, ``num_sweeps=5``, ``betas=...``);
        * a :class:`blackjax.base.SamplingAlgorithm` for one chain (e.g.
          ``ui.kernels.gibbs(model, params)`` or any user-built one), used as is;
        * a BlackJAX inner kernel ``kernel(rng_key, state, logdensity_fn) -> (state,
          info)`` together with ``init_fn(position, logdensity_fn) -> state`` (e.g. the
          result of a user-written ``build_kernel``); it receives
          ``logdensity_fn = model.logdensity_fn(params)``.
    init_fn
        The inner kernel's ``init`` (only with an inner kernel).
    position_fn
        ``position_fn(kernel_state) -> {name: array}``, the configuration reported as
        a sample (default ``state.position``; for parallel tempering, named or as a
        SamplingAlgorithm, its ``beta = 1`` replica).
    **kernel_kwargs
        Passed to the named kernel's ``build_kernel``.

    Notes
    -----
    ``MCMC.run(rng_key, init_params=...)`` takes one configuration ``{name: array}``
    per chain (leading axis ``num_chains`` when ``num_chains > 1``); without
    ``init_params`` every chain starts from a uniformly random configuration.
    ``MCMC.run`` takes no model arguments: the target is fixed by ``params``.  With
    ``chain_method="vectorized"`` NumPyro hands :meth:`init` a batch of keys and
    positions, and the kernel vmaps its step over chains.  ``warmup`` does no
    adaptation (the ugm_infer kernels have no tuning parameters); it is burn-in.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ugm_infer as ui
    >>> from numpyro.infer import MCMC
    >>> model = ui.models.ising(4, edges=[[0, 1], [1, 2], [2, 3]])
    >>> params = {"w": jnp.array([0.5, -0.3, 0.8]), "h": jnp.zeros(4)}
    >>> kernel = ui.numpyro.NumPyroKernel(model, params, "gibbs")
    >>> mcmc = MCMC(kernel, num_warmup=10, num_samples=20, num_chains=2,
    ...             chain_method="vectorized", progress_bar=False)
    >>> mcmc.run(jax.random.key(0))
    >>> mcmc.get_samples()["s"].shape
    (40, 4)
    """

    sample_field = "z"

    def __init__(
        self,
        model: EnergyModel,
        params: Any,
        kernel: Any = "gibbs",
        *,
        init_fn: Callable | None = None,
        position_fn: Callable | None = None,
        **kernel_kwargs: Any,
    ):
        if not isinstance(model, EnergyModel):
            raise TypeError(f"`model` must be a ui.EnergyModel, got {type(model).__name__}")
        if params is None:
            raise ValueError("`params` is required: the chains target exp(-E(params, x))")
        model.validate_params(params)
        if init_fn is not None and not callable(init_fn):
            raise TypeError(f"`init_fn` must be callable, got {type(init_fn).__name__}")
        if position_fn is not None and not callable(position_fn):
            raise TypeError(f"`position_fn` must be callable, got {type(position_fn).__name__}")
        self.energy_model = model
        self.params = params
        self._logdensity_fn = model.logdensity_fn(params)
        name = _kernel_name(kernel)
        default_position = None
        if name is not None:
            if init_fn is not None:
                raise ValueError(f"`init_fn` is only for a custom inner kernel; kernel {name!r} has its own init")
            step, init, default_position = _builtin_kernel(name, model, params, kernel_kwargs)
            self._algorithm = SamplingAlgorithm(
                lambda position: init(position, self._logdensity_fn),
                lambda key, state: step(key, state, self._logdensity_fn),
            )
        elif isinstance(kernel, SamplingAlgorithm):
            if init_fn is not None or kernel_kwargs:
                raise ValueError("a SamplingAlgorithm is used as is: pass no `init_fn` or kernel keyword arguments")
            self._algorithm = kernel
        elif callable(kernel):
            if init_fn is None:
                raise ValueError(
                    "an inner kernel `kernel(rng_key, state, logdensity_fn)` needs its `init_fn(position, logdensity_fn)`"
                    " (or pass a SamplingAlgorithm, or a kernel name from " + str(KERNELS) + ")"
                )
            if kernel_kwargs:
                raise ValueError(
                    f"kernel keyword arguments {sorted(kernel_kwargs)} are only for named kernels; "
                    "bind them when building your inner kernel"
                )
            self._algorithm = SamplingAlgorithm(
                lambda position: init_fn(position, self._logdensity_fn),
                lambda key, state: kernel(key, state, self._logdensity_fn),
            )
        else:
            raise TypeError(
                f"`kernel` must be a name in {KERNELS}, a SamplingAlgorithm or an inner kernel callable, "
                f"got {type(kernel).__name__}"
            )
        self.kernel_name = name or getattr(kernel, "__name__", type(kernel).__name__)
        self._position_fn = position_fn or default_position or _default_position
        self._sample_fn = None
        self._init_single = jax.jit(self._init_one)  # compiled once per kernel (sequential chains reuse it)
        self._init_batch = jax.jit(jax.vmap(self._init_one))
        # arviz.from_numpyro reads `sampler.model`: the NumPyro model when the energy came
        # from one (plate dims and observed data), otherwise None (no model to replay)
        self.model = getattr(model, "numpyro_model_bound", None)

    # -- numpyro protocol ----------------------------------------------------------
    @property
    def default_fields(self):
        return ("z", "potential_energy")

    def _energy(self, z):
        return jnp.asarray(self.energy_model.energy(self.params, z), jnp.float32)

    def _target(self, kernel_state) -> dict:
        """The configuration at the target, checked against the model's variables (at trace time)."""
        try:
            z = self._position_fn(kernel_state)
        except AttributeError as err:
            raise ValueError(
                f"cannot read the configuration from a {type(kernel_state).__name__} ({err}); "
                "pass `position_fn(kernel_state) -> {name: array}`"
            ) from err
        variables = self.energy_model.variables
        if not isinstance(z, Mapping) or set(z) != set(variables):
            raise ValueError(
                f"the kernel's position must be a dict over the model's variables {list(variables)}, "
                f"got {type(z).__name__} {list(z) if isinstance(z, Mapping) else ''}; pass `position_fn=`"
            )
        for n, d in variables.items():
            if tuple(jnp.shape(z[n])) != d.shape:
                raise ValueError(
                    f"the kernel's position['{n}'] has shape {tuple(jnp.shape(z[n]))}; expected {d.shape} "
                    "(one configuration); pass `position_fn=` to select it from the kernel state"
                )
        return {n: z[n] for n in variables}

    def _init_one(self, rng_key, position):
        key_init, key_chain = jax.random.split(rng_key)
        if position is None:
            position = self.energy_model.random_state(key_init)
        kernel_state = self._algorithm.init(position)
        info = jax.eval_shape(self._algorithm.step, key_init, kernel_state)[1]
        info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info)
        z = self._target(kernel_state)
        return NumPyroKernelState(z, self._energy(z), kernel_state, info, key_chain)

    def _sample_one(self, state: NumPyroKernelState) -> NumPyroKernelState:
        key_next, key_step = jax.random.split(state.rng_key)
        kernel_state, info = self._algorithm.step(key_step, state.kernel_state)
        z = self._target(kernel_state)
        return NumPyroKernelState(z, self._energy(z), kernel_state, info, key_next)

    def _check_position(self, init_params, batch_ndim):
        if init_params is None:
            return None
        if not isinstance(init_params, Mapping):
            raise TypeError(
                f"`init_params` must be a dict {{name: array}} over {list(self.energy_model.variables)}, "
                f"got {type(init_params).__name__}"
            )
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(init_params)):
            return {n: jnp.asarray(init_params[n], d.dtype) for n, d in self.energy_model.variables.items()}
        return self.energy_model.validate_state(init_params, batch_ndim=batch_ndim, argname="init_params")

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        del num_warmup
        if model_args or model_kwargs:
            raise ValueError(
                "MCMC.run takes no model arguments with a ugm_infer kernel (the target is fixed by `params`); "
                f"got args {model_args!r} and kwargs {sorted(model_kwargs or {})}"
            )
        # jitted: NumPyro calls init outside jit, and op-by-op execution of a NumPyro
        # log density (under vmap) costs more than compiling it
        if is_prng_key(rng_key):  # one chain, or chain_method "sequential" / "parallel"
            self._sample_fn = self._sample_one
            return self._init_single(rng_key, self._check_position(init_params, 0))
        # chain_method="vectorized": a batch of keys and of initial positions
        self._sample_fn = jax.vmap(self._sample_one)
        return self._init_batch(rng_key, self._check_position(init_params, 1))

    def sample(self, state, model_args, model_kwargs):
        del model_args, model_kwargs
        return self._sample_fn(state)

    def get_diagnostics_str(self, state):
        return f"energy {float(state.potential_energy):.3g}"

    def __repr__(self) -> str:
        return f"NumPyroKernel({self.kernel_name!r}, model={self.energy_model.name!r})"


def as_numpyro_kernel(
    model: EnergyModel,
    params: Any,
    kernel: Any = "gibbs",
    *,
    init_fn: Callable | None = None,
    position_fn: Callable | None = None,
    **kernel_kwargs: Any,
) -> NumPyroKernel:
    """A :class:`NumPyroKernel` running ``kernel`` on ``model`` at ``params`` (same arguments).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ugm_infer as ui
    >>> from numpyro.infer import MCMC
    >>> model = ui.models.ising(3, edges=[[0, 1], [1, 2]])
    >>> params = {"w": jnp.array([0.4, 0.4]), "h": jnp.array([0.1, 0.0, -0.1])}
    >>> kernel = ui.numpyro.as_numpyro_kernel(model, params, "metropolis", num_sweeps=2)
    >>> mcmc = MCMC(kernel, num_warmup=5, num_samples=10, progress_bar=False)
    >>> mcmc.run(jax.random.key(0), extra_fields=("info.acceptance_rate",))
    >>> mcmc.get_extra_fields()["info.acceptance_rate"].shape
    (10,)
    """
    return NumPyroKernel(model, params, kernel, init_fn=init_fn, position_fn=position_fn, **kernel_kwargs)
