import { exactlyOnceSuite } from '@idem/adapter-suite';
import express from 'express';
import { describe, test } from 'vitest';
import { expressServer } from './app.js';

describe('Express 5', () => {
  exactlyOnceSuite({ describe, test }, expressServer(express as never));
});
