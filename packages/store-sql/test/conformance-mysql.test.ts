import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { makeMysqlStore, mysqlUp } from './support/backends.js';

describe.runIf(await mysqlUp())('MariaDB/MySQL (mysql2 pools)', () => {
  describe('with INSERT … RETURNING where the server has it', () => {
    storeConformance({ describe, test }, makeMysqlStore());
  });
  // The MySQL path (no RETURNING: a second read decides by owner) runs against the same server.
  describe('without RETURNING, as on MySQL', () => {
    storeConformance({ describe, test }, makeMysqlStore({ returning: false }));
  });
});
