"""One shard's chain of steps: decompose → extract → validate offsets → corpus-wide search →
extract → validate offsets → diagnose → chunk windows → extract → validate offsets → chunk
split. The answers whose pre-search state an earlier run stored (Shard.prior: claims and
retrieved-passage verdicts, kept while their documents are unchanged) skip the first three
steps and start at corpus-wide search (docs/decisions.md #58). Wiring only, but the wiring decides the tables: this module is the root of the code
version (tasks/config.code_version hashes it and all it imports), so editing the chain is a
new key for every cached step, stored answer and kept verdict."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.flows.ledger import StepLedger
from ragspan.tasks.core.shards import Shard, ShardResult
from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec
from ragspan.tasks.steps.boundary import chunk_split, chunk_windows
from ragspan.tasks.steps.corpus_search import claims_needing_search, corpus_search
from ragspan.tasks.steps.decompose import decompose
from ragspan.tasks.steps.diagnose import diagnose
from ragspan.tasks.steps.extract import extract
from ragspan.tasks.steps.shard_tables import shard_result
from ragspan.tasks.steps.validate_offsets import validate_offsets


@task(name="evaluate-shard", cache_policy=NO_CACHE)
def evaluate_shard(shard: Shard, spec: JudgeSpec, index_dir: str, top_k: int, thr: float, band: float,
                   code: str, runtime: JudgeRuntime) -> ShardResult:
    step = StepLedger(len(shard.answers))
    todo = shard.to_decompose()  # the answers without a stored pre-search state
    claims = step.run(decompose, todo.answers, spec, code, runtime)
    judged = step.run(validate_offsets, step.run(extract, claims, todo.passages, spec, code, runtime), code)
    claims, judged = shard.with_prior(claims, judged)  # with the stored ones', in answer order
    hits = step.run(corpus_search, claims, judged, shard.passages, index_dir, top_k, thr, code)
    # answers whose results follow the whole corpus (the search's BM25 statistics): the
    # answer store keys them by it, the others by their documents alone
    searching = frozenset(claims_needing_search(claims, judged, thr)["question_id"]) if top_k > 0 else frozenset()
    searched = step.run(validate_offsets, step.run(extract, claims, hits, spec, code, runtime), code)
    diagnoses, marked = step.run(diagnose, claims, judged, searched, shard.answers, thr, band, code)
    # evidence cut by a chunk boundary: the claims' passages joined with their neighbours
    windows = step.run(chunk_windows, diagnoses, judged, searched, shard.passages, hits, index_dir, code)
    across = step.run(validate_offsets, step.run(extract, claims, windows, spec, code, runtime), code)
    split = step.run(chunk_split, diagnoses, marked, across, shard.passages, hits, shard.answers, index_dir, thr,
                     band, code)
    # the claims and retrieved verdicts of the answers decomposed here: a re-run after a corpus change that left
    # an answer's passages alone starts it at the search
    to_store = shard.pre_search_to_store(claims, judged)
    return shard_result(claims, judged, searched, split, step.stats, step.summary(), searching, to_store,
                        len(shard.answers) - len(todo.answers))
