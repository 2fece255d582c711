import assert from 'node:assert/strict';
import type { IdempotencyStore } from '@idem/core';
import {
  type ConformanceOptions,
  type InspectionMethod,
  type MakeStore,
  resolveOptions,
  type TestHarness,
  withStore,
} from '../harness.js';

const announced = new Set<InspectionMethod>();

/** The name of the one test a group registers for a store without its method. */
export const notImplementedTestName = (method: InspectionMethod): string =>
  `${method}: not implemented by this store (optional), skipped`;

/**
 * Register an optional method's tests when the store declares the method (`options.inspection`), else the one
 * test that says the store lacks it. That test passes only while the store really has no such method, so a
 * store that gains one without declaring it fails instead of going untested. Never a silent skip: the kit also
 * says it on the console, once per method and process.
 */
export function optionalMethodGroup(
  harness: TestHarness,
  makeStore: MakeStore,
  options: ConformanceOptions | undefined,
  method: InspectionMethod,
  register: () => void,
): void {
  if (resolveOptions(options).inspection.has(method)) {
    register();
    return;
  }
  if (!announced.has(method)) {
    announced.add(method);
    console.info(
      `@idem/store-conformance: ${method} is not implemented by this store (it is optional): its tests are ` +
        `skipped. A store that has it declares it with { inspection: ['${method}', …] }.`,
    );
  }
  harness.test(notImplementedTestName(method), () =>
    withStore(makeStore, async ({ store }) => {
      assert.equal(
        typeof store[method],
        'undefined',
        `this store has ${method}(): declare it with { inspection: ['${method}', …] } in the kit's options, ` +
          `so that the ${method} group tests it`,
      );
    }),
  );
}

/** The store's `method`, which the kit was told it has. */
export function methodOf<M extends InspectionMethod>(
  store: IdempotencyStore,
  method: M,
): NonNullable<IdempotencyStore[M]> {
  const fn = store[method];
  assert.equal(
    typeof fn,
    'function',
    `the kit's options declare ${method} (inspection), but this store has no ${method}()`,
  );
  return (fn as (...args: unknown[]) => unknown).bind(store) as NonNullable<IdempotencyStore[M]>;
}
