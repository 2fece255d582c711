import { exactlyOnceSuite, httpBehaviourSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { fetchServer } from './app.js';

describe('a fetch handler wrapped by withIdempotency, on @hono/node-server', () => {
  httpBehaviourSuite({ describe, test }, fetchServer(), 'web');
  exactlyOnceSuite({ describe, test }, fetchServer());
});
