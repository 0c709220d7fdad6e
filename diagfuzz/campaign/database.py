"""A shared example database that never loses an example: Redis, backed by the local one.

``--diagfuzz-database=redis://HOST:PORT/DB`` gives every worker of every host one
Hypothesis database: Hypothesis' own ``RedisExampleDatabase`` (the ``redis`` client is an
optional extra, ``diagfuzz[redis]``; nothing imports it unless the option is given).

What the shard engine needs from a database (``diagfuzz.harness.shard``): phase 2 saves a
failing family's choice sequence (``diagfuzz.adapters.hypothesis.save_for_replay``) and at
once runs a Hypothesis test that fetches and replays it, then saves each smaller failure
while shrinking. An example saved and not found again is a finding reported unshrunk, as
flaky. So ``FallbackDatabase`` writes every save, delete and move to the worker's local
directory database as well, and reads the union of both. The first error of the server
(refused, reset, a reply slower than the socket timeout) switches it to the local database
for the rest of the run: later operations do not wait on a server that has gone, the local
copy already holds everything this worker saved, and the event is kept for the run's
report.

Socket timeouts are short (``SOCKET_TIMEOUT`` seconds, no retries) unless the URL sets its
own (``?socket_timeout=5``): a slow server costs one timeout, once.
"""

from __future__ import annotations

import importlib.util
import time
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hypothesis.database import ExampleDatabase

#: Seconds a connection attempt or a reply may take before the server counts as failed.
SOCKET_TIMEOUT = 2.0
#: Prefix of diagfuzz's keys on the server, apart from other Hypothesis users of it.
KEY_PREFIX = b"diagfuzz-example:"
SCHEMES = ("redis", "rediss", "unix")


class DatabaseError(ValueError):
    """A ``--diagfuzz-database`` value that cannot be used (a usage error)."""


def client_installed() -> bool:
    """Whether the ``redis`` client (``diagfuzz[redis]``) can be imported."""
    return importlib.util.find_spec("redis") is not None


def check_url(url: str) -> str:
    """``url`` if it names a Redis server and the client is installed."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in SCHEMES:
        raise DatabaseError(f"--diagfuzz-database={redact(url)!r}: give a Redis URL, "
                            "redis://HOST:PORT/DB (or rediss://, unix://PATH)")
    if not client_installed():
        raise DatabaseError(f"--diagfuzz-database={redact(url)}: needs the redis client: "
                            "pip install 'diagfuzz[redis]'")
    from redis.connection import parse_url

    try:
        parse_url(url)
    except ValueError as exc:
        raise DatabaseError(f"--diagfuzz-database={redact(url)!r}: {exc}") from exc
    return url


def redact(url: str | None) -> str | None:
    """``url`` without its password: what reports and terminals show."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def redis_database(url: str) -> ExampleDatabase:
    """Hypothesis' ``RedisExampleDatabase`` on ``url``, with short timeouts, no retries."""
    import redis
    from hypothesis.extra.redis import RedisExampleDatabase
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis.from_url(  # the URL's own options win over these
        url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 0))
    return RedisExampleDatabase(client, key_prefix=KEY_PREFIX)


def open_database(url: str | None, local_dir: Path) -> ExampleDatabase:
    """The database of one worker: its directory database, or ``url``'s behind it."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    local = DirectoryBasedExampleDatabase(str(local_dir))
    if url is None:
        return local
    return FallbackDatabase(redis_database(url), local, redact(url) or "")


class FallbackDatabase(ExampleDatabase):
    """``remote`` while it answers, with every write also in ``local``; ``local`` alone
    after the remote's first error (``failure`` then says what happened and when)."""

    def __init__(self, remote: ExampleDatabase, local: ExampleDatabase, label: str) -> None:
        super().__init__()
        self.remote = remote
        self.local = local
        self.label = label
        self.started = time.monotonic()
        self.failure: dict[str, Any] | None = None
        self.remote_ops = 0

    def __repr__(self) -> str:
        state = "local only" if self.failure else "shared"
        return f"FallbackDatabase({self.label}, {self.local!r}, {state})"

    @property
    def shared(self) -> bool:
        """Whether the remote database still serves this worker."""
        return self.failure is None

    def _remote(self, op: str, call: Any) -> Any:
        if self.failure is not None:
            return None
        try:
            result = call()
        except Exception as exc:  # any failure of the remote: the local copy serves
            self.failure = {
                "op": op, "error": f"{type(exc).__name__}: {exc}"[:300],
                "after_s": round(time.monotonic() - self.started, 3),
                "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "remote_ops": self.remote_ops,
            }
            return None
        self.remote_ops += 1
        return result

    def save(self, key: bytes, value: bytes) -> None:
        self.local.save(key, value)
        self._remote("save", lambda: self.remote.save(key, value))

    def fetch(self, key: bytes) -> Iterable[bytes]:
        # RedisExampleDatabase.fetch is a generator: list() makes it talk to the server here.
        remote = self._remote("fetch", lambda: list(self.remote.fetch(key))) or []
        return list(dict.fromkeys([*remote, *self.local.fetch(key)]))

    def delete(self, key: bytes, value: bytes) -> None:
        self.local.delete(key, value)
        self._remote("delete", lambda: self.remote.delete(key, value))

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.local.move(src, dest, value)
        self._remote("move", lambda: self.remote.move(src, dest, value))
