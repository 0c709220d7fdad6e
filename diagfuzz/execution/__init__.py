"""Running Cases: executor processes (parent side, child side, their messages), fan-out
over several executors, the write-ahead journal, warm-up and crash attribution."""
