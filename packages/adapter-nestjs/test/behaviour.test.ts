import { httpBehaviourSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { nestServer } from './app.js';

describe('NestJS 12 on platform-express', () => {
  httpBehaviourSuite({ describe, test }, nestServer('express'));
});

describe('NestJS 12 on platform-fastify', () => {
  httpBehaviourSuite({ describe, test }, nestServer('fastify'));
});
