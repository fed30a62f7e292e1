"""The Python API (`import ragspan`, docs/api.md): evaluate → Results, load_results,
compare with the same gate as `ragspan compare --fail-on`, and the docs' example, run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pandera.errors
import pytest
import ragspan
from conftest import REPO, SAMPLE
from ragspan.tasks.core import schemas
from ragspan.tasks.core.taxonomy import LABELS
from ragspan.tasks.reporting.gate import gate_failures, parse_rules
from test_gate import A_ROWS, _b_rows, _write

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> ragspan.Results:
    return ragspan.evaluate(SAMPLE, "baseline", out=tmp_path_factory.mktemp("api") / "baseline")


def test_import_ragspan_is_light_and_every_public_name_resolves():
    code = ("import sys, ragspan, pathlib; heavy = [m for m in ('prefect', 'pandas', 'pydantic') if m in sys.modules]; "
            "names = {n: type(getattr(ragspan, n)).__name__ for n in ragspan.__all__}; "
            "print(heavy, (pathlib.Path(ragspan.__file__).parent / 'py.typed').is_file(), names)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, typed, names = out.strip().split(" ", 2)[0], out.split(" ")[1], out.split(" ", 2)[2]
    assert heavy == "[]" and typed == "True", out  # the CLI imports `ragspan` first: it must stay cheap
    assert set(eval(names)) == {"Comparison", "InputError", "RagspanError", "Results", "compare", "evaluate",
                                "evaluate_flow", "load_results"}
    assert "'evaluate_flow': 'Flow'" in names and "'evaluate': 'function'" in names


def test_evaluate_returns_the_results_it_wrote(results):
    assert results.run == "baseline" and results.report_path == results.path / "report.html"
    for name, model in (("claims", schemas.Claims), ("spans", schemas.Spans), ("diagnoses", schemas.Diagnoses)):
        table = getattr(results, name)
        pd.testing.assert_frame_equal(table, model.validate(pd.read_parquet(results.path / f"{name}.parquet")))
    # metrics: metrics.json's results, the answer-character metric in full (answer_chars.json)
    full = results.metrics["answer_chars"]
    assert json.loads((results.path / "metrics.json").read_text()) == {
        **results.metrics, "answer_chars": {"share": full["share"], "ci95": full["ci95"]}}
    assert json.loads((results.path / "answer_chars.json").read_text())["chars"] == full["chars"]
    pd.testing.assert_frame_equal(results.answer_spans, schemas.AnswerSpans.validate(
        pd.read_parquet(results.path / "answer_spans.parquet")))
    assert results.manifest["run"] == "baseline" and results.manifest["params"]["judge"]["kind"] == "local"
    counts = results.diagnoses["label"].value_counts()
    for label in LABELS:
        assert results.metrics["labels"][label]["count"] == counts.get(label, 0)
    assert results.run_facts["calls"] >= 0 and "task_states" in results.run_facts


def test_rates_summary_and_the_notebook_table_show_the_same_figures(results):
    rates = results.rates().set_index("label")
    assert list(rates.index) == list(results.metrics["labels"])
    correct = results.metrics["rate_ci95"]["correct"]
    assert rates.loc["correct", "ci95_low"] == correct["low"] and rates.loc["correct", "ci95_high"] == correct["high"]
    assert pd.isna(rates.loc["unjudged", "rate"])
    html = results._repr_html_()
    assert html.count("<tr>") == len(rates) + 1  # the header and one row per label
    row = re.search(r"<td>correct</td>(.*?)</tr>", html)[1]
    assert f"{results.metrics['labels']['correct']['rate']:.1%}" in row
    assert f"{correct['low']:.1%}–{correct['high']:.1%}" in row
    text = results.summary()
    assert re.search(rf"^claims +{results.metrics['claims']} ", text, re.MULTILINE)
    assert re.search(rf"^correct +{results.metrics['labels']['correct']['count']} ", text, re.MULTILINE)


def test_load_results_reads_a_directory_back_and_refuses_a_table_that_breaks_its_schema(results, tmp_path):
    again = ragspan.load_results(results.path)
    pd.testing.assert_frame_equal(again.diagnoses, results.diagnoses)
    assert again.metrics == results.metrics
    pd.testing.assert_frame_equal(again.answer_spans, results.answer_spans)
    older = shutil.copytree(results.path, tmp_path / "older")
    (older / "answer_spans.parquet").unlink()  # results written before answer spans existed
    assert ragspan.load_results(older).answer_spans is None
    broken = shutil.copytree(results.path, tmp_path / "broken")
    diag = pd.read_parquet(broken / "diagnoses.parquet")
    diag.loc[0, "label"] = "wrong_label"
    diag.to_parquet(broken / "diagnoses.parquet", index=False)
    with pytest.raises(pandera.errors.SchemaError, match="label"):
        ragspan.load_results(broken)
    with pytest.raises(ragspan.RagspanError, match="no metrics.json"):
        ragspan.load_results(tmp_path)


def test_overrides_are_params_keys(results, tmp_path):
    no_search = ragspan.evaluate(SAMPLE, "baseline", out=tmp_path / "no-search", search__top_k=0)
    assert no_search.manifest["params"]["search"]["top_k"] == 0
    # nothing searched, nothing found: a retrieval_miss left is a claim whose evidence a chunk
    # boundary cut, its other part in a never-retrieved neighbour (decisions.md #38)
    assert no_search.metrics["labels"]["retrieval_miss"]["count"] == (
        no_search.metrics["chunk_split"]["by_label"].get("retrieval_miss", 0))
    assert results.metrics["labels"]["retrieval_miss"]["count"] > 0


def test_a_bad_input_raises_before_anything_is_written(tmp_path):
    data = shutil.copytree(SAMPLE, tmp_path / "data")
    run = data / "runs" / "baseline.jsonl"
    run.write_text(run.read_text(encoding="utf-8").replace('"question_id": "q02"', '"question_id": "q02",,', 1),
                   encoding="utf-8")
    with pytest.raises(ragspan.InputError, match=r"baseline\.jsonl"):
        ragspan.evaluate(data, "baseline", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compare_applies_the_same_gate_as_the_command(results, tmp_path):
    a, b = _write(tmp_path / "A", A_ROWS), _write(tmp_path / "B", _b_rows())
    rules = "hallucination:2pp,correct-lost:5"
    failed = ragspan.compare(a, b, fail_on=rules, resamples=300)
    assert not failed.passed
    assert failed.failures == gate_failures(failed.details, parse_rules([rules]))
    assert any(f.startswith("hallucination:2pp") for f in failed.failures)
    assert "gate FAILED" in failed.text() and "### Gate: **failed**" in failed.markdown()
    assert ragspan.compare(a, b, fail_on=["any:20pp"], resamples=300).passed
    assert ragspan.compare(a, b).gate is None

    same = ragspan.compare(results, str(results.path), fail_on="significant,correct-lost", resamples=300)
    assert same.passed and same.details["questions"]["same"] and same.details["worse"] == []


def test_the_example_in_docs_api_md_runs(tmp_path):
    """Every ```python block of docs/api.md, in order, as one script, from a directory
    outside the repository holding a copy of the sample as data/sample."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "docs/api.md has no python example"
    shutil.copytree(SAMPLE, tmp_path / "data" / "sample")
    (tmp_path / "example.py").write_text("\n".join(blocks), encoding="utf-8")
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "example.py"], check=False, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (tmp_path / "results" / "baseline" / "report.html").is_file()
    assert "correct" in done.stdout


def test_a_configured_prefect_api_that_does_not_answer_is_one_error(tmp_path):
    from servers import free_port

    code = ("import ragspan, sys\ntry:\n    ragspan.evaluate(sys.argv[1], 'baseline', out=sys.argv[2])\n"
            "except ragspan.RagspanError as exc:\n    print(type(exc).__name__, exc)")
    api = f"http://127.0.0.1:{free_port()}/api"
    env = {**os.environ, "PREFECT_API_URL": api, "RAGSPAN_HOME": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", code, str(SAMPLE), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.startswith(f"NoServer the Prefect API at {api} does not answer"), done.stdout + done.stderr
    assert not (tmp_path / "out").exists()
