"""The public API is exactly what a submitting service calls and can receive (httpx's test_exported_members)."""

from __future__ import annotations

import inspect

import calsync
from calsync.core.model import errors

# What a submitter calls, what it builds its change from, what it gets back, and what it can be raised.
SUBMITTER_SURFACE = {
    "submit_change", "connect", "Clients", "Settings", "Change", "EventFields", "Receipt",
    "CalsyncError", "TemporaryError", "PermanentError",
    "StoreUnavailable", "InvalidChange", "IdempotencyKeyReused", "EntityNotFound", "ConfigurationError",
}  # fmt: skip


def test_every_public_member_is_exported_and_every_export_is_public() -> None:
    public = {name for name in vars(calsync) if not name.startswith("_")} - {"core", "actors", "providers"}
    assert set(calsync.__all__) == public
    assert calsync.__all__ == sorted(calsync.__all__)


def test_the_exports_are_the_submitters_surface() -> None:
    assert set(calsync.__all__) == SUBMITTER_SURFACE


def test_every_exported_error_is_in_the_tree_and_drawn_in_the_packages_docstring() -> None:
    exported = {name for name in calsync.__all__ if inspect.isclass(getattr(calsync, name))
                and issubclass(getattr(calsync, name), errors.CalsyncError)}  # fmt: skip
    assert all(getattr(calsync, name) is getattr(errors, name) for name in exported)
    assert all(name in (calsync.__doc__ or "") for name in exported)


def test_submit_change_takes_its_clients_by_keyword() -> None:
    parameters = inspect.signature(calsync.submit_change).parameters
    assert parameters["clients"].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.signature(calsync.connect).return_annotation in ("Clients", calsync.Clients)
