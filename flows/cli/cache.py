"""`ragspan cache stats|clear|prune`: the state dir's stores (tasks/state/_stores.py).

- `stats`: every registered store (tasks/state/_store.py `REGISTRY`) with its size — the judge
  cache (per model and prompt version too), the verdict cache, the answer store, the
  validated inputs, Prefect's step results, the corpus indexes, the kept report pieces, the
  input digests, the shard spill, and (never pruned) the demo indexes and the local Prefect
  database.
- `clear [--model M] [--prompt-version V]`: judge-cache entries; `--answers` / `--inputs` /
  `--verdicts` one other store; `--all` every cache.
- `prune [--older-than DAYS] [--max-size SIZE] [--dry-run]`: least recently used entries
  first, across the caches; without limits, params.yaml `state:` (what runs apply after
  themselves)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime


def _cache(args: argparse.Namespace):
    from ragspan.tasks.judges.cache import JudgeCache

    return JudgeCache(args.path) if args.path else JudgeCache()


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC") if ts else "-"


def _title(key: str) -> str:
    from ragspan.tasks.state import TITLES

    return TITLES[key]


def _other_stores() -> dict[str, dict]:
    """Every store but the judge cache's own detail (tasks/state/_stores.py)."""
    from ragspan.tasks.state import stats

    return stats()


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
    from ragspan.tasks.state import CACHES, KEPT, human

    print()
    print(f"{'store':<18} {'entries':>8} {'size':>10}  {'last used':<20} path")
    for key in CACHES + KEPT:
        st = stats[key]
        note = "" if st["pruned"] else "  (kept: never pruned)"
        print(f"{_title(key):<18} {st['entries']:>8} {human(st['bytes']):>10}  {_when(st['newest']):<20} "
              f"{st['path']}{note}")
    total = sum(stats[k]["bytes"] for k in CACHES)
    print(f"{'caches in total':<18} {'':>8} {human(total):>10}")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    if args.all:
        from ragspan.tasks.state import clear, human

        for store, held in clear().items():
            print(f"removed {_title(store)}: {held['entries']} entries, {human(held['bytes'])}")
        return 0
    if args.verdicts:
        from ragspan.tasks.state import clear, human

        held = clear(("verdict_cache",))["verdict_cache"]
        print(f"removed verdict cache: {held['entries']} entries, {human(held['bytes'])}")
        return 0
    if args.answers or args.inputs:
        import shutil

        from ragspan.tasks.state import clear, store_paths

        for flag, key in ((args.answers, "answer_store"), (args.inputs, "inputs")):
            if flag:
                clear((key,))  # entry by entry, each out of sight at once; then its own directory
                shutil.rmtree(store_paths()[key], ignore_errors=True)
                print(f"removed {store_paths()[key]}")
        return 0
    with _cache(args) as cache:
        n = cache.clear(model=args.model, prompt_version=args.prompt_version)
    scope = " and ".join(f"{k} {v}" for k, v in (("model", args.model), ("prompt", args.prompt_version)) if v)
    print(f"removed {n} judge-cache entr{'y' if n == 1 else 'ies'}" + (f" ({scope})" if scope else ""))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from ragspan.flows.evaluation import params_path
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.state import human, parse_size, prune

    limits = load_settings(params_path(args.params)).state
    explicit = args.older_than is not None or args.max_size is not None
    max_bytes = parse_size(args.max_size if args.max_size is not None else ("0" if explicit else limits.max_size))
    days = args.older_than if explicit else (limits.max_age_days or None)  # params: 0 = no age limit
    removed = prune(max_bytes, None if days is None else days * 86400, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for store, r in removed.items():
        print(f"{verb} {_title(store)}: {r['entries']} entries, {human(r['bytes'])}")
    limit = " and ".join(x for x in ((f"unused for {days:g} days" if days is not None else ""),
                                     (f"total {human(max_bytes)}" if max_bytes else "")) if x)
    print(f"limits: {limit or 'none'}")
    return 0


def _size(text: str) -> str:
    from ragspan.tasks.state import parse_size

    try:
        parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(subparsers) -> None:
    p = subparsers.add_parser("cache", help="inspect, clear or prune the caches under the state dir")
    sub = p.add_subparsers(dest="cache_command", required=True)
    st = sub.add_parser("stats", help="every store with its size; judge-cache entries per model and prompt version")
    st.add_argument("--json", action="store_true", help="print the statistics as JSON")
    st.set_defaults(func=cmd_stats)
    cl = sub.add_parser("clear", help="delete entries (all, or of one model / prompt version)")
    cl.add_argument("--model", help="only this judge model")
    cl.add_argument("--prompt-version", help="only this prompt: ID@VERSION (e.g. extract@1) or VERSION")
    cl.add_argument("--answers", action="store_true", help="empty the answer store instead (every answer is evaluated again)")
    cl.add_argument("--inputs", action="store_true", help="empty the validated-inputs cache instead")
    cl.add_argument("--verdicts", action="store_true",
                    help="empty the local judge's verdict cache instead (every pair is judged again)")
    cl.add_argument("--all", action="store_true", help="empty every cache: judge cache, verdict cache, answer "
                                                       "store, validated inputs, step results, corpus indexes, "
                                                       "report pieces, input digests, shard spill (of ended runs)")
    cl.set_defaults(func=cmd_clear)
    pr = sub.add_parser("prune", help="remove least recently used cache entries past an age or a total size")
    pr.add_argument("--older-than", type=float, metavar="DAYS", help="remove entries unused for DAYS days")
    pr.add_argument("--max-size", type=_size, metavar="SIZE", help="keep the caches within SIZE (e.g. 5GB, 500MB)")
    pr.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    pr.add_argument("--params", help="parameters file whose `state:` limits apply without --older-than/--max-size")
    pr.set_defaults(func=cmd_prune)
    for q in (st, cl):
        q.add_argument("--path", help="cache file (default: $RAGSPAN_HOME/judge-cache.sqlite)")
