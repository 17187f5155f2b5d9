"""The Lua scripts of the Redis store: the reads, each write, the listing, a restore, a sweep, the upgrades.

Redis runs a script as one atomic step, so a read is one snapshot and a write is its checks and its changes
together. The append rules live here once for this backend (:data:`APPEND`: the ``If-Match`` check, the
idempotency record and the count in the version). Each script touches the keys of one conversation, or of one
bucket, so on Redis Cluster all its keys are in one hash slot (:mod:`chatlab.stores.redis.keys`). Every
script says which ``KEYS`` and ``ARGV`` it takes.
"""

from __future__ import annotations

from ..base import ABSENT

#: The version of a conversation written by layout version 1 (it has no version key yet).
UNVERSIONED = "unversioned"


def _lua(text: str) -> str:
    return text.replace("ABSENT", ABSENT).replace("UNVERSIONED", UNVERSIONED)


# The version of a conversation: its version key, else 'UNVERSIONED' when it has messages and is indexed
# (layout 1), else 'ABSENT' (never written, deleted, or its keys expired).
_CURRENT = _lua(
    """
local function current_version(index, member, list, version_key)
    local v = redis.call('GET', version_key)
    if v then return v end
    if redis.call('EXISTS', list) == 1 and redis.call('ZSCORE', index, member) then return 'UNVERSIONED' end
    return 'ABSENT'
end
"""
)

# A conversation's metadata (chatlab.stores.redis.keys): the hash ``{base}metadata:{key}`` and, for each tag, an
# entry in the bucket's index ``{base}tag:{len}:{name}:{value}``; ``base`` is the bucket's ``{prefix}{N}:``.
# The scripts that change a conversation's tags keep the two in step, so a tag is in the hash exactly when the
# conversation is in that tag's index. ``summary`` gives a conversation as the listing answers it: key, count,
# version, "created updated" ('' when unknown), the metadata hash as HGETALL gives it; nil if it is absent.
_METADATA = _lua(
    """
local function tag_index(base, name, value)
    return base .. 'tag:' .. #name .. ':' .. name .. ':' .. value
end
local function bucket_base(metadata, member)
    return string.sub(metadata, 1, #metadata - #member - #'metadata:')
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
local function clear_metadata(metadata, base, member)
    local tags = tags_of(redis.call('HGETALL', metadata))
    for name, value in pairs(tags) do redis.call('ZREM', tag_index(base, name, value), member) end
    redis.call('DEL', metadata)
end
local function set_tag(metadata, base, member, name, value)
    redis.call('HSET', metadata, 'tag:' .. name, value)
    redis.call('ZADD', tag_index(base, name, value), 0, member)
end
local function summary(member, list, version_key, times, metadata)
    local count = redis.call('LLEN', list)
    local version = redis.call('GET', version_key)
    if not version and count == 0 then return nil end
    return {member, count, version or 'UNVERSIONED', redis.call('GET', times) or '', redis.call('HGETALL', metadata)}
end
"""
)

# KEYS: meta. ARGV: the layout version and bucket count a new store gets. The layout version and bucket count.
SCHEMA = """
if redis.call('HSETNX', KEYS[1], 'schema_version', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], 'buckets', ARGV[2])
end
return redis.call('HMGET', KEYS[1], 'schema_version', 'buckets')
"""

# KEYS: index, list, version. ARGV: member, first, last ('' '': no messages).
# {version, count, messages from first to last (LRANGE's)}: one snapshot.
READ = (
    _CURRENT
    + """
local version = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
local messages = {}
if ARGV[2] ~= '' then messages = redis.call('LRANGE', KEYS[2], ARGV[2], ARGV[3]) end
return {version, redis.call('LLEN', KEYS[2]), messages}
"""
)

# Shared by the write scripts: the metadata helpers, the If-Match check, the timestamps and expiry, the push of
# the messages.
_WRITE = (
    _CURRENT
    + _METADATA
    + _lua(
        """
local function matches(current, first, count)
    if count < 0 then return true end
    for i = first, first + count - 1 do
        if ARGV[i] == current or (ARGV[i] == '*' and current ~= 'ABSENT') then return true end
    end
    return false
end
local function touch(current, member, times, updated, now, expire_at)
    local created = now
    local old = redis.call('GET', times)
    if old and current ~= 'ABSENT' then created = string.match(old, '^(%S+)') end
    redis.call('SET', times, created .. ' ' .. now)
    redis.call('ZADD', updated, now, member)
    for _, key in ipairs({KEYS[2], KEYS[3], times}) do
        if expire_at ~= '0' then redis.call('PEXPIREAT', key, expire_at) else redis.call('PERSIST', key) end
    end
end
local function push(list, first)
    for i = first, #ARGV, 1000 do
        redis.call('RPUSH', list, unpack(ARGV, i, math.min(i + 999, #ARGV)))
    end
end
"""
    )
)

# The append rules. KEYS: index, list, version, idempotency record (the list when none), times, updated, metadata.
# ARGV: member, a new generation, fingerprint ('' for none), ttl ms, now, expire at (ms, '0': never),
# condition count (-1: none), conditions..., messages...
# An idempotency record seen before answers what it recorded ('replayed') or 'reused' (another fingerprint);
# else the If-Match check; then the messages, and the version after them: the conversation's generation
# (the new one if it had none), '.', its length. A conversation it creates starts with no metadata (what a
# conversation whose keys expired before the sweep left is dropped).
APPEND = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if ARGV[3] ~= '' then
    local record = redis.call('GET', KEYS[4])
    if record then
        local space = string.find(record, ' ', 1, true)
        if string.sub(record, 1, space - 1) ~= ARGV[3] then return {'reused', ''} end
        return {'replayed', string.sub(record, space + 1)}
    end
end
local count = tonumber(ARGV[7])
if not matches(current, 8, count) then return {'mismatch', current} end
local first = 8 + math.max(count, 0)
local version = current
if #ARGV >= first then
    if current == 'ABSENT' then clear_metadata(KEYS[7], bucket_base(KEYS[7], ARGV[1]), ARGV[1]) end
    redis.call('ZADD', KEYS[1], 0, ARGV[1])
    push(KEYS[2], first)
    local generation = ARGV[2]
    if current ~= 'ABSENT' and current ~= 'UNVERSIONED' then
        generation = string.match(current, '^(.*)%.%d+$') or current
    end
    version = generation .. '.' .. redis.call('LLEN', KEYS[2])
    redis.call('SET', KEYS[3], version)
    touch(current, ARGV[1], KEYS[5], KEYS[6], ARGV[5], ARGV[6])
end
if ARGV[3] ~= '' then
    redis.call('SET', KEYS[4], ARGV[3] .. ' ' .. version, 'PX', ARGV[4])
end
return {'ok', version}
"""
)

# KEYS: index, list, version, times, updated, metadata.
# ARGV: member, new version, now, expire at, condition count (-1: none), conditions..., messages...
# The metadata stays (a conversation it creates starts with none).
REPLACE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
local count = tonumber(ARGV[5])
if not matches(current, 6, count) then return {'mismatch', current} end
if current == 'ABSENT' then clear_metadata(KEYS[6], bucket_base(KEYS[6], ARGV[1]), ARGV[1]) end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
push(KEYS[2], 6 + math.max(count, 0))
redis.call('SET', KEYS[3], ARGV[2])
touch(current, ARGV[1], KEYS[4], KEYS[5], ARGV[3], ARGV[4])
return {'ok', ARGV[2]}
"""
)

# KEYS: index, list, version, times, updated, metadata. ARGV: member, condition count (-1: none), conditions...
DELETE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if not matches(current, 3, tonumber(ARGV[2])) then return {'mismatch', current} end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
clear_metadata(KEYS[6], bucket_base(KEYS[6], ARGV[1]), ARGV[1])
return {'ok', 'ABSENT'}
"""
)

# KEYS: index, list, version, times, updated, metadata.
# ARGV: member, expected version, version, "created updated", updated, expire at (ms, '0': never), title ('': none,
# else '=' and the title), tag count n, n tag names and values in turn, messages...
# false when written (the metadata replacing the conversation's), else the conversation's version.
RESTORE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if current ~= ARGV[2] then return current end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
local tags = tonumber(ARGV[8])
push(KEYS[2], 9 + 2 * tags)
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
for i = 2, 4 do
    if ARGV[6] ~= '0' then redis.call('PEXPIREAT', KEYS[i], ARGV[6]) else redis.call('PERSIST', KEYS[i]) end
end
local base = bucket_base(KEYS[6], ARGV[1])
clear_metadata(KEYS[6], base, ARGV[1])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[6], 'title', string.sub(ARGV[7], 2)) end
for i = 9, 8 + 2 * tags, 2 do set_tag(KEYS[6], base, ARGV[1], ARGV[i], ARGV[i + 1]) end
return false
"""
)

# The merge patch of set_metadata (chatlab.stores.metadata.MetadataChange.applied). KEYS: index, list, version,
# times, metadata. ARGV: member, the most tags a conversation may carry, the title ('': unchanged, '-': removed,
# else '=' and the title), then each tag's name and '-' (removed) or '=' and its value.
# false (nothing written) when the conversation does not exist; {'too_many', how many} (nothing written) when
# the result would carry too many tags; else {'ok', the conversation as SUMMARIES gives one}.
SET_METADATA = (
    _CURRENT
    + _METADATA
    + _lua(
        """
local member, metadata = ARGV[1], KEYS[5]
if current_version(KEYS[1], member, KEYS[2], KEYS[3]) == 'ABSENT' then return false end
local tags, count = tags_of(redis.call('HGETALL', metadata))
for i = 4, #ARGV, 2 do
    if ARGV[i + 1] == '-' then
        if tags[ARGV[i]] then count = count - 1 end
    elseif not tags[ARGV[i]] then
        count = count + 1
    end
end
if count > tonumber(ARGV[2]) then return {'too_many', count} end
if ARGV[3] == '-' then
    redis.call('HDEL', metadata, 'title')
elseif ARGV[3] ~= '' then
    redis.call('HSET', metadata, 'title', string.sub(ARGV[3], 2))
end
local base = bucket_base(metadata, member)
for i = 4, #ARGV, 2 do
    local name, old = ARGV[i], tags[ARGV[i]]
    if old then redis.call('ZREM', tag_index(base, name, old), member) end
    if ARGV[i + 1] == '-' then
        redis.call('HDEL', metadata, 'tag:' .. name)
    else
        set_tag(metadata, base, member, name, string.sub(ARGV[i + 1], 2))
    end
end
return {'ok', summary(member, KEYS[2], KEYS[3], KEYS[4], metadata)}
"""
    )
)

# A page of one bucket's conversations. KEYS: the bucket's index. ARGV: the bucket's base (``{prefix}{N}:``), the
# lex range ("-" "+" for all: every member has score 0, so the lex range is the key order; "(after" starts past a
# page's last key), how many at most ('': all), then the name and value of each tag wanted. With tags, the keys
# come from the smallest of those tags' indexes, and the other tags are checked in the metadata hash; so the
# script reads a page's worth of index entries, and more only for those it leaves out (other tags, or keys that
# expired by retention and are not swept yet). Five values per conversation (see ``summary``).
SUMMARIES = _lua(
    _METADATA
    + """
local base, low, high, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local index = KEYS[1]
local wanted = {}
for i = 5, #ARGV, 2 do table.insert(wanted, {'tag:' .. ARGV[i], ARGV[i + 1]}) end
if #wanted > 0 then
    local least
    for i = 5, #ARGV, 2 do
        local candidate = tag_index(base, ARGV[i], ARGV[i + 1])
        local size = redis.call('ZCARD', candidate)
        if not least or size < least then index, least = candidate, size end
    end
end
local result = {}
local found = 0
while true do
    local keys
    local chunk = 0
    if limit then
        chunk = math.max(limit - found, 16)
        keys = redis.call('ZRANGEBYLEX', index, low, high, 'LIMIT', 0, chunk)
    else
        keys = redis.call('ZRANGEBYLEX', index, low, high)
    end
    for _, key in ipairs(keys) do
        local metadata = base .. 'metadata:' .. key
        local carries = true
        for _, tag in ipairs(wanted) do
            if redis.call('HGET', metadata, tag[1]) ~= tag[2] then carries = false; break end
        end
        if carries then
            local one = summary(key, base .. 'messages:' .. key, base .. 'version:' .. key, base .. 'times:' .. key,
                metadata)
            if one then
                table.insert(result, one)
                found = found + 1
                if limit and found >= limit then return result end
            end
        end
    end
    if not limit or #keys < chunk then return result end
    low = '(' .. keys[#keys]
end
"""
)

# KEYS: a bucket's index and updated. ARGV: cutoff, the bucket's base (``{prefix}{N}:``), how many at most.
# Deletes that many due conversations of the bucket at most, metadata included; how many it deleted.
SWEEP = (
    _METADATA
    + """
local base = ARGV[2]
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, key in ipairs(due) do
    redis.call('ZREM', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
    redis.call('DEL', base .. 'messages:' .. key, base .. 'version:' .. key, base .. 'times:' .. key)
    clear_metadata(base .. 'metadata:' .. key, base, key)
end
return #due
"""
)

# Layouts 1 and 2 to 3 (their keys: see chatlab.stores.redis.upgrade). KEYS: index, updated.
# ARGV: now, prefix of times, offset, how many. Gives that many conversations times at most.
UPGRADE_TIMES = """
local keys = redis.call('ZRANGE', KEYS[1], ARGV[3], ARGV[3] + ARGV[4] - 1)
for _, key in ipairs(keys) do
    if redis.call('SET', ARGV[2] .. key, ARGV[1] .. ' ' .. ARGV[1], 'NX') then
        redis.call('ZADD', KEYS[2], 'NX', ARGV[1], key)
    end
end
return #keys
"""

# Layout 3 to 4, one conversation (on a single server, where a script may touch any key).
# KEYS: old index, old updated, old list, version, times; new index, updated, list, version, times.
# ARGV: member. Renames keep each key's expiry; 0 when another process moved it first.
UPGRADE_MOVE = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
for i = 3, 5 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], KEYS[i + 5]) end
end
local updated = redis.call('ZSCORE', KEYS[2], ARGV[1])
if updated then redis.call('ZADD', KEYS[7], updated, ARGV[1]) end
redis.call('ZADD', KEYS[6], 0, ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""
