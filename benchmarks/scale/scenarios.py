"""The re-run scenario table: what a run costs after what changed, against a cold run measured
in the same sitting (issue 29).

    .venv/bin/python -m benchmarks.scale.scenarios --size 100000x10000 --work /tmp/scalework --check

One state dir, the real CLI (`ragspan evaluate --quiet`, as in run.py), one run after the
other:

| scenario | data | what it is |
|---|---|---|
| cold | WS | fresh state dir |
| unchanged | WS | the same inputs again |
| 5 % answers | WS/changed | 5 % of the answers regenerated |
| 5 % documents | WS/docs-changed | a sentence appended to 5 % of the documents (last chunk grown); answers and retrieved lists identical |
| re-chunked | WS/rechunked | every document cut anew, retrieved lists pointing at the new chunks |

Each row: wall and CPU seconds (the CLI and every process it waited for — judge workers
included, not the Prefect server it leaves running), each as a ratio to the cold run's,
and what run.json counts: answers reused, (claim, passage) pairs judged, verdicts reused.
`--check` adds a cold run of WS/docs-changed in a fresh state dir and compares its tables
and metrics with the incremental run's (they must be identical). The workspace and its
variants come from generate.py (corpus_variants.py adds the corpus ones to an existing
workspace). JSON in benchmarks/results/scenarios-NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

from benchmarks.scale.run import RAGSPAN, REPO, _env, run_measured, workspace

SCENARIOS = (("cold", "."), ("unchanged", "."), ("5 % answers", "changed"), ("5 % documents", "docs-changed"),
             ("re-chunked", "rechunked"))
TABLES = ("claims", "spans", "diagnoses", "answer_spans")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def evaluate(data: Path, home: Path, out: Path) -> dict:
    """One CLI run: wall, CPU, peak RSS, run.json's counters and the flow's step times
    (RAGSPAN_TIMINGS, flows/ledger.py: thread-seconds, two shards side by side)."""
    timings = out.with_name(out.name + "-timings.jsonl")
    timings.unlink(missing_ok=True)
    cpu = _children_cpu()
    r = run_measured([RAGSPAN, "evaluate", "--data", str(data), "--run", "scale", "--out", str(out), "--quiet"],
                     _env(home, timings), data)
    judge = json.loads((out / "run.json").read_text())["judge"]
    steps: dict[str, float] = {}
    for line in timings.read_text().splitlines() if timings.exists() else ():
        rec = json.loads(line)
        steps[rec["step"]] = round(steps.get(rec["step"], 0.0) + rec["seconds"], 2)
    return {"wall_s": r["wall_s"], "cpu_s": round(_children_cpu() - cpu, 2), "peak_rss_mb": r["peak_rss_mb"],
            **{k: judge.get(k, 0) for k in ("answers_reused", "pairs_judged", "verdicts_reused", "marks_rejudged",
                                             "calls")}, "steps_s": steps}


def same_results(a: Path, b: Path) -> list[str]:
    """The tables and metrics that differ between two results directories (none: identical)."""
    import pandas as pd

    differ = [t for t in TABLES if not pd.read_parquet(a / f"{t}.parquet").equals(pd.read_parquet(b / f"{t}.parquet"))]
    if json.loads((a / "metrics.json").read_text()) != json.loads((b / "metrics.json").read_text()):
        differ.append("metrics.json")
    return differ


def stop_server(home: Path, work: Path) -> None:
    subprocess.run([RAGSPAN, "server", "stop"], env=_env(home), cwd=work, capture_output=True, check=False)


def measure(ws: Path, work: Path, check: bool) -> dict:
    home = work / "home-scenarios"
    shutil.rmtree(home, ignore_errors=True)
    rows: dict[str, dict] = {}
    try:
        for name, sub in SCENARIOS:
            print(f"{name} ...", file=sys.stderr, flush=True)
            rows[name] = evaluate((ws / sub).resolve(), home, work / f"out-{sub.strip('.') or 'base'}")
            print(json.dumps(rows[name]), file=sys.stderr, flush=True)
    finally:
        stop_server(home, work)
    cold = rows["cold"]
    for r in rows.values():
        r["wall_x_cold"] = round(r["wall_s"] / cold["wall_s"], 3)
        r["cpu_x_cold"] = round(r["cpu_s"] / cold["cpu_s"], 3)
    out = {"rows": rows, "load_avg_start": os.getloadavg()}
    if check:
        fresh = work / "home-check"
        shutil.rmtree(fresh, ignore_errors=True)
        try:
            out["docs_changed_cold"] = evaluate((ws / "docs-changed").resolve(), fresh, work / "out-docs-cold")
        finally:
            stop_server(fresh, work)
            shutil.rmtree(fresh, ignore_errors=True)
        out["docs_changed_differs_from_cold"] = same_results(work / "out-docs-changed", work / "out-docs-cold")
    out["load_avg_end"] = os.getloadavg()
    shutil.rmtree(home, ignore_errors=True)
    return out


def table(res: dict) -> str:
    lines = ["| run | wall s | × cold | CPU s | × cold | answers reused | pairs judged | verdicts reused |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in res["rows"].items():
        lines.append(f"| {name} | {r['wall_s']} | {r['wall_x_cold']} | {r['cpu_s']} | {r['cpu_x_cold']} "
                     f"| {r['answers_reused']:,} | {r['pairs_judged']:,} | {r['verdicts_reused']:,} |")
    names = list(dict.fromkeys(k for r in res["rows"].values() for k in r["steps_s"]))
    lines += ["", "step seconds in the flow (thread-seconds for the shard steps):", "",
              "| run | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for name, r in res["rows"].items():
        lines.append(f"| {name} | " + " | ".join(str(r["steps_s"].get(k, "–")) for k in names) + " |")
    if "docs_changed_cold" in res:
        c = res["docs_changed_cold"]
        lines.append(f"\ncold run of the 5 %-documents data in a fresh state dir: {c['wall_s']} s, "
                     f"{c['pairs_judged']:,} pairs judged; tables and metrics that differ from the incremental "
                     f"run's: {res['docs_changed_differs_from_cold'] or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="100000x10000", help="CHUNKSxANSWERS")
    ap.add_argument("--work", required=True, help="where the workspace (ws-CHUNKSxANSWERS) and state go")
    ap.add_argument("--check", action="store_true", help="compare the 5 %%-documents run with a cold one")
    ap.add_argument("--name", default=None, help="results name: benchmarks/results/scenarios-NAME.json")
    a = ap.parse_args(argv)
    chunks, answers = (int(v) for v in a.size.lower().split("x"))
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ws = workspace(work, chunks, answers)
    if not (ws / "docs-changed").exists() or not (ws / "rechunked").exists():
        from benchmarks.scale.corpus_variants import write_corpus_variants

        write_corpus_variants(ws)
    res = {"size": a.size, "cpus": os.cpu_count(), **measure(ws, work, a.check)}
    print(table(res))
    dest = REPO / "benchmarks" / "results" / f"scenarios-{a.name or a.size}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(res, indent=2) + "\n")
    print(f"\nwrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
