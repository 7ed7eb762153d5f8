"""Scale-out on JAX's own sharding: chains, particles and minibatches across devices.

ugm_infer has no distribution layer of its own.  Everything hot is already one
``jax.jit`` program whose chains / particles are a leading ``vmap`` axis, so running
it on many devices only means *placing* that axis across a device mesh; XLA's
sharding propagation (GSPMD) then partitions the compiled program, runs each
device's slice of the chains locally, and inserts the collectives a computation needs
(the all-reduce of a parameter gradient averaged over particles, the gathers of
SMC resampling).  This module holds the few helpers that do the placing:

``chain_mesh(devices=None)``
    A 1-D :class:`jax.sharding.Mesh` over ``devices`` (default: all devices of all
    processes, :func:`jax.devices`) with axis name ``"chains"``.
``chain_sharding(mesh)`` / ``replicated(mesh)``
    :class:`~jax.sharding.NamedSharding` with ``PartitionSpec("chains")`` (leading
    axis split across the mesh, trailing axes whole) / ``PartitionSpec()`` (a full
    copy on every device).
``shard_chains(tree, mesh)``
    ``jax.device_put`` of every leaf with the leading axis split across the mesh
    (outside ``jit``); ``constrain_chains(tree, mesh)`` is the same placement as a
    :func:`jax.lax.with_sharding_constraint` (inside ``jit``).
``shard_learner(learner, mesh)``
    A :class:`~ugm_infer.learn.Learner` whose persistent particles and minibatches are
    split across the mesh and whose parameters and optimizer state are replicated;
    ``ui.fit(shard_learner(learner, mesh), ...)`` trains data-parallel and
    particle-parallel, the gradient reduction across devices done by XLA.

Where sharding enters the library:

* :func:`ugm_infer.sample`: pass a sharded ``initial_position``
  (``shard_chains(x0, mesh)``); every output with a chain axis comes back sharded.
* :func:`ugm_infer.smc.tempered_smc`: ``particle_sharding=chain_sharding(mesh)``
  splits every replicate's particles across the mesh.
* :func:`ugm_infer.fit`: wrap the learner with :func:`shard_learner`.

Reproducibility: JAX's ``threefry`` keys are partitionable
(``jax_threefry_partitionable``, the default since JAX 0.5), so each chain draws the
same random bits whatever the device count; element-wise work per chain is then
bit-identical to the one-device run.  Sums *across* chains or particles (a gradient
averaged over particles, the log-sum-exp of SMC weights) are reduced per device and
then across devices, a different floating-point order: equal to rounding, not
bit-for-bit.  ``docs/scaling.md`` has the multi-host recipe
(:func:`jax.distributed.initialize`).

References
----------
Xu, Y. et al. (2021). GSPMD: general and scalable parallelization for ML computation
graphs. arXiv:2105.04663 (the sharding propagation XLA runs on these programs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = [
    "AXIS",
    "chain_mesh",
    "chain_sharding",
    "constrain_chains",
    "replicated",
    "shard_chains",
    "shard_learner",
]

#: Name of the mesh axis the chains / particles / minibatch examples are split over.
AXIS = "chains"

#: Fields of a learner state holding one entry per persistent particle (SAP/PCD
#: ``particles`` and ``kernel_state``, the importance weights of the particle learners).
PARTICLE_FIELDS = ("particles", "kernel_state", "log_weights")


def chain_mesh(devices: Sequence[Any] | None = None, axis_name: str = AXIS) -> Mesh:
    """A 1-D device mesh whose single axis (``"chains"``) carries chains / particles / examples.

    Parameters
    ----------
    devices
        The devices, in mesh order; default :func:`jax.devices` (every device of every
        process once :func:`jax.distributed.initialize` has run, so the mesh is global).
    axis_name
        Name of the mesh axis.

    Examples
    --------
    >>> import ugm_infer as ui
    >>> mesh = ui.sharding.chain_mesh()
    >>> mesh.axis_names
    ('chains',)
    """
    if devices is None:
        devices = jax.devices()
    devices = list(devices)
    if not devices:
        raise ValueError("`devices` must name at least one device, got an empty sequence")
    if not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError(f"`devices` must be jax.Device objects (e.g. jax.devices()), got {devices!r}")
    if not isinstance(axis_name, str) or not axis_name:
        raise TypeError(f"`axis_name` must be a non-empty str, got {axis_name!r}")
    return Mesh(np.array(devices, dtype=object), (axis_name,))


def _check_mesh(mesh: Any) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"`mesh` must be a jax.sharding.Mesh (e.g. ui.sharding.chain_mesh()), got {type(mesh).__name__}")
    if len(mesh.axis_names) != 1:
        raise ValueError(f"`mesh` must be 1-D (one axis for the chains), got axes {mesh.axis_names}")
    return mesh


def chain_sharding(mesh: Mesh) -> NamedSharding:
    """``NamedSharding(mesh, PartitionSpec(axis))``: the leading axis split across the mesh."""
    mesh = _check_mesh(mesh)
    return NamedSharding(mesh, P(mesh.axis_names[0]))


def replicated(mesh: Mesh) -> NamedSharding:
    """``NamedSharding(mesh, PartitionSpec())``: a full copy on every device of the mesh."""
    return NamedSharding(_check_mesh(mesh), P())


def _check_divisible(tree: Any, mesh: Mesh, argname: str) -> None:
    size = mesh.devices.size
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        shape = np.shape(leaf)
        if len(shape) == 0 or shape[0] % size:
            raise ValueError(
                f"`{argname}` leaf {jax.tree_util.keystr(path) or '(root)'} has shape {shape}: its leading "
                f"(chain) axis must be a multiple of the {size} devices of the mesh"
            )


def shard_chains(tree: Any, mesh: Mesh, *, argname: str = "tree") -> Any:
    """Place every leaf of ``tree`` with its leading axis split across ``mesh`` (outside ``jit``).

    Raises ``ValueError`` when a leaf is a scalar or its leading axis is not a multiple
    of the number of devices (pad the chains, or pick a mesh that divides them).

    Examples
    --------
    >>> import jax, ugm_infer as ui
    >>> mesh = ui.sharding.chain_mesh()
    >>> model = ui.models.lattice_ising(8, 8)
    >>> x0 = ui.sharding.shard_chains(model.random_state(jax.random.key(0), 4 * mesh.size), mesh)
    """
    mesh = _check_mesh(mesh)
    _check_divisible(tree, mesh, argname)
    return jax.device_put(tree, chain_sharding(mesh))


def constrain_chains(tree: Any, mesh: Mesh) -> Any:
    """:func:`jax.lax.with_sharding_constraint` of every leaf to the chain sharding (inside ``jit``).

    Scalars and leaves whose leading axis is not a multiple of the mesh size are
    constrained to be replicated instead.  Under ``vmap`` the constraint applies to the
    unbatched shape (the mapped axis stays unconstrained).  Lattice chains kept with
    their chain axis last (a learner's ``kernel_state`` under block Gibbs on a lattice,
    ``chains_last`` state types) are split along that last axis.
    """
    mesh = _check_mesh(mesh)
    size = mesh.devices.size
    whole = replicated(mesh)
    axis = -1 if getattr(type(tree), "chains_last", False) else 0

    def one(x):
        ndim = np.ndim(x)
        if ndim == 0 or np.shape(x)[axis] % size:
            return jax.lax.with_sharding_constraint(x, whole)
        spec = P(mesh.axis_names[0]) if axis == 0 else P(*([None] * (ndim - 1)), mesh.axis_names[0])
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    return jax.tree.map(one, tree)


def constrain_replicated(tree: Any, mesh: Mesh) -> Any:
    """:func:`jax.lax.with_sharding_constraint` of every leaf to a full copy per device."""
    whole = replicated(mesh)
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, whole), tree)


def _place_state(state: Any, mesh: Mesh) -> Any:
    """Particle fields split across the mesh, everything else (params, optimizer) replicated."""
    if not hasattr(state, "_fields"):
        return constrain_replicated(state, mesh)
    fields = {}
    for name in state._fields:
        value = getattr(state, name)
        fields[name] = constrain_chains(value, mesh) if name in PARTICLE_FIELDS else constrain_replicated(value, mesh)
    return type(state)(**fields)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def shard_learner(learner: Any, mesh: Mesh) -> Any:
    """Run a learner data- and particle-parallel over ``mesh`` (through :func:`ugm_infer.fit` or by hand).

    The returned :class:`~ugm_infer.learn.Learner` has the same model, name and
    visible variables; its

    * ``init`` places the state: the per-particle fields (``particles``,
      ``kernel_state``, ``log_weights``) split along their chain axis (the leading
      one, or the last one of lattice chains kept chains-last), everything
      else (``params``, the optax state, counters) replicated;
    * ``step`` constrains the minibatch to be split along its example axis and the
      new state to the same placement, then calls the wrapped step.

    Inside the compiled step each device moves its own particles and computes the
    gradient terms of its own examples and particles; the means over examples and
    particles become per-device partial sums plus one all-reduce, inserted by XLA.
    Nothing else changes: same keys, same random bits per particle, same parameters
    up to the rounding of those reductions.  ``num_particles`` and ``batch_size``
    should be multiples of the number of devices (otherwise that array stays
    replicated: correct, but not split).

    Examples
    --------
    >>> import jax, ugm_infer as ui                                     # doctest: +SKIP
    >>> mesh = ui.sharding.chain_mesh()                                 # doctest: +SKIP
    >>> learner = ui.sharding.shard_learner(ui.learn.pcd(model, num_particles=400), mesh)  # doctest: +SKIP
    >>> result = ui.fit(learner, jax.random.key(0), data, batch_size=400)  # doctest: +SKIP
    """
    mesh = _check_mesh(mesh)
    for name in ("init", "step", "model", "name", "visible"):
        if not hasattr(learner, name):
            raise TypeError(f"`learner` must be a ugm_infer.learn.Learner, got {type(learner).__name__} (no .{name})")

    def init(rng_key, params, data=None):
        state = learner.init(rng_key, params, data)
        # host copies in (numpy: taken as the same value on every process, so this also
        # works on a multi-host mesh), placed copies out
        state = jax.tree.map(lambda x: x if _is_key(x) else np.asarray(x), state)
        return jax.jit(lambda s: _place_state(s, mesh))(state)

    def step(rng_key, state, batch):
        batch = constrain_chains(batch, mesh)
        new_state, info = learner.step(rng_key, _place_state(state, mesh), batch)
        return _place_state(new_state, mesh), info

    return type(learner)(init, step, learner.model, learner.name, learner.visible)
