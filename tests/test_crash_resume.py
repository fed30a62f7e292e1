"""Crash and resume: `ragspan evaluate` killed with SIGKILL at several points — early in
judging, later in judging, while the results are being written — then run again.

- the last run's diagnoses equal those of an uninterrupted run;
- no finished judge call is repeated (requests counted at the fake server: across all
  the runs, each logical call reaches it once, bar the one in flight at each kill);
- no output file is ever observed half-written: a poller reads the results directory
  the whole time, and every file it finds parses completely.

The killed processes are real `ragspan` subprocesses; they talk to the test session's
Prefect server (no server startup per process) but keep their own state dir.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from ragspan.tasks.reporting.results_files import read_results

from benchmarks._support.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("prefect_server")

RAGSPAN = Path(sys.executable).with_name("ragspan")
TOPICS = [
    ("storage", "Object Storage costs {n} dollars per month and includes {m} GB of space."),
    ("compute", "Compute instances of size {n} are billed per second with a {m} second minimum."),
    ("backup", "Backups of tier {n} run every night and are kept for {m} days."),
    ("network", "Network plan {n} includes {m} TB of outbound transfer."),
]


def _data(root: Path, answers: int = 10) -> Path:
    docs = {}
    for name, pattern in TOPICS:
        docs[f"{name}.md"] = " ".join(pattern.format(n=i, m=10 * i + 5) for i in range(1, 7))
    (root / "runs").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()),
                                       encoding="utf-8")
    questions, run = [], []
    names = list(docs)
    for q in range(answers):
        name, pattern = TOPICS[q % len(TOPICS)]
        n = q // len(TOPICS) + 1
        other = names[(q + 1) % len(names)]
        answer = pattern.format(n=n, m=10 * n + 5) + f" Question {q} also has a made-up fact number {q}."
        questions.append({"question_id": f"q{q:02d}", "question": f"About {name} {n}?"})
        run.append({"question_id": f"q{q:02d}", "answer": answer, "context_k": 1,
                    "retrieved": [{"doc_id": other, "char_start": 0, "char_end": len(docs[other])},
                                  {"doc_id": f"{name}.md", "char_start": 0, "char_end": len(docs[f"{name}.md"])}]})
    (root / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in questions), encoding="utf-8")
    (root / "runs" / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in run), encoding="utf-8")
    return root


def _params(path: Path, url: str) -> Path:
    path.write_text(f"judge:\n  kind: openai\n  model: fake-model\n  base_url: {url}\n  max_concurrency: 1\n"
                    "  backoff_base_s: 0.01\n  backoff_max_s: 0.02\n  timeout_s: 10\n"
                    "pipeline:\n  shard_size: 3\n", encoding="utf-8")
    return path


# -- the poller: every file seen in the results dir must be complete --------------------------------


def _complete(path: Path) -> None:
    """Raises unless `path` holds a complete file of its kind."""
    data = path.read_bytes()
    name = path.name
    if name.endswith(".parquet"):
        assert data[:4] == b"PAR1" and data[-4:] == b"PAR1", "parquet without its footer"
        pd.read_parquet(path)
    elif name.endswith(".json"):
        json.loads(data)
    elif name.endswith(".csv"):
        assert data.endswith(b"\n")
        pd.read_csv(path)
    elif name.endswith(".html"):
        assert data.rstrip().endswith(b"</html>")
    elif name.endswith(".svg"):
        assert data.rstrip().endswith(b"</svg>")
    elif name.endswith(".png"):
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[-8:-4] == b"IEND"
    else:
        assert data, "empty file"


class Poller(threading.Thread):
    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out, self.stop, self.problems, self.reads = out, threading.Event(), [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                names = os.listdir(self.out)
            except FileNotFoundError:
                names = []
            for n in names:
                try:
                    _complete(self.out / n)
                    self.reads += 1
                except (FileNotFoundError, NotADirectoryError):
                    pass  # the directory was swapped while we read: absent, not half-written
                except Exception as exc:  # noqa: BLE001 - anything else is a half-written file
                    if (self.out / n).exists():
                        self.problems.append(f"{n}: {type(exc).__name__}: {exc}")
            time.sleep(0.002)


# -- running and killing --------------------------------------------------------------------------


def _env(state: Path) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "RAGSPAN_HOME": str(state), "PREFECT_HOME": str(state / "prefect"),
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(state / "prefect" / "results"),
           "PREFECT_API_URL": PREFECT_API_URL.value()}
    return env


def _start(data: Path, out: Path, params: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen([str(RAGSPAN), "evaluate", "--data", str(data), "--run", "r", "--out", str(out),
                             "--params", str(params), "--quiet"], env=_env(state),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 120) -> bool:
    """SIGKILL `proc` as soon as ready() is true; False if it ended first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return True
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the run neither reached the kill point nor ended")
        time.sleep(0.0005)
    return False


def _entries(cache_path: Path) -> int:
    from ragspan.tasks.judges.cache import JudgeCache

    with JudgeCache(cache_path) as cache:
        return len(cache)


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("claim_id").reset_index(drop=True)


@pytest.mark.e2e
def test_sigkill_at_several_points_then_resume(tmp_path, state_dir):
    from ragspan.flows.evaluate import evaluate

    data = _data(tmp_path / "data")

    # The uninterrupted reference, in-process, with its own state and server.
    with FakeOpenAIServer() as ref_server:
        evaluate(data_dir=str(data), run="r", out_dir=str(tmp_path / "ref"),
                 params_path=str(_params(tmp_path / "ref.yaml", ref_server.url)))
        reference_calls = ref_server.bodies_digests()
    reference = _sorted(pd.read_parquet(tmp_path / "ref" / "diagnoses.parquet"))
    total = len(reference_calls)
    assert total >= 30 and len(set(reference_calls)) == total  # every logical call is distinct

    out, state = tmp_path / "results" / "r", tmp_path / "child-state"
    parent = out.parent
    parent.mkdir()
    poller = Poller(out)
    poller.start()
    seen: list[str] = []  # digests of every request the killed/resumed runs sent
    kills = []
    cache_path = state / "judge-cache.sqlite"
    with FakeOpenAIServer(delay=0.04) as server:
        params = _params(tmp_path / "params.yaml", server.url)
        try:
            # 1-2: killed mid-judging, early then late
            for fraction in (0.25, 0.7):
                proc = _start(data, out, params, state)
                assert _kill_when(proc, lambda f=fraction: server.count >= int(total * f)), proc.stderr.read()
                kills.append(("judging", server.count))
                assert not out.exists()  # nothing is written before the report
            # 3: killed while the results directory is being written
            proc = _start(data, out, params, state)
            staging = lambda: any(n.startswith(".r.tmp-") for n in os.listdir(parent))
            kills.append(("report", _kill_when(proc, staging)))
            sent_before_last, stored_before_last = server.count, _entries(cache_path)
            # 4: runs to the end
            proc = _start(data, out, params, state)
            assert proc.wait(timeout=180) == 0, proc.stderr.read()
            seen = server.bodies_digests()
        finally:
            poller.stop.set()
            poller.join(timeout=10)

    assert poller.problems == [], poller.problems
    assert poller.reads > 0  # it did see the final files
    assert kills[2] == ("report", True), "the third run finished before it could be killed while writing"
    # Same diagnoses as the uninterrupted run.
    pd.testing.assert_frame_equal(_sorted(pd.read_parquet(out / "diagnoses.parquet")), reference)
    # The run killed while writing had judged everything: the last run sent no request.
    assert len(seen) == sent_before_last and stored_before_last == total
    # No finished call was repeated. Every logical call was sent, and stored once; a request
    # that was sent but never stored (in flight at a kill) is the only kind sent again.
    assert set(seen) == set(reference_calls) and _entries(cache_path) == total
    lost = sent_before_last - stored_before_last  # requests of killed runs that never finished
    repeated = len(seen) - len(set(seen))
    assert repeated == lost, f"{repeated} calls sent twice but only {lost} were in flight at a kill"
    assert 0 < lost <= 2 * 2  # at most shard_concurrency (2) x max_concurrency (1) per kill in judging
    assert not [n for n in os.listdir(parent) if n.startswith(".r.tmp-")]  # staging dirs cleaned up
    metrics = read_results(out)
    assert metrics["claims"] == len(reference)


def test_rewriting_a_results_dir_keeps_dvcs_gitignore(tmp_path):
    from ragspan.tasks.state._atomic import write_atomic_dir

    out = tmp_path / "results" / "baseline"
    write_atomic_dir(out, {"a.txt": lambda p: p.write_text("1")})
    (out / ".gitignore").write_text("/a.txt\n")  # what `dvc repro` adds for its outs
    write_atomic_dir(out, {"a.txt": lambda p: p.write_text("2"), "b.txt": lambda p: p.write_text("3")})
    assert (out / ".gitignore").read_text() == "/a.txt\n"
    assert (out / "a.txt").read_text() == "2" and (out / "b.txt").read_text() == "3"
    assert sorted(p.name for p in out.parent.iterdir()) == ["baseline"]  # no temp dirs left
