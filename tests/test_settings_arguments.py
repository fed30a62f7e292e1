"""Settings reach the flow, its steps and its judges as arguments (docs/decisions.md #50).

- `prepare_run` (flows/evaluation.py) is the one preparation of the command and the API:
  both call it, the params file is parsed once per run, the flow gets that `Settings`
  (it parses nothing itself), and a bad input stops there, before any flow starts.
- The judge runtime (verdict-cache and judge-cache paths, worker processes) reaches the
  judge through `make_judge`, and is in no step cache key.

The real flow runs against a real Prefect test server; parsing and the flow are observed,
not replaced."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import ragspan
import yaml
from conftest import SAMPLE
from ragspan.flows import evaluation
from ragspan.flows.cli import main
from ragspan.tasks import config
from ragspan.tasks.errors import InputError
from ragspan.tasks.judges import judge_runtime, make_judge
from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec
from ragspan.tasks.steps.cache_policy import ContentInputs

# --------------------------------------------------------------------------- the judge runtime


def test_the_runtime_is_in_no_step_cache_key_and_everything_else_is():
    key = ContentInputs().compute_key
    inputs = {"answers": "a", "spec": JudgeSpec(), "code": "c1"}
    off = key(None, {**inputs, "runtime": JudgeRuntime()}, {})
    on = key(None, {**inputs, "runtime": JudgeRuntime("/s1/verdict-cache.sqlite", "/s1/judge-cache.sqlite", 4)}, {})
    assert off == on == key(None, inputs, {})
    assert key(None, {**inputs, "code": "c2", "runtime": JudgeRuntime()}, {}) != off


def test_the_runtime_of_a_run_comes_from_its_settings_and_reaches_the_judge(tmp_path: Path):
    settings = config.Settings()
    runtime = judge_runtime(settings.pipeline, tmp_path, 3)
    assert runtime == JudgeRuntime(str(tmp_path / "verdict-cache.sqlite"), str(tmp_path / "judge-cache.sqlite"), 3)
    assert pickle.loads(pickle.dumps(runtime)) == runtime  # for the Dask workers
    off = config.Settings.model_validate({"pipeline": {"reuse_verdicts": False}})
    assert judge_runtime(off.pipeline, tmp_path, 0) == JudgeRuntime(None, str(tmp_path / "judge-cache.sqlite"), 1)
    assert make_judge(JudgeSpec(), runtime).runtime == runtime
    assert make_judge(JudgeSpec()).runtime == JudgeRuntime()  # a judge on its own: no cache, in-process


def test_a_judge_with_a_verdict_cache_uses_the_file_it_is_given(tmp_path: Path):
    cache = tmp_path / "elsewhere" / "verdicts.sqlite"
    judge = make_judge(JudgeSpec(), JudgeRuntime(verdict_cache=str(cache)))
    items = [("Paris is the capital of France.", ["Paris is the capital of France.", "Rome is in Italy."])]
    first = judge.judge_many(items)
    # "Rome is in Italy." holds no word of the claim: decided without the model, never stored
    assert cache.is_file() and judge.stats.pairs_judged == 1 and judge.stats.pairs_decided == 1
    again = make_judge(JudgeSpec(), JudgeRuntime(verdict_cache=str(cache)))
    assert again.judge_many(items) == first and again.stats.verdicts_reused == 1 and again.stats.pairs_judged == 0


def test_the_flow_takes_settings_or_a_params_path_not_both():
    from ragspan.flows.evaluate import evaluate

    with pytest.raises(ValueError, match="not both"):
        evaluate.fn(data_dir="d", run="r", out_dir="o", params_path="params.yaml", settings=config.Settings())


# --------------------------------------------------------------------------- prepare_run


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace (cwd): a copy of the sample and a params.yaml naming its run."""
    shutil.copytree(SAMPLE, tmp_path / "data")
    params = {"data": {"dir": "data", "runs": ["baseline"]}, "pipeline": {"shard_size": 20}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """What each run did: prepare_run's calls and results, every params parse (any caller),
    and the settings the flow was given."""
    seen: dict[str, list] = {"prepared": [], "parsed": [], "flow_settings": []}
    real_prepare, real_load = evaluation.prepare_run, config.load_settings

    def prepare(*args, **kwargs):
        prepared = real_prepare(*args, **kwargs)
        seen["prepared"].append(prepared)
        return prepared

    def load(*args, **kwargs):
        seen["parsed"].append(args)
        return real_load(*args, **kwargs)

    from ragspan.flows import evaluate as flow_module

    real_judge_spec = flow_module.judge_spec

    def judge_spec(params):  # the first thing the flow does with its settings
        seen["flow_settings"].append(params)
        return real_judge_spec(params)

    monkeypatch.setattr(evaluation, "prepare_run", prepare)
    monkeypatch.setattr(config, "load_settings", load)
    monkeypatch.setattr(flow_module, "load_settings", load)
    monkeypatch.setattr(flow_module, "judge_spec", judge_spec)
    return seen


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_the_command_and_the_api_prepare_the_run_alike_and_parse_the_params_once(workspace, observed):
    assert main(["evaluate", "--out", "results/cli", "--quiet", "--judge", "local"]) == 0
    cli = observed["prepared"][-1]
    assert len(observed["parsed"]) == 1  # the flow parsed nothing: it was given the settings
    assert observed["flow_settings"] == [cli.settings.judge]
    results = ragspan.evaluate("data", out="results/api")
    api = observed["prepared"][-1]
    assert len(observed["prepared"]) == 2 and len(observed["parsed"]) == 2
    assert observed["flow_settings"][-1] == api.settings.judge
    # the same choices from the same workspace, by the same code
    assert (cli.data_dir, cli.run, cli.params_file) == (api.data_dir, api.run, api.params_file) == \
        ("data", "baseline", "params.yaml")
    assert cli.settings == api.settings and cli.overrides == api.overrides == {"judge.kind": "local"}
    assert (cli.out_dir, api.out_dir) == ("results/cli", "results/api")
    assert len(cli.workspace.answers) == len(api.workspace.answers) > 0 and results.metrics["claims"] > 0


@pytest.mark.usefixtures("state_dir")
def test_a_bad_input_stops_in_prepare_run_before_any_flow(workspace, monkeypatch):
    from ragspan.flows import evaluate as flow_module

    def no_flow(*args, **kwargs):
        raise AssertionError("the flow started")

    monkeypatch.setattr(flow_module.evaluate, "with_options", no_flow)
    run_file = workspace / "data" / "runs" / "baseline.jsonl"
    run_file.write_text(run_file.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.raises(InputError):
        ragspan.evaluate("data", out="results/api")
    assert main(["evaluate", "--out", "results/cli", "--quiet"]) == 2
    assert not (workspace / "results").exists()
