import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { INSPECTION, makePgStore, pgUp } from './support/backends.js';

describe.runIf(await pgUp())('PostgreSQL (node-postgres pools)', () => {
  storeConformance({ describe, test }, makePgStore, INSPECTION);
});
