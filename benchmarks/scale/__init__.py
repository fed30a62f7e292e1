"""Speed and memory at 100k chunks x 10k answers (BENCHMARKS.md)."""
