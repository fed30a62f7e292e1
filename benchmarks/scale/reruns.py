"""What a run costs when nothing changed, and what a cold run's memory is.

    .venv/bin/python -m benchmarks.scale.reruns WS STATE [--reruns 3] [--no-cold] [--ragspan PATH]

WS: a workspace made by generate.py (its run `scale`); STATE: a state dir (fresh for a cold
run; must not exist unless --no-cold). Runs the real CLI as scale/run.py does
(`ragspan evaluate --data WS --run scale --out STATE-out-NAME --quiet`): one cold run, then
--reruns unchanged re-runs in the same state dir, each to a new --out, then stops the
state dir's Prefect server. Prints one JSON line per run: wall seconds, CPU seconds of the
command (user + system of the CLI and the judge's worker processes it waits for; the
local Prefect server it starts is not counted), peak RSS of its process tree and of its
largest process (MB, sampled every 50 ms), the load average when it ended, and the wall
seconds of each flow step (RAGSPAN_TIMINGS, flows/ledger.py). On a shared machine, compare
CPU seconds and ratios measured in the same session, not wall seconds.
`--ragspan` runs another checkout's command (e.g. a worktree of the code before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.scale import (
    run as scale,  # run_measured, _env: the scale benchmark's own measurement
)


def measured_run(ragspan: str, ws: Path, home: Path, name: str) -> dict:
    timings = home.parent / f"{home.name}-timings-{name}.jsonl"
    timings.unlink(missing_ok=True)
    out = home.parent / f"{home.name}-out-{name}"
    cmd = [ragspan, "evaluate", "--data", str(ws), "--run", "scale", "--out", str(out), "--quiet"]
    before = os.times()
    result = scale.run_measured(cmd, scale._env(home, timings), ws)
    after = os.times()
    result.pop("stdout")
    result["cpu_s"] = round(after.children_user + after.children_system
                            - before.children_user - before.children_system, 2)
    result["load1"] = round(os.getloadavg()[0], 1)
    steps: dict[str, float] = {}
    for line in timings.read_text().splitlines() if timings.exists() else []:
        rec = json.loads(line)
        steps[rec["step"]] = round(steps.get(rec["step"], 0.0) + rec["seconds"], 2)
    result["steps"] = steps
    return {"run": name, **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ws", type=Path)
    ap.add_argument("state", type=Path)
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true", help="only re-runs, in an existing state dir")
    ap.add_argument("--ragspan", default=str(Path(sys.executable).with_name("ragspan")))
    args = ap.parse_args()
    if not args.no_cold and args.state.exists():
        sys.exit(f"{args.state} exists: a cold run needs a fresh state dir")
    names = ([] if args.no_cold else ["cold"]) + [f"rerun{i + 1}" for i in range(args.reruns)]
    try:
        for name in names:
            print(json.dumps(measured_run(args.ragspan, args.ws.resolve(), args.state.resolve(), name)), flush=True)
    finally:
        subprocess.run([args.ragspan, "server", "stop"], env=scale._env(args.state), capture_output=True, check=False)


if __name__ == "__main__":
    main()
