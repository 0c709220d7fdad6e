"""The shared example database (``--diagfuzz-database``): writes reach the shared and the
local database, the first error of the shared one switches a worker to its local one and
the report says so, and failures found by one process are replayed first by another.

Without a server: Hypothesis' in-memory and directory databases stand in for Redis
(``tests/shared_directory.py`` for whole runs), so these run everywhere. Against a real
``redis-server`` (``tests/redis_server.py``; skipped, saying why, where the server or the
``redis`` client is missing): Hypothesis' Redis database behind the local one, a server that
stops, never answers or dies mid-run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis.database import DirectoryBasedExampleDatabase, InMemoryExampleDatabase

from diagfuzz.campaign import database as shared
from diagfuzz.campaign import options
from diagfuzz.campaign.database import FallbackDatabase, redact
from diagfuzz.campaign.replay import known_key
from diagfuzz.campaign.report import CampaignTally
from diagfuzz.campaign.worker import WorkerCampaign
from diagfuzz.execution import journal
from diagfuzz.harness.sharding import STREAMS, RunPlan
from tests.campaign_runs import WRONG, suite
from tests.redis_server import (
    RedisServer,
    client_missing,
    find_server,
    free_port,
    server_missing,
)

STAND_IN = "redis://:secret@stand-in:6379/0"  # served by tests/shared_directory.py


class Remote(InMemoryExampleDatabase):
    """A shared database that answers until ``down``, then fails as a server that is gone."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def _call(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("Error 111 connecting to stand-in:6379. Connection refused.")

    def save(self, key: bytes, value: bytes) -> None:
        self._call()
        super().save(key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        self._call()
        return list(super().fetch(key))

    def delete(self, key: bytes, value: bytes) -> None:
        self._call()
        super().delete(key, value)


def _plan(tmp_path: Path, **fields: Any) -> RunPlan:
    return RunPlan(4, "m:a", "ci", 2, 10, 256, "inprocess", None, str(tmp_path / "run"), 1,
                   **fields)


# --- without a server ----------------------------------------------------------------------

def test_writes_reach_both_and_the_first_error_leaves_the_local_copy(tmp_path: Path) -> None:
    remote = Remote()
    db = FallbackDatabase(remote, DirectoryBasedExampleDatabase(str(tmp_path / "local")),
                          "stand-in")
    db.save(b"k", b"one")
    db.save(b"k", b"two")
    db.move(b"k", b"k.secondary", b"two")
    db.save(b"gone", b"x")
    db.delete(b"gone", b"x")
    assert sorted(remote.fetch(b"k")) == [b"one"] and list(remote.fetch(b"k.secondary")) == [
        b"two"] and list(remote.fetch(b"gone")) == []
    remote.save(b"k", b"theirs")  # another worker, another host
    assert sorted(db.fetch(b"k")) == [b"one", b"theirs"] and db.shared
    local = DirectoryBasedExampleDatabase(str(tmp_path / "local"))
    assert list(local.fetch(b"k")) == [b"one"] and list(local.fetch(b"k.secondary")) == [b"two"]
    remote.down = True
    db.save(b"k", b"after")  # no exception: the local database takes it
    assert not db.shared and db.failure is not None and db.failure["op"] == "save"
    assert "ConnectionError" in db.failure["error"] and db.failure["remote_ops"] == 6
    calls = remote.calls
    assert sorted(db.fetch(b"k")) == [b"after", b"one"]  # the local copy, nothing lost
    db.delete(b"k", b"one")
    assert remote.calls == calls and db.remote_ops == 6  # the shared one is not asked again
    assert "local only" in repr(db)


def test_a_worker_reports_its_fallback_once(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    remote = Remote()
    monkeypatch.setattr(shared, "redis_database", lambda url: remote)
    plan = _plan(tmp_path, database=STAND_IN)
    worker = WorkerCampaign(plan, "gw3", tmp_path / "gw3")
    assert isinstance(worker.database, FallbackDatabase) and worker.payload() == {}
    worker.database.save(b"k", b"v")
    remote.down = True
    worker.database.save(b"k", b"w")
    first = worker.payload()
    assert first["campaign"]["fallback"]["worker"] == "gw3", first
    assert first["campaign"]["fallback"]["op"] == "save" and worker.payload() == {}
    tally = CampaignTally(plan)
    tally.add(first)
    header = tally.header()["database"]
    assert header["url"] == "redis://:***@stand-in:6379/0" and header["fell_back"]
    assert any("database: gw3 fell back to its local database" in line
               for line in tally.lines())
    # Without --diagfuzz-database a worker keeps its directory database alone.
    alone = WorkerCampaign(_plan(tmp_path), "main", tmp_path / "main")
    assert isinstance(alone.database, DirectoryBasedExampleDatabase)
    assert CampaignTally(_plan(tmp_path)).header() == {"database": None}


def test_known_failures_are_kept_per_stream_and_strategy(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert known_key(STREAMS[0], plan) == known_key(STREAMS[0], _plan(tmp_path))
    assert known_key(STREAMS[0], plan) != known_key(STREAMS[-1], plan)
    narrowed = RunPlan(4, "m:a", "ci", 2, 10, 512, "inprocess", None, "run", 1)
    assert known_key(STREAMS[0], plan) != known_key(STREAMS[0], narrowed)


def test_urls_are_checked_and_passwords_never_shown(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    assert redact("redis://user:pw@h:1/0") == "redis://user:***@h:1/0"
    assert redact("redis://h:1/0") == "redis://h:1/0" and redact(None) is None

    class Options:
        def getoption(self, name: str, default: object = None) -> object:
            return {"diagfuzz_database": "redis://:pw@h:6379/0"}.get(name, default)

    monkeypatch.setattr(shared, "client_installed", lambda: False)
    with pytest.raises(pytest.UsageError, match=r"pip install 'diagfuzz\[redis\]'") as info:
        options.database(cast(pytest.Config, Options()))
    assert "pw" not in str(info.value)
    # The whole suite: pytest's usage error (exit 4) before any worker starts.
    code = pytest.main(["-p", "diagfuzz", "--pyargs", "diagfuzz.suite", "-p",
                        "no:cacheprovider", f"--diagfuzz-root={tmp_path}",
                        "--diagfuzz-database=redis://localhost:6379/0"])
    err = capsys.readouterr().err
    assert code == 4 and "needs the redis client: pip install 'diagfuzz[redis]'" in err, err


def _known(directory: Path, report: dict[str, Any], stream: str) -> int:
    """How many known failures of ``stream`` the shared database holds for ``report``'s run."""
    plan = RunPlan.from_dict({f.name: report[f.name] for f in fields(RunPlan)
                              if f.name != "database"})
    return len(set(DirectoryBasedExampleDatabase(str(directory)).fetch(
        known_key(stream, plan))))


def _first_checked(report: dict[str, Any], stream: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` Cases the worker checked in ``stream``'s first shard."""
    path = journal.journal_path(Path(report["run_dir"]) / "journal", "main")
    records = [r for r in journal.read(path) if r["type"] == "case"
               and r["test_id"].startswith(f"diagfuzz/suite.py::{stream}[")]
    first = [r for r in records if r["test_id"] == records[0]["test_id"]]
    return [r["case"] for r in first[:count]]


def test_a_failure_found_by_one_process_is_replayed_first_by_another(tmp_path: Path) -> None:
    env = {"DIAGFUZZ_TEST_SHARED_DIR": str(tmp_path / "shared")}
    args = ("-p", "tests.shared_directory", *WRONG, "--diagfuzz-max-members=1",
            f"--diagfuzz-database={STAND_IN}")
    code, out, first = suite(tmp_path / "a.json", *args, "--diagfuzz-seed=4",
                             "--diagfuzz-budget=20", root=tmp_path / "a", env=env)
    assert code == 1 and first["findings"], out
    found = {f["describe"]: f for f in first["findings"]}
    assert first["database"]["fallbacks"] == [] and first["database"]["known_replayed"] == 0
    assert "database: redis://:***@stand-in:6379/0 shared" in out and "secret" not in out
    assert "secret" not in json.dumps(first)
    # Another seed, a fresh local database and a budget too small to find anything (a
    # shard's first family is the simplest, offset 0): what it finds, it replayed.
    code, out, second = suite(tmp_path / "b.json", *args, "--diagfuzz-seed=5",
                              "--diagfuzz-budget=3", root=tmp_path / "b", env=env)
    assert code == 1, out
    # Each shard remembers the family of each finding it shrank (shards that shrank one
    # bug to one family share an entry); every entry is replayed, and fails again.
    known = {stream: _known(tmp_path / "shared", first, stream) for stream in STREAMS}
    database = second["database"]
    assert database["known_replayed"] == sum(known.values()) >= len(found), (known, database)
    assert database["known_failing"] == database["known_replayed"], database
    assert {f["describe"] for f in second["findings"]} >= set(found), out
    # Replayed first: in each stream, the worker's first Cases (as many as the stream's
    # known failures) hold the representatives the other process found there (families of
    # one Case: --diagfuzz-max-members=1).
    for stream in {f["test_ids"][0].split("::")[1].split("[")[0] for f in found.values()}:
        theirs = [f["case"] for f in found.values() if f"::{stream}[" in f["test_ids"][0]]
        replayed = list(map(json.dumps, _first_checked(second, stream, known[stream])))
        assert all(json.dumps(case) in replayed for case in theirs), stream


# --- against a real Redis server -------------------------------------------------------------

@pytest.fixture(scope="session")
def redis_binary() -> str:
    """The redis-server binary (and the client), or a skip that says which is missing."""
    missing = server_missing()
    if missing:
        pytest.skip(missing)
    binary = find_server()
    assert binary is not None
    return binary


@pytest.fixture
def redis_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary, tmp_path / "redis").start()
    yield server
    server.stop()


def _fallback(url: str, local: Path) -> FallbackDatabase:
    return FallbackDatabase(shared.redis_database(url),
                            DirectoryBasedExampleDatabase(str(local)), redact(url) or "")


def test_redis_writes_reach_both_and_a_stopped_server_leaves_the_local_copy(
        redis_server: RedisServer, tmp_path: Path) -> None:
    db = _fallback(redis_server.url, tmp_path / "local")
    db.save(b"k", b"one")
    db.save(b"k", b"two")
    db.move(b"k", b"k.secondary", b"two")
    db.save(b"gone", b"x")
    db.delete(b"gone", b"x")
    other = shared.redis_database(redis_server.url)  # another worker, another host
    assert sorted(other.fetch(b"k")) == [b"one"] and list(other.fetch(b"k.secondary")) == [
        b"two"]
    assert list(other.fetch(b"gone")) == []
    other.save(b"k", b"theirs")
    assert sorted(db.fetch(b"k")) == [b"one", b"theirs"] and db.shared
    redis_server.stop()
    started = time.monotonic()
    db.save(b"k", b"after")  # no exception: the local database takes it
    assert time.monotonic() - started < 5
    assert db.failure is not None and db.failure["op"] == "save"
    assert "Connection" in db.failure["error"] and db.failure["remote_ops"] == 6
    assert sorted(db.fetch(b"k")) == [b"after", b"one"]  # the local copy, nothing lost
    assert db.remote_ops == 6  # the server is not asked again


def test_unreachable_and_slow_servers_fall_back_at_once(tmp_path: Path) -> None:
    missing = client_missing()
    if missing:
        pytest.skip(missing)
    started = time.monotonic()
    db = _fallback(f"redis://127.0.0.1:{free_port()}/0", tmp_path / "a")
    assert list(db.fetch(b"k")) == [] and db.failure is not None
    assert db.failure["op"] == "fetch" and "ConnectionError" in db.failure["error"]
    assert time.monotonic() - started < 3
    # A server that accepts and never answers: the socket timeout (the URL's own, shorter
    # than the default) ends the wait.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        accepted: list[socket.socket] = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]),
                                  daemon=True)
        thread.start()
        db = _fallback(f"redis://127.0.0.1:{listener.getsockname()[1]}/0?socket_timeout=0.5",
                       tmp_path / "b")
        started = time.monotonic()
        db.save(b"k", b"v")
        assert db.failure is not None and "Timeout" in db.failure["error"]
        assert time.monotonic() - started < 3
        assert list(db.fetch(b"k")) == [b"v"]
        for sock in accepted:
            sock.close()


def test_a_server_killed_mid_run_leaves_the_run_whole(redis_binary: str,
                                                      tmp_path: Path) -> None:
    server = RedisServer(redis_binary, tmp_path / "redis").start()
    try:
        code, out, report = suite(
            tmp_path / "r.json", *WRONG, "--impl", "tests.faulty.kills_server:impl",
            "--diagfuzz-seed=4", "--diagfuzz-budget=60",
            f"--diagfuzz-database={server.url}", env={"DIAGFUZZ_TEST_KILL_PID": str(server.pid)})
        assert server.process is not None and server.process.wait(timeout=10) is not None
    finally:
        server.stop()
    assert code == 1 and report["findings"], out  # the run completed, with its findings
    database = report["database"]
    (fallback,) = database["fallbacks"]
    assert database["fell_back"] and fallback["worker"] == "main"
    assert fallback["remote_ops"] >= 1, fallback  # the server served the run before it died
    assert "Connection" in fallback["error"] or "Timeout" in fallback["error"], fallback
    # Nothing lost: every signature's family was saved, found again and shrunk locally.
    assert all(f["shrunk"] and not f["flaky"] for f in report["findings"]), report["findings"]
    assert "database: main fell back to its local database" in out
    assert "every example it saved is there" in out
