"""Property-based: schemathesis drives the live server from its own OpenAPI document; no 5xx, every answer conforms.

Every operation of the served /openapi.json gets a seeded, bounded number of generated requests (derandomized,
so a run is repeatable and stays well under a minute), each checked by schemathesis' own checks: not a server
error, status code, content type, headers and body conform to the document, schema-invalid data is rejected.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks

from tests.api.live import LiveApi
from tests.support import Pipeline

EXAMPLES_PER_OPERATION = 25
# Probes take no input at all, so no schema-invalid request to them exists.
WITHOUT_INPUT = {"/healthz", "/readyz"}


@pytest.mark.slow
def test_the_api_keeps_its_contract(api: LiveApi, pipeline: Pipeline) -> None:
    pipeline.account(account_id="acc-1")
    headers = {"Authorization": f"Bearer {api.key(scope='admin')}"}
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 27

    statuses: Counter[int] = Counter()
    for operation, mode in itertools.product(operations, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):
        if mode is GenerationMode.NEGATIVE and operation.path in WITHOUT_INPUT:
            continue

        @given(case=operation.as_strategy(mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        def exercise(case: schemathesis.Case) -> None:
            # Schema-valid changes mostly name accounts that do not exist: 422 for valid data is expected here.
            response = case.call_and_validate(headers=headers, excluded_checks=[checks.positive_data_acceptance])
            statuses[response.status_code] += 1

        exercise()
    assert statuses[200] and statuses[422] and sum(statuses.values()) >= len(operations) * 10, statuses
