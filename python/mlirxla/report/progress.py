"""Progress on a terminal, nothing when the output is piped.

- `compiling(label)`: around a compile. Once it has run for a second, one line, redrawn in
  place, says which pass or kernel it is at (`mlirxla: compiling jit_f 3.2 s: pass 41
  xhlo-priority-fusion (fusion)`, `... kernel 7/23 compile fusion_3`); the line is wiped
  when the compile ends, so what the tool prints afterwards reads as without it.
- `Bar`: the conformance runner's progress bar with its counts.

Both draw on stderr only when it is a terminal (`MLIRXLA_PROGRESS=0` turns them off there
too, `=1` forces them on).
"""

import contextlib
import os
import shutil
import sys
import threading
import time

from mlirxla import phases

AFTER_S = 1.0  # a compile quicker than this shows nothing
INTERVAL_S = 0.1
CLEAR = "\r\033[K"


def wanted(stream) -> bool:
    setting = os.environ.get("MLIRXLA_PROGRESS", "")
    if setting in ("0", "1"):
        return setting == "1"
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def width(stream) -> int:
    return max(shutil.get_terminal_size((100, 24)).columns - 1, 20)


class CompilePosition(phases.Listener):
    """Which pass and kernel the compile on this thread is at (`doing`)."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.start = time.monotonic()
        self.doing = "starting"
        self.passes = 0
        self.pipelines: list[str] = []  # the pipelines running, innermost last
        self.kernels = 0
        self.kernel_count = 0

    def started(self, phase: phases.Phase) -> None:
        if phase.thread != self.thread:
            return
        if phase.category == "pipeline":
            self.pipelines.append(phase.name)
        elif phase.category == "pass":
            self.passes += 1
            self.doing = f"pass {self.passes} {phase.name}" + (f" ({self.pipelines[-1]})" if self.pipelines else "")
        elif phase.category == "kernel":
            self.kernels += 1
            of = f"/{self.kernel_count}" if self.kernel_count else ""
            self.doing = f"kernel {self.kernels}{of} compile {phase.name}"
        elif phase.category == "backend":
            self.doing = phase.name
        elif phase.category == "frontdoor":
            self.doing = "import"

    def finished(self, phase: phases.Phase, end_ns: int) -> None:
        if phase.thread == self.thread and phase.category == "pipeline" and self.pipelines:
            self.pipelines.pop()

    def published(self, kind: str, value) -> None:
        if kind == "kernel-count" and threading.get_ident() == self.thread:
            self.kernel_count = value


class CompileProgress(CompilePosition):
    """Where the compile on this thread is, drawn by a ticker thread."""

    def __init__(self, label: str, stream, after_s: float = AFTER_S, interval_s: float = INTERVAL_S):
        super().__init__()
        self.label, self.stream, self.after_s, self.interval_s = label, stream, after_s, interval_s
        self.drawn = False
        self.stopped = threading.Event()
        self.ticker = threading.Thread(target=self.tick, name="mlirxla-progress", daemon=True)

    def line(self) -> str:
        """`mlirxla: compiling LABEL 3.2 s: WHAT`, the label left out first when the terminal is
        too narrow, then the end cut."""
        seconds = f"{time.monotonic() - self.start:.1f} s"
        limit = width(self.stream)
        text = f"mlirxla: compiling {self.label} {seconds}: {self.doing}"
        if len(text) > limit:
            text = f"mlirxla: compiling {seconds}: {self.doing}"
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def tick(self) -> None:
        while not self.stopped.wait(self.interval_s):
            if time.monotonic() - self.start >= self.after_s:
                self.write(CLEAR + self.line())
                self.drawn = True

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.stopped.set()

    def begin(self) -> None:
        self.ticker.start()

    def end(self) -> None:
        self.stopped.set()
        self.ticker.join()
        if self.drawn:
            self.write(CLEAR)


@contextlib.contextmanager
def compiling(label: str, stream=None, after_s: float = AFTER_S, interval_s: float = INTERVAL_S):
    """Show the compile inside the block on `stream` (stderr) when it is a terminal."""
    stream = stream or sys.stderr
    if not wanted(stream):
        yield None
        return
    progress = CompileProgress(os.path.basename(label) or label, stream, after_s, interval_s)
    phases.add_listener(progress)
    progress.begin()
    try:
        yield progress
    finally:
        phases.remove_listener(progress)
        progress.end()


class Bar:
    """`[#######.........] 1234/3000  1200 passed  30 failed  4 unsupported  12 s`, redrawn as
    outcomes arrive; `above(text)` prints a line above it (a failure) without tearing it."""

    def __init__(self, total: int, stream=None, out=None):
        self.total, self.done = total, 0
        self.counts: dict[str, int] = {}
        self.stream = stream or sys.stderr
        self.out = out or sys.stdout
        self.shown = wanted(self.stream)
        self.start = time.monotonic()
        self.lock = threading.Lock()

    def add(self, status: str) -> None:
        with self.lock:
            self.done += 1
            self.counts[status] = self.counts.get(status, 0) + 1
            self.draw()

    def line(self) -> str:
        counts = "  ".join(f"{count} {status}" for status, count in sorted(self.counts.items()))
        tail = f" {self.done}/{self.total}  {counts}  {time.monotonic() - self.start:.0f} s"
        room = max(width(self.stream) - len(tail) - 2, 10)
        filled = room * self.done // max(self.total, 1)
        return f"[{'#' * filled}{'.' * (room - filled)}]{tail}"

    def draw(self) -> None:
        if self.shown:
            self.stream.write(CLEAR + self.line())
            self.stream.flush()

    def above(self, text: str) -> None:
        """Print `text` (on stdout) as a line of its own, the bar redrawn under it."""
        with self.lock:
            if self.shown:
                self.stream.write(CLEAR)
                self.stream.flush()
            print(text, file=self.out, flush=True)
            self.draw()

    def close(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write(CLEAR)
                self.stream.flush()
