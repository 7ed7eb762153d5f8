"""``ugm-infer fit`` and ``ugm-infer demo``: train built-in models, checkpointing as they go.

Defaults that learn on typical binary data: PCD with 5 Gibbs sweeps per update, Adam
at a rate of 0.01 decaying as ``0.01 * 1000 / (1000 + t)``, and ``--epochs auto``,
enough epochs for at least 3,000 updates.  The report puts the model's average
log-likelihood beside two references (uniform and independent sites, see
:mod:`ugm_infer.cli._data`) and says in one sentence whether the model learned more
than the independent sites.

The demo trains the bundled digit RBM with PCD and with PT-SAP side by side: the same
initial parameters and key (so the same minibatches in the same order), and the same
number of Gibbs sweeps per update (PCD-k with ``k`` = the number of temperatures).

With held-out data, the model kept is the one with the best held-out
log-likelihood (:mod:`ugm_infer.cli._best`); the demo saves the better of its two.

Checkpoints: the run is saved in ``OUT/checkpoint/`` (the demo: one folder per learner)
at every evaluation (and, on Ctrl-C, at the last completed step); ``--resume``
continues it with the same options (``--epochs`` may grow), bit for bit as if it had
not stopped.
"""

from __future__ import annotations

import argparse
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

from ugm_infer.cli import _best, _build, _chains, _data, _report, _sizes
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
    "num_betas": 10,
    "beta_min": 0.5,
    "hidden": 16,
    "out": "out/fit",
}
#: the demo trains PCD and PT-SAP side by side; PCD makes as many Gibbs sweeps per
#: update as PT-SAP has temperatures (one sweep each), so both spend the same budget
DEMO_DEFAULTS = {
    "optimizer": "sgd",
    "learning_rate": 0.1,
    "schedule": "constant",
    "epochs": 50,
    "num_betas": 5,
    "beta_min": 0.8,
    "hidden": 16,
    "out": "out/demo",
}
DEMO_LEARNERS = ("pcd", "pt_sap")
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
    if "learner" in defaults:  # the demo's learners are fixed (DEMO_LEARNERS)
        add("--learner", type=one_of(LEARNERS), default=defaults["learner"], metavar="NAME", help=", ".join(LEARNERS))
        sap_kernel = "for --learner sap: gibbs or metropolis"
        add("--kernel", type=one_of(KERNELS[:2]), default="gibbs", metavar="NAME", help=sap_kernel)
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
    if "sweeps" in defaults:
        add("--sweeps", type=positive_int, default=defaults["sweeps"], metavar="N", help="Gibbs sweeps per update; k for cd")
    betas_help = "inverse temperatures (trans_sap, pt_sap)" if "learner" in defaults else "inverse temperatures of PT-SAP"
    add("--num-betas", type=int_at_least(2), default=defaults["num_betas"], metavar="N", help=betas_help)
    add("--beta-min", type=unit_interval, default=defaults["beta_min"], metavar="BETA", help="smallest inverse temperature")
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
        help="compare PCD and PT-SAP on a small RBM of bundled digits; write a report folder",
        description="Train an RBM (196 visible x 16 hidden) on the bundled 14x14 binary digits twice, by PCD and by "
        "PT-SAP, from the same initial parameters, on the same minibatches and with the same number of Gibbs sweeps "
        "per update (PCD makes --num-betas sweeps; PT-SAP one at each of its --num-betas temperatures), with exact "
        "log-likelihoods; keep each learner's best model by held-out log-likelihood, diagnose its persistent chains "
        "with ArviZ, save the better model and write a report folder.",
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
    arms = []
    for name in DEMO_LEARNERS:  # PCD gets one Gibbs sweep per temperature of PT-SAP: the same budget
        arms.append(argparse.Namespace(**vars(args), learner=name, kernel="gibbs", sweeps=args.num_betas))
    return _train(args, argv, train, test, "rbm", kwargs, f"demo: RBM 196x{args.hidden}", desc, arms)


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


def _checkpoint_folder(out: Path, name: str, several: bool) -> Path:
    """``OUT/checkpoint`` for one learner; ``OUT/checkpoint/<learner>`` for each of several."""
    return out / CHECKPOINT / name if several else out / CHECKPOINT


def _saved_steps(out: Path, names: list[str]) -> dict[str, int | None]:
    """The checkpoint step of every learner of a run in ``out`` (``None`` where there is none)."""
    return {n: _checkpoint_step(_checkpoint_folder(out, n, len(names) > 1)) for n in names}


def _check_resume(out: Path, run: dict, plan: _Plan, names: list[str]) -> int:
    """Refuse ``--resume`` when there is nothing to resume or the options differ; the earliest checkpoint step."""
    steps = _saved_steps(out, names)
    if all(step is None for step in steps.values()):
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
    latest = max(step for step in steps.values() if step is not None)
    if latest > plan.total_steps:
        raise CLIError(
            f"--epochs {plan.epochs}: the run in {out} is already at epoch {latest / plan.steps_per_epoch:g}; "
            "give more --epochs to continue it"
        )
    return min(step or 0 for step in steps.values())


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


class _Arm(NamedTuple):
    """One learner of a training run (``fit`` has one, ``demo`` two)."""

    args: Any  # the options, with this learner's --learner, --kernel and --sweeps
    learner: Any
    label: str
    checkpoint: Path


def _label(args) -> str:
    """How the report names a learner: PCD-5, CD-1, SAP (metropolis), PT-SAP, Trans-SAP, ..."""
    name = args.learner
    if name in ("pcd", "cd"):
        return f"{name.upper()}-{args.sweeps}"
    if name == "sap":
        return f"SAP ({args.kernel}, {args.sweeps} per update)"
    return {"pt_sap": "PT-SAP", "trans_sap": "Trans-SAP", "exact_ml": "exact ML"}.get(name, name.replace("_", "-"))


def _sweeps(args) -> int | None:
    """Gibbs sweeps per update (``None`` for learners without a fixed number)."""
    if args.learner in ("pcd", "cd") or (args.learner == "sap" and args.kernel == "gibbs"):
        return int(args.sweeps)
    return int(args.num_betas) if args.learner == "pt_sap" else None


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
    arms: tuple
    var: str
    values: np.ndarray
    plan: _Plan
    output: OutputFolder
    resumed_from: int | None


def _train(args, argv, train, test, family: str, kwargs: dict, title: str, data_desc: str, arms=None) -> int:
    """Check everything, train with checkpoints, save the model and write the report.

    ``arms`` are the options of each learner (default: ``args`` alone).
    """
    run = _prepare(args, argv, train, test, family, kwargs, title, data_desc, arms or [args])
    run.output.create()
    if run.resumed_from is None:
        run.output.write_text(RUN_FILE, json.dumps(_settings(args, train), indent=2))
    outcome = _fit(run)
    if isinstance(outcome, int):  # interrupted
        return outcome
    _save_and_report(run, outcome)
    return 0


def _prepare(args, argv, train, test, family, kwargs, title, data_desc, arm_args) -> _Run:
    """Every check of a training run: options, sizes, values, the output folder, a run to resume."""
    from ugm_infer.io import build_model

    if args.resume and args.force:
        raise CLIError("--resume and --force: choose one (continue the saved run, or start over)")
    _sizes.check_training(
        family,
        kwargs,
        optimizer=args.optimizer,
        num_chains=args.num_chains,
        replicas=max(_build.replicas(a) for a in arm_args),
        data_shape=train.shape,
        limit=getattr(args, "max_model_bytes", None),
    )
    model = build_model(family, **kwargs)
    out = Path(args.out)
    names = [a.learner for a in arm_args]
    several = len(names) > 1
    arms = tuple(_Arm(a, _build.learner(a, model), _label(a), _checkpoint_folder(out, a.learner, several)) for a in arm_args)
    learner = arms[0].learner
    var = learner.visible[0] if learner.visible else next(iter(model.variables))
    domain = model.variables[var]
    _data.check_values(train, domain, family, "--data")
    if test is not None:
        _data.check_values(test, domain, family, "--eval-data")
    plan = _Plan(args, len(train))
    files = _report.training_files(names if several else None)
    output = OutputFolder(args.out, (*files, *MODEL_FILES, RUN_FILE, CHECKPOINT + "/"), force=args.force)
    resumed_from = None
    if args.resume:
        output.check(allowed=output.names)
        resumed_from = _check_resume(out, _settings(args, train), plan, names)
    else:
        saved = {n: s for n, s in _saved_steps(out, names).items() if s is not None}
        if saved and not args.force:
            raise CLIError(
                f"--out: {out} holds a run (checkpoint at step {max(saved.values())}); continue it with --resume, "
                "or start over with --force"
            )
        output.check()
    values = _data.domain_values(domain)
    return _Run(
        args, argv, train, test, family, kwargs, title, data_desc, model, arms, var, values, plan, output, resumed_from
    )


def _diverged(args, at: str, what: str) -> CLIError:
    return CLIError(
        f"--learning-rate {args.learning_rate:g}: training diverged{at} (non-finite {what}); nothing was saved; "
        "lower --learning-rate and start again"
    )


def _fit(run: _Run):
    """``ui.fit`` of every learner with checkpoints: ``(params0, [(result, seconds)])``, or the exit code after Ctrl-C.

    The learners start from the same parameters and the same key, so they see the same
    minibatches in the same order and start their chains from the same states.
    """
    import jax

    import ugm_infer as ui

    args, plan, out = run.args, run.plan, run.output.path
    key = jax.random.key(args.seed)
    scale = 0.01 if run.family in ("rbm", "semi_rbm") else 0.1
    data_init = {"data": run.train} if run.family in ("rbm", "semi_rbm") else {}
    params = run.model.init_params(key, scale, **data_init)
    learners = ", ".join(f"{a.label} ({_learning(a.args)})" for a in run.arms)
    print(
        f"ugm-infer: {run.title}: {run.data_desc}; {'learners' if len(run.arms) > 1 else 'learner'} {learners}, "
        f"{plan.epochs} epochs ({plan.total_steps} updates), batch {plan.batch_size}; checkpoints in {out / CHECKPOINT}"
    )
    if run.resumed_from is not None:
        announce(f"resuming the run in {out} from step {run.resumed_from} of {plan.total_steps}")
    diverged = getattr(importlib.import_module("ugm_infer.fit"), "FitDiverged", None)
    held_out = None if run.test is None else {run.var: run.test}
    outcomes = []
    for arm in run.arms:
        best = arm.checkpoint / _best.BEST
        if run.resumed_from is None:
            _best.clear(best)
        callbacks = [] if held_out is None else [_best.KeepBest(best, run.family, run.kwargs)]
        t0 = time.perf_counter()
        try:
            result = ui.fit(
                arm.learner,
                jax.random.fold_in(key, 1),
                {run.var: run.train},
                params=params,
                num_epochs=plan.epochs,
                batch_size=plan.batch_size,
                eval_every=plan.eval_every,
                eval_fn="auto",
                eval_data=held_out,
                callbacks=callbacks,
                progress="auto" if args.progress == "auto" else args.progress == "on",
                checkpoint_dir=str(arm.checkpoint),
                checkpoint_every=plan.checkpoint_every,
                resume=run.resumed_from is not None,
            )
        except KeyboardInterrupt as err:
            return _interrupted(err, run, fresh=run.resumed_from is None)
        except Exception as err:
            if run.resumed_from is None:
                run.output.discard(extra=[CHECKPOINT])
            # a non-finite value met by an evaluation is divergence too
            nonfinite = isinstance(err, ValueError) and ("NaN" in str(err) or "inf" in str(err))
            if (diverged is not None and isinstance(err, diverged)) or nonfinite:
                at = f" at step {err.step}" if hasattr(err, "step") else ""
                raise _diverged(arm.args, f"{at} ({arm.label})" if len(run.arms) > 1 else at, "parameters") from None
            raise
        seconds = time.perf_counter() - t0
        finite_params = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(result.params))
        finite_metrics = all(math.isfinite(v) for v in _final_metrics(result).values())
        if not (finite_params and finite_metrics):
            if run.resumed_from is None:
                run.output.discard(extra=[CHECKPOINT])
            raise _diverged(arm.args, "", "parameters" if not finite_params else "log-likelihood")
        outcomes.append((result, seconds))
    return params, outcomes


def _learning(args) -> str:
    return f"{args.optimizer}, {args.schedule}, lr {args.learning_rate:g}"


def _final_metrics(result) -> dict[str, float]:
    ev = result.history.get("evaluations", {})
    return {k: float(np.asarray(ev[k])[-1]) for k in ev if k.startswith(("train_", "eval_")) and k != "eval_seconds"}


def _metrics_at(result, step: int) -> dict[str, float]:
    """The evaluation recorded at ``step`` (the metrics of the kept model)."""
    ev = result.history.get("evaluations", {})
    i = int(np.flatnonzero(np.asarray(ev["step"]) == step)[0])
    return {k: float(np.asarray(ev[k])[i]) for k in ev if k.startswith(("train_", "eval_")) and k != "eval_seconds"}


def _save_and_report(run: _Run, outcome) -> None:
    """Keep each learner's best model, continue and diagnose its chains, save the best one, write the report."""
    import jax

    from ugm_infer.cli import _chains
    from ugm_infer.io import save_model

    params0, fits = outcome
    args, plan, out = run.args, run.plan, run.output.path
    several = len(run.arms) > 1
    reports = []
    for i, (arm, (result, seconds)) in enumerate(zip(run.arms, fits)):
        kept = _best.kept_model(arm.checkpoint / _best.BEST, result, params0)
        metrics = _metrics_at(result, kept.step) if len(result.history["evaluations"].get("step", ())) else {}
        particles = kept.particles if kept.particles is not None else _best.chains_of(result.state)[0]
        replicas = kept.replicas if kept.particles is not None else _best.chains_of(result.state)[1]
        chains = _chains.continue_chains(
            jax.random.key(args.seed + 1000 + i), run.model, kept.params, arm.args.learner, particles or {},
            sweeps=getattr(arm.args, "sweeps", 1), kernel=getattr(arm.args, "kernel", "gibbs"),
            betas=_build.betas(arm.args.num_betas, arm.args.beta_min),
            replicas=replicas if arm.args.learner == "pt_sap" else None,
        )  # fmt: skip
        kept_info = {"step": kept.step, "epoch": kept.step / plan.steps_per_epoch, "metrics": metrics, "params": kept.params}
        reports.append(
            _report.LearnerReport(
                arm.args.learner, arm.label, result, kept_info, seconds, _sweeps(arm.args), chains,
                f"_{arm.args.learner}" if several else "",
            )
        )  # fmt: skip
    ev0 = fits[0][0].history.get("evaluations", {})
    kind = next((k for k in ("log_likelihood", "pseudo_log_likelihood") if f"train_{k}" in ev0), None)
    select = f"eval_{kind}" if kind and run.test is not None else None
    if select is not None:
        winner = max(reports, key=lambda r: r.kept["metrics"].get(select, -math.inf))
    else:
        winner = reports[0]
    marginals = _data.site_marginals(run.train, run.values)
    sets = {"train": run.train} if run.test is None else {"train": run.train, "eval": run.test}
    reference = _data.references(marginals, run.values, sets)
    kept_step = winner.kept["step"]
    info = {"learner": winner.name, "num_train": int(len(run.train)), "seconds": sum(s for _, s in fits)}
    info["kept_step"] = int(kept_step)
    if marginals.size <= _MAX_STORED_MARGINALS:
        info["train_site_values"] = run.values.tolist()
        info["train_site_marginals"] = np.round(marginals, 8).tolist()
    save_model(out, run.family, run.kwargs, winner.kept["params"], **info)
    final = winner.kept["metrics"]
    sentence = _report.verdict(final, reference, kind)
    saved_note = _saved_note(winner, reports, select, plan)
    resumed = "" if run.resumed_from is None else f" (resumed from step {run.resumed_from})"
    console = [
        ("model", f"{run.family} {run.kwargs}"),
        ("data", run.data_desc),
        *[(f"learner {r.label}" if several else "learner", f"{r.name} ({_learning(args)})") for r in reports],
        ("epochs / batch", f"{plan.epochs} ({plan.total_steps} updates) / {plan.batch_size}"),
        ("time", f"{sum(s for _, s in fits):.1f} s{resumed}"),
        ("saved model", saved_note),
        *(_report.likelihood_rows(final, reference, kind) if kind else []),
        ("verdict", sentence),
    ]
    settings_rows = [
        ("model", f"{run.family} {run.kwargs}"),
        ("data", run.data_desc),
        ("optimizer", _learning(args)),
        ("epochs / updates / batch", f"{plan.epochs} / {plan.total_steps} / {plan.batch_size}"),
        ("persistent chains", str(args.num_chains)),
        ("evaluation", f"every {plan.eval_every} epochs" + (" (exact)" if kind == "log_likelihood" else "")),
        ("seed", str(args.seed)),
        ("command", shlex.join(["ugm-infer", *run.argv]) if run.argv else "ugm-infer demo"),
    ]
    metrics = _metrics_json(run, reports, winner, final, reference, sentence, select)
    num_columns = run.train.shape[1]
    side = int(round(num_columns**0.5))
    square = side * side == num_columns and side >= 4 and len(run.values) == 2
    _report.write_training_report(
        run.output,
        title=run.title,
        intro=_intro(run, reports, kind),
        runs=reports,
        kind=kind,
        reference=reference,
        verdict_text=sentence,
        settings_rows=settings_rows,
        console_rows=console,
        metrics=metrics,
        data=run.train,
        image_shape=(side, side) if square else None,
        sites_word="pixels" if square else "sites",
        mixing_note=_mixing_note(reports),
        saved_note=saved_note,
        reload_hint=json.dumps(str(out)),
        model_files=list(MODEL_FILES),
    )
    print(f"to train longer: {_resume_command(run.argv, 2 * plan.epochs)}")


def _saved_note(winner, reports, select: str | None, plan: _Plan) -> str:
    """Which model was saved, and why, in a few words."""
    epoch = f"epoch {winner.kept['epoch']:g} of {plan.epochs}"
    if select is None:
        return f"{winner.label} at the last epoch ({epoch}; no held-out evaluation to select by)"
    which = f"{winner.label}'s, " if len(reports) > 1 else ""
    better = " (the better of the learners)" if len(reports) > 1 else ""
    return f"{which}best by held-out log-likelihood{better}, from {epoch}"


def _intro(run: _Run, reports, kind: str | None) -> str:
    """One paragraph: what was trained, on what, how, and how it was evaluated."""
    args, plan = run.args, run.plan
    what = f"a {run.family} model ({', '.join(f'{k} {v}' for k, v in run.kwargs.items())})"
    if run.family == "rbm":
        sizes = f"{run.kwargs['num_visible']} visible x {run.kwargs['num_hidden']} hidden units"
        what = f"a restricted Boltzmann machine ({sizes})"
    how = f"{plan.epochs} epochs ({plan.total_steps} updates of {plan.batch_size} examples), {_learning(args)}"
    evaluation = {
        "log_likelihood": "exact log-likelihoods (hidden units summed out)" if run.family in ("rbm", "semi_rbm")
        else "exact log-likelihoods",
        "pseudo_log_likelihood": "pseudo-log-likelihoods",
        None: "no likelihood (too large to enumerate)",
    }[kind]  # fmt: skip
    if len(reports) > 1:
        pt = reports[-1]
        learners = (
            f"with {' and '.join(r.label for r in reports)} side by side: the same initial parameters, the same "
            f"minibatches and the same budget of {reports[0].sweeps} Gibbs sweeps per update ({pt.label} spends them as "
            f"one sweep at each of {args.num_betas} inverse temperatures in [{args.beta_min:g}, 1], plus swaps)"
        )
    else:
        learners = f"with {reports[0].label}"
    return (
        f"Trained {what} on {run.data_desc} {learners}; {how}; {evaluation} every {plan.eval_every} epochs. "
        + (_keeping(len(reports)) if run.test is not None else "")
    ).strip()


def _keeping(num_learners: int) -> str:
    if num_learners > 1:
        return "Each learner keeps its best model by held-out log-likelihood; the better of the two is saved."
    return "The model with the best held-out log-likelihood is kept and saved."


def _mixing_note(reports) -> str:
    text = (
        "After training, each learner's persistent chains were continued from where it left them, at its kept "
        f"parameters, with its own transition operator ({_chains.WARMUP} draws discarded), and their draws diagnosed with "
        "ArviZ (rank-normalised R-hat and bulk/tail ESS of the energy and of the mean of each variable) by "
        "ui.diagnostics.diagnose."
    )
    if any(r.name == "pt_sap" for r in reports) and len(reports) > 1:
        text += (
            " The tempered learner is PT-SAP rather than Trans-SAP: its tempered kernel acts at every update (Trans-SAP "
            "runs one tempered transition every 200 updates) and it measures a swap rate for every pair of temperatures."
        )
    return text


def _metrics_json(run: _Run, reports, winner, final, reference, sentence: str, select: str | None) -> dict:
    """``metrics.json``: the settings, the saved model's metrics at the top, every learner in ``learners``."""
    args, plan = run.args, run.plan

    def chains_json(c):
        if c is None:
            return None
        post = c.idata.posterior
        return {
            "kernel": c.kernel, "chains": int(post.sizes["chain"]), "draws": int(post.sizes["draw"]),
            "ok": bool(c.diagnosis.ok), "table": c.diagnosis.table,
            "findings": [{"severity": f.severity, "statistic": f.statistic, "message": f.message}
                         for f in c.diagnosis.findings],
        }  # fmt: skip

    learners = {
        r.name: {
            "label": r.label,
            "sweeps_per_update": r.sweeps,
            "seconds": r.seconds,
            "train_seconds": r.history["timing"]["train_seconds"],
            "final": _final_metrics(r.result),
            "kept": {k: v for k, v in r.kept.items() if k != "params"},
            "evaluations": {k: [float(x) for x in np.asarray(v)] for k, v in r.history.get("evaluations", {}).items()},
            "chains": chains_json(r.chains),
        }
        for r in reports
    }
    return {
        "title": run.title,
        "data": run.data_desc,
        "model": {"family": run.family, **run.kwargs},
        "learner": winner.name,
        "optimizer": args.optimizer,
        "schedule": args.schedule,
        "learning_rate": args.learning_rate,
        "epochs": plan.epochs,
        "updates": plan.total_steps,
        "batch_size": plan.batch_size,
        "num_chains": args.num_chains,
        "seed": args.seed,
        "seconds": sum(r.seconds for r in reports),
        "resumed_from_step": run.resumed_from,
        "saved": {"learner": winner.name, "step": winner.kept["step"], "epoch": winner.kept["epoch"], "selected_by": select},
        "final": final,
        "reference": reference,
        "verdict": sentence,
        "evaluations": learners[winner.name]["evaluations"],
        "learners": learners,
    }


def _interrupted(err: BaseException, run: _Run, fresh: bool) -> int:
    """Ctrl-C during training: say where the run is saved and how to continue it."""
    out, plan = run.output.path, run.plan
    names = [a.args.learner for a in run.arms]
    steps = _saved_steps(out, names)
    if all(s is None for s in steps.values()):
        if fresh:
            run.output.discard(extra=[CHECKPOINT])
        print("ugm-infer: interrupted before the first checkpoint; nothing was saved", file=sys.stderr)
        return 130
    saved = min(s or 0 for s in steps.values())
    step = getattr(err, "step", None)
    lost = "" if step is None or step == saved else f" (steps after {saved} are lost)"
    if len(names) > 1:
        lost = " (" + ", ".join(f"{n} at step {s or 0}" for n, s in steps.items()) + ")"
    where = f"step {saved} of {plan.total_steps} in {out / CHECKPOINT}{lost}"
    print(f"ugm-infer: interrupted; the run is saved at {where}", file=sys.stderr)
    print(f"ugm-infer: continue it with: {_resume_command(run.argv)}", file=sys.stderr)
    return 130
