"""Deliberately faulty implementations, for testing isolation, classification and the gate.

Each is aten (registration off) plus one fault, so every other Case passes:
``tests.faulty.abort:impl`` aborts the process when offset == 1; ``tests.faulty.hang:impl``
never returns when offset == -1; ``tests.faulty.wrong:impl`` flips a result bit when
offset > 0; ``tests.faulty.flaky:impl`` flips a result bit about one call in three;
``tests.faulty.poison:impl`` simulates a sticky CUDA error when offset == 1;
``tests.faulty.tail_block:impl`` leaves the last partial 128-element block of a
diagonal_backward diagonal unwritten (only boundary Cases reach it);
``tests.faulty.int32_index:impl`` is a Triton kernel whose element index is int32 (only
the huge tier reaches it); ``tests.faulty.three_way:impl`` gives wrong diagonal values
behind three input properties at once and ``tests.faulty.new_user_fast_path:impl`` for a
transposed or sliced 2-D input (the covering Cases reach both).
"""
