"""Row ids drawn without a system call are still version 4 UUIDs, differ between processes,
including a forked one (the generator is reseeded there), and do not follow random.seed."""

from __future__ import annotations

import os
import uuid

from memory_core.models.columns import row_id


def test_row_ids_are_distinct_version_4_uuids() -> None:
    ids = [row_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert {i.version for i in ids} == {4}
    assert {i.variant for i in ids} == {uuid.RFC_4122}


def test_seeding_the_global_generator_does_not_repeat_ids() -> None:
    import random

    random.seed(7)
    first = row_id()
    random.seed(7)  # as Hypothesis does before each example
    assert row_id() != first


def test_a_forked_process_draws_other_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, b"".join(row_id().bytes for _ in range(8)))
        os._exit(0)
    os.close(write)
    child = os.read(read, 16 * 8)
    os.close(read)
    os.waitpid(pid, 0)
    mine = b"".join(row_id().bytes for _ in range(8))
    assert len(child) == 16 * 8 and child != mine
