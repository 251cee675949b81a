"""The `filter` of GCE's list calls (`labels.pool = "a" AND status != TERMINATED`, `name:web-*`,
parentheses, NOT), compiled into a predicate over an item as the list shows it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from wmsim.gcp.errors import invalid

_TOKEN = re.compile(
    r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>!=|=|:)|(?P<str>"(?:[^"\\]|\\.)*")|(?P<word>[^\s()=!:"]+))'
)
Predicate = Callable[[Mapping[str, Any]], bool]


def list_filter(text: str) -> Predicate:
    """Compile a GCE list filter: `labels.k = "v"`, `status != RUNNING`, `labels.k:*`, joined
    by AND / OR (AND binds tighter), NOT or `-` to negate, parentheses to group. A bare
    juxtaposition of terms means AND, as in GCE."""
    tokens = _tokenize(text)
    if not tokens:
        return lambda _item: True
    parser = _FilterParser(tokens, text)
    predicate = parser.expression()
    if parser.position != len(tokens):
        raise invalid("filter", text, "Invalid list filter expression.")
    return predicate


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise invalid("filter", text, "Invalid list filter expression.")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _FilterParser:
    def __init__(self, tokens: list[tuple[str, str]], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.position = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise invalid("filter", self.text, "Invalid list filter expression.")
        self.position += 1
        return token

    def expression(self) -> Predicate:
        terms = [self._conjunction()]
        while self._peek() == ("word", "OR"):
            self._take()
            terms.append(self._conjunction())
        return terms[0] if len(terms) == 1 else lambda item: any(t(item) for t in terms)

    def _conjunction(self) -> Predicate:
        terms = [self._unary()]
        while (token := self._peek()) is not None and token not in (("rp", ")"), ("word", "OR")):
            if token == ("word", "AND"):
                self._take()
            terms.append(self._unary())
        return terms[0] if len(terms) == 1 else lambda item: all(t(item) for t in terms)

    def _unary(self) -> Predicate:
        token = self._take()
        if token == ("word", "NOT") or (token[0] == "word" and token[1] == "-"):
            inner = self._unary()
            return lambda item: not inner(item)
        if token[0] == "lp":
            inner = self.expression()
            if self._take()[0] != "rp":
                raise invalid("filter", self.text, "Unbalanced parentheses.")
            return inner
        if token[0] != "word":
            raise invalid("filter", self.text, "Invalid list filter expression.")
        negate = token[1].startswith("-")
        path = token[1].lstrip("-")
        op = self._take()
        value_token = self._take()
        if op[0] != "op" or value_token[0] not in ("str", "word"):
            raise invalid("filter", self.text, "Invalid list filter expression.")
        value = value_token[1]
        if value_token[0] == "str":
            value = json.loads(value)
        compare = _comparison(path, op[1], value)
        return (lambda item: not compare(item)) if negate else compare


def _comparison(path: str, op: str, value: str) -> Predicate:
    def lookup(item: Mapping[str, Any]) -> Any:
        current: Any = item
        for part in path.split("."):
            if not isinstance(current, Mapping) or part not in current:
                return None
            current = current[part]
        return current

    def text(found: Any) -> str:
        return json.dumps(found) if isinstance(found, bool) else str(found)

    if op == ":":
        if value == "*":
            return lambda item: lookup(item) is not None
        return lambda item: lookup(item) is not None and value in text(lookup(item))
    if op == "=":
        return lambda item: lookup(item) is not None and text(lookup(item)) == value
    return lambda item: lookup(item) is None or text(lookup(item)) != value
