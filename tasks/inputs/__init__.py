"""The inputs room: reading and validating what the user gives — the data directory
(`load/`: corpus, chunks, questions, run files, into a validated `Workspace`; the corpus
store under the state dir), the validated-inputs cache (`validated_cache.py`), and
`ragspan import` (`imports/`: traces and other tools' exports turned into a data
directory). Nothing here decides a label: editing it never invalidates a step cache."""
