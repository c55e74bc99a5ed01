"""Redis Sentinel URLs: read in one place, every Redis client of a process made from the Sentinel's master,
and a bad URL refused at start-up naming its variable without echoing its password."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.sentinel import SentinelConnectionPool

from calsync.core.clients import open_redis, resolve_redis_url
from calsync.core.config.redis_url import SentinelUrl, parse_sentinel_url, redis_address, redis_client
from calsync.core.config.settings import Settings, broker_kind, load_settings
from calsync.core.messaging.broker import connect_broker
from calsync.core.model.errors import ConfigurationError

URL = "redis+sentinel://:s3cret@10.0.0.1:26379,sentinel-b,[::1]:26380/mymaster/2?sentinel_password=sp"

_hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(str),
)
# URL syntax characters drawn often: each must come back decoded exactly once.
_pieces = st.sampled_from(["%41", "%", "+", "@", ":", "/", "&", "=", "?", "#", " "])
_secrets = st.none() | st.lists(_pieces | st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12).map(
    "".join
)


def _member(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _url(where: SentinelUrl) -> str:
    userinfo = ""
    if where.password is not None:
        userinfo = f"{quote(where.username or '', safe='')}:{quote(where.password, safe='')}@"
    query = "&".join(
        f"{name}={quote(value, safe='')}"
        for name, value in (
            ("sentinel_username", where.sentinel_username),
            ("sentinel_password", where.sentinel_password),
        )
        if value is not None
    )
    members = ",".join(_member(host, port) for host, port in where.sentinels)
    scheme = "rediss+sentinel" if where.tls else "redis+sentinel"
    return f"{scheme}://{userinfo}{members}/{where.service}/{where.db}" + (f"?{query}" if query else "")


@given(
    st.builds(
        SentinelUrl,
        sentinels=st.lists(st.tuples(_hosts, st.integers(1, 65535)), min_size=1, max_size=4).map(tuple),
        service=st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True),
        db=st.integers(0, 15),
        username=_secrets,
        password=_secrets,
        sentinel_username=_secrets,
        sentinel_password=_secrets,
        tls=st.booleans(),
    ).filter(lambda where: where.password is not None or where.username is None)
)
def test_every_sentinel_url_reads_back_as_what_it_was_written_from(where: SentinelUrl) -> None:
    assert parse_sentinel_url(_url(where)) == where


@given(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=60),
    st.sampled_from(["CALSYNC_BROKER_URL", "CALSYNC_REDIS_URL"]),
)
def test_any_sentinel_url_is_read_or_refused_naming_its_variable_and_never_its_password(
    tail: str, variable: str
) -> None:
    url = f"redis+sentinel://:hunter2-secret@{tail}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(variable, url)
        try:
            settings = load_settings()
        except ConfigurationError as refused:
            assert variable in str(refused) and "hunter2" not in str(refused)
        else:
            where = parse_sentinel_url(url)
            assert where.sentinels and where.service
            assert broker_kind(url) == "redis" and settings.model_dump()[variable[8:].lower()] == url


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+sentinel://h1:26379,h2:26379", "must name the master"),
        ("redis+sentinel://h1:26379/", "must name the master"),
        ("redis+sentinel://h1:26379/my master/0", "must name the master"),
        ("redis+sentinel://h1:26379/mymaster/zero", "must name the master"),
        ("redis+sentinel://h1:26379,,h2/mymaster", "each sentinel must be host or host:port"),
        ("redis+sentinel:///mymaster", "each sentinel must be host or host:port"),
        ("redis+sentinel://h1:0/mymaster", "port 1-65535"),
        ("redis+sentinel://h1:99999/mymaster", "port 1-65535"),
        ("redis+sentinel://h1/mymaster?socket_timeout=1", "unknown option 'socket_timeout'"),
        ("sentinel://h1/mymaster", "must start with redis://, rediss://, unix:// or redis+sentinel://"),
    ],
)
def test_a_bad_sentinel_url_says_what_is_wrong(monkeypatch: pytest.MonkeyPatch, url: str, complaint: str) -> None:
    monkeypatch.setenv("CALSYNC_REDIS_URL", url)
    with pytest.raises(ConfigurationError, match="CALSYNC_REDIS_URL") as caught:
        load_settings()
    assert complaint in str(caught.value)


def test_the_url_names_sentinels_master_database_and_both_passwords() -> None:
    assert parse_sentinel_url(URL) == SentinelUrl(
        (("10.0.0.1", 26379), ("sentinel-b", 26379), ("::1", 26380)), "mymaster", 2, None, "s3cret", None, "sp"
    )
    assert redis_address(URL) == "mymaster via sentinel 10.0.0.1:26379,sentinel-b:26379,::1:26380"
    assert parse_sentinel_url("rediss+sentinel://h/m").tls
    escaped = parse_sentinel_url("redis+sentinel://:p%2541%40@h/m?sentinel_password=s%2541%26")
    assert (escaped.password, escaped.sentinel_password) == ("p%41@", "s%41&")  # decoded once


def _pool_of(url: str, client: object) -> SentinelConnectionPool:
    pool = getattr(client, "connection_pool", None)
    assert isinstance(pool, SentinelConnectionPool), f"{url}: {pool!r}"
    return pool


def test_the_client_is_the_sentinels_master_with_the_urls_credentials() -> None:
    client = redis_client(URL, health_check_interval=30)  # no connection is opened until a command
    pool = _pool_of(URL, client)
    assert (pool.service_name, pool.is_master) == ("mymaster", True)
    assert pool.connection_kwargs["db"] == 2 and pool.connection_kwargs["password"] == "s3cret"
    assert pool.connection_kwargs["health_check_interval"] == 30
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26379, 26379, 26380]
    assert {s.connection_pool.connection_kwargs["password"] for s in sentinels} == {"sp"}


def test_the_broker_and_every_other_client_of_a_process_come_from_the_sentinel(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, broker_url=URL)
    redis_url = resolve_redis_url(settings, URL)
    assert redis_url == URL  # locks, traffic, markers, stats and heartbeats: the broker's Redis by default
    broker = connect_broker(URL, settings)
    try:
        _pool_of(URL, broker.client)  # type: ignore[attr-defined]  # Dramatiq's RedisBroker, given it by client=
        _pool_of(URL, open_redis(redis_url))
    finally:
        broker.close()
