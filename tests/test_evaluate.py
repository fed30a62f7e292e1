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


def _shard_of(tables: dict[str, pd.DataFrame], question_ids: list[str]):
    """The rows of `question_ids` in the sample's tables, as one shard's result."""
    from ragspan.tasks.core.shards import ShardResult
    from ragspan.tasks.judges.base import JudgeStats

    mine = set(question_ids)
    claims = tables["claims"][tables["claims"]["question_id"].isin(mine)].reset_index(drop=True)
    rows = {name: t[(t["claim_id"].isin(set(claims["claim_id"])) if name == "spans" else t["question_id"].isin(mine))]
            .reset_index(drop=True) for name, t in tables.items()}
    return ShardResult(rows["claims"], rows["spans"], rows["diagnoses"], JudgeStats(), {},
                       answer_spans=rows["answer_spans"])


def test_table_files_written_from_spilled_shards_equal_those_of_the_tables_assembled_in_memory(
        sample_results, tmp_path):
    """The flow writes its table files window by window from the spilled shards and the
    stored rows (RunParts.chunks, Parquet row groups); the previous path assembled every
    table in memory (merged) and wrote it whole (results_pieces): the same tables."""
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.core.shards import ShardResult
    from ragspan.tasks.inputs.load import checked_workspace
    from ragspan.tasks.judges.base import JudgeStats
    from ragspan.tasks.reporting.report import (
        BYTE_COLUMNS,
        TABLE_FILES,
        results_pieces,
        table_file_pieces,
    )
    from ragspan.tasks.reuse.answer_store import Reuse, RunParts, merged
    from ragspan.tasks.reuse.shard_spill import spill, spilling
    from ragspan.tasks.state._atomic import write_parquet_pieces

    out, _ = sample_results
    ws = checked_workspace(SAMPLE, "baseline", load_settings(None))
    tables = {name: pd.read_parquet(out / f"{name}.parquet").drop(columns=list(BYTE_COLUMNS), errors="ignore")
              for name in ("claims", "spans", "diagnoses", "answer_spans")}
    ids = ws.answers["question_id"].tolist()
    stored = ids[1::4]  # every fourth answer "reused", in reverse answer order as a store may give them
    parts = [_shard_of(tables, [q]) for q in reversed(stored)]
    known = ShardResult(*(pd.concat([getattr(p, n) for p in parts], ignore_index=True)
                          for n in ("claims", "spans", "diagnoses")), JudgeStats(), {},
                        answer_spans=pd.concat([p.answer_spans_table() for p in parts], ignore_index=True))
    fresh = ws.answers[~ws.answers["question_id"].isin(set(stored))].reset_index(drop=True)
    shards = [_shard_of(tables, fresh["question_id"].tolist()[i:i + 3]) for i in range(0, len(fresh), 3)]
    reuse = Reuse(fresh, known, {}, "", reused=len(stored))
    with spilling(tmp_path / "spill") as where:
        spilled = [spill(s, where, i) for i, s in enumerate(shards)]
        run = RunParts(reuse, ws.answers, spilled)
        texts = dict(zip(ws.corpus["doc_id"], ws.corpus["text"]))
        answer_texts = dict(zip(ws.answers["question_id"], ws.answers["answer"]))
        (tmp_path / "new").mkdir()
        for name in TABLE_FILES:
            write_parquet_pieces(tmp_path / "new" / name,
                                 table_file_pieces(name, run.chunks(name.removesuffix(".parquet")), answer_texts, texts))
        whole = merged(reuse, ws.answers, spilled)
    _, _, writers = results_pieces("baseline", whole.claims, whole.spans, whole.diagnoses, ws.answers, ws.retrieved,
                                   ws.corpus, ws.questions, {}, {}, answer_spans=whole.answer_spans_table())
    (tmp_path / "old").mkdir()
    import pyarrow.parquet as pq

    for name in TABLE_FILES:
        writers[name](tmp_path / "old" / name)
        new, old = pd.read_parquet(tmp_path / "new" / name), pd.read_parquet(tmp_path / "old" / name)
        pd.testing.assert_frame_equal(new, old, obj=name)
        pd.testing.assert_frame_equal(new, pd.read_parquet(out / name), obj=f"{name} of the flow")
    assert pq.ParquetFile(tmp_path / "new" / "claims.parquet").metadata.num_row_groups > 3  # written in pieces


def test_small_shards_write_the_same_table_files_as_one_shard(sample_results, tmp_path):
    out, metrics = sample_results
    params = tmp_path / "params.yaml"
    params.write_text("pipeline:\n  shard_size: 4\n", encoding="utf-8")
    small = tmp_path / "small"
    again = run_evaluate(SAMPLE, small, params=params)
    for name in ("claims", "spans", "diagnoses", "answer_spans"):
        pd.testing.assert_frame_equal(pd.read_parquet(small / f"{name}.parquet"),
                                      pd.read_parquet(out / f"{name}.parquet"), obj=name)
    assert (small / "taxonomy.csv").read_bytes() == (out / "taxonomy.csv").read_bytes()
    assert again["labels"] == metrics["labels"]
