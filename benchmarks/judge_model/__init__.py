"""Word rarity for the local judge: `python -m benchmarks.judge_model.build_zipf` rebuilds
tasks/judges/verifier/word_zipf.json from the `wordfreq` package (see README.md here)."""
