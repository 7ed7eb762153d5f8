"""Shared test fixtures: brute-force ground truth and small inline models.

The ground truth here is deliberately independent of :mod:`ugm_infer.exact`: every
configuration is listed with numpy, its energy is computed by the model's own
``energy`` (vmapped, in chunks) and the Boltzmann distribution is normalised in
float64.  Configurations are ordered like :func:`stat_utils.state_index` (mixed radix,
variables in declaration order, sites row-major, the first site most significant).

The inline models are written with :class:`ugm_infer.EnergyModel` only, so these
tests do not depend on the built-in models of :mod:`ugm_infer.models`.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

# JAX's persistent compilation cache, shared by the xdist workers and by the CLI and
# example subprocesses the tests start (they inherit the environment): a program that
# several tests build again from scratch is compiled once per run. Set
# JAX_COMPILATION_CACHE_DIR to use another folder (entries are small: about 10 kB each).
_JAX_CACHE = {
    "JAX_COMPILATION_CACHE_DIR": os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".jax_cache"),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
}
for _name, _value in _JAX_CACHE.items():
    os.environ.setdefault(_name, _value)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
_min_seconds = float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", _min_seconds)

import ugm_infer as ui  # noqa: E402


# --------------------------------------------------------------------------------------
# brute force
# --------------------------------------------------------------------------------------
def all_states(model) -> dict:
    """Every configuration of ``model`` as a batched state, in ``state_index`` order."""
    radices = []
    for d in model.variables.values():
        radices += [d.num_states] * d.size
    total = math.prod(radices)
    if total > 2**20:
        raise ValueError(f"brute force refuses {total} configurations")
    digits = np.stack(np.unravel_index(np.arange(total), radices), axis=1) if radices else np.zeros((1, 0), int)
    out, offset = {}, 0
    for name, d in model.variables.items():
        values = d.values[digits[:, offset : offset + d.size]]
        out[name] = jnp.asarray(values.reshape((total,) + d.shape), dtype=d.dtype)
        offset += d.size
    return out


def brute_force_energies(model, params, chunk: int = 1 << 14) -> np.ndarray:
    """Energies of all configurations (float64 numpy), in ``state_index`` order."""
    states = all_states(model)
    total = next(iter(states.values())).shape[0]
    fn = jax.jit(jax.vmap(lambda s: model.energy(params, s)))
    parts = []
    for start in range(0, total, chunk):
        parts.append(np.asarray(fn({n: x[start : start + chunk] for n, x in states.items()}), dtype=np.float64))
    return np.concatenate(parts)


def brute_force(model, params, beta: float = 1.0) -> np.ndarray:
    """Exact probabilities ``exp(-beta E) / Z`` of all configurations (``state_index`` order)."""
    logp = -beta * brute_force_energies(model, params)
    logp -= logp.max()
    p = np.exp(logp)
    return p / p.sum()


def brute_force_log_z(model, params, beta: float = 1.0) -> float:
    """Exact ``log Z(beta) = log sum_x exp(-beta E(x))`` by enumeration (float64)."""
    logp = -beta * brute_force_energies(model, params)
    m = logp.max()
    return float(m + np.log(np.sum(np.exp(logp - m))))


def marginal(probs: np.ndarray, model, sites) -> np.ndarray:
    """Exact joint distribution of the given global ``sites`` (mixed-radix order of ``sites``)."""
    radices = []
    for d in model.variables.values():
        radices += [d.num_states] * d.size
    table = probs.reshape(radices)
    others = tuple(i for i in range(len(radices)) if i not in sites)
    m = table.sum(axis=others)
    # sum keeps remaining axes in increasing site order; reorder to the order given
    order = np.argsort(np.argsort(sites))
    return np.transpose(m, order).reshape(-1)


def site_digits(states: dict, model) -> np.ndarray:
    """``(batch, num_sites)`` value indices of a batched state, in global site order."""
    cols = []
    for name, d in model.variables.items():
        x = np.asarray(states[name]).reshape(-1, d.size)
        cols.append(np.asarray(d.to_index(x)))
    return np.concatenate(cols, axis=1)


def marginal_index(states: dict, model, sites) -> np.ndarray:
    """Mixed-radix index of the values at ``sites`` (matching :func:`marginal`)."""
    digits = site_digits(states, model)
    radices = []
    for d in model.variables.values():
        radices += [d.num_states] * d.size
    index = np.zeros(digits.shape[0], dtype=np.int64)
    for s in sites:
        index = index * radices[s] + digits[:, s]
    return index


# --------------------------------------------------------------------------------------
# running many independent chains of a low-level kernel
# --------------------------------------------------------------------------------------
def energy_magnetisation_cells(model, params, beta, name="s"):
    """Exact distribution of (energy, magnetisation) and a function giving each draw's cell."""
    states = all_states(model)
    x = np.asarray(states[name], np.float64).reshape(len(states[name]), -1)
    energies = np.asarray(jax.vmap(lambda s: model.energy(params, {name: s}))(states[name]), np.float64)
    keys = np.round(energies * 1000).astype(np.int64) * 1000 + x.sum(1).astype(np.int64)
    cells, inverse = np.unique(keys, return_inverse=True)
    probs = np.bincount(inverse, weights=brute_force(model, params, beta), minlength=len(cells))

    def cell(draws):
        d = np.asarray(draws[name], np.float64).reshape(len(draws[name]), -1)
        e = np.asarray(jax.vmap(lambda s: model.energy(params, {name: s}))(draws[name]), np.float64)
        k = np.round(e * 1000).astype(np.int64) * 1000 + d.sum(1).astype(np.int64)
        idx = np.searchsorted(cells, k)
        assert np.all(cells[np.minimum(idx, len(cells) - 1)] == k), "a draw outside the enumerated cells"
        return idx

    return probs, cell


def run_chains(kernel, init_fn, logdensity_fn, positions, rng_key, num_steps):
    """Final states of independent chains (leading axis of ``positions``) after ``num_steps``.

    The whole run is one jitted ``vmap`` over chains of a ``lax.scan`` over steps, so
    the returned positions are iid draws of the ``num_steps``-step marginal.
    """

    @jax.jit
    def run(key, pos):
        def one_chain(k, p):
            state = init_fn(p, logdensity_fn)

            def body(s, kk):
                return kernel(kk, s, logdensity_fn)[0], None

            state, _ = jax.lax.scan(body, state, jax.random.split(k, num_steps))
            return state.position

        n = jax.tree.leaves(pos)[0].shape[0]
        return jax.vmap(one_chain)(jax.random.split(key, n), pos)

    return run(rng_key, positions)


# --------------------------------------------------------------------------------------
# inline models
# --------------------------------------------------------------------------------------
def dense_ising_energy(params, state):
    """``E(s) = -1/2 s^T W s - h^T s`` for spins (W symmetric, zero diagonal)."""
    s = state["s"].astype(params["W"].dtype)
    return -0.5 * s @ params["W"] @ s - params["h"] @ s


def dense_ising_params(n: int, seed: int = 1, scale: float = 0.3, strong=((0, 1, 2.0), (2, 5, -2.0), (7, 11, 1.8))):
    """Symmetric zero-diagonal Gaussian couplings (sd ``scale``) plus a few strong ones, and a field."""
    rng = np.random.default_rng(seed)
    w = scale * rng.normal(size=(n, n))
    w = np.triu(w, 1)
    for i, j, v in strong:
        w[min(i, j), max(i, j)] = v
    w = w + w.T
    h = 0.5 * rng.normal(size=n)
    return {"W": jnp.asarray(w, jnp.float32), "h": jnp.asarray(h, jnp.float32)}


def dense_ising(n: int, dtype=jnp.float32, **kwargs):
    return ui.EnergyModel(dense_ising_energy, {"s": ui.Spin(n, dtype=dtype)}, **kwargs)


def grid_edges(rows: int, cols: int, periodic: bool = False) -> np.ndarray:
    edges = []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            if c + 1 < cols or periodic:
                edges.append((i, r * cols + (c + 1) % cols))
            if r + 1 < rows or periodic:
                edges.append((i, ((r + 1) % rows) * cols + c))
    return np.unique(np.sort(np.array(edges), axis=1), axis=0)


def potts_energy(params, state):
    """Open-grid Potts: ``E = -sum_{(i,j)} J_ij [x_i == x_j] - sum_i h_i[x_i]`` via one-hot.

    Written with slices only (no gathers), which keeps vmapped chains fast on CPU.
    """
    x = state["x"]
    onehot = jax.nn.one_hot(x, params["h"].shape[-1], dtype=params["h"].dtype)  # (rows, cols, k)
    horizontal = jnp.sum(onehot[:, :-1] * onehot[:, 1:], axis=-1)
    vertical = jnp.sum(onehot[:-1] * onehot[1:], axis=-1)
    return -jnp.sum(params["Jh"] * horizontal) - jnp.sum(params["Jv"] * vertical) - jnp.sum(onehot * params["h"])


def potts_params(rows: int = 3, cols: int = 3, k: int = 3, seed: int = 1):
    rng = np.random.default_rng(seed)
    return {
        "Jh": jnp.asarray(0.6 + 0.4 * rng.normal(size=(rows, cols - 1)), jnp.float32),
        "Jv": jnp.asarray(0.6 + 0.4 * rng.normal(size=(rows - 1, cols)), jnp.float32),
        "h": jnp.asarray(0.5 * rng.normal(size=(rows, cols, k)), jnp.float32),
    }


def potts(rows: int = 3, cols: int = 3, k: int = 3, dtype=jnp.int32, **kwargs):
    return ui.EnergyModel(potts_energy, {"x": ui.Categorical((rows, cols), k, dtype=dtype)}, **kwargs)


def rbm_energy(params, state):
    """``E(v, h) = -v^T W h - b^T v - c^T h`` (binary units)."""
    v = state["v"].astype(params["W"].dtype)
    h = state["h"].astype(params["W"].dtype)
    return -v @ params["W"] @ h - params["b"] @ v - params["c"] @ h


def rbm_params(nv: int = 5, nh: int = 4, seed: int = 2):
    rng = np.random.default_rng(seed)
    return {
        "W": jnp.asarray(rng.normal(size=(nv, nh)), jnp.float32),
        "b": jnp.asarray(0.5 * rng.normal(size=nv), jnp.float32),
        "c": jnp.asarray(0.5 * rng.normal(size=nh), jnp.float32),
    }


def rbm(nv: int = 5, nh: int = 4, declare_blocks: bool = True, dtype=jnp.float32):
    blocks = [{"v": True}, {"h": True}] if declare_blocks else None
    return ui.EnergyModel(rbm_energy, {"v": ui.Binary(nv, dtype=dtype), "h": ui.Binary(nh, dtype=dtype)}, blocks)


def lattice_energy(params, state):
    """Hand-written periodic 2D Ising: ``-J sum s_i s_j - H sum s_i`` over nearest neighbours."""
    s = state["s"].astype(jnp.float32)
    return -params["J"] * jnp.sum(s * jnp.roll(s, 1, 0) + s * jnp.roll(s, 1, 1)) - params["H"] * jnp.sum(s)


def lattice(rows: int = 4, cols: int = 4, dtype=jnp.float32, **kwargs):
    return ui.EnergyModel(lattice_energy, {"s": ui.Spin((rows, cols), dtype=dtype)}, **kwargs)


def once_per_run(tmp_path_factory, name: str, compute):
    """``compute()`` (a JSON-able result) once per test run, however many xdist workers ask for it.

    A module-scoped fixture runs once per worker that runs one of its tests, and the
    workers split a module between them; the expensive subprocess reports (float64,
    sharded devices) are computed by the first worker that asks and read by the others
    (pytest-xdist's pattern: a file in the run's shared temporary folder, under a lock).
    Without xdist it is just ``compute()``.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute()
    root = tmp_path_factory.getbasetemp().parent  # one folder per run, shared by its workers
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{name}.json"
        if done.exists():
            return json.loads(done.read_text())
        result = compute()
        done.write_text(json.dumps(result))
        return result


@pytest.fixture(scope="session")
def key():
    return jax.random.key(20240611)


def covering_pairs(first: list, second: list) -> list:
    """Every case ``(*a, *b)`` of ``first x second``: a covering set runs by default, the rest with ``-m slow``.

    The default set pairs the two lists along their diagonals (``first[i]`` with
    ``second[i mod len(second)]`` and ``second[j]`` with ``first[j mod len(first)]``),
    so every entry of each list is checked in CI with at least one entry of the other;
    the full cross product is ``pytest -m slow``'s second check.  Entries are tuples.
    """
    cases = []
    for i, a in enumerate(first):
        for j, b in enumerate(second):
            covered = j == i % len(second) or i == j % len(first)
            values = (*a, *b)
            cases.append(values if covered else pytest.param(*values, marks=pytest.mark.slow))
    return cases
