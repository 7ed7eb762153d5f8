"""Learning a Potts model from an alignment: bmDCA by stochastic maximum likelihood.

:func:`fit_dca` fits the dense Potts model :func:`ugm_infer.models.potts`

.. math::  p(x) \\propto \\exp\\Big(\\sum_{i<j} J_{ij}(x_i, x_j) + \\sum_i h_i(x_i)\\Big)

so that its one- and two-point marginals match the reweighted, pseudocount-regularised
frequencies of the alignment: persistent-chain stochastic approximation (SAP /
persistent contrastive divergence, Younes 1988; Tieleman 2008) with the fast Potts
Gibbs kernel :data:`ugm_infer.models.potts.potts_gibbs` and an L2 penalty; gradient
ascent on :math:`\\mathcal L(J, h) = \\sum_{i<j,ab} f_{ij}(a,b) J_{ij}(a,b) +
\\sum_{i,a} f_i(a) h_i(a) - \\log Z - \\tfrac{\\gamma}{2} (\\|J\\|^2 + \\|h\\|^2)`, i.e.
:math:`\\Delta J_{ij}(a,b) = \\eta\\,(f_{ij}(a,b) - p_{ij}(a,b) - \\gamma J_{ij}(a,b))`,
:math:`\\Delta h_i(a) = \\eta\\,(f_i(a) - p_i(a) - \\gamma h_i(a))` with the model
marginals :math:`p` estimated on persistent chains (Figliuzzi et al. 2018; Muntoni et
al. 2021).  Convergence is monitored as in those papers by the Pearson correlation
between the data's and the model's connected correlations
(:func:`~ugm_infer.applications.dca.alignment.pearson_connected`).

References
----------
Figliuzzi, M., Barrat-Charlaix, P. and Weigt, M. (2018). How pairwise coevolutionary
models capture the collective residue variability in proteins. Mol. Biol. Evol. 35,
1018-1027 (bmDCA).
Muntoni, A. P., Pagnani, A., Weigt, M. and Zamponi, F. (2021). adabmDCA: adaptive
Boltzmann machine learning for biological sequences. BMC Bioinformatics 22, 528.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ugm_infer._random import categorical_shaped
from ugm_infer.applications.dca.alignment import (
    chain_frequencies,
    check_sequences,
    check_weights,
    frequencies,
    pearson_connected,
    sequence_weights,
)
from ugm_infer.models.potts import potts, potts_gibbs

__all__ = ["DCAResult", "fit_dca", "gradient"]


def gradient(params: Any, fi: Any, fij: Any, pi: Any, pij: Any, *, l2: float = 0.0, l2_fields: float = 0.0) -> dict:
    """Ascent direction of the penalised average log-likelihood in pair coordinates (jittable).

    .. math::  g^J_{ij}(a,b) = f_{ij}(a,b) - p_{ij}(a,b) - \\gamma J_{ij}(a,b)\\ (i \\ne j),\\qquad
               g^h_i(a) = f_i(a) - p_i(a) - \\gamma_h h_i(a),

    with :math:`f` the target and :math:`p` the model frequencies (``(L, q)`` and
    ``(L, L, q, q)``).  Each pair coupling :math:`J_{ij} = J_{ji}^\\top` is one
    parameter: :math:`g^J_{ij}` is the derivative of
    :math:`\\sum_n w_n \\log p(x^n)/M_{\\rm eff} - \\tfrac{\\gamma}{2}\\sum_{i<j}\\|J_{ij}\\|^2
    - \\tfrac{\\gamma_h}{2}\\|h\\|^2` along it, i.e. twice the derivative with respect to
    the entry ``J[i, j, a, b]`` of the symmetric ``(L, L, q, q)`` tensor of
    :func:`ugm_infer.models.potts` (which enters the energy as the mean of ``J[i, j]``
    and ``J[j, i].T``).  The diagonal blocks are zero.
    """
    J, h = params["J"], params["h"]
    length = J.shape[0]
    off = (1.0 - jnp.eye(length, dtype=J.dtype))[:, :, None, None]
    gJ = (jnp.asarray(fij, J.dtype) - jnp.asarray(pij, J.dtype) - l2 * J) * off
    gh = jnp.asarray(fi, h.dtype) - jnp.asarray(pi, h.dtype) - l2_fields * h
    return {"J": gJ, "h": gh}


class DCAResult(NamedTuple):
    """Result of :func:`fit_dca`.

    params
        ``{"J": (L, L, q, q), "h": (L, q)}`` as learned (symmetric ``J``, zero diagonal;
        parameters of :func:`ugm_infer.models.potts` ``(L, q)``).
    chains
        ``(num_chains, L)`` persistent chains at the end.
    fi, fij
        The target (reweighted, pseudocount) frequencies.
    history
        dict of lists: ``"update"``, ``"time"`` (seconds of training, compilation
        excluded), ``"pearson"`` (data vs chains connected correlations).
    meff
        Effective number of sequences :math:`\\sum_n w_n`.
    weights
        ``(N,)`` sequence weights.
    compile_time
        Seconds spent compiling the training chunk.
    """

    params: dict
    chains: np.ndarray
    fi: np.ndarray
    fij: np.ndarray
    history: dict
    meff: float
    weights: np.ndarray
    compile_time: float


def fit_dca(
    sequences: Any,
    num_states: int = 21,
    *,
    rng_key: jax.Array,
    weights: Any = "auto",
    threshold: float = 0.8,
    pseudocount: float | None = None,
    l2: float = 0.0,
    l2_fields: float = 0.0,
    learning_rate: float = 0.05,
    optimizer: Any = None,
    num_chains: int = 1000,
    num_sweeps: int = 10,
    num_updates: int = 1000,
    eval_every: int = 10,
    target_pearson: float | None = None,
    time_limit: float | None = None,
    kernel: Any = None,
    init_params: Any = None,
    callback: Callable | None = None,
) -> DCAResult:
    """Fit a dense Potts model to an alignment by stochastic maximum likelihood (bmDCA).

    Persistent-chain stochastic approximation (SAP / PCD-k; Younes 1988, Tieleman
    2008; the bmDCA loop of Figliuzzi et al. 2018 and adabmDCA, Muntoni et al. 2021):
    every update moves ``num_chains`` persistent chains by ``num_sweeps`` sweeps of
    :data:`~ugm_infer.models.potts.potts_gibbs` at the current parameters, estimates the
    model frequencies :math:`p_i, p_{ij}` on them and takes a step along
    :func:`gradient` (plain gradient ascent with ``learning_rate`` by default, or any
    optax ``optimizer``).  As in bmDCA/adabmDCA the fields start at the
    independent-site model :math:`h_i(a) = \\log f_i(a)`, ``J = 0``, and the chains
    are drawn from it.  Every ``eval_every`` updates the Pearson correlation of the
    connected correlations (target vs chains, :func:`pearson_connected`) is recorded;
    training stops after ``num_updates`` updates, when ``target_pearson`` is reached or
    after ``time_limit`` seconds.  The same model can be trained with the generic
    learners (``ui.learn.sap(ui.models.potts(L, q), kernel=potts_gibbs, ...)`` with a
    positive phase returning the target frequencies); this driver skips their
    autodiff of the particle energies (the statistics are one matrix product).

    Parameters
    ----------
    sequences
        ``(N, L)`` int array or :class:`Alignment`.
    num_states
        ``q`` (21 for proteins).
    rng_key
        A JAX PRNG key.
    weights
        ``"auto"`` (:func:`sequence_weights` at ``threshold``), ``None`` (uniform) or
        an ``(N,)`` array.
    pseudocount
        :math:`\\lambda`; default :math:`1/M_{\\rm eff}` (adabmDCA's default).
    l2, l2_fields
        L2 penalties on the pair couplings and on the fields (see :func:`gradient`).
    kernel
        ``(init_fn, kernel_fn)`` for one chain (default ``potts_gibbs`` with
        ``num_sweeps`` systematic sweeps); it is called once per update.
    init_params
        Optional starting ``{"J", "h"}`` (default: the independent-site model).
    callback
        ``callback(update, elapsed_seconds, pearson)`` after each evaluation.

    Returns
    -------
    :class:`DCAResult`.
    """
    seqs = check_sequences(sequences, num_states)
    _check_settings(num_chains, num_sweeps, num_updates, eval_every, learning_rate, l2, l2_fields)
    w, meff, fi, fij = _target_frequencies(seqs, int(num_states), weights, threshold, pseudocount)
    model = potts(seqs.shape[1], int(num_states), dtype=jnp.int8)
    init_fn, kernel_fn = _resolve_kernel(kernel, model, num_sweeps)
    optimizer = optax.sgd(learning_rate) if optimizer is None else optimizer
    key_chains, key_train = jax.random.split(rng_key)
    carry = _initial_carry(key_chains, model, fi, init_params, optimizer, num_chains)
    chunk = _training_chunk(model, (init_fn, kernel_fn), optimizer, fi, fij, (l2, l2_fields), eval_every)
    stop = (num_updates, target_pearson, time_limit)
    carry, history, compile_time = _run(chunk, key_train, carry, eval_every, stop, callback)
    params = jax.tree.map(np.asarray, carry[0])
    return DCAResult(params, np.asarray(carry[2]), fi, fij, history, meff, w, compile_time)


def _check_settings(num_chains, num_sweeps, num_updates, eval_every, learning_rate, l2, l2_fields) -> None:
    for name, value in (
        ("num_chains", num_chains),
        ("num_sweeps", num_sweeps),
        ("num_updates", num_updates),
        ("eval_every", eval_every),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")
    for name, value in (("learning_rate", learning_rate), ("l2", l2), ("l2_fields", l2_fields)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative number, got {value!r}")


def _target_frequencies(seqs: np.ndarray, q: int, weights: Any, threshold: float, pseudocount: float | None):
    """Sequence weights, ``M_eff`` and the pseudocount frequencies ``(w, meff, fi, fij)`` the model must match."""
    if isinstance(weights, str):
        if weights != "auto":
            raise ValueError(f"`weights` must be 'auto', None or an (N,) array, got {weights!r}")
        w = sequence_weights(seqs, threshold)
    else:
        w = check_weights(weights, seqs.shape[0])
    meff = float(w.sum())
    lam = 1.0 / meff if pseudocount is None else pseudocount
    fi, fij = frequencies(seqs, q, weights=w, pseudocount=lam)
    return w, meff, fi, fij


def _resolve_kernel(kernel: Any, model: Any, num_sweeps: int) -> tuple[Callable, Callable]:
    if kernel is None:
        kernel = (potts_gibbs.init, potts_gibbs.build_kernel(model, "systematic", int(num_sweeps)))
    if not (isinstance(kernel, (tuple, list)) and len(kernel) == 2 and all(callable(f) for f in kernel)):
        raise TypeError("`kernel` must be a pair (init_fn, kernel_fn) acting on one chain {'x': (L,)}")
    return kernel[0], kernel[1]


def _initial_carry(key: jax.Array, model: Any, fi: np.ndarray, init_params: Any, optimizer: Any, num_chains: int) -> tuple:
    """``(params, opt_state, chains)``: the independent-site model (or ``init_params``) and chains drawn from it."""
    length = fi.shape[0]
    if init_params is None:
        h0, q = np.log(fi), fi.shape[1]
        params = {
            "J": jnp.zeros((length, length, q, q), jnp.float32),
            "h": jnp.asarray(h0 - h0.mean(1, keepdims=True)),
        }
    else:
        model.validate_params(init_params)
        params = dict(init_params)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    chains = categorical_shaped(key, jnp.asarray(np.log(fi), jnp.float32), (num_chains, length))
    return params, optimizer.init(params), chains.astype(jnp.int8)


def _training_chunk(model: Any, kernel: tuple, optimizer: Any, fi, fij, penalties: tuple, eval_every: int) -> Callable:
    """Jitted ``chunk(key, carry) -> (carry, pearson)``: ``eval_every`` updates, then the Pearson criterion."""
    init_fn, kernel_fn = kernel
    l2, l2_fields = penalties
    q = fi.shape[1]
    fi_t, fij_t = jnp.asarray(fi, jnp.float32), jnp.asarray(fij, jnp.float32)

    def update(carry, key):
        params, opt_state, chains = carry
        ld = model.logdensity_fn(params)

        def move(k, x):
            state, _ = kernel_fn(k, init_fn({"x": x}, ld), ld)
            return state.position["x"]

        chains = jax.vmap(move)(jax.random.split(key, chains.shape[0]), chains)
        pi, pij = chain_frequencies(chains, q)
        g = gradient(params, fi_t, fij_t, pi, pij, l2=l2, l2_fields=l2_fields)
        updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, g), opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, chains), None

    @jax.jit
    def chunk(key, carry):
        carry, _ = jax.lax.scan(update, carry, jax.random.split(key, eval_every))
        pi, pij = chain_frequencies(carry[2], q)
        return carry, pearson_connected(fi_t, fij_t, pi, pij)

    return chunk


def _run(chunk, key, carry, eval_every: int, stop: tuple, callback) -> tuple:
    """Compile ``chunk`` and run it until a stopping rule holds; ``(carry, history, compile_time)``.

    ``stop = (num_updates, target_pearson, time_limit)``: at most ``num_updates``
    updates, or until the Pearson criterion reaches ``target_pearson``, or after
    ``time_limit`` seconds of training (``None``: no such rule).
    """
    num_updates, target_pearson, time_limit = stop
    t0 = time.perf_counter()
    compiled = chunk.lower(key, carry).compile()
    compile_time = time.perf_counter() - t0
    history: dict = {"update": [], "time": [], "pearson": []}
    elapsed, done, c = 0.0, 0, 0
    while done < num_updates:
        t0 = time.perf_counter()
        carry, pearson = compiled(jax.random.fold_in(key, c), carry)
        pearson = float(pearson)
        elapsed += time.perf_counter() - t0
        done += eval_every
        c += 1
        history["update"].append(done)
        history["time"].append(elapsed)
        history["pearson"].append(pearson)
        if callback is not None:
            callback(done, elapsed, pearson)
        if target_pearson is not None and pearson >= target_pearson:
            break
        if time_limit is not None and elapsed >= time_limit:
            break
    return carry, history, compile_time
