"""Command-line interface: ``ugm-infer {demo, fit, sample, evaluate}``.

``ugm-infer demo``
    The embedded default: with no data and no options it trains a small RBM on the
    14x14 binary digits bundled in the package (:func:`ugm_infer.datasets.load_digits14`)
    by PCD, and writes a report folder (``out/demo``): learning curves and samples as
    PNG, ``metrics.json``, the learning history as netCDF (ArviZ), the saved model, and
    an ``index.html`` that shows them. About a minute on 2 CPU cores.
``ugm-infer fit --data FILE --model FAMILY --learner NAME --out DIR``
    Trains a built-in model on a data file (``.npz``/``.npy``/``.csv``/``.txt``, one
    example per row) and writes the same report, plus the saved model
    (``model.json`` + ``params.npz``; reload with ``ui.load_model(DIR)``).
``ugm-infer sample MODEL_DIR --out DIR``
    Runs chains of a kernel on a saved model; writes the draws' summary statistics and
    kernel infos as netCDF, the last configurations, trace plots and the plain-language
    mixing diagnosis of :func:`ugm_infer.diagnostics.diagnose`.
``ugm-infer evaluate MODEL_DIR --data FILE``
    Average log-likelihood of a data file under a saved model: exact by enumeration
    when the model is small enough, else AIS (with its standard error).

Every option can also come from a JSON or TOML file (``--config FILE``; keys are the
long option names, with ``-`` or ``_``); options given on the command line win.
User errors (missing or malformed files, invalid options) print one line and exit with
code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import time
from pathlib import Path
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


# ----------------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------------
def _positive(value: Any, name: str, *, integer: bool = True, allow_zero: bool = False) -> Any:
    ok = (isinstance(value, int) if integer else isinstance(value, (int, float))) and not isinstance(value, bool)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        kind = "integer" if integer else "number"
        raise CLIError(
            f"--{name.replace('_', '-')} must be a {'non-negative' if allow_zero else 'positive'} {kind}, got {value!r}"
        )
    return value


def _load_config(path: str, parser: argparse.ArgumentParser) -> dict:
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
        raise CLIError(f"--config: cannot parse {path}: {err}") from None
    if not isinstance(cfg, dict):
        raise CLIError(f"--config: {path} must hold a table/object of option names")
    known = {a.dest for a in parser._actions}
    out = {}
    for key, value in cfg.items():
        dest = key.replace("-", "_")
        if dest not in known or dest in ("config", "command", "help"):
            raise CLIError(f"--config: unknown option {key!r} in {path}")
        out[dest] = value
    return out


def _betas(num: int, low: float):
    from ugm_infer.kernels.tempered_transitions import uniform_ladder

    if not 0.0 <= low < 1.0:
        raise CLIError(f"--beta-min must be in [0, 1), got {low}")
    if num < 2:
        raise CLIError(f"--num-betas must be >= 2, got {num}")
    return uniform_ladder(num, low)


def _kernel(name: str, args, model, params=None):
    """A BlackJAX-style kernel module (for learners) or algorithm (with params, for sampling)."""
    import ugm_infer as ui

    if name not in KERNELS:
        raise CLIError(f"--kernel must be one of {', '.join(KERNELS)}, got {name!r}")
    if params is None:
        if name in ("gibbs", "metropolis"):
            return getattr(ui.kernels, name)
        raise CLIError(f"--kernel {name} is used through --learner trans_sap / pt_sap, not sap")
    if name == "gibbs":
        return ui.kernels.gibbs(model, params)
    if name == "metropolis":
        return ui.kernels.metropolis(model, params)
    return getattr(ui.kernels, name)(model, params, betas=_betas(args.num_betas, args.beta_min))


def _schedule(args):
    from ugm_infer.learn.schedules import constant_then_robbins_monro, robbins_monro

    _positive(args.learning_rate, "learning_rate", integer=False)
    if args.schedule == "constant":
        return args.learning_rate
    if args.schedule == "robbins_monro":  # lr * b / (b + t): starts at lr
        return robbins_monro(args.learning_rate * args.decay_offset, args.decay_offset)
    if args.schedule == "constant_then_robbins_monro":
        t0 = _positive(args.constant_steps, "constant_steps")
        return constant_then_robbins_monro(args.learning_rate, t0, args.learning_rate * args.decay_offset, args.decay_offset)
    raise CLIError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {args.schedule!r}")


def _optimizer(args):
    import optax

    lr = _schedule(args)
    if args.optimizer == "sgd":
        return optax.sgd(lr)
    if args.optimizer == "momentum":
        return optax.sgd(lr, momentum=0.9)
    if args.optimizer == "adam":
        return optax.adam(lr)
    raise CLIError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {args.optimizer!r}")


def _model_spec(args, num_columns: int) -> tuple[str, dict]:
    if args.model not in MODELS:
        raise CLIError(f"--model must be one of {', '.join(MODELS)}, got {args.model!r}")
    if args.model in ("rbm", "semi_rbm"):
        return args.model, {"num_visible": num_columns, "num_hidden": _positive(args.hidden, "hidden")}
    if args.model == "potts":
        return "potts", {"num_sites": num_columns, "num_states": _positive(args.num_states, "num_states")}
    if args.model == "ising":
        return "ising", {"num_spins": num_columns}
    return "boltzmann_machine", {"num_units": num_columns}


def _check_values(data, family: str, kwargs: dict, name: str) -> None:
    import numpy as np

    if family == "potts":
        q = kwargs["num_states"]
        if np.any(data != np.round(data)) or data.min() < 0 or data.max() > q - 1:
            raise CLIError(f"{name}: a potts model with --num-states {q} needs integers in [0, {q - 1}]")
    elif family == "ising":
        if not np.all(np.isin(data, (-1.0, 1.0))):
            raise CLIError(f"{name}: an ising model needs spins in {{-1, +1}} (for 0/1 data use --model boltzmann_machine)")
    elif not np.all(np.isin(data, (0.0, 1.0))):
        raise CLIError(f"{name}: a {family} model needs binary values in {{0, 1}}")


def _learner(args, model):
    import ugm_infer as ui

    opt = _optimizer(args)
    n = _positive(args.num_chains, "num_chains")
    name = args.learner
    if name not in LEARNERS:
        raise CLIError(f"--learner must be one of {', '.join(LEARNERS)}, got {name!r}")
    if name == "pcd":
        return ui.learn.pcd(model, optimizer=opt, num_particles=n, num_sweeps=_positive(args.sweeps, "sweeps"))
    if name == "cd":
        return ui.learn.cd(model, k=_positive(args.sweeps, "sweeps"), optimizer=opt)
    if name == "sap":
        kernel = _kernel(args.kernel, args, model)
        return ui.learn.sap(model, kernel=kernel, optimizer=opt, num_particles=n, num_steps_per_update=args.sweeps)
    if name == "trans_sap":
        return ui.learn.trans_sap(model, optimizer=opt, num_particles=n, betas=_betas(args.num_betas, args.beta_min))
    if name == "pt_sap":
        return ui.learn.pt_sap(model, optimizer=opt, num_particles=n, betas=_betas(args.num_betas, args.beta_min))
    if name == "exact_ml":
        return ui.learn.exact_ml(model, optimizer=opt)
    if name == "pseudo_likelihood":
        return ui.learn.pseudo_likelihood(model, optimizer=opt)
    if name == "mcmc_mle":
        return ui.learn.mcmc_mle(model, optimizer=opt, num_particles=n)
    if name == "pf_mcmc_mle":
        return ui.learn.pf_mcmc_mle(model, optimizer=opt, num_particles=n)
    if name == "psmc":
        return ui.learn.psmc(model, optimizer=opt, num_particles=n)
    return ui.learn.smc(model, optimizer=opt, num_particles=n)


def _init_params(model, family: str, key, train):
    if family in ("rbm", "semi_rbm"):
        return model.init_params(key, 0.01, data=train)
    return model.init_params(key, 0.1)


def _is_enumerable(model, params, observed=()) -> bool:
    import ugm_infer as ui

    try:
        ui.exact.enumeration_plan(model, params, observed)
        return True
    except ValueError:
        return False


def _image_shape(num: int) -> tuple[int, int] | None:
    side = int(round(num**0.5))
    return (side, side) if side * side == num and side >= 4 else None


def _write_html(out: Path, title: str, rows: list[tuple[str, str]], images: list[tuple[str, str]], files: list[str]) -> Path:
    """A self-contained ``index.html`` with a metrics table, the PNGs and links to the files."""
    table = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    figs = "\n".join(
        f'<figure><img src="{html.escape(s)}" alt="{html.escape(c)}"><figcaption>{html.escape(c)}</figcaption></figure>'
        for s, c in images
    )
    links = "\n".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title)}</h1>
<table>{table}</table>
{figs}
<h2>Files</h2><ul>{links}</ul>
<p>Reload the model in Python: <code>model, params = ugm_infer.load_model("{html.escape(str(out))}")</code></p>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path


def _print_table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 3 + max(len(v) for _, v in rows)))
    for k, v in rows:
        print(f"{k.ljust(width)} | {v}")


# ----------------------------------------------------------------------------------
# training report (fit and demo)
# ----------------------------------------------------------------------------------
def _train_and_report(args, train, test, family: str, kwargs: dict, title: str, data_desc: str) -> int:
    import jax
    import numpy as np

    import ugm_infer as ui
    from ugm_infer.io import save_model

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _check_values(train, family, kwargs, "--data")
    if test is not None:
        _check_values(test, family, kwargs, "--eval-data")
    model = ui.io.build_model(family, **kwargs)
    key = jax.random.key(args.seed)
    params = _init_params(model, family, key, train)
    learner = _learner(args, model)
    var = learner.visible[0] if learner.visible else next(iter(model.variables))
    batch_size = min(_positive(args.batch_size, "batch_size"), len(train))
    epochs = _positive(args.epochs, "epochs")
    eval_every = args.eval_every or max(1, epochs // 10)
    enumerable = _is_enumerable(model, params, learner.visible)
    print(f"ugm-infer: {title}: {data_desc}; learner {args.learner}, {epochs} epochs, batch {batch_size}")
    t0 = time.perf_counter()
    result = ui.fit(
        learner,
        jax.random.fold_in(key, 1),
        {var: train},
        params=params,
        num_epochs=epochs,
        batch_size=batch_size,
        eval_every=eval_every,
        eval_fn="auto",
        eval_data=None if test is None else {var: test},
        progress="auto" if args.progress == "auto" else args.progress == "on",
    )
    seconds = time.perf_counter() - t0
    ev = result.history.get("evaluations", {})
    metric_names = [k for k in ev if k.startswith(("train_", "eval_")) and k != "eval_seconds"]
    save_model(out, family, kwargs, result.params, learner=args.learner, num_train=int(len(train)), seconds=seconds)
    idata = result.to_arviz()
    idata.to_netcdf(str(out / "history.nc"))
    final = {k: float(np.asarray(ev[k])[-1]) for k in metric_names}
    if enumerable:
        final["train_log_likelihood"] = float(ui.exact.average_log_likelihood(model, result.params, {var: train}))
        if test is not None:
            final["test_log_likelihood"] = float(ui.exact.average_log_likelihood(model, result.params, {var: test}))
    metrics = {
        "title": title,
        "data": data_desc,
        "model": {"family": family, **kwargs},
        "learner": args.learner,
        "optimizer": args.optimizer,
        "schedule": args.schedule,
        "learning_rate": args.learning_rate,
        "epochs": epochs,
        "batch_size": batch_size,
        "num_chains": args.num_chains,
        "seed": args.seed,
        "seconds": seconds,
        "final": final,
        "evaluations": {k: [float(x) for x in np.asarray(v)] for k, v in ev.items()},
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ugm_infer.plots import plot_learning_curves, plot_sample_grid

    images = []
    if metric_names:
        fig = plot_learning_curves([(args.learner, result)], x="epoch")
        fig = fig if hasattr(fig, "savefig") else fig.figure
        fig.savefig(out / "learning_curve.png", dpi=90)
        plt.close(fig)
        images.append(("learning_curve.png", "learning curve"))
    particles = getattr(result.state, "particles", None)
    shape = _image_shape(train.shape[1])
    if shape is not None and isinstance(particles, dict) and var in particles and family != "potts":
        chains = np.asarray(particles[var]).reshape(-1, *shape)[:36]
        fig = plot_sample_grid(chains, shape)
        fig = fig if hasattr(fig, "savefig") else fig.figure
        fig.savefig(out / "samples.png", dpi=90)
        plt.close(fig)
        images.append(("samples.png", "persistent chains after training"))
    rows = [
        ("model", f"{family} {kwargs}"),
        ("data", data_desc),
        ("learner", f"{args.learner} ({args.optimizer}, {args.schedule}, lr {args.learning_rate})"),
        ("epochs / batch", f"{epochs} / {batch_size}"),
        ("time", f"{seconds:.1f} s"),
    ] + [(k, f"{v:.4f}") for k, v in final.items()]
    files = ["metrics.json", "history.nc", "model.json", "params.npz"] + [p for p, _ in images]
    page = _write_html(out, f"ugm_infer: {title}", rows, images, files)
    _print_table("summary", rows)
    print(f"\nwrote {page} (and {', '.join(files)})")
    return 0


# ----------------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------------
def _demo(args) -> int:
    from ugm_infer.datasets import load_digits14

    if not 1 <= args.hidden <= 24:
        raise CLIError("--hidden must be between 1 and 24 (exact likelihood enumerates 2^hidden states)")
    data = load_digits14()
    train, test = data["train"], data["test"]
    if args.quick:
        train = train[:500]
    kwargs = {"num_visible": int(train.shape[1]), "num_hidden": args.hidden}
    desc = f"{len(train)} bundled binary 14x14 digits ({len(test)} held out)"
    return _train_and_report(args, train, test, "rbm", kwargs, f"demo: RBM 196x{args.hidden}", desc)


def _read(path: str, key: str | None, unpack_bits: int | None, name: str):
    from ugm_infer.io import load_data

    try:
        return load_data(path, key=key, unpack_bits=unpack_bits)
    except FileNotFoundError as err:
        raise CLIError(f"{name}: {err}") from None
    except ValueError as err:
        raise CLIError(f"{name}: {err}") from None


def _fit(args) -> int:
    if not args.data:
        raise CLIError("--data is required (an .npz, .npy, .csv or .txt file, one example per row)")
    train = _read(args.data, args.data_key, args.unpack_bits, "--data")
    test = None
    if args.eval_data:
        test = _read(args.eval_data, args.eval_key, args.unpack_bits, "--eval-data")
    elif args.data.endswith(".npz") and args.data_key is None:
        import numpy as np

        with np.load(args.data) as f:
            has_test = "test" in f.files and "train" in f.files
        if has_test:
            test = _read(args.data, "test", args.unpack_bits, "--data")
    if args.max_examples:
        train = train[: _positive(args.max_examples, "max_examples")]
        test = None if test is None else test[: args.max_examples]
    if test is not None and test.shape[1] != train.shape[1]:
        raise CLIError(f"--eval-data has {test.shape[1]} columns but --data has {train.shape[1]}")
    family, kwargs = _model_spec(args, int(train.shape[1]))
    desc = f"{os.path.basename(args.data)}: {train.shape[0]} examples x {train.shape[1]} variables"
    return _train_and_report(args, train, test, family, kwargs, f"fit {family}", desc)


def _load_saved(folder: str):
    import ugm_infer as ui

    try:
        return ui.load_model(folder)
    except FileNotFoundError as err:
        raise CLIError(str(err)) from None


def _sample(args) -> int:
    import jax
    import numpy as np

    import ugm_infer as ui

    model, params = _load_saved(args.model_dir)
    chains = _positive(args.num_chains, "num_chains")
    steps = _positive(args.num_steps, "num_steps")
    warmup = _positive(args.num_warmup, "num_warmup", allow_zero=True)
    algorithm = _kernel(args.kernel, args, model, params)
    key = jax.random.key(args.seed)
    x0 = model.random_state(jax.random.fold_in(key, 0), chains)
    print(f"ugm-infer: sampling {args.model_dir} with {args.kernel}: {chains} chains x {steps} steps (+{warmup} warm-up)")
    t0 = time.perf_counter()
    run = ui.sample(jax.random.fold_in(key, 1), algorithm, x0, steps, num_warmup=warmup, model=model, params=params)
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    betas = None
    if args.kernel in ("tempered_transitions", "parallel_tempering"):
        betas = _betas(args.num_betas, args.beta_min)
    idata = ui.diagnostics.to_arviz(run, model=model, params=params, betas=betas)
    idata.to_netcdf(str(out / "samples.nc"))
    diagnosis = ui.diagnostics.diagnose(idata)
    (out / "diagnosis.txt").write_text(str(diagnosis) + "\n")
    last = {k: np.asarray(v[:, -1]) for k, v in run.states.items()}
    if args.kernel == "parallel_tempering":
        last = {k: v[:, -1] for k, v in last.items()}
    np.savez(out / "final_states.npz", **last)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ugm_infer.plots import plot_trace

    fig = plot_trace(idata, var_names=["energy"])
    fig = fig if hasattr(fig, "savefig") else fig.figure
    fig.savefig(out / "trace.png", dpi=90)
    plt.close(fig)
    energies = np.asarray(run.energies)
    rows = [
        ("model", args.model_dir),
        ("kernel", args.kernel),
        ("chains x steps", f"{chains} x {steps} (+{warmup} warm-up)"),
        ("time", f"{seconds:.1f} s"),
        ("mean energy", f"{energies.mean():.4f} (sd {energies.std():.4f})"),
        ("diagnosis", "ok" if diagnosis.ok else "problems found (see diagnosis.txt)"),
    ]
    files = ["samples.nc", "final_states.npz", "diagnosis.txt", "trace.png"]
    _write_html(out, f"ugm_infer: samples of {args.model_dir}", rows, [("trace.png", "energy trace")], files)
    print(diagnosis)
    _print_table("summary", rows)
    print(f"\nwrote {out / 'index.html'}")
    return 0


def _evaluate(args) -> int:
    import jax

    import ugm_infer as ui

    model, params = _load_saved(args.model_dir)
    data = _read(args.data, args.data_key, args.unpack_bits, "--data")
    names = list(model.variables)
    var = names[0] if len(names) == 1 else "v" if "v" in names else None
    if var is None:
        raise CLIError(f"cannot tell the visible variable of a model with variables {names}")
    size = int(model.variables[var].shape[0]) if model.variables[var].shape else 1
    if data.shape[1] != size:
        raise CLIError(f"--data has {data.shape[1]} columns but the model's {var!r} has {size} sites")
    method = args.method
    if method == "auto":
        method = "exact" if _is_enumerable(model, params, (var,)) else "ais"
    t0 = time.perf_counter()
    row: dict[str, Any] = {"model_dir": args.model_dir, "data": args.data, "num_examples": int(len(data)), "method": method}
    if method == "exact":
        if not _is_enumerable(model, params, (var,)):
            raise CLIError("--method exact: the model is too large to enumerate; use --method ais")
        row["log_likelihood"] = float(ui.exact.average_log_likelihood(model, params, {var: data}))
    elif method == "ais":
        res = ui.smc.ais_log_likelihood(
            jax.random.key(args.seed), model, params, {var: data}, num_betas=args.num_betas, num_runs=args.num_runs
        )
        row["log_likelihood"] = float(res.log_likelihood)
        row["log_likelihood_se"] = float(res.log_likelihood_se)
        row["log_Z"] = float(res.log_Z)
    else:
        raise CLIError(f"--method must be auto, exact or ais, got {args.method!r}")
    row["seconds"] = time.perf_counter() - t0
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(row, indent=2))
    se = f" +- {row['log_likelihood_se']:.3f}" if "log_likelihood_se" in row else ""
    print(f"average log-likelihood ({method}): {row['log_likelihood']:.4f}{se} nats over {len(data)} examples")
    return 0


# ----------------------------------------------------------------------------------
# parser
# ----------------------------------------------------------------------------------
def _add_training_options(p: argparse.ArgumentParser, *, epochs: int, lr: float, hidden: int) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--learner", default="pcd", help=f"one of {', '.join(LEARNERS)} (default pcd)")
    g.add_argument("--kernel", default="gibbs", help="kernel for --learner sap: gibbs or metropolis")
    g.add_argument("--optimizer", default="sgd", help=f"one of {', '.join(OPTIMIZERS)}")
    g.add_argument("--schedule", default="constant", help=f"one of {', '.join(SCHEDULES)}")
    g.add_argument("--learning-rate", type=float, default=lr)
    g.add_argument("--decay-offset", type=float, default=1000.0, help="b in lr * b / (b + t) (default 1000)")
    g.add_argument("--constant-steps", type=int, default=1000, help="steps at the constant rate before decaying")
    g.add_argument("--epochs", type=int, default=epochs)
    g.add_argument("--batch-size", type=int, default=100)
    g.add_argument("--num-chains", type=int, default=100, help="persistent chains / particles")
    g.add_argument("--sweeps", type=int, default=1, help="Gibbs sweeps per update (pcd, sap), k for cd")
    g.add_argument("--num-betas", type=int, default=10, help="inverse temperatures for trans_sap / pt_sap")
    g.add_argument("--beta-min", type=float, default=0.5, help="smallest inverse temperature")
    g.add_argument("--eval-every", type=int, default=None, help="epochs between evaluations (default epochs // 10)")
    g.add_argument("--hidden", type=int, default=hidden, help="hidden units (rbm, semi_rbm)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--progress", default="auto", choices=("auto", "on", "off"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ugm-infer", description="Discrete undirected graphical models in JAX.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command")

    demo = sub.add_parser("demo", help="train a small RBM on bundled digits and write a report folder")
    demo.add_argument("--out", default="out/demo", help="output folder (default: out/demo)")
    demo.add_argument("--quick", action="store_true", help="500 training images")
    demo.add_argument("--config", help="JSON or TOML file of options")
    _add_training_options(demo, epochs=30, lr=0.05, hidden=16)

    fit = sub.add_parser("fit", help="train a built-in model on a data file")
    fit.add_argument("--data", help="training data: .npz, .npy, .csv or .txt, one example per row")
    fit.add_argument("--data-key", help="array name inside an .npz (default: 'train' or its only array)")
    fit.add_argument("--eval-data", help="held-out data (default: the .npz's 'test' array if any)")
    fit.add_argument("--eval-key", help="array name inside --eval-data when it is an .npz")
    fit.add_argument("--unpack-bits", type=int, help="rows are np.packbits-packed; number of bits per row")
    fit.add_argument("--max-examples", type=int, help="use only the first N examples")
    fit.add_argument("--model", default="rbm", help=f"one of {', '.join(MODELS)} (default rbm)")
    fit.add_argument("--num-states", type=int, default=2, help="states per site (potts)")
    fit.add_argument("--out", default="out/fit", help="output folder (default: out/fit)")
    fit.add_argument("--config", help="JSON or TOML file of options")
    _add_training_options(fit, epochs=10, lr=0.01, hidden=16)

    smp = sub.add_parser("sample", help="run chains of a kernel on a saved model")
    smp.add_argument("model_dir", help="folder written by `ugm-infer fit` (model.json + params.npz)")
    smp.add_argument("--kernel", default="gibbs", help=f"one of {', '.join(KERNELS)}")
    smp.add_argument("--num-chains", type=int, default=4)
    smp.add_argument("--num-steps", type=int, default=1000)
    smp.add_argument("--num-warmup", type=int, default=100)
    smp.add_argument("--num-betas", type=int, default=10)
    smp.add_argument("--beta-min", type=float, default=0.5)
    smp.add_argument("--seed", type=int, default=0)
    smp.add_argument("--out", default="out/sample")
    smp.add_argument("--config", help="JSON or TOML file of options")

    ev = sub.add_parser("evaluate", help="log-likelihood of a data file under a saved model (exact or AIS)")
    ev.add_argument("model_dir", help="folder written by `ugm-infer fit`")
    ev.add_argument("--data", required=True, help="data file (.npz, .npy, .csv, .txt)")
    ev.add_argument("--data-key", help="array name inside an .npz")
    ev.add_argument("--unpack-bits", type=int, help="rows are np.packbits-packed; number of bits per row")
    ev.add_argument("--method", default="auto", help="auto (exact if enumerable, else AIS), exact or ais")
    ev.add_argument("--num-betas", type=int, default=10000, help="AIS inverse temperatures")
    ev.add_argument("--num-runs", type=int, default=100, help="AIS runs")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", help="write the result as JSON here")
    ev.add_argument("--config", help="JSON or TOML file of options")
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["demo", *argv])
    if getattr(args, "config", None):
        sub = parser._subparsers._group_actions[0].choices[args.command]
        sub.set_defaults(**_load_config(args.config, sub))
        args = parser.parse_args(argv if argv and argv[0] in ("demo", "fit", "sample", "evaluate") else ["demo", *argv])
    return args


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        args = _parse(parser, argv)
        commands = {"demo": _demo, "fit": _fit, "sample": _sample, "evaluate": _evaluate}
        return commands[args.command](args)
    except CLIError as err:
        if debug:
            raise
        print(f"ugm-infer: error: {err}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, FileNotFoundError) as err:
        if debug:
            raise
        print(f"ugm-infer: error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ugm-infer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
