import { type MakeStore, storeConformance } from '@idem/store-conformance';
import { withReplayCache } from '@idem/store-memory';
import { describe, test } from 'vitest';
import { INSPECTION, makePgStore, makeSqliteFileStore, pgUp } from './support/backends.js';

/** The same store with a replay cache per instance, as each node would have its own. */
const cached =
  (make: MakeStore): MakeStore =>
  async () => {
    const subject = await make();
    const { connect } = subject;
    return {
      ...subject,
      store: withReplayCache(subject.store),
      ...(connect === undefined ? {} : { connect: async () => withReplayCache(await connect()) }),
    };
  };

describe('withReplayCache over SQLite (a file, a connection and a cache per instance)', () => {
  storeConformance({ describe, test }, cached(makeSqliteFileStore), INSPECTION);
});

describe.runIf(await pgUp())('withReplayCache over PostgreSQL (a pool and a cache per instance)', () => {
  storeConformance({ describe, test }, cached(makePgStore), INSPECTION);
});
