import { type MakeStore, storeConformance } from '@idem/store-conformance';
import { withReplayCache } from '@idem/store-memory';
import { describe, test } from 'vitest';
import { KIT_OPTIONS, redisStoreFactory, redisUp } from './support/servers.js';

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

describe.runIf(await redisUp())(
  'withReplayCache over standalone Redis (ioredis, a client and a cache per instance)',
  () => {
    storeConformance({ describe, test }, cached(redisStoreFactory('ioredis')), KIT_OPTIONS);
  },
);
