"""The files of a results directory, and the one in-memory view every reader uses.

In memory a run's results are one dict (the *results view*): what report.py computes —
counts, rates, intervals, `by_metadata`, `manifest`, `judge` (the run's statistics) and
`bootstrap`. On disk it is split by who reads it:

| file | content | DVC |
|---|---|---|
| `metrics.json` | results only: claims, judged, unjudged, label counts and rates, failure shares, source_conflicts, uncertain, `rate_ci95`, `chunk_split` (the chunker's share of failures, its interval, per metadata group) | metric (`cache: false`, git) |
| `manifest.json` | what the results were made from: inputs, data snapshot, questions, params, judge, code versions, bootstrap settings | out, `cache: false` (git): `ragspan compare` reads it at any revision |
| `by_metadata.json` | label counts per metadata key and value | out (DVC cache) |
| `answer_chars.json` | the answer-character metric in full: character counts, shares and intervals, and per metadata key and value (metrics.json holds the run's shares and intervals) | out (DVC cache) |
| `run.json` | facts of this one run that change when nothing else does: judge calls, cache hits, tokens, task states, answers reused, git revision and dirtiness, whether DVC's record of the data matched; after a corpus change, what it changed (`rebuild`: label transitions since the previous results) | out (DVC cache) |

So `dvc metrics diff` shows only results (an unchanged `dvc repro --force` shows
nothing), and `dvc exp show` has a column per label count, rate and interval bound, not
one per manifest entry. `merge_results` rebuilds the view from the files, and reads a
results directory written before the split (one metrics.json holding everything) as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

METRICS_FILE = "metrics.json"
MANIFEST_FILE = "manifest.json"
BY_METADATA_FILE = "by_metadata.json"
ANSWER_CHARS_FILE = "answer_chars.json"
RUN_FILE = "run.json"
# The cached DVC outs of each run: every file report.py writes into results/<run>/ except
# metrics.json, taxonomy.csv (git-tracked metrics/plots) and manifest.json (a git-tracked
# out: `ragspan compare` reads it at any revision). ragspan's own dvc.yaml and the one
# `ragspan init` writes list the same files; tests check both against what a real run writes.
CACHED_OUTS = ("claims.parquet", "spans.parquet", "diagnoses.parquet", "answer_spans.parquet", "report.html",
               "summary.md", "taxonomy.svg", "taxonomy.png", "ranks.svg", "ranks.png", "by_metadata.svg",
               "by_metadata.png", BY_METADATA_FILE, ANSWER_CHARS_FILE, RUN_FILE)
TRACKED_OUTS = (MANIFEST_FILE,)

# Top-level keys of the view that metrics.json holds: results, nothing about the run (its
# name is in the manifest: a text column in `dvc exp show` says nothing).
RESULT_KEYS = ("claims", "judged", "unjudged", "labels", "failure_share", "source_conflicts",
               "uncertain", "rate_ci95", "answer_chars", "chunk_split")
# Manifest entries that differ between two runs of the same inputs: they go to run.json.
# (`git_rev` is the commit *before* the results are committed, so it is always stale;
# `dvc exp run` makes `git_dirty` true; `data.recorded` compares with the previous lock.)
VOLATILE_MANIFEST = (("git_rev",), ("git_dirty",), ("data", "recorded"))


def _pop_path(d: dict, path: tuple[str, ...]) -> tuple[bool, object]:
    *parents, last = path
    for key in parents:
        d = d.get(key)
        if not isinstance(d, dict):
            return False, None
    return (True, d.pop(last)) if last in d else (False, None)


def _put_path(d: dict, path: tuple[str, ...], value: object) -> None:
    *parents, last = path
    for key in parents:
        d = d.setdefault(key, {})
    d[last] = value


def split_results(view: dict) -> dict[str, dict]:
    """{file name: content} for a results view (see the module docstring)."""
    manifest = json.loads(json.dumps(view.get("manifest") or {}))  # deep copy, JSON types only
    volatile = {}
    for path in VOLATILE_MANIFEST:
        found, value = _pop_path(manifest, path)
        if found:
            volatile[".".join(path)] = value
    if view.get("bootstrap") is not None:
        manifest["bootstrap"] = view["bootstrap"]
    results = {k: view[k] for k in RESULT_KEYS if k in view}
    if "answer_chars" in results:  # a results column per share and bound; the rest in its own file
        results["answer_chars"] = {k: results["answer_chars"][k] for k in ("share", "ci95")
                                   if k in results["answer_chars"]}
    return {
        METRICS_FILE: results,
        ANSWER_CHARS_FILE: view.get("answer_chars") or {},
        MANIFEST_FILE: manifest,
        BY_METADATA_FILE: view.get("by_metadata") or {},
        RUN_FILE: {"judge": view.get("judge") or {}, "manifest": volatile,
                   **({"rebuild": view["rebuild"]} if view.get("rebuild") else {})},
    }


def merge_results(read: Callable[[str], str | None]) -> dict:
    """The results view from a directory's files; `read(name)` gives a file's text or
    None when it is absent (DVC-cached files may not be pulled: their parts stay empty).
    Raises FileNotFoundError when there is no metrics.json."""
    text = read(METRICS_FILE)
    if text is None:
        raise FileNotFoundError(METRICS_FILE)
    view = json.loads(text)
    if "manifest" in view:  # written before the split: everything is in metrics.json
        return view

    def part(name: str) -> dict:
        body = read(name)
        return json.loads(body) if body is not None else {}

    manifest = part(MANIFEST_FILE)
    run = part(RUN_FILE)
    for dotted, value in (run.get("manifest") or {}).items():
        _put_path(manifest, tuple(dotted.split(".")), value)
    view["by_metadata"] = part(BY_METADATA_FILE)
    if view.get("answer_chars") is not None:
        view["answer_chars"] = {**view["answer_chars"], **part(ANSWER_CHARS_FILE)}
    view["judge"] = run.get("judge") or {}
    if run.get("rebuild"):
        view["rebuild"] = run["rebuild"]
    view["bootstrap"] = manifest.pop("bootstrap", None)
    view["manifest"] = manifest
    return {"run": manifest.get("run"), **view}


def read_results(directory: Path) -> dict:
    """The results view of a results directory on disk (either layout)."""
    directory = Path(directory)

    def read(name: str) -> str | None:
        path = directory / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return merge_results(read)


def results_writers(view: dict) -> dict[str, Callable[[Path], object]]:
    """{file name: writer} for tasks/state/_atomic.write_atomic_dir."""
    return {name: (lambda p, body=body: p.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n",
                                                      encoding="utf-8"))
            for name, body in split_results(view).items()}
