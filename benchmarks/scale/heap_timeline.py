"""The flow process's heap over one cold run, step by step: where memory grows with the corpus.

    .venv/bin/python -m benchmarks.scale.heap_timeline WS --work DIR [--json PATH]

One `ragspan evaluate --data WS --run scale --quiet` in a fresh state dir under DIR (the
harness's environment, RAGSPAN_TIMINGS on), sampling every 0.5 s the RssAnon (heap and other
private memory, without mapped files' pages) of the command's process and the sum over its
judge workers (the local Prefect server left out). Prints the peak of each and the flow's
heap during each step; writes the samples and the step timings as JSON (default
DIR/heap.json). Issue 42 item 5: the 3M-chunk run's peak heap within 1.2× of the 1M run's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

import psutil

from benchmarks.scale.harness import RAGSPAN, anon_bytes, cli_env, stop_server


def sample(ragspan: str, ws: Path, work: Path) -> dict:
    """Run the workspace cold; the samples (seconds, flow MB, workers MB) and the step timings."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home, timings = work / "home", work / "timings.jsonl"
    t0 = time.time()
    proc = subprocess.Popen([ragspan, "evaluate", "--data", str(ws), "--run", "scale", "--out", str(work / "out"),
                             "--quiet"], env=cli_env(home, timings), stdout=subprocess.DEVNULL)
    samples = []
    try:
        while proc.poll() is None:
            try:
                kids = [k for k in psutil.Process(proc.pid).children(recursive=True)
                        if "server" not in " ".join(k.cmdline())]
            except psutil.Error:
                kids = []
            samples.append((round(time.time() - t0, 1), anon_bytes(proc.pid) >> 20,
                            sum(anon_bytes(k.pid) for k in kids) >> 20))
            time.sleep(0.5)
    finally:
        stop_server(home, ragspan)
    steps = [json.loads(line) for line in timings.read_text().splitlines()] if timings.exists() else []
    return {"wall_s": round(time.time() - t0, 1), "start": t0, "samples": samples, "steps": steps,
            "returncode": proc.returncode}


def by_step(res: dict) -> list[tuple[str, float, float, int]]:
    """(step, first start, its end, the flow's largest heap sample in it), in order of start."""
    first: dict[str, tuple[float, float]] = {}
    for s in res["steps"]:
        first.setdefault(s["step"], (s["start"] - res["start"], s["start"] - res["start"] + s["seconds"]))
    out = []
    for name, (a, b) in sorted(first.items(), key=lambda x: x[1][0]):
        inside = [mb for t, mb, _ in res["samples"] if a <= t <= b]
        out.append((name, round(a, 1), round(b, 1), max(inside, default=0)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ws", type=Path)
    ap.add_argument("--work", type=Path, required=True, help="a scratch folder (emptied)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ragspan", default=RAGSPAN)
    a = ap.parse_args(argv)
    res = sample(a.ragspan, a.ws.resolve(), a.work.resolve())
    (a.json or a.work / "heap.json").write_text(json.dumps(res) + "\n")
    print(json.dumps({"wall_s": res["wall_s"], "returncode": res["returncode"],
                      "peak_flow_anon_mb": max((mb for _, mb, _ in res["samples"]), default=0),
                      "peak_workers_anon_mb": max((mb for *_, mb in res["samples"]), default=0)}))
    for name, a_s, b_s, mb in by_step(res):
        print(f"{name:20s} {a_s:7.1f}-{b_s:7.1f} s  flow heap up to {mb} MB (0: no sample inside)")
    return 0 if res["returncode"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
