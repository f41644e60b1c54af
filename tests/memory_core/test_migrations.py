"""Alembic migrations: up, down and up again, and the models match the migrated schema."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from memory_core import db


def test_down_and_up_again(settings, engine) -> None:
    db.upgrade(settings, "head")
    assert db.current_revision(engine) is not None
    from alembic import command

    command.downgrade(db.alembic_config(settings.sqlalchemy_url), "base")
    assert "card" not in inspect(engine).get_table_names()
    db.upgrade(settings)
    assert {"card", "card_evidence", "card_version", "card_use", "trajectory"} <= set(
        inspect(engine).get_table_names()
    )


def test_models_match_the_migrations(settings, engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


def test_card_rewrites_skip_key_checks_and_keep_page_room(settings, engine) -> None:
    """0009: history and archive rows have no foreign key; card pages keep 20 % free
    (PostgreSQL); the superseded_by index holds only superseded cards."""
    insp = inspect(engine)
    assert insp.get_foreign_keys("card_version") == []
    assert insp.get_foreign_keys("card_archive") == []
    assert insp.get_foreign_keys("card_evidence") != []  # the others keep theirs
    (by,) = [i for i in insp.get_indexes("card") if i["name"] == "ix_card_superseded_by"]
    where = by["dialect_options"].get(f"{engine.dialect.name}_where")
    assert "superseded_by IS NOT NULL" in str(where)
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            options = conn.exec_driver_sql(
                "SELECT reloptions FROM pg_class WHERE relname = 'card'"
            ).scalar_one()
        assert options == ["fillfactor=80"]
