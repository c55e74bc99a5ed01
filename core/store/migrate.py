"""Schema migrations through Alembic, driven from code (``calsync migrate``), no alembic.ini needed.

The rollback window: every migration module declares ``previous_release_compatible`` — True when it
only expands the schema (new tables, new nullable or defaulted columns), so the code of the revision
before it still runs on it. After every upgrade or downgrade the database records, in
``schema_window``, the oldest code revision that runs on its schema (walking back through compatible
migrations). The schema check of any later release reads that row, so code one release behind
accepts a database one (expand-only) revision ahead: ``kubectl rollout undo`` needs no downgrade.
A migration without the flag counts as incompatible (fail closed). The rule is in docs/DEPLOY.md.

Alembic is imported only when a migration runs or the schema is not this code's head: every process
checks the schema at start, and importing Alembic and loading the migration scripts is a large part of a
short command's start (docs/notes/performance.md). The check first reads the one row of Alembic's version
table and compares it with :data:`HEAD_REVISION`; any other answer takes Alembic's own path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection

from calsync.core.model.errors import ConfigurationError
from calsync.core.store.database import Database, begin
from calsync.core.store.schema import schema_window

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")
HEAD_REVISION = "0015"  # the newest script in migrations/versions (tests/store/test_migrate.py checks it)
# Alembic's default version table, which env.py keeps: one row, the revision the schema is at.
_ALEMBIC_VERSION = sa.table("alembic_version", sa.column("version_num", sa.String))


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def _at_shipped_head(db: Database) -> bool:
    """Whether the schema is at this code's head, read without Alembic (False whenever unsure)."""
    try:
        with db.engine.connect() as conn:
            rows = conn.execute(sa.select(_ALEMBIC_VERSION.c.version_num)).scalars().all()
    except sa.exc.DBAPIError:  # no version table yet: Alembic's path says what to do
        return False
    return rows == [HEAD_REVISION]


def known_revisions() -> list[str]:
    """The revisions this code ships, oldest first."""
    return [script.revision for script in reversed(list(_script().walk_revisions()))]


def oldest_compatible_code(revision: str) -> str:
    """The oldest code revision that runs on the schema at ``revision`` (through expand-only migrations)."""
    script = _script()
    oldest = script.get_revision(revision)
    while oldest is not None and oldest.down_revision and getattr(oldest.module, "previous_release_compatible", False):
        oldest = script.get_revision(str(oldest.down_revision))
    assert oldest is not None
    return oldest.revision


def current_revision(db: Database) -> str | None:
    """The revision the database is at (None when never migrated)."""
    from alembic.runtime.migration import MigrationContext

    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def recorded_window(db: Database) -> str | None:
    """The oldest code revision the database says runs on its schema (None before the window existed)."""
    with db.engine.connect() as conn:
        if not sa.inspect(conn).has_table(schema_window.name):
            return None
        return conn.execute(sa.select(schema_window.c.oldest_code_revision)).scalar()


def _record_window(conn: Connection) -> None:
    from alembic.runtime.migration import MigrationContext

    revision = MigrationContext.configure(conn).get_current_revision()
    if revision is None or not sa.inspect(conn).has_table(schema_window.name):
        return
    oldest = oldest_compatible_code(revision)
    conn.execute(sa.delete(schema_window))
    conn.execute(sa.insert(schema_window).values(id=1, revision=revision, oldest_code_revision=oldest))


@dataclass(frozen=True)
class Migration:
    """What ``calsync migrate`` did: from where to where, and how."""

    previous: str | None
    revision: str | None
    action: str  # upgraded | downgraded | unchanged | ahead

    def as_json(self) -> dict[str, str | None]:
        """Printed by ``calsync migrate``."""
        return {"revision": self.revision, "previous": self.previous, "action": self.action}


def _run(db: Database, step: str, revision: str) -> None:
    from alembic import command

    config = _config()
    sqlite = db.dialect == "sqlite"
    with db.engine.connect() as conn:
        # SQLite: foreign keys off while migrating, set on the driver's connection outside the transaction (SQLite
        # ignores the pragma inside one). A batch migration rebuilds a table (copy, drop, rename); dropping a table
        # other rows refer to fails while SQLite enforces foreign keys, whatever the copy holds (Alembic's
        # documentation, "batch mode"). Every key is checked with ``PRAGMA foreign_key_check`` before the commit.
        raw = conn.connection.driver_connection if sqlite else None
        if raw is not None:
            raw.execute("PRAGMA foreign_keys=OFF")
        try:
            with begin(conn):
                config.attributes["connection"] = conn
                (command.upgrade if step == "upgrade" else command.downgrade)(config, revision)
                _record_window(conn)
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() if sqlite else []
                if broken:
                    raise ConfigurationError(f"the migration would break {len(broken)} foreign key(s): {broken[:5]}")
        finally:
            if raw is not None:
                raw.execute("PRAGMA foreign_keys=ON")


def migrate_to(db: Database, target: str | None = None) -> Migration:
    """Upgrade to head (``target`` None) or move to ``target`` (a revision, or ``head``), up or down; one-line errors
    for what cannot be."""
    if target is None and _at_shipped_head(db):
        return Migration(HEAD_REVISION, HEAD_REVISION, "unchanged")
    known, current = known_revisions(), current_revision(db)
    head = known[-1]
    if target == "head":  # Alembic's name for the newest revision: this release's head, named explicitly
        target = head
    if target is not None and target not in known:
        raise ConfigurationError(f"unknown revision {target!r}: this calsync knows {', '.join(known)} (or head)")
    if current is not None and current not in known:
        if target is None and recorded_window(db) in known:
            return Migration(current, current, "ahead")
        raise ConfigurationError(
            f"database schema is at {current}, newer than this calsync knows (head {head}): "
            f"migrate with the release that ships {current} (`calsync migrate --to {target or head}` there)"
        )
    wanted = target or head
    if current == wanted:
        return Migration(current, current, "unchanged")
    going_down = current is not None and known.index(wanted) < known.index(current)
    _run(db, "downgrade" if going_down else "upgrade", wanted)
    return Migration(current, current_revision(db), "downgraded" if going_down else "upgraded")


def require_current(db: Database) -> None:
    """Refuse a schema this code cannot run on: older than its head, or newer and not declared compatible."""
    if _at_shipped_head(db):
        return
    known, current = known_revisions(), current_revision(db)
    if current is None or current in known:
        raise ConfigurationError(
            f"database schema is at {current or 'nothing'} but this calsync needs {HEAD_REVISION}: "
            "run `calsync migrate`"
        )
    if recorded_window(db) not in known:
        raise ConfigurationError(
            f"database schema is at {current}, newer than this calsync ({HEAD_REVISION}) and not compatible with it: "
            f"deploy the release that ships {current}, or downgrade with it (`calsync migrate --to {HEAD_REVISION}`)"
        )
