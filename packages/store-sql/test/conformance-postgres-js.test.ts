import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { INSPECTION, makePostgresJsStore, pgUp } from './support/backends.js';

describe.runIf(await pgUp())('PostgreSQL (postgres-js clients)', () => {
  storeConformance({ describe, test }, makePostgresJsStore, INSPECTION);
});
