"""ragspan's benchmarks: a package, so each one runs from the repository root as
`.venv/bin/python -m benchmarks.<name>` (e.g. `-m benchmarks.lodo.run`) and imports the
others by their full name (`benchmarks._data`, `benchmarks.scale.generate`). BENCHMARKS.md
lists them with what they measured."""
