"""``calsync dlq replay|discard|purge-quarantined`` as a script sees them: one JSON report of one shape, exit codes
per the README table (every record skipped is 0, an unknown id is 2 and changes nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store.crypto import generate_key
from tests.cli.process import calsync, json_out, one_line_error
from tests.support import Pipeline


@pytest.mark.slow
def test_replay_and_discard_report_the_same_shape_and_exit_codes(settings_factory: Any) -> None:
    settings: Settings = settings_factory(secret_key=generate_key())
    pipeline = Pipeline(settings)
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="forbidden", title="^Locked")
        first = pipeline.submit([account], title="Locked room")
        second = pipeline.submit([account], title="Locked too")
        with pipeline.worker():
            pipeline.wait_target(first.entity_id, account, "failed")
            pipeline.wait_target(second.entity_id, account, "failed")
        one, two = json_out(calsync("dlq", "list", "--json", settings=settings))
        ids = [str(one["id"]), str(two["id"])]

        for verb in ("replay", "discard"):
            missing = calsync("dlq", verb, ids[0], "998", "999", settings=settings)
            assert "dead letters 998, 999 do not exist" in one_line_error(missing, 2)
        assert len(json_out(calsync("dlq", "list", "--json", settings=settings))) == 2  # nothing was done

        pipeline.provider.clear_faults()
        replayed = json_out(calsync("dlq", "replay", ids[0], settings=settings))
        assert replayed["skipped"] == [] and [r["id"] for r in replayed["replayed"]] == [one["id"]]
        discarded = json_out(calsync("dlq", "discard", ids[1], "--note", "room gone", settings=settings))
        assert discarded == {"discarded": [{"id": two["id"], "job_id": two["job_id"]}], "skipped": []}

        again = json_out(calsync("dlq", "replay", *ids, settings=settings))
        assert again == {"replayed": [], "skipped": [
            {"id": one["id"], "job_id": one["job_id"], "why": "record is replayed"},
            {"id": two["id"], "job_id": two["job_id"], "why": "record is discarded"}]}  # fmt: skip
        closed = json_out(calsync("dlq", "discard", *ids, settings=settings))
        assert closed == {"discarded": [], "skipped": again["skipped"]}
        none = calsync("dlq", "replay", "--reason", "no such reason", settings=settings)
        assert json_out(none) == {"replayed": [], "skipped": []}
        assert json_out(calsync("dlq", "purge-quarantined", settings=settings)) == {"discarded": [], "skipped": []}
    finally:
        pipeline.close()
