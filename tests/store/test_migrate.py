"""The schema check at start: Alembic is loaded only when the schema is not this code's head.

Every ``calsync`` command and worker process checks the schema; reading Alembic's version row
directly saves a command about a quarter of its start-up (benchmarks/cli_startup.py). The other
answers (never migrated, older, newer) take Alembic's path, whose wording tests/store/
test_rollback_window.py checks.
"""

from __future__ import annotations

import pytest

from calsync.core.model.errors import ConfigurationError
from calsync.core.store import migrate
from calsync.core.store.database import Database
from tests.support import python_in_a_new_process

pytestmark = pytest.mark.both_databases

# Checks the schema of the database at argv[1] as a process starting up does, then says which modules it loaded.
_CHECK = """
import sys
from calsync.core.store import migrate
from calsync.core.store.database import Database
db = Database(sys.argv[1])
if sys.argv[2] == "require":
    migrate.require_current(db)
else:
    print(migrate.migrate_to(db).action)
print(sorted({name.split(".")[0] for name in sys.modules} & {"alembic", "mako"}))
"""


def _check_in_a_new_process(url: str, how: str) -> list[str]:
    return python_in_a_new_process(_CHECK, url, how).strip().splitlines()


def test_the_head_constant_is_alembic_s_head() -> None:
    assert migrate.known_revisions()[-1] == migrate.HEAD_REVISION


def test_a_current_schema_is_checked_without_loading_alembic(db: Database) -> None:
    url = db.engine.url.render_as_string(hide_password=False)
    assert _check_in_a_new_process(url, "require") == ["[]"]
    assert _check_in_a_new_process(url, "migrate") == ["unchanged", "[]"]  # the embedded default's check


def test_an_older_schema_takes_alembic_s_path_and_is_refused(db: Database) -> None:
    migrate.migrate_to(db, migrate.known_revisions()[-2])
    with pytest.raises(ConfigurationError, match="run `calsync migrate`"):
        migrate.require_current(db)
    url = db.engine.url.render_as_string(hide_password=False)
    assert _check_in_a_new_process(url, "migrate") == ["upgraded", "['alembic', 'mako']"]
    assert migrate.current_revision(db) == migrate.HEAD_REVISION


def test_a_database_never_migrated_is_refused_with_the_fix(database: str) -> None:
    db = Database(database)
    try:
        with pytest.raises(ConfigurationError, match=r"is at nothing but this calsync needs .*run `calsync migrate`"):
            migrate.require_current(db)
    finally:
        db.dispose()
