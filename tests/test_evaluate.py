"""End to end: the real Prefect flow on the bundled sample, its outputs, and its cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE

SAMPLE_ANSWERS = sum(1 for line in (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()
                     if line.strip())
from ragspan.tasks.core import schemas
from ragspan.tasks.reporting.results_files import read_results

pytestmark = pytest.mark.usefixtures("prefect_server")


def run_evaluate(data: Path, out: Path, run: str = "baseline", params: Path | None = None) -> dict:
    from ragspan.flows.evaluate import evaluate

    return evaluate(data_dir=str(data), run=run, out_dir=str(out), params_path=str(params) if params else None)


@pytest.fixture(scope="module")
def sample_results(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("sample") / "results"
    return out, run_evaluate(SAMPLE, out)


def test_sample_yields_every_label_and_the_expected_ones(sample_results):
    out, metrics = sample_results
    diagnoses = pd.read_parquet(out / "diagnoses.parquet")
    expected = pd.read_csv(SAMPLE / "expected_labels.csv")
    merged = expected.merge(diagnoses, on=["question_id", "claim"], how="outer", suffixes=("_expected", ""))
    assert len(merged) == len(expected) == len(diagnoses)
    # expected_labels.csv is the truth; the local judge's known mistakes on it are listed,
    # with why, in known_judge_errors.csv — and must stay exactly those mistakes.
    known = pd.read_csv(SAMPLE / "known_judge_errors.csv")
    wrong = merged[(merged["label_expected"] != merged["label"])
                   | (merged["source_conflict_expected"] != merged["source_conflict"])]
    got = sorted(zip(wrong["question_id"], wrong["claim"], wrong["label"], wrong["source_conflict"]))
    assert got == sorted(zip(known["question_id"], known["claim"], known["judged_label"],
                             known["judged_source_conflict"])), wrong[
        ["question_id", "claim", "label_expected", "label", "source_conflict", "reason"]].to_string()
    assert set(diagnoses["label"]) == set(schemas.LABELS)
    # the claims whose evidence a chunk boundary cuts, exactly (data/sample/README.md)
    cut = merged.loc[merged["chunk_split_expected"], ["question_id", "claim"]]
    assert sorted(map(tuple, cut.to_numpy())) == sorted(
        map(tuple, merged.loc[merged["chunk_split"].astype(bool), ["question_id", "claim"]].to_numpy()))
    assert metrics["chunk_split"]["claims"] == len(cut) >= 1
    assert metrics["labels"]["unjudged"]["count"] == (diagnoses["label"] == "unjudged").sum() >= 1


def test_every_written_span_is_an_exact_corpus_slice(sample_results):
    out, _ = sample_results
    corpus = pd.read_json(SAMPLE / "corpus.jsonl", lines=True)
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    spans = pd.read_parquet(out / "spans.parquet")
    diagnoses = pd.read_parquet(out / "diagnoses.parquet").dropna(subset=["char_start"])
    assert len(spans) > 0 and len(diagnoses) > 0
    for table in (spans, diagnoses):
        for d, s, e, t in zip(table["doc_id"], table["char_start"], table["char_end"], table["span_text"]):
            assert texts[d][int(s) : int(e)] == t


def test_outputs_match_their_schemas_and_design_columns(sample_results):
    out, metrics = sample_results
    schemas.Claims.validate(pd.read_parquet(out / "claims.parquet"))
    schemas.Spans.validate(pd.read_parquet(out / "spans.parquet"))
    d = schemas.Diagnoses.validate(pd.read_parquet(out / "diagnoses.parquet"))
    design = "run question_id claim_id claim answer_start answer_end label doc_id chunk_id char_start char_end span_text rank in_context score reason"
    assert set(design.split()) <= set(d.columns)
    on_disk = read_results(out)
    assert on_disk["labels"] == metrics["labels"]
    assert {"inputs_md5", "params", "judge", "code_version", "ragspan_version"} <= set(on_disk["manifest"])
    taxonomy = pd.read_csv(out / "taxonomy.csv")
    assert list(taxonomy["label"]) == list(schemas.LABELS)
    assert taxonomy["count"].sum() == len(d)
    judged = d[d["label"] != "unjudged"]
    rates = dict(zip(taxonomy["label"], taxonomy["rate"]))
    assert rates["correct"] == pytest.approx((judged["label"] == "correct").mean(), abs=1e-4)


NO_REUSE = "pipeline:\n  reuse_answers: false\n"
STEPS = ("decompose", "extract", "validate-offsets", "corpus-search", "diagnose")


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_parquet(out / f"{t}.parquet") for t in ("claims", "spans", "diagnoses")}


def _assert_same_tables(a: Path, b: Path) -> None:
    for name, table in _tables(a).items():
        pd.testing.assert_frame_equal(table, _tables(b)[name], obj=name)


def test_unchanged_rerun_reuses_every_answer_without_judge_calls(tmp_path, state_dir):
    first = run_evaluate(SAMPLE, tmp_path / "a")
    assert first["judge"]["calls"] > 0 and first["judge"]["answers_reused"] == 0
    second = run_evaluate(SAMPLE, tmp_path / "b")
    assert second["judge"]["answers_reused"] == SAMPLE_ANSWERS  # every answer of the sample
    assert second["judge"]["task_states"] == {}  # no step task ran at all
    assert second["judge"]["calls"] == 0
    assert second["labels"] == first["labels"]
    _assert_same_tables(tmp_path / "a", tmp_path / "b")


def test_unchanged_rerun_without_reuse_is_served_from_prefects_step_cache(tmp_path, state_dir):
    params = tmp_path / "params.yaml"
    params.write_text(NO_REUSE)
    first = run_evaluate(SAMPLE, tmp_path / "a", params=params)
    assert first["judge"]["calls"] > 0
    second = run_evaluate(SAMPLE, tmp_path / "b", params=params)
    states = second["judge"]["task_states"]
    for step in STEPS:
        assert set(states[step]) == {"Cached"}, states
    assert second["judge"]["calls"] == 0 and second["judge"]["answers_reused"] == 0
    assert second["labels"] == first["labels"]
    _assert_same_tables(tmp_path / "a", tmp_path / "b")


def test_an_unchanged_rerun_writes_from_the_kept_snapshot_what_computing_it_would(tmp_path, state_dir):
    """The cold run keeps its results' pieces; the re-run writes them with its own facts,
    and every file equals a re-run that computes its report (snapshots removed): the JSON
    files, report.html and summary.md byte for byte, the tables row for row."""
    run_evaluate(SAMPLE, tmp_path / "a")
    assert len(list((state_dir / "reports").iterdir())) == 1
    kept = run_evaluate(SAMPLE, tmp_path / "b")
    assert kept["judge"]["answers_reused"] == SAMPLE_ANSWERS and kept["judge"]["calls"] == 0
    shutil.rmtree(state_dir / "reports")
    run_evaluate(SAMPLE, tmp_path / "c")  # computed, and kept again
    names = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        b, c = tmp_path / "b" / name, tmp_path / "c" / name
        if name.endswith(".parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(b), pd.read_parquet(c), obj=name)
        else:
            assert b.read_bytes() == c.read_bytes(), name
    assert '"calls": 0' in (tmp_path / "b" / "run.json").read_text()


def _change_first_answer(data: Path) -> None:
    run_file = data / "runs" / "baseline.jsonl"
    lines = run_file.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[0])
    rec["answer"] = rec["answer"] + " Northwind also sells submarines."
    lines[0] = json.dumps(rec, ensure_ascii=False)
    run_file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_changing_one_answer_evaluates_only_that_answer(tmp_path, state_dir, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    run_evaluate(data, tmp_path / "a")
    _change_first_answer(data)
    second = run_evaluate(data, tmp_path / "b")
    assert second["judge"]["answers_reused"] == SAMPLE_ANSWERS - 1
    assert second["judge"]["task_states"]["decompose"] == {"Completed": 1}
    assert 0 < second["judge"]["calls"] < 20  # one answer's calls, not the run's ~150
    new = pd.read_parquet(tmp_path / "b" / "diagnoses.parquet")
    assert "Northwind also sells submarines." in set(new["claim"])
    # The same tables as a run of the changed data from nothing (fresh state, no store).
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "fresh-state"))
    run_evaluate(data, tmp_path / "scratch")
    _assert_same_tables(tmp_path / "b", tmp_path / "scratch")


def test_without_reuse_changing_one_answer_rejudges_only_its_shard(tmp_path, state_dir):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    params = tmp_path / "params.yaml"
    params.write_text("pipeline:\n  shard_size: 6\n  reuse_answers: false\n")
    run_evaluate(data, tmp_path / "a", params=params)
    _change_first_answer(data)
    second = run_evaluate(data, tmp_path / "b", params=params)
    decompose_states = second["judge"]["task_states"]["decompose"]
    assert decompose_states.get("Completed") == 1 and decompose_states.get("Cached", 0) >= 5
    new = pd.read_parquet(tmp_path / "b" / "diagnoses.parquet")
    assert "Northwind also sells submarines." in set(new["claim"])
