"""`ragspan cache stats` and `ragspan cache clear [--model M] [--prompt-version V]`:
inspect and prune the judge cache (tasks/judges/cache.py) under the ragspan state dir.
`ragspan cache clear --answers` / `--inputs` empty the answer store (tasks/io/answer_store.py) and
the validated-inputs cache (tasks/io/load.py) instead; `stats` reports their size too."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from ragspan.tasks.state import state_dir


def _cache(args: argparse.Namespace):
    from ragspan.tasks.judges.cache import JudgeCache

    return JudgeCache(args.path) if args.path else JudgeCache()


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC") if ts else "-"


def _other_stores() -> dict[str, dict]:
    """Size of the answer store and the validated-inputs cache (docs/operations.md)."""

    out = {}
    for name, sub in (("answer_store", "answers"), ("inputs", "inputs")):
        root = state_dir() / sub
        files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
        entries = [p for p in root.iterdir() if not p.name.startswith(".")] if root.is_dir() else []
        out[name] = {"path": str(root), "entries": len(entries), "bytes": sum(p.stat().st_size for p in files)}
    return out


def cmd_stats(args: argparse.Namespace) -> int:
    with _cache(args) as cache:
        stats = cache.stats()
    stats.update(_other_stores())
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    print(f"judge cache: {stats['path']} ({stats['bytes'] / 1e6:.2f} MB)")
    print(f"entries: {stats['entries']} · tokens stored: {stats['prompt_tokens']} prompt, "
          f"{stats['completion_tokens']} completion")
    for g in stats["groups"]:
        print(f"  {g['model']} @ {g['endpoint'] or '-'} · {g['prompt']}: {g['entries']} entries, "
              f"{g['prompt_tokens']}+{g['completion_tokens']} tokens, {_when(g['first'])} → {_when(g['last'])}")
    for label, key in (("answer store", "answer_store"), ("validated inputs", "inputs")):
        st = stats[key]
        print(f"{label}: {st['path']} ({st['entries']} entries, {st['bytes'] / 1e6:.2f} MB)")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    if args.answers or args.inputs:
        import shutil


        for flag, sub in ((args.answers, "answers"), (args.inputs, "inputs")):
            if flag:
                shutil.rmtree(state_dir() / sub, ignore_errors=True)
                print(f"removed {state_dir() / sub}")
        return 0
    with _cache(args) as cache:
        n = cache.clear(model=args.model, prompt_version=args.prompt_version)
    scope = " and ".join(f"{k} {v}" for k, v in (("model", args.model), ("prompt", args.prompt_version)) if v)
    print(f"removed {n} judge-cache entr{'y' if n == 1 else 'ies'}" + (f" ({scope})" if scope else ""))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("cache", help="inspect or clear the judge cache")
    sub = p.add_subparsers(dest="cache_command", required=True)
    st = sub.add_parser("stats", help="entries and tokens per model and prompt version")
    st.add_argument("--json", action="store_true", help="print the statistics as JSON")
    st.set_defaults(func=cmd_stats)
    cl = sub.add_parser("clear", help="delete entries (all, or of one model / prompt version)")
    cl.add_argument("--model", help="only this judge model")
    cl.add_argument("--prompt-version", help="only this prompt: ID@VERSION (e.g. extract@1) or VERSION")
    cl.add_argument("--answers", action="store_true", help="empty the answer store instead (every answer is evaluated again)")
    cl.add_argument("--inputs", action="store_true", help="empty the validated-inputs cache instead")
    cl.set_defaults(func=cmd_clear)
    for q in (st, cl):
        q.add_argument("--path", help="cache file (default: $RAGSPAN_HOME/judge-cache.sqlite)")
