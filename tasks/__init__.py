"""ragspan pipeline steps: one module per step, pure functions plus a thin Prefect task."""
