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
printTable('computeFingerprint (canonical JSON + SHA-256)', rows);
