"""``ui.sample`` compiles once per (kernel, shapes, dtypes) and reuses the compiled run.

Counted with ``jax.log_compiles``: the XLA compilations of ``ui.sample``'s run
(``jit(run)``) while calling it repeatedly with freshly built algorithms, new
parameter values, new keys and an inline ``trace_fn``.
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp

import ugm_infer as ui


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.names = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Compiling "):
            self.names.append(message.split()[1])


def _count_runs(calls):
    handler = _Compiles()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            calls()
    finally:
        logger.removeHandler(handler)
    return handler.names.count("jit(run)")


def test_sample_compiles_once_across_calls_and_parameter_values():
    model = ui.models.lattice_ising(6, 6)
    x0 = model.random_state(jax.random.key(0), 3)

    def calls():
        for i, J in enumerate((0.2, 0.3, 0.4)):
            params = model.init_params(J=J)
            result = ui.sample(
                jax.random.key(i), ui.kernels.gibbs(model, params), x0, 4, trace_fn=lambda state, info: info.num_changed
            )
            jax.block_until_ready(result.final_state)

    assert _count_runs(calls) == 1
    # a new shape is a new program
    x1 = model.random_state(jax.random.key(1), 5)
    assert _count_runs(lambda: ui.sample(jax.random.key(0), ui.kernels.gibbs(model, model.init_params()), x1, 4)) == 1


def test_parameters_are_arguments_not_constants():
    # the same compiled run gives each parameter value its own distribution
    model = ui.models.boltzmann_machine(5)
    x0 = model.random_state(jax.random.key(0), 400)
    strong = {"W": jnp.zeros((5, 5)), "h": jnp.full(5, 3.0)}
    weak = {"W": jnp.zeros((5, 5)), "h": jnp.full(5, -3.0)}
    up = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, strong), x0, 2).states["s"]
    down = ui.sample(jax.random.key(1), ui.kernels.gibbs(model, weak), x0, 2).states["s"]
    assert float(jnp.mean(up)) > 0.9 and float(jnp.mean(down)) < 0.1
