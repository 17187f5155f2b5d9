"""The SQL of the PostgreSQL store: its tables, their in-place upgrades, and every statement it runs.

Schema version 3 (see :mod:`chatlab.stores.postgres_schema` for when the tables are created or upgraded).
Built once per store, for its schema: the table names are quoted identifiers, never text pasted in.
"""

from __future__ import annotations

from typing import Any

APPEND_FUNCTION = "chatlab_append_1"
"""The append's server-side function, created beside the tables of schema version 3 where it is missing. Its
name changes with its body (a new name, never a changed body under the same name), so processes of different
chatlab versions can share a database, each calling the function it was written for."""

PURGE_BATCH = 16
"""At most this many expired idempotency records are deleted by one append (each append writes at most one)."""

# The append, after the conversation's lock (a fresh snapshot): one statement that reads the conversation and the
# idempotency record, and writes only if the record is missing and if_match holds; the version as
# appended_version() makes it (a generation is what precedes a trailing ".<digits>", else the whole version; $6 is
# the new one for a conversation that does not exist). Parameters: $1 lock key, $2 conversation key, $3 now,
# $4 batch size, $5 batch, $6 generation, $7 written (the store's clock), $8 if_match, $9 idempotency key,
# $10 fingerprint, $11 expiry.
APPEND_STATEMENT = (
    "WITH cur AS (SELECT c.version AS v, CASE WHEN c.version IS NULL THEN 0 ELSE c.message_count END"
    " AS cnt, i.fingerprint AS fp, i.version AS recorded FROM (SELECT) AS one"
    " LEFT JOIN {conversations} c ON c.conversation_key = $2"
    " LEFT JOIN {idempotency} i ON i.conversation_key = $2 AND i.idempotency_key = $9"
    " AND i.expires_at > $3),"
    " ok AS (SELECT CASE WHEN $4 = 0 THEN coalesce(v, '0')"
    " ELSE CASE WHEN v IS NULL OR v = '0' THEN $6 WHEN v ~ '^.+[.][0-9]+$'"
    " THEN regexp_replace(v, '[.][0-9]+$', '') ELSE v END || '.' || (cnt + $4) END AS version FROM cur"
    " WHERE fp IS NULL AND ($8 IS NULL OR coalesce(v, '0') = ANY($8)"
    " OR ('*' = ANY($8) AND coalesce(v, '0') <> '0'))),"
    " c AS (INSERT INTO {conversations} AS c (conversation_key, message_count, version, created_at, updated_at)"
    " SELECT $2, $4, version, $7, $7 FROM ok WHERE $4 > 0"
    " ON CONFLICT (conversation_key) DO UPDATE SET message_count = c.message_count + excluded.message_count,"
    " version = excluded.version, updated_at = excluded.updated_at RETURNING message_count),"
    " m AS (INSERT INTO {messages} (conversation_key, position, body)"
    " SELECT $2, c.message_count - $4 + t.ord - 1, t.body FROM c,"
    " unnest($5) WITH ORDINALITY AS t(body, ord)),"
    # the purge: up to PURGE_BATCH expired records, the oldest, through the expiry index whatever the plan (a
    # generic plan of "expires_at <= $3" alone scans the whole table), skipping those a concurrent append is
    # deleting; it leaves the record being written alone: one statement must not touch a row twice
    " purged AS (DELETE FROM {idempotency} d USING (SELECT conversation_key, idempotency_key FROM {idempotency}"
    " WHERE $9 IS NOT NULL AND EXISTS (SELECT FROM ok) AND expires_at <= $3"
    " AND NOT (conversation_key = $2 AND idempotency_key = $9)"
    f" ORDER BY expires_at LIMIT {PURGE_BATCH} FOR UPDATE SKIP LOCKED) e"
    " WHERE d.conversation_key = e.conversation_key AND d.idempotency_key = e.idempotency_key),"
    " rec AS (INSERT INTO {idempotency} (conversation_key, idempotency_key, fingerprint, version, expires_at)"
    " SELECT $2, $9, $10, version, $11 FROM ok WHERE $9 IS NOT NULL"
    " ON CONFLICT (conversation_key, idempotency_key) DO UPDATE SET fingerprint = excluded.fingerprint,"
    " version = excluded.version, expires_at = excluded.expires_at)"
    " SELECT cur.v, cur.fp, cur.recorded, ok.version FROM cur LEFT JOIN ok ON true"
)


def build_queries(schema: str) -> dict[str, Any]:
    """Every statement of the store, its tables named in ``schema`` (quoted identifiers), as text (lists: in order)."""
    from psycopg import sql

    from .postgres_append_sql import APPEND_BATCH_FUNCTION, CALL_APPEND_BATCH, CREATE_APPEND_BATCH_FUNCTION

    names = {
        "schema": sql.Identifier(schema),
        "meta": sql.Identifier(schema, "chatlab_meta"),
        "conversations": sql.Identifier(schema, "chatlab_conversations"),
        "messages": sql.Identifier(schema, "chatlab_messages"),
        "idempotency": sql.Identifier(schema, "chatlab_idempotency"),
        "idempotency_expiry": sql.Identifier("chatlab_idempotency_expiry"),
        "updated_index": sql.Identifier("chatlab_conversations_updated"),
        "append_function": sql.Identifier(schema, APPEND_FUNCTION),
        "append_batch_function": sql.Identifier(schema, APPEND_BATCH_FUNCTION),
    }
    timestamps = [  # schema version 3
        "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS created_at double precision",
        "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS updated_at double precision",
        "UPDATE {conversations} SET created_at = coalesce(created_at, %(now)s),"
        " updated_at = coalesce(updated_at, %(now)s) WHERE created_at IS NULL OR updated_at IS NULL",
        "CREATE INDEX IF NOT EXISTS {updated_index} ON {conversations} (updated_at)",
    ]
    idempotency_tables = [
        "CREATE TABLE IF NOT EXISTS {idempotency} ("
        " conversation_key text NOT NULL, idempotency_key text NOT NULL, fingerprint text NOT NULL,"
        " version text NOT NULL, expires_at double precision NOT NULL,"
        " PRIMARY KEY (conversation_key, idempotency_key))",
        "CREATE INDEX IF NOT EXISTS {idempotency_expiry} ON {idempotency} (expires_at)",
    ]
    q: dict[str, str | list[str]] = {
        "create_schema": "CREATE SCHEMA IF NOT EXISTS {schema}",
        "create": [
            "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {conversations} ("
            " conversation_key text PRIMARY KEY, message_count bigint NOT NULL, version text,"
            " created_at double precision, updated_at double precision)",
            "CREATE TABLE IF NOT EXISTS {messages} ("
            " conversation_key text NOT NULL, position bigint NOT NULL, body bytea NOT NULL,"
            " PRIMARY KEY (conversation_key, position))",
            *idempotency_tables,
            *timestamps,
        ],
        "upgrade_from_2": [*timestamps, "UPDATE {meta} SET value = '3' WHERE key = 'schema_version'"],
        "upgrade_from_1": [
            "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS version text",
            "UPDATE {conversations} SET version = substr(md5(random()::text || clock_timestamp()::text"
            " || conversation_key), 1, 16) || '.' || message_count WHERE version IS NULL",
            *idempotency_tables,
            *timestamps,
            "UPDATE {meta} SET value = '3' WHERE key = 'schema_version'",
        ],
        "version_get": "SELECT value FROM {meta} WHERE key = 'schema_version'",
        "version_set": "INSERT INTO {meta} (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING",
        # a batch of reads (one or more), of slices (LIMIT NULL: all), in one statement: one snapshot, one row per
        # key, in order (a NULL count: no such conversation); run on libpq (postgres_raw), numbered binary parameters
        "read_many": "SELECT c.message_count, c.version, ARRAY(SELECT m.body FROM {messages} m"
        " WHERE m.conversation_key = k.key AND m.position >= k.after ORDER BY m.position LIMIT k.lim)"
        " FROM unnest($1::text[], $2::int8[], $3::int8[]) WITH ORDINALITY AS k(key, after, lim, ord)"
        " LEFT JOIN {conversations} c ON c.conversation_key = k.key ORDER BY k.ord",
        "lock": "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        "current": "SELECT version FROM {conversations} WHERE conversation_key = %s",
        # an append: one statement, the call of the schema's append function (APPEND_FUNCTION); numbered binary
        # parameters, sent on libpq (postgres_raw)
        "append": "SELECT * FROM {append_function}($1::text, $2::text, $3::float8, $4::int4, $5::bytea[], $6::text,"
        " $7::float8, $8::text[], $9::text, $10::text, $11::float8)",
        "append_function_exists": "SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
        " ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname = %s",
        # the lock, then APPEND_STATEMENT: a fresh snapshot, as plpgsql takes one per statement of a volatile function
        "create_append_function": "CREATE OR REPLACE FUNCTION {append_function}(text, text, float8, int4, bytea[],"
        " text, float8, text[], text, text, float8)"
        " RETURNS TABLE (o_version text, o_fingerprint text, o_recorded text, o_written text)"
        " LANGUAGE plpgsql VOLATILE AS $fn$ BEGIN"
        " PERFORM pg_advisory_xact_lock(hashtextextended($1, 0)); RETURN QUERY " + APPEND_STATEMENT + "; END $fn$",
        # a batch of appends, when the schema has APPEND_BATCH_FUNCTION (postgres_append_sql)
        "append_batch": CALL_APPEND_BATCH,
        "create_append_batch_function": CREATE_APPEND_BATCH_FUNCTION,
        # the append function's statement alone (tests prepare it to see its plan)
        "append_statement": APPEND_STATEMENT,
        "replace_count": "INSERT INTO {conversations} AS c (conversation_key, message_count, version,"
        " created_at, updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_key) DO UPDATE SET"
        " message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at",
        "restore_count": "INSERT INTO {conversations} AS c (conversation_key, message_count, version,"
        " created_at, updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_key) DO UPDATE SET"
        " message_count = excluded.message_count, version = excluded.version,"
        " created_at = excluded.created_at, updated_at = excluded.updated_at",
        "due": "SELECT conversation_key FROM {conversations} WHERE updated_at <= %s"
        " ORDER BY conversation_key LIMIT 1000",
        # the locks of many keys in the order of APPEND_BATCH_FUNCTION (a sorted subquery, OFFSET 0: taken in order)
        "lock_many": "SELECT pg_advisory_xact_lock(s.h) FROM (SELECT hashtextextended(t.k, 0) AS h"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, ord) ORDER BY h, t.ord OFFSET 0) AS s",
        "sweep": "DELETE FROM {conversations} WHERE conversation_key = ANY(%s) AND updated_at <= %s"
        " RETURNING conversation_key",
        "delete_messages_many": "DELETE FROM {messages} WHERE conversation_key = ANY(%s)",
        "insert_messages": "INSERT INTO {messages} (conversation_key, position, body)"
        " SELECT %s, %s + t.ord - 1, t.body FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(body, ord)",
        "delete_messages": "DELETE FROM {messages} WHERE conversation_key = %s",
        "delete_conversation": "DELETE FROM {conversations} WHERE conversation_key = %s",
        # "C" collation: byte order of UTF-8, which is code point order, as the other stores sort.
        "summaries": "SELECT conversation_key, message_count, version, created_at, updated_at"
        " FROM {conversations}"
        ' ORDER BY conversation_key COLLATE "C"',
        "summaries_from": "SELECT conversation_key, message_count, version, created_at, updated_at"
        " FROM {conversations}"
        ' WHERE conversation_key COLLATE "C" >= %s ORDER BY conversation_key COLLATE "C"',
        "summaries_range": "SELECT conversation_key, message_count, version, created_at, updated_at"
        " FROM {conversations}"
        ' WHERE conversation_key COLLATE "C" >= %s AND conversation_key COLLATE "C" < %s'
        ' ORDER BY conversation_key COLLATE "C"',
    }

    def render(text: str) -> str:  # once: psycopg then caches a text query's conversion, not a composed one's
        return sql.SQL(text).format(**names).as_string(None)

    return {name: [render(t) for t in text] if isinstance(text, list) else render(text) for name, text in q.items()}
