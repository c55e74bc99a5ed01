"""The accounts and webhooks pages take any query string a person or a hand-edited address sends: a page (200) or
a plain refusal naming the field (400), never a 500."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.console.conftest import ConsoleClient

# Any text, with the characters a database refuses or an id never has (NUL, controls) drawn often.
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["\x00", "acc\x00", "t\n1", " ", "acc-1", "tenant-1", "a" * 200]
)
_FIELDS = {
    "/accounts": {"tenant_id": _TEXT, "provider": st.sampled_from(["", "google", "memory", "zoom"]) | _TEXT,
                  "status": st.sampled_from(["", "active", "disabled", "asleep"]) | _TEXT, "after": _TEXT},
    "/webhooks": {"tenant_id": _TEXT, "endpoint_id": _TEXT, "cursor": _TEXT,
                  "status": st.sampled_from(["", "any", "pending", "failed", "lost"]) | _TEXT},
}  # fmt: skip
_QUERIES = st.sampled_from(sorted(_FIELDS)).flatmap(
    lambda path: st.tuples(st.just(path), st.fixed_dictionaries({}, optional=_FIELDS[path]))
)


def test_any_query_is_a_page_or_a_refusal(console_client: ConsoleClient) -> None:
    client = console_client("viewer")  # one sign-in for every example

    @settings(max_examples=60, deadline=None, database=None)
    @given(query=_QUERIES)
    def answered(query: tuple[str, dict[str, str]]) -> None:
        path, params = query
        answer = client.get(path, params=params)
        assert answer.status_code in (200, 400), (path, params, answer.status_code, answer.text[-500:])
        assert "text/html" in answer.headers["content-type"]

    answered()
