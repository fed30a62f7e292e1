"""`ragspan compare A B --fail-on RULES` (tasks/reporting/gate.py): each rule on two
results directories written in the results layout (metrics.json + manifest.json + …).

A and B: 20 questions of 3 claims. In B, 10 claims went from `correct` to `hallucination`
(ten questions) and 2 from `retrieval_miss` to `correct` (two of those ten questions):

    correct         66.7% → 53.3%   (−13.3 pp, worse)
    retrieval_miss  33.3% → 30.0%   (−3.3 pp, better)
    hallucination    0.0% → 16.7%   (+16.7 pp, worse, outside the noise)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ragspan.tasks.errors import UsageError
from ragspan.tasks.reporting.compare import Side, compare_runs
from ragspan.tasks.reporting.gate import gate_failures, parse_rules
from ragspan.tasks.reporting.results_files import split_results
from test_compare import diag, manifest, ragspan

QS = [f"q{i:02d}" for i in range(20)]
A_ROWS = [(q, f"{kind} {q}", label) for q in QS
          for kind, label in (("a", "correct"), ("b", "correct"), ("c", "retrieval_miss"))]

def _b_rows() -> list[tuple[str, str, str]]:
    rows = []
    for q, claim, label in A_ROWS:
        if claim.startswith("b ") and q < "q10":
            label = "hallucination"
        elif claim.startswith("c ") and q < "q02":
            label = "correct"
        rows.append((q, claim, label))
    return rows


def _write(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    """A results directory as report.py writes it: diagnoses.parquet and the split files."""
    d = diag(rows)
    path.mkdir(parents=True)
    d.to_parquet(path / "diagnoses.parquet", index=False)
    view = {"run": "r", "claims": len(d), "labels": {}, "judge": {"calls": 3},
            "manifest": {**manifest(count=len(QS)), "run": "r", "git_rev": "abc"}}
    for name, body in split_results(view).items():
        (path / name).write_text(json.dumps(body), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gate")
    return _write(root / "A", A_ROWS), _write(root / "B", _b_rows())


@pytest.fixture(scope="module")
def result(dirs) -> dict:
    from ragspan.tasks.reporting.compare_sides import side_from_dir

    a, b = (side_from_dir(p) for p in dirs)
    return compare_runs(a, b, resamples=500)


def fails(result: dict, rules: str) -> list[str]:
    return gate_failures(result, parse_rules([rules]))


def test_the_fixture_moves_as_described(result):
    rows = {r["label"]: r for r in result["overall"]}
    assert rows["correct"]["delta"] == pytest.approx(-8 / 60, abs=1e-4)
    assert rows["hallucination"]["delta"] == pytest.approx(10 / 60, abs=1e-4)
    assert not rows["hallucination"]["within_noise"]


def test_rate_rule_fails_past_its_threshold_only_in_the_worse_direction(result):
    assert fails(result, "hallucination:20pp") == []  # +16.7 pp is within 20
    (why,) = fails(result, "hallucination:10pp")
    assert why.startswith("hallucination:10pp: hallucination 0.0% → 16.7% (+16.7 pp)")
    (why,) = fails(result, "correct:10pp")  # correct fell 13.3 pp: worse
    assert "66.7% → 53.3%" in why
    assert fails(result, "correct:15pp") == []
    assert fails(result, "retrieval_miss:0pp") == []  # it improved: never a failure
    assert [w.split(": ")[1].split()[0] for w in fails(result, "any:10pp")] == ["correct", "hallucination"]
    assert fails(result, "any:17pp") == []


def test_significant_rule_fails_on_a_worsening_outside_the_noise(result):
    whys = fails(result, "significant")
    assert [w.split(": ")[1].split()[0] for w in whys] == ["correct", "hallucination"]
    assert all("excludes 0" in w for w in whys)
    (why,) = fails(result, "significant:hallucination")
    assert why.startswith("significant:hallucination: hallucination 0.0% → 16.7%")
    assert fails(result, "significant:retrieval_miss") == []  # it improved
    same = compare_runs(*(Side(n, diag(A_ROWS), {"manifest": manifest()}) for n in "AB"), resamples=200)
    assert fails(same, "significant,any:0pp,correct-lost") == []


def test_correct_lost_rule_counts_claims_that_went_from_correct_to_a_failure(result):
    (why,) = fails(result, "correct-lost")
    assert "10 claims went from correct to a failure (10 → hallucination)" in why
    assert fails(result, "correct-lost:10") == []
    assert len(fails(result, "correct-lost:9")) == 1


@pytest.mark.parametrize("bad", ["halucination:2pp", "correct:2", "significant:any_label", "correct-lost:x",
                                 "rate>2", ","])
def test_bad_rules_are_usage_errors(bad):
    with pytest.raises(UsageError, match="--fail-on"):
        parse_rules([bad])


def test_cli_exit_codes_and_why(dirs, tmp_path):
    a, b = (str(p) for p in dirs)
    failed = ragspan("compare", a, b, "--format", "markdown", "--resamples", "300",
                     "--fail-on", "hallucination:2pp", "--fail-on", "correct-lost:5,retrieval_miss:1pp")
    assert failed.returncode == 1, failed.stderr
    assert "### Gate: **failed**" in failed.stdout and "hallucination:2pp: hallucination" in failed.stdout
    assert "gate FAILED" in failed.stderr and "correct-lost:5: 10 claims" in failed.stderr
    assert "retrieval_miss:1pp" not in failed.stderr.replace("correct-lost:5,retrieval_miss:1pp", "")

    passed = ragspan("compare", a, b, "--format", "json", "--resamples", "300", "--fail-on", "any:20pp")
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["gate"] == {"rules": ["any:20pp"], "passed": True, "failures": []}

    # a bad rule is reported before either side is read (these directories do not exist)
    bad = ragspan("compare", str(tmp_path / "nope"), str(tmp_path / "nada"), "--fail-on", "hallucinaton:2pp")
    assert bad.returncode == 2 and "unknown label 'hallucinaton'" in bad.stderr
