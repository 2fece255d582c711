export { concurrencyGroup } from './groups/concurrency.js';
export { expiryGroup } from './groups/expiry.js';
export { fencingGroup } from './groups/fencing.js';
export { forgetGroup } from './groups/forget.js';
export { limitsGroup } from './groups/limits.js';
export { listGroup } from './groups/list.js';
export { payloadGroup } from './groups/payloads.js';
export { reserveGroup } from './groups/reserve.js';
export { scopingGroup } from './groups/scoping.js';
export { statsGroup } from './groups/stats.js';
export type {
  ConformanceGroup,
  ConformanceOptions,
  InspectionMethod,
  MakeStore,
  StoreUnderTest,
  TestHarness,
} from './harness.js';
export { conformanceGroups, storeConformance } from './store-conformance.js';
