"""A simulated worker reads its VM's metadata again while the service does not answer or
answers 5xx (worker-runner's httpbackoff), and gives up on a refusal, its deadline, or a stop."""

from __future__ import annotations

import pytest

from wmsim.bootdata import MetadataError, read_retrying


class Reads:
    """Answers with each outcome in turn: an error is raised, anything else returned."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.count = 0

    def __call__(self) -> object:
        outcome = self.outcomes[self.count]
        self.count += 1
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


NO_ANSWER = MetadataError("/latest/api/token", 0, "timed out")
BUSY = MetadataError("/latest/api/token", 503)
NOT_FOUND = MetadataError("/latest/dynamic/instance-identity/document", 404)


@pytest.mark.parametrize(
    "outcomes, reads",
    [
        (["proof"], 1),
        ([NO_ANSWER, "proof"], 2),
        ([BUSY, NO_ANSWER, "proof"], 3),
    ],
)
def test_a_read_the_service_did_not_answer_is_read_again_until_it_answers(outcomes, reads):
    read, waits = Reads(*outcomes), []

    got = read_retrying(read, give_up_s=600, wait=lambda s: waits.append(s) or False)

    assert got == "proof" and read.count == reads
    assert len(waits) == reads - 1 and all(2.0 <= s <= 4.0 for s in waits)


def test_a_refusal_is_not_read_again():
    read = Reads(NOT_FOUND, "proof")

    with pytest.raises(MetadataError) as raised:
        read_retrying(read, give_up_s=600, wait=lambda s: False)

    assert raised.value is NOT_FOUND and read.count == 1


def test_a_read_that_would_wait_past_the_deadline_gives_up_with_the_last_error():
    read = Reads(NO_ANSWER, "proof")

    with pytest.raises(MetadataError) as raised:
        read_retrying(read, give_up_s=1.0, wait=lambda s: False)

    assert raised.value is NO_ANSWER and read.count == 1


def test_a_stop_during_the_wait_ends_the_reads():
    read = Reads(BUSY, "proof")

    with pytest.raises(MetadataError) as raised:
        read_retrying(read, give_up_s=600, wait=lambda s: True)

    assert raised.value is BUSY and read.count == 1
