"""Row ids drawn without a system call are version 7 (time-ordered) or version 4 (random, for
ids a person reads by their first characters) UUIDs, differ between processes, including a
forked one (the generator is reseeded there), and do not follow random.seed."""

from __future__ import annotations

import os
import uuid

from memory_core.models.columns import random_row_id, row_id


def test_row_ids_are_distinct_version_7_uuids_in_time_order() -> None:
    ids = [row_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert {i.version for i in ids} == {7}
    assert {i.variant for i in ids} == {uuid.RFC_4122}
    stamps = [i.int >> 80 for i in ids]  # the milliseconds: never going back
    assert stamps == sorted(stamps)


def test_random_row_ids_are_distinct_version_4_uuids_apart_in_their_first_characters() -> None:
    ids = [random_row_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert {i.version for i in ids} == {4}
    assert {i.variant for i in ids} == {uuid.RFC_4122}
    assert len({str(i)[:8] for i in ids}) > 19_900  # 8 hex characters: 4.3 billion values


def test_a_row_id_is_the_uuid_the_uuid_module_builds_of_its_number() -> None:
    """Built without UUID's argument checks: equal, hashed, ordered, printed, pickled and
    compared as the module's own UUID of the same number (a database driver sees no other)."""
    import copy
    import pickle

    made_ids = [(row_id(), 7) for _ in range(1_000)] + [(random_row_id(), 4) for _ in range(1_000)]
    for made, version in made_ids:
        own = uuid.UUID(int=made.int)  # 3.11's uuid sets versions 1-5 only: read it back
        assert own.version == version
        assert made.int == own.int and made == own and hash(made) == hash(own)
        assert str(made) == str(own) and made.hex == own.hex and made.bytes == own.bytes
        assert made.is_safe is own.is_safe and type(made) is uuid.UUID
        assert pickle.loads(pickle.dumps(made)) == own and copy.deepcopy(made) == own
        assert uuid.UUID(str(made)) == made and not made < own


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
