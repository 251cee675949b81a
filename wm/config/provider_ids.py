"""Provider ids as Taskcluster writes them, and how one is written where a cloud allows less.

A provider id is Taskcluster's providerId (worker-manager's schemas: `^[a-zA-Z0-9-_]{1,38}$`):
Firefox CI names one `azure_trusted`, and the id is part of scopes
(`worker-manager:provider:<id>`) and of workers' client ids (`worker/<id>/...`), so wm takes
every id of that pattern and writes it verbatim wherever it can: the API, scopes, client ids,
EC2 and Azure tags, metrics, logs, the database.

GCE label values take only lower-case letters, digits, `_` and `-`, at most 63 characters.
There the id is escaped (`gce_label`): `_` becomes `__`, and each capital letter becomes `_`
and its lower-case letter; lower-case letters, digits and `-` stay as they are. Every escape
starts with `_` and no `_` stands alone, so two ids never share a label value (wm finds its
VMs by that label: `Foo` and `foo`, or `a_b` and `a-b`, must never read each other's), and the
value reads back to the id (`from_gce_label`). An escaped character takes two, so an id whose
escaped form is longer than 63 characters cannot be a GCE provider's (`gce_label_problem`).
Worker-manager's own GCE label (`created-by: taskcluster-wm-<id>` with `[^a-zA-Z0-9-]` made
`-`) is still written for operators' tooling, but it is neither injective nor wm's ownership.
"""

from __future__ import annotations

import re

PROVIDER_ID_PATTERN = r"^[a-zA-Z0-9-_]{1,38}$"  # Taskcluster's, character for character
GCE_LABEL_VALUE_MAX_CHARS = 63
_ESCAPE = "_"
_PROVIDER_ID = re.compile(PROVIDER_ID_PATTERN)
_GCE_LABEL = re.compile(r"(?:[a-z0-9-]|_[a-z_])+")


def is_provider_id(value: str) -> bool:
    """Whether `value` is an id Taskcluster takes as a providerId."""
    return _PROVIDER_ID.fullmatch(value) is not None


def gce_label(provider_id: str) -> str:
    """The GCE label value that stands for a provider id: injective, and read back by
    `from_gce_label`. It may be longer than GCE allows: `gce_label_problem` says so."""
    out = []
    for char in provider_id:
        if char == _ESCAPE:
            out.append(_ESCAPE * 2)
        elif char.isupper():
            out.append(_ESCAPE + char.lower())
        else:
            out.append(char)
    return "".join(out)


def from_gce_label(value: str) -> str | None:
    """The provider id a label value written by `gce_label` stands for; None for a value no
    provider id is written as."""
    if not _GCE_LABEL.fullmatch(value):
        return None
    out = []
    chars = iter(value)
    for char in chars:
        if char == _ESCAPE:
            escaped = next(chars)
            out.append(_ESCAPE if escaped == _ESCAPE else escaped.upper())
        else:
            out.append(char)
    found = "".join(out)
    return found if is_provider_id(found) else None


def gce_label_problem(provider_id: str) -> str | None:
    """Why a provider id cannot be a GCE provider's (its label would not fit), or None."""
    label = gce_label(provider_id)
    if len(label) <= GCE_LABEL_VALUE_MAX_CHARS:
        return None
    return (
        f"provider {provider_id!r} would be written in GCE labels as {label!r}, "
        f"{len(label)} characters, and GCE allows {GCE_LABEL_VALUE_MAX_CHARS}: each capital "
        "letter and `_` takes two there (README: Provider ids); choose an id with fewer of them"
    )
