process.on('SIGTERM', () => process.exit(0));

// One benchmark server per process, chosen by argv[2]; prints its port on stdout when listening.
import { createMemoryStore } from '@idem/store-memory';
import express from 'express';
import { idempotency as expressIdempotency, getSharedIdempotencyService } from 'express-idempotency';
import { idempotencyMiddleware } from '../src/index.js';

const variant = process.argv[2];
const app = express();
app.use(express.json());
if (variant === 'idem') app.use(idempotencyMiddleware({ store: createMemoryStore() }));
if (variant === 'express-idempotency') app.use(expressIdempotency());
let orders = 0;
app.post('/orders', (req, res) => {
  // express-idempotency calls the handler for a hit too; the handler must ask.
  if (variant === 'express-idempotency' && getSharedIdempotencyService().isHit(req)) return;
  orders++;
  res.status(201).json({ id: orders, item: req.body.item, lines: req.body.lines.length });
});
app.get('/count', (_req, res) => res.json({ orders }));
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(typeof address === 'object' && address ? address.port : 0);
});
