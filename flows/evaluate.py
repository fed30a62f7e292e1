"""The evaluate flow: load → decompose → extract → validate offsets → corpus-wide search
→ (extract → validate offsets on the hits) → diagnose → report. Wiring only."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from ragspan.flows.ledger import StepLedger
from ragspan.tasks.config import code_version, load_settings, state_dir
from ragspan.tasks.corpus_search import build_index, corpus_search
from ragspan.tasks.decompose import decompose
from ragspan.tasks.diagnose import diagnose
from ragspan.tasks.extract import extract
from ragspan.tasks.judges import judge_spec
from ragspan.tasks.load import load_inputs
from ragspan.tasks.outputs import output_lock
from ragspan.tasks.report import report
from ragspan.tasks.shards import passages_for, shards_of
from ragspan.tasks.validate_offsets import validate_offsets


@flow(name="evaluate", log_prints=False)
def evaluate(data_dir: str, run: str, out_dir: str, params_path: str | None = None,
             judge: str | None = None) -> dict:
    settings = load_settings(params_path, {"judge.kind": judge} if judge else None)
    spec, code, thr = judge_spec(settings.judge), code_version(), settings.judge.support_threshold
    with output_lock(Path(out_dir)):  # a second run on the same --out is refused, not raced
        ws = load_inputs(data_dir, run, settings)  # bad input stops here: before any judge call
        index_dir = build_index(ws.chunks, ws.corpus, str(state_dir() / "index"))
        step, parts = StepLedger(), []
        for shard in shards_of(ws.answers, passages_for(ws), settings.pipeline.shard_size):
            claims = step.run(decompose, shard.answers, spec, code)
            judged = step.run(validate_offsets, step.run(extract, claims, shard.passages, spec, code), code)
            hits = step.run(corpus_search, claims, judged, shard.passages, index_dir, settings.search.top_k, thr, code)
            searched = step.run(validate_offsets, step.run(extract, claims, hits, spec, code), code)
            parts.append((claims, judged, searched, step.run(diagnose, claims, judged, searched, thr, code)))
        return report(Path(out_dir), ws, settings, spec, parts, step.stats, step.summary())
