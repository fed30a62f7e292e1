"""The corpus index after a corpus change: cold build, then the build after 5 % of the
documents changed, in one state dir (tasks/steps/index_build.py keeps the unchanged rows).

    .venv/bin/python -m benchmarks.scale.index_update WS [WS ...] [--repeats 3] [--base PKG]

WS is a generated workspace (benchmarks/scale/generate.py) with `docs-changed/` (5 % of
documents with a sentence appended). Its tables are read and validated once
(load_corpus / load_chunks) and pickled aside; each build then runs in a child process
that unpickles them (load_s) and builds the index into a fresh temporary state dir
(cold), then the docs-changed tables into the same one (changed). Printed per build: the
build's wall seconds (`build_s`, the tables' document hashes included, as a run without a
kept inputs entry computes them) and CPU seconds (`cpu_s`: its process and its tokenising
workers; on a loaded machine the steadier figure), the peak RSS of the child's process tree (its tokenising
workers included) and of the largest process, and what was kept / looked up / tokenised
(this code only) and the child's RSS with the tables loaded, before the build (rss_loaded_mb:
the peak less this is the build's own). `--base PKG` runs the same children on another code (a directory holding
a `ragspan` package: e.g. the starting commit's sources, `ragspan/{tasks,flows}` links)
for the comparison in one sitting. Medians over `--repeats`; the load average with each.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.scale.harness import run_measured

REPO = Path(__file__).resolve().parent.parent.parent


def _child(tables: Path, root: Path) -> None:
    """Build the index of the pickled (chunks, corpus) under `root`; print JSON."""
    t0 = time.perf_counter()
    chunks, corpus = pickle.loads(tables.read_bytes())
    load_s = time.perf_counter() - t0
    rss_loaded = psutil.Process().memory_info().rss / 2**20  # the tables in memory, before the build
    from ragspan.tasks.steps import corpus_search

    t1, cpu1 = time.perf_counter(), _cpu_s()
    report: dict = {}
    if hasattr(corpus_search, "index_build"):
        b = corpus_search.index_build(corpus_search._Tables(chunks, corpus), root)
        report = {"kept": b.kept, "looked_up": b.looked_up, "tokenised": b.tokenised, "rows": b.rows}
    else:  # the code before: the whole index built again
        corpus_search.build_index_dir(chunks, corpus, root)
        report = {"tokenised": len(chunks), "rows": len(chunks)}
    build_s, cpu_s = time.perf_counter() - t1, _cpu_s() - cpu1
    print(json.dumps({"load_s": round(load_s, 2), "build_s": round(build_s, 2), "cpu_s": round(cpu_s, 2),
                      "rss_loaded_mb": round(rss_loaded), **report}))


def _cpu_s() -> float:
    """User + system seconds of this process and of its ended children (tokenising workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _tables(ws: Path, out: Path) -> Path:
    """The workspace's validated (chunks, corpus), pickled at `out` (read once per sitting)."""
    from ragspan.tasks.inputs.load import load_chunks, load_corpus

    if not out.exists():
        corpus, _ = load_corpus(ws)
        chunks = load_chunks(ws, corpus, 800, 100)
        out.write_bytes(pickle.dumps((chunks, corpus), protocol=5))
    return out


def _measure(tables: Path, root: Path, base: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["RAGSPAN_HOME"] = str(root.parent)
    if base:
        env["PYTHONPATH"] = base
    r = run_measured([sys.executable, "-m", "benchmarks.scale.index_update", "--child", str(tables), str(root)],
                     env, REPO)
    out = json.loads(r["stdout"].strip().splitlines()[-1])
    return {**out, "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"],
            "peak_rss_largest_mb": r["peak_rss_largest_mb"], "load1": round(os.getloadavg()[0], 1)}


def _sitting(ws: Path, work: Path, codes: dict[str, str | None], repeats: int) -> dict:
    cold = _tables(ws, work / f"{ws.name}-cold.pickle")
    changed = _tables(ws / "docs-changed", work / f"{ws.name}-changed.pickle")
    rows: dict = {code: {"cold": [], "changed": []} for code in codes}
    for _ in range(repeats):
        for code, base in codes.items():  # interleaved: both codes see the same load
            state = Path(tempfile.mkdtemp(prefix="tmp-index-state-", dir=work))
            try:
                for kind, tables in (("cold", cold), ("changed", changed)):
                    m = _measure(tables, state / "index", base)
                    rows[code][kind].append(m)
                    print(f"{ws.name} {code:5} {kind:7} {json.dumps(m)}", flush=True)
            finally:
                shutil.rmtree(state, ignore_errors=True)
    return rows


def _median(ms: list[dict], key: str) -> float:
    return statistics.median(m[key] for m in ms if key in m) if any(key in m for m in ms) else float("nan")


def _print_medians(ws: str, rows: dict) -> None:
    print(f"\n{ws}: medians of {len(next(iter(rows.values()))['cold'])}")
    print(f"{'code':6}{'build':8}{'build_s':>9}{'cpu_s':>8}{'peak MB':>9}{'largest':>9}{'tokenised':>11}{'kept':>9}"
          f"{'changed/cold':>14}{'load1':>7}")
    for code, kinds in rows.items():
        cold_s = _median(kinds["cold"], "build_s")
        for kind, ms in kinds.items():
            ratio = _median(ms, "build_s") / cold_s
            print(f"{code:6}{kind:8}{_median(ms, 'build_s'):9.2f}{_median(ms, 'cpu_s'):8.1f}"
                  f"{_median(ms, 'peak_rss_mb'):9.0f}"
                  f"{_median(ms, 'peak_rss_largest_mb'):9.0f}{_median(ms, 'tokenised'):11.0f}"
                  f"{_median(ms, 'kept'):9.0f}{ratio:14.2f}{_median(ms, 'load1'):7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspaces", nargs="*", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--base", default=None, help="a directory holding the code before's ragspan package")
    ap.add_argument("--work", type=Path, default=None, help="where the pickled tables and state dirs go")
    ap.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="tmp-index-"))
    work.mkdir(parents=True, exist_ok=True)
    codes = {"this": None, **({"base": args.base} if args.base else {})}
    results = {}
    for ws in args.workspaces:
        results[ws.name] = _sitting(ws, work, codes, args.repeats)
        _print_medians(ws.name, results[ws.name])
    print(json.dumps(results))


if __name__ == "__main__":
    main()
