"""The ``ugm-infer`` command line: bad options exit with code 2 and one line, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "args, message",
    [
        (["demo", "--epochs", "0"], "--epochs must be >= 1"),
        (["demo", "--hidden", "30"], "--hidden must be between 1 and 24"),
    ],
)
def test_bad_options_exit_2_with_one_line(args, message):
    proc = subprocess.run([sys.executable, "-m", "ugm_infer.cli", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("ugm-infer: error:")
    assert "Traceback" not in proc.stderr


def test_unknown_option_is_an_argparse_error():
    proc = subprocess.run([sys.executable, "-m", "ugm_infer.cli", "demo", "--nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr
