"""The rollback window: code of release N runs on schema N+1 when N+1 only expanded it; downgrades work.

"Another release" is a copy of the migrations directory with revisions removed (the previous release)
or one added (the next release), put in place of this release's for a while (``_as_release``), so the
schema check under test is this code's, run as either release.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from calsync.core.model.errors import ConfigurationError
from calsync.core.store import migrate
from calsync.core.store.database import Database

pytestmark = pytest.mark.both_databases

NEXT = '''"""A test-only next release.

Revision ID: 0099
Revises: {down}
"""

import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{down}"
branch_labels = None
depends_on = None
{flag}


def upgrade() -> None:
    op.create_table("next_release_probe", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    op.drop_table("next_release_probe")
'''


def _release(tmp_path: Path, name: str, *, drop: tuple[str, ...] = (), add_next: str | None = None) -> Path:
    location = tmp_path / name
    shutil.copytree(migrate.MIGRATIONS, location, ignore=shutil.ignore_patterns("__pycache__"))
    for revision in drop:
        for path in (location / "versions").glob(f"{revision}_*.py"):
            path.unlink()
    if add_next is not None:
        text = NEXT.format(down=migrate.known_revisions()[-1], flag=add_next)
        (location / "versions" / "0099_next.py").write_text(text)
    return location


@contextlib.contextmanager
def _as_release(monkeypatch: pytest.MonkeyPatch, location: Path) -> Iterator[None]:
    """Run the migration code as the release that ships the migrations at ``location``."""
    with monkeypatch.context() as patched:
        patched.setattr(migrate, "MIGRATIONS", location)
        patched.setattr(migrate, "HEAD_REVISION", migrate.known_revisions()[-1])
        yield


def test_this_release_runs_on_the_next_expand_only_schema(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _as_release(monkeypatch, _release(tmp_path, "next", add_next="previous_release_compatible = True")):
        migrate.migrate_to(db)
    assert migrate.current_revision(db) == "0099"
    migrate.require_current(db)  # this release's check accepts it
    moved = migrate.migrate_to(db)  # and its migration Job (`calsync migrate`) succeeds without touching it
    assert (moved.action, moved.revision) == ("ahead", "0099")


@pytest.mark.parametrize("flag", ["previous_release_compatible = False", ""])
def test_a_contracting_or_undeclared_next_schema_is_refused_with_the_way_out(
    db: Database, tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _as_release(monkeypatch, _release(tmp_path, "next", add_next=flag)):
        migrate.migrate_to(db)
    head = migrate.known_revisions()[-1]
    with pytest.raises(ConfigurationError, match=f"newer than this calsync \\({head}\\) and not compatible"):
        migrate.require_current(db)
    with pytest.raises(ConfigurationError, match="migrate with the release that ships 0099"):
        migrate.migrate_to(db)


def test_the_previous_release_runs_on_this_schema(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = migrate.known_revisions()[-1]
    with _as_release(monkeypatch, _release(tmp_path, "previous", drop=(head,))):
        previous_head = migrate.known_revisions()[-1]
        assert previous_head != head and migrate.current_revision(db) == head
        migrate.require_current(db)
    known = migrate.known_revisions()
    assert known.index(migrate.recorded_window(db) or "") <= known.index(previous_head)


def test_an_older_schema_still_needs_migrate(db: Database) -> None:
    previous = migrate.known_revisions()[-2]
    migrate.migrate_to(db, previous)
    with pytest.raises(ConfigurationError, match=rf"is at {previous} but this calsync needs .*run `calsync migrate`"):
        migrate.require_current(db)


def test_migrate_to_downgrades_the_last_revision_and_upgrades_again(db: Database) -> None:
    head, previous = migrate.known_revisions()[-1], migrate.known_revisions()[-2]
    down = migrate.migrate_to(db, previous)
    assert (down.previous, down.revision, down.action) == (head, previous, "downgraded")
    assert migrate.migrate_to(db, previous).action == "unchanged"
    up = migrate.migrate_to(db)
    assert (up.previous, up.revision, up.action) == (previous, head, "upgraded")
    assert migrate.recorded_window(db) == migrate.oldest_compatible_code(head)


def test_a_downgrade_below_the_window_table_drops_it(db: Database) -> None:
    migrate.migrate_to(db, "0002")
    with db.engine.connect() as conn:
        assert not sa.inspect(conn).has_table("schema_window")
    assert migrate.recorded_window(db) is None


def test_an_unknown_revision_is_named_with_the_known_ones(db: Database) -> None:
    with pytest.raises(ConfigurationError, match="unknown revision '9999': this calsync knows 0001, 0002"):
        migrate.migrate_to(db, "9999")
    assert migrate.current_revision(db) == migrate.known_revisions()[-1]
