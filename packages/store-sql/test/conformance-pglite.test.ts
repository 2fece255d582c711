import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { INSPECTION, pgliteFactory } from './support/backends.js';

describe('PGlite (PostgreSQL in WebAssembly)', () => {
  storeConformance({ describe, test }, pgliteFactory(), INSPECTION);
});
