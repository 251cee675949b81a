"""Every call a provider makes draws from a bucket its cloud publishes: a misspelt class
would silently take calls out of the shared budget."""

from __future__ import annotations

import pytest

from wm.calls import CallClass, Draw
from wm.config import PUBLISHED_BUDGETS
from wm.providers import aws, azure, gcp

TABLES = {"aws": aws.CALL_CLASSES, "gcp": gcp.CALL_CLASSES, "azure": azure.CALL_CLASSES}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_operation_draws_from_classes_its_cloud_publishes(kind: str):
    for operation, classes in TABLES[kind].items():
        assert classes, f"{kind} {operation} draws from no bucket"
        for call_class in classes:
            assert type(call_class) is CallClass, f"{kind} {operation}: {call_class!r}"
            assert call_class in PUBLISHED_BUDGETS[kind], f"{kind} {operation}: {call_class}"


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_published_budget_is_a_class_some_operation_draws_from(kind: str):
    published = PUBLISHED_BUDGETS[kind]
    assert all(type(c) is CallClass for c in published)
    drawn = {c for classes in TABLES[kind].values() for c in classes}
    assert set(published) == drawn


def test_a_misspelt_class_is_refused_where_it_is_written():
    assert Draw("us-east-1", "describe").call_class is CallClass.DESCRIBE
    with pytest.raises(ValueError):
        Draw("us-east-1", "desribe")


def test_ec2_calls_draw_in_their_region_and_run_instances_counts_instances():
    assert aws._spend("eu-west-1", "RunInstances", instances=30) == (
        Draw("eu-west-1", CallClass.MUTATING),
        Draw("eu-west-1", CallClass.RUN_INSTANCES, 30),
    )
    assert aws._spend("eu-west-1", "DescribeInstances") == (Draw("eu-west-1", CallClass.DESCRIBE),)
