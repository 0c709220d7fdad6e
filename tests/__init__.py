"""diagfuzz's tests (a package, so ``tests.faulty.x:impl`` is importable as an --impl)."""
