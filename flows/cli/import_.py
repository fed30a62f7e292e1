"""`ragspan import FORMAT FILE --corpus CORPUS --out DIR`: a data directory from a RAGAS
dataset, OpenInference spans or any table (tasks/inputs/imports/), and the report of what
could not be mapped (DIR/import-report.json)."""

from __future__ import annotations

import argparse
import json

# constants: nothing heavy is imported
from ragspan.tasks.inputs.imports import DEFAULT_ID_KEYS, FORMATS

_SHOWN = 20  # unlocated contexts printed; the report lists all


def cmd_import(args: argparse.Namespace) -> int:
    from ragspan.tasks.inputs.imports.mapping import parse_map
    from ragspan.tasks.inputs.imports.workspace import REPORT_FILE, import_workspace

    mapping = parse_map(args.map) if args.format == "mapping" else None
    if args.map and args.format != "mapping":
        from ragspan.tasks.errors import UsageError

        raise UsageError("--map is for the mapping format only")
    report = import_workspace(args.format, args.file, args.corpus, args.out, args.run, mapping, args.doc_id_key)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(f"imported {report['answers']} answers with {report['contexts']} contexts into {args.out} "
          f"(run {report['run']!r}, {report['documents']} documents)")
    print(f"  contexts located: {report['located_exact']} exact, {report['located_whitespace_loose']} "
          f"whitespace-loose; not located: {report['not_located']}")
    if report["located_by"]:
        print("  located by: " + ", ".join(f"{via} {n}" for via, n in report["located_by"].items()))
    for item in report["not_located_contexts"][:_SHOWN]:
        print(f"  not located: {item['source']} (question {item['question_id']}), rank {item['rank']}: "
              f"{item['reason']}: {item['text']!r}")
    if report["not_located"] > _SHOWN:
        print(f"  … and {report['not_located'] - _SHOWN} more")
    for s in report["skipped"]:
        print(f"  skipped {s['source']}: {s['reason']}")
    if report["fields_not_mapped"]:
        print("  fields not mapped: " + ", ".join(f"{k} ({n})" for k, n in report["fields_not_mapped"].items()))
    for note in report["notes"]:
        print(f"  note: {note}")
    print(f"report: {args.out}/{REPORT_FILE}\nnext: ragspan validate --data {args.out} && "
          f"ragspan evaluate --data {args.out} --run {report['run']}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "import", help="a data directory from RAGAS datasets, OpenInference traces or any table",
        description="Write a data directory (corpus, questions, runs/RUN.jsonl) from where traces live, "
                    "locating every context in the corpus; what could not be mapped is listed in "
                    "OUT/import-report.json. See docs/inputs.md.")
    p.add_argument("format", choices=FORMATS, metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    p.add_argument("file", metavar="FILE", help="the dataset, span export or table to import")
    p.add_argument("--corpus", required=True,
                   help="the documents: corpus.jsonl/.csv/.parquet, a data directory, or a folder of .txt/.md")
    p.add_argument("--out", required=True, help="the data directory to write (must not exist or be empty)")
    p.add_argument("--run", help="run name (default: FILE's name)")
    p.add_argument("--map", nargs="+", default=[], metavar="FIELD=COLUMN",
                   help="mapping format: question=COL answer=COL contexts=COL, optional question_id=, "
                        "reference=, doc_ids=, scores=")
    p.add_argument("--doc-id-key", metavar="KEY",
                   help="openinference: the document metadata key holding the corpus doc_id, used when a "
                        "document has no document.id the corpus knows (default: tried in order: "
                        f"{', '.join(DEFAULT_ID_KEYS)})")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=cmd_import)
