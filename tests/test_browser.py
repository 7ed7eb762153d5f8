"""The report page in a real browser (headless Chromium): images load, no NaN or None, no console errors.

The report is built here from a tiny training run (``ugm-infer fit`` with PT-SAP on
4x4 binary images, so every section of the page appears); the demo's own report is
checked too when ``out/demo`` holds one written by the current code (CI writes it
before the tests).  Skipped, saying why, when no Chromium is installed (CI installs
the Debian ``chromium`` package).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _browser import find_chromium, inspect_page

from ugm_infer.cli import main

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (install the Debian package `chromium`, or set UGM_CHROMIUM)"
)
#: words that mean a number went missing on its way to the page
MISSING = re.compile(r"\b(nan|none|null|undefined|inf)\b", re.IGNORECASE)
SECTIONS = ("Learning curves", "Data and samples", "Mixing of the chains", "Temperature ladder", "Metrics", "Files")


def _check_page(index: Path) -> dict:
    page = inspect_page(index, CHROMIUM)
    assert page["errors"] == [], page["errors"]
    assert page["images"], "the page shows no image"
    for img in page["images"]:
        assert img["complete"] and img["width"] > 0 and img["height"] > 0, img
    missing = sorted({m.group(0) for m in MISSING.finditer(page["text"])})
    assert not missing, f"visible text reads {missing}"
    for href in page["links"]:
        assert not re.match(r"^[a-z]+:", href), f"not a relative link: {href}"
        assert (index.parent / href).is_file(), f"broken link: {href}"
    assert page["scrollWidth"] <= 1280, "the page scrolls sideways on a 1280-pixel screen"
    return page


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    rng = np.random.default_rng(0)
    prototypes = rng.random((3, 16)) < 0.4
    x = prototypes[rng.integers(0, 3, 300)] ^ (rng.random((300, 16)) < 0.05)
    folder = tmp_path_factory.mktemp("report")
    np.savez(folder / "digits.npz", train=x[:200].astype(np.float32), test=x[200:].astype(np.float32))
    out = folder / "out"
    argv = ["fit", "--data", str(folder / "digits.npz"), "--model", "boltzmann_machine", "--learner", "pt_sap"]
    argv += ["--num-betas", "3", "--epochs", "3", "--eval-every", "1", "--batch-size", "50", "--num-chains", "6"]
    assert main([*argv, "--progress", "off", "--out", str(out)]) == 0
    return out / "index.html"


@pytest.mark.slow  # a second check (CI time budget); run with `pytest -m slow`
def test_report_page_in_a_browser(tiny_report):
    page = _check_page(tiny_report)
    for title in SECTIONS:
        assert title in page["text"], title
    names = {img["src"] for img in page["images"]}
    assert {"learning_curve.png", "samples.png", "trace.png", "ladder.png"} <= names


def test_the_check_sees_a_broken_page(tmp_path):
    """A missing image and a script error are caught (the checks above can fail)."""
    index = tmp_path / "index.html"
    index.write_text('<!doctype html><html><body><p>ok</p><img src="missing.png"><script>nope()</script></body></html>')
    page = inspect_page(index, CHROMIUM)
    assert page["images"][0]["width"] == 0
    assert any("missing.png" in e for e in page["errors"]) and any("nope" in e for e in page["errors"])


def test_demo_report_in_a_browser():
    """``out/demo`` as CI writes it with ``ugm-infer demo`` before the tests (skipped when absent or older than the code)."""
    index = ROOT / "out" / "demo" / "index.html"
    code = max(p.stat().st_mtime for p in (ROOT / "ugm_infer" / "cli").glob("*.py"))
    if not index.is_file() or index.stat().st_mtime < code:
        pytest.skip("no out/demo/index.html written by the current code (run `ugm-infer demo --out out/demo`)")
    page = _check_page(index)
    for title in SECTIONS:
        assert title in page["text"], title
