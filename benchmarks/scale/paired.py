"""Two checkouts' cold runs of one workspace, paired in one sitting: the CPU ratio of a change.

    .venv/bin/python -m benchmarks.scale.paired WS --base BASE/.venv/bin/ragspan \
        --new NEW/.venv/bin/ragspan --pairs 2 --work DIR [--compare]

WS: a workspace made by `benchmarks.scale.generate` (its run `scale`); BASE / NEW: two
checkouts, each installed with its own `scripts/install` (so each `ragspan` runs its own
code). Each pair runs both sides cold, each in a fresh state dir under DIR, the order
alternating from pair to pair (base first, then new first, …) so that a machine warming up or
a neighbour's load falls on both sides alike. Prints one JSON line per run (the harness's
measurement: CPU seconds of the process tree, wall, peak RSS, load, and beside them the local
server's CPU seconds), then the CPU ratio new ÷ base of every pair and their median. On a
shared machine the CPU seconds are the figure to compare; wall seconds move with the
neighbours. `--compare`: the results
directories of the two sides of every pair are compared file by file (Parquet tables by
value; manifest, run and report files, which carry the code version, skipped).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pandas as pd

from benchmarks.scale.harness import evaluate_in_turn

# Files that name the code version, the git revision or the timing of a run: they differ
# between two checkouts by construction.
_CARRY_CODE = {"manifest.json", "run.json", "report.html", "summary.md"}


def differing_files(a: Path, b: Path) -> list[str]:
    """The files of results directory `a` whose content differs in `b` (tables by value)."""
    differ = []
    for fa in sorted(p for p in a.rglob("*") if p.is_file()):
        name = fa.relative_to(a).as_posix()
        fb = b / name
        if fa.name in _CARRY_CODE:
            continue
        if not fb.is_file():
            differ.append(name)
        elif fa.suffix == ".parquet":
            if not pd.read_parquet(fa).equals(pd.read_parquet(fb)):
                differ.append(name)
        elif fa.read_bytes() != fb.read_bytes():
            differ.append(name)
    return differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ws", type=Path)
    ap.add_argument("--base", required=True, help="the base checkout's ragspan command")
    ap.add_argument("--new", required=True, help="the changed checkout's ragspan command")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--work", type=Path, required=True, help="a folder for the state dirs and results (must not exist)")
    ap.add_argument("--compare", action="store_true", help="compare the two sides' results files")
    args = ap.parse_args(argv)
    if args.work.exists():
        sys.exit(f"{args.work} exists: cold runs need fresh state dirs")
    args.work.mkdir(parents=True)
    cpu: dict[str, list[float]] = {"base": [], "new": []}
    server: dict[str, list[float]] = {"base": [], "new": []}  # the local Prefect server's own
    for i in range(args.pairs):
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        outs = {}
        for side in order:
            home = (args.work / f"{side}-{i + 1}").resolve()
            outs[side] = args.work / f"{side}-{i + 1}-out"
            row = evaluate_in_turn([("cold", args.ws, outs[side])], home, ragspan=getattr(args, side))["cold"]
            cpu[side].append(row["cpu_s"])
            server[side].append(row["server_cpu_s"])
            print(json.dumps({"pair": i + 1, "side": side, **row}), flush=True)
        if args.compare:
            print(json.dumps({"pair": i + 1, "differing_files": differing_files(outs["base"], outs["new"])}), flush=True)
    ratios = [n / b for n, b in zip(cpu["new"], cpu["base"])]
    print(json.dumps({"cpu_s": cpu, "ratios": [round(r, 3) for r in ratios],
                      "median_ratio": round(statistics.median(ratios), 3), "server_cpu_s": server}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
