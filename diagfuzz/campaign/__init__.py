"""Fuzz campaigns over several GPUs and several hosts: what a campaign adds to a run.

A campaign is one run seed split into N partitions (``--diagfuzz-partition=i/N``), each a
deterministic, disjoint part of the run's shard items, run on its own host
(``diagfuzz.campaign.partition``). A shared example database
(``--diagfuzz-database=redis://...``, ``diagfuzz.campaign.database``) lets every host replay
the failures the others found (``diagfuzz.campaign.replay``), and falls back to each
worker's local database when the server is slow or gone. The pytest plugin uses this
package in every run; it imports nothing of the harness. ``diagfuzz merge`` joins the
partitions' reports into one report and one verdict, with the rest of the ``diagfuzz``
command (``diagfuzz.gate.merge``).

The redis client is an optional extra (``diagfuzz[redis]``): only
``diagfuzz.campaign.database`` imports it, and only when ``--diagfuzz-database`` names a
Redis server.
"""
