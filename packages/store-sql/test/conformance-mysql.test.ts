import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { INSPECTION, makeMysqlStore, mysqlUp } from './support/backends.js';

describe.runIf(await mysqlUp())('MariaDB/MySQL (mysql2 pools)', () => {
  storeConformance({ describe, test }, makeMysqlStore(), INSPECTION);
});
