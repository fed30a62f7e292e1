"""Scale benchmark: how ragspan's cost grows with the corpus and the number of answers.

    .venv/bin/python -m benchmarks.scale.run                          # quick grid, a few minutes
    .venv/bin/python -m benchmarks.scale.run --sizes 100000x10000 --repeats 3   # the target run
    .venv/bin/python -m benchmarks.scale.run --sizes 1000x100,10000x1000,100000x10000

A size is CHUNKSxANSWERS. For each size the workspace is generated (generate.py, in
--work, default a temporary directory; never inside the repository) and measured:

- cold: the real CLI, `ragspan evaluate --data WS --run scale --quiet`, as a subprocess
  with a fresh RAGSPAN_HOME (no index, no Prefect cache, its own local Prefect server),
  measured by the re-run harness (harness.py): wall and CPU time, peak RSS of the
  process tree (psutil, sampled every 50 ms) and of the largest process.
- per step, two ways:
  * in the flow: RAGSPAN_TIMINGS (flows/ledger.py) records the wall time of every Prefect
    task call — load, build-index, each shard's decompose / extract / validate-offsets /
    corpus-search / diagnose, report. Two shards run side by side (threads), so the
    shard steps are thread-seconds; their sum is ~2x their wall share.
  * pure: a child process runs the same functions without Prefect, one shard after the
    other, on the same workspace (`--child steps`).
  Prefect overhead = cold wall − pure total (interpreter start and imports, the CLI's
  own input check, the temporary server, per-task cache keys and persisted results).
- floor: a child process that only reads + validates the inputs (tasks.load) and builds
  the index (fresh state dir): its wall time, interpreter start included, like the cold
  run's. cold / floor is the pipeline's overhead over the floor.
- unchanged re-run: same RAGSPAN_HOME, new --out: wall, judge calls, task states.
- changed re-run: the same inputs with 5 % of the answers regenerated (WS/changed).

Printed as a table; JSON in benchmarks/results/scale-<name>.json; growth (log-log slope
of each step's time against the number of claims, index build against chunks) and an
SVG plot benchmarks/results/scale-<name>.svg.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scale import harness
from benchmarks.scale.harness import cli_env, run_measured

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PY = sys.executable
QUICK = "1000x100,3000x300,10000x1000"
STEPS = ("load", "build-index", "decompose", "extract", "validate-offsets", "corpus-search", "diagnose",
         "chunk-windows", "chunk-split", "report")


# ------------------------------------------------------------------ child processes


def child_floor(ws: Path, home: Path) -> dict:
    t0 = time.perf_counter()
    from ragspan.tasks.inputs.load import load_workspace
    from ragspan.tasks.steps.corpus_search import build_index_dir

    t1 = time.perf_counter()
    w = load_workspace(ws, "scale", 800, 100, 3)
    t2 = time.perf_counter()
    build_index_dir(w.chunks, w.corpus, home / "index")
    t3 = time.perf_counter()
    return {"import_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2), "index_s": round(t3 - t2, 2)}


def child_steps(ws: Path, home: Path) -> dict:
    """The pipeline's pure functions, no Prefect, one shard after the other."""
    os.environ["RAGSPAN_HOME"] = str(home)
    import pandas as pd
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.core.shards import shards_of
    from ragspan.tasks.inputs.load import load_workspace
    from ragspan.tasks.judges import judge_spec, make_judge, support_threshold
    from ragspan.tasks.reporting.report import write_results
    from ragspan.tasks.steps.boundary import mark_splits, window_passages
    from ragspan.tasks.steps.corpus_search import (
        build_index_dir,
        claims_needing_search,
        hits_for_claims,
    )
    from ragspan.tasks.steps.decompose import claims_for_answers
    from ragspan.tasks.steps.diagnose import diagnose_claims
    from ragspan.tasks.steps.extract import candidates_for_claims
    from ragspan.tasks.steps.validate_offsets import (
        judgements_from_candidates,
        spans_from_judgements,
    )

    times: dict[str, float] = {}

    def t(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        times[name] = times.get(name, 0.0) + time.perf_counter() - t0
        return out

    settings = load_settings(None)
    spec, thr = judge_spec(settings.judge), support_threshold(settings.judge)
    w = t("load", load_workspace, ws, "scale", 800, 100, 3)
    index = str(t("build-index", build_index_dir, w.chunks, w.corpus, home / "index"))
    shards = t("shards", lambda: shards_of(w.answers, w, settings.pipeline.shard_size))
    claims_all, judged_all, diag_all, marked_all = [], [], [], []
    for sh in shards:
        judge = make_judge(spec)
        claims, _ = t("decompose", claims_for_answers, sh.answers, judge)
        cand, _ = t("extract", candidates_for_claims, claims, sh.passages, judge)
        judged, _ = t("validate-offsets", judgements_from_candidates, cand)

        def search(claims=claims, judged=judged, passages=sh.passages):
            retrieved = passages[passages["source"] == "retrieved"]
            seen = retrieved.groupby("question_id")["chunk_id"].agg(set).to_dict()
            return hits_for_claims(claims_needing_search(claims, judged, thr), seen, index, settings.search.top_k)

        hits = t("corpus-search", search)
        cand2, _ = t("extract", candidates_for_claims, claims, hits, judge)
        searched, _ = t("validate-offsets", judgements_from_candidates, cand2)
        diag, marked = t("diagnose", diagnose_claims, claims, [judged, searched], thr,
                         settings.judge.uncertainty_band, sh.answers[["question_id", "answer"]])
        # evidence cut by a chunk boundary (tasks/steps/boundary.py): windows, their judge
        # pass and the flags, all timed as the chunk split's cost
        seen = pd.concat([sh.passages, hits], ignore_index=True)
        windows = t("chunk-windows", window_passages, diag, pd.concat([judged, searched], ignore_index=True),
                    seen, index)
        cand3, _ = t("chunk-split", candidates_for_claims, claims, windows, judge)
        across, _ = t("chunk-split", judgements_from_candidates, cand3)
        diag, marked, _kept = t("chunk-split", mark_splits, (diag, marked), across, seen,
                                sh.answers[["question_id", "answer"]], index, thr, settings.judge.uncertainty_band)
        times["pairs_judged"] = times.get("pairs_judged", 0) + len(cand) + len(cand2)
        times["window_pairs_judged"] = times.get("window_pairs_judged", 0) + len(windows)
        claims_all.append(claims)
        marked_all.append(marked)
        judged_all += [judged, searched]
        diag_all.append(diag)
    out = Path(tempfile.mkdtemp(prefix="ragspan-scale-report-"))
    try:
        t("report", lambda: write_results(out / "r", "scale", pd.concat(claims_all, ignore_index=True),
                                          spans_from_judgements(pd.concat(judged_all, ignore_index=True)),
                                          pd.concat(diag_all, ignore_index=True), w.answers, w.retrieved,
                                          w.corpus, w.questions, {"calls": 0, "task_states": {}}, {},
                                          answer_spans=pd.concat(marked_all, ignore_index=True)))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {k: round(v, 2) for k, v in times.items()}


def child(kind: str, ws: Path) -> dict:
    home = Path(tempfile.mkdtemp(prefix="ragspan-scale-home-"))
    try:
        return child_floor(ws, home) if kind == "floor" else child_steps(ws, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run_child(kind: str, ws: Path) -> dict:
    r = run_measured([PY, "-m", "benchmarks.scale.run", "--child", kind, str(ws)], cli_env(Path(tempfile.gettempdir()) / "unused"), REPO)
    res = json.loads(r["stdout"].strip().splitlines()[-1])
    res.update(wall_s=r["wall_s"], peak_rss_mb=r["peak_rss_mb"])
    return res


# ------------------------------------------------------------------ one size


def workspace(work: Path, chunks: int, answers: int) -> Path:
    from benchmarks.scale.generate import write_workspace

    ws = work / f"ws-{chunks}x{answers}"
    info = ws / "info.json"
    if not (info.exists() and json.loads(info.read_text()).get("chunks") == chunks):
        shutil.rmtree(ws, ignore_errors=True)
        write_workspace(ws, chunks, answers)
    return ws


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def measure(work: Path, chunks: int, answers: int, repeats: int, runner: str, reruns: bool) -> dict:
    ws = workspace(work, chunks, answers)
    info = json.loads((ws / "info.json").read_text())
    res: dict = {"chunks": chunks, "answers": answers, "workspace": info, "task_runner": runner,
                 "cold": [], "unchanged": [], "changed": []}
    res["floor"] = [run_child("floor", ws) for _ in range(repeats)]
    res["pure"] = run_child("steps", ws)
    runs = [("cold", ws, work / "out-cold")]
    if reruns:
        runs += [("unchanged", ws, work / "out-unchanged"), ("changed", ws / "changed", work / "out-changed")]
    for i in range(repeats):
        home = work / f"home-{chunks}x{answers}-{i}"
        shutil.rmtree(home, ignore_errors=True)
        for name, r in harness.evaluate_in_turn(runs, home, runner).items():
            res[name].append(r)
        shutil.rmtree(home, ignore_errors=True)
    cold = median([r["wall_s"] for r in res["cold"]])
    floor = median([f["wall_s"] for f in res["floor"]])
    counts = ("wall_s", "peak_rss_mb", "pairs_judged", "window_pairs_judged")
    pure_total = round(sum(v for k, v in res["pure"].items() if k not in counts), 2)
    split_s = round(res["pure"].get("chunk-windows", 0.0) + res["pure"].get("chunk-split", 0.0), 2)
    res["summary"] = {
        "claims": res["cold"][0]["claims"],
        "cold_s": cold,
        "cold_runs_s": [r["wall_s"] for r in res["cold"]],
        "peak_rss_mb": median([r["peak_rss_mb"] for r in res["cold"]]),
        "peak_rss_largest_mb": median([r["peak_rss_largest_mb"] for r in res["cold"]]),
        "floor_s": floor,
        "floor_in_process_s": median([f["load_s"] + f["index_s"] for f in res["floor"]]),
        "cold_over_floor": round(cold / floor, 2),
        "pure_total_s": pure_total,
        "prefect_overhead_s": round(cold - pure_total, 2),
        "before_flow_s": median([r.get("before_flow_s", 0.0) for r in res["cold"]]),
        "pure_steps_s": {k: res["pure"].get(k, 0.0) for k in STEPS},
        "flow_steps_s": {k: median([r["steps_s"].get(k, 0.0) for r in res["cold"]]) for k in STEPS},
        # issue 30: the chunk split's own cost (windows, their judge pass, the flags), pure
        "chunk_split_s": split_s,
        "chunk_split_share_of_pure": round(split_s / pure_total, 4) if pure_total else None,
        "chunk_split_share_of_cold": round(split_s / cold, 4) if cold else None,
        "pairs_judged": res["pure"].get("pairs_judged"),
        "window_pairs_judged": res["pure"].get("window_pairs_judged"),
    }
    if reruns:
        res["summary"].update(
            unchanged_s=median([r["wall_s"] for r in res["unchanged"]]),
            unchanged_judge_calls=max(r["judge_calls"] for r in res["unchanged"]),
            changed_s=median([r["wall_s"] for r in res["changed"]]),
            changed_judge_calls=median([r["judge_calls"] for r in res["changed"]]),
            cold_judge_calls=res["cold"][0]["judge_calls"],
            changed_shards_rerun=res["changed"][0]["task_states"].get("diagnose", {}).get("Completed", 0),
            shards=sum(res["cold"][0]["task_states"].get("diagnose", {}).values()),
            unchanged_answers_reused=res["unchanged"][0]["answers_reused"],
            changed_answers_reused=res["changed"][0]["answers_reused"],
        )
        res["summary"]["changed_over_cold"] = round(res["summary"]["changed_s"] / cold, 3)
    return res


# ------------------------------------------------------------------ growth, table, plot


def slope(xs: list[float], ys: list[float]) -> float | None:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return None if den == 0 else round(sum((p[0] - mx) * (p[1] - my) for p in pts) / den, 2)


def growth(results: list[dict]) -> dict:
    claims = [r["summary"]["claims"] for r in results]
    chunks = [r["chunks"] for r in results]
    out = {}
    for step in STEPS:
        ys = [r["summary"]["pure_steps_s"][step] for r in results]
        xs = chunks if step == "build-index" else claims
        out[step] = {"vs": "chunks" if step == "build-index" else "claims", "slope": slope(xs, ys)}
    out["cold"] = {"vs": "claims", "slope": slope(claims, [r["summary"]["cold_s"] for r in results])}
    return out


def table(results: list[dict]) -> str:
    head = ("| chunks | answers | claims | cold s | peak RSS MB | floor s | cold/floor | pure s | cold − pure s "
            "| unchanged s (judge calls) | 5% changed s (shards run, answers evaluated) | changed/cold |")
    lines = [head, "|" + "---:|" * (head.count("|") - 1)]
    for r in results:
        s, answers = r["summary"], r["answers"]
        lines.append(
            f"| {r['chunks']:,} | {r['answers']:,} | {s['claims']:,} | {s['cold_s']} | {s['peak_rss_mb']:,} "
            f"| {s['floor_s']} | {s['cold_over_floor']} | {s['pure_total_s']} | {s['prefect_overhead_s']} "
            f"| {s.get('unchanged_s', '–')} ({s.get('unchanged_judge_calls', '–')}) "
            f"| {s.get('changed_s', '–')} ({s.get('changed_shards_rerun', '–')}/{s.get('shards', '–')}, "
            f"{answers - s.get('changed_answers_reused', 0) if 'changed_s' in s else '–'} answers) "
            f"| {s.get('changed_over_cold', '–')} |")
    lines += ["", "| chunks × answers | " + " | ".join(STEPS) + " |", "|---|" + "---:|" * len(STEPS)]
    for r in results:
        s = r["summary"]
        lines.append(f"| {r['chunks']:,} × {r['answers']:,} pure | "
                     + " | ".join(str(s["pure_steps_s"][k]) for k in STEPS) + " |")
        lines.append(f"| {r['chunks']:,} × {r['answers']:,} in flow | "
                     + " | ".join(str(s["flow_steps_s"][k]) for k in STEPS) + " |")
    lines += ["", "| chunks × answers | chunk split s (pure) | of pure total | of cold | window pairs / pairs judged |",
              "|---|---:|---:|---:|---:|"]
    for r in results:
        s = r["summary"]
        lines.append(f"| {r['chunks']:,} × {r['answers']:,} | {s['chunk_split_s']} | "
                     f"{s['chunk_split_share_of_pure']:.1%} | {s['chunk_split_share_of_cold']:.1%} | "
                     f"{s['window_pairs_judged']:,} / {s['pairs_judged']:,} |")
    return "\n".join(lines)


COLORS = ("#1565c0", "#2e7d32", "#f9a825", "#6a1b9a", "#c62828", "#ef6c00", "#00838f", "#5d4037", "#0d47a1",
          "#ad1457", "#000000")


def plot_svg(results: list[dict], g: dict) -> str:
    """Log-log: pure time of each step (and the cold wall) against the number of claims."""
    series = {k: [(r["summary"]["claims"], r["summary"]["pure_steps_s"][k]) for r in results] for k in STEPS}
    series["cold (CLI wall)"] = [(r["summary"]["claims"], r["summary"]["cold_s"]) for r in results]
    pts = [p for s in series.values() for p in s if p[0] > 0 and p[1] > 0]
    if not pts:
        return ""
    W, H, L, R, T, B = 720, 420, 60, 210, 30, 45
    x0, x1 = math.log10(min(p[0] for p in pts)), math.log10(max(p[0] for p in pts))
    y0, y1 = math.floor(math.log10(min(p[1] for p in pts))), math.ceil(math.log10(max(p[1] for p in pts)))
    x1 = x1 if x1 > x0 else x0 + 1

    def X(v: float) -> float:
        return L + (math.log10(v) - x0) / (x1 - x0) * (W - L - R)

    def Y(v: float) -> float:
        return H - B - (math.log10(v) - y0) / (y1 - y0 or 1) * (H - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="18" font-size="13">ragspan scale: time per step vs claims (log-log; slope in legend)</text>']
    for e in range(int(y0), int(y1) + 1):
        y = Y(10**e)
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10**e:g} s</text>')
    for r in results:
        x = X(r["summary"]["claims"])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{H - B + 14}" text-anchor="middle">{r["summary"]["claims"]:,}</text>')
        out.append(f'<text x="{x:.1f}" y="{H - B + 26}" text-anchor="middle" fill="#777">{r["chunks"]:,} ch</text>')
    for i, (name, s) in enumerate(series.items()):
        c = COLORS[i % len(COLORS)]
        s = [p for p in s if p[0] > 0 and p[1] > 0]
        if len(s) > 1:
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                       + " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b in s) + '"/>')
        for a, b in s:
            out.append(f'<circle cx="{X(a):.1f}" cy="{Y(b):.1f}" r="3" fill="{c}"/>')
        key = "cold" if name.startswith("cold") else name
        sl = g.get(key, {}).get("slope")
        ly = T + 10 + i * 18
        out.append(f'<rect x="{W - R + 12}" y="{ly - 8}" width="12" height="4" fill="{c}"/>')
        out.append(f'<text x="{W - R + 30}" y="{ly}">{name}{"" if sl is None else f"  (slope {sl})"}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 4}" text-anchor="middle">claims (chunks below)</text>')
    out.append("</svg>")
    return "\n".join(out)


def start_server(work: Path) -> subprocess.Popen:
    """`prefect server start` on a free local port, its own PREFECT_HOME; sets harness.API_URL."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(work / "prefect-server"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PREFECT_SERVER_LOGGING_LEVEL="CRITICAL",
               PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED="false")
    (work / "prefect-server").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([str(Path(PY).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            harness.API_URL = url
            return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("prefect server did not start")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=QUICK, help=f"CHUNKSxANSWERS,... (default {QUICK})")
    ap.add_argument("--repeats", type=int, default=1, help="cold/re-run/floor repetitions (medians reported)")
    ap.add_argument("--task-runner", choices=["thread", "dask"], default="thread")
    ap.add_argument("--no-reruns", action="store_true", help="skip the unchanged and changed re-runs")
    ap.add_argument("--work", help="where workspaces and state go (default: a temporary directory)")
    ap.add_argument("--name", default=None, help="results name: benchmarks/results/scale-NAME.{json,svg}")
    ap.add_argument("--server", action="store_true",
                    help="run against one `prefect server start` (PREFECT_API_URL) instead of a temporary "
                         "server per process — how CI or a served deployment runs it")
    ap.add_argument("--prefect", choices=["auto", "ephemeral"], default="auto",
                    help="auto: the local server each state dir starts on first use (default); "
                         "ephemeral: Prefect's temporary server in every process (the old way)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "WS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child[0], Path(a.child[1]))))
        return 0
    harness.PREFECT_MODE = a.prefect
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",") if s]
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="ragspan-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    server = start_server(work) if a.server else None
    results = []
    try:
        results = measure_all(work, sizes, a)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
    report_all(results, a, work)
    return 0


def measure_all(work: Path, sizes: list[tuple[int, ...]], a: argparse.Namespace) -> list[dict]:
    results = []
    for chunks, answers in sizes:
        print(f"measuring {chunks:,} chunks × {answers:,} answers ...", file=sys.stderr, flush=True)
        results.append(measure(work, chunks, answers, a.repeats, a.task_runner, not a.no_reruns))
        results[-1]["prefect_server"] = "running (PREFECT_API_URL)" if harness.API_URL else "temporary, per process"
        print(json.dumps(results[-1]["summary"]), file=sys.stderr, flush=True)
    return results


def report_all(results: list[dict], a: argparse.Namespace, work: Path) -> None:
    g = growth(results)
    print(table(results))
    print("\ngrowth (log-log slope; 1 = linear):", json.dumps({k: v["slope"] for k, v in g.items()}))
    name = a.name or ("quick" if a.sizes == QUICK else a.sizes.replace(",", "_"))
    dest = REPO / "benchmarks" / "results"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"scale-{name}.json").write_text(json.dumps(
        {"sizes": a.sizes, "repeats": a.repeats, "cpus": os.cpu_count(), "task_runner": a.task_runner,
         "prefect_server": "running" if a.server else "temporary", "growth": g, "results": results},
        indent=2, default=str) + "\n")
    svg = plot_svg(results, g) if len(results) > 1 else ""  # a growth plot needs two sizes
    if svg:
        (dest / f"scale-{name}.svg").write_text(svg)
    print(f"\nwrote {dest / f'scale-{name}.json'}" + (" and .svg" if svg else ""))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
