"""Fuzz campaigns over several GPUs and several hosts.

A campaign is one run seed split into N partitions (``--diagfuzz-partition=i/N``), each a
deterministic, disjoint part of the run's shard items, run on its own host
(``diagfuzz.campaign.partition``); ``diagfuzz merge`` joins the partitions' reports into one
report and one verdict (``diagfuzz.campaign.merge``). A shared example database
(``--diagfuzz-database=redis://...``, ``diagfuzz.campaign.database``) lets every host replay
the failures the others found (``diagfuzz.campaign.replay``), and falls back to each
worker's local database when the server is slow or gone.

The redis client is an optional extra (``diagfuzz[redis]``): only
``diagfuzz.campaign.database`` imports it, and only when ``--diagfuzz-database`` names a
Redis server; the plugin imports the rest of this package in every run.
"""
