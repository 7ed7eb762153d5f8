"""Open a page in headless Chromium and report what a reader would see.

The browser is driven through the Chrome DevTools Protocol over a pipe
(``--remote-debugging-pipe``: NUL-separated JSON messages on file descriptors 3 and 4),
so nothing beyond the standard library and a Chromium binary is needed.
:func:`inspect_page` loads a file, waits for the load event, and returns every image
with its natural size, the page's visible text, and the console messages, uncaught
exceptions and log entries (failed resource loads among them) of level error.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

_PAGE_STATE = """JSON.stringify({
  images: Array.from(document.images).map(i => ({src: i.getAttribute('src'), complete: i.complete,
                                                  width: i.naturalWidth, height: i.naturalHeight})),
  text: document.body.innerText,
  links: Array.from(document.links).map(a => a.getAttribute('href')),
  scrollWidth: document.documentElement.scrollWidth
})"""


def find_chromium() -> str | None:
    """A Chromium or Chrome executable on the path (``UGM_CHROMIUM`` overrides), or ``None``."""
    chosen = os.environ.get("UGM_CHROMIUM")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class _Pipe:
    """The DevTools connection: commands out on one pipe, replies and events in on the other."""

    def __init__(self, write_fd: int, read_fd: int, timeout: float):
        self.write_fd, self.read_fd, self.timeout = write_fd, read_fd, timeout
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise EOFError("the browser closed the connection")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))


def _launch(executable: str, profile: str) -> tuple[subprocess.Popen, int, int]:
    """Start the browser with the DevTools pipe on its descriptors 3 (commands) and 4 (replies)."""
    commands_r, commands_w = os.pipe()
    replies_r, replies_w = os.pipe()
    # descriptors above 10 so that moving them onto 3 and 4 cannot overwrite one another
    child_r = fcntl.fcntl(commands_r, fcntl.F_DUPFD_CLOEXEC, 10)
    child_w = fcntl.fcntl(replies_w, fcntl.F_DUPFD_CLOEXEC, 10)
    for fd in (commands_r, replies_w):
        os.close(fd)
    # a small Python trampoline places them (no preexec_fn: unsafe in a process with threads)
    place = (
        f"import os, sys; os.dup2({child_r}, 3); os.dup2({child_w}, 4); os.close({child_r}); os.close({child_w}); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    argv = [sys.executable, "-c", place, executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"]
    proc = subprocess.Popen(
        argv, pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    os.close(child_r)
    os.close(child_w)
    return proc, commands_w, replies_r


def inspect_page(path: str | os.PathLike, executable: str, *, timeout: float = 30.0, width: int = 1280) -> dict:
    """Load ``path`` and return ``{"images", "text", "links", "scrollWidth", "errors"}`` as the browser sees them."""
    profile = tempfile.mkdtemp(prefix="ugm-chromium-")
    proc, write_fd, read_fd = _launch(executable, profile)
    try:
        pipe = _Pipe(write_fd, read_fd, timeout)
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            pipe.call(f"{domain}.enable", session=session)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        pipe.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        pipe.wait_for("Page.loadEventFired")
        state = pipe.call("Runtime.evaluate", {"expression": _PAGE_STATE, "returnByValue": True}, session=session)
        page = json.loads(state["result"]["value"])
        errors = []
        for event in pipe.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(f"exception: {details.get('text', '')} {details.get('exception', {}).get('description', '')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                entry = params["entry"]
                errors.append(f"log: {entry.get('text', '')} {entry.get('url', '')}".strip())
        page["errors"] = errors
        try:
            pipe.call("Browser.close")
        except (EOFError, RuntimeError, TimeoutError, OSError):
            pass
        return page
    finally:
        for fd in (write_fd, read_fd):
            os.close(fd)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
