"""The readers of the labelled data sets, shared by the training scripts and the benchmarks.

Read-only from `RAGSPAN_BENCH_DATA` (default `../shared/data`, beside the repository), never
copied into it. `qa`: XQuAD and ClapNQ as documents, chunks and one-sentence answers;
`claims`: WiCE and Factcheck-GPT as claim cases; `lodo_sets`: the eight sets of the
leave-one-dataset-out benchmark and of the local judge's fit; `wice_words`: WiCE's word-level
gold and the word score of answer-span marks. Imports go one way: `benchmarks` imports
`training`, never the reverse (tests/test_repo_layout.py)."""
