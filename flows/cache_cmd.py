"""`ragspan cache stats` and `ragspan cache clear [--model M] [--prompt-version V]`:
inspect and prune the judge cache (tasks/judges/cache.py) under the ragspan state dir."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime


def _cache(args: argparse.Namespace):
    from ragspan.tasks.judges.cache import JudgeCache

    return JudgeCache(args.path) if args.path else JudgeCache()


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC") if ts else "-"


def cmd_stats(args: argparse.Namespace) -> int:
    with _cache(args) as cache:
        stats = cache.stats()
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    print(f"judge cache: {stats['path']} ({stats['bytes'] / 1e6:.2f} MB)")
    print(f"entries: {stats['entries']} · tokens stored: {stats['prompt_tokens']} prompt, "
          f"{stats['completion_tokens']} completion")
    for g in stats["groups"]:
        print(f"  {g['model']} @ {g['endpoint'] or '-'} · {g['prompt']}: {g['entries']} entries, "
              f"{g['prompt_tokens']}+{g['completion_tokens']} tokens, {_when(g['first'])} → {_when(g['last'])}")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    with _cache(args) as cache:
        n = cache.clear(model=args.model, prompt_version=args.prompt_version)
    scope = " and ".join(f"{k} {v}" for k, v in (("model", args.model), ("prompt", args.prompt_version)) if v)
    print(f"removed {n} judge-cache entr{'y' if n == 1 else 'ies'}" + (f" ({scope})" if scope else ""))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("cache", help="inspect or clear the judge cache")
    sub = p.add_subparsers(dest="cache_command", required=True)
    st = sub.add_parser("stats", help="entries and tokens per model and prompt version")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_stats)
    cl = sub.add_parser("clear", help="delete entries (all, or of one model / prompt version)")
    cl.add_argument("--model", help="only this judge model")
    cl.add_argument("--prompt-version", help="only this prompt: ID@VERSION (e.g. extract@1) or VERSION")
    cl.set_defaults(func=cmd_clear)
    for q in (st, cl):
        q.add_argument("--path", help="cache file (default: $RAGSPAN_HOME/judge-cache.sqlite)")
