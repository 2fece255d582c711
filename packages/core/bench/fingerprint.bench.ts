// pnpm bench: the request fingerprint's cost per body size, against hashing JSON.stringify of the same body
// (no canonicalization) measured in the same run. A ratio that stays flat as bodies grow means linear cost.
import { createHash } from 'node:crypto';
import { machine, measure, printTable, ratio } from '../../../scripts/bench.js';
import { computeFingerprint } from '../src/index.js';

function bodyOfSize(bytes: number): unknown[] {
  const item = { id: 0, name: 'item', tags: ['a', 'b'], nested: { z: 1, a: 2 }, pad: 'x'.repeat(40) };
  const perItem = JSON.stringify(item).length;
  return Array.from({ length: Math.max(1, Math.round(bytes / perItem)) }, (_, id) => ({ ...item, id }));
}

console.log(`machine: ${machine()}`);
const rows: [string, string][] = [];
for (const size of [1_024, 65_536, 1_048_576]) {
  const body = bodyOfSize(size);
  const results = await measure(
    {
      baseline: () => createHash('sha256').update(JSON.stringify(body)).digest('hex'),
      fingerprint: () => computeFingerprint({ method: 'POST', route: '/v1/orders', body }),
    },
    { timeMs: 1_000 },
  );
  const fingerprint = results.fingerprint as number;
  const mbPerSecond = (fingerprint * JSON.stringify(body).length) / 1_048_576;
  rows.push([
    `${(size / 1024).toFixed(0)} KiB JSON body`,
    `${mbPerSecond.toFixed(0)} MiB/s, ${ratio(fingerprint / (results.baseline as number))} of sha256(JSON.stringify)`,
  ]);
}

// Raw JSON bytes (what the adapters hand over) against hashing the same bytes as they are, and a hostile shape:
// a large leaf under arrays nested 999 deep, each level with a sibling, which must cost what a flat body does.
const json = 'application/json';
const flat = Buffer.from(JSON.stringify(bodyOfSize(1_048_576)));
const leaf = JSON.stringify('x'.repeat(1_000_000));
const deep = Buffer.from(`${'[1,'.repeat(999)}${leaf}${']'.repeat(999)}`);
const raw = await measure(
  {
    bytes: () => createHash('sha256').update(flat).digest('hex'),
    flat: () => computeFingerprint({ method: 'POST', route: '/v1/orders', body: flat, contentType: json }),
    deep: () => computeFingerprint({ method: 'POST', route: '/v1/orders', body: deep, contentType: json }),
  },
  { timeMs: 1_000 },
);
const perByte = (ops: number, size: number) => (ops * size) / 1_048_576;
rows.push([
  '1 MiB raw JSON bytes (exact canonical form)',
  `${perByte(raw.flat as number, flat.length).toFixed(0)} MiB/s, ${ratio((raw.flat as number) / (raw.bytes as number))} of sha256 of the bytes`,
]);
rows.push([
  '1 MB leaf under 999 nested arrays',
  `${perByte(raw.deep as number, deep.length).toFixed(0)} MiB/s (flat: ${perByte(raw.flat as number, flat.length).toFixed(0)} MiB/s)`,
]);
printTable('computeFingerprint (canonical JSON + SHA-256)', rows);
