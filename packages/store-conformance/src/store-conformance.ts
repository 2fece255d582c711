import { concurrencyGroup } from './groups/concurrency.js';
import { expiryGroup } from './groups/expiry.js';
import { fencingGroup } from './groups/fencing.js';
import { forgetGroup } from './groups/forget.js';
import { limitsGroup } from './groups/limits.js';
import { listGroup } from './groups/list.js';
import { payloadGroup } from './groups/payloads.js';
import { reserveGroup } from './groups/reserve.js';
import { scopingGroup } from './groups/scoping.js';
import { statsGroup } from './groups/stats.js';
import type { ConformanceGroup, ConformanceOptions, MakeStore, TestHarness } from './harness.js';

/** Every group of the kit, by name. */
export const conformanceGroups = {
  reserve: reserveGroup,
  fencing: fencingGroup,
  scoping: scopingGroup,
  payloads: payloadGroup,
  limits: limitsGroup,
  expiry: expiryGroup,
  concurrency: concurrencyGroup,
  forget: forgetGroup,
  list: listGroup,
  stats: statsGroup,
} as const satisfies Record<string, ConformanceGroup>;

/**
 * Register the whole conformance suite for one store with the caller's test runner.
 *
 * @param harness `{ describe, test }` of vitest, jest or node:test.
 * @param makeStore Makes a fresh, isolated store for each test (and says how to open a second instance).
 *
 * @example
 * import { describe, test } from 'vitest';
 * storeConformance({ describe, test }, () => ({ store: createMemoryStore() }), {
 *   inspection: ['forget', 'list', 'stats'], // the optional methods it has
 * });
 */
export function storeConformance(
  harness: TestHarness,
  makeStore: MakeStore,
  options?: ConformanceOptions,
): void {
  harness.describe('IdempotencyStore conformance', () => {
    for (const group of Object.values(conformanceGroups)) {
      group(harness, makeStore, options);
    }
  });
}
