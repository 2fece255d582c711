import { createHash } from 'node:crypto';

/** What the `reserve` script answers first: the outcome, then (except for `Created`) the record's value. */
export const ReserveCode = { Exists: 0, Created: 1, TookOver: 2, AlreadyOurs: 3 } as const;

/**
 * The operations that must read, decide and write in one atomic step: Redis runs a script without
 * interleaving any other command, on any number of clients. Times are the caller's (ARGV); the server's clock
 * decides nothing. The record layout is in record.ts (positions here are 1-based: an in-flight value is `i`,
 * the owner's length in 4 digits, the owner, then the tail; a completed one `c`, the same tail, the completion).
 * The tail at position t: leaseUntilMs t..t+15, createdAtMs t+16.., expiresAtMs t+32..t+47, the fingerprint's
 * length t+48..t+51, the fingerprint from t+52. KEYS[1] is the record, ARGV[1] the operation.
 */
export const SCRIPT = `
local k = KEYS[1]
local op = ARGV[1]

-- The fenced operations, the hot path of every request. ARGV[2] is the caller's owner head ('i', the owner's
-- length, the owner): a value that starts with it is in flight and ours; nothing else is decoded.
if op == 'finalize' or op == 'release' or op == 'renew' then
  local head = ARGV[2]
  local v = redis.call('GET', k)
  if not v or string.sub(v, 1, #head) ~= head then return 0 end
  if op == 'finalize' then
    -- ARGV[3]: status, flags and headers; ARGV[4]: the body, if any. The tail (times, fingerprint) stays.
    redis.call('SET', k, 'c' .. string.sub(v, #head + 1) .. ARGV[3] .. (ARGV[4] or ''), 'KEEPTTL')
  elseif op == 'release' then
    redis.call('DEL', k)
  else
    -- ARGV[3]: leaseUntilMs, 16 digits, written in place: the tail starts right after the head.
    redis.call('SETRANGE', k, #head, ARGV[3])
  end
  return 1
end

if op == 'reserve' then
  -- ARGV[2]: the new in-flight value; ARGV[3..7]: fingerprint, owner head, nowMs, leaseUntilMs (16 digits),
  -- expiresAtMs
  local v = redis.call('GET', k)
  local now = tonumber(ARGV[5])
  if v then
    local state = string.sub(v, 1, 1)
    local t = 2
    if state == 'i' then t = 6 + tonumber(string.sub(v, 2, 5)) end
    if tonumber(string.sub(v, t + 32, t + 47)) > now then
      local head = ARGV[4]
      if state == 'i' and string.sub(v, 1, #head) == head then
        -- Our own owner token: this very call already ran (a client re-sent it after a lost reply).
        return {${ReserveCode.AlreadyOurs}, v}
      end
      local fplen = tonumber(string.sub(v, t + 48, t + 51))
      if state == 'i' and tonumber(string.sub(v, t, t + 15)) <= now
        and string.sub(v, t + 52, t + 51 + fplen) == ARGV[3] then
        local taken = head .. ARGV[6] .. string.sub(v, t + 16)
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
  -- The value up to its body (state, owner, times, fingerprint, headers) and the value's length, for list and
  -- stats: a body of megabytes is never sent to read a record's state. nil when there is no record. Offsets
  -- 0-based here, as GETRANGE takes them; e is where the head ends.
  local n = redis.call('STRLEN', k)
  if n == 0 then return false end
  local first = redis.call('GETRANGE', k, 0, 4)
  local inFlight = string.sub(first, 1, 1) == 'i'
  local t = 1
  if inFlight then t = 5 + tonumber(string.sub(first, 2, 5)) end
  local e = t + 52 + tonumber(redis.call('GETRANGE', k, t + 48, t + 51))
  if not inFlight then e = e + 13 + tonumber(redis.call('GETRANGE', k, e + 5, e + 12)) end
  return {redis.call('GETRANGE', k, 0, e - 1), n}
end
return redis.error_reply('idem: unknown operation ' .. tostring(op))
`;

/** The SHA-1 that `EVALSHA` names the script by. */
export const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');
