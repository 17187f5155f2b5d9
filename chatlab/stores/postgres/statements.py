"""The SQL of the PostgreSQL store for one schema: its tables, their in-place upgrades and every statement it runs (the
append function's in :mod:`.appends`). Table names are quoted identifiers, never text pasted in."""

from __future__ import annotations

from ...vocabulary import NAMESPACE_SEPARATOR
from . import appends

SCHEMA_VERSION = 5  # the layout these statements read and write
SWEEP_BATCH = 1000  # at most this many conversations deleted by one of the retention sweep's transactions
PLAIN_INDEX = "chatlab_conversations_plain"  # the keys outside every namespace, in key order
PLAIN = f"strpos(conversation_key, '{NAMESPACE_SEPARATOR}') = 0"  # a plain key: PLAIN_INDEX's condition


def quoted(*names: str) -> str:
    """A (schema-qualified) SQL identifier, each name quoted: ``"schema"."table"``."""
    return ".".join('"' + name.replace('"', '""') + '"' for name in names)


class Statements:
    """Every statement of the store, for one schema."""

    def __init__(self, schema: str) -> None:
        tables = ("meta", "conversations", "messages", "idempotency")
        names = {table: quoted(schema, f"chatlab_{table}") for table in tables}
        names.update(schema=quoted(schema), function=quoted(schema, appends.FUNCTION))

        def sql(text: str) -> str:
            return text.format(**names)

        timestamps = (  # schema version 3 (then ``fill_timestamps``)
            sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS created_at double precision"),
            sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS updated_at double precision"),
            sql("CREATE INDEX IF NOT EXISTS chatlab_conversations_updated ON {conversations} (updated_at)"),
        )
        idempotency_tables = (
            sql(
                "CREATE TABLE IF NOT EXISTS {idempotency} ("
                " conversation_key text NOT NULL, idempotency_key text NOT NULL, fingerprint text NOT NULL,"
                " version text NOT NULL, expires_at double precision NOT NULL,"
                " PRIMARY KEY (conversation_key, idempotency_key))"
            ),
            sql("CREATE INDEX IF NOT EXISTS chatlab_idempotency_expiry ON {idempotency} (expires_at)"),
        )
        metadata = (  # schema version 4
            sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS title text"),
            sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS tags jsonb NOT NULL DEFAULT '{{}}'"),
            # keys in code point order (the byte order of UTF-8), as the other stores sort: then the primary key's index
            # serves a page in that order, whatever the database's collation (a no-op where the column has it already)
            sql('ALTER TABLE {conversations} ALTER COLUMN conversation_key TYPE text COLLATE "C"'),
            sql(
                "CREATE INDEX IF NOT EXISTS chatlab_conversations_tags ON {conversations}"
                " USING gin (tags jsonb_path_ops)"
            ),
        )
        participants = (  # schema version 5 (then ``Schema`` counts them from the stored messages)
            sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS participants jsonb NOT NULL DEFAULT '{{}}'"),
        )
        set_version = sql(f"UPDATE {{meta}} SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'")
        columns = (
            "conversation_key, message_count, version, created_at, updated_at, title, tags::text, participants::text"
        )

        def page(below: bool, tagged: bool, plain: bool) -> str:  # a range of the primary key's index or PLAIN_INDEX
            # keys from $1 on except $2, at most $3 (NULL: all), under $4 if below, with the last's tags if tagged
            where = "conversation_key >= $1 AND conversation_key IS DISTINCT FROM $2"
            where += " AND conversation_key < $4" if below else ""
            where += f" AND tags @> ${5 if below else 4}::jsonb" if tagged else ""
            where += f" AND {PLAIN}" if plain else ""
            return sql(f"SELECT {columns} FROM {{conversations}} WHERE {where} ORDER BY conversation_key LIMIT $3")

        self.schema = schema
        self.create_schema = sql("CREATE SCHEMA IF NOT EXISTS {schema}")
        self.create = (
            sql("CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)"),
            sql(
                "CREATE TABLE IF NOT EXISTS {conversations} ("
                ' conversation_key text COLLATE "C" PRIMARY KEY, message_count bigint NOT NULL, version text,'
                " created_at double precision, updated_at double precision)"
            ),
            sql(
                "CREATE TABLE IF NOT EXISTS {messages} ("
                " conversation_key text NOT NULL, position bigint NOT NULL, body bytea NOT NULL,"
                " PRIMARY KEY (conversation_key, position))"
            ),
            *idempotency_tables,
            *timestamps,
            *metadata,
            *participants,
            sql(f"INSERT INTO {{meta}} VALUES ('schema_version', '{SCHEMA_VERSION}') ON CONFLICT DO NOTHING"),
        )
        self.upgrades: dict[int, tuple[str, ...]] = {
            1: (
                sql("ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS version text"),
                sql(
                    "UPDATE {conversations} SET version = substr(md5(random()::text || clock_timestamp()::text"
                    " || conversation_key), 1, 16) || '.' || message_count WHERE version IS NULL"
                ),
                *idempotency_tables,
                *timestamps,
                *metadata,
                *participants,
                set_version,
            ),
            2: (*timestamps, *metadata, *participants, set_version),
            3: (*metadata, *participants, set_version),
            4: (*participants, set_version),
        }
        self.fill_timestamps = sql(
            "UPDATE {conversations} SET created_at = coalesce(created_at, $1::float8),"
            " updated_at = coalesce(updated_at, $1::float8) WHERE created_at IS NULL OR updated_at IS NULL"
        )
        self.schema_exists = "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1"
        self.tables_exist = "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'chatlab_meta'"
        self.version_get = sql("SELECT value FROM {meta} WHERE key = 'schema_version'")
        self.function_exists = (
            "SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2"
        )
        self.create_append_function = appends.CREATE_FUNCTION.format(
            **names, purge_scan=appends.PURGE_SCAN, purge_batch=appends.PURGE_BATCH
        )
        self.append = sql(appends.CALL)
        # a batch of reads of slices (a NULL limit: all): one snapshot, one row per key in order
        self.read = sql(
            "SELECT c.message_count, c.version, ARRAY(SELECT m.body FROM {messages} m"
            " WHERE m.conversation_key = k.key AND m.position >= k.after ORDER BY m.position LIMIT k.lim)"
            " FROM unnest($1::text[], $2::int8[], $3::int8[]) WITH ORDINALITY AS k(key, after, lim, ord)"
            " LEFT JOIN {conversations} c ON c.conversation_key = k.key ORDER BY k.ord"
        )
        # write locks in the append function's order (a sorted subquery, OFFSET 0: taken in order): no deadlocks
        self.lock_many = (
            "SELECT pg_advisory_xact_lock(s.h) FROM (SELECT hashtextextended(t.k, 0) AS h"
            " FROM unnest($1::text[]) WITH ORDINALITY AS t(k, ord) ORDER BY h, t.ord OFFSET 0) AS s"
        )
        self.current = sql("SELECT version FROM {conversations} WHERE conversation_key = $1")
        self.replace_count = sql(
            "INSERT INTO {conversations} AS c (conversation_key, message_count, version, created_at, updated_at,"
            " participants) VALUES ($1, $2, $3, $4, $5, $6::jsonb) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at,"
            " participants = excluded.participants"
        )
        self.restore_count = sql(
            "INSERT INTO {conversations} AS c (conversation_key, message_count, version, created_at, updated_at,"
            " title, tags, participants) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb)"
            " ON CONFLICT (conversation_key) DO UPDATE SET message_count = excluded.message_count,"
            " version = excluded.version, created_at = excluded.created_at, updated_at = excluded.updated_at,"
            " title = excluded.title, tags = excluded.tags, participants = excluded.participants"
        )
        # the upgrade's count of the participants: every stored message, and each conversation's counts written
        self.all_messages = sql("SELECT conversation_key, body FROM {messages}")
        self.set_participants = sql("UPDATE {conversations} SET participants = $2::jsonb WHERE conversation_key = $1")
        self.insert_messages = sql(
            "INSERT INTO {messages} (conversation_key, position, body)"
            " SELECT $1, t.ord - 1, t.body FROM unnest($2::bytea[]) WITH ORDINALITY AS t(body, ord)"
        )
        self.delete_messages = sql("DELETE FROM {messages} WHERE conversation_key = ANY($1::text[])")
        self.delete_conversation = sql("DELETE FROM {conversations} WHERE conversation_key = $1")
        self.due = sql(
            "SELECT conversation_key FROM {conversations} WHERE updated_at <= $1"
            f" ORDER BY conversation_key LIMIT {SWEEP_BATCH}"
        )
        self.sweep = sql(
            "DELETE FROM {conversations} WHERE conversation_key = ANY($1::text[]) AND updated_at <= $2"
            " RETURNING conversation_key"
        )
        # the row locked until commit: a change is computed in Python from what it read (MetadataChange.applied)
        self.summary_for_update = sql(f"SELECT {columns} FROM {{conversations}} WHERE conversation_key = $1 FOR UPDATE")
        self.set_metadata = sql("UPDATE {conversations} SET title = $2, tags = $3::jsonb WHERE conversation_key = $1")
        self.pages = {
            (below, tagged, plain): page(below, tagged, plain)
            for below in (False, True)
            for tagged in (False, True)
            for plain in (False, True)
        }
        self.index_exists = "SELECT 1 FROM pg_catalog.pg_indexes WHERE schemaname = $1 AND indexname = $2"
        # a keyless service's page reads the plain keys alone (the query repeats PLAIN, which the planner matches)
        self.create_plain_index = sql(
            f"CREATE INDEX IF NOT EXISTS {PLAIN_INDEX} ON {{conversations}} (conversation_key) WHERE {PLAIN}"
        )
        self.custom_plans = "SET LOCAL plan_cache_mode = force_custom_plan"
