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
