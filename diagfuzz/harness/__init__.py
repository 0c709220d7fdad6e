"""The pytest harness: the plugin's hooks, the shard engine, run planning, profiles,
progress, findings and the report."""
