"""The corpus side of a run alone: what preparing a snapshot costs at a given size.

    .venv/bin/python -m benchmarks.scale.prepare WS [RUN]      # RAGSPAN_HOME: a fresh state dir; RUN: scale

In one process, as the flow does before its shards: the inputs loaded and checked
(`checked_workspace`: the corpus store written, the chunk table and the run read), the
document hashes (`Workspace.document_hashes`), the corpus index built (`index_dir_for`).
Prints one JSON line: each phase's wall seconds, the process's CPU seconds, and its
VmHWM / VmRSS / RssAnon / RssFile (MB) after loading and at the end. Run it under
`/usr/bin/time -v` for the peak RSS with the tokenising workers. Used for the 10M-chunk
figures (benchmarks/results/HISTORY.md, session 9), where a whole cold run did not fit the session.
"""

from __future__ import annotations

import json
import sys
import time


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) // 1024
    return out


def main() -> None:
    from ragspan.tasks.config import load_settings, state_dir
    from ragspan.tasks.inputs.load import checked_workspace
    from ragspan.tasks.steps.corpus_search import index_dir_for

    t0, c0 = time.time(), time.process_time()
    out: dict = {"ws": sys.argv[1]}
    ws = checked_workspace(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "scale", load_settings(None))
    out["load_s"], out["after_load"] = round(time.time() - t0, 1), _status()
    t1 = time.time()
    documents = ws.document_hashes
    out["dochash_s"] = round(time.time() - t1, 1)
    t2 = time.time()
    index_dir_for(ws, state_dir() / "index")
    out["index_s"] = round(time.time() - t2, 1)
    out.update(total_s=round(time.time() - t0, 1), cpu_s_main=round(time.process_time() - c0, 1), end=_status(),
               chunks=len(ws.chunks), documents=len(documents))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":  # the index's tokenising workers are spawned: they import this module
    main()
