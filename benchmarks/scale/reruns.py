"""What a run costs when nothing changed, and what a cold run's memory is.

    .venv/bin/python -m benchmarks.scale.reruns WS STATE [--reruns 3] [--no-cold] [--ragspan PATH]

WS: a workspace made by generate.py (its run `scale`); STATE: a state dir (fresh for a cold
run; must not exist unless --no-cold). Through the re-run harness (harness.py): one cold
run, then --reruns unchanged re-runs in the same state dir, each to a new --out
(STATE-out-NAME), then the state dir's Prefect server is stopped. Prints one JSON line per
run as it ends: the harness's measurement (wall and CPU seconds, peak RSS of the process
tree and of its largest process, load average, reuse counters, seconds of each flow step).
On a shared machine, compare CPU seconds and ratios measured in the same session, not wall
seconds. `--ragspan` runs another checkout's command (e.g. a worktree of the code before a
change).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.scale.harness import RAGSPAN, evaluate_in_turn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ws", type=Path)
    ap.add_argument("state", type=Path)
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true", help="only re-runs, in an existing state dir")
    ap.add_argument("--ragspan", default=RAGSPAN)
    args = ap.parse_args(argv)
    if not args.no_cold and args.state.exists():
        sys.exit(f"{args.state} exists: a cold run needs a fresh state dir")
    home = args.state.resolve()
    names = ([] if args.no_cold else ["cold"]) + [f"rerun{i + 1}" for i in range(args.reruns)]
    runs = [(name, args.ws, home.parent / f"{home.name}-out-{name}") for name in names]
    evaluate_in_turn(runs, home, ragspan=args.ragspan,
                     progress=lambda name, r: print(json.dumps({"run": name, **r}), flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
