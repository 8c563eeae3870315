"""The fast distinctness check behind span-id validation: never says "distinct" wrongly."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.replay._fingerprint import _fingerprints, all_differ, surely_distinct

# Short alphabets make equal strings common; long strings reach past the 64 bytes read in full.
TEXTS = st.one_of(
    st.text(alphabet="ab", max_size=12),
    st.text(max_size=90),
    st.builds(lambda a, b: a + "x" * 70 + b, st.text("01", max_size=3), st.text("01", max_size=3)),
)


def sliced(values: list[str], skip: int) -> pa.Array:
    """The values as a slice into a longer array: equal strings lie at different places."""
    return pa.array(["pad"] * skip + values, pa.string()).slice(skip)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, max_size=40), st.integers(0, 5))
def test_distinct_is_never_said_of_equal_strings(values: list[str], skip: int) -> None:
    if surely_distinct(sliced(values, skip)):
        assert len(set(values)) == len(values)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=16), max_size=40, unique=True), st.integers(0, 5))
def test_distinct_strings_read_in_full_are_said_distinct(values: list[str], skip: int) -> None:
    # At most 64 bytes each (16 characters of up to 4 bytes): every byte is in the fingerprint.
    assert surely_distinct(sliced(values, skip))


ONE_LENGTH = st.sampled_from([8, 16, 32]).flatmap(
    lambda n: st.lists(st.text("ab", min_size=n, max_size=n), min_size=1, max_size=40)
)
"""Strings of one length, a multiple of 8 bytes (as OpenTelemetry's ids are): read as words."""


@settings(max_examples=300, deadline=None)
@given(ONE_LENGTH, st.integers(0, 5))
def test_strings_of_one_length_read_as_words_get_the_fingerprints_of_any(
    values: list[str], skip: int
) -> None:
    general = _fingerprints(pa.array([*values, "odd"]))[: len(values)]  # lengths differ
    assert np.array_equal(_fingerprints(sliced(values, skip)), general)
    assert surely_distinct(sliced(values, skip)) == (len(set(values)) == len(values))


def test_strings_equal_but_for_bytes_past_the_first_64_are_told_apart() -> None:
    common = "span-" + "0" * 70
    assert surely_distinct(pa.array([common + "1", common + "2"]))
    assert not surely_distinct(pa.array([common + "1", "q", common + "1"]))


def test_a_column_with_nulls_is_left_to_the_exact_check() -> None:
    assert not surely_distinct(pa.array(["a", None, "b"]))


def test_a_million_random_ids_are_distinct_and_one_repeat_is_found() -> None:
    chance = random.Random(7)
    ids = [f"{chance.getrandbits(64):016x}" for _ in range(1_000_000)]  # slots shared by chance
    assert surely_distinct(pa.array(ids))
    assert not surely_distinct(pa.array([*ids, ids[123_456]]))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 30_000),
    st.integers(0, 63),
    st.integers(0, 63),
    st.integers(0, 2**32),
    st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)), max_size=3),
)
def test_all_differ_finds_exactly_the_equal_fingerprints(
    size: int, low_bits: int, offset: int, seed: int, repeats: list[tuple[int, int]]
) -> None:
    # Values that vary in `low_bits` bits only, placed anywhere in the word, some repeated.
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**low_bits, size, dtype=np.uint64, endpoint=True)
    values <<= np.uint64(min(offset, 63 - low_bits))
    for source, target in repeats:
        values[target % len(values)] = values[source % len(values)]
    assert all_differ(values) == (len(np.unique(values)) == len(values))
