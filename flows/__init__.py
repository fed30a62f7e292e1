"""ragspan flows: wiring only. The `ragspan` CLI lives here."""
