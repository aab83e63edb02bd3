"""A database connection that goes silent fails within a bound instead of hanging: libpq's
keepalives and TCP user timeout on every PostgreSQL connection (a partition that drops packets),
and a worker's round-trip watch (ops.dbwatch) where the far side still acknowledges, shown here
through a proxy that stops forwarding without closing. A statement the server is still running
is no silent connection: it is left to finish."""

import os
import socket
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.db.utils import load_backend

from config.settings import database_from_url
from ops import dbwatch
from tests.blackhole_proxy import to_the_test_database

WAIT_SECONDS = 30  # a bound for a stuck test, not a figure


def test_postgresql_connections_carry_keepalives_and_a_tcp_user_timeout_by_default():
    options = database_from_url("postgres://app@db:5432/vitalflow")["OPTIONS"]
    assert options == {
        "connect_timeout": 3,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 30000,
    }


def test_the_bounds_are_overridden_from_the_environment_and_by_the_url(monkeypatch):
    monkeypatch.setenv("DB_KEEPALIVES_IDLE", "60")
    monkeypatch.setenv("DB_TCP_USER_TIMEOUT_MS", "0")
    monkeypatch.setenv("DB_KEEPALIVES", "0")
    options = database_from_url("postgres://app@db/vitalflow?keepalives_count=9")["OPTIONS"]
    assert options["keepalives_idle"] == 60
    assert options["tcp_user_timeout"] == 0
    assert options["keepalives"] == 0
    assert int(options["keepalives_count"]) == 9


@pytest.fixture
def proxy():
    with to_the_test_database() as proxy:
        yield proxy


def _through(proxy):
    """A connection of its own through the proxy, as a worker's would be (this thread's default
    connection is inside the test's transaction)."""
    settings_dict = {**connection.settings_dict, "HOST": "127.0.0.1", "PORT": proxy.port}
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias="proxied")
    wrapper.inc_thread_sharing()  # _in_thread runs its round trips
    return wrapper


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_kernel_applies_the_bounds_to_a_tcp_connection(proxy):
    wrapper = _through(proxy)
    try:
        wrapper.ensure_connection()
        with socket.socket(fileno=os.dup(wrapper.connection.pgconn.socket)) as sock:
            tcp = socket.IPPROTO_TCP
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(tcp, socket.TCP_KEEPIDLE) == 10
            assert sock.getsockopt(tcp, socket.TCP_KEEPINTVL) == 5
            assert sock.getsockopt(tcp, socket.TCP_KEEPCNT) == 3
            assert sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT) == 30000
    finally:
        wrapper.close()


# -- the round-trip watch of worker processes -----------------------------------------------------


@pytest.fixture
def watched(proxy, settings):
    settings.DB_ROUND_TRIP_SECONDS = 1
    dbwatch.watch_start()
    wrapper = _through(proxy)
    wrapper.ensure_connection()  # connection_created: watched from now on
    yield wrapper
    wrapper.close()


def _in_thread(fn):
    """Run fn in a thread; (finished, what it raised). A round trip that hangs does not hang
    the test: it is given WAIT_SECONDS."""
    raised = []

    def run():
        try:
            fn()
        except Exception as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_SECONDS)
    return not thread.is_alive(), raised


def _eventually(check, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _query(wrapper, sql="SELECT 1"):
    with wrapper.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_statement_on_a_silent_connection_fails_instead_of_hanging(watched, proxy):
    assert _query(watched) == (1,)
    proxy.blackhole()
    finished, raised = _in_thread(lambda: _query(watched))
    assert finished, "the statement hung on the silent connection"
    assert [type(exc) for exc in raised] == [OperationalError]
    # The proxy's own thread sees the client's close a moment after the statement fails.
    assert _eventually(lambda: [link.closed_by_client for link in proxy.silenced()] == [True])


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_commit_on_a_silent_connection_fails_instead_of_hanging(watched, proxy):
    watched.set_autocommit(False)
    assert _query(watched) == (1,)  # the transaction is open on the server
    proxy.blackhole()
    finished, raised = _in_thread(watched.commit)
    assert finished, "COMMIT hung on the silent connection"
    assert [type(exc) for exc in raised] == [OperationalError]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_an_idle_connection_is_left_alone_and_works_once_the_partition_heals(watched, proxy):
    assert _query(watched) == (1,)
    proxy.blackhole()
    time.sleep(3 * dbwatch.bound_seconds())  # silent for longer than the bound, but idle
    proxy.heal()
    assert _query(watched) == (1,)
    assert not any(link.closed_by_client for link in proxy.silenced())


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_statement_answered_within_the_bound_is_not_cut(watched):
    assert _query(watched, "SELECT 1 FROM pg_sleep(0.3)") == (1,)


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_statement_the_server_runs_longer_than_the_bound_is_left_to_finish(watched):
    # A daily clean-up's big DELETE says nothing until it is done; the server, asked on a
    # connection of the watch's own, says it is running.
    backend = watched.connection.info.backend_pid
    finished, raised = _in_thread(lambda: _query(watched, "SELECT 1 FROM pg_sleep(3)"))
    assert finished and raised == []
    assert watched.connection.info.backend_pid == backend and _query(watched) == (1,)


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_statement_is_cut_when_the_server_cannot_be_asked_either(watched, proxy):
    # Held new connections: the watch's question times out (a frozen or unreachable server).
    assert _query(watched) == (1,)
    proxy.blackhole(new=True)
    finished, raised = _in_thread(lambda: _query(watched))
    assert finished and [type(exc) for exc in raised] == [OperationalError]
