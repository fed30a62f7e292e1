"""The command line as a new user meets it: a workspace of their own (`mydata/` with one
run file named `injected.jsonl`, no params.yaml), commands typed from that directory and
from elsewhere. Manifest, run selection, compare from any directory, results readable per
the umask, help and version, --verbose, explain, and the local Prefect server."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.flows.cli import build_parser, main
from ragspan.tasks.reporting.results_files import read_results

RAGSPAN = str(Path(sys.executable).with_name("ragspan"))


@pytest.fixture
def user_ws(tmp_path, monkeypatch):
    """tmp/ws/mydata/{corpus,chunks,questions}, runs/injected.jsonl; cwd = tmp/ws."""
    ws = tmp_path / "ws"
    data = ws / "mydata"
    (data / "runs").mkdir(parents=True)
    for name in ("corpus.jsonl", "chunks.jsonl", "questions.csv"):
        shutil.copy(SAMPLE / name, data / name)
    shutil.copy(SAMPLE / "runs" / "baseline.jsonl", data / "runs" / "injected.jsonl")
    monkeypatch.chdir(ws)
    assert not (ws / "params.yaml").exists()
    return ws


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_manifest_records_what_was_used_and_compare_works_from_anywhere(user_ws, tmp_path, monkeypatch, capsys):
    old = os.umask(0o022)
    try:
        assert main(["evaluate", "--data", "mydata", "--progress", "none", "--quiet"]) == 0
    finally:
        os.umask(old)
    out = user_ws / "results" / "injected"  # the only run file was chosen
    metrics = read_results(out)
    manifest = metrics["manifest"]
    assert manifest["params"]["data"] == {"dir": "mydata", "runs": ["injected"]}
    assert manifest["data"]["from_results"] == "../../mydata"
    assert (out.stat().st_mode & 0o777) == 0o755  # readable by the team, as the umask says

    assert main(["evaluate", "--data", "mydata", "--run", "injected", "--out", "results/again",
                 "--progress", "none", "--quiet"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["compare", str(out), str(user_ws / "results" / "again"), "--format", "json",
                 "--resamples", "50"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["params_changed"] == {}
    assert result["a"]["notes"] == [] and result["b"]["notes"] == []
    assert result["by_metadata"], "per-metadata deltas need the data directory, found from the manifest"


@pytest.mark.usefixtures("state_dir")
def test_run_selection_and_validate_checks_every_run(user_ws, capsys):
    data = user_ws / "mydata"
    shutil.copy(data / "runs" / "injected.jsonl", data / "runs" / "second.jsonl")
    assert main(["evaluate", "--data", "mydata", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "choose one with --run" in err and "injected" in err and "second" in err

    assert main(["validate", "--data", "mydata"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("ok:")] and \
        {"run=injected", "run=second"} <= {part.strip(",") for line in lines for part in line.split()}

    # a broken second run file is found without naming it
    (data / "runs" / "second.jsonl").write_text('{"question_id": "q01"}\n', encoding="utf-8")
    assert main(["validate", "--data", "mydata"]) == 2
    err = capsys.readouterr().err
    assert "second.jsonl" in err and "row 1" in err

    (data / "runs" / "second.jsonl").unlink()
    assert main(["evaluate", "--data", "mydata", "--dry-run", "--json"]) == 0  # the only run now
    assert json.loads(capsys.readouterr().out)

    assert main(["evaluate", "--data", "mydata", "--run", "nope", "--dry-run"]) == 2
    assert "runs here: injected" in capsys.readouterr().err


def _all_parsers(p: argparse.ArgumentParser, path: str = "ragspan"):
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _all_parsers(child, f"{path} {name}")


def test_every_flag_has_help_and_version_answers():
    missing = [f"{path} {a.option_strings[0]}" for path, p in _all_parsers(build_parser())
               for a in p._actions if a.option_strings and not a.help]
    assert missing == []
    proc = subprocess.run([RAGSPAN, "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("ragspan ") and proc.stdout.split()[1][0].isdigit()
    # `--help` builds the parser without the heavy libraries (that is what keeps it fast)
    probe = ("import sys; from ragspan.flows.cli import build_parser; build_parser(); "
             "print(sorted(m for m in ('pandas', 'prefect', 'pydantic', 'pandera', 'numpy') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_verbose_shows_step_timings_and_cache_decisions(user_ws, capsys):
    args = ["evaluate", "--data", "mydata", "--progress", "none", "--quiet"]
    assert main([*args, "--verbose"]) == 0
    first = capsys.readouterr().err
    assert "validated-inputs cache: miss" in first and "to be built" in first
    assert "answer store: 0 of 38 answers reused" in first
    assert "step extract" in first and "Completed" in first
    assert main([*args, "-v"]) == 0
    second = capsys.readouterr().err
    assert "validated-inputs cache: hit" in second and "reused (" in second
    assert "answer store: 38 of 38 answers reused" in second
    assert "step report" in second and "step extract" not in second  # no step ran
    assert main(args) == 0
    assert "[verbose]" not in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_explain_shows_the_claim_its_reason_and_the_quote_in_context(user_ws, capsys):
    assert main(["evaluate", "--data", "mydata", "--progress", "none", "--quiet"]) == 0
    diagnoses = pd.read_parquet(user_ws / "results" / "injected" / "diagnoses.parquet")
    row = diagnoses[diagnoses["label"] == "correct"].iloc[0]
    capsys.readouterr()
    assert main(["explain", "results/injected", row["claim_id"], "--color", "never"]) == 0
    text = capsys.readouterr().out
    assert f"claim {row['claim_id']}" in text and "label: correct" in text
    assert row["reason"].split(";")[0] in text
    doc = pd.read_json(SAMPLE / "corpus.jsonl", lines=True).set_index("doc_id").loc[row["doc_id"], "text"]
    before = " ".join(doc[max(0, row["char_start"] - 40):row["char_start"]].split()[-3:])
    assert f"«{row['span_text']}»" in text and before in text  # the quote inside its document

    claims_of_q = diagnoses[diagnoses["question_id"] == row["question_id"]]
    assert main(["explain", "results/injected", row["question_id"], "--color", "never"]) == 0
    shown = capsys.readouterr().out
    assert all(f"claim {cid} " in shown for cid in claims_of_q["claim_id"])
    assert shown.count("label: ") == len(claims_of_q)
    assert main(["explain", "results/injected", row["question_id"], "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(claims_of_q)
    assert main(["explain", "results/injected", "no-such-id"]) == 2
    assert "no claim or question 'no-such-id'" in capsys.readouterr().err


def _server_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env.update(RAGSPAN_HOME=str(home), RAGSPAN_PREFECT_SERVER="auto")
    return env


def test_local_server_is_started_once_reused_and_stopped(user_ws, tmp_path):
    env = _server_env(tmp_path / "state-server")
    run = lambda *a: subprocess.run([RAGSPAN, *a], env=env, cwd=user_ws, capture_output=True,
                                    text=True, timeout=300, check=False)
    try:
        first = run("evaluate", "--data", "mydata", "--quiet", "--progress", "none", "--verbose")
        assert first.returncode == 0, first.stderr
        assert "(started now" in first.stderr
        status = run("server", "status", "--json")
        assert status.returncode == 0, status.stdout
        info = json.loads(status.stdout)
        assert info["healthy"] and info["idle_stop_s"] > 0
        second = run("evaluate", "--data", "mydata", "--quiet", "--progress", "none", "--verbose")
        assert second.returncode == 0 and f"{info['url']} (reused" in second.stderr
        assert "answer store: 38 of 38" in second.stderr
        stop = run("server", "stop")
        assert stop.returncode == 0 and f"pid {info['pid']}" in stop.stdout
        assert run("server", "status").returncode == 1
        with pytest.raises(ProcessLookupError):
            os.kill(info["pid"], 0)
    finally:
        run("server", "stop")


def test_a_server_started_with_idle_stop_stops_itself(tmp_path):
    env = _server_env(tmp_path / "state-idle")
    from ragspan.tasks.supervision.local_server import free_port

    proc = subprocess.Popen([RAGSPAN, "server", "start", "--port", str(free_port()), "--idle-stop", "1"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    assert proc.returncode == 0 and "idle for 1 s, stopping" in out
    assert not (tmp_path / "state-idle" / "server" / "server.json").exists()
    started = time.time()
    status = subprocess.run([RAGSPAN, "server", "status"], env=env, cwd=tmp_path, capture_output=True, text=True,
                            check=False)
    assert status.returncode == 1 and time.time() - started < 30


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_reasons_agree_with_the_evidence_shown(user_ws, tmp_path):
    """A strict threshold (from a params file outside the workspace) leaves passages judged
    `supported` below it: the reasons must say so with the threshold, name the closest
    related passage of a hallucination, and quote the claim's own words."""
    strict = tmp_path / "strict.yaml"
    strict.write_text("judge:\n  support_threshold: 0.97\n", encoding="utf-8")
    assert main(["evaluate", "--data", "mydata", "--params", str(strict), "--progress", "none", "--quiet"]) == 0
    out = user_ws / "results" / "injected"
    d = pd.read_parquet(out / "diagnoses.parquet")
    spans = pd.read_parquet(out / "spans.parquet")
    related = spans[spans["verdict"].isin(["supported", "partial"])]
    halluc = d[d["label"] == "hallucination"]
    with_related = halluc[halluc["claim_id"].isin(related["claim_id"])]
    assert len(with_related), "the strict threshold should leave hallucinations with related passages"
    for reason in with_related["reason"]:
        assert "the closest is" in reason and "is about the claim" not in reason.split(";")[0][:60]
    for reason in halluc[~halluc["claim_id"].isin(related["claim_id"])]["reason"]:
        assert reason == "no passage in context, retrieved or corpus-wide supports or is about the claim"
    below = d[d["reason"].str.contains("judged supported with probability", regex=False)]
    assert len(below) and all("below support_threshold 0.97" in r for r in below["reason"])
    assert read_results(out)["manifest"]["params"]["judge"]["support_threshold"] == 0.97
    # words a reason quotes are the claim's own words, never stems
    lists = [(c, m) for c, r in zip(d["claim"], d["reason"])
             for m in re.findall(r"not in the (?:passage|quoted sentences): ((?:'[^']+'(?:, )?)+)", r)]
    quoted = [(c, w) for c, m in lists for w in re.findall(r"'([^']+)'", m)]
    assert quoted, "the sample has claims with names missing from a passage"
    assert all(w in c for c, w in quoted), [x for x in quoted if x[1] not in x[0]][:5]


def _counts(**labels: int) -> dict:
    return {lab: {"count": labels.get(lab, 0)} for lab in
            ("correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination", "unjudged")}


def test_what_to_fix_first_ranks_groups_by_effect_and_skips_near_total_groups():
    from ragspan.tasks.reporting.findings import concentration, concentration_text, group_effects

    metrics = {"claims": 100, "labels": _counts(correct=60, hallucination=40), "by_metadata": {
        "doc.doc_type": {"paper": _counts(correct=59, hallucination=38), "(none)": _counts(correct=1, hallucination=2)},
        "question.topic": {"a": _counts(correct=10, hallucination=20), "b": _counts(correct=50, hallucination=20)},
        "doc.lang": {"(none)": _counts(correct=2, hallucination=12), "en": _counts(correct=58, hallucination=28)},
    }}
    effects = group_effects(metrics, "hallucination")
    assert ("doc.doc_type", "paper") not in {(e["key"], e["value"]) for e in effects}  # 97% of all claims
    assert [e["effect"] for e in effects] == sorted((e["effect"] for e in effects), reverse=True)
    best = concentration(metrics, "hallucination")
    assert (best["key"], best["value"]) == ("doc.lang", "(none)") and best["low"] > 0
    assert best["low"] < best["effect"] < best["high"]
    text = concentration_text(best)
    assert "95% CI" in text and "nothing retrieved" in text  # (none) is explained
    quiet = {"claims": 40, "labels": _counts(correct=20, hallucination=20), "by_metadata": {
        "question.topic": {"a": _counts(correct=10, hallucination=11), "b": _counts(correct=10, hallucination=9)}}}
    assert concentration(quiet, "hallucination") is None  # no group beyond noise


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_a_field_every_document_shares_is_not_a_finding(user_ws):
    corpus = user_ws / "mydata" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    corpus.write_text("".join(json.dumps({**r, "doc_type": "paper"}) + "\n" for r in rows), encoding="utf-8")
    assert main(["evaluate", "--data", "mydata", "--progress", "none", "--quiet"]) == 0
    out = user_ws / "results" / "injected"
    assert "paper" in read_results(out)["by_metadata"]["doc.doc_type"]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "What to fix first" in summary and "doc.doc\\_type = paper" not in summary
    assert "doc_type = paper" not in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_compare_says_a_changed_run_file_is_a_system_change(user_ws, tmp_path, capsys):
    args = ["--progress", "none", "--quiet"]
    assert main(["evaluate", "--data", "mydata", "--out", "results/a", *args]) == 0
    run_file = user_ws / "mydata" / "runs" / "injected.jsonl"
    lines = run_file.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["answer"] = "The moon is made of green cheese."
    run_file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    assert main(["evaluate", "--data", "mydata", "--out", "results/b", *args]) == 0
    capsys.readouterr()
    assert main(["compare", "results/a", "results/b", "--resamples", "50"]) == 0
    text = capsys.readouterr().out
    assert "SYSTEM change" in text and "system changed: run file" in text and "WARNING" not in text
    assert "Claims that got worse" in text


def test_bad_input_messages_point_at_the_header_and_name_the_record(user_ws, capsys):
    data = user_ws / "mydata"
    questions = pd.read_csv(data / "questions.csv")
    questions.drop(columns=["question"]).to_csv(data / "questions.csv", index=False)
    assert main(["validate", "--data", "mydata"]) == 2
    err = capsys.readouterr().err
    assert "questions.csv: field 'question': missing required column in the header" in err and "row" not in err
    questions.to_csv(data / "questions.csv", index=False)
    corpus = data / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows[4]["text"] = ""
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["validate", "--data", "mydata"]) == 2
    err = capsys.readouterr().err
    assert f"corpus.jsonl: row 5, field 'text': empty string (doc_id {rows[4]['doc_id']!r})" in err
