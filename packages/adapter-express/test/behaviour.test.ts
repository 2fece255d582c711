import { httpBehaviourSuite } from '@idem/adapter-suite';
import express from 'express';
import express4 from 'express4';
import { describe, test } from 'vitest';
import { expressServer } from './app.js';

describe('Express 5', () => {
  httpBehaviourSuite({ describe, test }, expressServer(express as never));
});

describe('Express 4', () => {
  httpBehaviourSuite({ describe, test }, expressServer(express4 as never));
});
