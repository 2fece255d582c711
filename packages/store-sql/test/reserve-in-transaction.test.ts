import {
  type BeginResult,
  createIdempotency,
  type Idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type TransactionalStore,
} from '@idem/core';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { mysqlUp, pgUp } from './support/backends.js';
import { type Host, mysqlHost, onHost, postgresHost, sqliteHost } from './support/hosts.js';

// reserveIn: 'transaction': the key is reserved, the work done and the record finalized in one transaction of
// the host's; duplicates wait on the row until it ends.

const created = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };
const request = (key: string) => ({ method: 'POST', route: '/orders', path: '/orders', body: { a: 1 }, key });

/** A fresh host from `make` and a coordinator reserving in its transactions; the host closed afterwards. */
function withCoordinator(
  make: () => Promise<Host>,
  body: (host: Host, idem: Idempotency) => Promise<void>,
  options: Partial<Omit<IdempotencyOptions, 'store'>> = {},
): Promise<void> {
  return onHost(make, (host) =>
    body(host, createIdempotency({ store: host.store, reserveIn: 'transaction', ...options })),
  );
}

/** An execution whose key is checked but not reserved: its transaction reserves it. */
type Pending = Extract<BeginResult, { action: 'reserve-in-transaction' }>['execution'];

/** `begin` for `key`, which answers `reserve-in-transaction`: the reservation is the transaction's. */
async function pending(idem: Idempotency, key: string): Promise<Pending> {
  const begun = await idem.begin(request(key));
  if (begun.action !== 'reserve-in-transaction') throw new Error(begun.action);
  return begun.execution;
}

/** The host's handler: reserve, write an order, finalize, all in one transaction; or the answer to send. */
async function handle(
  host: Host,
  execution: Pending,
  order: string,
  options: { failAfterWrite?: boolean } = {},
) {
  return host.transaction(async (tx) => {
    const reservation = await execution.reserveWith(tx.idem);
    if (reservation.action !== 'execute') return reservation.action;
    await tx.insert(order);
    if (options.failAfterWrite) throw new Error('the handler failed');
    expect(await execution.finalizeWith(created, tx.idem)).toBe('finalized');
    return 'executed';
  });
}

const hosts = [
  ['SQLite', sqliteHost, true],
  ['PostgreSQL', postgresHost, await pgUp()],
  ['MariaDB', mysqlHost, await mysqlUp()],
] as const;

for (const [name, makeHost, up] of hosts) {
  describe.runIf(up)(`${name}: reserveIn 'transaction'`, () => {
    test('one transaction reserves, writes and finalizes; the retry replays without running the handler', () =>
      withCoordinator(makeHost, async (host, idem) => {
        const key = v7();
        const first = await pending(idem, key);
        expect(await handle(host, first, 'o1')).toBe('executed');
        expect(await first.finish(created)).toBe('finalized');
        expect(await handle(host, await pending(idem, key), 'o1-again')).toBe('replay');
        expect(await host.orders()).toEqual(['o1']);
        expect((await host.store.load({ scope: '', key }))?.response?.status).toBe(201);
      }));

    test('a handler that fails after its write rolls back the reservation with it: the retry executes', () =>
      withCoordinator(makeHost, async (host, idem) => {
        const key = v7();
        const first = await pending(idem, key);
        await expect(handle(host, first, 'o1', { failAfterWrite: true })).rejects.toThrow('failed');
        expect(await first.finish({ status: 500, headers: {}, body: null })).toBe('released');
        expect(await host.store.load({ scope: '', key })).toBeUndefined();
        expect(await handle(host, await pending(idem, key), 'o2')).toBe('executed');
        expect(await host.orders()).toEqual(['o2']);
      }));

    test('10 concurrent requests with one key: one executes, every other waits for it and replays', () =>
      withCoordinator(makeHost, async (host, idem) => {
        const key = v7();
        const outcomes = await Promise.all(
          Array.from({ length: 10 }, async (_, i) => handle(host, await pending(idem, key), `o${i}`)),
        );
        expect(outcomes.filter((o) => o === 'executed')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'replay')).toHaveLength(9);
        expect(await host.orders()).toHaveLength(1);
      }));

    test('a status the rule releases is removed in the transaction: nothing is left for the retry to meet', () =>
      withCoordinator(makeHost, async (host, idem) => {
        const key = v7();
        const first = await pending(idem, key);
        await host.transaction(async (tx) => {
          expect((await first.reserveWith(tx.idem)).action).toBe('execute');
          expect(await first.finalizeWith({ status: 503, headers: {}, body: null }, tx.idem)).toBe(
            'not-stored',
          );
        });
        expect(await host.store.load({ scope: '', key })).toBeUndefined();
      }));
  });
}

const rowLocking = hosts.filter(([name]) => name !== 'SQLite');

for (const [name, makeHost, up] of rowLocking) {
  describe.runIf(up)(`${name}: a duplicate that waits on the row longer than the lock wait`, () => {
    test('is told the key is in flight (a conflict event), and the first request still commits', async () => {
      const events: IdempotencyEvent[] = [];
      const inFlight = { strategy: 'wait', maxWaitMs: 1_000, timeoutStatus: 503 } as const;
      await withCoordinator(
        makeHost,
        async (host, idem) => {
          const key = v7();
          const [first, duplicate] = [await pending(idem, key), await pending(idem, key)];
          let release = () => {};
          const held = new Promise<void>((resolve) => {
            release = resolve;
          });
          let reserved = () => {};
          const isReserved = new Promise<void>((resolve) => {
            reserved = resolve;
          });
          const holder = host.transaction(async (tx) => {
            expect((await first.reserveWith(tx.idem)).action).toBe('execute');
            reserved();
            await held;
            await tx.insert('o1');
            return first.finalizeWith(created, tx.idem);
          });
          await isReserved;
          const refused = await host
            .transaction((tx) => duplicate.reserveWith(tx.idem), { lockWaitSeconds: 1 })
            .catch((error: unknown) => error);
          release();
          expect(await holder).toBe('finalized');
          expect(refused).toMatchObject({
            action: 'reject',
            error: { code: 'IDEMPOTENCY_IN_PROGRESS', status: 503 },
          });
          expect(events.filter((e) => e.type === 'conflict')).toMatchObject([{ waited: true, status: 503 }]);
          expect(await duplicate.finish({ status: 503, headers: {}, body: null })).toBe('already-settled');
          expect(await host.orders()).toEqual(['o1']);
          expect((await host.store.load({ scope: '', key }))?.response?.status).toBe(201);
        },
        { inFlight, onEvent: (event) => events.push(event) },
      );
    });
  });
}

describe('events of a reservation made in a transaction', () => {
  test('a fault of the store is reported (store-error) and thrown; a rolled-back reservation ends released', async () => {
    const events: IdempotencyEvent[] = [];
    await withCoordinator(
      sqliteHost,
      async (host, idem) => {
        const broken = await pending(idem, v7());
        const fault = new Error('connect ECONNREFUSED');
        const failing: TransactionalStore = {
          reserve: () => Promise.reject(fault),
          finalize: () => false,
          release: () => false,
        };
        await expect(broken.reserveWith(failing)).rejects.toBe(fault);
        expect(events.at(-1)).toMatchObject({
          type: 'store-error',
          operation: 'reserve',
          failedOpen: false,
          error: fault,
        });

        const rolledBack = await pending(idem, v7());
        await expect(handle(host, rolledBack, 'o1', { failAfterWrite: true })).rejects.toThrow('failed');
        expect(await rolledBack.finish({ status: 500, headers: {}, body: null })).toBe('released');
        expect(events.at(-1)).toMatchObject({
          type: 'released',
          reason: 'status',
          status: 500,
          owner: rolledBack.owner,
        });
      },
      { onEvent: (e) => events.push(e) },
    );
  });
});
