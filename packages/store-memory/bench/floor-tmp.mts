import { createHash, randomUUID } from 'node:crypto';
import { createIdempotency } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';

const store = createMemoryStore({ maxEntries: 100_000, sweepIntervalMs: false });
const idem = createIdempotency({ store });
const body = { item: 'book', quantity: 1, note: 'x'.repeat(200) };
const response = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };
const keyOf = () => {
  const u = randomUUID();
  return `${u.slice(0, 14)}7${u.slice(15)}`;
};
const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const floorMap = new Map<string, { fp: string; response: unknown }>();
async function floor(key: string) {
  if (!UUID7.test(key)) throw new Error('bad key');
  const fp = createHash('sha256')
    .update(`POST\n/orders\n${JSON.stringify(body, Object.keys(body).sort())}`)
    .digest('hex');
  const existing = floorMap.get(key);
  if (existing) return existing;
  floorMap.set(key, { fp, response: null });
  const r = response;
  floorMap.set(key, { fp, response: r });
  return r;
}
async function covered(key: string) {
  const result = await idem.begin({ method: 'POST', route: '/orders', body, key });
  if (result.action !== 'execute') throw new Error(result.action);
  await result.execution.finish(response);
}
const N = 200_000;
for (const [name, fn] of [
  ['floor', floor],
  ['covered', covered],
  ['floor', floor],
  ['covered', covered],
] as const) {
  const keys = Array.from({ length: N }, keyOf);
  const t = performance.now();
  for (const k of keys) await fn(k);
  const us = ((performance.now() - t) * 1000) / N;
  console.log(name, us.toFixed(2), 'µs/request');
}
