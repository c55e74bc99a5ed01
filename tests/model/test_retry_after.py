"""One reading of a provider's Retry-After hint, for every adapter."""

from __future__ import annotations

import datetime as dt

import pytest

from calsync.core.model.retry_after import MAX_RETRY_AFTER, parse_retry_after

NOW = dt.datetime(2030, 1, 2, 10, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("2.5", 2.5),
        (3, 3.0),
        (1.5, 1.5),
        ("0", 0.0),
    ],
)
def test_delta_seconds(value: str | float, seconds: float) -> None:
    assert parse_retry_after(value, now=NOW) == seconds


def test_an_http_date_is_the_time_left_until_then() -> None:
    assert parse_retry_after("Wed, 02 Jan 2030 10:01:30 GMT", now=NOW) == 90.0


def test_an_http_date_in_the_past_means_now() -> None:
    assert parse_retry_after("Wed, 02 Jan 2030 09:00:00 GMT", now=NOW) == 0.0


@pytest.mark.parametrize("value", [None, "", "   ", "soon", "12 seconds", "Wed, 99 Foo 2030", "nan", True])
def test_absent_or_garbage_is_no_hint(value: str | bool | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


@pytest.mark.parametrize("value", ["-5", -5.0, "-inf"])
def test_negative_means_now(value: str | float) -> None:
    assert parse_retry_after(value, now=NOW) == 0.0


@pytest.mark.parametrize("value", ["99999999999999999999", "1e400", "inf", 10.0**12, "Fri, 01 Jan 9999 00:00:00 GMT"])
def test_huge_is_capped_at_a_day(value: str | float) -> None:
    assert parse_retry_after(value, now=NOW) == MAX_RETRY_AFTER == 86_400.0


def test_a_date_without_a_zone_is_read_as_utc() -> None:
    assert parse_retry_after("Wed, 02 Jan 2030 10:00:10 -0000", now=NOW) == 10.0
