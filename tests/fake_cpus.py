"""A pytest plugin for tests (``-p tests.fake_cpus``): diagfuzz sees 16 CPUs, as on a GPU
machine, whatever this one has; so the CPU-dependent defaults can be tested on CI."""

from __future__ import annotations

from diagfuzz.harness import workers

workers.cpu_count = lambda: 16
