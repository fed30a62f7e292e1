"""Versioned prompt files: `tasks/judges/prompts/<id>.md`.

Each file opens with a small YAML front matter (`id`, `version`, `description`) and
has sections introduced by a line `# <name>` — `system`, `user`, optionally `reask`.
Placeholders are `string.Template` style (`$claim`): values are inserted verbatim,
never re-parsed, so passages may contain `$` or braces.

Bump `version` whenever a change can change a judge's answers: the version is stamped
on every output (JudgeSpec.prompt_version → metrics.json manifest) and is part of every
judge-cache key. The cache key also hashes the exact messages sent, so an edit without
a bump never serves stale answers — but only a bump makes the change visible in reports.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

import yaml
from ragspan.tasks.errors import PromptError

PROMPTS_DIR = Path(__file__).resolve().parent
_SECTION = re.compile(r"^# (system|user|reask)[ \t]*$", re.MULTILINE)
# Placeholders each section must use: a prompt that lost one would silently send less.
REQUIRED_PLACEHOLDERS: dict[str, dict[str, set[str]]] = {
    "decompose": {"user": {"answer", "question"}},
    "extract": {"user": {"claim", "question", "passages"}, "reask": {"problems"}},
}


@dataclass(frozen=True)
class Prompt:
    id: str
    version: str
    description: str
    system: str
    user: str
    reask: str | None
    sha256: str  # of the whole file: recorded next to cache entries

    @property
    def tag(self) -> str:
        """`id@version`, e.g. `extract@1`."""
        return f"{self.id}@{self.version}"

    def render(self, section: str, **values: str) -> str:
        text = getattr(self, section)
        if text is None:
            raise PromptError(f"prompt {self.tag} has no `# {section}` section")
        return Template(text).substitute(values)


def parse_prompt(text: str, source: str = "<prompt>") -> Prompt:
    if not text.startswith("---\n"):
        raise PromptError(f"{source}: must start with a `---` front matter")
    try:
        head, body = text[4:].split("\n---\n", 1)
        meta = yaml.safe_load(head) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise PromptError(f"{source}: unreadable front matter: {exc}") from exc
    for key in ("id", "version"):
        if not str(meta.get(key, "")).strip():
            raise PromptError(f"{source}: front matter needs `{key}`")
    parts = _SECTION.split(body)
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    for name in ("system", "user"):
        if not sections.get(name):
            raise PromptError(f"{source}: missing or empty `# {name}` section")
    prompt = Prompt(
        id=str(meta["id"]), version=str(meta["version"]), description=str(meta.get("description", "")),
        system=sections["system"], user=sections["user"], reask=sections.get("reask") or None,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
    for section, names in REQUIRED_PLACEHOLDERS.get(prompt.id, {}).items():
        used = {m.group("named") or m.group("braced") for m in Template.pattern.finditer(getattr(prompt, section) or "")}
        if missing := names - used:
            raise PromptError(f"{source}: `# {section}` lost placeholder(s) {sorted(missing)}")
    return prompt


@cache
def load_prompt(prompt_id: str, directory: str | None = None) -> Prompt:
    path = Path(directory or PROMPTS_DIR) / f"{prompt_id}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompt: {exc}") from exc
    prompt = parse_prompt(text, str(path))
    if prompt.id != prompt_id:
        raise PromptError(f"{path}: front matter id {prompt.id!r} does not match the file name")
    return prompt


def prompt_version(*prompt_ids: str) -> str:
    """The version stamp of a judge that uses these prompts: `decompose@1+extract@1`."""
    return "+".join(load_prompt(p).tag for p in prompt_ids)
