"""Everything the commands write for a reader: the summary table, ``metrics.json``, figures, ``index.html``.

All report files go through this module (and :class:`~ugm_infer.cli._output.OutputFolder`,
so they are written atomically and only where planned); the commands compute, this
module presents.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ugm_infer.cli._output import OutputFolder

TRAINING_FILES = ("index.html", "metrics.json", "history.nc", "learning_curve.png", "samples.png")
SAMPLE_FILES = ("index.html", "samples.nc", "final_states.npz", "diagnosis.txt", "trace.png")
SET_NAMES = {"train": "train", "eval": "held-out"}


# ----------------------------------------------------------------------------------
# small pieces
# ----------------------------------------------------------------------------------
def json_safe(obj: Any, path: str = "", notes: list[str] | None = None) -> Any:
    """``obj`` with every NaN/inf float replaced by ``None``; each replacement is noted in ``notes``."""
    if isinstance(obj, dict):
        return {k: json_safe(v, f"{path}.{k}" if path else str(k), notes) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v, f"{path}[{i}]", notes) for i, v in enumerate(obj)]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        if notes is not None:
            notes.append(f"{path} was {obj} (written as null)")
        return None
    return obj


def json_text(obj: dict) -> str:
    """Valid JSON for ``obj``: non-finite numbers become ``null``, and a ``notes`` list says which."""
    notes: list[str] = []
    clean = json_safe(obj, notes=notes)
    if notes:
        clean["notes"] = list(clean.get("notes", [])) + notes
    return json.dumps(clean, indent=2, allow_nan=False)


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 3 + max(len(v) for _, v in rows)))
    for k, v in rows:
        print(f"{k.ljust(width)} | {v}")


def _write_html(
    output: OutputFolder,
    title: str,
    rows: list[tuple[str, str]],
    images: list[tuple[str, str]],
    files: list[str],
    reload_hint: str | None,
) -> Path:
    """A self-contained ``index.html`` with a metrics table, the PNGs and links to the files."""
    table = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    figs = "\n".join(
        f'<figure><img src="{html.escape(s)}" alt="{html.escape(c)}"><figcaption>{html.escape(c)}</figcaption></figure>'
        for s, c in images
    )
    links = "\n".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files)
    reload = ""
    if reload_hint is not None:
        code = f"model, params = ugm_infer.load_model({html.escape(reload_hint)})"
        reload = f"<p>Reload the model in Python: <code>{code}</code></p>\n"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title)}</h1>
<table>{table}</table>
{figs}
<h2>Files</h2><ul>{links}</ul>
{reload}</body></html>
"""
    return output.write_text("index.html", page)


def _save_figure(output: OutputFolder, name: str, fig) -> None:
    import matplotlib.pyplot as plt

    fig = fig if hasattr(fig, "savefig") else fig.figure
    output.write(name, lambda tmp: fig.savefig(tmp, dpi=90))
    plt.close(fig)


def _matplotlib() -> None:
    import matplotlib

    matplotlib.use("Agg")


# ----------------------------------------------------------------------------------
# training (fit, demo)
# ----------------------------------------------------------------------------------
def likelihood_rows(final: dict[str, float], reference: dict, kind: str) -> list[tuple[str, str]]:
    """Summary rows: each data set's (pseudo-)log-likelihood beside the uniform and independent-sites values."""
    rows: list[tuple[str, str]] = []
    label = "pseudo-log-likelihood" if kind == "pseudo_log_likelihood" else "log-likelihood"
    for set_name, shown in SET_NAMES.items():
        key = f"{set_name}_{kind}"
        if key not in final:
            continue
        rows.append((f"{shown} {label}", f"{final[key]:.4f} nats per example"))
        rows.append(("  independent sites", f"{reference['independent_sites'][set_name]:.4f}"))
        rows.append(("  uniform", f"{reference['uniform'][set_name]:.4f}"))
    return rows


def verdict(final: dict[str, float], reference: dict, kind: str | None) -> str:
    """One sentence: did the model learn more than the independent-sites model?

    "learned" needs a gain of at least 0.05 nats per example and 1% of the
    independent-sites value; a smaller gain is "barely better".
    """
    if kind is None:
        return "no likelihood computed (model too large to enumerate): estimate it with `ugm-infer evaluate` (AIS)"
    set_name = "eval" if f"eval_{kind}" in final else "train"
    value = final[f"{set_name}_{kind}"]
    gain = value - reference["independent_sites"][set_name]
    where = SET_NAMES[set_name]
    if not math.isfinite(value):
        return f"the {where} {kind.replace('_', '-')} is not finite: training diverged; lower --learning-rate"
    if gain >= max(0.05, 0.01 * abs(reference["independent_sites"][set_name])):
        return f"learned: {gain:.3f} nats per example above independent sites ({where} data)"
    return (
        f"{'barely' if gain > 0 else 'not'} better than independent sites ({gain:+.3f} nats per example on {where} "
        "data): train longer (--epochs) or change --learning-rate"
    )


def write_training_report(
    output: OutputFolder,
    *,
    title: str,
    rows: list[tuple[str, str]],
    metrics: dict,
    result: Any,
    learner_name: str,
    var: str,
    image_shape: tuple[int, int] | None,
    reload_hint: str,
    model_files: list[str],
) -> None:
    """Write ``metrics.json``, ``history.nc``, the figures and ``index.html`` of a training run; print the summary."""
    _matplotlib()
    from ugm_infer.plots import plot_learning_curves, plot_sample_grid

    output.write_text("metrics.json", json_text(metrics))
    idata = result.to_arviz()
    output.write("history.nc", lambda tmp: idata.to_netcdf(tmp))
    images = []
    ev = result.history.get("evaluations", {})
    if any(k.startswith(("train_", "eval_")) and k != "eval_seconds" for k in ev):
        _save_figure(output, "learning_curve.png", plot_learning_curves([(learner_name, result)], x="epoch"))
        images.append(("learning_curve.png", "learning curve"))
    particles = getattr(result.state, "particles", None)
    if image_shape is not None and isinstance(particles, dict) and var in particles:
        chains = np.asarray(particles[var]).reshape(-1, *image_shape)[:36]
        _save_figure(output, "samples.png", plot_sample_grid(chains, image_shape))
        images.append(("samples.png", "persistent chains after training"))
    files = ["metrics.json", "history.nc", *model_files] + [p for p, _ in images]
    page = _write_html(output, f"ugm_infer: {title}", rows, images, files, reload_hint)
    print_table("summary", rows)
    print(f"\nwrote {page} (and {', '.join(files)})")


# ----------------------------------------------------------------------------------
# sampling
# ----------------------------------------------------------------------------------
def write_sample_report(output: OutputFolder, *, title: str, rows, idata, diagnosis, last_states: dict) -> None:
    """Write the draws (netCDF), the diagnosis, the last states, the trace plot and ``index.html``."""
    _matplotlib()
    from ugm_infer.plots import plot_trace

    output.write("samples.nc", lambda tmp: idata.to_netcdf(tmp))
    output.write_text("diagnosis.txt", str(diagnosis) + "\n")
    output.write("final_states.npz", lambda tmp: np.savez(tmp, **last_states))
    _save_figure(output, "trace.png", plot_trace(idata, var_names=["energy"]))
    files = ["samples.nc", "final_states.npz", "diagnosis.txt", "trace.png"]
    page = _write_html(output, title, rows, [("trace.png", "energy trace")], files, None)
    print(diagnosis)
    print_table("summary", rows)
    print(f"\nwrote {page} (and {', '.join(files)})")
