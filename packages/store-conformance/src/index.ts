export { concurrencyGroup } from './groups/concurrency.js';
export { expiryGroup } from './groups/expiry.js';
export { fencingGroup } from './groups/fencing.js';
export { limitsGroup } from './groups/limits.js';
export { payloadGroup } from './groups/payloads.js';
export { reserveGroup } from './groups/reserve.js';
export { scopingGroup } from './groups/scoping.js';
export type {
  ConformanceGroup,
  ConformanceOptions,
  MakeStore,
  StoreUnderTest,
  TestHarness,
} from './harness.js';
export { conformanceGroups, storeConformance } from './store-conformance.js';
