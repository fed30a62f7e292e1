"""ragspan compare: pure functions (bootstrap CI, transitions, regressions, question
check) and the CLI on two results directories built here (no pipeline run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ragspan.tasks.reporting.compare import (
    QuestionsDiffer,
    Side,
    as_markdown,
    as_text,
    compare_runs,
    matched_claims,
    metadata_deltas,
    question_weights,
    questions_mismatch,
    rate_deltas,
    transition_matrix,
    transitions,
    unjudged_changes,
    worse_claims,
)

# Runs the real CLI with the two commands registered whether or not flows/cli.py lists
# them yet (once it does, this is the same as `ragspan ...`).
_CLI = ("import sys, ragspan.flows.cli as c; c._COMMAND_MODULES = tuple(dict.fromkeys("
        "(*c._COMMAND_MODULES, 'ragspan.flows.cli.init', 'ragspan.flows.cli.compare'))); "
        "sys.exit(c.main(sys.argv[1:]))")


def ragspan(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CLI, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def diag(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """(question_id, claim, label) rows → a minimal diagnoses table."""
    counters: dict[str, int] = {}
    out = []
    for q, claim, label in rows:
        i = counters.get(q, 0)
        counters[q] = i + 1
        out.append({"run": "r", "question_id": q, "claim_id": f"{q}:c{i}", "claim": claim, "label": label})
    return pd.DataFrame(out)


def manifest(questions_md5: str = "qmd5", ids_md5: str = "ids", count: int = 3, **params) -> dict:
    return {"questions": {"file": "questions.csv", "md5": questions_md5, "count": count, "ids_md5": ids_md5},
            "params": {"search": {"top_k": 5}, **params}, "inputs_md5": {"questions.csv": questions_md5}}


# --------------------------------------------------------------------------- bootstrap


def test_weights_resample_every_question_count_times():
    w = question_weights(7, 500, seed=3)
    assert w.shape == (500, 7)
    assert (w.sum(axis=1) == 7).all()
    assert np.array_equal(w, question_weights(7, 500, seed=3))  # fixed seed: reproducible


def test_identical_runs_have_zero_delta_within_noise():
    a = diag([(f"q{i}", f"claim {i}", ["correct", "hallucination"][i % 2]) for i in range(20)])
    rows = rate_deltas(a, a.copy(), resamples=300)
    assert all(r["delta"] == 0 and r["ci_low"] == 0 == r["ci_high"] and r["within_noise"] for r in rows)


def test_large_consistent_change_is_outside_noise_and_ci_brackets_delta():
    qs = [f"q{i:02d}" for i in range(40)]
    a = diag([(q, "x", "rank_failure") for q in qs] + [(q, "y", "correct") for q in qs])
    b = diag([(q, "x", "correct") for q in qs] + [(q, "y", "correct") for q in qs])
    rows = {r["label"]: r for r in rate_deltas(a, b, resamples=500)}
    rf = rows["rank_failure"]
    assert rf["a_rate"] == 0.5 and rf["b_rate"] == 0.0 and rf["delta"] == -0.5
    assert rf["ci_low"] <= rf["delta"] <= rf["ci_high"]
    assert not rf["within_noise"]
    assert rows["correct"]["delta"] == 0.5 and not rows["correct"]["within_noise"]


def test_one_flipped_claim_among_many_is_within_noise():
    qs = [f"q{i:02d}" for i in range(30)]
    a = diag([(q, "x", "correct" if i % 2 else "hallucination") for i, q in enumerate(qs)])
    b = a.copy()
    b.loc[0, "label"] = "correct"  # one hallucination fixed
    h = {r["label"]: r for r in rate_deltas(a, b, resamples=1000)}["hallucination"]
    assert h["delta"] < 0 and h["ci_low"] < 0 <= h["ci_high"] and h["within_noise"]


def test_unjudged_is_excluded_from_rates():
    a = diag([("q1", "x", "correct"), ("q1", "y", "unjudged"), ("q2", "z", "hallucination")])
    rows = {r["label"]: r for r in rate_deltas(a, a, resamples=10)}
    assert rows["correct"]["a_rate"] == 0.5 and "unjudged" not in rows


def test_metadata_deltas_use_each_sides_groups_and_mark_small_groups_as_noise():
    qs = [f"q{i:02d}" for i in range(12)]
    a = diag([(q, "x", "retrieval_miss") for q in qs])
    b = diag([(q, "x", "correct") for q in qs])
    groups = pd.DataFrame({"claim_id": a["claim_id"],
                           "question.topic": ["big"] * 10 + ["small"] * 2})
    out = metadata_deltas(a, b, groups, groups, qs, resamples=200)
    big = {r["label"]: r for r in out["question.topic"]["big"]}
    small = {r["label"]: r for r in out["question.topic"]["small"]}
    assert big["correct"]["delta"] == 1.0 and not big["correct"]["within_noise"]
    assert small["correct"]["delta"] == 1.0 and small["correct"]["few_questions"] and small["correct"]["within_noise"]


# --------------------------------------------------------------------------- transitions


def test_matching_by_question_and_text_handles_reordering_and_repeats():
    a = diag([("q1", "A claim.", "rank_failure"), ("q1", "Same.", "correct"), ("q1", "Same.", "hallucination"),
              ("q2", "Gone.", "correct")])
    b = diag([("q1", "Same.", "correct"), ("q1", "A  claim. ", "correct"), ("q1", "Same.", "synthesis_error"),
              ("q2", "New.", "correct")])
    m, only_a, only_b = matched_claims(a, b)
    assert (only_a, only_b) == (1, 1)
    pairs = sorted(zip(m["label_a"], m["label_b"]))
    assert pairs == [("correct", "correct"), ("hallucination", "synthesis_error"), ("rank_failure", "correct")]


def test_transition_matrix_and_changes():
    a = diag([(f"q{i}", "c", "rank_failure") for i in range(14)] + [("q20", "d", "correct"), ("q21", "e", "correct")])
    b = diag([(f"q{i}", "c", "correct") for i in range(14)] + [("q20", "d", "hallucination"), ("q21", "e", "unjudged")])
    m, _, _ = matched_claims(a, b)
    matrix = transition_matrix(m)
    assert list(matrix.index) == list(matrix.columns)
    assert matrix.loc["rank_failure", "correct"] == 14 and matrix.to_numpy().sum() == 16
    assert transitions(matrix)[0] == {"from": "rank_failure", "to": "correct", "count": 14}


def test_worse_claims_follow_the_label_order_and_keep_unjudged_apart():
    a = diag([("q1", "a", "correct"), ("q1", "b", "rank_failure"), ("q1", "c", "hallucination"),
              ("q1", "d", "synthesis_error"), ("q1", "e", "unjudged"), ("q1", "f", "correct")])
    b = diag([("q1", "a", "hallucination"), ("q1", "b", "retrieval_miss"), ("q1", "c", "correct"),
              ("q1", "d", "synthesis_error"), ("q1", "e", "correct"), ("q1", "f", "unjudged")])
    m, _, _ = matched_claims(a, b)
    worse = worse_claims(m)
    assert list(zip(worse["label_a"], worse["label_b"])) == [("correct", "hallucination"),
                                                              ("rank_failure", "retrieval_miss")]
    assert sorted(unjudged_changes(m)["claim"]) == ["e", "f"]


# --------------------------------------------------------------------------- questions


def test_questions_mismatch_by_ids_and_by_file():
    assert questions_mismatch(manifest(), manifest()) is None
    assert "ids differ" in questions_mismatch(manifest(), manifest(ids_md5="other", count=4))
    assert "md5 differs" in questions_mismatch(manifest(), manifest(questions_md5="edited"))
    legacy_a, legacy_b = {"inputs_md5": {"questions.csv": "1"}}, {"inputs_md5": {"questions.jsonl": "2"}}
    assert "md5 differs" in questions_mismatch(legacy_a, legacy_b)


def test_compare_runs_refuses_different_questions_unless_forced():
    d = diag([("q1", "x", "correct")])
    a = Side("A", d, {"run": "r", "manifest": manifest()})
    b = Side("B", d, {"run": "r", "manifest": manifest(ids_md5="zzz", count=9)})
    with pytest.raises(QuestionsDiffer, match="not evaluated on the same questions"):
        compare_runs(a, b, resamples=10)
    assert compare_runs(a, b, force=True, resamples=10)["questions"]["same"] is False


# --------------------------------------------------------------------------- kind of change


def test_change_kind_separates_evaluator_from_system_changes():
    from ragspan.tasks.reporting.change_kind import change_kind

    base = {**manifest(), "judge": {"kind": "local", "prompt_version": "x"}, "code_version": "1+a",
            "inputs_md5": {"questions.csv": "q", "corpus.jsonl": "c", "runs/baseline.jsonl": "r1"}}
    assert change_kind(base, base)["kind"] == "none"
    evaluator = {**base, "params": {"search": {"top_k": 0}}}
    assert change_kind(base, evaluator) == {"kind": "evaluator", "system": [],
                                            "evaluator": ["search.top_k 5 → 0"]}
    code = {**base, "code_version": "1+b"}
    assert change_kind(base, code)["kind"] == "evaluator"
    system = {**base, "inputs_md5": {**base["inputs_md5"], "runs/baseline.jsonl": "r2"}}
    result = change_kind(base, system)
    assert result["kind"] == "system" and "answers or retrieval" in result["system"][0]
    moved = {**base, "params": {**base["params"], "data": {"dir": "elsewhere", "runs": ["baseline"]}}}
    assert change_kind(base, moved)["kind"] == "none"  # the same data elsewhere is no change
    both = {**system, "judge": {"kind": "openai", "prompt_version": "x"}}
    assert change_kind(base, both)["kind"] == "both"


def test_compare_warns_when_evaluator_and_system_both_changed(tmp_path):
    d = diag([("q1", "x", "correct"), ("q2", "y", "correct")])
    m_a = {**manifest(), "inputs_md5": {"questions.csv": "qmd5", "runs/r.jsonl": "1"}}
    m_b = {**manifest(search={"top_k": 0}), "inputs_md5": {"questions.csv": "qmd5", "runs/r.jsonl": "2"}}
    text = as_text(compare_runs(Side("A", d, {"run": "r", "manifest": m_a}),
                                Side("B", d, {"run": "r", "manifest": m_b}), resamples=10))
    assert "WARNING: both the evaluator and the system changed" in text
    assert "Claims labelled worse (evaluator and system both changed)" in text


# --------------------------------------------------------------------------- CLI


def write_results(path: Path, d: pd.DataFrame, m: dict) -> Path:
    path.mkdir(parents=True)
    d.to_parquet(path / "diagnoses.parquet", index=False)
    (path / "metrics.json").write_text(json.dumps({"run": "baseline", "manifest": m}), encoding="utf-8")
    return path


@pytest.fixture
def two_results(tmp_path) -> tuple[Path, Path]:
    qs = [f"q{i:02d}" for i in range(20)]
    a = diag([(q, f"fact {q}", "rank_failure") for q in qs] + [(q, f"other {q}", "correct") for q in qs]
             + [("q00", "wobbly", "correct")])
    b = diag([(q, f"fact {q}", "correct") for q in qs] + [(q, f"other {q}", "correct") for q in qs]
             + [("q00", "wobbly", "hallucination")])
    return (write_results(tmp_path / "A", a, manifest(search={"top_k": 5})),
            write_results(tmp_path / "B", b, manifest(search={"top_k": 9})))


def test_cli_json(two_results):
    a, b = two_results
    out = ragspan("compare", str(a), str(b), "--format", "json", "--resamples", "300")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["transitions"]["changed"][0] == {"from": "rank_failure", "to": "correct", "count": 20}
    assert result["worse"] == [{"question_id": "q00", "claim_id_a": "q00:c2", "claim_id_b": "q00:c2",
                                "claim": "wobbly", "label_a": "correct", "label_b": "hallucination"}]
    rows = {r["label"]: r for r in result["overall"]}
    assert not rows["rank_failure"]["within_noise"] and rows["hallucination"]["within_noise"]
    assert result["params_changed"] == {"search.top_k": [5, 9]}
    assert result["bootstrap"]["seed"] == 0


def test_cli_markdown_and_table(two_results):
    a, b = two_results
    md = ragspan("compare", str(a), str(b), "--format", "markdown", "--resamples", "300")
    assert md.returncode == 0, md.stderr
    assert "| rank_failure |" in md.stdout and "CHANGED" in md.stdout and "within noise" in md.stdout
    assert "- 20 rank_failure → correct" in md.stdout
    assert "EVALUATOR change" in md.stdout and "search.top_k 5 → 9" in md.stdout
    assert "### Claims judged worse by B's evaluator (1)" in md.stdout
    table = ragspan("compare", str(a), str(b), "--resamples", "300")
    assert table.returncode == 0 and "20 rank_failure → correct" in table.stdout


def test_cli_refuses_different_questions(tmp_path, two_results):
    a, _ = two_results
    other = write_results(tmp_path / "C", diag([("q99", "x", "correct")]), manifest(ids_md5="x", count=1))
    out = ragspan("compare", str(a), str(other))
    assert out.returncode == 2
    assert "not evaluated on the same questions" in out.stderr and "--force" in out.stderr
    assert ragspan("compare", str(a), str(other), "--force", "--format", "json").returncode == 0


def test_cli_names_an_unknown_side(tmp_path, two_results):
    a, _ = two_results
    out = ragspan("compare", str(a), "no-such-thing", cwd=tmp_path)
    assert out.returncode == 2 and "neither a results directory" in out.stderr


def test_markdown_is_stable_for_a_fixed_seed(two_results):
    from ragspan.tasks.reporting.compare_sides import side_from_dir

    a, b = (side_from_dir(p) for p in two_results)
    assert as_markdown(compare_runs(a, b, resamples=200)) == as_markdown(compare_runs(a, b, resamples=200))


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_evaluate_compare_to_puts_the_deltas_in_the_report(tmp_path, capsys):
    """The loop: evaluate A, change a parameter, compare, evaluate B showing the deltas."""
    from conftest import SAMPLE
    from ragspan.flows.cli import main as cli

    a, b = tmp_path / "a", tmp_path / "b"
    assert cli(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(a), "--quiet"]) == 0
    no_search = tmp_path / "params.yaml"
    no_search.write_text("search:\n  top_k: 0\n")
    assert cli(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(b), "--quiet",
                "--params", str(no_search)]) == 0
    capsys.readouterr()
    assert cli(["compare", str(a), str(b), "--format", "json"]) == 0
    comparison = tmp_path / "compare.json"
    comparison.write_text(capsys.readouterr().out)
    assert cli(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(b), "--quiet",
                "--params", str(no_search), "--compare-to", str(comparison)]) == 0
    page = (b / "report.html").read_text(encoding="utf-8")
    assert '<section id="compare">' in page and "retrieval_miss" in page
    assert "Label transitions of matched claims" in page  # retrieval_miss claims moved without search
