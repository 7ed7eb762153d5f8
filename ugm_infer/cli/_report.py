"""Everything the commands write for a reader: the summary table, ``metrics.json``, figures, ``index.html``.

All report files go through this module (and :class:`~ugm_infer.cli._output.OutputFolder`,
so they are written atomically and only where planned); the commands compute, this
module presents.  Every command's page has the same layout, and a section that does
not apply to a run is left out, never shown empty:

1. the title, one line saying what was run, and the verdict;
2. **learning curves** (``fit``, ``demo``): train and held-out (pseudo-)log-likelihood
   of each learner against epochs, the independent-sites baseline, the kept model;
3. **data and samples**: training examples beside the chains' last states (square
   binary inputs only);
4. **mixing of the chains**: ArviZ trace of the energy, R-hat and bulk/tail ESS, and the
   plain-language findings of :func:`ugm_infer.diagnostics.diagnose`;
5. **temperature ladder**: the inverse temperatures with the swap rate of every pair
   (parallel tempering);
6. **metrics** and settings (one row per quantity);
7. **files**: relative links to the saved model, the netCDF files and the rest.

Under every figure is a one-line reading computed from the same numbers
(:mod:`ugm_infer.cli._figures`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ugm_infer.cli._output import OutputFolder
from ugm_infer.cli._page import Fragment, Page, fmt, fmt_count

TRAINING_FILES = ("index.html", "metrics.json", "learning_curve.png", "samples.png", "trace.png", "ladder.png")
SAMPLE_FILES = ("index.html", "samples.nc", "final_states.npz", "diagnosis.txt", "trace.png", "samples.png", "ladder.png")
EVALUATION_FILES = ("index.html", "metrics.json")
SET_NAMES = {"train": "train", "eval": "held-out"}
#: figure resolution (dots per inch): a 10-inch figure is 900 pixels wide
DPI = 90


def training_files(names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The files of a training report; with several learners the netCDF files carry the learner's name."""
    suffixes = [""] if not names else [f"_{n}" for n in names]
    return TRAINING_FILES + tuple(f"{stem}{s}.nc" for s in suffixes for stem in ("history", "chains"))


# ----------------------------------------------------------------------------------
# small pieces
# ----------------------------------------------------------------------------------
def json_safe(obj: Any, path: str = "", notes: list[str] | None = None) -> Any:
    """``obj`` with every NaN/inf float replaced by ``None``; each replacement is noted in ``notes``."""
    if isinstance(obj, dict):
        return {k: json_safe(v, f"{path}.{k}" if path else str(k), notes) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v, f"{path}[{i}]", notes) for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist(), path, notes)
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
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


def _save_figure(output: OutputFolder, name: str, fig) -> None:
    fig = fig if hasattr(fig, "savefig") else fig.figure
    output.write(name, lambda tmp: fig.savefig(tmp, dpi=DPI, format="png"))


def _matplotlib() -> None:
    import matplotlib

    matplotlib.use("Agg")


def _write_page(output: OutputFolder, page: Page, files: list[tuple[str, str]], reload_hint: str | None) -> None:
    page.heading("Files", "files")
    page.links(files)
    if reload_hint is not None:
        page.code(f"model, params = ugm_infer.load_model({reload_hint})", "Reload the saved model in Python:")
    output.write_text("index.html", page.render())


# ----------------------------------------------------------------------------------
# verdicts
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


# ----------------------------------------------------------------------------------
# sections shared by the pages
# ----------------------------------------------------------------------------------
def _samples_section(page, output, files, data, samples, image_shape, what: str) -> None:
    from ugm_infer.cli import _figures

    if image_shape is None or not samples:
        return
    fig, reading = _figures.samples_vs_data(data, samples, image_shape)
    _save_figure(output, "samples.png", fig)
    page.heading("Data and samples" if data is not None else "Samples", "samples")
    page.paragraph(what)
    page.figure("samples.png", "training examples and the last state of the chains, as images", reading)
    files.append(("samples.png", "the figure above"))


def _diagnosis_fragment(label: str, run) -> Fragment:
    """R-hat / ESS table, kernel rates and the findings of ``diagnose`` for one set of chains."""
    frag = Fragment()
    table = run.diagnosis.table
    post = run.idata.posterior
    frag.paragraph(f"{label}: {post.sizes['chain']} chains x {post.sizes['draw']} draws; one draw = {run.kernel}.")
    rows = [
        (name, fmt(row["rhat"], 3), fmt_count(row["ess_bulk"]), fmt_count(row["ess_tail"]), fmt(row["autocorr_lag1"], 2))
        for name, row in table.items()
        if isinstance(row, dict)
    ]
    if rows:
        frag.table(("statistic", "R-hat", "bulk ESS", "tail ESS", "lag-1 autocorrelation"), rows)
    kernel_rows = []
    if "swap_rate" in table:
        rates = np.asarray(table["swap_rate"], np.float64)
        kernel_rows.append(("swap rate per pair (lowest)", fmt(np.nanmin(rates), 2)))
    if "round_trips" in table:
        kernel_rows.append(("round trips (all chains)", fmt_count(np.sum(table["round_trips"]))))
    if "tt_acceptance" in table:
        kernel_rows.append(("tempered-transitions acceptance", fmt(table["tt_acceptance"], 3)))
    if "acceptance_rate" in table:
        kernel_rows.append(("Metropolis acceptance", fmt(table["acceptance_rate"], 3)))
    if kernel_rows:
        frag.table(None, kernel_rows)
    head = str(run.diagnosis).splitlines()[0]
    frag.paragraph(f"Diagnosis: {head}")
    frag.findings([(f.severity, f"{f.statistic}: {f.message}") for f in run.diagnosis.findings])
    return frag


def _mixing_section(page, output, files, runs: Sequence[tuple[str, Any]], what: str) -> None:
    """ArviZ trace of the energy, the diagnosis tables, and the ladder of tempered runs."""
    from ugm_infer.cli import _figures

    if not runs:
        return
    page.heading("Mixing of the chains (ArviZ)", "mixing")
    page.paragraph(what)
    fig, reading = _figures.chain_traces(runs)
    _save_figure(output, "trace.png", fig)
    page.figure("trace.png", "ArviZ trace plot of the energy of the chains", reading)
    files.append(("trace.png", "the trace plot above"))
    page.columns([_diagnosis_fragment(label, run) for label, run in runs])
    tempered = [(label, run) for label, run in runs if run.betas is not None and "swap_rate" in run.diagnosis.table]
    if tempered:
        label, run = tempered[0]
        fig, reading = _figures.ladder(label, run)
        _save_figure(output, "ladder.png", fig)
        page.heading("Temperature ladder", "ladder")
        page.figure("ladder.png", "inverse temperatures and the swap rate of every adjacent pair", reading)
        files.append(("ladder.png", "the ladder figure above"))


# ----------------------------------------------------------------------------------
# training (fit, demo)
# ----------------------------------------------------------------------------------
class LearnerReport(NamedTuple):
    """One trained learner, as the report shows it.

    name, label
        The learner's name (file suffix) and how the page calls it ("PCD-5").
    result
        The :class:`~ugm_infer.FitResult`.
    kept
        ``{"step", "epoch", "metrics"}`` of the kept model (the best held-out evaluation,
        else the last one).
    seconds
        Wall time of ``ui.fit`` (compilation and evaluations included).
    sweeps
        Gibbs sweeps per update (``None`` when the learner does not run Gibbs sweeps).
    chains
        The continued persistent chains (:class:`~ugm_infer.cli._chains.ChainRun`) or ``None``.
    suffix
        ``""`` for a single learner, ``"_<name>"`` when several share the folder.
    """

    name: str
    label: str
    result: Any
    kept: dict
    seconds: float
    sweeps: int | None
    chains: Any
    suffix: str = ""

    @property
    def history(self) -> dict:
        return self.result.history


def _metrics_rows(runs: Sequence[LearnerReport], kind: str | None) -> list[list[str]]:
    """One row per quantity, one column per learner (a row that would repeat another is left out)."""
    rows: list[list[str]] = []
    label = "pseudo-log-likelihood" if kind and kind.startswith("pseudo") else "log-likelihood"
    last = [{k: float(np.asarray(v)[-1]) for k, v in r.history["evaluations"].items()} for r in runs]
    if kind:
        for set_name in ("eval", "train"):
            key = f"{set_name}_{kind}"
            if all(key in r.kept["metrics"] for r in runs):
                rows.append([f"{SET_NAMES[set_name]} {label}, kept model"] + [fmt(r.kept["metrics"][key]) for r in runs])
        rows.append(["kept model from"] + [f"epoch {fmt(r.kept['epoch'], 0)}" for r in runs])
        key = f"eval_{kind}" if all(f"eval_{kind}" in e for e in last) else f"train_{kind}"
        if any(r.kept["step"] != e["step"] for r, e in zip(runs, last)):
            rows.append([f"{SET_NAMES[key.split('_')[0]]} {label}, last epoch"] + [fmt(e[key]) for e in last])
    if any(r.sweeps for r in runs):
        rows.append(["Gibbs sweeps per update"] + [fmt_count(r.sweeps) if r.sweeps else "n/a" for r in runs])
    rows.append(["updates"] + [fmt_count(e.get("step")) for e in last])
    rows.append(["training time, s"] + [fmt(r.history["timing"]["train_seconds"], 1) for r in runs])
    rows.append(["total time, s (compilation, evaluations)"] + [fmt(r.seconds, 1) for r in runs])
    if any(r.chains is not None for r in runs):
        for stat, what in (("rhat", "R-hat"), ("ess_bulk", "bulk ESS"), ("ess_tail", "tail ESS")):
            cells = []
            for r in runs:
                row = r.chains.diagnosis.table.get("energy", {}) if r.chains is not None else {}
                cells.append((fmt(row.get(stat), 3) if stat == "rhat" else fmt_count(row.get(stat))) if row else "n/a")
            rows.append([f"energy {what} (chains)"] + cells)
        rows.append(
            ["mixing diagnosis"]
            + [("ok" if r.chains.diagnosis.ok else "problems found") if r.chains is not None else "n/a" for r in runs]
        )
    return rows


def write_training_report(
    output: OutputFolder,
    *,
    title: str,
    intro: str,
    runs: Sequence[LearnerReport],
    kind: str | None,
    reference: dict,
    verdict_text: str,
    settings_rows: list[tuple[str, str]],
    console_rows: list[tuple[str, str]],
    metrics: dict,
    data: np.ndarray,
    image_shape: tuple[int, int] | None,
    sites_word: str,
    mixing_note: str,
    saved_note: str,
    reload_hint: str,
    model_files: list[str],
) -> None:
    """Write ``metrics.json``, the netCDF files, the figures and ``index.html`` of a training run; print the summary."""
    _matplotlib()
    from ugm_infer.cli import _figures
    from ugm_infer.diagnostics import to_netcdf

    files: list[tuple[str, str]] = [
        ("model.json", f"the saved model ({saved_note}); with params.npz"),
        ("params.npz", "its parameters"),
        ("metrics.json", "settings, metrics, references and every evaluation"),
    ]
    output.write_text("metrics.json", json_text(metrics))
    for r in runs:
        output.write(f"history{r.suffix}.nc", lambda tmp, r=r: to_netcdf(r.result.to_arviz(), tmp))
        files.append((f"history{r.suffix}.nc", f"{r.label}: learning history, ArviZ InferenceData (netCDF)"))
        if r.chains is not None:
            output.write(f"chains{r.suffix}.nc", lambda tmp, r=r: to_netcdf(r.chains.idata, tmp))
            files.append((f"chains{r.suffix}.nc", f"{r.label}: draws of the continued chains (netCDF)"))
    page = Page(f"ugm_infer: {title}", intro)
    page.verdict(f"Saved model: {saved_note}. Verdict: {verdict_text}.", ok=verdict_text.startswith("learned"))
    if kind is not None:
        fig, reading = _figures.learning_curves(runs, reference, kind, sites_word)
        _save_figure(output, "learning_curve.png", fig)
        page.heading("Learning curves", "curves")
        page.figure("learning_curve.png", "log-likelihood against epochs for each learner", reading)
        files.append(("learning_curve.png", "the learning curves above"))
    chained = [(r.label, r.chains) for r in runs if r.chains is not None]
    samples = [(r.label, r.chains.last[_visible(r)]) for r in runs if r.chains is not None and _visible(r) in r.chains.last]
    _samples_section(
        page, output, files, data, samples, image_shape,
        "Left: training examples. Then the last state of the first chains of each learner, continued at the kept "
        "parameters (see below): samples of the learned model.",
    )  # fmt: skip
    _mixing_section(page, output, files, chained, mixing_note)
    page.heading("Metrics", "metrics")
    page.table([""] + [r.label for r in runs], _metrics_rows(runs, kind))
    if kind is not None:
        sets = [s for s in ("train", "eval") if s in reference["uniform"]]
        page.table(
            ["reference (nats per example)"] + [SET_NAMES[s] for s in sets],
            [
                [f"independent {sites_word}"] + [fmt(reference["independent_sites"][s]) for s in sets],
                ["uniform"] + [fmt(reference["uniform"][s]) for s in sets],
            ],
        )
    page.table(None, settings_rows, numeric_from=0)
    _write_page(output, page, files, reload_hint)
    print_table("summary", console_rows)
    print(f"\nwrote {output.path / 'index.html'} (and {', '.join(f for f, _ in files)})")


def _visible(r: LearnerReport) -> str:
    visible = getattr(r.result.state, "particles", None) or {}
    return "v" if "v" in visible else next(iter(visible), "")


# ----------------------------------------------------------------------------------
# sampling
# ----------------------------------------------------------------------------------
def write_sample_report(
    output: OutputFolder,
    *,
    title: str,
    intro: str,
    rows: list[tuple[str, str]],
    chains,
    var: str,
    image_shape: tuple[int, int] | None,
) -> None:
    """Write the draws (netCDF), the diagnosis, the last states, the figures and ``index.html``."""
    _matplotlib()
    from ugm_infer.diagnostics import to_netcdf

    output.write("samples.nc", lambda tmp: to_netcdf(chains.idata, tmp))
    output.write_text("diagnosis.txt", str(chains.diagnosis) + "\n")
    output.write("final_states.npz", lambda tmp: np.savez(tmp, **chains.last))
    files = [
        ("samples.nc", "the draws' statistics and kernel infos, ArviZ InferenceData (netCDF)"),
        ("final_states.npz", "the last configuration of every chain"),
        ("diagnosis.txt", "the diagnosis as text"),
    ]
    page = Page(title, intro)
    head = str(chains.diagnosis).splitlines()[0]
    page.verdict(f"Diagnosis: {head}", ok=chains.diagnosis.ok)
    samples = [("last state of each chain", chains.last[var])] if var in chains.last else []
    _samples_section(page, output, files, None, samples, image_shape, "The last state of the first chains, as images.")
    _mixing_section(page, output, files, [("chains", chains)], f"One draw = {chains.kernel}.")
    page.heading("Metrics", "metrics")
    page.table(None, rows, numeric_from=0)
    _write_page(output, page, files, None)
    print(chains.diagnosis)
    print_table("summary", rows)
    print(f"\nwrote {output.path / 'index.html'} (and {', '.join(f for f, _ in files)})")


# ----------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------
def write_evaluation_report(output: OutputFolder, *, title: str, intro: str, row: dict, rows: list[tuple[str, str]]) -> None:
    """``metrics.json`` and ``index.html`` of an evaluation: the log-likelihood beside its references."""
    output.write_text("metrics.json", json_text(row))
    page = Page(title, intro)
    ref = row["reference"]
    gain = row["log_likelihood"] - ref["independent_sites"]
    page.verdict(
        f"{fmt(gain, 3, signed=True)} nats per example against independent sites ({fmt(ref['independent_sites'])}), "
        f"{fmt(row['log_likelihood'] - ref['uniform'], 3, signed=True)} against uniform ({fmt(ref['uniform'])}).",
        ok=gain > 0,
    )
    page.heading("Metrics", "metrics")
    page.table(None, rows, numeric_from=0)
    _write_page(output, page, [("metrics.json", "the numbers above, as JSON")], None)
    print(f"wrote {output.path / 'index.html'} (and metrics.json)")
