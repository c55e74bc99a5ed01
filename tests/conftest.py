"""Shared fixtures: real Redis, PostgreSQL and RabbitMQ when the machine has them, embedded Redis and
SQLite otherwise. CI sets ``TEST_REQUIRE_SERVICES`` (e.g. ``redis,postgresql,rabbitmq``) so a missing
service fails the run instead of silently switching to the fallback.

Every test gets its own Redis namespace, its own SQLite file or PostgreSQL schema and, on RabbitMQ,
its own queue, so tests never see each other's data and never flush a shared server.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest
import redis

from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.store import migrate
from calsync.core.store.database import Database
from calsync_emulators.harness.scratch import rabbitmq_queues, remove_queues
from tests.support import free_port, make_settings

# The fixtures that start the provider emulators (calsync-emulators, emulators/ in this repository).
pytest_plugins = ["calsync_emulators.pytest_plugin"]
_DATA_HOME = pytest.StashKey[Path]()  # the test process' XDG_DATA_HOME


def pytest_configure(config: pytest.Config) -> None:
    """Point calsync's default data dir at a directory of this test process: no test reads or writes the user's.

    A command run without ``CALSYNC_DATA_DIR`` uses ``$XDG_DATA_HOME/calsync``, and a queue command leaves
    its embedded Redis running there for the next process (by design); in the user's own directory that
    left a daemon behind and mixed the suite's data with theirs.
    """
    home = Path(tempfile.mkdtemp(prefix="calsync-tests-data-"))
    os.environ["XDG_DATA_HOME"] = str(home)
    config.stash[_DATA_HOME] = home


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the embedded Redis a test left in the default data dir, and remove the directory."""
    home = config.stash.get(_DATA_HOME, None)
    if home is None:
        return
    EmbeddedRedis(home / "calsync").stop()
    shutil.rmtree(home, ignore_errors=True)


REQUIRED = {s.strip() for s in os.environ.get("TEST_REQUIRE_SERVICES", "").split(",") if s.strip()}
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"

for _name in [n for n in os.environ if n.startswith("CALSYNC_")]:
    del os.environ[_name]  # tests configure calsync explicitly, never from the developer's shell


def _unavailable(service: str, why: str) -> None:
    if service in REQUIRED:
        pytest.fail(f"{service} is required by TEST_REQUIRE_SERVICES but unavailable: {why}")


def missing(name: str, why: str) -> NoReturn:
    """Fail when TEST_REQUIRE_SERVICES names the service or tool (CI), else skip: a developer machine without
    it still runs everything else."""
    _unavailable(name, why)
    pytest.skip(f"{name} is unavailable: {why}")


@pytest.fixture(scope="session")
def promtool_binary() -> str:
    """The promtool binary (Debian package prometheus)."""
    found = shutil.which("promtool")
    if found is None:
        missing("promtool", "not installed (Debian package prometheus)")
    return found


@pytest.fixture(scope="session")
def chromium_binaries() -> tuple[str, str]:
    """Debian's chromium and its chromedriver (packages chromium, chromium-driver), for the console's browser tests."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        missing("chromium", "not installed (Debian packages chromium and chromium-driver)")
    return browser, driver


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The machine's Redis on 6379, or an embedded redis-server for the session."""
    url = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        yield url
        return
    except redis.RedisError as exc:
        _unavailable("redis", str(exc))
    embedded = EmbeddedRedis(tmp_path_factory.mktemp("embedded-redis"))
    yield embedded.ensure()
    embedded.stop()


@pytest.fixture(scope="session")
def private_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this test process' own, for tests that change server-wide state (SCRIPT FLUSH).

    On the shared server a flush makes another process' test meet NOSCRIPT where it expects none.
    """
    embedded = EmbeddedRedis(tmp_path_factory.mktemp("private-redis"))
    yield embedded.ensure()
    embedded.stop()


@pytest.fixture(scope="session")
def postgres_available() -> bool:
    """Whether the machine's PostgreSQL answers."""
    try:
        psycopg.connect(POSTGRES_DSN, connect_timeout=2).close()
        return True
    except psycopg.Error as exc:
        _unavailable("postgresql", str(exc))
        return False


@pytest.fixture(scope="session")
def rabbitmq_available() -> bool:
    """Whether the machine's RabbitMQ answers."""
    import pika

    try:
        pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL + "?connection_attempts=1&socket_timeout=2")).close()
        return True
    except Exception as exc:
        _unavailable("rabbitmq", str(exc))
        return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist the ``slow`` tests are handed out first, so the short ones fill in around them
    instead of one long test running alone at the end (every worker collects, in this same order)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``database`` is parametrized over both backends for tests marked ``both_databases``."""
    if "database" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        kinds = ["sqlite", "postgresql"] if marked("both_databases") is not None else ["default"]
        if marked("postgresql_only") is not None:
            kinds = ["postgresql"]
        metafunc.parametrize("database", kinds, indirect=True)
    if "broker_kind" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        brokers = ["redis", "rabbitmq"] if marked("both_brokers") is not None else ["redis"]
        metafunc.parametrize("broker_kind", ["rabbitmq"] if marked("rabbitmq_only") else brokers, indirect=True)


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Path, postgres_available: bool) -> Iterator[str]:
    """A database URL private to this test: a fresh PostgreSQL schema, or a fresh SQLite file."""
    kind = request.param
    if kind == "default":
        kind = "postgresql" if postgres_available else "sqlite"
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'calsync.sqlite3'}"
        return
    if not postgres_available:
        missing("postgresql", "not reachable")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def db(database: str) -> Iterator[Database]:
    """A migrated database of its own for this test (both backends under ``both_databases``)."""
    built = Database(database)
    migrate.migrate_to(built)
    yield built
    built.dispose()


@pytest.fixture
def broker_kind(request: pytest.FixtureRequest, rabbitmq_available: bool) -> str:
    """Which broker this test runs on."""
    if request.param == "rabbitmq" and not rabbitmq_available:
        missing("rabbitmq", "not reachable")
    return str(request.param)


@pytest.fixture
def namespace(redis_url: str) -> Iterator[str]:
    """A Redis namespace private to this test, deleted afterwards."""
    name = f"cst{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{name}:*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def settings_factory(tmp_path: Path, redis_url: str, database: str, namespace: str, broker_kind: str) -> Iterator[Any]:
    """Builds test-scale settings for this test's isolated resources (overrides as keyword arguments)."""
    queue = f"cal{uuid.uuid4().hex[:8]}" if broker_kind == "rabbitmq" else "calendar"
    broker_url = RABBITMQ_URL if broker_kind == "rabbitmq" else redis_url

    def build(**overrides: Any) -> Any:
        isolated = {
            "broker_url": broker_url,
            "redis_url": redis_url,
            "database_url": database,
            "redis_namespace": namespace,
            "queue": queue,
            "metrics_port": free_port(),  # a worker refuses to start when its metrics port is taken
        }
        return make_settings(tmp_path, **{**isolated, **overrides})

    yield build
    if broker_kind == "rabbitmq":
        remove_queues(RABBITMQ_URL, rabbitmq_queues(queue))


@pytest.fixture
def pipeline(settings_factory: Any) -> Iterator[Any]:
    """A worker-side runtime on this test's resources, with the memory provider."""
    from tests.support import Pipeline

    built = Pipeline(settings_factory())
    yield built
    built.close()
