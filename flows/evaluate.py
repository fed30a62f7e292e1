"""The evaluate flow: load → reuse known answers → per shard of the others [decompose →
extract → validate offsets → corpus-wide search → extract → validate offsets → diagnose →
chunk windows → extract → validate offsets → chunk split] → remember → report. Wiring only.
A run whose inputs, settings and stored answers are those of a run that kept its results
writes those (tasks/reporting/snapshot.py).

Each step is its own cached Prefect task; a shard's chain is one submitted task, so
shards run side by side on the flow's task runner (threads by default, a Dask cluster
with `--task-runner dask`) while every step inside stays separately cached. At most
2 × shard_concurrency shards are in flight, each made with its own passages; each result
goes to disk as it ends, and the store segment and the results' table files are written
from those files a window of answers at a time (Parquet row groups): the flow's memory is
set by the shards in flight, not by the number of answers (docs/decisions.md #54).
An answer that searched the corpus is evaluated again after any corpus change, but from
corpus-wide search on when its passages' documents did not change: its claims and
retrieved-passage verdicts come from the answer store (tasks/reuse/pre_search.py), handed to
its shard as the shard is made (docs/decisions.md #58); run.json counts them
(`answers_resumed`).

Settings arrive as arguments and go on as arguments: the flow takes the `Settings` its
caller already parsed (`prepare_run`, flows/evaluation.py; a params path only from callers
that hold nothing else — a deployment, a test — and then it is parsed here, once), and
hands every step what it needs: the judge's spec (what changes verdicts, in the step cache
keys) and its runtime (verdict-cache and judge-cache paths, worker processes; in no key),
so a judge on a Dask worker reuses verdicts as one on the flow's threads does."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.context import FlowRunContext
from prefect.task_runners import ThreadPoolTaskRunner
from ragspan.flows import progress
from ragspan.flows.ledger import timed
from ragspan.tasks.config import (
    PipelineParams,
    Settings,
    code_version,
    judge_process_count,
    load_settings,
    state_dir,
)
from ragspan.tasks.inputs.load import load_inputs
from ragspan.tasks.judges import judge_runtime, judge_spec, support_threshold
from ragspan.tasks.reporting.artifacts import publish_artifacts
from ragspan.tasks.reporting.report import report, report_unchanged
from ragspan.tasks.reporting.snapshot import find_unchanged, unchanged_key
from ragspan.tasks.reuse.answer_store import context_key, corpus_identity
from ragspan.tasks.state import (
    mark_used,
    output_lock,
    prune_after_run,
    recording_run,
    step_results_dir,
    store_path,
    sweep,
)
from ragspan.tasks.steps.corpus_search import build_index


@flow(name="evaluate", log_prints=False,
      task_runner=ThreadPoolTaskRunner(max_workers=PipelineParams().shard_concurrency))
def evaluate(data_dir: str, run: str, out_dir: str, params_path: str | None = None,
             judge: str | None = None, overrides: dict[str, str] | None = None,
             compare_to: str | None = None, artifacts_name: str | None = None, previous: str | None = None,
             settings: Settings | None = None) -> dict:
    """`settings`: the run's settings, already parsed (`prepare_run`, `run_evaluate_flow`);
    without them, `params_path` (None: the defaults) + `overrides` + `judge` (judge.kind)
    are parsed here — give one or the other. `artifacts_name`: the name whose Prefect
    artifacts this run extends (default `run`; the watch flow passes its index, so every
    scheduled/triggered run of it lines up); `previous`: the results an index rebuild's
    label changes are told against (default: `out_dir`'s)."""
    if settings is None:
        settings = load_settings(params_path, {**(overrides or {}), **({"judge.kind": judge} if judge else {})})
    elif params_path or overrides or judge:
        raise ValueError("evaluate: give `settings` or params_path/overrides/judge, not both")
    spec, code = judge_spec(settings.judge), code_version()
    thr, band = support_threshold(settings.judge), settings.judge.uncertainty_band
    # output_lock: a second run on the same --out is refused, not raced; recording_run: a run
    # that ends cleanly vouches for the step results it wrote (the next sweep leaves them unread)
    with output_lock(Path(out_dir)), recording_run(step_results_dir()):
        # Validated again only when no caller did: prepare_run did, and handed its workspace
        # over — taken as it is while the files' md5s still give its key, no second read
        # (tasks/inputs/load/workspace.py); other callers get the validated-inputs cache's hit.
        ws = timed(load_inputs, data_dir, run, settings)  # bad input stops here: before any judge call
        index_dir = timed(build_index, ws, str(store_path("indexes")))  # reads no table when unchanged
        mark_used(index_dir)  # for pruning by last use (tasks/state/_stores.py)
        sweep(step_results_dir())  # step results a killed run half-wrote: moved aside, one line
        top_k, answers = settings.search.top_k, store_path("answer_store")
        context = context_key(spec, code, (thr, band), top_k)  # the corpus is in each answer's key
        kept = timed(find_unchanged, ws, settings, context, answers, compare_to)  # tasks/reporting/snapshot.py
        if kept is not None:  # nothing changed since a run that kept its results: they are written again
            progress.current().reused(len(ws.answers), 0)
            metrics = timed(report_unchanged, Path(out_dir), ws, settings, spec, kept, compare_to, previous)
        else:
            # The shard chain's code (steps, judges, the text code: nltk) is imported only
            # when there is work for it: an unchanged re-run starts without it.
            from ragspan.flows.shard import evaluate_shard
            from ragspan.flows.shard_window import spilled_results
            from ragspan.tasks.core.shards import iter_shards, passages_for
            from ragspan.tasks.reuse.answer_store import remember_answers, reuse_answers
            from ragspan.tasks.reuse.shard_spill import spilling

            corpus = timed(corpus_identity, ws.chunks, ws.corpus, index_dir, ws.document_hashes)  # what of it each answer's key holds
            known = timed(reuse_answers, ws.answers, passages_for(ws), str(answers), context,
                          settings.pipeline.reuse_answers, corpus)  # the passages only for the answers' keys
            progress.current().reused(known.reused, -(-len(known.fresh) // settings.pipeline.shard_size))
            runtime = judge_runtime(settings.pipeline, state_dir(), judge_processes(settings.pipeline))
            # each with its own passages, and its answers' stored pre-search state (start at the search)
            shards = iter_shards(known.fresh, ws, settings.pipeline.shard_size, known.prior_of)
            with spilling(store_path("spill")) as spill_dir:  # shard results on disk, not in memory
                done = spilled_results(
                    lambda s: evaluate_shard.submit(s, spec, index_dir, top_k, thr, band, code, runtime),
                    shards, 2 * settings.pipeline.shard_concurrency, spill_dir)
                run_parts = timed(remember_answers, known, ws.answers, done)
                # the table files written from the spilled shards, a window of answers at a time
                metrics = timed(report, Path(out_dir), ws, settings, spec, run_parts, spill_dir / "tables",
                                compare_to, known.reused, unchanged_key(ws, settings, context, answers, compare_to),
                                previous)
    timed(publish_artifacts, metrics, out_dir, artifacts_name or run)  # the Prefect UI's view of the run
    timed(prune_after_run, settings.state.max_size, settings.state.max_age_days)  # params.yaml `state:` limits
    return metrics


def judge_processes(pipeline: PipelineParams) -> int:
    """The local judge's worker processes for this flow run: `pipeline.judge_processes` when
    shards run on the flow's own threads; 1 on any other task runner — a Dask worker is a
    process already (and its processes are daemonic by default: they may not start any)."""
    context = FlowRunContext.get()
    on_threads = context is None or isinstance(context.task_runner, ThreadPoolTaskRunner)
    return judge_process_count(pipeline) if on_threads else 1
