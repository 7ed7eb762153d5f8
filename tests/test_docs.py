"""The documentation builds with ``mkdocs build --strict`` (any warning fails it).

Strict mode turns broken links, pages missing from the nav and docstrings that
mkdocstrings cannot render into errors.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_strict_build(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "learn" / "index.html").is_file()

    # a learner whose signature and docstring are completed at import is shown with them (docs/griffe_learners.py)
    learn_page = re.sub(r"<[^>]+>", "", (tmp_path / "site" / "api" / "learn" / "index.html").read_text())
    assert "sap(model, kernel=None, optimizer=None, num_particles=100, *, num_steps_per_update=1" in learn_page
    assert "Monte-Carlo E-step" in learn_page.split("sap(model, kernel=None", 1)[1].split("pcd(model", 1)[0]
