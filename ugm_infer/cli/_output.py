"""Safe output: check every file a command will write before any work, then write atomically.

Rules (``docs/cli.md``, "Output files"):

* an existing file or symbolic link among the files a command writes is an error
  unless ``--force`` is given; files the command does not write are never touched;
* the output folder is created only after every check has passed, and a command that
  fails before finishing removes what it created (no empty folders left behind);
* every file is written to a temporary name beside it and renamed into place, so a
  symbolic link is replaced by the new file, never followed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ugm_infer.cli._options import CLIError
from ugm_infer.io import _replace_atomically


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


class OutputFolder:
    """The output folder of a command and the names it will write there.

    ``names`` are file names, or folder names (``"checkpoint/"``), relative to
    ``folder``; ``flag`` names the option in error messages.
    """

    def __init__(self, folder: str, names: Iterable[str], *, force: bool, flag: str = "--out"):
        self.path = Path(folder)
        self.names = tuple(names)
        self.force = force
        self.flag = flag
        self._created: list[Path] = []
        self._written: list[Path] = []

    def existing(self) -> list[str]:
        """The planned names that already exist (files, folders or links)."""
        if not self.path.is_dir():
            return []
        return [n for n in self.names if _exists(self.path / n.rstrip("/"))]

    def check(self, *, allowed: Iterable[str] = ()) -> None:
        """Refuse a non-folder ``--out``, existing planned files and planted links (unless ``--force``).

        ``allowed`` names may exist (a checkpoint being resumed) but must not be links.
        """
        if _exists(self.path) and not self.path.is_dir():
            raise CLIError(f"{self.flag}: {self.path} exists and is not a folder")
        if self.force:
            return
        allowed = {a.rstrip("/") for a in allowed}
        for name in self.existing():
            target = self.path / name.rstrip("/")
            if target.is_symlink():
                raise CLIError(
                    f"{self.flag}: {target} is a symbolic link; the command would replace it (remove it, or pass --force)"
                )
            if name.rstrip("/") not in allowed:
                raise CLIError(f"{self.flag}: {target} exists; choose another {self.flag} or pass --force to overwrite it")

    def create(self) -> Path:
        """Create the folder (and missing parents), remembering what was created."""
        missing = []
        p = self.path
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        self.path.mkdir(parents=True, exist_ok=True)
        self._created.extend(reversed(missing))
        return self.path

    def write(self, name: str, writer: Callable[[str], Any]) -> Path:
        """``writer(tmp_path)`` then rename onto ``folder/name``; returns the path."""
        if name not in self.names:
            raise RuntimeError(f"{name!r} is not among the planned outputs {self.names}")  # a programming error
        target = self.path / name
        _replace_atomically(str(target), writer)
        self._written.append(target)
        return target

    def write_text(self, name: str, text: str) -> Path:
        def writer(tmp: str) -> None:
            with open(tmp, "w") as f:
                f.write(text)

        return self.write(name, writer)

    def discard(self, extra: Iterable[str] = ()) -> None:
        """Remove what this run wrote (and ``extra`` names) and the folders it created, if empty."""
        for path in self._written:
            if path.is_file() and not path.is_symlink():
                path.unlink()
        for name in extra:
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif _exists(target):
                target.unlink()
        for folder in reversed(self._created):
            try:
                folder.rmdir()
            except OSError:
                break


def check_output_file(path: str | None, *, force: bool, flag: str = "--out") -> None:
    """Refuse an output file path that is a folder, or an existing file or link (unless ``--force``)."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise CLIError(f"{flag}: {path} is a folder; give a file name such as {Path(path) / 'result.json'}")
    if _exists(target) and not force:
        kind = "a symbolic link" if target.is_symlink() else "an existing file"
        raise CLIError(f"{flag}: {path} is {kind}; choose another {flag} or pass --force to overwrite it")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"{flag}: {parent} is not a folder")


def write_output_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, creating its parent folder (checked before)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)

    def writer(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    _replace_atomically(path, writer)
