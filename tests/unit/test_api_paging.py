"""Pages, continuation tokens, error ids and state counts as the API shows them: tables."""

from __future__ import annotations

import re

import pytest

from wm.api.paging import MAX_LIMIT, Page, decode_token, encode_token, page_from_query, paginate
from wm.api.views import counts, error_id_from_slug, error_slug
from wm.db.api_reads import StateCounts
from wm.tc.errors import TaskclusterError

# worker-pool-error.yml's errorId pattern (a v4 slugid).
ERROR_ID = re.compile(
    r"^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$"
)


@pytest.mark.parametrize(
    ("token", "limit", "page"),
    [
        (None, None, Page(0, MAX_LIMIT)),
        (None, "10", Page(0, 10)),
        (None, "5000", Page(0, MAX_LIMIT)),
        (None, "0", Page(0, 1)),
        (encode_token(40), "20", Page(40, 20)),
        ("", None, Page(0, MAX_LIMIT)),
    ],
)
def test_a_query_gives_a_page(token, limit, page):
    assert page_from_query(token, limit) == page


@pytest.mark.parametrize(
    ("token", "limit", "code"),
    [
        ("junk", None, "InputError"),
        ("eDM", None, "InputError"),  # base64 of "x3": not an offset
        (None, "-1", "InvalidRequestArguments"),
        (None, "ten", "InvalidRequestArguments"),
    ],
)
def test_a_bad_query_is_taskclusters_error(token, limit, code):
    with pytest.raises(TaskclusterError) as refused:
        page_from_query(token, limit)
    assert refused.value.code == code


@pytest.mark.parametrize(("rows", "limit", "token"), [(5, 2, 2), (2, 2, None), (0, 3, None)])
def test_a_token_only_when_more_rows_exist(rows, limit, token):
    data = list(range(rows))
    got, next_token = paginate(Page(0, limit), lambda offset, n: data[offset : offset + n])
    assert got == data[:limit]
    assert (decode_token(next_token) if next_token else None) == token


@pytest.mark.parametrize("error_id", [0, 1, 12345, 2**47])
def test_error_ids_become_slugids_and_back(error_id):
    slug = error_slug(error_id)
    assert ERROR_ID.match(slug) and error_id_from_slug(slug) == error_id


@pytest.mark.parametrize("slug", ["", "junk", "AAAAAAAAQAaAAAAAAAAAAA", "x" * 22])
def test_other_text_is_no_error_id(slug):
    assert error_id_from_slug(slug) is None


def test_counts_sum_states_and_current_capacity_leaves_out_stopped():
    rows = [
        StateCounts("p/q", "lc1", "requested", 2, 4),
        StateCounts("p/q", "lc2", "running", 3, 3),
        StateCounts("p/q", "lc1", "stopped", 7, 7),
    ]
    got = counts(rows)
    assert got["currentCapacity"] == 7
    assert (got["requestedCount"], got["runningCapacity"], got["stoppedCount"]) == (2, 3, 7)
    assert got["stoppingCount"] == got["stoppingCapacity"] == 0
