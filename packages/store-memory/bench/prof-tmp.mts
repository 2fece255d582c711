import { randomUUID } from 'node:crypto';
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
const N = 400_000;
const keys = Array.from({ length: N }, keyOf);
for (const key of keys) {
  const result = await idem.begin({ method: 'POST', route: '/orders', body, key });
  if (result.action !== 'execute') throw new Error(result.action);
  await result.execution.finish(response);
}
