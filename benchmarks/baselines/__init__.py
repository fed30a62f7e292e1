"""Third-party verifiers run as baselines next to ragspan's judges, for benchmarks only.

Each baseline lives in its own venv under benchmarks/ (git-ignored), installed by a script
here, and is driven through a subprocess, so none of them is ever a ragspan dependency or
importable from the project venv. ContextTrace 1.3 (offline, rule-based claim verifier):
run benchmarks/baselines/install-contexttrace, then use baselines.contexttrace.
"""
