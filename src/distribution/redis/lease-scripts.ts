import type Redis from 'ioredis';

/**
 * The Lua scripts of session leases (see `SessionLeases`): each operation is one script, so one
 * round trip, and atomic on the server.
 */

/**
 * Acquire: KEYS lease, fence, released; ARGV instanceId, leaseMs, floor, this instance's known
 * value. `{fence, clean}`: clean (1) when the grant before this one was let go cleanly (the
 * released key holds its fence), so nothing of it is left to take over; 0 for a re-entrant
 * grant, or when the floor had to lift the counter (Redis lost its data: nothing is known).
 */
const ACQUIRE = `
local current = redis.call('GET', KEYS[1])
if current then
  if ARGV[4] ~= '' and current == ARGV[4] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tonumber(string.match(current, '|(%d+)$')), 0}
  end
  return false
end
local f = redis.call('INCR', KEYS[2])
local clean = 0
if redis.call('GET', KEYS[3]) == tostring(f - 1) then clean = 1 end
local floor = tonumber(ARGV[3])
if f <= floor then f = floor + 1; clean = 0; redis.call('SET', KEYS[2], f) end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. f, 'PX', ARGV[2])
return {f, clean}`;

/**
 * Release (compare-and-delete): KEYS lease, released, the session's pending list, the set of
 * sessions taken where their input came (`RedisKeys.direct`); ARGV value, fence, clean ('1' or
 * '0'), how long the clean mark lives (ms), the session id. A clean release also records its
 * fence as released; a deleted lease also leaves the direct set. `{deleted, pending}`: whether
 * the lease was deleted, and how many inputs wait in the pending list at that moment (the
 * session is to be woken again if any do).
 */
const RELEASE = `
local deleted = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] == '1' then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4]) end
  deleted = redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[4], ARGV[5])
end
return {deleted, redis.call('LLEN', KEYS[3])}`;

/** Most sessions one sweep looks at (more due: the next sweep goes on). */
const SWEEP_BATCH = 1_000;

/**
 * Sweep of the direct set (a sorted set, scored by the time, on Redis' clock in ms, at which
 * each session's lease was last known to run out): KEYS the set; ARGV the lease keys' head, the
 * lease length (ms). Looks only at the sessions whose score has passed, at most `SWEEP_BATCH`:
 * those whose lease is gone are removed and returned (their holder neither renewed nor released
 * it: it died, and no wake job stands behind them); those whose lease was renewed get its new
 * end as their score. So each held session is looked at about once per lease, by whichever
 * instance sweeps first, however many instances sweep.
 */
const SWEEP_DIRECT = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local orphaned = {}
for _, session in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ${SWEEP_BATCH})) do
  local ttl = redis.call('PTTL', ARGV[1] .. session)
  if ttl == -2 then
    redis.call('ZREM', KEYS[1], session)
    orphaned[#orphaned + 1] = session
  else
    if ttl < 0 then ttl = tonumber(ARGV[2]) end
    redis.call('ZADD', KEYS[1], now + ttl, session)
  end
end
return orphaned`;

/** Holder: KEYS lease. `{value, pttl}` or nil. */
const HOLDER = `
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}`;

/** Renew: KEYS leases; ARGV leaseMs, then each lease's expected value. 1 renewed, 0 lost. */
const RENEW = `
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  end
end
return out`;

/** The lease scripts, as ioredis defines them on the client (one round trip each). */
export interface LeaseCommands {
  /** Lease, fence and released keys; instanceId, leaseMs, floor, known value. */
  agentLeaseAcquire(...keysThenArgs: (string | number)[]): Promise<[number, number] | null>;
  /**
   * Lease, released, pending and direct keys; value, fence, clean flag, the clean mark's life
   * (ms), session id.
   */
  agentLeaseRelease(...keysThenArgs: (string | number)[]): Promise<[number, number]>;
  agentLeaseHolder(lease: string): Promise<[string, number] | null>;
  agentLeaseRenew(numKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>;
  /** The direct set; the lease keys' head, the lease length (ms). */
  agentLeaseSweepDirect(direct: string, leaseHead: string, leaseMs: number): Promise<string[]>;
}

/** Defines the lease scripts on `redis` (names of their own; defining again is harmless). */
export function defineLeaseCommands(redis: Redis): LeaseCommands {
  redis.defineCommand('agentLeaseAcquire', { numberOfKeys: 3, lua: ACQUIRE });
  redis.defineCommand('agentLeaseRelease', { numberOfKeys: 4, lua: RELEASE });
  redis.defineCommand('agentLeaseSweepDirect', { numberOfKeys: 1, lua: SWEEP_DIRECT });
  redis.defineCommand('agentLeaseHolder', { numberOfKeys: 1, lua: HOLDER });
  redis.defineCommand('agentLeaseRenew', { lua: RENEW });
  return redis as unknown as LeaseCommands;
}

/** The lease value of a grant: `<instanceId>|<fence>`. */
export function leaseValue(instanceId: string, fence: number): string {
  return `${instanceId}|${fence}`;
}

/** Splits a lease value `<instanceId>|<fence>` at its last `|`. */
export function parseLeaseValue(value: string): { instanceId: string; fence: number } {
  const at = value.lastIndexOf('|');
  const fence = Number(value.slice(at + 1));
  if (at < 0 || !Number.isSafeInteger(fence)) throw new Error(`Malformed lease value: ${value}`);
  return { instanceId: value.slice(0, at), fence };
}
