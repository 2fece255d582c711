import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { INSPECTION, makeSqliteFileStore, makeSqliteMemoryStore } from './support/backends.js';

describe('SQLite file (better-sqlite3, a connection per instance)', () => {
  storeConformance({ describe, test }, makeSqliteFileStore, INSPECTION);
});

describe('SQLite in memory (better-sqlite3)', () => {
  storeConformance({ describe, test }, makeSqliteMemoryStore, INSPECTION);
});
