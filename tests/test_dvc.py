"""DVC end to end, with real git and dvc in temporary directories.

One workspace is built by `ragspan init` on a small folder of user data (a subset of the
sample) and carried through the whole loop — `dvc repro` (pipeline run 1), a no-op
`dvc repro`, an unchanged `dvc repro --force` (run 2: `dvc metrics diff` empty),
`dvc exp run -S search.top_k=0` (run 3), `dvc exp show` / `dvc metrics diff`
/ `dvc plots diff` (an offline page), `ragspan compare HEAD <exp>`, and `dvc push` → wipe cache, outs and
data → `dvc pull` → `dvc repro` restoring the same report. Three pipeline runs in all
(each ~10–15 s: a Prefect temporary server per process; the forced one is served by the caches). No git user is assumed: git
identity is given with `-c user.name=…` only where this test commits.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SAMPLE
from ragspan.tasks.reporting.manifest import dir_md5
from ragspan.tasks.reporting.results_files import read_results

BIN = Path(sys.executable).parent
DVC = str(BIN / "dvc")
GIT_ID = ["-c", "user.name=ragspan-test", "-c", "user.email=ragspan-test@example.invalid"]
_CLI = ("import sys, ragspan.flows.cli as c; c._COMMAND_MODULES = tuple(dict.fromkeys("
        "(*c._COMMAND_MODULES, 'ragspan.flows.cli.init', 'ragspan.flows.cli.compare'))); "
        "sys.exit(c.main(sys.argv[1:]))")
KEEP = ("q01", "q02", "q09", "q10", "q15", "q16", "q18", "q19", "q24", "q25")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """Isolated DVC/git/ragspan state; no git user configured anywhere."""
    base = tmp_path_factory.mktemp("dvc-env")
    (base / "gitconfig").write_text("", encoding="utf-8")
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "DVC_"))}
    e.pop("PREFECT_API_URL", None)
    e.update({
        "PATH": f"{BIN}{os.pathsep}{e.get('PATH', '')}",
        "DVC_NO_ANALYTICS": "1",
        "DVC_SITE_CACHE_DIR": str(base / "dvc-site"),
        "DVC_GLOBAL_CONFIG_DIR": str(base / "dvc-global"),
        "DVC_SYSTEM_CONFIG_DIR": str(base / "dvc-system"),
        "GIT_CONFIG_GLOBAL": str(base / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "RAGSPAN_HOME": str(base / "state"),
        "PREFECT_HOME": str(base / "state" / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(base / "state" / "prefect" / "results"),
    })
    return e


def run(cmd: list[str], cwd: Path, env: dict, ok: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)
    if ok:
        assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}"
    return out


def ragspan(args: list[str], cwd: Path, env: dict, ok: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-c", _CLI, *args], cwd, env, ok)


def make_user_data(dest: Path) -> Path:
    """A small folder of "user" data: the sample's corpus and chunks, 10 of its questions."""
    (dest / "runs").mkdir(parents=True)
    for name in ("corpus.jsonl", "chunks.jsonl"):
        shutil.copy(SAMPLE / name, dest / name)
    with open(SAMPLE / "questions.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    with open(dest / "questions.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["question_id"] in KEEP)
    lines = (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()
    (dest / "runs" / "baseline.jsonl").write_text(
        "".join(l + "\n" for l in lines if l.strip() and json.loads(l)["question_id"] in KEEP), encoding="utf-8")
    return dest


def metrics(ws: Path) -> dict:
    return read_results(ws / "results" / "baseline")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, env) -> dict:
    """init → repro → no-op repro → commit → exp run; returns what the tests check."""
    root = tmp_path_factory.mktemp("dvc-ws")
    data = make_user_data(root / "my-data")
    ws = root / "ws"
    init = ragspan(["init", str(ws), "--data", str(data)], root, env)
    first = run([DVC, "repro"], ws, env)
    noop = run([DVC, "repro"], ws, env)
    m_before = metrics(ws)
    run(["git", "add", "-A"], ws, env)
    run(["git", *GIT_ID, "commit", "-q", "-m", "first report"], ws, env)
    forced = run([DVC, "repro", "--force"], ws, env)
    forced_diff = json.loads(run([DVC, "metrics", "diff", "--json"], ws, env).stdout)
    forced_status = run(["git", "status", "--porcelain", "--", "results", "reports"], ws, env).stdout
    forced_facts = json.loads((ws / "results" / "baseline" / "run.json").read_text(encoding="utf-8"))
    run(["git", "add", "-A"], ws, env)
    run(["git", *GIT_ID, "commit", "-q", "-m", "forced re-run"], ws, env)  # dvc.lock: run.json, report.html
    exp = run([DVC, "exp", "run", "-S", "search.top_k=0", "-n", "notopk"], ws, env)
    return {"root": root, "ws": ws, "init": init, "first": first, "noop": noop,
            "before": m_before, "exp": exp, "forced": forced, "forced_diff": forced_diff,
            "forced_status": forced_status, "forced_facts": forced_facts}


def test_init_scaffolds_git_dvc_data_remote_params(workspace, env):
    ws = workspace["ws"]
    assert "ragspan workspace ready" in workspace["init"].stdout
    assert (ws / ".git").is_dir() and (ws / ".dvc").is_dir() and (ws / "data" / "corpus.jsonl").is_file()
    dvc_file = yaml.safe_load((ws / "data.dvc").read_text())
    assert dvc_file["outs"][0]["path"] == "data"
    assert dvc_file["outs"][0]["md5"] == dir_md5(ws / "data", ws)  # the manifest hashes like DVC
    config = (ws / ".dvc" / "config").read_text()
    assert "analytics = false" in config
    remote = run([DVC, "remote", "list"], ws, env).stdout
    assert "storage" in remote and str(workspace["root"] / "ws.dvc-storage") in remote
    params = yaml.safe_load((ws / "params.yaml").read_text())
    assert params["data"] == {"dir": "data", "runs": ["baseline"]}
    assert "files staged, not committed" in workspace["init"].stdout  # no git user assumed
    assert "/data" in (ws / ".gitignore").read_text()
    first_commit = run(["git", "log", "--format=%s"], ws, env).stdout.splitlines()
    assert first_commit == ["forced re-run", "first report"]  # the only commits are this test's


def test_repro_writes_outputs_and_second_repro_is_a_noop(workspace):
    ws = workspace["ws"]
    assert "Running stage 'evaluate@baseline'" in workspace["first"].stdout
    from ragspan.tasks.reporting.results_files import CACHED_OUTS, TRACKED_OUTS

    written = {p.name for p in (ws / "results" / "baseline").iterdir()} - {".gitignore"}
    assert written == {*CACHED_OUTS, *TRACKED_OUTS, "metrics.json", "taxonomy.csv"}  # every output declared
    assert (ws / "reports" / "summary.md").is_file()  # the aggregate stage ran after evaluate
    assert "Running stage 'aggregate'" in workspace["first"].stdout
    assert "Running stage" not in workspace["noop"].stdout
    assert "up to date" in workspace["noop"].stdout
    m = workspace["before"]
    assert m["claims"] == 25 and m["labels"]["retrieval_miss"]["count"] > 0
    snap = m["manifest"]["data"]
    assert snap["dvc_md5"] == yaml.safe_load((ws / "data.dvc").read_text())["outs"][0]["md5"]
    assert {"in": "data.dvc", "md5": snap["dvc_md5"], "matches": True} in snap["recorded"]
    assert m["manifest"]["questions"]["count"] == len(KEEP)
    # The first report ran before any commit (no git user, nothing committed): no revision.
    assert m["manifest"]["git_rev"] is None and m["manifest"]["git_dirty"] is None


def test_unchanged_forced_repro_changes_no_metric_and_no_tracked_result(workspace):
    """metrics.json holds results only; run facts (judge calls, answers reused, task states,
    git state) went to run.json, a DVC-cached out: a forced re-run of the same inputs is
    served from the caches, so its run facts differ — and `dvc metrics diff` shows nothing."""
    ws = workspace["ws"]
    assert "Running stage 'evaluate@baseline'" in workspace["forced"].stdout
    assert workspace["forced_diff"] == {}
    assert workspace["forced_status"] == ""  # metrics.json, manifest.json, taxonomy.csv unchanged
    on_disk = json.loads((ws / "results" / "baseline" / "metrics.json").read_text(encoding="utf-8"))
    assert not {"manifest", "by_metadata", "judge", "bootstrap"} & set(on_disk)
    facts = workspace["forced_facts"]
    assert facts["judge"]["answers_reused"] == len(KEEP)  # the forced run reused every answer
    assert "git_rev" in facts["manifest"] and "git_rev" not in json.loads(
        (ws / "results" / "baseline" / "manifest.json").read_text(encoding="utf-8"))


def _flat(d: dict, prefix: str = "", keep_null: bool = False) -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        if v is not None or keep_null:  # a null metric gets no column; a null param does
            out |= _flat(v, f"{prefix}{k}.", keep_null) if isinstance(v, dict) else {f"{prefix}{k}"}
    return out


def test_exp_show_has_results_only_and_the_documented_view_fits_a_terminal(workspace, env):
    r"""`dvc exp show`: its metric columns are metrics.json's results (no manifest, no
    by-metadata rates, no run facts); the view docs/dvc.md gives (`--drop '.*' --keep
    'Experiment|labels\..*\.rate'`) shows every column at 160 characters, nothing elided."""
    ws = workspace["ws"]
    header = run([DVC, "exp", "show", "--csv"], ws, env).stdout.splitlines()[0].split(",")
    params = _flat(yaml.safe_load((ws / "params.yaml").read_text()), keep_null=True)
    metrics_cols = [c for c in header if c not in params and c not in {
        "Experiment", "rev", "typ", "Created", "parent", "State", "Executor", "data", "results"}]
    on_disk = json.loads((ws / "results" / "baseline" / "metrics.json").read_text(encoding="utf-8"))
    # every result on disk is a column; a column more is a chunk split's metadata value that
    # only another experiment has (the chunker's share per metadata value, decisions.md #38)
    assert set(metrics_cols) >= _flat(on_disk), metrics_cols
    assert all(c.startswith("chunk_split.by_metadata.") for c in set(metrics_cols) - _flat(on_disk))
    # 31 label results + the answer-character shares and their intervals (12), then the chunker's
    assert len([c for c in metrics_cols if not c.startswith("chunk_split.")]) <= 45
    assert not [c for c in header if c.startswith(("manifest", "by_metadata"))]
    table = run([DVC, "exp", "show", "--no-pager", "--drop", ".*", "--keep", r"Experiment|labels\..*\.rate"],
                ws, {**env, "COLUMNS": "160"}).stdout
    assert "…" not in table and "notopk" in table
    assert all(f"labels.{label}.rate" in table for label in
               ("correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination"))


def test_exp_run_changes_metrics_and_dvc_shows_them(workspace, env):
    ws = workspace["ws"]
    assert "notopk" in workspace["exp"].stdout
    after = metrics(ws)  # `dvc exp run` applies the experiment to the workspace
    assert after["labels"]["retrieval_miss"]["count"] == 0
    assert after["labels"] != workspace["before"]["labels"]

    show = json.loads(run([DVC, "exp", "show", "--json"], ws, env).stdout)
    exps = [e for rev in show for e in (rev.get("experiments") or [])]
    names = [run_.get("name") for e in exps for run_ in (e.get("revs") or [])]
    assert "notopk" in names, show

    diff = json.loads(run([DVC, "metrics", "diff", "HEAD", "notopk", "--json"], ws, env).stdout)
    changed = diff["results/baseline/metrics.json"]
    assert changed["labels.retrieval_miss.count"]["new"] == 0
    assert changed["labels.retrieval_miss.count"]["old"] == workspace["before"]["labels"]["retrieval_miss"]["count"]

    plots = run([DVC, "plots", "diff", "HEAD", "notopk", "-o", str(workspace["root"] / "plots")], ws, env)
    html = (workspace["root"] / "plots" / "index.html").read_text()
    assert "notopk" in html and "retrieval_miss" in html, plots.stdout
    # `ragspan init` set plots.html_template: Vega is inlined, nothing loads from the network
    assert "<script src=" not in html and "cdn.jsdelivr" not in html
    assert "vegaEmbed(" in html and "vega-lite 5.2.0" in html


def test_compare_reports_the_transitions_the_param_caused(workspace, env):
    ws = workspace["ws"]
    out = ragspan(["compare", "HEAD", "notopk", "--format", "json", "--resamples", "500"], ws, env)
    result = json.loads(out.stdout)
    assert result["params_changed"] == {"search.top_k": [5, 0]}
    assert result["change"]["kind"] == "evaluator"  # how ragspan judged, not the RAG system
    missed = workspace["before"]["labels"]["retrieval_miss"]["count"]
    moved = {(c["from"], c["to"]): c["count"] for c in result["transitions"]["changed"]}
    assert sum(n for (f, _), n in moved.items() if f == "retrieval_miss") == missed
    assert set(moved) <= {("retrieval_miss", "hallucination"), ("retrieval_miss", "synthesis_error")}
    assert len(result["worse"]) == missed
    rm = {r["label"]: r for r in result["overall"]}["retrieval_miss"]
    assert rm["b_count"] == 0 and not rm["within_noise"]
    assert result["by_metadata"]  # data read at each revision through DVC
    assert result["b"]["source"].startswith("DVC experiment")


def test_push_wipe_pull_restores_the_same_report(workspace, env):
    ws = workspace["ws"]
    run(["git", "checkout", "--", "."], ws, env)  # back to the committed first report
    run([DVC, "checkout"], ws, env)
    before = metrics(ws)
    assert before["labels"] == workspace["before"]["labels"]
    push = run([DVC, "push"], ws, env)
    assert "pushed" in push.stdout
    shutil.rmtree(ws / ".dvc" / "cache")
    shutil.rmtree(ws / "data")
    for name in ("claims.parquet", "spans.parquet", "diagnoses.parquet", "report.html"):
        (ws / "results" / "baseline" / name).unlink()
    run([DVC, "pull"], ws, env)
    assert (ws / "data" / "corpus.jsonl").is_file() and (ws / "results" / "baseline" / "report.html").is_file()
    again = run([DVC, "repro"], ws, env)
    assert "Running stage" not in again.stdout
    after = metrics(ws)
    assert after["labels"] == before["labels"] and after["manifest"] == before["manifest"]


# --------------------------------------------------------------------------- the repository


def test_repository_dvc_yaml_declares_params_metrics_and_plots():
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())
    stage = spec["stages"]["evaluate"]
    assert stage["foreach"] == "${data.runs}"
    do = stage["do"]
    assert "--run ${item}" in do["cmd"] and "--out results/${item}" in do["cmd"]
    assert {"${data.dir}", "tasks", "flows"} <= set(do["deps"])
    assert {"judge", "search", "chunking", "pipeline"} <= set(do["params"])
    from ragspan.tasks.reporting.results_files import CACHED_OUTS, TRACKED_OUTS

    assert do["outs"] == ([f"results/${{item}}/{name}" for name in CACHED_OUTS]
                          + [{f"results/${{item}}/{name}": {"cache": False}} for name in TRACKED_OUTS])
    (metric,) = do["metrics"]
    assert metric == {"results/${item}/metrics.json": {"cache": False}}
    (plot,) = do["plots"]
    ((path, props),) = plot.items()
    assert path == "results/${item}/taxonomy.csv" and props["cache"] is False
    assert (REPO / ".dvc" / "plots" / f"{props['template']}.json").is_file()


def test_init_writes_the_repository_plot_templates():
    from ragspan.flows.cli.init import plot_templates

    for name, content in plot_templates().items():
        assert json.loads((REPO / ".dvc" / "plots" / name).read_text()) == content


def test_dir_md5_matches_dvc_add_with_dvcignore(tmp_path, env):
    """The manifest's directory hash is DVC's: checked against a real `dvc add`."""
    run(["git", "init", "-q"], tmp_path, env)
    run([DVC, "init", "-q"], tmp_path, env)
    (tmp_path / ".dvcignore").write_text("*.tmp\n", encoding="utf-8")
    d = tmp_path / "d"
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "a.txt").write_bytes(b"line one\r\nline two\r\n")  # CRLF: DVC 3 hashes raw bytes
    (d / "sub" / "b é.md").write_text("ünïcode ✓\n", encoding="utf-8")
    (d / "sub" / "deeper" / "c.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    (d / "skip.tmp").write_text("ignored", encoding="utf-8")
    run([DVC, "add", "-q", "d"], tmp_path, env)
    recorded = yaml.safe_load((tmp_path / "d.dvc").read_text())["outs"][0]
    assert dir_md5(d, tmp_path) == recorded["md5"]
    assert recorded["nfiles"] == 3


def test_init_pipeline_has_the_repository_stages_and_the_offline_plots_page():
    """`ragspan init`'s dvc.yaml runs the same stages as ragspan's own (evaluate per run,
    then aggregate, the last stage); both repositories render DVC plots offline."""
    from ragspan.flows.cli.init import PLOTS_PAGE, dvc_yaml

    ours = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    theirs = yaml.safe_load(dvc_yaml("data"))["stages"]
    assert list(theirs) == list(ours) == ["evaluate", "aggregate"]
    assert theirs["aggregate"]["cmd"] == ours["aggregate"]["cmd"]
    assert theirs["aggregate"]["outs"] == ours["aggregate"]["outs"]
    assert theirs["evaluate"]["do"]["outs"] == ours["evaluate"]["do"]["outs"]
    assert "metrics" not in ours["aggregate"] or ours["aggregate"]["metrics"] == theirs["aggregate"]["metrics"]
    config = (REPO / ".dvc" / "config").read_text()
    assert "html_template = ../tasks/reporting/dvc_plots.html" in config
    page = PLOTS_PAGE.read_text(encoding="utf-8")
    assert "{plot_divs}" in page and "{scripts}" not in page and "<script src=" not in page
