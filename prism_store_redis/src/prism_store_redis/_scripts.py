"""The Lua scripts that make each store operation one atomic server-side step.

Each script does every check before its first write, so a refused call writes nothing. Redis
runs a script to completion before serving any other client, which is what makes a checkpoint
save's compare-and-swap, fencing and ownership checks atomic across processes and hosts.

Integers (versions, fencing tokens) travel as decimal strings and are compared as such, so
values above 2**53 keep their exact order (Lua numbers are doubles).
"""

from __future__ import annotations

from ._ledger_scripts import LEDGER_FUNCTIONS

__all__ = (
    "CHECKPOINT_DELETE",
    "CHECKPOINT_LIST",
    "CHECKPOINT_LIST_STATUS",
    "CHECKPOINT_RENEW",
    "CHECKPOINT_SAVE",
    "SESSION_APPEND",
    "SESSION_BRANCH",
    "SESSION_LIST",
    "SHARED_COMMIT",
    "SESSION_RUN_TAIL",
)

_DECIMAL_LESS = """
local function decimal_less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
"""

#: The checks and the writes of a checkpoint save, as two functions: ``save_check(K, A)``
#: returns a refusal ('conflict' or 'limit') or ``nil`` and what ``save_write(K, A, state)``
#: needs, which writes and returns the reply. ``CHECKPOINT_SAVE`` and ``SHARED_COMMIT`` both
#: run them, so a save checks and writes the same way alone or in a shared commit.
_SAVE_FUNCTIONS = """
local function save_check(K, A)
  local current = redis.call('HMGET', K[1], 'v', 'owner', 'fence', 'created', 'meta', 'cat',
    'st')
  local stored_version, stored_owner, stored_fence = current[1], current[2], current[3]
  if stored_version then
    if stored_owner ~= A[4] then return 'conflict' end
    if A[3] ~= '' and A[3] ~= stored_version then return 'conflict' end
    if not decimal_less(stored_version, A[2]) then return 'conflict' end
    if stored_fence and (A[5] == '' or decimal_less(A[5], stored_fence)) then
      return 'conflict'
    end
  elseif A[3] ~= '' and A[3] ~= '0' then
    return 'conflict'
  end
  local time = redis.call('TIME')
  local now = time[1] .. '.' .. string.format('%06d', tonumber(time[2]))
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  if not stored_version and A[13] ~= ''
      and redis.call('ZCOUNT', K[3], now_ms, '+inf') >= tonumber(A[13]) then
    return 'limit'
  end
  return nil, {current, now, now_ms}
end

local function save_write(K, A, state)
  local current, now, now_ms = state[1], state[2], state[3]
  local stored_version = current[1]
  local fields = {'v', A[2], 'value', A[6], 'updated', now}
  local absent = {}
  local function optional(name, value, present, stored)
    if present then
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    elseif stored then
      absent[#absent + 1] = name
    end
  end
  optional('fence', A[5], A[5] ~= '', current[3])
  optional('meta', A[7], A[7] ~= '', current[5])
  optional('cat', A[8], A[9] == '1', current[6])
  optional('st', A[14], A[14] ~= '', current[7])

  local expires = '+inf'
  local rescore = A[12] ~= ''
  if stored_version then
    if not rescore and redis.call('PTTL', K[1]) >= 0 then
      redis.call('PERSIST', K[1])
      rescore = true
    end
    if #absent > 0 then redis.call('HDEL', K[1], unpack(absent)) end
    redis.call('HSET', K[1], unpack(fields))
  else
    redis.call('DEL', K[1])
    redis.call('HSET', K[1], 'ns', A[10], 'key', A[11], 'owner', A[4],
      'created', now, unpack(fields))
    redis.call('ZADD', K[2], 0, A[1])
    rescore = true
  end
  if A[12] ~= '' then
    expires = now_ms + tonumber(A[12]) * 1000
    redis.call('PEXPIREAT', K[1], expires)
  end
  if rescore then
    redis.call('ZADD', K[3], expires, K[1])
  end
  local old_status = stored_version and current[7] or ''
  if old_status ~= A[14] then
    if old_status ~= '' then
      redis.call('ZREM', A[15] .. #old_status .. ':' .. old_status .. ':' .. A[4], A[1])
    end
    if A[14] ~= '' then
      redis.call('ZADD', A[15] .. #A[14] .. ':' .. A[14] .. ':' .. A[4], 0, A[1])
    end
  end
  -- Expired records' keys are gone already; drop their scores so the set stays small.
  redis.call('ZREMRANGEBYSCORE', K[3], '-inf', '(' .. now_ms)
  return 'ok ' .. (current[4] or now) .. ' ' .. now
end
"""

#: Save one checkpoint record.
#:
#: KEYS: 1 record hash, 2 owner index (sorted set), 3 every record key scored by its expiry
#: time in milliseconds ('+inf' when it never expires).
#: ARGV: 1 index member, 2 version, 3 expected version ('' = no check), 4 owner ('' = unowned),
#: 5 fencing token ('' = none), 6 value JSON, 7 metadata JSON ('' = none), 8 category,
#: 9 '1' when there is a category, 10 namespace, 11 key, 12 TTL seconds ('' = none),
#: 13 max records ('' = unlimited), 14 the value's indexed status ('' = none), 15 the status
#: index key base ('<prefix>:cpst:'), 16 the ledger's key base ('<prefix>:'), 17 the ledger
#: rows the save carries (JSON, '' = none; see :mod:`._ledger_scripts`), written after it.
#: Returns 'ok <created_at> <updated_at>', 'conflict' or 'limit' (one bulk string, the
#: cheapest reply to parse).
#:
#: A new record is written whole and joins both indexes. An update rewrites only the fields
#: that change (the owner, names and creation time are fixed once a record exists) and drops
#: optional fields the caller no longer passes. It touches the indexes only when the record's
#: expiry changes: a TTL moves its ``cpall`` score, and clearing a TTL (PTTL >= 0 before the
#: save) moves it back to '+inf'. Any other update leaves a record that is indexed under the
#: same owner (the owner check guarantees it) with the '+inf' score it already has, so every
#: store on the prefix keeps counting exactly, whatever its own ``max_records`` or TTL.
#: The record's status (field ``st``) moves it between the status index sets of its owner
#: (``<base><n>:<status>:<owner>``) only when it changes.
CHECKPOINT_SAVE = (
    _DECIMAL_LESS
    + _SAVE_FUNCTIONS
    + LEDGER_FUNCTIONS
    + """
local refusal, state = save_check(KEYS, ARGV)
if refusal then return refusal end
local reply = save_write(KEYS, ARGV, state)
ledger_write(ARGV[16], ARGV[17])
return reply
"""
)

#: A shared commit: checkpoint saves and session appends, all written or none.
#:
#: KEYS, per operation in queue order: a save's three keys (as ``CHECKPOINT_SAVE``) or an
#: append's four (as ``SESSION_APPEND``, with the entry's own key again when it has no
#: parent).
#: ARGV, per operation: 's' and the save's 17 arguments, or 'a' and the append's 6.
#: Returns {'ok', the reply of each save in order} or {refusal, index of the operation}:
#: a save's 'conflict' or 'limit', an append's 'moved', 'duplicate' or 'parent'. Every
#: operation is checked (an append against the appends queued before it, too) before the
#: first write.
SHARED_COMMIT = (
    _DECIMAL_LESS
    + _SAVE_FUNCTIONS
    + LEDGER_FUNCTIONS
    + """
local ops = {}
local k, a = 1, 1
while a <= #ARGV do
  if ARGV[a] == 's' then
    ops[#ops + 1] = {'s', {KEYS[k], KEYS[k + 1], KEYS[k + 2]}, {unpack(ARGV, a + 1, a + 17)}}
    k, a = k + 3, a + 18
  else
    ops[#ops + 1] = {'a', {KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]},
      {unpack(ARGV, a + 1, a + 6)}}
    k, a = k + 4, a + 7
  end
end

local heads, added, states = {}, {}, {}
for i, op in ipairs(ops) do
  local K, A = op[2], op[3]
  if op[1] == 's' then
    local refusal, state = save_check(K, A)
    if refusal then return {refusal, i} end
    states[i] = state
  else
    local head = heads[A[3]]
    if head == nil then head = redis.call('GET', K[3]) end
    if A[4] == 'empty' and head then return {'moved', i} end
    if A[4] == 'leaf' and head ~= A[5] then return {'moved', i} end
    if added[A[2]] or redis.call('EXISTS', K[1]) == 1 then return {'duplicate', i} end
    if A[6] ~= '' and (added[A[6]] or redis.call('HGET', K[4], 'session_id')) ~= A[3] then
      return {'parent', i}
    end
    added[A[2]] = A[3]
    heads[A[3]] = A[2]
  end
end

local out = {'ok'}
for i, op in ipairs(ops) do
  local K, A = op[2], op[3]
  if op[1] == 's' then
    out[#out + 1] = save_write(K, A, states[i])
    ledger_write(A[16], A[17])
  else
    if A[6] ~= '' then
      redis.call('HSET', K[1], 'entry', A[1], 'session_id', A[3], 'parent_id', A[6])
    else
      redis.call('HSET', K[1], 'entry', A[1], 'session_id', A[3])
    end
    redis.call('RPUSH', K[2], A[2])
    redis.call('SET', K[3], A[2])
  end
end
return out
"""
)

#: Renew a lease: replace the value of the record at exactly this version, keeping it.
#:
#: KEYS: 1 record hash.
#: ARGV: 1 owner ('' = unowned), 2 version, 3 fencing token ('' = none), 4 value JSON.
#: Returns 'ok' or 'conflict'. The version, fence, metadata, category and status fields stay.
CHECKPOINT_RENEW = (
    _DECIMAL_LESS
    + """
local current = redis.call('HMGET', KEYS[1], 'v', 'owner', 'fence')
if not current[1] or current[2] ~= ARGV[1] or current[1] ~= ARGV[2] then return 'conflict' end
if current[3] and (ARGV[3] == '' or decimal_less(ARGV[3], current[3])) then
  return 'conflict'
end
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'value', ARGV[4],
  'updated', time[1] .. '.' .. string.format('%06d', tonumber(time[2])))
return 'ok'
"""
)

#: Delete one checkpoint record if the caller owns it.
#:
#: KEYS: 1 record hash, 2 owner index, 3 every record key (sorted set).
#: ARGV: 1 owner ('' = unowned), 2 index member, 3 the status index key base.
#: Returns 1 when deleted, else 0.
CHECKPOINT_DELETE = """
local current = redis.call('HMGET', KEYS[1], 'owner', 'st')
local owner, status = current[1], current[2]
if not owner or owner ~= ARGV[1] then return 0 end
if status then
  redis.call('ZREM', ARGV[3] .. #status .. ':' .. status .. ':' .. owner, ARGV[2])
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], KEYS[1])
return 1
"""

#: One page of one owner's records, in index (namespace, key) order.
#:
#: KEYS: 1 owner index, 2 every record key (sorted set).
#: ARGV: 1 record key base ('<prefix>:cp:'), 2 ZRANGEBYLEX min, 3 ZRANGEBYLEX max, 4 how many
#: records to return (the caller asks for one more than its page size to learn whether another
#: page exists).
#: Returns a flat array: member, HGETALL reply, member, HGETALL reply, …
#: Index members whose record expired (finished-run TTL) are removed on the way.
CHECKPOINT_LIST = """
local function unescape(byte)
  if byte == '\\1' then return '\\0' end
  return '\\1'
end

local function record_key(member)
  local separator = string.find(member, '\\0', 1, true)
  local namespace = string.gsub(string.sub(member, 1, separator - 1), '\\1([\\1\\2])', unescape)
  return ARGV[1] .. #namespace .. ':' .. namespace .. ':' .. string.sub(member, separator + 1)
end

local wanted = tonumber(ARGV[4])
local low = ARGV[2]
local out = {}
local found = 0
while found < wanted do
  local members = redis.call('ZRANGEBYLEX', KEYS[1], low, ARGV[3], 'LIMIT', 0, wanted - found)
  if #members == 0 then break end
  for _, member in ipairs(members) do
    local key = record_key(member)
    local record = redis.call('HGETALL', key)
    if #record == 0 then
      redis.call('ZREM', KEYS[1], member)
      redis.call('ZREM', KEYS[2], key)
    else
      found = found + 1
      out[#out + 1] = member
      out[#out + 1] = record
    end
    low = '(' .. member
  end
end
return out
"""

#: One page of one owner's records of one status, in index (namespace, key) order.
#:
#: KEYS: 1 the status index set of that owner and status.
#: ARGV: 1 record key base, 2 ZRANGEBYLEX min, 3 ZRANGEBYLEX max, 4 how many records to
#: return, 5 the status, 6 the owner ('' = unowned).
#: Returns a flat array: member, HGETALL reply, … like ``CHECKPOINT_LIST``. A member whose
#: record expired, or was written again since with another status or owner, leaves the set.
CHECKPOINT_LIST_STATUS = """
local function unescape(byte)
  if byte == '\\1' then return '\\0' end
  return '\\1'
end

local function record_key(member)
  local separator = string.find(member, '\\0', 1, true)
  local namespace = string.gsub(string.sub(member, 1, separator - 1), '\\1([\\1\\2])', unescape)
  return ARGV[1] .. #namespace .. ':' .. namespace .. ':' .. string.sub(member, separator + 1)
end

local wanted = tonumber(ARGV[4])
local low = ARGV[2]
local out = {}
local found = 0
while found < wanted do
  local members = redis.call('ZRANGEBYLEX', KEYS[1], low, ARGV[3], 'LIMIT', 0, wanted - found)
  if #members == 0 then break end
  for _, member in ipairs(members) do
    local key = record_key(member)
    local current = redis.call('HMGET', key, 'st', 'owner')
    if current[1] ~= ARGV[5] or current[2] ~= ARGV[6] then
      redis.call('ZREM', KEYS[1], member)
    else
      found = found + 1
      out[#out + 1] = member
      out[#out + 1] = redis.call('HGETALL', key)
    end
    low = '(' .. member
  end
end
return out
"""

#: Append one session entry.
#:
#: KEYS: 1 entry hash, 2 session order list, 3 session head, 4 parent entry hash (only when the
#: entry has a parent).
#: ARGV: 1 entry JSON, 2 entry id, 3 session id, 4 head check ('any', 'empty' or 'leaf'),
#: 5 expected head id (for 'leaf'), 6 parent id ('' without a parent).
#: Returns 'ok', 'moved' (head check failed), 'duplicate' (id taken) or 'parent' (the parent
#: is not an entry of this session).
SESSION_APPEND = """
local head = redis.call('GET', KEYS[3])
if ARGV[4] == 'empty' and head then return 'moved' end
if ARGV[4] == 'leaf' and head ~= ARGV[5] then return 'moved' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'duplicate' end
if #KEYS == 4 and redis.call('HGET', KEYS[4], 'session_id') ~= ARGV[3] then
  return 'parent'
end
if #KEYS == 4 then
  redis.call('HSET', KEYS[1], 'entry', ARGV[1], 'session_id', ARGV[3], 'parent_id', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'entry', ARGV[1], 'session_id', ARGV[3])
end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[2])
return 'ok'
"""

#: Every entry of a session, in append order.
#:
#: KEYS: 1 session order list. ARGV: 1 entry key base ('<prefix>:se:').
#: Returns the entries' JSON texts.
SESSION_LIST = """
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local entry = redis.call('HGET', ARGV[1] .. id, 'entry')
  if entry then out[#out + 1] = entry end
end
return out
"""

#: The branch from the root to a leaf, walked by parent ids on the server.
#:
#: KEYS: 1 session order list (its length bounds the walk).
#: ARGV: 1 entry key base ('<prefix>:se:'), 2 session id, 3 leaf id.
#: Returns {'ok', root JSON, …, leaf JSON} or {'missing', entry id}.
SESSION_BRANCH = """
local bound = redis.call('LLEN', KEYS[1])
local reversed = {}
local current = ARGV[3]
while current do
  if #reversed >= bound then return {'missing', current} end
  local fields = redis.call('HMGET', ARGV[1] .. current, 'session_id', 'parent_id', 'entry')
  if fields[1] ~= ARGV[2] then return {'missing', current} end
  reversed[#reversed + 1] = fields[3]
  current = fields[2]
end
local out = {'ok'}
for i = #reversed, 1, -1 do out[#out + 1] = reversed[i] end
return out
"""

#: The branch from the root to a leaf and every entry appended after the leaf.
#:
#: KEYS: 1 session order list. ARGV: 1 entry key base ('<prefix>:se:'), 2 session id, 3 leaf
#: id ('' for none: no branch, every entry of the session follows).
#: Returns {'ok', branch length n, root JSON, …, leaf JSON, later JSON, …} or
#: {'missing', entry id}. The caller keeps the later entries of the run it reads.
SESSION_RUN_TAIL = """
local bound = redis.call('LLEN', KEYS[1])
local out = {'ok', 0}
local start
if ARGV[3] ~= '' then
  local reversed = {}
  local current = ARGV[3]
  while current do
    if #reversed >= bound then return {'missing', current} end
    local fields = redis.call('HMGET', ARGV[1] .. current, 'session_id', 'parent_id', 'entry')
    if fields[1] ~= ARGV[2] then return {'missing', current} end
    reversed[#reversed + 1] = fields[3]
    current = fields[2]
  end
  for i = #reversed, 1, -1 do out[#out + 1] = reversed[i] end
  out[2] = #reversed
end
-- Ids only (no payloads); the leaf is searched from the end, where a crashed run's leaf is.
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
if ARGV[3] ~= '' then
  for i = #ids, 1, -1 do
    if ids[i] == ARGV[3] then start = i + 1 break end
  end
  if not start then return {'missing', ARGV[3]} end
else
  start = 1
end
for i = start, #ids do
  local entry = redis.call('HGET', ARGV[1] .. ids[i], 'entry')
  if entry then out[#out + 1] = entry end
end
return out
"""
