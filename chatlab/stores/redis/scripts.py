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

# Shared by the write scripts: the If-Match check, the timestamps and expiry, the push of the messages.
_WRITE = _CURRENT + _lua(
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

# The append rules. KEYS: index, list, version, idempotency record (the list when none), times, updated.
# ARGV: member, a new generation, fingerprint ('' for none), ttl ms, now, expire at (ms, '0': never),
# condition count (-1: none), conditions..., messages...
# An idempotency record seen before answers what it recorded ('replayed') or 'reused' (another fingerprint);
# else the If-Match check; then the messages, and the version after them: the conversation's generation
# (the new one if it had none), '.', its length.
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

# KEYS: index, list, version, times, updated.
# ARGV: member, new version, now, expire at, condition count (-1: none), conditions..., messages...
REPLACE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
local count = tonumber(ARGV[5])
if not matches(current, 6, count) then return {'mismatch', current} end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
push(KEYS[2], 6 + math.max(count, 0))
redis.call('SET', KEYS[3], ARGV[2])
touch(current, ARGV[1], KEYS[4], KEYS[5], ARGV[3], ARGV[4])
return {'ok', ARGV[2]}
"""
)

# KEYS: index, list, version, times, updated. ARGV: member, condition count (-1: none), conditions...
DELETE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if not matches(current, 3, tonumber(ARGV[2])) then return {'mismatch', current} end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
return {'ok', 'ABSENT'}
"""
)

# KEYS: index, list, version, times, updated.
# ARGV: member, expected version, version, "created updated", updated, expire at (ms, '0': never), messages...
# false when written, else the conversation's version.
RESTORE = _WRITE + _lua(
    """
local current = current_version(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if current ~= ARGV[2] then return current end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
push(KEYS[2], 7)
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
for i = 2, 4 do
    if ARGV[6] ~= '0' then redis.call('PEXPIREAT', KEYS[i], ARGV[6]) else redis.call('PERSIST', KEYS[i]) end
end
return false
"""
)

# One bucket's conversations. KEYS: the bucket's index. ARGV: its prefix of lists, the lex range ("-" "+" for
# all: every member has score 0, so the lex range is the key order), its prefixes of versions and times.
# Four values per conversation; one whose keys expired (retention) is left out.
SUMMARIES = _lua(
    """
local keys = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
local result = {}
for _, key in ipairs(keys) do
    local count = redis.call('LLEN', ARGV[1] .. key)
    local version = redis.call('GET', ARGV[4] .. key)
    if version or count > 0 then
        table.insert(result, key)
        table.insert(result, count)
        table.insert(result, version or 'UNVERSIONED')
        table.insert(result, redis.call('GET', ARGV[5] .. key) or '')
    end
end
return result
"""
)

# KEYS: a bucket's index and updated. ARGV: cutoff, its prefixes of lists, versions, times, how many at most.
# Deletes that many due conversations of the bucket at most; how many it deleted.
SWEEP = """
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[5]))
for _, key in ipairs(due) do
    redis.call('ZREM', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
    redis.call('DEL', ARGV[2] .. key, ARGV[3] .. key, ARGV[4] .. key)
end
return #due
"""

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
