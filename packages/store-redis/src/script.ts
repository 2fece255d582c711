import { createHash } from 'node:crypto';

/** What the `reserve` script answers first: the outcome, then (except for `Created`) the record's value. */
export const ReserveCode = { Exists: 0, Created: 1, TookOver: 2, AlreadyOurs: 3 } as const;

/**
 * The operations that must read, decide and write in one atomic step: Redis runs a script without
 * interleaving any other command, on any number of clients. Times are the caller's (ARGV); the server's clock
 * decides nothing. The record layout is in record.ts (offsets here are 1-based). KEYS[1] is the record, ARGV[1]
 * the operation.
 */
export const SCRIPT = `
local k = KEYS[1]
local op = ARGV[1]

-- The fields a decision needs, and where the owner field starts.
local function parse(v)
  local fplen = tonumber(string.sub(v, 55, 62))
  local ownerAt = 63 + fplen
  local ownerlen = tonumber(string.sub(v, ownerAt, ownerAt + 7))
  return {
    state = string.sub(v, 1, 1),
    lease = tonumber(string.sub(v, 2, 17)),
    expires = tonumber(string.sub(v, 34, 49)),
    fp = string.sub(v, 63, 62 + fplen),
    ownerAt = ownerAt,
    owner = string.sub(v, ownerAt + 8, ownerAt + 7 + ownerlen),
    after = ownerAt + 8 + ownerlen,
  }
end

if op == 'reserve' then
  -- ARGV[2]: the new in-flight value; ARGV[3..7]: fingerprint, owner, nowMs, leaseUntilMs (16 digits), expiresAtMs
  local v = redis.call('GET', k)
  local now = tonumber(ARGV[5])
  if v then
    local r = parse(v)
    if r.expires > now then
      if r.state == 'i' and r.owner == ARGV[4] then
        -- Our own owner token: this very call already ran (a client re-sent it after a lost reply).
        return {${ReserveCode.AlreadyOurs}, v}
      end
      if r.state == 'i' and r.lease <= now and r.fp == ARGV[3] then
        local taken = 'i' .. ARGV[6] .. string.sub(v, 18, r.ownerAt - 1)
          .. string.format('%08d', #ARGV[4]) .. ARGV[4] .. string.sub(v, r.after)
        redis.call('SET', k, taken, 'KEEPTTL')
        return {${ReserveCode.TookOver}, taken}
      end
      return {${ReserveCode.Exists}, v}
    end
    -- Expired by the caller's clock, whatever Redis thinks: replaced.
  end
  redis.call('SET', k, ARGV[2], 'PXAT', ARGV[7])
  return {${ReserveCode.Created}}
end

if op == 'head' then
  -- The value up to its body (state, times, fingerprint, owner, headers) and the value's length, for list and
  -- stats: a body of megabytes is never sent to read a record's state. nil when there is no record.
  local n = redis.call('STRLEN', k)
  if n == 0 then return false end
  local at = 54
  for _ = 1, 3 do at = at + 8 + tonumber(redis.call('GETRANGE', k, at, at + 7)) end
  return {redis.call('GETRANGE', k, 0, at - 1), n}
end

-- The fenced operations (ARGV[2] is the owner): only the owner of an in-flight record. Read without the
-- table parse() builds: this is the hot path of every request.
local v = redis.call('GET', k)
if not v or string.byte(v, 1) ~= 105 then return 0 end -- absent, or not 'i' (in flight)
local ownerAt = 63 + tonumber(string.sub(v, 55, 62))
local ownerlen = tonumber(string.sub(v, ownerAt, ownerAt + 7))
if ownerlen ~= #ARGV[2] or string.sub(v, ownerAt + 8, ownerAt + 7 + ownerlen) ~= ARGV[2] then return 0 end

if op == 'finalize' then
  -- ARGV[3]: status and flags; ARGV[4]: an empty owner and the headers; ARGV[5]: the body, if any. Times and
  -- fingerprint stay.
  local done = 'c' .. string.sub(v, 2, 49) .. ARGV[3] .. string.sub(v, 55, ownerAt - 1) .. ARGV[4] .. (ARGV[5] or '')
  redis.call('SET', k, done, 'KEEPTTL')
  return 1
end
if op == 'release' then
  redis.call('DEL', k)
  return 1
end
if op == 'renew' then
  -- ARGV[3]: leaseUntilMs, 16 digits, written in place (0-based offset 1).
  redis.call('SETRANGE', k, 1, ARGV[3])
  return 1
end
return redis.error_reply('idem: unknown operation ' .. tostring(op))
`;

/** The SHA-1 that `EVALSHA` names the script by. */
export const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');
