import { exactlyOnceSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { fastifyServer } from './app.js';

describe('Fastify 5', () => {
  exactlyOnceSuite({ describe, test }, fastifyServer);
});
