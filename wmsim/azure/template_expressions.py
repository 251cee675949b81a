"""The ARM template expression language's syntax: `[...]` strings parsed into a tree of
literals, function calls, property accesses and indexes (arm_templates.py's module docstring
lists what it covers). Evaluating a tree is template_evaluation.py's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class ExpressionError(Exception):
    """An expression that cannot be parsed or evaluated; the caller says where it was."""


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Member:
    target: Any
    name: str


@dataclass(frozen=True)
class Index:
    target: Any
    index: Any


_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[(),.\[\]]))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None:
            raise ExpressionError(f"unexpected character '{text[at:].strip()[0]}'")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        at = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._at = 0

    def parse(self) -> Any:
        node = self._expression()
        if self._at != len(self._tokens):
            raise ExpressionError(f"unexpected '{self._tokens[self._at][1]}'")
        return node

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, value: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise ExpressionError("the expression ends too early")
        if value is not None and token[1] != value:
            raise ExpressionError(f"expected '{value}' but found '{token[1]}'")
        self._at += 1
        return token

    def _expression(self) -> Any:
        node = self._primary()
        while (token := self._peek()) is not None and token[1] in (".", "["):
            self._take()
            if token[1] == ".":
                kind, name = self._take()
                if kind != "name":
                    raise ExpressionError(f"expected a property name after '.', found '{name}'")
                node = Member(node, name)
            else:
                node = Index(node, self._expression())
                self._take("]")
        return node

    def _primary(self) -> Any:
        kind, value = self._take()
        if kind == "string":
            return Literal(value[1:-1].replace("''", "'"))
        if kind == "number":
            return Literal(int(value))
        if kind != "name":
            raise ExpressionError(f"unexpected '{value}'")
        self._take("(")
        args: list[Any] = []
        if (token := self._peek()) is not None and token[1] == ")":
            self._take()
            return Call(value, ())
        while True:
            args.append(self._expression())
            kind, sep = self._take()
            if sep == ")":
                return Call(value, tuple(args))
            if sep != ",":
                raise ExpressionError(f"expected ',' or ')' but found '{sep}'")


def is_expression(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value.startswith("[")
        and value.endswith("]")
        and not value.startswith("[[")
    )


def parse_expression(text: str) -> Any:
    """The syntax tree of a template expression (the string with its brackets)."""
    return _Parser(text[1:-1]).parse()


def calls(node: Any) -> Iterator[Call]:
    """Every function call in the tree, outermost first."""
    if isinstance(node, Call):
        yield node
        for arg in node.args:
            yield from calls(arg)
    elif isinstance(node, Member):
        yield from calls(node.target)
    elif isinstance(node, Index):
        yield from calls(node.target)
        yield from calls(node.index)
