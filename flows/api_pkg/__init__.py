"""ragspan: character-level diagnosis of RAG answers — the Python API (docs/api.md).

    import ragspan
    results = ragspan.evaluate("data/sample", "baseline", out="results/baseline")
    results.diagnoses            # one row per claim: label, deciding evidence, reason
    ragspan.compare(base, results, fail_on="significant").passed

This file is the package `ragspan` itself (pyproject maps it from flows/api_pkg/, since
the repository's top level holds only tasks/ and flows/); the code is flows/api.py.
Names load on first use (PEP 562), so importing `ragspan` — which every `ragspan.tasks`
and `ragspan.flows` import does first — stays as cheap as the command line needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragspan.flows.api import Comparison, Results, compare, evaluate, load_results
    from ragspan.flows.evaluate import evaluate as evaluate_flow
    from ragspan.tasks.errors import InputError, RagspanError

__all__ = ["Comparison", "InputError", "RagspanError", "Results", "compare", "evaluate",
           "evaluate_flow", "load_results"]

# public name -> (module, attribute)
_WHERE: dict[str, tuple[str, str]] = {
    **{name: ("ragspan.flows.api", name) for name in ("Comparison", "Results", "compare", "evaluate",
                                                      "load_results")},
    "evaluate_flow": ("ragspan.flows.evaluate", "evaluate"),  # the Prefect flow, for subflows
    "InputError": ("ragspan.tasks.errors", "InputError"),
    "RagspanError": ("ragspan.tasks.errors", "RagspanError"),
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("ragspan")
    if name not in _WHERE:
        raise AttributeError(f"module 'ragspan' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
