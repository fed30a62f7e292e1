"""Answer spans: the marks model fitted and measured (docs/answer-spans.md)."""
