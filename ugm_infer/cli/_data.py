"""Data for the commands: reading files, checking values, and reference log-likelihoods.

The reference values put a model's average log-likelihood in context:

* **uniform** -- every configuration equally likely: ``-D log q`` nats per example for
  ``D`` sites with ``q`` states;
* **independent sites** -- each site drawn from its own marginal, estimated from the
  training data with add-one smoothing, ``p_i(a) = (n_i(a) + 1) / (N + q)``.

A model that learned something scores above both (the pseudo-log-likelihood of an
independent-sites model equals its log-likelihood, so the same numbers serve as
references for a pseudo-log-likelihood).
"""

from __future__ import annotations

import numpy as np

from ugm_infer.cli._options import CLIError

HEADER_CHOICES = {"auto": None, "yes": True, "no": False}


def read_data(path: str, *, key: str | None, unpack_bits: int | None, header: str, flag: str) -> np.ndarray:
    """``ugm_infer.io.load_data`` with its errors as one-line :class:`CLIError` s naming ``flag``."""
    from ugm_infer.io import load_data

    try:
        return load_data(path, key=key, unpack_bits=unpack_bits, header=HEADER_CHOICES[header])
    except FileNotFoundError as err:
        raise CLIError(f"{flag}: {err}") from None
    except ValueError as err:
        raise CLIError(
            f"{flag}: {str(err).replace('header=True', '--header yes').replace('unpack_bits', '--unpack-bits')}"
        ) from None


def domain_values(domain) -> np.ndarray:
    """The values a site of ``domain`` takes, in order."""
    return np.asarray(domain.values, dtype=np.float64)


def check_values(data: np.ndarray, domain, family: str, flag: str) -> None:
    """Every entry of ``data`` must be one of the domain's values."""
    values = domain_values(domain)
    if np.all(np.isin(data, values)):
        return
    bad = data[~np.isin(data, values)].flat[0]
    if family == "potts" or len(values) > 2:
        q = len(values)
        raise CLIError(f"{flag}: a potts model with --num-states {q} needs integers in [0, {q - 1}] (found {bad:g})")
    if values[0] == -1:
        hint = "for 0/1 data use --model boltzmann_machine"
        raise CLIError(f"{flag}: an {family} model needs spins in {{-1, +1}} (found {bad:g}; {hint})")
    raise CLIError(f"{flag}: a {family} model needs binary values in {{0, 1}} (found {bad:g})")


def site_marginals(data: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(D, q)`` add-one-smoothed marginals of every site over ``values``."""
    counts = np.stack([(data == v).sum(axis=0) for v in values], axis=-1).astype(np.float64)
    return (counts + 1.0) / (len(data) + len(values))


def independent_log_likelihood(data: np.ndarray, marginals: np.ndarray, values: np.ndarray) -> float:
    """Average log-likelihood of ``data`` under independent sites with ``marginals``."""
    logp = np.log(marginals)
    index = np.searchsorted(values, data).clip(0, len(values) - 1)
    return float(np.take_along_axis(logp[None], index[..., None], axis=-1)[..., 0].sum(axis=1).mean())


def references(marginals: np.ndarray, values: np.ndarray, sets: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """``{"uniform": {name: ll}, "independent_sites": {name: ll}}`` for each data set."""
    num_sites = marginals.shape[0]
    uniform = -num_sites * float(np.log(len(values)))
    return {
        "uniform": {name: uniform for name in sets},
        "independent_sites": {name: independent_log_likelihood(x, marginals, values) for name, x in sets.items()},
    }


def load_saved_model(folder: str, max_bytes: int | None):
    """``ui.load_model`` with its errors as one-line :class:`CLIError` s."""
    import ugm_infer as ui

    try:
        return ui.load_model(folder, max_bytes=max_bytes)
    except (FileNotFoundError, NotADirectoryError) as err:
        raise CLIError(f"MODEL_DIR: {err}") from None
    except ValueError as err:
        raise CLIError(f"MODEL_DIR: {err}".replace("max_bytes=", "--max-model-bytes")) from None


def visible_variable(model) -> str:
    """The variable data files hold: the model's only variable, or ``v`` (visible units)."""
    names = list(model.variables)
    if len(names) == 1:
        return names[0]
    if "v" in names:
        return "v"
    raise CLIError(f"MODEL_DIR: cannot tell the visible variable of a model with variables {names}")
