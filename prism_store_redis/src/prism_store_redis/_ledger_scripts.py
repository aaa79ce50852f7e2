"""The Lua of the effect ledger on Redis: the rows a save writes, and the ledger's reads.

Keys, under ``<prefix>:`` (the ``base`` the scripts are handed, ``<prefix>:``):

- ``efseq`` / ``dseq``: the counters that number effect and decision rows in the order they
  were first written; ``efkey`` / ``dkey``: hashes from a row's natural key
  (``<len(run)>:<run>:<call>``, ``<len(run)>:<run>:<position>``) to its number;
- ``ef:<n>`` / ``d:<n>``: one hash per row (its indexed fields and ``record``, the row's JSON);
- ``efx:<sha1>``: the index sets, scored and keyed by row number, one per owner and value:
  ``sha1(owner \\0 kind \\0 value)`` for kinds ``all``, ``tool``, ``status``, ``run``, ``key``,
  ``session``, ``term`` (effects) and ``dall``, ``dsession`` (decisions).

A list reads the smallest of its filters' sets from the cursor on and checks each row against
the others (membership, then the time bounds), examining at most a budget of rows per call, so
no call holds the server long; a page may then be short and still carry a cursor. Every write
runs inside the checkpoint save's own script, after the save wrote its record.
"""

from __future__ import annotations

__all__ = ("LEDGER_ERASE", "LEDGER_FUNCTIONS", "LEDGER_MARK", "LEDGER_QUERY", "SESSION_DELETE")

#: ``ledger_write(base, payload)``: write the rows of a save (``payload``: JSON
#: ``{"e": [[run, call, session, owner, tool, key, status, started, record, [term, …]], …],
#: "d": [[run, position, session, owner, decided, record], …]}``, ``''`` for none).
LEDGER_FUNCTIONS = """
local function ledger_index(base, owner, kind, value)
  return base .. 'efx:' .. redis.sha1hex(owner .. '\\0' .. kind .. '\\0' .. value)
end

local function ledger_write(base, payload)
  if payload == nil or payload == '' then return end
  local data = cjson.decode(payload)
  for _, e in ipairs(data['e']) do
    local run, call, session, owner, tool, key, status = e[1], e[2], e[3], e[4], e[5], e[6], e[7]
    local natural = #run .. ':' .. run .. ':' .. call
    local seq = redis.call('HGET', base .. 'efkey', natural)
    local write = true
    if seq then
      local old = redis.call('HMGET', base .. 'ef:' .. seq, 'owner', 'status')
      if old[1] ~= owner then
        write = false
      elseif old[2] ~= status then
        redis.call('ZREM', ledger_index(base, owner, 'status', old[2]), seq)
      end
    else
      seq = tostring(redis.call('INCR', base .. 'efseq'))
      redis.call('HSET', base .. 'efkey', natural, seq)
      for _, pair in ipairs({{'all', ''}, {'tool', tool}, {'run', run}, {'key', key},
          {'session', session}}) do
        redis.call('ZADD', ledger_index(base, owner, pair[1], pair[2]), seq, seq)
      end
    end
    if write then
      redis.call('ZADD', ledger_index(base, owner, 'time', ''), e[8], seq)
      redis.call('ZADD', ledger_index(base, owner, 'status', status), seq, seq)
      local terms = e[10]
      local stored = redis.call('HGET', base .. 'ef:' .. seq, 'terms')
      local known = {}
      if stored then
        for _, term in ipairs(cjson.decode(stored)) do known[term] = true end
      end
      for _, term in ipairs(terms) do
        known[term] = true
        redis.call('ZADD', ledger_index(base, owner, 'term', term), seq, seq)
      end
      local all = {}
      for term, _ in pairs(known) do all[#all + 1] = term end
      table.sort(all)
      redis.call('HSET', base .. 'ef:' .. seq, 'run', run, 'call', call, 'session', session,
        'owner', owner, 'tool', tool, 'key', key, 'status', status, 'started', e[8],
        'record', e[9], 'terms', #all > 0 and cjson.encode(all) or '[]')
    end
  end
  for _, d in ipairs(data['d']) do
    local natural = #d[1] .. ':' .. d[1] .. ':' .. d[2]
    if redis.call('HEXISTS', base .. 'dkey', natural) == 0 then
      local seq = tostring(redis.call('INCR', base .. 'dseq'))
      redis.call('HSET', base .. 'dkey', natural, seq)
      redis.call('HSET', base .. 'd:' .. seq, 'session', d[3], 'owner', d[4], 'decided', d[5],
        'record', d[6])
      redis.call('ZADD', ledger_index(base, d[4], 'dall', ''), seq, seq)
      redis.call('ZADD', ledger_index(base, d[4], 'dtime', ''), d[5], seq)
      redis.call('ZADD', ledger_index(base, d[4], 'dsession', d[3]), seq, seq)
    end
  end
end
"""

#: One page of effect or decision rows.
#:
#: ARGV: 1 row key base (``<prefix>:ef:`` or ``<prefix>:d:``), 2 after row number ('' from
#: the start), 3 how many rows to return at most (the caller asks one more than its page),
#: 4 how many rows to examine at most, 5 the time field ('started' or 'decided'), 6 since
#: ('' none), 7 until ('' none), 8 the owner's time set (scored by that time), 9… the index
#: sets every row must be in.
#: Returns {last row examined when the budget ran out ('' when the scan ended), row number,
#: status, record, …} (status is '' for decisions).
#:
#: With a time bound whose window holds fewer rows than the smallest set (and at most
#: ``WINDOW`` rows), the window's rows are read from the time set and walked in row order;
#: otherwise the smallest set is walked from the cursor on, at most the budget's rows.
LEDGER_QUERY = """
local WINDOW = 20000
local sets = {unpack(ARGV, 9)}
local smallest, size = nil, nil
for i, set in ipairs(sets) do
  local n = redis.call('ZCARD', set)
  if n == 0 then return {''} end
  if size == nil or n < size then smallest, size = i, n end
end
local wanted, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local since, until_ = tonumber(ARGV[6]), tonumber(ARGV[7])
local after = tonumber(ARGV[2])
local out = {''}
local found = 0

local function take(seq, skip)
  for i, set in ipairs(sets) do
    if i ~= skip and not redis.call('ZSCORE', set, seq) then return false end
  end
  local row = redis.call('HMGET', ARGV[1] .. seq, ARGV[5], 'status', 'record')
  local at = tonumber(row[1])
  if row[3] == false or at == nil then return false end
  if (since and at < since) or (until_ and at >= until_) then return false end
  found = found + 1
  out[#out + 1] = seq
  out[#out + 1] = row[2] or ''
  out[#out + 1] = row[3]
  return true
end

if since or until_ then
  -- The bounds as given (exact decimal text): tostring would round them to 14 digits.
  local low = since and ARGV[6] or '-inf'
  local high = until_ and ('(' .. ARGV[7]) or '+inf'
  local window = redis.call('ZCOUNT', ARGV[8], low, high)
  if window <= WINDOW and window < size then
    local seqs = {}
    for _, seq in ipairs(redis.call('ZRANGEBYSCORE', ARGV[8], low, high)) do
      local n = tonumber(seq)
      if after == nil or n > after then seqs[#seqs + 1] = n end
    end
    table.sort(seqs)
    for _, n in ipairs(seqs) do
      if found >= wanted then break end
      take(tostring(n), 0)
    end
    return out
  end
end

local first = sets[smallest]
local low = ARGV[2] == '' and '-inf' or '(' .. ARGV[2]
while found < wanted do
  local batch = math.min(500, budget)
  if batch <= 0 then
    out[1] = string.sub(low, 2)
    break
  end
  local members = redis.call('ZRANGEBYSCORE', first, low, '+inf', 'LIMIT', 0, batch)
  if #members == 0 then break end
  for _, seq in ipairs(members) do
    budget = budget - 1
    low = '(' .. seq
    take(seq, smallest)
    if found >= wanted then break end
  end
  if found < wanted and budget <= 0 then
    out[1] = string.sub(low, 2)
    break
  end
end
return out
"""

#: Move calls from ``dispatched`` to ``in_doubt``.
#:
#: ARGV: 1 base ``<prefix>:``, 2 owner, 3 run id, 4… call ids. Returns how many moved.
LEDGER_MARK = """
local function ledger_index(base, owner, kind, value)
  return base .. 'efx:' .. redis.sha1hex(owner .. '\\0' .. kind .. '\\0' .. value)
end
local base, owner, run = ARGV[1], ARGV[2], ARGV[3]
local moved = 0
for i = 4, #ARGV do
  local seq = redis.call('HGET', base .. 'efkey', #run .. ':' .. run .. ':' .. ARGV[i])
  if seq then
    local row = redis.call('HMGET', base .. 'ef:' .. seq, 'owner', 'status')
    if row[1] == owner and row[2] == 'dispatched' then
      redis.call('HSET', base .. 'ef:' .. seq, 'status', 'in_doubt')
      redis.call('ZREM', ledger_index(base, owner, 'status', 'dispatched'), seq)
      redis.call('ZADD', ledger_index(base, owner, 'status', 'in_doubt'), seq, seq)
      moved = moved + 1
    end
  end
end
return moved
"""

#: Rewrite rows in their erased form.
#:
#: ARGV: 1 base ``<prefix>:``, 2 owner, then triples: kind ('e' or 'd'), row number, the new
#: record; an effect's triple is followed by its kept terms (JSON) and its dropped terms'
#: count and the terms themselves. Returns how many rows were rewritten.
LEDGER_ERASE = """
local function ledger_index(base, owner, kind, value)
  return base .. 'efx:' .. redis.sha1hex(owner .. '\\0' .. kind .. '\\0' .. value)
end
local base, owner = ARGV[1], ARGV[2]
local i, changed = 3, 0
while i <= #ARGV do
  local kind, seq, record = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if kind == 'e' then
    local kept, dropped = ARGV[i + 3], tonumber(ARGV[i + 4])
    if redis.call('HGET', base .. 'ef:' .. seq, 'owner') == owner then
      redis.call('HSET', base .. 'ef:' .. seq, 'record', record, 'terms', kept)
      for j = 1, dropped do
        redis.call('ZREM', ledger_index(base, owner, 'term', ARGV[i + 4 + j]), seq)
      end
      changed = changed + 1
    end
    i = i + 5 + dropped
  else
    if redis.call('HGET', base .. 'd:' .. seq, 'owner') == owner then
      redis.call('HSET', base .. 'd:' .. seq, 'record', record)
      changed = changed + 1
    end
    i = i + 3
  end
end
return changed
"""

#: Delete a session: every entry, its order list and its head.
#:
#: KEYS: 1 session order list, 2 session head. ARGV: 1 entry key base ('<prefix>:se:').
#: Returns how many entries were deleted.
SESSION_DELETE = """
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
local deleted = 0
for _, id in ipairs(ids) do
  deleted = deleted + redis.call('DEL', ARGV[1] .. id)
end
redis.call('DEL', KEYS[1], KEYS[2])
return deleted
"""
