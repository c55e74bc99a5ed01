"""Schema migrations through Alembic, driven from code (``calsync migrate``), no alembic.ini needed."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from calsync.core.model.errors import ConfigurationError
from calsync.core.store.database import Database

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    """The newest revision shipped with this code."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(db: Database) -> str | None:
    """The revision the database is at (None when never migrated)."""
    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> str:
    """Bring the schema to ``revision``; safe to run repeatedly and from several processes in turn."""
    config = _config()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    return current_revision(db) or ""


def require_current(db: Database) -> None:
    """Refuse to run against a schema older or newer than this code expects."""
    current, head = current_revision(db), head_revision()
    if current != head:
        raise ConfigurationError(
            f"database schema is at {current or 'nothing'} but this calsync needs {head}: run `calsync migrate`"
        )
