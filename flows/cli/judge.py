"""`ragspan judge check --base-url URL --model M [--data D --run R]`: a doctor for an
OpenAI-compatible endpoint (tasks/judges/doctor.py). Exit 0 when it can serve as the
judge, 1 when it cannot."""

from __future__ import annotations

import argparse
import json

from ragspan.flows.evaluation import params_path


def cmd_check(args: argparse.Namespace) -> int:
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.judges.doctor import check_endpoint, run_estimate, suggested_settings
    from ragspan.tasks.judges.openai_options import openai_spec

    overrides = {"judge.kind": "openai", "judge.model": args.model, "judge.base_url": args.base_url}
    settings = load_settings(params_path(args.params), {k: v for k, v in overrides.items() if v})
    spec = openai_spec(settings.judge)  # no model, a bad URL or no key: a ConfigError here
    report = check_endpoint(spec, timeout=settings.judge.timeout_s)
    if report.ok and args.data:
        from ragspan.tasks.inputs.load import checked_workspace
        from ragspan.tasks.tools.estimate import judge_call_estimate

        ws = checked_workspace(args.data, args.run, settings)
        calls = judge_call_estimate(ws.answers, ws.retrieved, ws.questions, settings)
        report.estimate = run_estimate(report, calls, settings.judge.max_concurrency,
                                       settings.judge.price_per_1k_prompt, settings.judge.price_per_1k_completion)
    flags, params = suggested_settings(report)
    if args.json:
        print(json.dumps(report.as_dict() | {"flags": flags, "params": params}, indent=2))
        return 0 if report.ok else 1
    _print(report, flags, params)
    return 0 if report.ok else 1


def _mark(ok: bool | None) -> str:
    return {True: "ok  ", False: "FAIL", None: "-   "}[ok]


def _print(report, flags: str, params: str) -> None:
    print(f"judge check: {report.model} at {report.endpoint}")
    print(f"  {_mark(report.reachable)} reachable" + ("" if report.reachable else f" — {report.problems[0]}"))
    if report.reachable:
        listed = report.models_listed
        print(f"  {_mark(report.model_listed)} model listed"
              + (" (the server lists no models)" if listed is None else f" ({', '.join(listed) or 'none'})"))
    for mode, p in report.modes.items():
        print(f"  {_mark(p.ok)} output mode {mode}: {p.detail} ({p.latency_s:.2f} s)")
    for name, p in (("decomposition", report.decomposition), ("verdict", report.verdict)):
        if p is not None:
            print(f"  {_mark(p.ok)} one {name}: {p.detail}; {p.latency_s:.2f} s, "
                  f"{p.prompt_tokens} prompt + {p.completion_tokens} completion tokens")
    if report.estimate:
        e = report.estimate
        print(f"  estimate for the run: at most {e['calls_at_most']} calls, ~{e['prompt_tokens']} prompt + "
              f"{e['completion_tokens']} completion tokens, ~{e['minutes']} min"
              + (f", ~${e['cost']}" if e["cost"] is not None else " (set judge.price_per_1k_* for a cost)"))
    for problem in report.problems[1 if not report.reachable else 0:]:
        print(f"  problem: {problem}")
    if report.ok:
        print(f"\nusable as the judge (output mode {report.best_mode}, remembered for later runs). Use:\n"
              f"  ragspan evaluate {flags}\nor in params.yaml:\n"
              + "\n".join("  " + line for line in params.splitlines()))
    else:
        print("\nnot usable as the judge: see the FAIL lines above")


def register(sub) -> None:
    judge = sub.add_parser("judge", help="work with the LLM judge's endpoint")
    jsub = judge.add_subparsers(dest="judge_command", required=True)
    check = jsub.add_parser("check", help="can this OpenAI-compatible endpoint serve as the judge? (exit 1 if not)")
    check.add_argument("--base-url", help="the endpoint, e.g. http://127.0.0.1:8080/v1 (default: params judge.base_url)")
    check.add_argument("--model", help="the model name (default: params judge.model)")
    check.add_argument("--data", help="also estimate the calls, tokens and time of a run on this workspace")
    check.add_argument("--run", help="with --data: the run to estimate")
    check.add_argument("--params", help="parameters file (default: ./params.yaml if present)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(func=cmd_check)
