import { exactlyOnceSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { honoServer } from './app.js';

describe('Hono 4 on @hono/node-server', () => {
  exactlyOnceSuite({ describe, test }, honoServer());
});
