"""Sections printed at the end of a run, after the tests (pytest's terminal summary): what some
tests measured, for a reader of CI's log. A test adds its lines under a section's name; under
pytest-xdist each worker sends its sections to the controller when it finishes, which prints
them all (tests/conftest.py)."""

from __future__ import annotations

from collections import defaultdict

SECTIONS: defaultdict[str, list[str]] = defaultdict(list)
WORKER_OUTPUT_KEY = "summary_sections"  # a pytest-xdist worker's sections, sent to the controller
