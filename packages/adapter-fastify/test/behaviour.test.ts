import { httpBehaviourSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { fastifyServer } from './app.js';

describe('Fastify 5', () => {
  httpBehaviourSuite({ describe, test }, fastifyServer);
});
