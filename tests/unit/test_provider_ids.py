"""Provider ids as Taskcluster's, and the one place wm must re-write them: GCE label values."""

from __future__ import annotations

import itertools
import re

import pytest

from wm.config.provider_ids import (
    GCE_LABEL_VALUE_MAX_CHARS,
    from_gce_label,
    gce_label,
    gce_label_problem,
    is_provider_id,
)
from wm.providers.base import TAG_DEPLOYMENT, TAG_PROVIDER, owned

GCE_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")  # GCE's rule for label values
LONGEST = "x" * 38


@pytest.mark.parametrize(
    ("provider_id", "label"),
    [
        ("aws", "aws"),
        ("fxci-level1-gcp", "fxci-level1-gcp"),
        ("azure_trusted", "azure__trusted"),
        ("Fxci_Level3-GCP", "_fxci___level3-_g_c_p"),
        ("a-b", "a-b"),
        ("a_b", "a__b"),
        ("aB", "a_b"),
        ("Foo", "_foo"),
        ("foo", "foo"),
        ("_", "__"),
        ("-", "-"),
        ("9", "9"),
        (LONGEST, LONGEST),
        ("A" * 31, "_a" * 31),  # 62 characters: fits
    ],
)
def test_a_provider_id_is_written_in_gce_labels_escaped_and_read_back(provider_id, label):
    assert is_provider_id(provider_id)
    assert gce_label(provider_id) == label
    assert GCE_LABEL_VALUE.fullmatch(label)
    assert from_gce_label(label) == provider_id
    assert gce_label_problem(provider_id) is None


@pytest.mark.parametrize(
    "ids",
    [
        ("Foo", "foo", "FOO", "fOo"),
        ("a_b", "a-b", "aB", "ab", "a__b", "a_B"),
        ("Fxci_Level3-GCP", "fxci-level3-gcp", "fxci_level3_gcp", "FXCI-LEVEL3-GCP"),
        ("_a", "A", "__a", "_A"),
    ],
)
def test_ids_that_a_naive_encoding_would_merge_keep_labels_of_their_own(ids):
    # worker-manager's created-by label makes [^a-zA-Z0-9-] a `-`, and GCE needs lower case:
    # every group here would share one label that way.
    naive = {re.sub(r"[^a-zA-Z0-9-]", "-", i).lower() for i in ids}
    assert len(naive) < len(ids)
    assert len({gce_label(i) for i in ids}) == len(ids)


def test_every_short_id_has_a_label_of_its_own():
    alphabet = "aB_-"
    ids = ["".join(p) for n in range(1, 6) for p in itertools.product(alphabet, repeat=n)]
    labels = [gce_label(i) for i in ids]
    assert len(set(labels)) == len(ids)
    assert all(from_gce_label(label) == i for i, label in zip(ids, labels, strict=True))


@pytest.mark.parametrize(
    ("provider_id", "length"),
    [("A" * 31, 62), ("a" * 25 + "B" * 13, 51), ("A" * 32, 64), ("_" * 38, 76), ("A_" * 19, 76)],
)
def test_an_id_whose_label_would_pass_gces_limit_is_named_with_the_length(provider_id, length):
    # Each capital letter and `_` takes two characters.
    assert len(gce_label(provider_id)) == length
    problem = gce_label_problem(provider_id)
    if length <= GCE_LABEL_VALUE_MAX_CHARS:
        assert problem is None
    else:
        assert problem is not None
        assert repr(provider_id) in problem and f"{length} characters" in problem
        assert f"GCE allows {GCE_LABEL_VALUE_MAX_CHARS}" in problem


@pytest.mark.parametrize("value", ["", "_", "a_", "_1", "_-", "A", "a.b", "x" * 39, "ab\n", "a b"])
def test_a_label_value_no_provider_id_is_written_as_reads_back_as_none(value):
    assert from_gce_label(value) is None


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("azure_trusted", True),
        ("Fxci_Level3-GCP", True),
        (LONGEST, True),
        ("x" * 39, False),
        ("a.b", False),
        ("a/b", False),
        ("", False),
        ("ab\n", False),
        ("é", False),
    ],
)
def test_provider_ids_are_exactly_taskclusters_pattern(value, valid):
    assert is_provider_id(value) is valid


@pytest.mark.parametrize(
    ("tags", "ours"),
    [
        ({TAG_DEPLOYMENT: "d", TAG_PROVIDER: "azure_trusted"}, True),
        ({TAG_DEPLOYMENT: "d"}, True),  # made before wm wrote a provider tag
        ({TAG_DEPLOYMENT: "d", TAG_PROVIDER: "azure-trusted"}, False),
        ({TAG_DEPLOYMENT: "d", TAG_PROVIDER: "Azure_Trusted"}, False),
        ({TAG_DEPLOYMENT: "d", TAG_PROVIDER: ""}, False),
        ({TAG_DEPLOYMENT: "other", TAG_PROVIDER: "azure_trusted"}, False),
        ({TAG_PROVIDER: "azure_trusted"}, False),
        ({}, False),
    ],
)
def test_a_resource_is_a_providers_when_it_names_its_deployment_and_provider(tags, ours):
    assert owned(tags, "d", "azure_trusted") is ours
