"""Fault rules shared by every provider emulator: what to break, for which requests, how often.

A rule is posted as JSON to ``POST /_emulator/faults``. The first rule that matches a request wins;
``times`` counts down and the rule disappears at zero; ``probability`` makes it a coin toss (seeded
per rule set so a test can make it reproducible).
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class FaultRule(BaseModel):
    """One way to break matching requests. Emulators subclass it to add protocol-specific matchers."""

    model_config = ConfigDict(extra="forbid")

    method: str | None = Field(default=None, description="HTTP method to match, any when absent")
    path: str | None = Field(default=None, description="regex searched in the decoded request path")
    status: int | None = Field(default=None, ge=100, le=599, description="HTTP status to answer with")
    reason: str | None = Field(default=None, description="protocol error code (Google reason, EWS ResponseCode)")
    message: str | None = Field(default=None, description="human message in the error body")
    retry_after: float | None = Field(default=None, ge=0, description="Retry-After header / back-off hint, s")
    delay_ms: int = Field(default=0, ge=0, description="sleep before answering")
    drop: bool = Field(default=False, description="close the connection without any response")
    after: bool = Field(default=False, description="apply the request first, then break the response")
    times: int | None = Field(default=None, ge=1, description="how many matching requests to break")
    probability: float = Field(default=1.0, gt=0, le=1)

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.upper() if value else value

    @field_validator("path")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    def matches(self, method: str, path: str, request: Any = None) -> bool:
        """Whether this rule targets the request; subclasses extend it with their own matchers."""
        if self.method and self.method != method.upper():
            return False
        return not (self.path and not re.search(self.path, path))

    @property
    def breaks_response(self) -> bool:
        """True when the rule changes what the client receives (not only how late)."""
        return self.drop or self.status is not None


class FaultRules:
    """A thread-safe ordered set of rules, consulted once per request."""

    def __init__(self, rule_type: type[FaultRule] = FaultRule, *, seed: int | None = None) -> None:
        self.rule_type = rule_type
        self._rules: list[FaultRule] = []
        self._remaining: list[int | None] = []
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    def add(self, spec: dict[str, Any]) -> FaultRule:
        """Validate and append a rule (raises pydantic's ValidationError on a bad spec)."""
        rule = self.rule_type.model_validate(spec)
        with self._lock:
            self._rules.append(rule)
            self._remaining.append(rule.times)
        return rule

    def clear(self) -> None:
        """Forget every rule."""
        with self._lock:
            self._rules.clear()
            self._remaining.clear()

    def take(self, method: str, path: str, request: Any = None) -> FaultRule | None:
        """Return the first matching rule that fires for this request, consuming one of its ``times``."""
        with self._lock:
            for index, rule in enumerate(self._rules):
                if not rule.matches(method, path, request):
                    continue
                if rule.probability < 1 and self._random.random() >= rule.probability:
                    return None
                remaining = self._remaining[index]
                if remaining is not None:
                    if remaining <= 1:
                        del self._rules[index]
                        del self._remaining[index]
                    else:
                        self._remaining[index] = remaining - 1
                return rule
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        """The rules still active, with what is left of their ``times``."""
        with self._lock:
            return [
                {**rule.model_dump(exclude_defaults=True), "remaining": left}
                for rule, left in zip(self._rules, self._remaining, strict=True)
            ]
