"""The reuse room: what an evaluation keeps to skip work next time and to hold memory down —
the answer store (answers evaluated before, in the same context), the pre-search state
(claims and retrieved-passage verdicts kept while their documents are unchanged), and
finished shards spilled to disk until the run's tables are assembled."""
