"""The growth table: what a cold run and a 5 %-documents re-run cost as the corpus grows
(issue 34 item 5).

    .venv/bin/python -m benchmarks.scale.growth --ws SCALEWS/100000x10000 \
        --ws SCALEWS/1000000x10000 --work WORK/growth --check --label before
    .venv/bin/python -m benchmarks.scale.growth --ws WS --work DIR --ragspan BASE/.venv/bin/ragspan

SCALEWS/NxM: a workspace made by `python -m benchmarks.scale.generate --chunks N --answers M
--out SCALEWS/NxM`; WORK, DIR: scratch directories outside the repository.

Each workspace (made by generate.py, JSONL or Parquet, with its `docs-changed/` variant) in a
fresh state dir of its own (DIR/NAME/home, removed after), the real CLI through the re-run
harness (harness.py), as a user types it:

1. cold: `ragspan evaluate --data WS --run scale --out ... --quiet`;
2. 5 % documents: the same in the same state dir on WS/docs-changed (a sentence appended to
   5 % of the documents: the corpus store and the index are updated, the answers reused).

Per size: chunks; preparation seconds (before the flow's first step — interpreter, imports,
the CLI's check, server start — plus the flow's `load`, `corpus_identity` and `build-index`
steps: read, hash, index; from the harness's `<out>-timings.jsonl`); cold wall and CPU
seconds; peak RSS of the process tree and of its largest process; the re-run's wall and CPU
seconds and their ratio to cold; per chunk: cold and preparation µs, peak RSS bytes, input
bytes; and between sizes, what each extra chunk cost (the answers are 10k at every size: the
corpus's own share). `--check` adds a cold run of WS/docs-changed in a fresh state dir and
compares its results with the re-run's (scenarios.py's check: tables with pandas `equals`,
metrics.json): exit status 1 when they differ. JSON in benchmarks/results/growth-LABEL.json (or --json PATH).

Targets (issue 34): 1M chunks: cold ≤ 180 s, preparation ≤ 45 s, peak RSS ≤ 3 GB, re-run ≤
0.2× cold; 10M chunks: completes, peak RSS ≤ 6 GB. On a shared machine read CPU seconds and
ratios of one sitting; the load average is recorded at each run's end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
from pathlib import Path

from benchmarks.scale.harness import RAGSPAN, evaluate_in_turn
from benchmarks.scale.run import REPO
from benchmarks.scale.scenarios import check_against_cold
from benchmarks.scale.tables import table_path

PREPARATION_STEPS = ("load", "corpus_identity", "build-index")  # read, hash, index
RERUN = "5 % documents"


def input_bytes(ws: Path) -> int:
    """Bytes of the corpus and chunk tables as given (JSONL or Parquet)."""
    return sum(table_path(ws, stem).stat().st_size for stem in ("corpus", "chunks"))


def preparation_s(run: dict) -> float:
    """Seconds before the flow's first step plus the flow's load and build-index steps."""
    return round(run.get("before_flow_s", 0.0) + sum(run["steps_s"].get(s, 0.0) for s in PREPARATION_STEPS), 2)


def chunk_count(ws: Path) -> int:
    return int(json.loads((ws / "info.json").read_text())["chunks"])


def size_row(ws: Path, cold: dict, rerun: dict) -> dict:
    """The table's row for one workspace: its figures and their cost per chunk."""
    chunks = chunk_count(ws)
    prep = preparation_s(cold)
    per_chunk = {
        "cold_wall_us": round(cold["wall_s"] / chunks * 1e6, 1),
        "cold_cpu_us": round(cold["cpu_s"] / chunks * 1e6, 1),
        "preparation_us": round(prep / chunks * 1e6, 1),
        "peak_rss_bytes": round(cold["peak_rss_mb"] * 2**20 / chunks),
        "input_bytes": round(input_bytes(ws) / chunks),
    }
    return {"workspace": str(ws), "chunks": chunks, "format": table_path(ws, "corpus").suffix.lstrip("."),
            "preparation_s": prep, "cold_wall_s": cold["wall_s"], "cold_cpu_s": cold["cpu_s"],
            "peak_rss_mb": cold["peak_rss_mb"], "peak_rss_largest_mb": cold["peak_rss_largest_mb"],
            # heap only (RssAnon): without the mapped corpus and index pages, which are page cache
            "peak_anon_mb": cold.get("peak_anon_mb"), "peak_anon_largest_mb": cold.get("peak_anon_largest_mb"),
            "rerun_peak_anon_largest_mb": rerun.get("peak_anon_largest_mb"),
            "rerun_wall_s": rerun["wall_s"], "rerun_cpu_s": rerun["cpu_s"],
            "rerun_wall_x_cold": round(rerun["wall_s"] / cold["wall_s"], 3),
            "rerun_cpu_x_cold": round(rerun["cpu_s"] / cold["cpu_s"], 3),
            "rerun_peak_rss_mb": rerun["peak_rss_mb"], "per_chunk": per_chunk}


def marginal_costs(sizes: list[dict]) -> list[dict]:
    """Between consecutive sizes (by chunks): what each extra chunk cost — cold CPU and
    preparation µs, peak RSS bytes. The answers are the same 10k at every size, so this,
    not the per-chunk average, is the corpus's own share."""
    out = []
    ordered = sorted(sizes, key=lambda r: r["chunks"])
    for a, b in itertools.pairwise(ordered):
        extra = b["chunks"] - a["chunks"]
        if extra <= 0:
            continue
        out.append({"from": a["chunks"], "to": b["chunks"],
                    "cold_cpu_us": round((b["cold_cpu_s"] - a["cold_cpu_s"]) / extra * 1e6, 1),
                    "preparation_us": round((b["preparation_s"] - a["preparation_s"]) / extra * 1e6, 1),
                    "peak_rss_bytes": round((b["peak_rss_mb"] - a["peak_rss_mb"]) * 2**20 / extra)})
    return out


def _progress(name: str, row: dict) -> None:
    print(f"{name}: {json.dumps(row)}", file=sys.stderr, flush=True)


def measure_size(ws: Path, work: Path, check: bool, ragspan: str = RAGSPAN) -> dict:
    """Cold run and 5 %-documents re-run of `ws` in one fresh state dir (work/home, removed
    after), then the check; the raw measurements kept beside the row."""
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    runs = [("cold", ws, work / "out-cold"), (RERUN, ws / "docs-changed", work / "out-docs-changed")]
    try:
        rows = evaluate_in_turn(runs, home, ragspan=ragspan, progress=_progress)
    finally:
        shutil.rmtree(home, ignore_errors=True)  # a 10M-chunk state dir is tens of GB
    res = {**size_row(ws, rows["cold"], rows[RERUN]), "runs": rows}
    if check:
        res["docs_changed_cold"], res["differs_from_cold"] = check_against_cold(
            ws / "docs-changed", work / "out-docs-changed", work, ragspan)
    return res


def table(sizes: list[dict]) -> str:
    head = ("| chunks | format | preparation s | cold wall s | cold CPU s | peak RSS tree / largest MB "
            "| peak heap (RssAnon) tree / largest MB "
            "| 5 % docs wall s | × cold (wall / CPU) | µs per chunk (cold wall / CPU / prep) | RSS bytes per chunk "
            "| input bytes per chunk |")
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sizes:
        pc = r["per_chunk"]
        lines.append(f"| {r['chunks']:,} | {r['format']} | {r['preparation_s']} | {r['cold_wall_s']} "
                     f"| {r['cold_cpu_s']} | {r['peak_rss_mb']:,} / {r['peak_rss_largest_mb']:,} "
                     f"| {r.get('peak_anon_mb')} / {r.get('peak_anon_largest_mb')} "
                     f"| {r['rerun_wall_s']} | {r['rerun_wall_x_cold']} / {r['rerun_cpu_x_cold']} "
                     f"| {pc['cold_wall_us']} / {pc['cold_cpu_us']} / {pc['preparation_us']} | {pc['peak_rss_bytes']:,} "
                     f"| {pc['input_bytes']:,} |")
    for m in marginal_costs(sizes):
        lines.append(f"\n{m['from']:,} → {m['to']:,} chunks, per extra chunk: cold CPU {m['cold_cpu_us']} µs, "
                     f"preparation {m['preparation_us']} µs, peak RSS {m['peak_rss_bytes']:,} bytes")
    for r in sizes:
        if "differs_from_cold" in r:
            lines.append(f"\n{r['chunks']:,} chunks: the re-run's results against a cold run of the new corpus "
                         f"({r['docs_changed_cold']['wall_s']} s): differing {r['differs_from_cold'] or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", type=Path, action="append", required=True, help="a workspace (repeat: one per size)")
    ap.add_argument("--work", type=Path, required=True, help="state dirs and results go to WORK/<workspace name>")
    ap.add_argument("--check", action="store_true", help="the re-run's results against a cold run of the new corpus")
    ap.add_argument("--ragspan", default=RAGSPAN, help="the ragspan command to measure (another checkout's)")
    ap.add_argument("--label", default="run", help="results name: benchmarks/results/growth-LABEL.json")
    ap.add_argument("--json", type=Path, default=None, help="write the results here instead")
    a = ap.parse_args(argv)
    dest = a.json or REPO / "benchmarks" / "results" / f"growth-{a.label}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    res = {"label": a.label, "cpus": os.cpu_count(), "ragspan": a.ragspan, "load_avg_start": os.getloadavg(),
           "sizes": []}
    for ws in a.ws:  # the file rewritten after each size: a 10M size may take hours, the others are kept
        res["sizes"].append(measure_size(ws.resolve(), a.work.resolve() / ws.resolve().name, a.check, a.ragspan))
        res["load_avg_end"] = os.getloadavg()
        res["marginal"] = marginal_costs(res["sizes"])
        dest.write_text(json.dumps(res, indent=2) + "\n")
    sizes = res["sizes"]
    print(table(sizes))
    print(f"\nwrote {dest}")
    return 1 if any(r.get("differs_from_cold") for r in sizes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
