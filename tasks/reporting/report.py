"""report: diagnoses → the results files (metrics.json, manifest.json, by_metadata.json,
run.json: tasks/reporting/results_files.py), taxonomy.csv and a self-contained report.html.

Rates are over *judged* claims (`unjudged` is counted and listed, never averaged in).
Metadata breakdowns use the document the deciding evidence came from; a claim with no
evidence (hallucination, unjudged) is attributed to its question's top-ranked
retrieved document — the document the RAG system leaned on.

Two ways in, the same files: `write_results`/`results_pieces` from tables in memory; the
flow's `report` from the run's results where they lie (answer_store.RunParts): each table
file written a window of answers at a time (`table_file_pieces`: checked, byte offsets
added, one Parquet row group per window), then the diagnoses and answer spans read back —
and of the evidence spans only the claims the page draws — for the metrics and the page.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.config import Settings
from ragspan.tasks.core import schemas
from ragspan.tasks.core.among import among
from ragspan.tasks.core.byte_offsets import utf8_spans
from ragspan.tasks.core.documents import DocumentTexts
from ragspan.tasks.core.taxonomy import FAILURE_LABELS, LABELS, STAGES
from ragspan.tasks.inputs.load import Workspace
from ragspan.tasks.judges.base import JudgeSpec, JudgeStats
from ragspan.tasks.judges.openai_options import estimated_cost
from ragspan.tasks.reporting import charts
from ragspan.tasks.reporting.answer_chars import answer_char_metrics
from ragspan.tasks.reporting.chunker import chunk_split_metrics, chunker_line
from ragspan.tasks.reporting.drilldown import shown_questions
from ragspan.tasks.reporting.findings import concentration, concentration_text, fix_order
from ragspan.tasks.reporting.formatting import cascade_note
from ragspan.tasks.reporting.groups import claim_groups, group_order
from ragspan.tasks.reporting.html import (
    MAX_DRILLDOWN_QUESTIONS,
    assemble_page,
    render_report,
    report_middle,
)
from ragspan.tasks.reporting.manifest import manifest_for
from ragspan.tasks.reporting.matching import MATCH_COLUMNS
from ragspan.tasks.reporting.rebuild import previous_results, rebuild_changes, rebuild_lines
from ragspan.tasks.reporting.results_files import results_writers
from ragspan.tasks.reporting.snapshot import Snapshot, keep_snapshot
from ragspan.tasks.reporting.stats import bootstrap_spec, rate_intervals
from ragspan.tasks.reuse.answer_store import RunParts
from ragspan.tasks.state import room_for, write_atomic_dir, write_parquet_pieces


def label_counts(diagnoses: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    counts = diagnoses["label"].value_counts().to_dict()
    judged = sum(v for k, v in counts.items() if k != "unjudged")
    out: dict[str, dict[str, float | int | None]] = {}
    for label in LABELS:
        n = int(counts.get(label, 0))
        rate = None if label == "unjudged" or judged == 0 else round(n / judged, 4)
        out[label] = {"count": n, "rate": rate}
    return out


def breakdowns(diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame, retrieved: pd.DataFrame) -> dict:
    """Label counts per metadata key and group (reporting/groups.py decides the groups)."""
    groups = claim_groups(diagnoses, corpus, questions, retrieved)
    out: dict[str, dict] = {}
    for key in groups.columns[1:]:
        values = groups[key].astype("object").to_numpy()
        out[key] = {v: label_counts(diagnoses[values == v]) for v in group_order(groups[key])}
    return {k: v for k, v in out.items() if v}


def metrics_for(run: str, diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame,
                retrieved: pd.DataFrame, judge_stats: dict, manifest: dict) -> dict:
    labels = label_counts(diagnoses)
    failures = sum(labels[l]["count"] for l in FAILURE_LABELS)
    return {
        "run": run,
        "claims": len(diagnoses),
        "judged": int(len(diagnoses) - labels["unjudged"]["count"]),
        "unjudged": labels["unjudged"]["count"],
        "labels": labels,
        "failure_share": {l: (round(labels[l]["count"] / failures, 4) if failures else None) for l in FAILURE_LABELS},
        "source_conflicts": int(diagnoses["source_conflict"].sum()),
        # labels resting on a probability near the threshold: what to check first, or send
        # to an LLM judge
        "uncertain": int(diagnoses["uncertain"].sum()) if "uncertain" in diagnoses.columns else 0,
        "by_metadata": breakdowns(diagnoses, corpus, questions, retrieved),
        # the chunker's share of failures (evidence cut by a chunk boundary), with intervals
        "chunk_split": chunk_split_metrics(diagnoses, corpus, questions, retrieved),
        "judge": judge_stats,
        "manifest": manifest,
    }


def taxonomy_rows(run: str, metrics: dict) -> pd.DataFrame:
    return pd.DataFrame([
        {"run": run, "label": label, "count": v["count"], "rate": v["rate"]}
        for label, v in metrics["labels"].items()
    ])


def taxonomy_text(metrics: dict) -> str:
    """The table printed at the end of `ragspan evaluate`."""
    lines = [f"{'label':<16} {'count':>6} {'rate':>7}", "-" * 31]
    for label, v in metrics["labels"].items():
        rate = "—" if v["rate"] is None else f"{v['rate']:.1%}"
        lines.append(f"{label:<16} {v['count']:>6} {rate:>7}")
    lines.append("-" * 31)
    lines.append(f"{'claims':<16} {metrics['claims']:>6}   (source_conflict flags: {metrics['source_conflicts']})")
    return "\n".join(lines)


def render_html(metrics: dict, diagnoses: pd.DataFrame, answers: pd.DataFrame, corpus: pd.DataFrame, *,
                spans: pd.DataFrame | None = None, questions: pd.DataFrame | None = None,
                retrieved: pd.DataFrame | None = None, comparison: dict | None = None,
                answer_spans: pd.DataFrame | None = None) -> str:
    """report.html (see tasks/reporting/html.py): every piece of text escaped, no network."""

    return render_report(metrics, diagnoses, answers, corpus, spans=spans, questions=questions,
                         retrieved=retrieved, comparison=comparison, answer_spans=answer_spans)


# Chart images written next to report.html, for README files and PR comments.
CHART_FILES = ("taxonomy", "ranks", "by_metadata")
# The table files, in the order they are written.
TABLE_FILES = ("claims.parquet", "spans.parquet", "diagnoses.parquet", "answer_spans.parquet")
# What an unchanged re-run copies from a kept snapshot: the tables and the chart images.
KEPT_FILES = TABLE_FILES + tuple(f"{name}.{kind}" for name in CHART_FILES for kind in ("svg", "png"))


def chart_images(metrics: dict, diagnoses: pd.DataFrame, retrieved: pd.DataFrame | None) -> dict[str, bytes]:
    """{file name: content}: `<chart>.svg` and `<chart>.png` for each of CHART_FILES."""

    built = {
        "taxonomy": charts.taxonomy_chart(metrics),
        "ranks": charts.rank_chart(charts.evidence_positions(diagnoses, retrieved), metrics["run"]),
        "by_metadata": charts.metadata_chart(metrics),
    }
    out: dict[str, bytes] = {}
    for name, chart in built.items():
        out[f"{name}.svg"] = charts.to_svg(chart).encode("utf-8")
        out[f"{name}.png"] = charts.to_png(chart)
    return out


def _md(text: object) -> str:
    """Text safe inside Markdown (GitHub comments): no markup, no HTML, no table breaks."""
    return re.sub(r"([\\`*_\[\]<>|#!~])", r"\\\1", " ".join(str(text).split()))


def _code(text: object) -> str:
    return " ".join(str(text).replace("`", "'").split())


def summary_markdown(metrics: dict, comparison: dict | None = None, images: tuple[str, ...] = ()) -> str:
    """summary.md: the headline, what to fix first and the chart images, for a PR comment."""
    ci = metrics.get("rate_ci95") or {}
    judge = metrics.get("judge") or {}
    m = metrics.get("manifest") or {}
    deltas = {r.get("label"): r for r in (comparison or {}).get("overall", []) if isinstance(r, dict)}
    lines = [f"## ragspan: {_md(metrics['run'])}", "",
             (f"{metrics['claims']} claims, {metrics['judged']} judged, **{metrics['unjudged']} unjudged** "
              f"(excluded from rates) · {metrics.get('source_conflicts', 0)} source_conflict flags  "),
             f"judge {_md(judge.get('judge', '?'))} ({_md(judge.get('model', '?'))}, prompt "
             f"{_md(judge.get('prompt_version', '?'))}) · data `{_code((m.get('data') or {}).get('dvc_md5') or '-')}` "
             f"· code {_md(m.get('code_version', '?'))} · git `{_code(str(m.get('git_rev') or '-')[:12])}`"
             + (" (dirty)" if m.get("git_dirty") else ""), *([cascade_note(judge), ""] if cascade_note(judge) else []),
             ""]
    chars = (metrics.get("answer_chars") or {}).get("share") or {}
    if chars.get("supported") is not None:
        cci = (metrics.get("answer_chars") or {}).get("ci95") or {}
        lines += ["Answer characters: " + " · ".join(
            f"{name.replace('_', ' ')} {chars[name]:.1%}"
            + ("" if (cci.get(name) or {}).get("low") is None else f" ({cci[name]['low']:.1%} – {cci[name]['high']:.1%})")
            for name in ("supported", "unsupported", "contradicted", "not_checked")), ""]
    head = "| label | claims | rate | 95% CI |"
    rule = "|---|---:|---:|---:|"
    if comparison:
        head += f" Δ vs {_md((comparison.get('a') or {}).get('name', 'previous'))} | |"
        rule += "---:|---|"
    lines += [head, rule]
    for label, v in metrics["labels"].items():
        c = ci.get(label) or {}
        interval = "—" if c.get("low") is None else f"{c['low']:.1%} – {c['high']:.1%}"
        rate = "—" if v["rate"] is None else f"{v['rate']:.1%}"
        row = f"| {label} | {v['count']} | {rate} | {interval} |"
        if comparison:
            d = deltas.get(label) or {}
            delta = "—" if d.get("delta") is None else f"{d['delta'] * 100:+.1f} pp"
            row += f" {delta} | {'' if not d else ('within noise' if d.get('within_noise') else '**changed**')} |"
        lines.append(row)
    chunker = chunker_line(metrics)
    lines += [*(["", _md(chunker)] if chunker else []), "", "### What to fix first", ""]
    share = metrics.get("failure_share") or {}
    for i, label in enumerate(fix_order(metrics), 1):
        s = share.get(label)
        where = concentration(metrics, label)
        conc = "" if where is None else f"; concentrated in {_md(concentration_text(where))}"
        lines.append(f"{i}. **{label}** — {STAGES[label]}: {metrics['labels'][label]['count']} claims"
                     f"{'' if s is None else f', {s:.0%} of failures'}{conc}")
    if metrics.get("rebuild"):  # a run after an index rebuild: which claims it moved
        lines += ["", *rebuild_lines(metrics["rebuild"], _md)]
    if images:
        lines += [""] + [f"![{name}]({name})" for name in images]
    boot = metrics.get("bootstrap") or {}
    lines += ["", (f"<sub>95% CI: percentile bootstrap over {boot.get('resamples', '?')} resamples of "
                   f"questions (seed {boot.get('seed', '?')}). Every claim with its evidence: report.html</sub>"), ""]
    return "\n".join(lines)


def broken_spans(spans: pd.DataFrame, corpus: pd.DataFrame | Mapping[str, str]) -> list[str]:
    """Claim ids of spans breaking `doc[start:end] == text` (must be empty to write);
    `corpus` the corpus table, or its texts by doc_id."""
    texts = DocumentTexts(corpus) if isinstance(corpus, pd.DataFrame) else corpus
    columns = (spans[c].tolist() for c in ("claim_id", "doc_id", "char_start", "char_end", "span_text"))
    return [c for c, d, s, e, t in zip(*columns) if texts[d][s:e] != t]


def with_byte_offsets(table: pd.DataFrame, texts: Mapping[str, str]) -> pd.DataFrame:
    """`table` plus byte_start/byte_end: the span's UTF-8 byte offsets (null where none)."""

    bs, be = utf8_spans(texts, table["doc_id"].tolist(), table["char_start"].tolist(), table["char_end"].tolist())
    return table.assign(byte_start=pd.array(bs, dtype="Int64"), byte_end=pd.array(be, dtype="Int64"))


def broken_answer_spans(answer_spans: pd.DataFrame, answers: pd.DataFrame | dict[str, str]) -> list[str]:
    """Claim ids of answer spans breaking `answer[answer_start:answer_end] == text`;
    `answers` the table, or its texts by question_id."""
    texts = (answers if isinstance(answers, dict)
             else dict(zip(answers["question_id"].tolist(), answers["answer"].tolist())))
    columns = (answer_spans[c].tolist() for c in ("claim_id", "question_id", "answer_start", "answer_end", "text"))
    return [c for c, q, s, e, t in zip(*columns) if texts[q][s:e] != t]


def answer_spans_file(answer_spans: pd.DataFrame, answers: pd.DataFrame | dict[str, str],
                      texts: Mapping[str, str]) -> pd.DataFrame:
    """answer_spans.parquet: the table with UTF-8 byte offsets in the answer and, for a
    contradiction, in its evidence's document. `answers`: the table, or its texts by question_id."""
    by_question = (answers if isinstance(answers, dict)
                   else dict(zip(answers["question_id"].tolist(), answers["answer"].tolist())))
    bs, be = utf8_spans(by_question, answer_spans["question_id"].tolist(), answer_spans["answer_start"].tolist(),
                        answer_spans["answer_end"].tolist())
    table = with_byte_offsets(answer_spans.assign(answer_byte_start=pd.array(bs, dtype="Int64"),
                                                  answer_byte_end=pd.array(be, dtype="Int64")), texts)
    return schemas.AnswerSpans.validate(table[list(schemas.AnswerSpans.to_schema().columns)])


def write_results(out_dir: Path, run: str, claims: pd.DataFrame, spans: pd.DataFrame,
                  diagnoses: pd.DataFrame, answers: pd.DataFrame, retrieved: pd.DataFrame,
                  corpus: pd.DataFrame, questions: pd.DataFrame, judge_stats: dict, manifest: dict,
                  comparison: dict | None = None, answer_spans: pd.DataFrame | None = None,
                  rebuild: dict | None = None) -> dict:
    """Compute metrics and write every output of docs/design.md §4 atomically, plus the chart images
    (CHART_FILES as .svg and .png) and summary.md; returns the results view (every file's
    content in one dict, tasks/reporting/results_files.py). `comparison` (the JSON
    of `ragspan compare --format json`, this run as side B) adds deltas to the report;
    `answer_spans` (schemas.AnswerSpans) the answer characters without support;
    `rebuild` what an index rebuild changed (tasks/reporting/rebuild.py)."""

    metrics, middle, tables = results_pieces(run, claims, spans, diagnoses, answers, retrieved, corpus, questions,
                                             judge_stats, manifest, comparison, answer_spans, rebuild)
    write_with_pieces(out_dir, metrics, middle, comparison, tables, diagnoses)
    return metrics


def results_pieces(run: str, claims: pd.DataFrame, spans: pd.DataFrame, diagnoses: pd.DataFrame,
                   answers: pd.DataFrame, retrieved: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame,
                   judge_stats: dict, manifest: dict, comparison: dict | None = None,
                   answer_spans: pd.DataFrame | None = None, rebuild: dict | None = None
                   ) -> tuple[dict, str, dict[str, Callable[[Path], object]]]:
    """What write_results writes, computed: the results view, the page's middle
    (html.report_middle) and a writer for each table file and chart image (KEPT_FILES)."""
    if answer_spans is None:
        answer_spans = schemas.table([], schemas.AnswerSpans)
    bad = (broken_spans(spans, corpus) + broken_spans(diagnoses.dropna(subset=["char_start"]), corpus)
           + broken_spans(answer_spans.dropna(subset=["char_start"]).rename(columns={"evidence_text": "span_text"}),
                          corpus)
           + broken_answer_spans(answer_spans, answers))
    if bad:  # a bug upstream, never data: refuse to write rather than write a lie
        raise AssertionError(f"span invariant broken for claims {bad[:5]}")
    metrics, middle, images = report_pieces(run, spans, diagnoses, answers, retrieved, corpus, questions,
                                            judge_stats, manifest, comparison, answer_spans, rebuild)
    texts = DocumentTexts(corpus)
    tables = {
        "claims.parquet": lambda p: claims.to_parquet(p, index=False),
        "spans.parquet": lambda p: with_byte_offsets(spans, texts).to_parquet(p, index=False),
        "diagnoses.parquet": lambda p: with_byte_offsets(diagnoses, texts).to_parquet(p, index=False),
        "answer_spans.parquet": lambda p: answer_spans_file(answer_spans, answers, texts).to_parquet(p, index=False),
        **{name: (lambda p, data=data: p.write_bytes(data)) for name, data in images.items()},
    }
    return metrics, middle, tables


def report_pieces(run: str, spans: pd.DataFrame, diagnoses: pd.DataFrame, answers: pd.DataFrame,
                  retrieved: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame, judge_stats: dict,
                  manifest: dict, comparison: dict | None, answer_spans: pd.DataFrame,
                  rebuild: dict | None) -> tuple[dict, str, dict[str, bytes]]:
    """The results view, the page's middle and the chart images, from the diagnoses and
    answer spans of every claim and the evidence spans of the claims the page's
    drill-down draws (html.MAX_DRILLDOWN_QUESTIONS; every span is fine too)."""
    metrics = metrics_for(run, diagnoses, corpus, questions, retrieved, judge_stats, manifest)
    metrics["answer_chars"] = answer_char_metrics(answers, diagnoses, answer_spans, corpus, questions, retrieved)
    metrics["rate_ci95"] = rate_intervals(diagnoses)
    metrics["bootstrap"] = bootstrap_spec()
    if rebuild is not None:
        metrics["rebuild"] = rebuild
    images = chart_images(metrics, diagnoses, retrieved)
    middle = report_middle(metrics, diagnoses, answers, corpus, spans=spans, questions=questions,
                           retrieved=retrieved, comparison=comparison, answer_spans=answer_spans)
    return metrics, middle, images


def table_file_pieces(name: str, pieces: Iterable[pd.DataFrame], answers: dict[str, str],
                      texts: Mapping[str, str]) -> Iterator[pd.DataFrame]:
    """Table file `name` (TABLE_FILES) from the run's table in pieces: each piece checked
    (broken_spans: a bug upstream, never data — the write stops, the previous results
    stay) and given its UTF-8 byte offsets, as results_pieces does with the whole table.
    `answers`/`texts`: the answers' texts by question_id, the documents' by doc_id."""
    for piece in pieces:
        if name == "claims.parquet":
            yield piece
            continue
        if name == "answer_spans.parquet":
            bad = (broken_spans(piece.dropna(subset=["char_start"]).rename(columns={"evidence_text": "span_text"}),
                                texts) + broken_answer_spans(piece, answers))
        else:
            bad = broken_spans(piece if name == "spans.parquet" else piece.dropna(subset=["char_start"]), texts)
        if bad:
            raise AssertionError(f"span invariant broken for claims {bad[:5]}")
        yield (answer_spans_file(piece, answers, texts) if name == "answer_spans.parquet"
               else with_byte_offsets(piece, texts))


# The columns a table file adds to the run's table (read back without them).
BYTE_COLUMNS = ("byte_start", "byte_end", "answer_byte_start", "answer_byte_end")


def read_back(path: Path, keep: Callable[[pd.DataFrame], pd.Series] | None = None) -> pd.DataFrame:
    """A table file as the run's table (without BYTE_COLUMNS), a row group at a time: only
    the rows `keep` selects are kept (None: every row)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    columns = [c for c in parquet.schema_arrow.names if c not in BYTE_COLUMNS]
    if keep is None:
        return parquet.read(columns=columns).to_pandas()
    groups = [t[keep(t)] for t in (parquet.read_row_group(i, columns=columns).to_pandas()
                                   for i in range(parquet.num_row_groups))]
    if not groups:
        return parquet.schema_arrow.empty_table().select(columns).to_pandas()
    return pd.concat(groups, ignore_index=True) if len(groups) > 1 else groups[0].reset_index(drop=True)


def write_with_pieces(out_dir: Path, metrics: dict, middle: str, comparison: dict | None,
                      tables: dict[str, Callable[[Path], object]], diagnoses: pd.DataFrame | None = None) -> None:
    """Write results/<run>/ atomically from its pieces: the results view, the page's middle
    (html.report_middle), and a writer for each table file and chart image."""
    images = tuple(n for n in tables if n.endswith(".png"))
    page = assemble_page(metrics, middle, comparison, diagnoses)
    summary = summary_markdown(metrics, comparison, images)
    write_atomic_dir(out_dir, {
        **{name: tables[name] for name in TABLE_FILES},
        **results_writers(metrics),
        "taxonomy.csv": lambda p: taxonomy_rows(metrics["run"], metrics).to_csv(p, index=False),
        "report.html": lambda p: p.write_text(page, encoding="utf-8"),
        "summary.md": lambda p: p.write_text(summary, encoding="utf-8"),
        **{name: tables[name] for name in tables if name not in TABLE_FILES},
    })


def judge_view(stats: JudgeStats, states: dict, answers_reused: int, settings: Settings, spec: JudgeSpec,
               answers_resumed: int = 0) -> dict:
    """metrics["judge"]: the run's judge statistics, task states, answers reused whole and
    answers resumed at corpus-wide search (their stored claims and retrieved-passage verdicts)."""
    return {**stats.model_dump(), "estimated_cost": estimated_cost(stats, settings.judge),
            "judge": spec.kind, "model": spec.model, "prompt_version": spec.prompt_version,
            "task_states": states, "answers_reused": answers_reused, "answers_resumed": answers_resumed}


def _manifest(ws: Workspace, settings: Settings, spec: JudgeSpec, out_dir: Path) -> dict:
    return manifest_for(ws.run, ws.data_dir, ws.input_files, settings, spec,
                        question_ids=ws.questions["question_id"].tolist(), out_dir=Path(out_dir))


# Not cached: its outputs are DVC outs, which DVC deletes before a stage runs.
@task(name="report", cache_policy=NO_CACHE)
def report(out_dir: Path, ws: Workspace, settings: Settings, spec: JudgeSpec, run: RunParts, staging: Path,
           compare_to: str | None = None, answers_reused: int = 0, keep_as: Callable[[], str] | None = None,
           previous: str | None = None) -> dict:
    """Write results/<run>/ (see write_results) from the run's results where they lie
    (RunParts: stored answers + spilled shards). The table files are written first, into
    `staging`, a window of answers at a time (row groups in answer order: RunParts.chunks);
    the report then reads back what it needs — the diagnoses and answer spans, and the
    evidence spans of the claims the page draws — so no table of every answer is held
    twice, nor every table at once. `compare_to`: a `ragspan compare --format json` file
    whose deltas the report shows; `answers_reused`: answers served from the answer store
    (tasks/reuse/answer_store.py); `keep_as`: gives the key under which to keep the results'
    pieces for an unchanged re-run (tasks/reporting/snapshot.py), when the run left no
    answer to retry; `previous`: the results this run follows (default: those in
    `out_dir`, which it replaces) — what an index rebuild changed is told against them."""
    comparison = json.loads(Path(compare_to).read_text(encoding="utf-8")) if compare_to else None
    stats = judge_view(run.stats, run.states, answers_reused, settings, spec, run.resumed)
    manifest = _manifest(ws, settings, spec, out_dir)
    texts = DocumentTexts(ws.corpus)
    answer_texts = dict(zip(ws.answers["question_id"].tolist(), ws.answers["answer"].tolist()))
    staging.mkdir(parents=True, exist_ok=True)
    for name in TABLE_FILES:  # one table at a time, one window of answers at a time
        with room_for(staging / name, Path(out_dir)):
            write_parquet_pieces(staging / name, table_file_pieces(name, run.chunks(name.removesuffix(".parquet")),
                                                                   answer_texts, texts))
    del texts, answer_texts
    diagnoses = read_back(staging / "diagnoses.parquet")
    answer_spans = read_back(staging / "answer_spans.parquet")
    shown, _ = shown_questions(diagnoses, MAX_DRILLDOWN_QUESTIONS)  # as html.report_middle chooses them
    drawn = set(diagnoses.loc[among(diagnoses["question_id"], shown), "claim_id"])
    spans = read_back(staging / "spans.parquet", keep=lambda t: among(t["claim_id"], drawn))
    rebuild = rebuild_changes(previous_results(Path(previous or out_dir)), manifest, diagnoses)
    metrics, middle, images = report_pieces(ws.run, spans, diagnoses, ws.answers, ws.retrieved, ws.corpus,
                                            ws.questions, stats, manifest, comparison, answer_spans, rebuild)
    del spans, answer_spans
    tables = {
        **{name: (lambda p, src=staging / name: shutil.move(src, p)) for name in TABLE_FILES},
        **{name: (lambda p, data=data: p.write_bytes(data)) for name, data in images.items()},
    }
    write_with_pieces(Path(out_dir), metrics, middle, comparison, tables, diagnoses)
    if keep_as is not None and not run.retry:
        keep_snapshot(keep_as(), Path(out_dir), KEPT_FILES, metrics, middle)
    return metrics


@task(name="report-unchanged", cache_policy=NO_CACHE)
def report_unchanged(out_dir: Path, ws: Workspace, settings: Settings, spec: JudgeSpec, kept: Snapshot,
                     compare_to: str | None = None, previous: str | None = None) -> dict:
    """Write results/<run>/ from the pieces an unchanged earlier run kept: its table files,
    images, results view and page middle, with this run's facts (every answer reused, no
    judge call; its manifest; what an index rebuild changed since `previous`, as `report`
    tells it — the kept run may have followed other results than this one does)."""
    comparison = json.loads(Path(compare_to).read_text(encoding="utf-8")) if compare_to else None
    metrics = {k: v for k, v in kept.metrics.items() if k != "rebuild"}  # the same keys in the same order
    metrics["judge"] = judge_view(JudgeStats(), {}, len(ws.answers), settings, spec)
    metrics["manifest"] = _manifest(ws, settings, spec, out_dir)
    labels = pd.read_parquet(kept.directory / "diagnoses.parquet", columns=MATCH_COLUMNS)
    rebuild = rebuild_changes(previous_results(Path(previous or out_dir)), metrics["manifest"], labels)
    if rebuild is not None:
        metrics["rebuild"] = rebuild
    tables = {name: (lambda p, src=kept.directory / name: shutil.copyfile(src, p)) for name in KEPT_FILES}
    write_with_pieces(Path(out_dir), metrics, kept.middle, comparison, tables)
    return metrics
