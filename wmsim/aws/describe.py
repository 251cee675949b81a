"""DescribeInstances as EC2 answers it: pages that count instances (moto pages by reservation),
MaxResults bounds, page tokens, filters, and pages built from the parts of moto's earlier
answers (wmsim/aws/pages.py) instead of asking moto to render the whole fleet again."""

from __future__ import annotations

import base64
import bisect
import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from wmsim.aws import pages
from wmsim.aws.moto_models import moto_environ
from wmsim.aws.query import EC2_API_VERSION
from wmsim.aws.wire import Answer, ec2_error, not_found
from wmsim.behaviour import Faults

MAX_RESULTS_MIN, MAX_RESULTS_MAX = 5, 1000  # DescribeInstances MaxResults bounds on AWS
UNBOUNDED_MAX_RESULTS = 2**31 - 1  # what the middleware asks of moto once it chose a page
# The parameters of a DescribeInstances whose answer the sim may build from the parts moto
# rendered before (anything else, DryRun say, is moto's to answer).
PLAIN_LISTING = re.compile(r"Action|Version|MaxResults|NextToken|InstanceId\.\d+|Filter\..+")


@dataclass(frozen=True)
class Listing:
    """One region's instances matching one set of filters, in creation order, computed once
    for every page of a listing (moto would filter every instance of the region per page)."""

    generation: int
    seqs: list[int]  # the instances' creation sequence, ascending (page tokens resume on it)
    instances: list[Any]
    reservation_of: dict[str, Any]  # instance id -> its moto reservation
    order: dict[str, int]  # reservation id -> its place in moto's reservations


def _filters(params: dict[str, str]) -> dict[str, list[str]]:
    names: dict[str, str] = {}
    values: dict[str, list[tuple[int, str]]] = {}
    for key, value in params.items():
        match = re.fullmatch(r"Filter\.(\d+)\.(Name|Value\.(\d+))", key)
        if not match:
            continue
        if match.group(2) == "Name":
            names[match.group(1)] = value
        else:
            values.setdefault(match.group(1), []).append((int(match.group(3)), value))
    return {
        name: [v for _, v in sorted(values.get(slot, []))]
        for slot, name in sorted(names.items(), key=lambda item: int(item[0]))
    }


def _make_token(seq: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": seq}).encode()).decode()


def _token_seq(token: str | None) -> int | None:
    """The creation sequence a page token resumes after; 0 without a token, None if invalid."""
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["after"])
    except (ValueError, KeyError, TypeError):
        return None


class DescribeInstances:
    """SimEc2's DescribeInstances (its state lives on SimEc2, wmsim/aws/ec2.py)."""

    account_id: str
    faults: Faults
    page_cache: bool

    def _describe_instances(
        self, environ: dict[str, Any], params: dict[str, str], region: str
    ) -> Answer:
        ids = [v for k, v in params.items() if k.startswith("InstanceId.")]
        if ids and "MaxResults" in params:
            return self._call_moto(environ, params)  # moto answers InvalidParameterCombination
        limit = self.faults.behaviour.page_size_max
        if "MaxResults" in params:
            try:
                asked = int(params["MaxResults"])
            except ValueError:
                asked = -1
            if not MAX_RESULTS_MIN <= asked <= MAX_RESULTS_MAX:
                return ec2_error(
                    400,
                    "InvalidParameterValue",
                    f"Value ( {params['MaxResults']} ) for parameter maxResults is invalid. "
                    f"Expecting a value between {MAX_RESULTS_MIN} and {MAX_RESULTS_MAX}.",
                )
            limit = asked if limit is None else min(limit, asked)
        filters = _filters(params)
        try:
            listing = self._listing(region, filters)
        except NotImplementedError:
            names = ", ".join(sorted(filters))
            return ec2_error(400, "InvalidParameterValue", f"The filter '{names}' is invalid")
        matched = listing.instances
        first = 0
        if ids:
            missing = [i for i in ids if i not in self._where or self._where[i][0] != region]
            if missing:
                return not_found(missing)
            # The listing's instances among those asked for, in its order, without going over
            # the listing (the old scanner's one-instance describes).
            matched = sorted(
                (self._where[i][1] for i in set(ids) if i in listing.reservation_of),
                key=lambda inst: self._life[inst.id].seq,
            )
        after = _token_seq(params.get("NextToken"))
        if after is None:
            return ec2_error(400, "InvalidPaginationToken", "The pagination token is invalid.")
        if ids:
            matched = [inst for inst in matched if self._life[inst.id].seq > after]
        else:
            first = bisect.bisect_right(listing.seqs, after)
        page = matched[first:] if limit is None else matched[first : first + limit]
        more = len(page) < len(matched) - first
        rest = {
            k: v
            for k, v in params.items()
            if not k.startswith("InstanceId.") and k not in ("MaxResults", "NextToken")
        }
        rest["MaxResults"] = str(UNBOUNDED_MAX_RESULTS)
        answer = self._render(environ, rest, region, page, listing)
        if more and answer.status.startswith("200"):
            token = _make_token(self._life[page[-1].id].seq)
            closing = b"</DescribeInstancesResponse>"
            body = answer.body.replace(
                closing, f"<nextToken>{token}</nextToken>".encode() + closing
            )
            answer = Answer(answer.status, answer.headers, body)
        return answer

    def _listing(self, region: str, filters: dict[str, list[str]]) -> Listing:
        """The region's instances matching the filters in creation order: moto filters them
        once per generation, not once per page."""
        key = (region, json.dumps(filters, sort_keys=True))
        cached = self._listings.get(key)
        if cached is not None and cached.generation == self._generation:
            return cached
        backend = self._backend(region)
        reservations = backend.describe_instances(filters=filters)
        reservation_of = {inst.id: r for r in reservations for inst in r.instances}
        instances = sorted(
            (inst for r in reservations for inst in r.instances),
            key=lambda inst: self._life[inst.id].seq,
        )
        listing = Listing(
            self._generation,
            [self._life[inst.id].seq for inst in instances],
            instances,
            reservation_of,
            {rid: place for place, rid in enumerate(backend.reservations)},
        )
        self._listings[key] = listing
        return listing

    def _render(
        self,
        environ: dict[str, Any],
        params: dict[str, str],
        region: str,
        page: list[Any],
        listing: Listing,
    ) -> Answer:
        """The answer for this page's instances: built from the parts of moto's earlier
        answers where it has them all (an instance's item is moto's as long as the instance is
        unchanged), else moto's own for the instances it lacks, kept for the next pages."""
        if not (page and self.page_cache and all(PLAIN_LISTING.fullmatch(k) for k in params)):
            return self._render_by_moto(environ, params, region, page, listing)
        stale = [inst for inst in page if not self._has_parts(inst, listing)]
        if stale:
            answer = self._render_by_moto(environ, params, region, stale, listing)
            if not answer.status.startswith("200"):
                return answer
            self._keep_parts(answer, stale)
            if len(stale) == len(page):
                return answer
            if not all(self._has_parts(inst, listing) for inst in page):
                return self._render_by_moto(environ, params, region, page, listing)
        return self._join_parts(page, listing)

    def _has_parts(self, inst: Any, listing: Listing) -> bool:
        item = self._items.get(inst.id)
        return (
            item is not None
            and item[0] == inst.state
            and listing.reservation_of[inst.id].id in self._reservation_parts
        )

    def _keep_parts(self, answer: Answer, rendered: list[Any]) -> None:
        parts = pages.split_page(answer.body)
        if parts is None:
            return
        self._page_frame = (answer.status, answer.headers, parts.head, parts.tail)
        states = {inst.id: inst.state for inst in rendered}
        for reservation in parts.reservations:
            self._reservation_parts[reservation.reservation_id] = (
                reservation.head,
                reservation.tail,
            )
            for instance_id, item in reservation.instances:
                if instance_id in states:
                    self._items[instance_id] = (states[instance_id], item)

    def _join_parts(self, page: list[Any], listing: Listing) -> Answer:
        """What moto answers for the page: its reservations in moto's order, each holding the
        page's instances in the reservation's order (as `_render_by_moto` shows them to moto)."""
        assert self._page_frame is not None
        wanted = {inst.id for inst in page}
        held = {
            listing.reservation_of[inst.id].id: listing.reservation_of[inst.id] for inst in page
        }
        reservations = []
        for reservation_id in sorted(held, key=listing.order.__getitem__):
            head, tail = self._reservation_parts[reservation_id]
            items = [self._items[i.id][1] for i in held[reservation_id].instances if i.id in wanted]
            reservations.append((head, items, tail))
        status, headers, head, tail = self._page_frame
        return Answer(status, list(headers), pages.join_page(head, tail, reservations))

    def _render_ahead(self, region: str, reservation: Any) -> None:
        """Have moto render a new reservation's instances now, as the first listing would:
        seeding pays for it, so a benchmark's listing of a seeded fleet costs the sim what the
        cloud's answer costs (a seeded fleet is ready, as a real cloud's is), not moto's work."""
        if not self.page_cache or self._moto is None or not reservation.instances:
            return
        listing = Listing(
            self._generation,
            [],
            list(reservation.instances),
            {inst.id: reservation for inst in reservation.instances},
            {reservation.id: 0},
        )
        environ = moto_environ(region, self.account_id)
        params = {
            "Action": "DescribeInstances",
            "Version": EC2_API_VERSION,
            "MaxResults": str(UNBOUNDED_MAX_RESULTS),
        }
        self._render(environ, params, region, list(reservation.instances), listing)

    def _render_by_moto(
        self,
        environ: dict[str, Any],
        params: dict[str, str],
        region: str,
        page: list[Any],
        listing: Listing,
    ) -> Answer:
        """moto's own answer to the request, for this page's instances only: moto is shown
        just their reservations (holding just them), in its own order, so it renders a page
        without filtering every instance of the region again."""
        wanted = {inst.id for inst in page}
        held: dict[str, Any] = {}
        for inst in page:
            reservation = listing.reservation_of[inst.id]
            if reservation.id not in held:
                narrowed = copy.copy(reservation)
                narrowed.instances = [i for i in reservation.instances if i.id in wanted]
                held[reservation.id] = narrowed
        backend = self._backend(region)
        everything = backend.reservations
        backend.reservations = type(everything)(
            (rid, held[rid]) for rid in sorted(held, key=listing.order.__getitem__)
        )
        try:
            return self._call_moto(environ, params)
        finally:
            backend.reservations = everything
