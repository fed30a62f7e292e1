"""ragspan's training room: the scripts that fit the local judge's shipped model files
(tasks/judges/verifier/*.json). Each runs from the repository root as
`.venv/bin/python -m training.<name>` after `pip install -e '.[train]'`; README.md says
what each fits, from which data, and which file it writes. The benchmarks that measure
these models stay in `benchmarks/` and import the fitting code and the data readers
(`training.readers`) from here; nothing here imports `benchmarks`."""
