"""Expected errors (tasks/errors.py) print one `error: ` line and exit with their own code:
no Python traceback and no Prefect log traceback on stderr unless --verbose. The real
`ragspan` command in subprocesses (Prefect configures its logging when imported there,
which an in-process `main` never shows); they use the session's Prefect test server."""

from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE
from ragspan.tasks.errors import DiskFull, OutputBusy
from ragspan.tasks.reporting.results_files import read_results
from servers import wait_for

from benchmarks._support.fake_openai_server import FakeOpenAIServer, smart_reply

RAGSPAN = str(Path(sys.executable).with_name("ragspan"))
pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture
def env(state_dir):
    """The subprocesses' environment: this test's state dir, the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "RAGSPAN_HOME": str(state_dir), "PREFECT_API_URL": PREFECT_API_URL.value(),
            "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(state_dir / "prefect-results")}


def evaluate(out: Path, env: dict, *extra: str, limit: int | None = None, **kw) -> subprocess.CompletedProcess:
    def file_size_limit():  # in the child: a write past `limit` bytes fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([RAGSPAN, "evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(out),
                           "--progress", "none", *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False, preexec_fn=file_size_limit if limit else None, **kw)


def test_a_second_evaluate_into_the_same_out_is_refused_in_one_line(tmp_path, env):
    """Two real runs at once: the first holds --out while its judge (a fake OpenAI
    server) is held back; the second is refused with OutputBusy's code, no traceback."""
    release = threading.Event()

    def held(body):
        release.wait(120)
        return smart_reply(body)

    out = tmp_path / "out"
    with FakeOpenAIServer(handler=held) as server:
        first = subprocess.Popen([RAGSPAN, "evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(out),
                                  "--progress", "none", "--quiet", "--judge", "openai", "--model", "fake-model",
                                  "--base-url", server.url], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: server.count > 0 or first.poll() is not None, 120, "the first run's judge call")
            assert first.poll() is None, first.communicate()[1]  # it holds the lock now
            second = evaluate(out, env)
        finally:
            release.set()
            _, first_err = first.communicate(timeout=300)
    assert second.returncode == OutputBusy.exit_code == 3, second.stderr
    assert second.stderr == f"error: {out}: another ragspan evaluate is writing here (pid {first.pid}); " \
                            "wait for it or choose another --out\n"
    assert first.returncode == 0, first_err
    assert read_results(out)["manifest"]["judge"]["kind"] == "openai"  # the first one's results


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_an_error_inside_the_flow_shows_its_traceback_only_with_verbose(tmp_path, env, verbose):
    from ragspan.tasks.state._atomic import output_lock

    out = tmp_path / "out"
    with output_lock(out):  # as a running evaluate holds it: OutputBusy raised in the flow
        proc = evaluate(out, env, *(["--verbose"] if verbose else []))
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"error: {out}: another ragspan evaluate is writing here"), proc.stderr
    if verbose:
        assert "Traceback" in proc.stderr and "OutputBusy" in proc.stderr, proc.stderr
    else:
        assert proc.stderr == last + "\n"


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_bad_input_shows_its_traceback_only_with_verbose(tmp_path, env, verbose):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("corpus.jsonl", "chunks.jsonl", "questions.csv"):
        (data / name).write_bytes((SAMPLE / name).read_bytes())
    (data / "runs").mkdir()
    lines = (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[4])
    rec["answer"] = ""
    lines[4] = json.dumps(rec)
    (data / "runs" / "baseline.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run([RAGSPAN, "evaluate", "--data", str(data), "--run", "baseline", "--out",
                           str(tmp_path / "out"), *(["--verbose"] if verbose else [])], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "row 5" in errors[0] and "'answer'" in errors[0], proc.stderr
    assert ("Traceback" in proc.stderr) is verbose, proc.stderr
    assert ("InputError" in proc.stderr) is verbose, proc.stderr
    if not verbose:
        assert proc.stderr == errors[0] + "\n"


def test_no_room_for_the_results_is_one_line_and_the_previous_results_stay(tmp_path, env):
    """A real file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG, as
    on a full disk with ENOSPC) smaller than the largest results file."""
    out = tmp_path / "out"
    first = evaluate(out, env, "--quiet")
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    largest, second = sorted(len(body) for body in before.values())[:-3:-1]
    assert largest > 1.3 * second  # report.html, then a chart: room for a limit between them
    proc = evaluate(out, env, "--quiet", limit=(largest + second) // 2)  # every answer reused
    assert proc.returncode == DiskFull.exit_code == 4, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {out}/"), proc.stderr
    assert "file too large while writing results" in proc.stderr and "unchanged" in proc.stderr
    named = Path(proc.stderr.split(": ")[1])
    assert named.parent == out and named.name in before
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched, byte for byte
    assert read_results(out)["claims"] > 0
    assert not list(tmp_path.glob(".out.tmp-*"))  # no half-written directory left behind


def test_a_full_disk_while_writing_results_names_the_file_and_keeps_the_previous(tmp_path):
    """ENOSPC from a writer (the filesystem, not a limit) is the same one error."""
    import errno

    from ragspan.tasks.state._atomic import write_atomic_dir

    def full(path: Path) -> None:
        path.write_text("partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "out"
    write_atomic_dir(out, {"a.txt": lambda p: p.write_text("old")})
    with pytest.raises(DiskFull) as caught:
        write_atomic_dir(out, {"a.txt": lambda p: p.write_text("new"), "b.bin": full})
    assert str(caught.value).startswith(f"{out.resolve()}/b.bin: no space left on device while writing results")
    assert caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
    again = pickle.loads(pickle.dumps(caught.value))  # as a Prefect state or Dask carries it
    assert str(again) == str(caught.value) and again.errno == errno.ENOSPC
    assert [p.name for p in out.iterdir()] == ["a.txt"] and (out / "a.txt").read_text() == "old"
    assert not list(tmp_path.glob(".out.tmp-*"))
