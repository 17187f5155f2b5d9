"""The Lua scripts of the Redis store: each write, the summaries, a restore, a sweep, an upgrade.

Redis runs a script as one atomic step, so each is a check and its write together (see
:mod:`chatlab.stores.redis` for the layout of the keys they read and write). Every script says
which ``KEYS`` and ``ARGV`` it takes.
"""

from __future__ import annotations

from .base import ABSENT

#: The version of a conversation written by layout version 1 (it has no version key yet).
UNVERSIONED = "unversioned"

# KEYS[1] = the conversations sorted set; ARGV[1] = the prefix of message lists, ARGV[2]/[3] = lex range
# ("-" "+" for all: every member has score 0, so the lex range is the key order).
# ARGV[4] = the prefix of versions, ARGV[5] = of times. Four values per conversation; one whose keys
# expired (retention) is left out.
SUMMARIES = (
    """
local keys = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
local result = {}
for _, key in ipairs(keys) do
    local count = redis.call('LLEN', ARGV[1] .. key)
    local version = redis.call('GET', ARGV[4] .. key)
    if version or count > 0 then
        table.insert(result, key)
        table.insert(result, count)
        table.insert(result, version or '"""
    + UNVERSIONED
    + """')
        table.insert(result, redis.call('GET', ARGV[5] .. key) or '')
    end
end
return result
"""
)

# KEYS: meta. ARGV: the layout version a new store gets. The layout version.
SCHEMA = """
redis.call('HSETNX', KEYS[1], 'schema_version', ARGV[1])
return redis.call('HGET', KEYS[1], 'schema_version')
"""

# Shared by the write scripts: the current version, and the If-Match check.
_VERSION_CHECK = (
    """
local function current_version(index, member, version_key)
    local v = redis.call('GET', version_key)
    if v then return v end
    if redis.call('ZSCORE', index, member) and redis.call('EXISTS', KEYS[2]) == 1 then return '"""
    + UNVERSIONED
    + """' end
    return '"""
    + ABSENT
    + """'
end
local function matches(current, first, count)
    if count < 0 then return true end
    for i = first, first + count - 1 do
        if ARGV[i] == current or (ARGV[i] == '*' and current ~= '"""
    + ABSENT
    + """') then return true end
    end
    return false
end
local function touch(current, member, now, expire_at)
    local created = now
    local times = redis.call('GET', KEYS[TIMES])
    if times and current ~= '"""
    + ABSENT
    + """' then created = string.match(times, '^(%S+)') end
    redis.call('SET', KEYS[TIMES], created .. ' ' .. now)
    redis.call('ZADD', KEYS[TIMES + 1], now, member)
    for _, key in ipairs({KEYS[2], KEYS[3], KEYS[TIMES]}) do
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

# KEYS: index, list, version, idempotency record (or any key when none), times, updated.
# ARGV: member, a new generation, fingerprint ('' for none), ttl ms, now, expire at (ms, '0': never),
# condition count (-1: none), conditions..., messages...
# The version after an append: the conversation's generation (the new one if it had none), '.', its length.
APPEND = (
    _VERSION_CHECK.replace("TIMES", "5")
    + """
local current = current_version(KEYS[1], ARGV[1], KEYS[3])
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
    if current ~= '"""
    + ABSENT
    + """' and current ~= '"""
    + UNVERSIONED
    + """' then
        generation = string.match(current, '^(.*)%.%d+$') or current
    end
    version = generation .. '.' .. redis.call('LLEN', KEYS[2])
    redis.call('SET', KEYS[3], version)
    touch(current, ARGV[1], ARGV[5], ARGV[6])
end
if ARGV[3] ~= '' then
    redis.call('SET', KEYS[4], ARGV[3] .. ' ' .. version, 'PX', ARGV[4])
end
return {'ok', version}
"""
)

# KEYS: index, list, version, times, updated.
# ARGV: member, new version, now, expire at, condition count (-1: none), conditions..., messages...
REPLACE = (
    _VERSION_CHECK.replace("TIMES", "4")
    + """
local current = current_version(KEYS[1], ARGV[1], KEYS[3])
local count = tonumber(ARGV[5])
if not matches(current, 6, count) then return {'mismatch', current} end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
push(KEYS[2], 6 + math.max(count, 0))
redis.call('SET', KEYS[3], ARGV[2])
touch(current, ARGV[1], ARGV[3], ARGV[4])
return {'ok', ARGV[2]}
"""
)

# KEYS: index, list, version, times, updated. ARGV: member, condition count (-1: none), conditions...
DELETE = (
    _VERSION_CHECK.replace("TIMES", "4")
    + """
local current = current_version(KEYS[1], ARGV[1], KEYS[3])
if not matches(current, 3, tonumber(ARGV[2])) then return {'mismatch', current} end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
return {'ok', '"""
    + ABSENT
    + """'}
"""
)

# KEYS: index, list, version, times, updated.
# ARGV: member, expected version, version, "created updated", updated, expire at (ms, '0': never), messages...
RESTORE = """
local current = redis.call('GET', KEYS[3])
if not current then
    if redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('EXISTS', KEYS[2]) == 1 then
        current = 'unversioned'
    else
        current = '0'
    end
end
if current ~= ARGV[2] then return current end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('DEL', KEYS[2])
for i = 7, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
for i = 2, 4 do
    if ARGV[6] ~= '0' then redis.call('PEXPIREAT', KEYS[i], ARGV[6]) else redis.call('PERSIST', KEYS[i]) end
end
return false
"""

# KEYS: index, updated. ARGV: cutoff, prefixes of lists, versions, times. Deletes up to 500 due conversations.
SWEEP = """
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 500)
for _, key in ipairs(due) do
    redis.call('ZREM', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
    redis.call('DEL', ARGV[2] .. key, ARGV[3] .. key, ARGV[4] .. key)
end
return #due
"""

# KEYS: index, updated. ARGV: now, prefix of times, offset. Gives up to 1000 conversations times.
UPGRADE = """
local keys = redis.call('ZRANGE', KEYS[1], ARGV[3], ARGV[3] + 999)
for _, key in ipairs(keys) do
    if redis.call('SET', ARGV[2] .. key, ARGV[1] .. ' ' .. ARGV[1], 'NX') then
        redis.call('ZADD', KEYS[2], 'NX', ARGV[1], key)
    end
end
return #keys
"""
