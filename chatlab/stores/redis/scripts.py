"""The Lua scripts of the Redis store: one per operation, each one atomic step on one hash slot, and the upgrade's.
The append rules live once, in :data:`APPEND` (the ``If-Match`` check, the idempotency record, the count)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ...authors import count_authors
from ...vocabulary import NAMESPACE_SEPARATOR
from ..base import ABSENT

#: The version of a conversation written by layout version 1 (it has no version key yet).
UNVERSIONED = "unversioned"


class Script:
    """A Lua script, its placeholders filled, and the SHA-1 digest ``EVALSHA`` names it by."""

    def __init__(self, text: str) -> None:
        self.text = text.replace("ABSENT", ABSENT).replace("UNVERSIONED", UNVERSIONED)
        self.text = self.text.replace("NAMESPACE_SEPARATOR", NAMESPACE_SEPARATOR)
        self.sha = hashlib.sha1(self.text.encode()).hexdigest()


def authors_args(messages: Sequence[bytes]) -> list[bytes | int]:
    """How many of ``messages`` each author signed, as the scripts' ``past_authors`` reads it: how many authors, then
    each one's name and count."""
    counts = count_authors(messages)
    parts: list[bytes | int] = [len(counts)]
    for name, count in counts.items():
        parts += [name.encode("utf-8"), count]
    return parts


def _on_bucket(text: str) -> Script:
    return Script(_BUCKET + text)


def _on_conversation(text: str) -> Script:
    return Script(_BUCKET + _CONVERSATION + text)


# Helpers naming a conversation's keys from its bucket's base (``{prefix}{N}:``) as chatlab.stores.redis.keys does.
# A tag is in the metadata hash (``tag:{name}``) exactly when the conversation is in that tag's index; a key outside
# every namespace (``is_plain``) is in the bucket's ``plain`` index beside ``conversations``. ``summary``: key, count,
# version, "created updated" ('' when unknown), the metadata hash's fields and values, the participants hash's
# authors and counts; nil if absent.
_BUCKET = """
local function is_plain(member)
    return not string.find(member, 'NAMESPACE_SEPARATOR', 1, true)
end
local function tag_index(base, name, value)
    return base .. 'tag:' .. #name .. ':' .. name .. ':' .. value
end
local function tags_of(fields)
    local tags, count = {}, 0
    for i = 1, #fields, 2 do
        if string.sub(fields[i], 1, 4) == 'tag:' then
            tags[string.sub(fields[i], 5)] = fields[i + 1]
            count = count + 1
        end
    end
    return tags, count
end
local function clear_metadata(base, member)
    local metadata = base .. 'metadata:' .. member
    for name, value in pairs(tags_of(redis.call('HGETALL', metadata))) do
        redis.call('ZREM', tag_index(base, name, value), member)
    end
    redis.call('DEL', metadata)
end
local function summary(base, member)
    local count = redis.call('LLEN', base .. 'messages:' .. member)
    local version = redis.call('GET', base .. 'version:' .. member)
    if not version and count == 0 then return nil end
    local times = redis.call('GET', base .. 'times:' .. member) or ''
    local metadata = redis.call('HGETALL', base .. 'metadata:' .. member)
    local participants = redis.call('HGETALL', base .. 'participants:' .. member)
    return {member, count, version or 'UNVERSIONED', times, metadata, participants}
end
local function drop(base, member)
    redis.call('ZREM', base .. 'conversations', member)
    redis.call('ZREM', base .. 'plain', member)
    redis.call('ZREM', base .. 'updated', member)
    redis.call('DEL', base .. 'messages:' .. member, base .. 'version:' .. member, base .. 'times:' .. member,
        base .. 'participants:' .. member)
    clear_metadata(base, member)
end
"""

# The start of every script on one conversation. KEYS: keys.ConversationKeys. ARGV[1]: its key. ``current``: its
# version key, else 'UNVERSIONED' when it has messages and is indexed (layout 1), else 'ABSENT'.
_CONVERSATION = """
local member = ARGV[1]
local base = string.sub(KEYS[6], 1, #KEYS[6] - #member - #'metadata:')
local current = redis.call('GET', KEYS[3])
if not current then
    current = 'ABSENT'
    if redis.call('EXISTS', KEYS[2]) == 1 and redis.call('ZSCORE', KEYS[1], member) then current = 'UNVERSIONED' end
end
-- The If-Match check of ARGV[at] (a count, -1: none) and the conditions after it: the index past them, or nil.
local function checked(at)
    local count = tonumber(ARGV[at])
    if count < 0 then return at + 1 end
    for i = at + 1, at + count do
        if ARGV[i] == current or (ARGV[i] == '*' and current ~= 'ABSENT') then return at + 1 + count end
    end
    return nil
end
-- The metadata condition from ARGV[at] ('': none; else the title, '-' for none or '=' and the title, then how many
-- tags and each one's name and value): the index past it, or nil when the conversation carries other metadata.
local function metadata_is(at)
    if ARGV[at] == '' then return at + 1 end
    local held, tags = {}, 0
    if current ~= 'ABSENT' then
        local fields = redis.call('HGETALL', KEYS[6])
        for i = 1, #fields, 2 do
            held[fields[i]] = fields[i + 1]
            if string.sub(fields[i], 1, 4) == 'tag:' then tags = tags + 1 end
        end
    end
    local title = ARGV[at] ~= '-' and string.sub(ARGV[at], 2) or nil
    local count = tonumber(ARGV[at + 1])
    if held['title'] ~= title or tags ~= count then return nil end
    for i = at + 2, at + 1 + 2 * count, 2 do
        if held['tag:' .. ARGV[i]] ~= ARGV[i + 1] then return nil end
    end
    return at + 2 + 2 * count
end
-- The participants counted in ARGV[at] (how many authors, then each one's name and count): the index past them.
local function past_authors(at)
    return at + 1 + 2 * tonumber(ARGV[at])
end
-- Pushes ARGV[first] on (replacing: alone), then adds the counts of ARGV[authors] (``past_authors``) to its
-- participants (replacing: they are its participants). A conversation being created drops what an expired one left
-- and is indexed; one that exists is indexed already (only ``drop`` takes a conversation out of its indexes, and it
-- deletes the version key with it).
local function write(first, replacing, authors)
    if current == 'ABSENT' then
        clear_metadata(base, member)
        redis.call('DEL', KEYS[7])
        redis.call('ZADD', KEYS[1], 0, member)
        if is_plain(member) then redis.call('ZADD', base .. 'plain', 0, member) end
    end
    if replacing then redis.call('DEL', KEYS[2], KEYS[7]) end
    for i = authors + 1, first - 1, 2 do redis.call('HINCRBY', KEYS[7], ARGV[i], ARGV[i + 1]) end
    for i = first, #ARGV, 1000 do
        redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
    end
end
-- The times ("created updated"; touch keeps created), the updated index, the expiry (ms, '0': none) of the
-- messages, version, times and participants.
local function stamp(times, updated, expire_at)
    redis.call('SET', KEYS[4], times)
    redis.call('ZADD', KEYS[5], updated, member)
    for _, i in ipairs({2, 3, 4, 7}) do
        if expire_at ~= '0' then redis.call('PEXPIREAT', KEYS[i], expire_at) else redis.call('PERSIST', KEYS[i]) end
    end
end
local function touch(now, expire_at)
    local old = current ~= 'ABSENT' and redis.call('GET', KEYS[4])
    stamp((old and string.match(old, '^(%S+)') or now) .. ' ' .. now, now, expire_at)
end
-- The title ARGV[at] ('': unchanged, '-': removed, else '=' and the title), then up to ARGV[last] each tag's name
-- and '-' (removed) or '=' and its value, given the tags the conversation has.
local function patch(at, last, tags)
    if ARGV[at] == '-' then
        redis.call('HDEL', KEYS[6], 'title')
    elseif ARGV[at] ~= '' then
        redis.call('HSET', KEYS[6], 'title', string.sub(ARGV[at], 2))
    end
    for i = at + 1, last, 2 do
        local name, old = ARGV[i], tags[ARGV[i]]
        if old then redis.call('ZREM', tag_index(base, name, old), member) end
        if ARGV[i + 1] == '-' then
            redis.call('HDEL', KEYS[6], 'tag:' .. name)
        else
            redis.call('HSET', KEYS[6], 'tag:' .. name, string.sub(ARGV[i + 1], 2))
            redis.call('ZADD', tag_index(base, name, string.sub(ARGV[i + 1], 2)), 0, member)
        end
    end
end
"""

# KEYS: meta. ARGV: the layout version and bucket count a new store gets. The store's layout version and count.
SCHEMA = Script("""
if redis.call('HSETNX', KEYS[1], 'schema_version', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], 'buckets', ARGV[2])
end
return redis.call('HMGET', KEYS[1], 'schema_version', 'buckets')
""")

# ARGV: key, first, last ('' '': no messages). {version, count, messages from first to last (LRANGE's)}.
READ = _on_conversation("""
local messages = {}
if ARGV[2] ~= '' then messages = redis.call('LRANGE', KEYS[2], ARGV[2], ARGV[3]) end
return {current, redis.call('LLEN', KEYS[2]), messages}
""")

# The append rules. KEYS: the conversation's, then the idempotency record. ARGV: key, a new generation, fingerprint
# ('' for none), ttl ms, now, expire at (ms, '0': never), condition count (-1: none), conditions..., the messages'
# authors (``past_authors``), messages...
# A record seen before answers 'replayed' (what it recorded) or 'reused' (another fingerprint); else the If-Match
# check, the messages, and the version: the generation (the new one if it had none), '.', the length.
APPEND = _on_conversation("""
local record = ARGV[3] ~= '' and redis.call('GET', KEYS[8])
if record then
    local fingerprint, recorded = string.match(record, '^(.-) (.*)$')
    if fingerprint ~= ARGV[3] then return {'reused', ''} end
    return {'replayed', recorded}
end
local authors = checked(7)
if not authors then return {'mismatch', current} end
local first = past_authors(authors)
local version = current
if #ARGV >= first then
    write(first, false, authors)
    local generation = ARGV[2]
    if current ~= 'ABSENT' and current ~= 'UNVERSIONED' then
        generation = string.match(current, '^(.*)%.%d+$') or current
    end
    version = generation .. '.' .. redis.call('LLEN', KEYS[2])
    redis.call('SET', KEYS[3], version)
    touch(ARGV[5], ARGV[6])
end
if ARGV[3] ~= '' then redis.call('SET', KEYS[8], ARGV[3] .. ' ' .. version, 'PX', ARGV[4]) end
return {'ok', version}
""")

# ARGV: key, new version, now, expire at, condition count (-1: none), conditions..., the messages' authors
# (``past_authors``), messages... The metadata stays.
REPLACE = _on_conversation("""
local authors = checked(5)
if not authors then return {'mismatch', current} end
write(past_authors(authors), true, authors)
redis.call('SET', KEYS[3], ARGV[2])
touch(ARGV[3], ARGV[4])
return {'ok', ARGV[2]}
""")

# ARGV: key, condition count (-1: none), conditions...
DELETE = _on_conversation("""
if not checked(2) then return {'mismatch', current} end
drop(base, member)
return {'ok', 'ABSENT'}
""")

# ARGV: key, expected version, version, "created updated", updated, expire at, tag count n, a ``patch`` of the
# title and n tags, the metadata condition (``metadata_is``), the messages' authors (``past_authors``), messages...
# false when written (its metadata replacing the conversation's), else the version.
RESTORE = _on_conversation("""
if current ~= ARGV[2] then return current end
local last = 8 + 2 * tonumber(ARGV[7])
local authors = metadata_is(last + 1)
if not authors then return {'changed', summary(base, member)} end
write(past_authors(authors), true, authors)
redis.call('SET', KEYS[3], ARGV[3])
stamp(ARGV[4], ARGV[5], ARGV[6])
clear_metadata(base, member)
patch(8, last, {})
return false
""")

# The merge patch of set_metadata. ARGV: key, the most tags a conversation may carry, condition count (-1: none),
# conditions..., the metadata condition (``metadata_is``), the ``patch``. {'mismatch', its version} when If-Match
# fails; false when the conversation does not exist; {'changed', its ``summary``} when the metadata condition fails
# and {'too_many', how many} (nothing written); else {'ok', its ``summary``}.
SET_METADATA = _on_conversation("""
local at = checked(3)
if not at then return {'mismatch', current} end
if current == 'ABSENT' then return false end
at = metadata_is(at)
if not at then return {'changed', summary(base, member)} end
local tags, count = tags_of(redis.call('HGETALL', KEYS[6]))
for i = at + 1, #ARGV, 2 do
    local had, has = tags[ARGV[i]] and 1 or 0, ARGV[i + 1] == '-' and 0 or 1
    count = count + has - had
end
if count > tonumber(ARGV[2]) then return {'too_many', count} end
patch(at, #ARGV, tags)
return {'ok', summary(base, member)}
""")

# A page of one bucket's ``summary``s. KEYS: the bucket's index (``conversations``, or ``plain`` for plain keys only).
# ARGV: its base, the lex range (score 0: key order), how many at most ('': all), '1' for plain keys only (else ''),
# then each wanted tag's name and value. With tags, the keys come from the smallest of those indexes, the others
# checked in the metadata hash (and by ``is_plain``): it reads about a page, more only for those left out.
SUMMARIES = _on_bucket("""
local base, low, high, limit, plain = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5] == '1'
local index, least, wanted = KEYS[1], nil, {}
if plain then least = redis.call('ZCARD', index) end
for i = 6, #ARGV, 2 do
    table.insert(wanted, {'tag:' .. ARGV[i], ARGV[i + 1]})
    local candidate = tag_index(base, ARGV[i], ARGV[i + 1])
    local size = redis.call('ZCARD', candidate)
    if not least or size < least then index, least = candidate, size end
end
local result = {}
while true do
    local chunk = limit and math.max(limit - #result, 16) or -1
    local keys = redis.call('ZRANGEBYLEX', index, low, high, 'LIMIT', 0, chunk)
    for _, key in ipairs(keys) do
        local carries = not plain or is_plain(key)
        for _, tag in ipairs(wanted) do
            if not carries or redis.call('HGET', base .. 'metadata:' .. key, tag[1]) ~= tag[2] then
                carries = false
                break
            end
        end
        local one = carries and summary(base, key)
        if one then
            table.insert(result, one)
            if limit and #result >= limit then return result end
        end
    end
    if #keys < chunk or chunk < 0 then return result end
    low = '(' .. keys[#keys]
end
""")

# KEYS: a bucket's index and updated. ARGV: cutoff, its base, how many at most. Deletes at most that many due
# conversations of the bucket, metadata included; how many it deleted.
SWEEP = _on_bucket("""
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, key in ipairs(due) do drop(ARGV[2], key) end
return #due
""")

# Layout 4 to 5, a step on one bucket (chatlab.stores.redis.upgrade). KEYS: its conversations and plain indexes.
# ARGV: the lex start, how many keys at most. Indexes the plain keys among those; the last key read, or false when
# the index holds no more.
INDEX_PLAIN = _on_bucket("""
local step = tonumber(ARGV[2])
local keys = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, step)
for _, key in ipairs(keys) do
    if is_plain(key) then redis.call('ZADD', KEYS[2], 0, key) end
end
if #keys < step then return false end
return keys[#keys]
""")

# Layout 5 to 6, one conversation (chatlab.stores.redis.upgrade): its participants, counted from its messages at the
# version ARGV[2], replace its participants hash (expiring with its messages). ARGV: key, that version, the authors
# (``past_authors``). 0 when the conversation changed since (count again), else 1.
COUNT_PARTICIPANTS = _on_conversation("""
if current ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[7])
for i = 4, past_authors(3) - 1, 2 do redis.call('HSET', KEYS[7], ARGV[i], ARGV[i + 1]) end
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[7], ttl) end
return 1
""")

# Layouts 1 to 3 to 4, one conversation (chatlab.stores.redis.upgrade). KEYS: old index, old updated, old list,
# version, times, then the new ConversationKeys. ARGV: member, now (layouts 1 and 2, which had no times; else '').
# 0 when another process moved it first.
UPGRADE_MOVE = Script("""
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
for i = 3, 5 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], KEYS[i + 4]) end
end
local updated = redis.call('ZSCORE', KEYS[2], ARGV[1])
if ARGV[2] ~= '' and redis.call('SET', KEYS[9], ARGV[2] .. ' ' .. ARGV[2], 'NX') then updated = updated or ARGV[2] end
if updated then redis.call('ZADD', KEYS[10], updated, ARGV[1]) end
redis.call('ZADD', KEYS[6], 0, ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
""")
