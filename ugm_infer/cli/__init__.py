"""Command-line interface: ``ugm-infer {demo, fit, sample, evaluate}``.

``ugm-infer demo``
    The embedded default: with no data and no options it trains a small RBM on the
    14x14 binary digits bundled in the package (:func:`ugm_infer.datasets.load_digits14`)
    twice, by PCD and by PT-SAP on the same minibatches and the same number of Gibbs
    sweeps, keeps each learner's best model by held-out log-likelihood, diagnoses their
    persistent chains with ArviZ and writes a report folder (``out/demo``): an
    ``index.html`` with learning curves, data beside samples, traces, R-hat and ESS,
    the ladder's swap rates and the metrics; ``metrics.json``; the histories and chains
    as netCDF; the better model. About a minute on 2 CPU cores.
``ugm-infer fit --data FILE``
    Trains a built-in model on a data file (``.npz``/``.npy``/``.csv``/``.txt``, one
    example per row) and writes the same report, plus the saved model
    (``model.json`` + ``params.npz``; reload with ``ui.load_model(DIR)``).  The defaults
    learn on typical binary data; the report compares the model's log-likelihood with
    the uniform and independent-sites models.  The run is checkpointed into
    ``DIR/checkpoint``; Ctrl-C saves it and ``--resume`` continues it.
``ugm-infer sample MODEL_DIR``
    Runs chains of a kernel on a saved model; writes the draws' summary statistics and
    kernel infos as netCDF, the last configurations, trace plots and the plain-language
    mixing diagnosis of :func:`ugm_infer.diagnostics.diagnose`.
``ugm-infer evaluate MODEL_DIR --data FILE``
    Average log-likelihood of a data file under a saved model: exact by enumeration
    when the model is small enough, else AIS (with its standard error); ``--report DIR``
    writes it as a report page too.

Every option can also come from a JSON or TOML file (``--config FILE``; keys are the
long option names, with ``-`` or ``_``); options given on the command line win.
User errors (missing or malformed files, invalid options, models too large for
memory, existing output files) print one line naming the option and exit with code 2,
before any output folder is created; ``--debug`` shows the traceback instead.
Ctrl-C exits with code 130.

The commands live in one module each (:mod:`ugm_infer.cli.train`,
:mod:`ugm_infer.cli.sample`, :mod:`ugm_infer.cli.evaluate`); option checks, output
safety, memory estimates and report writing are shared.
"""

from __future__ import annotations

import argparse
import sys

from ugm_infer.cli._options import (
    KERNELS,
    LEARNERS,
    MODELS,
    OPTIMIZERS,
    SCHEDULES,
    CLIError,
    Parser,
    announce,
    load_config,
)

__all__ = ["CLIError", "KERNELS", "LEARNERS", "MODELS", "OPTIMIZERS", "SCHEDULES", "build_parser", "main"]

COMMANDS = ("demo", "fit", "sample", "evaluate")


def build_parser() -> argparse.ArgumentParser:
    """The ``ugm-infer`` argument parser (errors raise :class:`CLIError`)."""
    from ugm_infer.cli.evaluate import add_evaluate_parser
    from ugm_infer.cli.sample import add_sample_parser
    from ugm_infer.cli.train import add_demo_parser, add_fit_parser

    parser = Parser(
        prog="ugm-infer",
        description="Discrete undirected graphical models in JAX. Run `ugm-infer COMMAND --help` for a command's options.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_demo_parser(sub)
    add_fit_parser(sub)
    add_sample_parser(sub)
    add_evaluate_parser(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` (no command: ``demo``); a ``--config`` file supplies defaults, the command line wins."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["demo", *argv]
    args = parser.parse_args(argv)
    if getattr(args, "config", None):
        sub = parser._subparsers._group_actions[0].choices[args.command]
        cfg = load_config(args.config, sub)
        sub.set_defaults(**cfg)
        args = parser.parse_args(argv)
        if "out" in cfg and args.out == cfg["out"]:
            announce(f"output goes to {args.out} (from --config {args.config})")
    return args


def main(argv=None) -> int:
    """Entry point of the ``ugm-infer`` console script; returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        args = _parse(parser, argv)
        from ugm_infer.cli.evaluate import run_evaluate
        from ugm_infer.cli.sample import run_sample
        from ugm_infer.cli.train import run_demo, run_fit

        commands = {"demo": run_demo, "fit": run_fit, "sample": run_sample, "evaluate": run_evaluate}
        return commands[args.command](args, argv)
    except CLIError as err:
        if debug:
            raise
        print(f"ugm-infer: error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError) as err:
        if debug:
            raise
        print(f"ugm-infer: error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ugm-infer: interrupted", file=sys.stderr)
        return 130
