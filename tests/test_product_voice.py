"""The product speaks only of itself.

Docs, docstrings, comments, example and benchmark headers say what the code is and does,
never how or by whom it was written: no work sessions, agents, leads, or labels of the
tracker's issues ("issue #9, item 1f").  This test scans the text files that ship or are
read as documentation and fails on any phrase of that kind, with the file, line and match.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Folders and files scanned (recursively), and the file types read in them.
SCANNED = ("docs", "ugm_infer", "examples", "benchmarks", "README.md", "mkdocs.yml")
SUFFIXES = {".md", ".py", ".txt", ".yml", ".yaml", ".toml", ".cfg", ".rst"}

#: Phrases that describe how or by whom the code was written.  Word boundaries keep
#: legitimate words out ("reagent", "leading", "helper function", "the items() of a dict").
FORBIDDEN = {
    "work session": r"\bsessions?\b",
    "agent": r"\bagents?\b",
    "helper agent": r"\bhelpers?\s+agents?\b",
    "the lead (as a person)": r"\bthe\s+lead\b",
    "issue label": r"\bissues?\s*#\s*\d+",
    "issue label (named)": r"\bissue\s+\"[^\"]+\"",
    "issue item label": r"#\d+\s*,?\s*items?\b",
    "item label": r"\bitems?\s+\d+[a-z]\b",
    "other engineers": r"\bother\s+engineers?\b",
    "scratch path of a developer": r"/work/scratch/",
    "coordinator of the work": r"\bthe\s+coordinator\s+(?:merges|says|asked|will)\b",
}
PATTERNS = {name: re.compile(rx, re.IGNORECASE) for name, rx in FORBIDDEN.items()}


def _files():
    for entry in SCANNED:
        path = ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and f.suffix in SUFFIXES and "__pycache__" not in f.parts:
                    yield f


def _hits(text: str) -> list[tuple[int, str, str]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for name, rx in PATTERNS.items():
            m = rx.search(line)
            if m:
                out.append((lineno, name, m.group(0)))
    return out


def test_docs_and_code_describe_the_product():
    found = []
    files = list(_files())
    assert len(files) > 50, "the scan found too few files; is SCANNED out of date?"
    for f in files:
        for lineno, name, match in _hits(f.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{f.relative_to(ROOT)}:{lineno}: {name}: {match!r}")
    assert not found, "text about how the code was written, not what it is:\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    bad = [
        "Until the lead adds the exports, import from the modules:",
        "made it faster (session 4)",
        "2 CPU cores shared with 4-5 other agents' jobs",
        "re-run with no helper agents",
        "Issue #9, item 1f.  Periodic lattices",
        '"""Memory case of issue #9 (item 3)',
        'Cases (issue "Foundation", item 9):',
        "the FLOP efficiency (#9 1f, #9, item 3)",
        "the work of other engineers",
        "(Run as `--out /work/scratch/h-smcx/full2`)",
    ]
    for text in bad:
        assert _hits(text), text
    fine = [
        "a reagent of the assay",
        "the leading axis of the state",
        "flat <-> state helpers used by the probes",
        "for name, v in states.items():",
        "python run_cluster.py --coordinator 10.0.0.1:1234",
        "Issues of mixing are reported by diagnose.",
    ]
    for text in fine:
        assert not _hits(text), text
