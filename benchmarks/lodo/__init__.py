"""Leave-one-dataset-out benchmark of the claim verifier (the labelled sets: sets.py)."""
