"""The SQL of the PostgreSQL store: its tables, their in-place upgrades, and every statement it runs.

Built once per store for its schema (:func:`statements_for`): table names are quoted identifiers, never text pasted
in. The append rules are one server-side function, in :mod:`.appends`; this module only names and calls it.
Parameters are numbered (``$1``), as asyncpg prepares them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import appends

SCHEMA_VERSION = 3
"""The layout these statements read and write: ``chatlab_meta``, ``chatlab_conversations`` (with versions and
``created_at``/``updated_at``), ``chatlab_messages``, ``chatlab_idempotency``."""

SWEEP_BATCH = 1000
"""At most this many conversations deleted by one of the retention sweep's transactions (each holds their locks)."""


def quoted(*names: str) -> str:
    """A (schema-qualified) SQL identifier, quoted: ``"schema"."table"``."""
    return ".".join('"' + name.replace('"', '""') + '"' for name in names)


@dataclass(frozen=True, slots=True)
class Step:
    """One statement of a schema's creation or upgrade; ``with_now`` takes the upgrade's time as ``$1``."""

    sql: str
    with_now: bool = False


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the store, for one schema."""

    schema: str
    create_schema: str
    create: tuple[Step, ...]
    upgrade_from_1: tuple[Step, ...]
    upgrade_from_2: tuple[Step, ...]
    schema_exists: str
    tables_exist: str
    version_get: str
    version_set: str
    function_exists: str
    create_append_function: str
    append: str
    read: str
    lock: str
    lock_many: str
    current: str
    replace_count: str
    restore_count: str
    insert_messages: str
    delete_messages: str
    delete_messages_many: str
    delete_conversation: str
    due: str
    sweep: str
    summaries: str
    summaries_from: str
    summaries_range: str


def statements_for(schema: str) -> Statements:
    """The statements of a store whose tables live in ``schema``."""
    names = {
        "schema": quoted(schema),
        "meta": quoted(schema, "chatlab_meta"),
        "conversations": quoted(schema, "chatlab_conversations"),
        "messages": quoted(schema, "chatlab_messages"),
        "idempotency": quoted(schema, "chatlab_idempotency"),
        "idempotency_expiry": quoted("chatlab_idempotency_expiry"),
        "updated_index": quoted("chatlab_conversations_updated"),
        "function": quoted(schema, appends.FUNCTION),
    }

    def sql(text: str) -> str:
        return text.format(**names)

    timestamps = (  # schema version 3
        Step(sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS created_at double precision")),
        Step(sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS updated_at double precision")),
        Step(
            sql(
                "UPDATE {conversations} SET created_at = coalesce(created_at, $1::float8),"
                " updated_at = coalesce(updated_at, $1::float8) WHERE created_at IS NULL OR updated_at IS NULL"
            ),
            with_now=True,
        ),
        Step(sql("CREATE INDEX IF NOT EXISTS {updated_index} ON {conversations} (updated_at)")),
    )
    idempotency_tables = (
        Step(
            sql(
                "CREATE TABLE IF NOT EXISTS {idempotency} ("
                " conversation_key text NOT NULL, idempotency_key text NOT NULL, fingerprint text NOT NULL,"
                " version text NOT NULL, expires_at double precision NOT NULL,"
                " PRIMARY KEY (conversation_key, idempotency_key))"
            )
        ),
        Step(sql("CREATE INDEX IF NOT EXISTS {idempotency_expiry} ON {idempotency} (expires_at)")),
    )
    set_version_3 = Step(sql("UPDATE {meta} SET value = '3' WHERE key = 'schema_version'"))
    summary = "SELECT conversation_key, message_count, version, created_at, updated_at FROM {conversations}"
    return Statements(
        schema=schema,
        create_schema=sql("CREATE SCHEMA IF NOT EXISTS {schema}"),
        create=(
            Step(sql("CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)")),
            Step(
                sql(
                    "CREATE TABLE IF NOT EXISTS {conversations} ("
                    " conversation_key text PRIMARY KEY, message_count bigint NOT NULL, version text,"
                    " created_at double precision, updated_at double precision)"
                )
            ),
            Step(
                sql(
                    "CREATE TABLE IF NOT EXISTS {messages} ("
                    " conversation_key text NOT NULL, position bigint NOT NULL, body bytea NOT NULL,"
                    " PRIMARY KEY (conversation_key, position))"
                )
            ),
            *idempotency_tables,
            *timestamps,
        ),
        upgrade_from_1=(
            Step(sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS version text")),
            Step(
                sql(
                    "UPDATE {conversations} SET version = substr(md5(random()::text || clock_timestamp()::text"
                    " || conversation_key), 1, 16) || '.' || message_count WHERE version IS NULL"
                )
            ),
            *idempotency_tables,
            *timestamps,
            set_version_3,
        ),
        upgrade_from_2=(*timestamps, set_version_3),
        schema_exists="SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
        tables_exist="SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'chatlab_meta'",
        version_get=sql("SELECT value FROM {meta} WHERE key = 'schema_version'"),
        version_set=sql("INSERT INTO {meta} (key, value) VALUES ('schema_version', $1) ON CONFLICT DO NOTHING"),
        function_exists="SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
        " ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2",
        create_append_function=appends.create_function(names),
        append=appends.call_function(names),
        # a batch of reads (one or more) of slices (a NULL limit: all) in one statement: one snapshot, one row per
        # key in order (a NULL count: no such conversation)
        read=sql(
            "SELECT c.message_count, c.version, ARRAY(SELECT m.body FROM {messages} m"
            " WHERE m.conversation_key = k.key AND m.position >= k.after ORDER BY m.position LIMIT k.lim)"
            " FROM unnest($1::text[], $2::int8[], $3::int8[]) WITH ORDINALITY AS k(key, after, lim, ord)"
            " LEFT JOIN {conversations} c ON c.conversation_key = k.key ORDER BY k.ord"
        ),
        lock="SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        # the locks of many keys in the append function's order (a sorted subquery, OFFSET 0: taken in order), so
        # whoever takes several (a batch of appends, the sweep, a restore) never deadlocks with another
        lock_many="SELECT pg_advisory_xact_lock(s.h) FROM (SELECT hashtextextended(t.k, 0) AS h"
        " FROM unnest($1::text[]) WITH ORDINALITY AS t(k, ord) ORDER BY h, t.ord OFFSET 0) AS s",
        current=sql("SELECT version FROM {conversations} WHERE conversation_key = $1"),
        replace_count=sql(
            "INSERT INTO {conversations} AS c (conversation_key, message_count, version, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at"
        ),
        restore_count=sql(
            "INSERT INTO {conversations} AS c (conversation_key, message_count, version, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = excluded.message_count, version = excluded.version,"
            " created_at = excluded.created_at, updated_at = excluded.updated_at"
        ),
        insert_messages=sql(
            "INSERT INTO {messages} (conversation_key, position, body)"
            " SELECT $1, $2::int8 + t.ord - 1, t.body FROM unnest($3::bytea[]) WITH ORDINALITY AS t(body, ord)"
        ),
        delete_messages=sql("DELETE FROM {messages} WHERE conversation_key = $1"),
        delete_messages_many=sql("DELETE FROM {messages} WHERE conversation_key = ANY($1::text[])"),
        delete_conversation=sql("DELETE FROM {conversations} WHERE conversation_key = $1"),
        due=sql(
            "SELECT conversation_key FROM {conversations} WHERE updated_at <= $1"
            f" ORDER BY conversation_key LIMIT {SWEEP_BATCH}"
        ),
        sweep=sql(
            "DELETE FROM {conversations} WHERE conversation_key = ANY($1::text[]) AND updated_at <= $2"
            " RETURNING conversation_key"
        ),
        # "C" collation: byte order of UTF-8, which is code point order, as the other stores sort
        summaries=sql(summary + ' ORDER BY conversation_key COLLATE "C"'),
        summaries_from=sql(summary + ' WHERE conversation_key COLLATE "C" >= $1 ORDER BY conversation_key COLLATE "C"'),
        summaries_range=sql(
            summary + ' WHERE conversation_key COLLATE "C" >= $1 AND conversation_key COLLATE "C" < $2'
            ' ORDER BY conversation_key COLLATE "C"'
        ),
    )
