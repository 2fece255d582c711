import { randomUUID } from 'node:crypto';

/** A fresh reservation of `key` in `scope` at a fixed time (2030), with a 30 s lease. */
export function reserveParamsIn(scope: string, key: string) {
  const nowMs = Date.UTC(2030, 0, 1);
  return {
    scope,
    key,
    fingerprint: 'f',
    owner: randomUUID(),
    nowMs,
    leaseUntilMs: nowMs + 30_000,
    expiresAtMs: nowMs + 60_000,
  };
}
