"""``ugm-infer fit`` and ``ugm-infer demo``: train a built-in model, checkpointing as it goes.

Defaults that learn on typical binary data: PCD with 5 Gibbs sweeps per update, Adam
at a rate of 0.01 decaying as ``0.01 * 1000 / (1000 + t)``, and ``--epochs auto``,
enough epochs for at least 3,000 updates.  The report puts the model's average
log-likelihood beside two references (uniform and independent sites, see
:mod:`ugm_infer.cli._data`) and says in one sentence whether the model learned more
than the independent sites.

Checkpoints: the run is saved in ``OUT/checkpoint/`` at every evaluation (and, on
Ctrl-C, at the last completed step); ``--resume`` continues it with the same options
(``--epochs`` may grow), bit for bit as if it had not stopped.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ugm_infer.cli import _build, _data, _report, _sizes
from ugm_infer.cli._options import (
    HEADER_HELP,
    HEADERS,
    KERNELS,
    LEARNERS,
    MAX_BYTES_HELP,
    MODELS,
    NOT_SETTINGS,
    OPTIMIZERS,
    PROGRESS,
    SCHEDULES,
    CLIError,
    announce,
    auto_or_positive_int,
    byte_count,
    int_at_least,
    nonnegative_int,
    one_of,
    path_text,
    positive_float,
    positive_int,
    unit_interval,
)
from ugm_infer.cli._output import OutputFolder

FIT_DEFAULTS = {
    "learner": "pcd",
    "optimizer": "adam",
    "learning_rate": 0.01,
    "schedule": "robbins_monro",
    "sweeps": 5,
    "epochs": "auto",
    "hidden": 16,
    "out": "out/fit",
}
DEMO_DEFAULTS = {
    "learner": "pcd",
    "optimizer": "sgd",
    "learning_rate": 0.05,
    "schedule": "constant",
    "sweeps": 1,
    "epochs": 30,
    "hidden": 16,
    "out": "out/demo",
}
#: ``--epochs auto`` trains for at least this many updates (and at least 10 epochs)
TARGET_UPDATES = 3000
#: ``--eval-every auto`` evaluates about this many times per run
TARGET_EVALUATIONS = 10
MODEL_FILES = ("model.json", "params.npz")
RUN_FILE = "run.json"
CHECKPOINT = "checkpoint"
RUN_FORMAT = "ugm_infer.cli.run/1"
# marginals are kept in model.json (for `evaluate`'s reference values) up to this many numbers
_MAX_STORED_MARGINALS = 100_000


# ----------------------------------------------------------------------------------
# parsers
# ----------------------------------------------------------------------------------
def _add_training_options(p, defaults: dict) -> None:
    g = p.add_argument_group("training")
    add = g.add_argument
    add("--learner", type=one_of(LEARNERS), default=defaults["learner"], metavar="NAME", help=", ".join(LEARNERS))
    add("--kernel", type=one_of(KERNELS[:2]), default="gibbs", metavar="NAME", help="for --learner sap: gibbs or metropolis")
    add("--optimizer", type=one_of(OPTIMIZERS), default=defaults["optimizer"], metavar="NAME", help=", ".join(OPTIMIZERS))
    add("--schedule", type=one_of(SCHEDULES), default=defaults["schedule"], metavar="NAME", help=", ".join(SCHEDULES))
    add("--learning-rate", type=positive_float, default=defaults["learning_rate"], metavar="LR", help="initial rate")
    add("--decay-offset", type=positive_float, default=1000.0, metavar="B", help="the rate decays as lr * B / (B + t)")
    add("--constant-steps", type=positive_int, default=1000, metavar="N", help="steps at the constant rate before decaying")
    add(
        "--epochs",
        type=auto_or_positive_int,
        default=defaults["epochs"],
        metavar="N",
        help=f"passes over the data; auto: enough for {TARGET_UPDATES} updates (at least 10 epochs)",
    )
    add("--batch-size", type=positive_int, default=100, metavar="N", help="examples per update (at most the data size)")
    add("--num-chains", type=positive_int, default=100, metavar="N", help="persistent chains / particles")
    add("--sweeps", type=positive_int, default=defaults["sweeps"], metavar="N", help="Gibbs sweeps per update; k for cd")
    add("--num-betas", type=int_at_least(2), default=10, metavar="N", help="inverse temperatures (trans_sap, pt_sap)")
    add("--beta-min", type=unit_interval, default=0.5, metavar="BETA", help="smallest inverse temperature")
    add(
        "--eval-every",
        type=auto_or_positive_int,
        default="auto",
        metavar="N",
        help=f"epochs between evaluations and checkpoints; auto: about {TARGET_EVALUATIONS} per run",
    )
    add("--hidden", type=positive_int, default=defaults["hidden"], metavar="N", help="hidden units (rbm, semi_rbm)")
    add("--seed", type=nonnegative_int, default=0, metavar="N", help="random seed")
    add("--progress", type=one_of(PROGRESS), default="auto", metavar="WHEN", help="progress bar: auto, on or off")
    r = p.add_argument_group("output")
    r.add_argument("--out", type=path_text, default=defaults["out"], metavar="DIR", help="output folder")
    r.add_argument("--resume", action="store_true", help="continue the run saved in --out (same options; --epochs may grow)")
    r.add_argument("--force", action="store_true", help="overwrite the files of an earlier run in --out and start over")
    r.add_argument("--config", type=path_text, metavar="FILE", help="JSON or TOML file of options (command line wins)")


def add_demo_parser(sub) -> None:
    demo = sub.add_parser(
        "demo",
        help="train a small RBM on bundled digits and write a report folder",
        description="Train an RBM (196 visible x 16 hidden) on the bundled 14x14 binary digits by PCD, with exact "
        "log-likelihoods, and write a report folder.",
    )
    demo.add_argument("--quick", action="store_true", help="500 training images")
    _add_training_options(demo, DEMO_DEFAULTS)


def add_fit_parser(sub) -> None:
    fit = sub.add_parser(
        "fit",
        help="train a built-in model on a data file",
        usage="ugm-infer fit --data FILE [options]",
        description="Train a built-in model on a data file (one example per row) and write a report folder with the "
        "saved model. Checkpoints are written into OUT/checkpoint; Ctrl-C saves the run, --resume continues it.",
    )
    req = fit.add_argument_group("required")
    req.add_argument(
        "--data", type=path_text, metavar="FILE", help="training data (.npz .npy .csv .txt), one example per row"
    )
    g = fit.add_argument_group("data")
    add = g.add_argument
    add("--data-key", type=path_text, metavar="NAME", help="array inside an .npz (default: 'train' or its only array)")
    add("--eval-data", type=path_text, metavar="FILE", help="held-out data (default: the .npz's 'test' array if any)")
    add("--eval-key", type=path_text, metavar="NAME", help="array inside --eval-data when it is an .npz")
    add("--header", type=one_of(HEADERS), default="auto", metavar="WHEN", help=HEADER_HELP)
    add("--unpack-bits", type=positive_int, metavar="N", help="rows are np.packbits-packed: N bits per row")
    add("--max-examples", type=positive_int, metavar="N", help="use only the first N examples")
    m = fit.add_argument_group("model")
    m.add_argument("--model", type=one_of(MODELS), default="rbm", metavar="NAME", help=", ".join(MODELS))
    m.add_argument("--num-states", type=int_at_least(2), default=2, metavar="Q", help="states per site (potts)")
    m.add_argument("--max-model-bytes", type=byte_count, metavar="BYTES", help=MAX_BYTES_HELP)
    _add_training_options(fit, FIT_DEFAULTS)


# ----------------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------------
def run_demo(args, argv: list[str]) -> int:
    from ugm_infer.datasets import load_digits14

    if not 1 <= args.hidden <= 24:
        raise CLIError("--hidden must be between 1 and 24 (exact likelihood enumerates 2^hidden states)")
    data = load_digits14()
    train, test = data["train"], data["test"]
    if args.quick:
        train = train[:500]
    kwargs = {"num_visible": int(train.shape[1]), "num_hidden": args.hidden}
    desc = f"{len(train)} bundled binary 14x14 digits ({len(test)} held out)"
    return _train(args, argv, train, test, "rbm", kwargs, f"demo: RBM 196x{args.hidden}", desc)


def run_fit(args, argv: list[str]) -> int:
    if not args.data:
        raise CLIError("--data is required (an .npz, .npy, .csv or .txt file, one example per row)")
    read = dict(unpack_bits=args.unpack_bits, header=args.header)
    train = _data.read_data(args.data, key=args.data_key, flag="--data", **read)
    test = None
    if args.eval_data:
        test = _data.read_data(args.eval_data, key=args.eval_key, flag="--eval-data", **read)
    elif args.data.endswith(".npz") and args.data_key is None:
        with np.load(args.data, allow_pickle=False) as f:
            has_test = "test" in f.files and "train" in f.files
        if has_test:
            test = _data.read_data(args.data, key="test", flag="--data", **read)
    if args.max_examples:
        train = train[: args.max_examples]
        test = None if test is None else test[: args.max_examples]
    if test is not None and test.shape[1] != train.shape[1]:
        raise CLIError(f"--eval-data has {test.shape[1]} columns but --data has {train.shape[1]}")
    family, kwargs = _model_spec(args, int(train.shape[1]))
    desc = f"{os.path.basename(args.data)}: {train.shape[0]} examples x {train.shape[1]} variables"
    return _train(args, argv, train, test, family, kwargs, f"fit {family}", desc)


def _model_spec(args, num_columns: int) -> tuple[str, dict]:
    if args.model in ("rbm", "semi_rbm"):
        return args.model, {"num_visible": num_columns, "num_hidden": args.hidden}
    if args.model == "potts":
        return "potts", {"num_sites": num_columns, "num_states": args.num_states}
    if args.model == "ising":
        return "ising", {"num_spins": num_columns}
    return "boltzmann_machine", {"num_units": num_columns}


# ----------------------------------------------------------------------------------
# the training run
# ----------------------------------------------------------------------------------
class _Plan:
    """Sizes of the run: batch, steps per epoch, epochs, evaluation and checkpoint spacing."""

    def __init__(self, args, num_examples: int):
        self.batch_size = min(args.batch_size, num_examples)
        self.steps_per_epoch = num_examples // self.batch_size
        epochs = args.epochs
        if epochs == "auto":
            epochs = max(10, math.ceil(TARGET_UPDATES / self.steps_per_epoch))
        self.epochs = int(epochs)
        every = args.eval_every
        self.eval_every = max(1, self.epochs // TARGET_EVALUATIONS) if every == "auto" else min(int(every), self.epochs)
        self.total_steps = self.epochs * self.steps_per_epoch
        self.checkpoint_every = self.eval_every * self.steps_per_epoch


def _settings(args, train: np.ndarray) -> dict:
    return {
        "format": RUN_FORMAT,
        "command": args.command,
        "settings": {k: v for k, v in sorted(vars(args).items()) if k not in NOT_SETTINGS},
        "data": {"shape": list(train.shape), "sha1": hashlib.sha1(np.ascontiguousarray(train).tobytes()).hexdigest()},
    }


def _checkpoint_step(folder: Path) -> int | None:
    """The step of the checkpoint in ``folder`` (``None`` if there is none readable)."""
    try:
        with open(folder / "checkpoint.json") as f:
            return int(json.load(f)["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _check_resume(out: Path, run: dict, plan: _Plan) -> int:
    """Refuse ``--resume`` when there is nothing to resume or the options differ; the checkpoint's step."""
    step = _checkpoint_step(out / CHECKPOINT)
    if step is None:
        raise CLIError(f"--resume: no checkpoint in {out / CHECKPOINT} to continue; run without --resume to start")
    try:
        with open(out / RUN_FILE) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        raise CLIError(f"--resume: {out / RUN_FILE} is missing or damaged; start over with --force") from None
    if not isinstance(saved, dict) or saved.get("format") != RUN_FORMAT:
        raise CLIError(f"--resume: {out / RUN_FILE} is not a ugm-infer run file; start over with --force")
    old, new = saved.get("settings", {}), run["settings"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            raise CLIError(
                f"--{key.replace('_', '-')} is {new.get(key)!r} but the run in {out} used {old.get(key)!r}; "
                "resume with the same options (or start over with --force)"
            )
    if saved.get("data") != run["data"]:
        raise CLIError(f"--data: the data differ from those of the run in {out}; resume with the same data")
    if step > plan.total_steps:
        raise CLIError(
            f"--epochs {plan.epochs}: the run in {out} is already at epoch {step / plan.steps_per_epoch:g}; "
            "give more --epochs to continue it"
        )
    return step


def _resume_command(argv: list[str], epochs: int | None = None) -> str:
    """The command line that continues this run (with ``epochs`` epochs in total, if given)."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--force", "--resume") or (epochs is not None and a.startswith("--epochs=")):
            continue
        elif epochs is not None and a == "--epochs":
            skip = True
        else:
            kept.append(a)
    if not kept or kept[0].startswith("-"):
        kept = ["demo", *kept]
    extra = ["--resume"] + ([] if epochs is None else ["--epochs", str(epochs)])
    return shlex.join(["ugm-infer", *kept, *extra])


class _Run(NamedTuple):
    """Everything a checked training run needs (made before anything is written)."""

    args: Any
    argv: list
    train: np.ndarray
    test: np.ndarray | None
    family: str
    kwargs: dict
    title: str
    data_desc: str
    model: Any
    learner: Any
    var: str
    values: np.ndarray
    plan: _Plan
    output: OutputFolder
    resumed_from: int | None


def _train(args, argv, train, test, family: str, kwargs: dict, title: str, data_desc: str) -> int:
    """Check everything, train with checkpoints, save the model and write the report."""
    run = _prepare(args, argv, train, test, family, kwargs, title, data_desc)
    run.output.create()
    if run.resumed_from is None:
        run.output.write_text(RUN_FILE, json.dumps(_settings(args, train), indent=2))
    outcome = _fit(run)
    if isinstance(outcome, int):  # interrupted
        return outcome
    _save_and_report(run, *outcome)
    return 0


def _prepare(args, argv, train, test, family, kwargs, title, data_desc) -> _Run:
    """Every check of a training run: options, sizes, values, the output folder, a run to resume."""
    from ugm_infer.io import build_model

    if args.resume and args.force:
        raise CLIError("--resume and --force: choose one (continue the saved run, or start over)")
    _sizes.check_training(
        family,
        kwargs,
        optimizer=args.optimizer,
        num_chains=args.num_chains,
        replicas=_build.replicas(args),
        data_shape=train.shape,
        limit=getattr(args, "max_model_bytes", None),
    )
    model = build_model(family, **kwargs)
    learner = _build.learner(args, model)
    var = learner.visible[0] if learner.visible else next(iter(model.variables))
    domain = model.variables[var]
    _data.check_values(train, domain, family, "--data")
    if test is not None:
        _data.check_values(test, domain, family, "--eval-data")
    plan = _Plan(args, len(train))
    out = Path(args.out)
    output = OutputFolder(args.out, (*_report.TRAINING_FILES, *MODEL_FILES, RUN_FILE, CHECKPOINT + "/"), force=args.force)
    resumed_from = None
    if args.resume:
        output.check(allowed=output.names)
        resumed_from = _check_resume(out, _settings(args, train), plan)
    else:
        step = _checkpoint_step(out / CHECKPOINT)
        if step is not None and not args.force:
            raise CLIError(
                f"--out: {out} holds a run (checkpoint at step {step}); continue it with --resume, "
                "or start over with --force"
            )
        output.check()
    values = _data.domain_values(domain)
    return _Run(
        args, argv, train, test, family, kwargs, title, data_desc, model, learner, var, values, plan, output, resumed_from
    )


def _diverged(args, at: str, what: str) -> CLIError:
    return CLIError(
        f"--learning-rate {args.learning_rate:g}: training diverged{at} (non-finite {what}); nothing was saved; "
        "lower --learning-rate and start again"
    )


def _fit(run: _Run):
    """``ui.fit`` with checkpoints: ``(result, seconds)``, or the exit code after Ctrl-C."""
    import jax

    import ugm_infer as ui

    args, plan, out = run.args, run.plan, run.output.path
    key = jax.random.key(args.seed)
    scale = 0.01 if run.family in ("rbm", "semi_rbm") else 0.1
    data_init = {"data": run.train} if run.family in ("rbm", "semi_rbm") else {}
    params = run.model.init_params(key, scale, **data_init)
    print(
        f"ugm-infer: {run.title}: {run.data_desc}; learner {args.learner} ({_learning(args)}), {plan.epochs} epochs "
        f"({plan.total_steps} updates), batch {plan.batch_size}; checkpoints in {out / CHECKPOINT}"
    )
    if run.resumed_from is not None:
        announce(f"resuming the run in {out} from step {run.resumed_from} of {plan.total_steps}")
    diverged = getattr(importlib.import_module("ugm_infer.fit"), "FitDiverged", None)
    t0 = time.perf_counter()
    try:
        result = ui.fit(
            run.learner,
            jax.random.fold_in(key, 1),
            {run.var: run.train},
            params=params,
            num_epochs=plan.epochs,
            batch_size=plan.batch_size,
            eval_every=plan.eval_every,
            eval_fn="auto",
            eval_data=None if run.test is None else {run.var: run.test},
            progress="auto" if args.progress == "auto" else args.progress == "on",
            checkpoint_dir=str(out / CHECKPOINT),
            checkpoint_every=plan.checkpoint_every,
            resume=run.resumed_from is not None,
        )
    except KeyboardInterrupt as err:
        return _interrupted(err, out, plan, run.argv, run.output, fresh=run.resumed_from is None)
    except Exception as err:
        if run.resumed_from is None:
            run.output.discard(extra=[CHECKPOINT])
        # a non-finite value met by an evaluation is divergence too
        nonfinite = isinstance(err, ValueError) and ("NaN" in str(err) or "inf" in str(err))
        if (diverged is not None and isinstance(err, diverged)) or nonfinite:
            raise _diverged(args, f" at step {err.step}" if hasattr(err, "step") else "", "parameters") from None
        raise
    seconds = time.perf_counter() - t0
    finite_params = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(result.params))
    finite_metrics = all(math.isfinite(v) for v in _final_metrics(result).values())
    if not (finite_params and finite_metrics):
        if run.resumed_from is None:
            run.output.discard(extra=[CHECKPOINT])
        raise _diverged(args, "", "parameters" if not finite_params else "log-likelihood")
    return result, seconds


def _learning(args) -> str:
    return f"{args.optimizer}, {args.schedule}, lr {args.learning_rate:g}"


def _final_metrics(result) -> dict[str, float]:
    ev = result.history.get("evaluations", {})
    return {k: float(np.asarray(ev[k])[-1]) for k in ev if k.startswith(("train_", "eval_")) and k != "eval_seconds"}


def _save_and_report(run: _Run, result, seconds: float) -> None:
    """Save the model (with the training marginals, for `evaluate`'s references) and write the report."""
    from ugm_infer.io import save_model

    args, plan, out = run.args, run.plan, run.output.path
    marginals = _data.site_marginals(run.train, run.values)
    sets = {"train": run.train} if run.test is None else {"train": run.train, "eval": run.test}
    reference = _data.references(marginals, run.values, sets)
    info = {"learner": args.learner, "num_train": int(len(run.train)), "seconds": seconds}
    if marginals.size <= _MAX_STORED_MARGINALS:
        info["train_site_values"] = run.values.tolist()
        info["train_site_marginals"] = np.round(marginals, 8).tolist()
    save_model(out, run.family, run.kwargs, result.params, **info)
    ev = result.history.get("evaluations", {})
    final = _final_metrics(result)
    kind = next((k for k in ("log_likelihood", "pseudo_log_likelihood") if f"train_{k}" in ev), None)
    sentence = _report.verdict(final, reference, kind)
    resumed = "" if run.resumed_from is None else f" (resumed from step {run.resumed_from})"
    rows = [
        ("model", f"{run.family} {run.kwargs}"),
        ("data", run.data_desc),
        ("learner", f"{args.learner} ({_learning(args)})"),
        ("epochs / batch", f"{plan.epochs} ({plan.total_steps} updates) / {plan.batch_size}"),
        ("time", f"{seconds:.1f} s{resumed}"),
        *(_report.likelihood_rows(final, reference, kind) if kind else []),
        ("verdict", sentence),
    ]
    metrics = {
        "title": run.title,
        "data": run.data_desc,
        "model": {"family": run.family, **run.kwargs},
        "learner": args.learner,
        "optimizer": args.optimizer,
        "schedule": args.schedule,
        "learning_rate": args.learning_rate,
        "epochs": plan.epochs,
        "updates": plan.total_steps,
        "batch_size": plan.batch_size,
        "num_chains": args.num_chains,
        "seed": args.seed,
        "seconds": seconds,
        "resumed_from_step": run.resumed_from,
        "final": final,
        "reference": reference,
        "verdict": sentence,
        "evaluations": {k: [float(x) for x in np.asarray(v)] for k, v in ev.items()},
    }
    num_columns = run.train.shape[1]
    side = int(round(num_columns**0.5))
    square = side * side == num_columns and side >= 4 and len(run.values) == 2
    _report.write_training_report(
        run.output,
        title=run.title,
        rows=rows,
        metrics=metrics,
        result=result,
        learner_name=args.learner,
        var=run.var,
        image_shape=(side, side) if square else None,
        reload_hint=json.dumps(str(out)),
        model_files=list(MODEL_FILES),
    )
    print(f"to train longer: {_resume_command(run.argv, 2 * plan.epochs)}")


def _interrupted(err: BaseException, out: Path, plan: _Plan, argv, output: OutputFolder, fresh: bool) -> int:
    """Ctrl-C during training: say where the run is saved and how to continue it."""
    saved = _checkpoint_step(out / CHECKPOINT)
    if saved is None:
        if fresh:
            output.discard(extra=[CHECKPOINT])
        print("ugm-infer: interrupted before the first checkpoint; nothing was saved", file=sys.stderr)
        return 130
    step = getattr(err, "step", None)
    lost = "" if step is None or step == saved else f" (steps after {saved} are lost)"
    print(
        f"ugm-infer: interrupted; the run is saved at step {saved} of {plan.total_steps} in {out / CHECKPOINT}{lost}",
        file=sys.stderr,
    )
    print(f"ugm-infer: continue it with: {_resume_command(argv)}", file=sys.stderr)
    return 130
