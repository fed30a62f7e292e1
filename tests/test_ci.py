"""docs/ci.md: the GitHub Actions workflow a team copies, checked two ways.

1. It is valid YAML with the steps the doc promises, and every `--fail-on` rule in it
   parses.
2. Its steps run as written: a repository made by `ragspan init` (DVC-tracked data pushed
   to its local remote) has a base branch `main` and a pull-request branch whose retriever
   got worse (every answer's retrieved list reversed: the best chunk falls out of the
   context window). A fresh clone checks out the pull request and runs the workflow's
   `run:` scripts with bash and the variables a runner sets (GITHUB_BASE_REF,
   RUNNER_TEMP, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY): data pull, `dvc repro`, the base
   branch evaluated in a worktree, compare + gate. The gate must fail, with its reasons
   in the Markdown the workflow posts. Two pipeline runs (~15 s each).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from ragspan.tasks.reporting.gate import parse_rules
from test_dvc import DVC, GIT_ID, env, make_user_data, ragspan, run  # noqa: F401  (env: fixture)

DOC = REPO / "docs" / "ci.md"


def workflow() -> dict:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    return yaml.safe_load(block)


def steps_by_name() -> dict[str, dict]:
    return {s.get("name", s.get("uses", "")): s for s in workflow()["jobs"]["evaluate"]["steps"]}


def test_workflow_is_complete_and_its_rules_parse():
    wf = workflow()
    assert "pull_request" in wf[True]  # YAML 1.1 reads the key `on` as True
    assert wf["permissions"]["pull-requests"] == "write"
    steps = steps_by_name()
    assert steps["Check out (with the base branch)"]["with"]["fetch-depth"] == 0
    for name in ("Install", "Evaluate this branch", "Evaluate the base branch", "Compare and gate",
                 "Post the comparison on the pull request", "Fail when the gate failed"):
        assert name in steps, name
    assert "dvc repro" in steps["Evaluate this branch"]["run"]
    assert "gh pr comment" in steps["Post the comparison on the pull request"]["run"]
    assert parse_rules([wf["env"]["RULES"]])
    doc = DOC.read_text(encoding="utf-8")
    for rules in re.findall(r'--fail-on "([^"$]+)"', doc):
        assert parse_rules([rules]), rules


def _reverse_retrieval(runs_file: Path) -> None:
    rows = [json.loads(line) for line in runs_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    runs_file.write_text("".join(json.dumps({**r, "retrieved": r["retrieved"][::-1]}) + "\n" for r in rows),
                         encoding="utf-8")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, env) -> tuple[Path, dict]:  # noqa: F811
    root = tmp_path_factory.mktemp("ci")
    upstream = root / "upstream"
    ragspan(["init", str(upstream), "--data", str(make_user_data(root / "my-data"))], root, env)
    run(["git", *GIT_ID, "commit", "-q", "-m", "ragspan init"], upstream, env)
    run(["git", "branch", "-M", "main"], upstream, env)
    run([DVC, "push", "-q"], upstream, env)
    run(["git", "checkout", "-q", "-b", "pr"], upstream, env)
    _reverse_retrieval(upstream / "data" / "runs" / "baseline.jsonl")
    run([DVC, "add", "-q", "data"], upstream, env)
    run(["git", *GIT_ID, "commit", "-q", "-am", "retriever: new ranking"], upstream, env)
    run([DVC, "push", "-q"], upstream, env)
    run(["git", "checkout", "-q", "main"], upstream, env)
    work = root / "runner" / "work"
    run(["git", "clone", "-q", "--branch", "pr", str(upstream), str(work)], root, env)
    temp = root / "runner" / "temp"
    temp.mkdir()
    wf_env = {k: v for k, v in workflow()["env"].items() if "${{" not in str(v)}
    runner = {**env, **wf_env, "GITHUB_BASE_REF": "main", "GITHUB_WORKSPACE": str(work),
              "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(temp / "output"),
              "GITHUB_STEP_SUMMARY": str(temp / "summary.md")}
    return work, runner


@pytest.mark.e2e
def test_the_workflow_steps_gate_a_worse_retriever(checkout):
    work, runner = checkout
    steps = steps_by_name()
    for name in ("Fetch the data (when DVC tracks it)", "Evaluate this branch", "Evaluate the base branch",
                 "Compare and gate"):
        out = subprocess.run(["bash", "-e", "-c", steps[name]["run"]], cwd=work, env=runner,
                             capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, f"{name}:\n{out.stdout}\n{out.stderr}"
    temp = Path(runner["RUNNER_TEMP"])
    assert (work / "results" / "baseline" / "metrics.json").is_file()
    assert (temp / "base-results" / "baseline" / "metrics.json").is_file()
    outputs = dict(line.split("=", 1) for line in (temp / "output").read_text().splitlines())
    assert outputs["status"] == "1"  # the gate failed: the "Fail when the gate failed" step runs
    comment = (work / "comment.md").read_text(encoding="utf-8")
    assert "### Gate: **failed**" in comment
    assert re.search(r"correct-lost:3: \d+ claims went from correct to a failure \(\d+ → rank_failure", comment)
    assert (temp / "summary.md").read_text(encoding="utf-8") == comment
