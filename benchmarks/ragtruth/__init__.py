"""RAGTruth dev: the local judge's answer spans against the characters people marked (issue 41).

    .venv/bin/python -m benchmarks.ragtruth [--sets qa_dev,data2txt] [--split] [--limit N]
        [--json PATH] [--keep DIR]

data.py builds a ragspan data directory from `ragtruth_dev` (read at run time, never
copied), metrics.py holds the scoring and the two baselines, run.py runs `ragspan evaluate`
and prints the tables.
"""
