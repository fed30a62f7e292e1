"""Training of the local judge's model (tasks/judges/verifier/local-4.json), reproducible
with one command: `python benchmarks/judge_model/train.py` (see README.md here).

Benchmark code, not product code: it reads the public sets in ../shared/data and needs
the `train` extra (scikit-learn, wordfreq); the product only reads the JSON it writes.
"""
