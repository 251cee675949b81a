"""Reading a Procfile as a platform does."""

from __future__ import annotations

from pathlib import Path

import pytest

from wmsim.demo.supervisor import ProcfileEntry, ProcfileError, parse_procfile

REPO = Path(__file__).resolve().parents[2]


def test_the_projects_procfile_has_every_process_type():
    entries = parse_procfile((REPO / "Procfile").read_text())
    assert [e.name for e in entries] == [
        "release",
        "provisioner",
        "scanner-aws",
        "scanner-gcp",
        "scanner-azure",
        "web",
    ]
    assert entries[0].command == "exec wm db upgrade"
    # /bin/sh runs each entry (honcho, foreman): without `exec`, a shell such as dash stays
    # in between, dies of the runner's SIGTERM and reports -15 for a process that exited 0.
    assert all(e.command.startswith("exec wm ") for e in entries)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("web: wm run web\n", [ProcfileEntry("web", "wm run web")]),
        ("# comment\n\nweb:   wm run web   # serves $PORT\n", [ProcfileEntry("web", "wm run web")]),
        ("a: x: y\n", [ProcfileEntry("a", "x: y")]),
    ],
)
def test_lines_are_name_colon_command(text, expected):
    assert parse_procfile(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("web wm run web\n", "line 1: expected `name: command`"),
        ("web:\n", "line 1: expected"),
        ("we b: x\n", "line 1: expected"),
        ("web: a\nweb: b\n", "line 2: process 'web' appears twice"),
    ],
)
def test_bad_lines_are_named(text, message):
    with pytest.raises(ProcfileError, match=message):
        parse_procfile(text)
