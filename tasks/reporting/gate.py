"""gate: `ragspan compare A B --fail-on RULES` — the rules a CI job fails a change on.

RULES is a comma-separated list (the option may also be repeated); each rule is one of

| rule | fails when |
|---|---|
| `LABEL:Npp` | LABEL's rate got worse by more than N percentage points (`correct` worse = lower, a failure label worse = higher); `any:Npp` applies it to every judged label |
| `significant` | a judged label got worse and the paired bootstrap marks the change as outside the noise; `significant:LABEL` for one label |
| `correct-lost` | a matched claim went from `correct` in A to a failure label in B; `correct-lost:N` allows up to N such claims |
| `unsupported-chars:Npp` | the share of answer characters unsupported or contradicted (metrics.json `answer_chars`) grew by more than N percentage points |
| `chunk-split:Npp` | the chunker's share of failures (claims whose evidence a chunk boundary cut, metrics.json `chunk_split`) grew by more than N percentage points |
| `chunk-split:N` | B has more than N claims whose evidence a chunk boundary cut (`chunk-split:0`: none allowed) |

Rates are over judged claims and B is compared with A, as in the rest of `ragspan
compare`. Improvements never fail a gate. A malformed rule is a usage error (exit 2)
raised before anything is loaded; a failed gate is exit 1, each failure printed with why.
Pure functions over the dict `compare_runs` returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ragspan.tasks.core.taxonomy import FAILURE_LABELS, JUDGED_LABELS
from ragspan.tasks.errors import UsageError

RuleKind = Literal["rate", "significant", "correct_lost", "unsupported_chars", "chunk_split_share",
                   "chunk_split_count"]
_RATE = re.compile(r"^(?P<label>[a-z_]+):(?P<n>\d+(?:\.\d+)?)pp$")
_CHARS = re.compile(r"^unsupported-chars:(?P<n>\d+(?:\.\d+)?)pp$")
_SPLIT = re.compile(r"^chunk-split:(?:(?P<pp>\d+(?:\.\d+)?)pp|(?P<n>\d+))$")


class GateRuleError(UsageError, ValueError):
    """A --fail-on rule that does not parse."""


@dataclass(frozen=True)
class Rule:
    kind: RuleKind
    label: str | None = None  # None: every judged label
    limit: float = 0.0  # percentage points (rate) or claims (correct_lost)
    text: str = ""


def _label(name: str, rule: str) -> str | None:
    if name == "any":
        return None
    if name not in JUDGED_LABELS:
        raise GateRuleError(f"--fail-on {rule!r}: unknown label {name!r} (one of: any, {', '.join(JUDGED_LABELS)})")
    return name


def parse_rule(text: str) -> Rule:
    rule = text.strip()
    if m := _CHARS.match(rule):
        return Rule("unsupported_chars", None, float(m["n"]), rule)
    if rule.startswith("unsupported-chars"):
        raise GateRuleError(f"--fail-on {rule!r}: unsupported-chars takes percentage points, e.g. unsupported-chars:2pp")
    if m := _SPLIT.match(rule):
        if m["pp"] is not None:
            return Rule("chunk_split_share", None, float(m["pp"]), rule)
        return Rule("chunk_split_count", None, float(m["n"]), rule)
    if rule.startswith("chunk-split"):
        raise GateRuleError(f"--fail-on {rule!r}: chunk-split takes percentage points of the failures "
                            "(chunk-split:2pp) or a number of claims (chunk-split:0)")
    if m := _RATE.match(rule):
        return Rule("rate", _label(m["label"], rule), float(m["n"]), rule)
    head, _, arg = rule.partition(":")
    if head == "significant":
        return Rule("significant", _label(arg, rule) if arg else None, 0.0, rule)
    if head == "correct-lost":
        if arg and not arg.isdigit():
            raise GateRuleError(f"--fail-on {rule!r}: correct-lost takes a whole number of claims, e.g. correct-lost:2")
        return Rule("correct_lost", None, float(arg or 0), rule)
    raise GateRuleError(f"--fail-on {rule!r}: not a rule. Rules: LABEL:Npp (e.g. hallucination:2pp, any:5pp), "
                        "significant[:LABEL], correct-lost[:N], unsupported-chars:Npp, chunk-split:Npp|N")


def parse_rules(values: Iterable[str]) -> list[Rule]:
    """Every rule of every --fail-on value (each comma-separated)."""
    values = list(values)
    rules = [parse_rule(part) for value in values for part in value.split(",") if part.strip()]
    if not rules and values:
        raise GateRuleError("--fail-on: no rule given")
    return rules


def _worsening(label: str, delta: float) -> float:
    """How much worse B is than A for this label, in rate units (negative = better)."""
    return -delta if label == "correct" else delta


def _pp(x: float) -> str:
    return f"{x * 100:+.1f} pp"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def _rate_failures(rule: Rule, overall: list[dict]) -> list[str]:
    out = []
    for row in overall:
        if rule.label not in (None, row["label"]) or row.get("delta") is None:
            continue
        worse = _worsening(row["label"], row["delta"])
        if rule.kind == "rate" and worse * 100 > rule.limit + 1e-9:
            out.append(f"{rule.text}: {row['label']} {_pct(row['a_rate'])} → {_pct(row['b_rate'])} "
                       f"({_pp(row['delta'])}), worse by more than {rule.limit:g} pp")
        elif rule.kind == "significant" and worse > 0 and not row.get("within_noise", True):
            out.append(f"{rule.text}: {row['label']} {_pct(row['a_rate'])} → {_pct(row['b_rate'])} "
                       f"({_pp(row['delta'])}), bootstrap CI [{_pp(row['ci_low'])}, {_pp(row['ci_high'])}] "
                       "excludes 0")
    return out


def _correct_lost(rule: Rule, result: dict) -> list[str]:
    cells = [c for c in (result.get("transitions") or {}).get("changed", [])
             if c["from"] == "correct" and c["to"] in FAILURE_LABELS]
    lost = sum(c["count"] for c in cells)
    if lost <= rule.limit:
        return []
    how = ", ".join(f"{c['count']} → {c['to']}" for c in cells)
    plural = "s" if lost != 1 else ""
    why = f"{lost} claim{plural} went from correct to a failure ({how}), more than the {rule.limit:g} allowed"
    return [f"{rule.text}: {why}"]


def _unsupported_chars(rule: Rule, result: dict) -> list[str]:
    row = (result.get("answer_chars") or {}).get("unsupported_or_contradicted")
    if row is None or row["delta"] is None:
        return [(f"{rule.text}: no answer character shares on both sides (results written before ragspan "
                 "measured them): re-run both")]
    if row["delta"] * 100 <= rule.limit + 1e-9:
        return []
    return [(f"{rule.text}: answer characters unsupported or contradicted {_pct(row['a'])} → {_pct(row['b'])} "
             f"({_pp(row['delta'])}), worse by more than {rule.limit:g} pp")]


def _chunk_split(rule: Rule, result: dict) -> list[str]:
    row = result.get("chunk_split")
    if not row:
        return [f"{rule.text}: no chunk_split figures in this comparison: re-run compare with this ragspan"]
    if rule.kind == "chunk_split_count":
        if row["b_claims"] <= rule.limit:
            return []
        return [(f"{rule.text}: {row['b_claims']} claims in B have their evidence cut by a chunk boundary "
                f"(A: {row['a_claims']}), more than the {rule.limit:g} allowed")]
    if row["delta"] is None or row["delta"] * 100 <= rule.limit + 1e-9:
        return []
    return [(f"{rule.text}: the chunker's share of failures {_pct(row['a'])} → {_pct(row['b'])} "
            f"({_pp(row['delta'])}), worse by more than {rule.limit:g} pp")]


def gate_failures(result: dict, rules: Iterable[Rule]) -> list[str]:
    """Why the comparison fails the rules (empty: it passes)."""
    out: list[str] = []
    for rule in rules:
        if rule.kind == "correct_lost":
            out += _correct_lost(rule, result)
        elif rule.kind == "unsupported_chars":
            out += _unsupported_chars(rule, result)
        elif rule.kind in ("chunk_split_share", "chunk_split_count"):
            out += _chunk_split(rule, result)
        else:
            out += _rate_failures(rule, result.get("overall") or [])
    return out


def gate_summary(rules: list[Rule], failures: list[str]) -> dict:
    return {"rules": [r.text for r in rules], "passed": not failures, "failures": failures}


def gate_markdown(gate: dict) -> str:
    rules = ", ".join(f"`{r}`" for r in gate["rules"])
    if gate["passed"]:
        return f"\n### Gate: passed\n\nNo failure under {rules}.\n"
    lines = ["\n### Gate: **failed**\n", f"Rules: {rules}\n"]
    lines += [f"- {f.replace('|', '/')}" for f in gate["failures"]]
    return "\n".join(lines) + "\n"


def gate_text(gate: dict) -> str:
    if gate["passed"]:
        return f"gate passed ({', '.join(gate['rules'])})\n"
    return "gate FAILED:\n" + "".join(f"  {f}\n" for f in gate["failures"])
