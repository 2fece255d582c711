import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { makePostgresJsStore, pgUp } from './support/backends.js';

describe.runIf(await pgUp())('PostgreSQL (postgres-js clients)', () => {
  storeConformance({ describe, test }, makePostgresJsStore);
});
