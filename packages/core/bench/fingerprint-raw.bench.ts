// pnpm bench: the fingerprint of a raw JSON body (a Buffer, as the adapters hand it over) against the floor a
// hand-written server pays to hash the same request: createHash('sha256').update(`${method} ${url}\n`)
// .update(rawString).digest('base64url'). Measured in one process, warm, 100 calls per iteration, for the
// current code and for the one before the byte-level canonicaliser (test/support/oracle-fingerprint.ts), so
// that the ratios are before/after on the same machine and the same run. Allocation is the heap growth over
// a batch with no collection in between (the largest of a few rounds: a scavenge can only lower it).
import { createHash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { machine, measure, printTable, ratio } from '../../../scripts/bench.js';
import { computeFingerprint, type FingerprintInput, type FingerprintOptions } from '../src/index.js';
import { computeFingerprint as before } from '../test/support/oracle-fingerprint.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const order = {
  item: 'book',
  customerId: 'cus_4f9a2c7e',
  currency: 'EUR',
  lines: [
    { sku: 'BOOK-0451', quantity: 1, unitPrice: 1299 },
    { sku: 'PEN-002', quantity: 2, unitPrice: 850 },
  ],
  shipping: { method: 'post', postcode: '75011', country: 'FR' },
};

function bodyOfSize(bytes: number): unknown[] {
  const item = { id: 0, name: 'item', tags: ['a', 'b'], nested: { z: 1, a: 2 }, pad: 'x'.repeat(40) };
  const perItem = JSON.stringify(item).length;
  return Array.from({ length: Math.max(1, Math.round(bytes / perItem)) }, (_, id) => ({ ...item, id }));
}

interface Case {
  readonly label: string;
  readonly text: string;
  readonly input: FingerprintInput;
  readonly options?: FingerprintOptions;
}

const request = (body: unknown): FingerprintInput => ({
  method: 'POST',
  route: '/orders',
  path: '/orders',
  body,
  contentType: 'application/json',
});
const orderText = JSON.stringify(order);
const cases: Case[] = [
  {
    label: `order (${orderText.length} B)`,
    text: orderText,
    input: request(Buffer.from(orderText)),
  },
  {
    label: 'order, excludeFields',
    text: orderText,
    input: request(Buffer.from(orderText)),
    options: { excludeFields: ['customerId', 'lines.unitPrice'] },
  },
  { label: 'order as a string', text: orderText, input: request(orderText) },
];
for (const size of [1_024, 65_536]) {
  const text = JSON.stringify(bodyOfSize(size));
  cases.push({
    label: `${size / 1024} KiB (${text.length} B)`,
    text,
    input: request(Buffer.from(text)),
  });
}

const BATCH = 100;
const ROUNDS = 7;
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] as number;
};
const floorOf = (text: string) => () => {
  for (let n = 0; n < BATCH; n++) {
    createHash('sha256').update('POST /orders\n').update(text).digest('base64url');
  }
};
const batchOf = (fingerprint: typeof computeFingerprint, c: Case) => () => {
  for (let n = 0; n < BATCH; n++) fingerprint(c.input, c.options);
};

/** Bytes the heap grows by per call, over a batch with no collection in between (largest of 5 rounds). */
function allocatedPerCall(run: () => void): number {
  let most = 0;
  for (let round = 0; round < 5; round++) {
    gc();
    const start = process.memoryUsage().heapUsed;
    run();
    most = Math.max(most, process.memoryUsage().heapUsed - start);
  }
  return most / BATCH;
}

console.log(`machine: ${machine()}`);
const rows: [string, string][] = [];
const ns = (opsPerSecond: number) => 1e9 / opsPerSecond / BATCH;
for (const c of cases) {
  if (computeFingerprint(c.input, c.options) !== before(c.input, c.options)) {
    throw new Error(`${c.label}: the fingerprint differs from the one before`);
  }
  // Rounds interleaved, each ratio taken within its round, and the median reported: on a machine shared with
  // other work the load changes between tasks, and one round's ratio is the least disturbed figure there is.
  const rounds: { floor: number; before: number; after: number }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const results = await measure(
      { floor: floorOf(c.text), before: batchOf(before, c), after: batchOf(computeFingerprint, c) },
      { timeMs: 300, warmupMs: round === 0 ? 300 : 50 },
    );
    rounds.push({
      floor: ns(results.floor as number),
      before: ns(results.before as number),
      after: ns(results.after as number),
    });
  }
  const floor = median(rounds.map((r) => r.floor));
  const was = median(rounds.map((r) => r.before));
  const now = median(rounds.map((r) => r.after));
  const wasRatio = median(rounds.map((r) => r.before / r.floor));
  const nowRatio = median(rounds.map((r) => r.after / r.floor));
  const allocated = (fingerprint: typeof computeFingerprint) =>
    `${Math.round(allocatedPerCall(batchOf(fingerprint, c)))} B`;
  rows.push([
    c.label,
    `floor ${floor.toFixed(0)} ns; before ${was.toFixed(0)} ns (${ratio(wasRatio)} floor, ` +
      `${allocated(before)}/call); after ${now.toFixed(0)} ns (${ratio(nowRatio)} floor, ` +
      `${allocated(computeFingerprint)}/call); ${ratio(was / now)} faster`,
  ]);
}
printTable(
  'computeFingerprint of a raw JSON body, ns per call (floor: sha256 of method, url and raw body)',
  rows,
);
