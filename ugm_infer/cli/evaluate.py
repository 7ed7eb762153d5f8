"""``ugm-infer evaluate MODEL_DIR --data FILE``: average log-likelihood of a data file under a saved model.

Exact by enumeration when the model is small enough (``--method auto`` enumerates up
to 2^22 configurations, ``--method exact`` up to 2^27), else AIS with its standard
error.  The result is printed beside the uniform and independent-sites references
(the latter from the training marginals stored by ``ugm-infer fit``, or fitted to
this data file when the model folder has none).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ugm_infer.cli import _data, _report
from ugm_infer.cli._options import (
    HEADER_HELP,
    HEADERS,
    METHODS,
    CLIError,
    add_saved_model_options,
    int_at_least,
    nonnegative_int,
    one_of,
    path_text,
    positive_int,
)
from ugm_infer.cli._output import OutputFolder, check_output_file, write_output_file

AUTO_MAX_CONFIGURATIONS = 2**22


def add_evaluate_parser(sub) -> None:
    ev = sub.add_parser(
        "evaluate",
        help="log-likelihood of a data file under a saved model (exact or AIS)",
        usage="ugm-infer evaluate MODEL_DIR --data FILE [options]",
        description="Average log-likelihood of a data file under a saved model: exact when the model can be "
        "enumerated, AIS otherwise; printed beside the uniform and independent-sites references.",
    )
    add_saved_model_options(ev, "overwrite an existing --out file")
    req = ev.add_argument_group("required")
    req.add_argument("--data", type=path_text, metavar="FILE", help="data (.npz, .npy, .csv, .txt), one example per row")
    add = ev.add_argument
    add("--data-key", type=path_text, metavar="NAME", help="array inside an .npz")
    add("--header", type=one_of(HEADERS), default="auto", metavar="WHEN", help=HEADER_HELP)
    add("--unpack-bits", type=positive_int, metavar="N", help="rows are np.packbits-packed: N bits per row")
    add(
        "--method",
        type=one_of(METHODS),
        default="auto",
        metavar="NAME",
        help="auto (exact when enumerable), exact, ais",
    )
    add("--num-betas", type=int_at_least(2), default=10000, metavar="N", help="AIS inverse temperatures")
    add("--num-runs", type=positive_int, default=100, metavar="N", help="AIS runs")
    add("--seed", type=nonnegative_int, default=0, metavar="N", help="random seed (AIS)")
    add("--out", type=path_text, metavar="FILE", help="also write the result as JSON to this file")
    add("--report", type=path_text, metavar="DIR", help="also write a report folder (index.html, metrics.json)")


def _references(folder: str, data: np.ndarray, values: np.ndarray) -> tuple[dict, str]:
    """Reference values for ``data``: from the stored training marginals if they fit, else from ``data``."""
    from ugm_infer.io import model_info

    info = model_info(folder)
    stored = info.get("train_site_marginals")
    if stored is not None and info.get("train_site_values") == values.tolist():
        marginals = np.asarray(stored, dtype=np.float64)
        if marginals.shape == (data.shape[1], len(values)) and np.all(marginals > 0):
            return _data.references(marginals, values, {"data": data}), "training marginals"
    marginals = _data.site_marginals(data, values)
    return _data.references(marginals, values, {"data": data}), "marginals of this data (optimistic)"


def _exact_plan_error(model, params, var: str, limit: int) -> str | None:
    """``None`` if the likelihood enumerates within ``limit`` configurations, else why not."""
    import ugm_infer as ui

    try:  # log Z (every variable free) and the likelihood of the observed variable
        for observed in ((), (var,)):
            ui.exact.enumeration_plan(model, params, observed, max_configurations=limit)
        return None
    except ValueError as err:
        return str(err)


def run_evaluate(args, argv: list[str]) -> int:
    import jax

    import ugm_infer as ui

    if not args.data:
        raise CLIError("--data is required (the data file to score, one example per row)")
    check_output_file(args.out, force=args.force)
    report = None
    if args.report:
        report = OutputFolder(args.report, _report.EVALUATION_FILES, force=args.force, flag="--report")
        report.check()
    model, params = _data.load_saved_model(args.model_dir, args.max_model_bytes)
    data = _data.read_data(args.data, key=args.data_key, unpack_bits=args.unpack_bits, header=args.header, flag="--data")
    var = _data.visible_variable(model)
    domain = model.variables[var]
    size = math.prod(domain.shape)
    if data.shape[1] != size:
        raise CLIError(f"--data has {data.shape[1]} columns but the model's {var!r} has {size} sites")
    _data.check_values(data, domain, model.name, "--data")
    method = args.method
    if method == "auto":
        method = "exact" if _exact_plan_error(model, params, var, AUTO_MAX_CONFIGURATIONS) is None else "ais"
    elif method == "exact":
        why = _exact_plan_error(model, params, var, 2**27)
        if why is not None:
            raise CLIError(f"--method exact: {why.replace('use AIS/SMC', 'use --method ais')}")
    observed = {var: data.reshape((len(data), *domain.shape))}
    t0 = time.perf_counter()
    row: dict[str, Any] = {"model_dir": args.model_dir, "data": args.data, "num_examples": int(len(data)), "method": method}
    if method == "exact":
        row["log_likelihood"] = float(ui.exact.average_log_likelihood(model, params, observed))
    else:
        res = ui.smc.ais_log_likelihood(
            jax.random.key(args.seed), model, params, observed, num_betas=args.num_betas, num_runs=args.num_runs
        )
        row["log_likelihood"] = float(res.log_likelihood)
        row["log_likelihood_se"] = float(res.log_likelihood_se)
        row["log_Z"] = float(res.log_Z)
    row["seconds"] = time.perf_counter() - t0
    values = _data.domain_values(domain)
    reference, source = _references(args.model_dir, data.reshape(len(data), -1), values)
    row["reference"] = {k: v["data"] for k, v in reference.items()}
    row["reference_marginals"] = source
    se = f" +- {row['log_likelihood_se']:.3f}" if "log_likelihood_se" in row else ""
    print(f"average log-likelihood ({method}): {row['log_likelihood']:.4f}{se} nats per example over {len(data)} examples")
    print(f"  independent sites ({source}): {row['reference']['independent_sites']:.4f}")
    print(f"  uniform: {row['reference']['uniform']:.4f}")
    if args.out:
        write_output_file(args.out, _report.json_text(row))
        print(f"wrote {args.out}")
    if report is not None:
        _write_report(report, args, row, source, len(data))
    return 0


def _write_report(report: OutputFolder, args, row: dict, source: str, num: int) -> None:
    how = "exactly, by enumeration" if row["method"] == "exact" else f"by AIS ({args.num_runs} runs, {args.num_betas} betas)"
    se = f" +- {row['log_likelihood_se']:.4f}" if "log_likelihood_se" in row else ""
    rows = [
        ("model", args.model_dir),
        ("data", f"{args.data}: {num} examples"),
        ("average log-likelihood", f"{row['log_likelihood']:.4f}{se} nats per example"),
        (f"independent sites ({source})", f"{row['reference']['independent_sites']:.4f}"),
        ("uniform", f"{row['reference']['uniform']:.4f}"),
        ("method", row["method"]),
        ("time", f"{row['seconds']:.1f} s"),
    ]
    intro = f"Scored {num} examples of {args.data} under the model saved in {args.model_dir}, {how}."
    report.create()
    try:
        _report.write_evaluation_report(
            report, title=f"ugm_infer: log-likelihood under {args.model_dir}", intro=intro, row=row, rows=rows
        )
    except BaseException:
        report.discard()
        raise
