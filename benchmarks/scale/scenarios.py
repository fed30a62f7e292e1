"""The re-run scenario table: what a run costs after what changed, against a cold run measured
in the same sitting (issue 29).

    .venv/bin/python -m benchmarks.scale.scenarios --size 100000x10000 --work /tmp/scalework --check
    .venv/bin/python -m benchmarks.scale.scenarios --size 300x30 --work /tmp/tiny --check \
        --scenarios "cold,5 % documents" --json /tmp/tiny/scenarios.json     # the check alone, small

One state dir, the real CLI (`ragspan evaluate --quiet`) through the re-run harness
(harness.py), one run after the other:

| scenario | data | what it is |
|---|---|---|
| cold | WS | fresh state dir |
| unchanged | WS | the same inputs again |
| 5 % answers | WS/changed | 5 % of the answers regenerated |
| 5 % documents | WS/docs-changed | a sentence appended to 5 % of the documents (last chunk grown); answers and retrieved lists identical |
| re-chunked | WS/rechunked | every document cut anew, retrieved lists pointing at the new chunks |

Each row: wall and CPU seconds (the CLI and every process it waited for — judge workers
included, not the Prefect server it leaves running), each as a ratio to the cold run's,
and what run.json counts: answers reused, answers resumed at the corpus search
(docs/decisions.md #58), (claim, passage) pairs judged, verdicts reused.
`--scenarios` runs only the named rows (cold first; the others in table order).
`--check` adds a cold run of WS/docs-changed in a fresh state dir and compares its tables
and metrics with the incremental run's: they must be identical (exit status 1 when they
are not). The workspace and its variants come from generate.py (corpus_variants.py adds
the corpus ones to an existing workspace). JSON in benchmarks/results/scenarios-NAME.json,
or --json PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from benchmarks.scale.harness import RAGSPAN, evaluate_in_turn
from benchmarks.scale.run import REPO, workspace

SCENARIOS = (("cold", "."), ("unchanged", "."), ("5 % answers", "changed"), ("5 % documents", "docs-changed"),
             ("re-chunked", "rechunked"))
CHECKED = "5 % documents"  # --check: this incremental run against a cold one of the same data
TABLES = ("claims", "spans", "diagnoses", "answer_spans")


def same_results(a: Path, b: Path) -> list[str]:
    """The tables and metrics that differ between two results directories (none: identical)."""
    import pandas as pd

    differ = [t for t in TABLES if not pd.read_parquet(a / f"{t}.parquet").equals(pd.read_parquet(b / f"{t}.parquet"))]
    if json.loads((a / "metrics.json").read_text()) != json.loads((b / "metrics.json").read_text()):
        differ.append("metrics.json")
    return differ


def check_against_cold(data: Path, incremental_out: Path, work: Path, ragspan: str = RAGSPAN) -> tuple[dict, list[str]]:
    """A cold run of `data` in a fresh state dir (work/home-check, removed after; results in
    work/out-docs-cold): its measurement, and what differs between its results and those
    of the incremental run in `incremental_out` (none: identical). growth.py's check too."""
    fresh = work / "home-check"
    shutil.rmtree(fresh, ignore_errors=True)
    cold_out = work / "out-docs-cold"
    cold = evaluate_in_turn([("cold", data, cold_out)], fresh, ragspan=ragspan)["cold"]
    shutil.rmtree(fresh, ignore_errors=True)
    return cold, same_results(incremental_out, cold_out)


def _out(work: Path, sub: str) -> Path:
    return work / f"out-{sub.strip('.') or 'base'}"


def _progress(name: str, row: dict) -> None:
    print(f"{name}: {json.dumps(row)}", file=sys.stderr, flush=True)


def measure(ws: Path, work: Path, check: bool, names: tuple[str, ...] = tuple(n for n, _ in SCENARIOS)) -> dict:
    home = work / "home-scenarios"
    shutil.rmtree(home, ignore_errors=True)
    runs = [(name, ws / sub, _out(work, sub)) for name, sub in SCENARIOS if name in names]
    rows = evaluate_in_turn(runs, home, progress=_progress)
    cold = rows["cold"]
    for r in rows.values():
        r["wall_x_cold"] = round(r["wall_s"] / cold["wall_s"], 3)
        r["cpu_x_cold"] = round(r["cpu_s"] / cold["cpu_s"], 3)
    out = {"rows": rows, "load_avg_start": os.getloadavg()}
    if check:
        out["docs_changed_cold"], out["docs_changed_differs_from_cold"] = check_against_cold(
            ws / "docs-changed", _out(work, "docs-changed"), work)
    out["load_avg_end"] = os.getloadavg()
    shutil.rmtree(home, ignore_errors=True)
    return out


def table(res: dict) -> str:
    lines = [("| run | wall s | × cold | CPU s | × cold | answers reused | answers resumed | pairs judged "
              "| verdicts reused |"), "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in res["rows"].items():
        lines.append(f"| {name} | {r['wall_s']} | {r['wall_x_cold']} | {r['cpu_s']} | {r['cpu_x_cold']} "
                     f"| {r['answers_reused']:,} | {r.get('answers_resumed', 0):,} | {r['pairs_judged']:,} "
                     f"| {r['verdicts_reused']:,} |")
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
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated rows to run (default all): "
                    + ", ".join(n for n, _ in SCENARIOS).replace("%", "%%"))
    ap.add_argument("--name", default=None, help="results name: benchmarks/results/scenarios-NAME.json")
    ap.add_argument("--json", type=Path, default=None, help="write the results here instead")
    a = ap.parse_args(argv)
    names = tuple(n for n, _ in SCENARIOS) if a.scenarios is None else tuple(a.scenarios.split(","))
    unknown = set(names) - {n for n, _ in SCENARIOS}
    if unknown or "cold" not in names or (a.check and CHECKED not in names):
        ap.error(f"--scenarios: names from {[n for n, _ in SCENARIOS]}, 'cold' among them"
                 + (f" and '{CHECKED}' (--check)" if a.check else "") + (f"; unknown: {sorted(unknown)}" if unknown else ""))
    chunks, answers = (int(v) for v in a.size.lower().split("x"))
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    ws = workspace(work, chunks, answers)
    if not (ws / "docs-changed").exists() or not (ws / "rechunked").exists():
        from benchmarks.scale.corpus_variants import write_corpus_variants

        write_corpus_variants(ws)
    res = {"size": a.size, "cpus": os.cpu_count(), **measure(ws, work, a.check, names)}
    print(table(res))
    dest = a.json or REPO / "benchmarks" / "results" / f"scenarios-{a.name or a.size}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(res, indent=2) + "\n")
    print(f"\nwrote {dest}")
    return 1 if res.get("docs_changed_differs_from_cold") else 0


if __name__ == "__main__":
    raise SystemExit(main())
