"""Option parsing shared by the commands: value checks, the parser class, config files.

Every option value is checked when it is parsed (on the command line or from a config
file), so a bad value stops the command before any file is read or written.  Errors
are :class:`CLIError`: one line naming the flag, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


MODELS = ("rbm", "semi_rbm", "boltzmann_machine", "ising", "potts")
LEARNERS = (
    "pcd",
    "cd",
    "sap",
    "trans_sap",
    "pt_sap",
    "exact_ml",
    "pseudo_likelihood",
    "mcmc_mle",
    "pf_mcmc_mle",
    "psmc",
    "smc",
)
KERNELS = ("gibbs", "metropolis", "tempered_transitions", "parallel_tempering")
SCHEDULES = ("constant", "robbins_monro", "constant_then_robbins_monro")
OPTIMIZERS = ("sgd", "momentum", "adam")
METHODS = ("auto", "exact", "ais")
HEADERS = ("auto", "yes", "no")
PROGRESS = ("auto", "on", "off")

# options that only steer where and how a command runs, never what it computes
HEADER_HELP = "CSV/text header line: auto (detect), yes or no"
MAX_BYTES_HELP = "largest model allowed (default: UGM_MAX_MODEL_BYTES or 1 GiB)"
NOT_SETTINGS = (
    "out",
    "force",
    "resume",
    "epochs",
    "eval_every",
    "progress",
    "config",
    "command",
    "debug",
    "max_model_bytes",
)


# ----------------------------------------------------------------------------------
# value checks (argparse `type=` functions; they also check config-file values)
# ----------------------------------------------------------------------------------
def _bad(message: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(message)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def int_at_least(minimum: int) -> Callable[[Any], int]:
    """An integer ``>= minimum``."""

    def check(value: Any) -> int:
        number = _as_int(value)
        if number is None or number < minimum:
            kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
            raise _bad(f"must be {kind}, got {value!r}")
        return number

    check.__name__ = f"int_at_least_{minimum}"
    return check


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def positive_float(value: Any) -> float:
    """A finite number ``> 0`` (learning rates, offsets)."""
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise _bad(f"must be a positive finite number, got {value!r}")
    return number


def unit_interval(value: Any) -> float:
    """A number in ``[0, 1)`` (the smallest inverse temperature)."""
    number = _as_float(value)
    if number is None or not 0.0 <= number < 1.0:
        raise _bad(f"must be a number in [0, 1), got {value!r}")
    return number


def auto_or_positive_int(value: Any) -> str | int:
    """``"auto"`` or a positive integer."""
    if value == "auto":
        return "auto"
    number = _as_int(value)
    if number is None or number < 1:
        raise _bad(f"must be a positive integer or 'auto', got {value!r}")
    return number


def one_of(options: tuple[str, ...]) -> Callable[[Any], str]:
    """One of ``options`` (a string)."""

    def check(value: Any) -> str:
        if value not in options:
            raise _bad(f"must be one of {', '.join(options)}, got {value!r}")
        return value

    check.__name__ = "one_of"
    return check


def path_text(value: Any) -> str:
    """A non-empty path."""
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"must be a non-empty path, got {value!r}")
    return value


def byte_count(value: Any) -> int:
    """A positive number of bytes (``2000000000`` or ``2e9``)."""
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number < 1 or number != int(number):
        raise _bad(f"must be a positive whole number of bytes, got {value!r}")
    return int(number)


# ----------------------------------------------------------------------------------
# parser and help
# ----------------------------------------------------------------------------------
class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (unless it is ``None`` or already in the help text)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" not in text
            and default is not None
            and default is not argparse.SUPPRESS
            and default is not False
            and action.option_strings
            and not action.required
        ):
            text += " (default: %(default)s)"
        return text


def _reword(message: str) -> str:
    """argparse's ``argument --x: must be ...`` as ``--x must be ...``."""
    match = re.match(r"argument (\S+?)(?:/\S+)?: (.*)", message, flags=re.S)
    if match:
        flag, rest = match.groups()
        return f"{flag} {rest}" if rest.startswith("must ") else f"{flag}: {rest}"
    return message


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one-line :class:`CLIError` s (exit code 2)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise CLIError(_reword(message))


def add_saved_model_options(parser: argparse.ArgumentParser, force_help: str) -> None:
    """``MODEL_DIR`` and the options every command on a saved model has: ``--force``, ``--max-model-bytes``, ``--config``."""
    parser.add_argument(
        "model_dir", type=path_text, metavar="MODEL_DIR", help="folder written by `ugm-infer fit` (required)"
    )
    parser.add_argument("--force", action="store_true", help=force_help)
    parser.add_argument("--max-model-bytes", type=byte_count, metavar="BYTES", help=MAX_BYTES_HELP)
    parser.add_argument("--config", type=path_text, metavar="FILE", help="JSON or TOML file of options (command line wins)")


# ----------------------------------------------------------------------------------
# config files
# ----------------------------------------------------------------------------------
def load_config(path: str, parser: argparse.ArgumentParser) -> dict:
    """Option values from a JSON or TOML file, checked like command-line values.

    Keys are long option names (``-`` or ``_``).  ``force`` cannot come from a file (a
    config file must not overwrite files silently); an ``out`` from a file is printed on
    screen by the caller.
    """
    if os.path.isdir(path):
        raise CLIError(f"--config: {path} is a folder, not a JSON or TOML file")
    if not os.path.isfile(path):
        raise CLIError(f"--config: file not found: {path}")
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as f:
                cfg = tomllib.load(f)
        else:
            with open(path) as f:
                cfg = json.load(f)
    except Exception as err:  # noqa: BLE001 - any parse error is a user error here
        raise CLIError(f"--config: cannot parse {path}: {str(err).splitlines()[0] if str(err) else err!r}") from None
    if not isinstance(cfg, dict):
        raise CLIError(f"--config: {path} must hold a table/object of option names")
    actions = {a.dest: a for a in parser._actions if a.option_strings}
    out = {}
    for key, value in cfg.items():
        dest = str(key).replace("-", "_")
        flag = "--" + dest.replace("_", "-")
        if dest in ("force", "resume"):
            raise CLIError(f"--config: {flag} cannot come from a config file ({path}); give it on the command line")
        if dest not in actions or dest in ("config", "help", "debug"):
            raise CLIError(f"--config: unknown option {key!r} in {path}")
        action = actions[dest]
        if isinstance(action, argparse._StoreTrueAction):
            if not isinstance(value, bool):
                raise CLIError(f"{flag} (from --config {path}) must be true or false, got {value!r}")
        elif action.type is not None:
            try:
                value = action.type(value)
            except argparse.ArgumentTypeError as err:
                raise CLIError(f"{flag} (from --config {path}) {err}") from None
        out[dest] = value
    return out


def announce(message: str) -> None:
    """A line on stderr that the user should see (not part of the command's output)."""
    print(f"ugm-infer: {message}", file=sys.stderr)
