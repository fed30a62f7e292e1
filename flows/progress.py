"""Terminal progress of `ragspan evaluate`: shards, steps and judge calls, with rate and ETA.

    Progress (base: counts, rate, ETA; prints nothing)
    ├── BarProgress     one line redrawn in place on a terminal (stderr)
    ├── LineProgress    one plain line per finished shard (CI logs without a terminal)
    └── JsonlProgress   one JSON object per event (machine-readable CI logs)

The CLI chooses one (`--progress auto|bar|plain|jsonl|none`; `auto` = bar on a terminal,
plain otherwise; `--quiet` = none) and makes it current with `activate`. The flow's
StepLedger reports every step through `current()`, so the flow itself stays wiring only;
without an active reporter `current()` is a no-op `Progress`.

Events (the `event` field of JSON lines): `start` (answers, shards), `step` (a step of a
shard finished: step, state, calls), `shard` (a shard finished), `done` (claims, labels).
Live judge calls reported through `judge_calls` update the bar, and the counts of the next event.
Progress goes to stderr, so `--json` output on stdout stays one parseable line.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from ragspan.tasks.judges.base import listen_to_calls

MODES = ("auto", "bar", "plain", "jsonl", "none")


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """Counts and derived numbers; subclasses decide what to print."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.run = ""
        self.answers_total = 0
        self.shards_total = 0
        self.answers_done = 0
        self.shards_done = 0
        self.shard_answers = 0  # answers in the shard being processed
        self.step = ""
        self.calls = 0  # judge calls made by finished steps and reported live
        self._live = 0  # live calls reported during the current step (replaced at its end)
        self._lock = threading.Lock()

    # -- numbers ------------------------------------------------------------------------

    def elapsed(self) -> float:
        return max(0.0, self.clock() - self.started)

    def rate(self) -> float | None:
        """Judge calls per second so far."""
        e = self.elapsed()
        return (self.calls + self._live) / e if e > 0 and (self.calls + self._live) else None

    def eta(self) -> float | None:
        """Seconds left, from the answers finished so far (None before the first shard)."""
        if not self.answers_done or not self.answers_total:
            return None
        left = max(0, self.answers_total - self.answers_done)
        return self.elapsed() / self.answers_done * left

    def fraction(self) -> float:
        return self.answers_done / self.answers_total if self.answers_total else 0.0

    # -- events (called by the CLI and the StepLedger) ------------------------------------

    def start(self, run: str, answers: int, shards: int) -> None:
        self.run, self.answers_total, self.shards_total = run, answers, shards
        self.started = self.clock()
        self.emit("start", answers=answers, shards=shards)

    def reused(self, answers: int, shards: int) -> None:
        """`answers` came from the answer store (tasks/reuse/answer_store.py); `shards` are left to run."""
        self.answers_done += answers
        self.shards_total = shards
        self.emit("reused", answers=answers, shards=shards)

    def step_started(self, step: str, answers: int | None = None) -> None:
        self.step = step
        if answers is not None:
            self.shard_answers = answers
        self._live = 0
        self.draw()

    def step_done(self, step: str, state: str, calls: int = 0) -> None:
        self._live = 0
        self.calls += calls
        self.step = step
        self.emit("step", step=step, state=state, calls=calls)

    def shard_done(self) -> None:
        self.shards_done += 1
        self.answers_done += self.shard_answers
        self.shard_answers = 0
        self.emit("shard")

    def judge_calls(self, n: int = 1) -> None:
        """Live judge calls inside a running step (optional: judges may report them, from
        any thread)."""
        with self._lock:
            self._live += n
            self.draw(live=True)

    def done(self, claims: int, labels: dict | None = None) -> None:
        self.answers_done = max(self.answers_done, self.answers_total)
        self.emit("done", claims=claims, labels=labels or {})
        self.finish()

    # -- output (overridden) ----------------------------------------------------------------

    def snapshot(self) -> dict:
        rate = self.rate()
        eta = self.eta()
        return {"run": self.run, "shards_done": self.shards_done, "shards": self.shards_total,
                "answers_done": self.answers_done, "answers": self.answers_total, "step": self.step,
                "judge_calls": self.calls + self._live, "calls_per_s": None if rate is None else round(rate, 2),
                "elapsed_s": round(self.elapsed(), 2), "eta_s": None if eta is None else round(eta, 1)}

    def emit(self, event: str, **fields: object) -> None:
        self.draw()

    def draw(self, live: bool = False) -> None:
        pass

    def finish(self) -> None:
        pass

    def status(self) -> str:
        rate = self.rate()
        return (f"{self.shards_done}/{self.shards_total} shards · {self.answers_done}/{self.answers_total} answers · "
                f"{self.step or 'starting'} · {self.calls + self._live} judge calls"
                f"{'' if rate is None else f' ({rate:.1f}/s)'} · {_clock(self.elapsed())} elapsed · "
                f"ETA {_clock(self.eta())}")


class BarProgress(Progress):
    """A single line redrawn in place (at most every `interval` seconds, and on each shard)."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 width: int = 24, interval: float = 0.1) -> None:
        super().__init__(stream, clock)
        self.width, self.interval = width, interval
        self._last = -1e9
        self._shown = 0

    def draw(self, live: bool = False, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        filled = round(self.fraction() * self.width)
        line = f"evaluate {self.run} [{'█' * filled}{'░' * (self.width - filled)}] {self.status()}"
        pad = max(0, self._shown - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._shown = len(line)

    def emit(self, event: str, **fields: object) -> None:
        self.draw(force=event in ("shard", "done", "start"))

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = 0


class LineProgress(Progress):
    """One plain line per start, finished shard and end: readable in any CI log."""

    def emit(self, event: str, **fields: object) -> None:
        if event == "start":
            plural = "" if self.shards_total == 1 else "s"
            self._line(f"evaluate {self.run}: {self.answers_total} answers in {self.shards_total} shard{plural}")
        elif event == "shard":
            self._line(f"evaluate {self.run}: {self.status()}")
        elif event == "done":
            self._line(f"evaluate {self.run}: done, {fields.get('claims')} claims in {_clock(self.elapsed())}"
                       f" · {self.calls} judge calls")

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


class JsonlProgress(Progress):
    """One JSON object per event, with the snapshot of counts, rate and ETA."""

    def emit(self, event: str, **fields: object) -> None:
        self.stream.write(json.dumps({"event": event, **fields, **self.snapshot()}, ensure_ascii=False) + "\n")
        self.stream.flush()


def make(mode: str, stream: TextIO | None = None) -> Progress:
    """The reporter for a `--progress` mode (`auto`: bar on a terminal, plain lines otherwise)."""
    stream = stream if stream is not None else sys.stderr
    if mode == "auto":
        mode = "bar" if getattr(stream, "isatty", lambda: False)() else "plain"
    if mode not in MODES:
        raise ValueError(f"unknown progress mode {mode!r}; one of {', '.join(MODES)}")
    return {"bar": BarProgress, "plain": LineProgress, "jsonl": JsonlProgress}.get(mode, Progress)(stream)


_current: Progress | None = None
_NULL = Progress(stream=None)


def current() -> Progress:
    """The active reporter, or a silent one."""
    return _current if _current is not None else _NULL


@contextmanager
def activate(progress: Progress) -> Iterator[Progress]:
    """Make `progress` current for the duration (a plain global: Prefect may run task
    bodies in worker threads, where a ContextVar set here would not be visible)."""
    global _current
    previous, _current = _current, progress
    previous_listener = listen_to_calls(progress.judge_calls)  # live calls from a running step
    try:
        yield progress
    finally:
        _current = previous
        listen_to_calls(previous_listener)
        progress.finish()
