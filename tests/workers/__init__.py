"""Programs the tests run as separate OS processes (``python -m tests.workers.<name>``)."""
