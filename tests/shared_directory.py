"""A pytest plugin of the campaign tests (``-p tests.shared_directory``): the shared example
database that ``--diagfuzz-database=redis://...`` names is the directory database
``DIAGFUZZ_TEST_SHARED_DIR`` instead of a Redis server.

Everything else of a shared database runs as with a server: the option's checks, each
worker's ``FallbackDatabase`` (the shared database behind its local one), known failures
remembered and replayed first, the report's ``database``. So the campaign tests exercise
that path where neither ``redis-server`` nor the ``redis`` client is installed.
"""

from __future__ import annotations

import os

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from diagfuzz.campaign import database


def _shared_directory(url: str) -> ExampleDatabase:
    return DirectoryBasedExampleDatabase(os.environ["DIAGFUZZ_TEST_SHARED_DIR"])


def _any_url(url: str) -> str:
    return url


database.redis_database = _shared_directory
database.check_url = _any_url
