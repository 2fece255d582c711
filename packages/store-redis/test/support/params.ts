import { randomUUID } from 'node:crypto';
import type { ReserveParams } from '@idem/core';
import { v7 } from 'uuid';

/** The kit's clock: 2030, with milliseconds. */
export const NOW_MS = Date.UTC(2030, 0, 1) + 123;

/** A fresh reservation of `key` in `scope` at NOW_MS, with a 30 s lease and a 1 h lifetime. */
export function reserveParams(scope: string, key: string = v7(), nowMs = NOW_MS): ReserveParams {
  return {
    scope,
    key,
    fingerprint: 'f'.repeat(64),
    owner: randomUUID(),
    nowMs,
    leaseUntilMs: nowMs + 30_000,
    expiresAtMs: nowMs + 3_600_000,
  };
}

export const response = (text: string) => ({
  status: 201,
  headers: { 'content-type': 'text/plain' },
  body: new TextEncoder().encode(text),
});
