"""The `ragspan` command as a user runs it: bad input is one clear message naming file,
row and field, exit code 2, before any judge call, and nothing is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE
from ragspan.flows.cli import main
from ragspan.tasks.reporting.results_files import read_results


def _rewrite_jsonl(path: Path, line: int, change: Callable[[dict], object]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[line - 1])
    out = change(rec)
    lines[line - 1] = out if isinstance(out, str) else json.dumps(rec, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _set(key, value):
    def change(rec):
        rec[key] = value
    return change


def _drop(key):
    def change(rec):
        del rec[key]
    return change


def _item(i, value):
    def change(rec):
        rec["retrieved"][i] = value
    return change


def _dup_first_doc(data: Path):
    path = data / "corpus.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    second = json.loads(lines[1])
    second["doc_id"] = json.loads(lines[0])["doc_id"]
    lines[1] = json.dumps(second, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _nan_text_parquet(data: Path, row: int) -> None:
    import pandas as pd

    corpus = pd.read_json(data / "corpus.jsonl", lines=True, dtype=False)
    corpus.loc[row - 1, "text"] = float("nan")
    corpus.to_parquet(data / "corpus.parquet", index=False)
    (data / "corpus.jsonl").unlink()


CORPUS, CHUNKS, RUN = "corpus.jsonl", "chunks.jsonl", "runs/baseline.jsonl"

# (case id, file, mutation, expected row, expected field, words the message must contain)
BAD_INPUTS = [
    ("missing-column", CORPUS, lambda d: _rewrite_jsonl(d / CORPUS, 1, _drop("text")), 1, "text", "missing"),
    ("duplicate-doc-id", CORPUS, _dup_first_doc, 2, "doc_id", "duplicate"),
    ("unknown-chunk", RUN, lambda d: _rewrite_jsonl(d / RUN, 3, _item(0, {"chunk_id": "nope#9"})), 3, "retrieved[0].chunk_id", "nope#9"),
    ("unknown-doc-in-chunks", CHUNKS, lambda d: _rewrite_jsonl(d / CHUNKS, 2, _set("doc_id", "ghost.md")), 2, "doc_id", "ghost.md"),
    ("offsets-out-of-range", CHUNKS, lambda d: _rewrite_jsonl(d / CHUNKS, 4, _set("char_end", 10**7)), 4, "char_end", "range"),
    ("offsets-not-matching-text", CHUNKS, lambda d: _rewrite_jsonl(d / CHUNKS, 2, _set("text", "Something else")), 2, "text", "does not match"),
    ("empty-answer", RUN, lambda d: _rewrite_jsonl(d / RUN, 5, _set("answer", "")), 5, "answer", "empty"),
    ("whitespace-answer", RUN, lambda d: _rewrite_jsonl(d / RUN, 5, _set("answer", " \n ")), 5, "answer", "whitespace"),
    ("nan-text", "corpus.parquet", lambda d: _nan_text_parquet(d, 3), 3, "text", "NaN"),
    ("nan-in-jsonl", CORPUS, lambda d: _rewrite_jsonl(d / CORPUS, 3, lambda r: json.dumps(r).replace('"text": ' + json.dumps(r["text"]), '"text": NaN')), 3, None, "not valid JSON"),
    ("wrong-type", RUN, lambda d: _rewrite_jsonl(d / RUN, 4, _set("answer", 42)), 4, "answer", "string"),
    ("non-utf8", CORPUS, lambda d: (d / CORPUS).write_bytes((d / CORPUS).read_bytes().replace("é".encode(), b"\xe9", 1)), None, None, "UTF-8"),
    ("retrieved-text-not-found", RUN, lambda d: _rewrite_jsonl(d / RUN, 6, _item(1, {"text": "words that appear in no document at all"})), 6, "retrieved[1].text", "not found"),
]


@pytest.mark.usefixtures("prefect_server", "state_dir")
@pytest.mark.parametrize("case, file, mutate, row, field, words", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_one_clear_error_and_writes_nothing(tmp_path, capsys, case, file, mutate, row, field, words):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    mutate(data)
    out = tmp_path / "results" / "baseline"
    code = main(["evaluate", "--data", str(data), "--run", "baseline", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") == 1, err
    assert file in err, err
    if row is not None:
        assert f"row {row}" in err, err
    if field is not None:
        assert f"field '{field}" in err, err
    assert words.lower() in err.lower(), err
    assert not (tmp_path / "results").exists()  # nothing half-written, not even the parent
    # validate names the same problem without starting Prefect at all
    assert main(["validate", "--data", str(data), "--run", "baseline"]) == 2
    assert capsys.readouterr().err == err


def test_validate_accepts_the_sample(capsys):
    assert main(["validate", "--data", str(SAMPLE), "--run", "baseline", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents"] >= 30 and summary["questions"] >= 30 and summary["answers"] >= 30


def test_the_installed_command_evaluates_the_sample(tmp_path):
    """The README's main job, as a subprocess with its own temporary Prefect server."""
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    env.pop("PREFECT_HOME", None)
    env.pop("PREFECT_RESULTS_LOCAL_STORAGE_PATH", None)
    ragspan = Path(sys.executable).with_name("ragspan")
    proc = subprocess.run([str(ragspan), "evaluate", "--data", str(SAMPLE), "--run", "baseline",
                           "--out", str(tmp_path / "out")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    for label in ("correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination", "unjudged"):
        assert label in proc.stdout
    assert (tmp_path / "out" / "report.html").exists()


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_concurrent_evaluate_on_the_same_output_is_refused(tmp_path, capsys):
    from ragspan.tasks.state._atomic import output_lock

    out = tmp_path / "results" / "baseline"
    with output_lock(out):  # as a running evaluate holds it
        code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3 and "another ragspan evaluate is writing here" in err
    assert not out.exists()
    assert main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(out), "--quiet"]) == 0
    assert (out / "diagnoses.parquet").exists()


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_a_second_evaluate_says_every_answer_came_from_the_answer_store(tmp_path, capsys):
    args = ["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--progress", "none"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    first = capsys.readouterr().out
    assert "answers reused from the answer store: 0 of 38" in first and "judge calls: 0 " not in first
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    second = capsys.readouterr().out
    assert "answers reused from the answer store: 38 of 38" in second
    assert "tasks: none ran" in second and "judge calls: 0 " in second
    assert read_results(tmp_path / "b")["judge"]["answers_reused"] == 38
