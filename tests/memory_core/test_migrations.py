"""Alembic migrations: up, down and up again, and the models match the migrated schema."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from memory_core import db
from memory_core.models.card import FIRST_TOOL_SQL
from memory_core.schema_new import head_revision
from memory_core.settings import Settings
from tests.helpers.serve import add_card


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


# indexes the migrations add beyond the models (spelt per database), checked on their own
BEYOND_MODELS = {"ix_card_first_tool"}


def test_models_match_the_migrations(settings, engine) -> None:
    with engine.connect() as conn:
        assert _model_diff(conn) == []


def _model_diff(conn) -> list:
    def compared(_obj, name, _type, _reflected, _to) -> bool:
        return name not in BEYOND_MODELS

    ctx = MigrationContext.configure(conn, opts={"include_object": compared})
    return compare_metadata(ctx, SQLModel.metadata)


def test_a_cards_first_tool_is_read_through_its_index(settings, engine) -> None:
    """0033: the first tool spelt as the siblings query spells it is what the index holds."""
    expr = FIRST_TOOL_SQL[engine.dialect.name]
    sql = f"SELECT card_id FROM card WHERE namespace = 'n' AND {expr} = 'search'"
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")  # an empty table reads whole
            plan = " ".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + sql))
        else:
            plan = " ".join(r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    assert "ix_card_first_tool" in plan, plan


def test_the_first_tool_index_is_spelt_as_the_models_query_it() -> None:
    """0033 keeps its own copy of the index expression; the queries' spelling must equal it
    (a changed spelling needs a revision that rebuilds the index)."""
    import importlib.util

    path = Path(db.__file__).parent / "migrations" / "versions" / "0033_console_list_indexes.py"
    spec = importlib.util.spec_from_file_location("rev_0033", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.FIRST_TOOL_SQL == FIRST_TOOL_SQL


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


def _schema(engine) -> dict[str, object]:
    """Everything the schema holds, by name: columns, keys, indexes, triggers, table options."""
    insp = inspect(engine)
    out: dict[str, object] = {}
    for t in insp.get_table_names():
        out[t] = {
            "columns": {
                c["name"]: (str(c["type"]), c["nullable"], str(c.get("default")))
                for c in insp.get_columns(t)
            },
            "pk": insp.get_pk_constraint(t)["constrained_columns"],
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"], str(f.get("options")))
                for f in insp.get_foreign_keys(t)
            ),
            "indexes": sorted(
                (
                    i["name"],
                    tuple(i["column_names"]),
                    bool(i["unique"]),
                    str(i.get("dialect_options", {}).get(f"{engine.dialect.name}_where")),
                )
                for i in insp.get_indexes(t)
            ),
            "unique": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(t)
            ),
        }
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
            )
            out["triggers"] = [tuple(r) for r in rows]
        else:
            rows = conn.exec_driver_sql(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE NOT tgisinternal ORDER BY tgname"
            )
            out["triggers"] = [tuple(r) for r in rows]
            out["functions"] = sorted(
                conn.exec_driver_sql(
                    "SELECT proname, prosrc FROM pg_proc p JOIN pg_namespace n "
                    "ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
                ).all()
            )
            out["options"] = sorted(
                conn.exec_driver_sql(
                    "SELECT relname, reloptions FROM pg_class WHERE reloptions IS NOT NULL "
                    "AND relnamespace = 'public'::regnamespace"
                ).all()
            )
    return out


@contextmanager
def _fresh(settings: Settings, tmp_path: Path, name: str):
    """Settings on a new, empty database of the same kind."""
    if not settings.database_url:
        yield Settings(data_dir=tmp_path / name)
        return
    db_name = f"hindsight_fresh_{uuid.uuid4().hex[:12]}"
    admin = settings.database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        yield Settings(
            data_dir=tmp_path / name,
            database_url=settings.database_url.rsplit("/", 1)[0] + "/" + db_name,
        )
    finally:
        with psycopg.connect(admin.replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def test_a_new_store_is_created_in_one_step_as_the_migrations_make_it(settings, tmp_path) -> None:
    from alembic import command

    with _fresh(settings, tmp_path, "migrated") as m, _fresh(settings, tmp_path, "created") as c:
        m.data_dir.mkdir(parents=True, exist_ok=True)
        command.upgrade(db.alembic_config(m.sqlalchemy_url), "head")  # one migration at a time
        db.upgrade(c)  # empty: created from the models and stamped
        migrated, created = db.make_engine(m), db.make_engine(c)
        try:
            assert db.current_revision(created) == db.current_revision(migrated) is not None
            # read off the files without Alembic: a store at head opens without loading it
            assert head_revision() == db.current_revision(migrated)
            want, got = _schema(migrated), _schema(created)
            assert set(got) == set(want)
            for part in want:
                assert got[part] == want[part], part
            with migrated.connect() as conn:
                assert _model_diff(conn) == []
            # the change feed's triggers work on the created schema: a card write logs a row
            add_card(created, namespace="default")
            with created.connect() as conn:
                assert conn.exec_driver_sql("SELECT count(*) FROM card_change").scalar() == 1
            db.upgrade(c)  # not empty any more: the migrations' path, nothing to do
            assert _schema(created) == got
        finally:
            migrated.dispose()
            created.dispose()
