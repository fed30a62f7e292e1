"""Run ContextTrace 1.3's offline claim verifier over JSONL items (baseline only).

Runs under the ContextTrace venv's python, never the project's (it imports no ragspan):

    benchmarks/.venv-contexttrace/bin/python benchmarks/baselines/contexttrace_verify.py \
        [items.jsonl] [--mode lexical|semantic|local_ml] [--details] > out.jsonl

Input, one JSON object a line (stdin when no file is given):
    {"id": "...", "question": "...", "claim": "...", "passages": ["...", ...]}
Output, one line per input line, in the same order:
    {"id": "...", "supported": true|false, "score": float|null}

Per item, one call of `contexttrace.verify.verify_trace(RAGTrace(query=question,
answer=claim, contexts=[TraceContext(id="p0", text=passage0), ...]), mode=MODE)`:
the frozen v1 verifier (`semantic_v1_calibrated`, profile `full_v1`), rule-based, with no
network, model or LLM in the offline modes accepted here. ContextTrace splits the
answer (here the one claim) into its own sub-claims and gives each a `verdict` in
{supported, partially_supported, unsupported, contradicted, unverifiable}, a
`confidence` (in the verdict, whatever the verdict is) and a `best_score` (0-1 overlap
of the sub-claim with its best evidence span).

Mapping: `supported` is true only when ContextTrace derived at least one sub-claim and
every one of them is `supported`; `score` is the smallest `best_score` over the
sub-claims (the weakest one), null when it derived none (e.g. a claim its rules treat as
filler). The score is an evidence-overlap figure, not a support probability: a
contradicted sub-claim can score 1.0 (a negated copy of the passage), so threshold on
`supported`, not on `score`. `--details` adds each sub-claim's text and verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import IO, Any

from contexttrace import __version__
from contexttrace.verify import RAGTrace, TraceContext, verify_trace

EXPECTED_VERSION = "1.3.0"
OFFLINE_MODES = ("lexical", "semantic", "local_ml")  # never "judge" or "nli"


def verify_item(item: dict[str, Any], *, mode: str, details: bool) -> dict[str, Any]:
    passages = [str(p) for p in item.get("passages") or [] if str(p).strip()]
    trace = RAGTrace(
        query=str(item.get("question") or ""),
        answer=str(item["claim"]),
        contexts=[TraceContext(id=f"p{i}", text=text) for i, text in enumerate(passages)],
    )
    result = verify_trace(trace, mode=mode)
    subclaims = result["claims"]
    supported = bool(subclaims) and all(c["verdict"] == "supported" for c in subclaims)
    score = min(float(c["best_score"]) for c in subclaims) if subclaims else None
    out: dict[str, Any] = {"id": item["id"], "supported": supported, "score": score}
    if details:
        out["subclaims"] = [
            {
                "claim": c["claim"],
                "verdict": c["verdict"],
                "best_score": c["best_score"],
                "confidence": c["confidence"],
            }
            for c in subclaims
        ]
    return out


def run(lines: IO[str], out: IO[str], *, mode: str, details: bool) -> int:
    n = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        item = json.loads(line)
        try:
            row = verify_item(item, mode=mode, details=details)
        except Exception as exc:  # name the item, then fail the whole run loudly
            raise RuntimeError(
                f"ContextTrace failed on line {lineno} (id={item.get('id')!r}): {exc}"
            ) from exc
        out.write(json.dumps(row) + "\n")
        n += 1
    out.flush()
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", help="JSONL file (default: stdin)")
    parser.add_argument("--mode", choices=OFFLINE_MODES, default="lexical")
    parser.add_argument("--details", action="store_true", help="add per-sub-claim verdicts")
    args = parser.parse_args(argv)
    # Keep local_ml on its built-in hash embedding: no configured model is ever loaded.
    os.environ.pop("CONTEXTTRACE_LOCAL_ML_MODEL_PATH", None)
    if __version__ != EXPECTED_VERSION:
        parser.error(f"contexttrace {EXPECTED_VERSION} expected, found {__version__}")
    if args.input:
        with open(args.input, encoding="utf-8") as fh:
            run(fh, sys.stdout, mode=args.mode, details=args.details)
    else:
        run(sys.stdin, sys.stdout, mode=args.mode, details=args.details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
