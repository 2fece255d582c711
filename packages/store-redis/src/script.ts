import { createHash } from 'node:crypto';

/**
 * The record's fields, in the order `reserve` and `load` return them. A record is one Redis hash (one key, so
 * one slot, and every field binary-safe): a script reads only the fields it decides on and a fenced write
 * touches only the fields it changes (a renewal rewrites `lease`, never the body), while a replay still gets
 * the whole record in the same round trip. `owner` is absent once completed, `status` until then, `body` when
 * the body is null.
 */
export const FIELDS = [
  'fp',
  'owner',
  'lease',
  'created',
  'expires',
  'status',
  'headers',
  'body',
  'omitted',
] as const;

/** What `reserve` answers first: the outcome, then (except for `created`) the record's fields. */
export const ReserveCode = { Exists: 0, Created: 1, TookOver: 2, AlreadyOurs: 3 } as const;

/**
 * Every operation of the store, one atomic step each: Redis runs a script without interleaving any other
 * command, which is what makes reserve's read-decide-write a single step on any number of clients. Times are
 * the caller's (ARGV); the server's clock decides nothing. `PEXPIREAT` hands the record to Redis's own expiry
 * at the caller's `expiresAtMs`, and `reserve` still compares against `nowMs`, so a record Redis has not
 * evicted yet is treated as expired exactly on time.
 *
 * KEYS[1] is the record; ARGV[1] names the operation.
 */
export const SCRIPT = `
local FIELDS = {${FIELDS.map((f) => `'${f}'`).join(', ')}}
local op = ARGV[1]
local k = KEYS[1]

if op == 'load' then
  return redis.call('HMGET', k, unpack(FIELDS))
end

if op == 'reserve' then
  -- ARGV[2..6]: fingerprint, owner, nowMs, leaseUntilMs, expiresAtMs
  local cur = redis.call('HMGET', k, unpack(FIELDS))
  local now = tonumber(ARGV[4])
  if cur[5] then
    if tonumber(cur[5]) > now then
      if cur[2] == ARGV[3] then
        -- Our own owner token: this very call already ran (a client re-sent it after a reconnect).
        return {${ReserveCode.AlreadyOurs}, unpack(cur)}
      end
      if not cur[6] and tonumber(cur[3]) <= now and cur[1] == ARGV[2] then
        redis.call('HSET', k, 'owner', ARGV[3], 'lease', ARGV[5])
        cur[2] = ARGV[3]
        cur[3] = ARGV[5]
        return {${ReserveCode.TookOver}, unpack(cur)}
      end
      return {${ReserveCode.Exists}, unpack(cur)}
    end
    -- Expired by the caller's clock, whatever Redis thinks: replaced, old fields and all.
    redis.call('DEL', k)
  end
  redis.call('HSET', k, 'fp', ARGV[2], 'owner', ARGV[3], 'lease', ARGV[5], 'created', ARGV[4], 'expires', ARGV[6])
  redis.call('PEXPIREAT', k, ARGV[6])
  return {${ReserveCode.Created}}
end

-- The fenced operations (ARGV[2] is the owner): only the owner of an in-flight record.
local cur = redis.call('HMGET', k, 'owner', 'status')
if cur[1] ~= ARGV[2] or cur[2] then
  return 0
end

if op == 'finalize' then
  -- ARGV[3..6]: status, headers, bodyOmitted ('1' or '0'), body (absent when null)
  redis.call('HDEL', k, 'owner')
  redis.call('HSET', k, 'status', ARGV[3], 'headers', ARGV[4])
  if ARGV[5] == '1' then redis.call('HSET', k, 'omitted', '1') end
  if ARGV[6] then redis.call('HSET', k, 'body', ARGV[6]) end
  return 1
end
if op == 'release' then
  redis.call('DEL', k)
  return 1
end
if op == 'renew' then
  redis.call('HSET', k, 'lease', ARGV[3])
  return 1
end
return redis.error_reply('idem: unknown operation ' .. tostring(op))
`;

/** The SHA-1 that `EVALSHA` names the script by. */
export const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');
