"""ragspan's benchmarks: a package, so each one runs from the repository root as
`.venv/bin/python -m benchmarks.<name>` (e.g. `-m benchmarks.lodo.run`) and imports the
others by their full name (`benchmarks.scale.generate`). They read their data through
`training.readers` and the LODO benchmark fits with `training.local_judge`: benchmarks import
training, never the reverse. BENCHMARKS.md lists them: what each measures, its command, its
latest figures."""
