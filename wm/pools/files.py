"""Reading worker pool definition files (`wm pools apply`): JSON or YAML, one or many each.

A file holds a JSON object, a JSON list of objects, or YAML documents (`---`) each an object
or a list of objects. Every object is a definition `{workerPoolId, providerId, description,
owner, emailOnError, config}`, the form tc-admin and the public config repositories keep. This
module only reads: problems come back as data, each naming the file, the definition's number
in the file and its line; wm.pools.definition raises them and checks what was read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from wm.pools.json_check import is_number, key_path, where

_YAML_SUFFIXES = ("yaml", "yml")


@dataclass(frozen=True)
class DefinitionsRead:
    definitions: list[tuple[str, dict[str, Any]]]  # (workerPoolId, createWorkerPool body)
    problems: list[str]


class _YamlLoader(yaml.SafeLoader):
    """YAML without its timestamp type: an unquoted date stays the string JSON would hold."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _Unreadable(Exception):
    """The file is not JSON or YAML; the message says where."""


def read_definitions(text: str, source: str) -> DefinitionsRead:
    """The definitions of one file, in file order; empty YAML documents are skipped."""
    text = text.removeprefix("\ufeff")
    try:
        found = _json_values(text, source) if _is_json(text, source) else _yaml_values(text)
    except _Unreadable as exc:
        return DefinitionsRead([], [f"{source}: {exc}"])
    definitions, problems = [], []
    seen: dict[str, int] = {}
    for number, (line, document) in enumerate(found, start=1):
        at = f"{source}: document {number}" + (f" (line {line})" if line else "")
        trouble = _document_problems(document)
        pool_id = document.get("workerPoolId") if not trouble else None
        if pool_id in seen:
            trouble.append(f"workerPoolId: {pool_id} is also defined by document {seen[pool_id]}")
        problems += [f"{at}: {problem}" for problem in trouble]
        if not trouble:
            seen[pool_id] = number
            definitions.append(
                (pool_id, {k: v for k, v in document.items() if k != "workerPoolId"})
            )
    return DefinitionsRead(definitions, problems)


def _is_json(text: str, source: str) -> bool:
    """By the file's suffix; without one that says, by its first character."""
    suffix = source.lower().rpartition(".")[2]
    if suffix in _YAML_SUFFIXES:
        return False
    return suffix == "json" or text.lstrip()[:1] in ("{", "[")


def _json_values(text: str, source: str) -> list[tuple[int | None, Any]]:
    def refuse(name: str) -> Any:
        raise _Unreadable(f"{name} is not a JSON value")

    try:
        value = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(value, list):
        return [(_first_line(text), value)]
    return list(zip(_json_item_lines(text), value, strict=True))


def _first_line(text: str) -> int:
    return text[: len(text) - len(text.lstrip())].count("\n") + 1


def _json_item_lines(text: str) -> list[int]:
    """The line each item of a (valid) top-level JSON array starts on."""
    decoder, lines = json.JSONDecoder(), []
    position = text.index("[") + 1
    while True:
        position = _skip_json_space(text, position)
        if text[position] == "]":
            return lines
        lines.append(text.count("\n", 0, position) + 1)
        _, position = decoder.raw_decode(text, position)
        position = _skip_json_space(text, position)
        if text[position] == ",":
            position += 1


def _skip_json_space(text: str, position: int) -> int:
    while text[position] in " \t\r\n":
        position += 1
    return position


def _yaml_values(text: str) -> list[tuple[int | None, Any]]:
    loader = _YamlLoader(text)
    values: list[tuple[int | None, Any]] = []
    documents = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            documents += 1
            value = loader.construct_document(node)
            if isinstance(value, list):
                values += [
                    (n.start_mark.line + 1, v) for n, v in zip(node.value, value, strict=True)
                ]
            elif value is not None:
                values.append((node.start_mark.line + 1, value))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise _Unreadable(f"YAML (document {documents + 1}{at}): {problem}") from None
    finally:
        loader.dispose()
    return values


def _document_problems(document: Any) -> list[str]:
    if not isinstance(document, dict):
        return [
            "must be an object {workerPoolId, providerId, description, owner, emailOnError, config}"
        ]
    problems = non_json(document, "")
    pool_id = document.get("workerPoolId")
    if pool_id is None:
        problems.append("workerPoolId: required")
    elif not isinstance(pool_id, str):
        problems.append("workerPoolId: must be a string")
    return problems


def non_json(value: Any, path: str) -> list[str]:
    """Values YAML can hold and JSON cannot: sets, binary, non-string keys, inf, nan."""
    if isinstance(value, dict):
        problems = [
            f"{where(path)}: key {k!r} is not a string" for k in value if not isinstance(k, str)
        ]
        for key, item in value.items():
            problems += non_json(item, key_path(path, str(key)))
        return problems
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in non_json(item, f"{path}[{index}]")]
    if value is None or isinstance(value, str | bool) or is_number(value):
        return []
    return [f"{where(path)}: {type(value).__name__} is not a JSON value"]
