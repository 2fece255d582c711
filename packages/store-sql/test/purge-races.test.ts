import { randomUUID } from 'node:crypto';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { makeMysqlStore, makePgStore, mysqlUp, pgUp } from './support/backends.js';

// Purging expired records while requests reserve keys, some of them the very keys being purged (a retry long
// after the first use): neither side may fail. A deadlock or lock wait is the store's to resolve, never an
// outage the coordinator would answer with 503.

const backends = [
  ['MariaDB', makeMysqlStore(), await mysqlUp()],
  ['PostgreSQL', makePgStore, await pgUp()],
] as const;

for (const [name, make, up] of backends) {
  describe.runIf(up)(`${name}: purge racing reserve`, () => {
    test('3 purgers and 300 reserves (a third on keys being purged) at once: no call fails', async () => {
      const subject = await make();
      const [a, b, c] = [subject.store, await subject.connect?.(), await subject.connect?.()];
      const stores = [a, b ?? a, c ?? a];
      try {
        const scope = `purge-${randomUUID().slice(0, 8)}`;
        const expired = Array.from({ length: 600 }, () => v7());
        // Written with 1970 times: long expired by 2030, when the test runs.
        for (let i = 0; i < expired.length; i += 50) {
          await Promise.all(
            expired.slice(i, i + 50).map((key) =>
              a.reserve({
                scope,
                key,
                fingerprint: 'f',
                owner: randomUUID(),
                nowMs: 0,
                leaseUntilMs: 1,
                expiresAtMs: 2,
              }),
            ),
          );
        }
        const nowMs = Date.UTC(2030, 0, 1);
        const reserves = Array.from({ length: 300 }, (_, i) => {
          const key = i % 3 === 0 ? (expired[i] as string) : v7();
          return (stores[i % 3] as typeof a).reserve({
            scope,
            key,
            fingerprint: 'g',
            owner: randomUUID(),
            nowMs,
            leaseUntilMs: nowMs + 30_000,
            expiresAtMs: nowMs + 60_000,
          });
        });
        const purges = stores.map(async (store) => {
          let total = 0;
          for (;;) {
            const count = await store.purgeExpired({ beforeMs: nowMs, limit: 40 });
            total += count;
            if (count < 40) return total;
          }
        });
        const results = await Promise.allSettled([...reserves, ...purges]);
        const failures = results.filter((r) => r.status === 'rejected');
        expect(failures.map((f) => String((f as PromiseRejectedResult).reason))).toEqual([]);
        for (const r of results.slice(0, 300)) {
          expect(r.status === 'fulfilled' && (r.value as { outcome: string }).outcome).toBe('reserved');
        }
      } finally {
        await Promise.all([b?.close?.(), c?.close?.()]);
        await subject.cleanup?.();
      }
    }, 60_000);
  });
}
