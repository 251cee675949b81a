"""DescribeInstances answers cut into their parts, and put back together.

moto renders a DescribeInstances answer by walking EC2's service model for every instance,
about 1.5 ms of CPU an instance: at 100,000 instances, most of a scan's time would be the
simulation's. An instance's XML changes only when the instance does, so the simulated EC2
keeps each instance's `<item>` (and each reservation's opening and closing) as moto rendered
them, and builds a page from those parts (`join_page`): byte for byte the answer moto would
give for those reservations, without moto. The parts come from moto's own answers
(`split_page`), so whatever moto renders, the sim serves the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.parsers import expat

# Depths of the elements of an answer: DescribeInstancesResponse > reservationSet > item (a
# reservation) > instancesSet > item (an instance) > instanceId.
_RESERVATION, _INSTANCES, _INSTANCE, _INSTANCE_FIELD = 3, 4, 5, 6


@dataclass(frozen=True)
class ReservationParts:
    reservation_id: str
    head: bytes  # `<item><reservationId>…<instancesSet>`: what comes before its instances
    tail: bytes  # `</instancesSet>…</item>`: what comes after them
    instances: tuple[tuple[str, bytes], ...]  # (instance id, its `<item>…</item>`), in order


@dataclass(frozen=True)
class PageParts:
    head: bytes  # the XML declaration up to `<reservationSet>`
    tail: bytes  # `</reservationSet>` to the end
    reservations: tuple[ReservationParts, ...]


def split_page(body: bytes) -> PageParts | None:
    """The parts of a DescribeInstances answer holding at least one instance; None for any
    other answer (an error, an empty page)."""
    cuts = _Cuts(body)
    try:
        cuts.parse()
    except (expat.ExpatError, ValueError):
        return None
    if not cuts.reservations or cuts.root != "DescribeInstancesResponse":
        return None
    return PageParts(
        body[: cuts.first_reservation], body[cuts.last_reservation_end :], tuple(cuts.reservations)
    )


def join_page(
    head: bytes, tail: bytes, reservations: list[tuple[bytes, list[bytes], bytes]]
) -> bytes:
    """The answer of `split_page`'s parts: each reservation as (head, instances' items, tail)."""
    out = [head]
    for reservation_head, items, reservation_tail in reservations:
        out.append(reservation_head)
        out.extend(items)
        out.append(reservation_tail)
    out.append(tail)
    return b"".join(out)


class _Cuts:
    """Where each reservation and instance of an answer starts and ends (expat's byte
    offsets: the answer's text never holds a raw `<`, so offsets are the elements' own)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.root = ""
        self.reservations: list[ReservationParts] = []
        self.first_reservation = -1
        self.last_reservation_end = -1
        self._depth = 0
        self._parser = expat.ParserCreate()
        self._parser.StartElementHandler = self._start
        self._parser.EndElementHandler = self._end
        self._parser.CharacterDataHandler = self._text
        self._path: list[str] = []
        self._reservation_start = 0
        self._reservation_id: list[str] = []
        self._head_end = -1  # where the reservation's first instance starts
        self._instances: list[tuple[str, bytes]] = []
        self._instance_start = 0
        self._instance_id: list[str] = []
        self._instances_end = -1  # where `</instancesSet>` starts

    def parse(self) -> None:
        self._parser.Parse(self.body, True)

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        self._depth += 1
        self._path.append(name)
        at = self._parser.CurrentByteIndex
        if self._depth == 1:
            self.root = name
        elif self._depth == _RESERVATION:
            self._reservation_start = at
            if self.first_reservation < 0:
                self.first_reservation = at
            self._reservation_id, self._instances, self._head_end = [], [], -1
        elif self._depth == _INSTANCE and self._path[-2] == "instancesSet":
            if self._head_end < 0:
                self._head_end = at
            self._instance_start = at
            self._instance_id = []

    def _end(self, name: str) -> None:
        at = self._parser.CurrentByteIndex
        if self._depth == _INSTANCE and self._path[-2] == "instancesSet":
            end = self._end_of(at, name)
            if not self._instance_id:
                raise ValueError("an instance without its instanceId")
            item = self.body[self._instance_start : end]
            self._instances.append(("".join(self._instance_id), item))
            self._instances_end = end
        elif self._depth == _RESERVATION:
            end = self._end_of(at, name)
            if not self._instances:
                raise ValueError("a reservation without instances")
            self.reservations.append(
                ReservationParts(
                    "".join(self._reservation_id),
                    self.body[self._reservation_start : self._head_end],
                    self.body[self._instances_end : end],
                    tuple(self._instances),
                )
            )
            self.last_reservation_end = end
        self._depth -= 1
        self._path.pop()

    def _text(self, text: str) -> None:
        if self._depth == _INSTANCE_FIELD and self._path[-1] == "instanceId":
            self._instance_id.append(text)
        elif self._depth == _RESERVATION + 1 and self._path[-1] == "reservationId":
            self._reservation_id.append(text)

    def _end_of(self, at: int, name: str) -> int:
        """The offset just past the element whose end tag (or empty tag) is at `at`."""
        closing = f"</{name}>".encode()
        if self.body.startswith(closing, at):
            return at + len(closing)
        raise ValueError(f"unexpected end of {name} at {at}")
