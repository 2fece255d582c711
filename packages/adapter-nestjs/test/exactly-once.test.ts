import { exactlyOnceSuite } from '@idem/adapter-suite';
import { describe, test } from 'vitest';
import { nestServer } from './app.js';

describe('NestJS 12 on platform-express', () => {
  exactlyOnceSuite({ describe, test }, nestServer('express'));
});

describe('NestJS 12 on platform-fastify', () => {
  exactlyOnceSuite({ describe, test }, nestServer('fastify'));
});
