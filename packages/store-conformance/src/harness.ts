import { randomBytes, randomUUID } from 'node:crypto';
import type { IdempotencyStore, ReserveParams, StoredResponse } from '@idem/core';

/**
 * The few functions of a test runner the kit needs. vitest and jest pass their globals as they are;
 * node:test passes `{ describe, test }` from `node:test`.
 */
export interface TestHarness {
  describe(name: string, body: () => void): unknown;
  test(name: string, body: () => Promise<void>): unknown;
}

/** One store to test, made fresh for each test. */
export interface StoreUnderTest {
  /** A store that holds nothing from other tests (its own table, schema, prefix or process). */
  readonly store: IdempotencyStore;
  /**
   * Open another instance over the same backend, with its own connection or pool, as a second node would.
   * The concurrency battery spreads its calls over such instances. Without it, every call goes to `store`
   * (right for a single-process store). The kit closes each instance it opened.
   */
  connect?(): Promise<IdempotencyStore>;
  /** Runs after the test, pass or fail: drop the table, close the pool. */
  cleanup?(): Promise<void>;
}

/** Makes a fresh, isolated {@link StoreUnderTest} for one test. */
export type MakeStore = () => StoreUnderTest | Promise<StoreUnderTest>;

export interface ConformanceOptions {
  /** Parallel calls in each race of the concurrency battery. @default 50 */
  readonly concurrency?: number;
  /** Separate store instances (from `connect`) the calls are spread over. @default 5 */
  readonly instances?: number;
  /** The size of the large-body round trip, in bytes. @default 1 MiB */
  readonly largeBodyBytes?: number;
  /**
   * Declare that the backend deletes expired records itself (Redis `PEXPIREAT`, a TTL index), with the reason.
   * Such a store's `purgeExpired` has nothing left to count, and records the kit writes with 1970 expiry times
   * vanish at once, so the three purge-count tests are replaced (and the kit says so in their names and on the
   * console) by tests that `purgeExpired` returns a count and never deletes an unexpired record, and that an
   * expired record that is still there is replaced by `reserve` and never replayed.
   * @default undefined (the store purges: the purge-count tests run)
   */
  readonly nativeExpiry?: { readonly reason: string };
  /**
   * The optional inspection methods the store implements, so that their groups test them. Tests are registered
   * before any store is made (`makeStore` may be async, and runners such as jest collect synchronously), so
   * the kit cannot look for itself. A group whose method is not declared registers one test instead, which
   * passes for a store without the method and fails for a store that has it (declare it, then), so that
   * neither a missing declaration nor a missing method goes unnoticed.
   * @default [] (the store has none of them)
   */
  readonly inspection?: readonly InspectionMethod[];
}

/** The optional methods of the store SPI that the kit's inspection groups test. */
export type InspectionMethod = 'forget' | 'list' | 'stats';

const INSPECTION_METHODS: readonly InspectionMethod[] = ['forget', 'list', 'stats'];

export interface ResolvedOptions {
  readonly concurrency: number;
  readonly instances: number;
  readonly largeBodyBytes: number;
  readonly nativeExpiry: { readonly reason: string } | undefined;
  readonly inspection: ReadonlySet<InspectionMethod>;
}

export function resolveOptions(options: ConformanceOptions = {}): ResolvedOptions {
  const inspection = new Set(options.inspection ?? []);
  for (const method of inspection) {
    if (!INSPECTION_METHODS.includes(method)) {
      throw new TypeError(
        `inspection lists ${JSON.stringify(method)}; the optional methods are ${INSPECTION_METHODS.join(', ')}`,
      );
    }
  }
  return {
    concurrency: options.concurrency ?? 50,
    instances: options.instances ?? 5,
    largeBodyBytes: options.largeBodyBytes ?? 1024 * 1024,
    nativeExpiry: options.nativeExpiry,
    inspection,
  };
}

/** A named group of conformance tests. */
export type ConformanceGroup = (
  harness: TestHarness,
  makeStore: MakeStore,
  options?: ConformanceOptions,
) => void;

/**
 * Ordinary tests run at this time (2030-01-01, plus 123 ms) and later; a few hours at most. The milliseconds
 * are deliberate: a store that keeps whole seconds loses them and fails.
 */
export const BASE_MS = Date.UTC(2030, 0, 1) + 123;
/**
 * Purge tests write records that expire in 1970, long before anything else the kit writes, so that a purge
 * can only ever reach records of its own test.
 */
export const PURGE_BASE_MS = 1_000_000;

export const LEASE_MS = 30_000;
export const LIFETIME_MS = 3_600_000;

/** A random scope and key per test, so tests that share a backend never meet. */
export function freshRef(): { scope: string; key: string } {
  return { scope: `conformance-${randomBytes(6).toString('hex')}`, key: randomUUID() };
}

export function fingerprintOf(label: string): string {
  return label.padEnd(64, '0').slice(0, 64);
}

/** Reserve parameters at `nowMs` with the kit's lease and lifetime. */
export function reserveAt(
  ref: { scope: string; key: string },
  nowMs: number,
  overrides: Partial<Pick<ReserveParams, 'owner' | 'fingerprint' | 'leaseUntilMs' | 'expiresAtMs'>> = {},
): ReserveParams {
  return {
    ...ref,
    owner: overrides.owner ?? randomUUID(),
    fingerprint: overrides.fingerprint ?? fingerprintOf('a'),
    nowMs,
    leaseUntilMs: overrides.leaseUntilMs ?? nowMs + LEASE_MS,
    expiresAtMs: overrides.expiresAtMs ?? nowMs + LIFETIME_MS,
  };
}

export function jsonResponse(status: number, value: unknown): StoredResponse {
  return {
    status,
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify(value)),
  };
}

/** Make a store, run the test body, and always clean up: every instance the body opened, then the subject. */
export async function withStore(
  makeStore: MakeStore,
  body: (subject: {
    store: IdempotencyStore;
    instances: (n: number) => Promise<IdempotencyStore[]>;
  }) => Promise<void>,
): Promise<void> {
  const subject = await makeStore();
  const opened: IdempotencyStore[] = [];
  const instances = async (n: number): Promise<IdempotencyStore[]> => {
    if (subject.connect === undefined) return Array.from({ length: n }, () => subject.store);
    const more = await Promise.all(
      Array.from({ length: n - 1 }, () => (subject.connect as () => Promise<IdempotencyStore>)()),
    );
    opened.push(...more);
    return [subject.store, ...more];
  };
  try {
    await body({ store: subject.store, instances });
  } finally {
    await Promise.allSettled(opened.map((store) => store.close?.()));
    await subject.cleanup?.();
  }
}
