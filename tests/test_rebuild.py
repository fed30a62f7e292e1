"""What an index rebuild changed (tasks/reporting/rebuild.py): when it is told, against which
results, and where it shows (the Markdown artifact, the watch flow's choice of previous
results). The end-to-end run with the real flow is in tests/test_incremental.py."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from ragspan.flows.watch import append_history, previous_results_dir
from ragspan.tasks.core.taxonomy import LABELS
from ragspan.tasks.reporting import artifacts as art
from ragspan.tasks.reporting.compare import Side, compare_runs, matched_claims
from ragspan.tasks.reporting.rebuild import rebuild_changes, rebuild_lines, rebuild_text

BEFORE = {"inputs_md5": {"corpus.jsonl": "c1", "chunks.jsonl": "k1", "runs/r.jsonl": "r1", "questions.csv": "q1"},
          "judge": {"kind": "local", "options": []}, "code_version": "v", "params_hash": "p"}


def _diagnoses(labels: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"question_id": ["q1", "q1", "q2"], "claim_id": ["q1:c0", "q1:c1", "q2:c0"],
                         "claim": ["A.", "B.", "C."], "label": labels})


def test_transitions_are_told_only_when_the_corpus_changed():
    old = _diagnoses(["hallucination", "rank_failure", "correct"])
    new = _diagnoses(["retrieval_miss", "correct", "correct"])
    assert rebuild_changes((BEFORE, old), BEFORE, new) is None  # same corpus: a re-run, not a rebuild
    assert rebuild_changes(None, BEFORE, new) is None  # nothing before
    rebuilt = {**BEFORE, "judge": {"kind": "local", "options": ()},  # a tuple in memory, a list on disk
               "inputs_md5": {**BEFORE["inputs_md5"], "chunks.jsonl": "k2"}}
    change = rebuild_changes((BEFORE, old), rebuilt, new)
    assert change["transitions"] == {"hallucination → retrieval_miss": 1, "rank_failure → correct": 1}
    assert change["claims_compared"] == 3 and change["also_changed"] == []
    assert [c["claim_id"] for c in change["claims"]] == ["q1:c0", "q1:c1"]
    assert rebuild_text(change) == ("index rebuild: 2 of 3 claims changed label: hallucination → retrieval_miss 1, "
                                    "rank_failure → correct 1")
    also = rebuild_changes((BEFORE, old), {**rebuilt, "inputs_md5": {**rebuilt["inputs_md5"], "runs/r.jsonl": "r2"},
                                           "code_version": "w"}, new)
    assert also["also_changed"] == ["run file", "code"]
    assert "changed too" in rebuild_text(also)


def test_the_artifact_lists_the_transitions_and_the_claims():
    change = rebuild_changes((BEFORE, _diagnoses(["hallucination", "correct", "correct"])),
                             {**BEFORE, "inputs_md5": {**BEFORE["inputs_md5"], "corpus.jsonl": "c2"}},
                             _diagnoses(["retrieval_miss", "correct", "correct"]))
    labels = {lab: {"count": 1, "rate": 0.5} for lab in LABELS}
    metrics = {"run": "r", "claims": 3, "judged": 3, "unjudged": 0, "labels": labels, "failure_share": {},
               "by_metadata": {}, "judge": {}, "rebuild": change}
    text = art.artifact_markdown(metrics, [], "h:/r", None)
    assert "What the index rebuild changed" in text and "| hallucination → retrieval\\_miss | 1 |" in text
    assert "`q1:c0`" in text
    assert "rebuild" not in art.artifact_markdown({**metrics, "rebuild": None}, [], "h:/r", None)
    assert rebuild_lines(None) == []


def test_the_watch_flow_tells_against_the_last_run_of_the_same_index(tmp_path: Path):
    root = tmp_path
    for name, index in (("event-a-1", "a"), ("event-b-1", "b"), ("event-a-2", "a")):
        (root / "results" / name).mkdir(parents=True)
        append_history(root, {"name": name, "index": index, "results": f"results/{name}"})
    new = root / "results" / "event-a-3"
    assert previous_results_dir(root, "a", new) == str(root / "results" / "event-a-2")
    assert previous_results_dir(root, "c", new) is None
    (new).mkdir()
    (new / "manifest.json").write_text(json.dumps(BEFORE))  # results/<index>/ of a DVC workspace: its own
    assert previous_results_dir(root, "a", new) is None


def _table(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    """(question_id, claim_id, claim, label) rows → a diagnoses table."""
    return pd.DataFrame(rows, columns=["question_id", "claim_id", "claim", "label"])


def test_the_rebuild_tells_the_transitions_ragspan_compare_tells():
    """The same two results give the same transitions in the rebuild section and in
    `ragspan compare`, in the cases where claim ids, repeats or whitespace differ."""
    old = _table([
        ("q1", "q1:c0", "Paris is the capital.", "hallucination"),
        ("q1", "q1:c1", "The tower is 330 m tall.", "rank_failure"),  # becomes q1:c2: a claim comes first
        ("q2", "q2:c0", "It opened in 1889.", "correct"),  # one text twice in one answer
        ("q2", "q2:c1", "It opened in 1889.", "rank_failure"),
        ("q3", "q3:c0", "The  river   is long.", "synthesis_error"),  # whitespace only
        ("q4", "q4:c0", "the sky is blue.", "correct"),  # case only: another claim for both
        ("q5", "q5:c0", "Judged later.", "unjudged"),
    ])
    new = _table([
        ("q1", "q1:c0", "Paris is the capital.", "retrieval_miss"),
        ("q1", "q1:c1", "A new sentence.", "correct"),
        ("q1", "q1:c2", "The tower is 330 m tall.", "correct"),
        ("q2", "q2:c0", "A claim before the repeats.", "correct"),
        ("q2", "q2:c1", "It opened in 1889.", "correct"),
        ("q2", "q2:c2", "It opened in 1889.", "correct"),
        ("q3", "q3:c0", " The river is long.", "hallucination"),
        ("q4", "q4:c0", "The sky is blue.", "hallucination"),
        ("q5", "q5:c0", "Judged later.", "correct"),
    ])
    rebuilt = {**BEFORE, "inputs_md5": {**BEFORE["inputs_md5"], "chunks.jsonl": "k2"}}
    change = rebuild_changes((BEFORE, old), rebuilt, new)
    compared = compare_runs(Side("before", old, {"manifest": BEFORE}), Side("after", new, {"manifest": rebuilt}),
                            resamples=20)["transitions"]
    assert change["transitions"] == {f"{c['from']} → {c['to']}": c["count"] for c in compared["changed"]}
    assert change["claims_compared"] == compared["matched"] == 6
    assert change["transitions"] == {"rank_failure → correct": 2, "hallucination → retrieval_miss": 1,
                                     "synthesis_error → hallucination": 1, "unjudged → correct": 1}
    matched, _, _ = matched_claims(old, new)
    moved = matched[matched["label_a"] != matched["label_b"]]
    assert sorted((c["question_id"], c["claim_id"], c["before"], c["after"]) for c in change["claims"]) == \
        sorted(zip(moved["question_id"], moved["claim_id_b"], moved["label_a"], moved["label_b"]))
    nothing_matched = rebuild_changes((BEFORE, old), rebuilt, new.iloc[:0])
    assert (nothing_matched["claims_compared"], nothing_matched["transitions"], nothing_matched["claims"]) == (0, {}, [])
