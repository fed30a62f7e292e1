"""The offline default judge ("local"): deterministic, no network, no key.

Decomposition: each sentence of the answer (line breaks, then sentencex) is a claim,
split further at semicolons; a list's enumerator alone ("2.") is none.

Judging: the learned verifier (tasks/judges/verifier/) gives, per (question, claim,
passage), a calibrated P(supported). The verdict is `supported` when it reaches the
threshold (0.5), the quoted sentences hold enough of the claim and nothing in them
conflicts with it (a changed name, number, unit or negation); else `partial` when the
window is about the claim, else `unsupported`; its confidence is the probability of that
verdict and `support` is P(supported) in every case. A claim no single passage supports
may be supported by the passages of its context window together (the verifier's
`across_passages`: every number, name and rare word it adds is stated by one of them). "Yes"/"No" and one-word answers are
judged as the statement the question and the answer make together. The quote
is the minimal passage substring, from the first to the last claim word, of the 1–2
sentence window the features single out. The question matters: words a claim only
repeats from its question are not what must be supported.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from pathlib import Path

from ragspan.tasks.core.text import sentence_spans
from ragspan.tasks.judges.base import (
    AnswerItem,
    ClaimMark,
    ClaimText,
    JudgeFailure,
    JudgeItem,
    JudgeRuntime,
    JudgeSpec,
    JudgeStats,
    Verdict,
    answer_items,
    judge_items,
)
from ragspan.tasks.judges.verdict_cache import rows_with_cache
from ragspan.tasks.judges.verifier import Row, model_path, verifier
from ragspan.tasks.state import spawn_pool

# The local judge's model name in manifests; its version is the verifier's
# (`local-5.2+<model hash>`), so a new fitted model is a new judge in every cache key.
LOCAL_JUDGE_MODEL = "ragspan-verifier"


def local_judge_version() -> str:
    return verifier().version


def local_support_threshold() -> float:
    """judge.support_threshold "auto": the model's fitted decision threshold."""
    return verifier().threshold


# A piece that is only a list's enumerator ("4.", "(b)", "iv)") states nothing: the
# sentence splitter cuts a numbered list after each number. On RAGTruth QA dev (local-5.1)
# 742 of 3,624 claims were such numbers: 448 of the 1,217 `uncertain` claims, and 294 of
# the 369 `retrieval_miss` ones.
_ENUMERATOR = re.compile(r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,4})[.)]")


def split_claims(answer: str) -> list[ClaimText]:
    """Sentences of the answer, split again at semicolons, with exact answer offsets; a
    piece that is only a list enumerator is no claim."""
    claims: list[ClaimText] = []
    for s, e in sentence_spans(answer):
        piece_start = s
        for k in range(s, e + 1):
            if k == e or answer[k] == ";":
                a, b = piece_start, k
                while a < b and answer[a].isspace():
                    a += 1
                while b > a and answer[b - 1].isspace():
                    b -= 1
                if b > a and not _ENUMERATOR.fullmatch(answer, a, b):
                    claims.append(ClaimText(text=answer[a:b], start=a, end=b))
                piece_start = k + 1
    return claims


class LocalJudge:
    """The learned local judge (see the module docstring). Pure and deterministic.
    `runtime`: where its verdict cache is and how many worker processes it may use
    (None: no cache, in-process); its verdicts are the same either way."""

    def __init__(self, spec: JudgeSpec, runtime: JudgeRuntime | None = None) -> None:
        self.spec = spec
        self.runtime = runtime or JudgeRuntime()
        self.stats = JudgeStats()
        self._model = str(model_path())

    def decompose(self, answer: str, question: str = "") -> list[ClaimText] | JudgeFailure:
        self.stats.calls += 1
        return split_claims(answer)

    def judge(self, claim: str, passages: Sequence[str], question: str = "",
              whole_answer: bool = False) -> list[Verdict | JudgeFailure]:
        return self.judge_many([JudgeItem(claim, passages, question, whole_answer)])[0]

    def decompose_many(self, items: Sequence[AnswerItem | tuple | str]) -> list[list[ClaimText] | JudgeFailure]:
        return [self.decompose(a.answer, a.question) for a in answer_items(items)]

    def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[list[Verdict | JudgeFailure]]:
        given = judge_items(items)
        items = [(i.claim, list(i.passages), i.question, i.whole_answer) for i in given]
        self.stats.calls += len(items)
        # Pairs whose row needs no model (a passage with too few of the claim's words: most
        # pairs at scale) are decided here in bulk, and neither judged nor stored; the others
        # get exactly the rows they would have got beside them (verifier.fixed_rows).
        fixed = verifier(Path(self._model)).fixed_rows(items)
        open_items = [k for k, fx in enumerate(fixed) if None in fx]
        asked = [(items[k][0], [p for p, f in zip(items[k][1], fixed[k]) if f is None], *items[k][2:])
                 for k in open_items]
        pairs = sum(len(i[1]) for i in asked)
        cache = self.runtime.verdict_cache
        if cache is None:
            asked_rows, judged, again = self._rows(asked)[0] if asked else [], pairs, 0
        else:  # only pairs never judged before (tasks/judges/verdict_cache.py)
            # the model file's own version too: RAGSPAN_LOCAL_JUDGE_MODEL may point elsewhere
            # than the spec the judge was built with says
            judge_id = f"{self.spec.model}@{self.spec.prompt_version}+{local_judge_version()}+{_code_version()}"
            asked_rows, judged, again = rows_with_cache(asked, self._rows, judge_id, Path(cache))
        for k, got in zip(open_items, asked_rows, strict=True):
            rest = iter(got)
            fixed[k] = [f if f is not None else next(rest) for f in fixed[k]]
        self.stats.pairs_decided += sum(len(i[1]) for i in items) - pairs
        self.stats.pairs_judged += judged
        self.stats.verdicts_reused += pairs - judged
        self.stats.marks_rejudged += again
        # A claim no single passage supports may still be stated by the passages the answer
        # was written from, together (Verifier.across_passages): decided per claim, after
        # the pairs (and their cache), since it reads all of the claim's pairs at once.
        rows = verifier(Path(self._model)).across_passages(items, fixed, [i.shown for i in given])
        return [[_from_row(r) for r in item_rows] for item_rows in rows]

    def _rows(self, items: list[tuple[str, list[str], str, bool]]) -> tuple[list[list[Row]], list[list[float | None]]]:
        """Verdict rows judged now (in worker processes when there are many), and per pair
        the support it competes with for the claim's marks (verifier.Verifier.rows)."""
        processes = self.runtime.processes
        pool = _pool_for(sum(len(i[1]) for i in items), processes)
        if pool is None:
            return _judge_rows(self._model, items)
        step = max(1, len(items) // (4 * processes))
        batches = [items[i:i + step] for i in range(0, len(items), step)]
        try:
            parts = list(pool.map(_judge_rows, [self._model] * len(batches), batches))
        except (BrokenProcessPool, OSError):  # workers cannot start or died: judge here instead
            _give_up_workers(pool)
            return _judge_rows(self._model, items)
        return [r for part in parts for r in part[0]], [c for part in parts for c in part[1]]


# --------------------------------------------------------------------------- worker processes
# The local judge is pure Python: threads share one GIL, so on its own it uses one core.
# With JudgeRuntime.processes > 1 (the flow's `pipeline.judge_processes` on its thread
# runner, tasks.config.judge_process_count) a big judge_many is split over that many worker
# processes. A pool is a resource of this process, not a setting: spawned on first use for
# its size, reused by every judge asking for that size (each worker keeps its own caches).
# Verdicts are pure functions of (claim, passage, threshold): identical either way. On a
# Dask worker the flow asks for 1 (in-process): the worker is a process of its own already.

MIN_POOLED_PAIRS = 2000  # below this, shipping the work costs more than it saves
_pools: dict[int, ProcessPoolExecutor] = {}  # by number of workers
_pool_lock = threading.Lock()
# Worker processes could not start here, or died: this process judges in-process from then
# on (a fact about the process, learnt by the judge — not a setting).
_workers_failed = False


def shutdown_workers() -> None:
    """End this process's judge worker pools, and forget that workers failed (tests)."""
    global _workers_failed
    with _pool_lock:
        for pool in _pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        _pools.clear()
        _workers_failed = False


def _give_up_workers(pool: ProcessPoolExecutor) -> None:
    """A pool broke: kill what is left of it, and judge in-process from now on."""
    global _workers_failed
    _kill_workers(pool)
    with _pool_lock:
        _workers_failed = True
        for size, known in list(_pools.items()):
            if known is pool:
                del _pools[size]


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """End the workers of a broken pool. A worker killed while it held the pool's queue lock
    leaves the others blocked on that lock for ever, and the interpreter joins them at exit
    (measured: a test run that never ended). Judging is pure: nothing is lost."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if proc.is_alive():
                proc.kill()


def _pool_for(pairs: int, processes: int) -> ProcessPoolExecutor | None:
    """The pool of `processes` workers to judge `pairs` pairs on, or None: in-process."""
    if processes <= 1 or pairs < MIN_POOLED_PAIRS or _workers_failed:
        return None
    with _pool_lock:
        pool = _pools.get(processes)
        if pool is None:
            pool = _pools[processes] = spawn_pool(processes)
            atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        return pool


def _judge_rows(model: str, items: list[tuple[str, list[str], str, bool]]) -> tuple[list[list[Row]], list[list[float | None]]]:
    """Verdict rows (plain tuples: cheap to send back from a worker process) and what each
    pair competes with for the marks."""
    competing: list[list[float | None]] = []
    with _fewer_collections():
        return verifier(Path(model)).rows(items, competing), competing


def _code_version() -> str:
    from ragspan.tasks.config import code_version

    return code_version()


# Judging allocates millions of small tuples and sets that live until the batch ends and
# form no cycles; at the default threshold (700) the cyclic collector ran every few
# hundred pairs over everything the caches hold — ~15 % of the judge's CPU (measured on
# benchmarks/scale/verdicts.py). While any judge_many runs, the youngest generation is
# collected every 100,000 allocations instead; the thresholds are restored after the last.
_RELAXED_GC = (100_000, 50, 1000)
_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(*_RELAXED_GC)
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_saved is not None:
                gc.set_threshold(*_gc_saved)


def _from_row(row: Row) -> Verdict | JudgeFailure:
    verdict, confidence, support, quote, quote_start, reason, marks = row
    if verdict.startswith("!"):
        return JudgeFailure(kind=verdict[1:], detail=reason)
    if quote is None and not marks:
        return _quoteless(verdict, confidence, support, reason)
    return Verdict(verdict=verdict, confidence=confidence, support=support, quote=quote, quote_start=quote_start,
                   reason=reason, marks=tuple(ClaimMark(start=s, end=e, kind=k, evidence_start=es, evidence_end=ee)
                                              for s, e, k, es, ee in marks))


@lru_cache(maxsize=4096)
def _quoteless(verdict: str, confidence: float, support: float, reason: str) -> Verdict:
    """Verdicts are frozen: one instance serves every identical unsupported pair (most
    pairs at scale; building a pydantic model each time is most of their cost)."""
    return Verdict(verdict=verdict, confidence=confidence, support=support, reason=reason)
