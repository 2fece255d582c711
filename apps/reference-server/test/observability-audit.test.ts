import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { IdempotencyEvent } from '@idem/core';
import pino from 'pino';
import pretty from 'pino-pretty';
import { afterEach, describe, expect, test } from 'vitest';
import { splitScope } from '../src/idempotency/scope.js';
import { createAuditLog } from '../src/observability/audit-log.js';
import { principalMasker } from '../src/observability/principal-mask.js';
import { gate, type ObservedNode, startObservedNode } from './support/observed.js';
import { call, newKey } from './support/server.js';

let node: ObservedNode | undefined;
const scratchDirs: string[] = [];
afterEach(async () => {
  await node?.close();
  node = undefined;
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const scratch = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'idem-audit-'));
  scratchDirs.push(dir);
  return dir;
};

/** The audit file's lines, parsed; each must be exactly one JSON object. */
function auditLines(file: string): Record<string, unknown>[] {
  const text = readFileSync(file, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('the audit log (AUDIT_LOG_FILE): one line per key decision', () => {
  test('reserved, finalized, replayed, mismatch, in flight and a store outage, with masked principal and no secret', async () => {
    const file = join(scratch(), 'logs', 'audit.log'); // the directory is made on startup
    node = await startObservedNode(
      {
        AUTH_TOKENS: 'very-secret-token=alice.smith',
        IDEMPOTENCY_MAX_WAIT_MS: '100',
        AUDIT_HASH_KEY: 'test-key',
        AUDIT_LOG_FILE: file,
      },
      'postgres', // where a duplicate waits on its first request's row, then is told it is in flight
    );
    const { url, faults } = node;
    const token = 'very-secret-token';
    const key = newKey();
    const body = { namespace: ['confidential-namespace-name'], properties: { owner: 'body-secret' } };
    const create = (b: unknown, k = key) =>
      call(url, 'POST', '/v1/warehouse1/namespaces', { key: k, token, body: b });
    expect((await create(body)).status).toBe(200);
    expect((await create(body)).status).toBe(200); // replayed
    expect((await create({ namespace: ['other'] })).status).toBe(400); // mismatch
    const held = gate();
    faults.hold = held.wait;
    const busy = newKey();
    const first = create({ namespace: ['busy'] }, busy);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await create({ namespace: ['busy'] }, busy)).status).toBe(503); // in flight
    held.open();
    faults.hold = undefined;
    await first;
    faults.storeDown = true;
    expect((await create({ namespace: ['down'] }, newKey())).status).toBe(503);
    faults.storeDown = false;
    await node.close();
    node = undefined;

    const lines = auditLines(file);
    expect(lines.map((line) => line.decision)).toEqual([
      'reserved',
      'finalized',
      'replayed',
      'mismatch',
      'reserved',
      'in-flight', // the duplicate, while the first one's transaction waits to commit
      'finalized', // once it committed and its answer went out: the audit log says what is durable
      'store-unavailable',
    ]);
    const masked = principalMasker('test-key')('alice.smith');
    expect(masked).toMatch(/^ali\*\*\*#[0-9a-f]{8}$/);
    for (const line of lines) {
      expect(line).toMatchObject({
        audit: 'idempotency',
        principal: masked,
        prefix: 'warehouse1',
        method: 'POST',
        route: '/v1/:prefix/namespaces',
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(typeof line.durationMs).toBe('number');
      expect(typeof line.key).toBe('string');
    }
    expect(lines[0]).toMatchObject({ key, msg: 'idempotency key reserved' });
    expect(lines[1]).toMatchObject({ key, status: 200 });
    expect(lines[2]).toMatchObject({ key, status: 200 });
    expect(lines[3]).toMatchObject({ key, status: 400 });
    expect(lines[5]).toMatchObject({ key: busy, status: 503, waited: true });
    expect(lines[6]).toMatchObject({ key: busy, status: 200 });
    // Reserved in the catalog's transaction: the outage fails that transaction, the server answers 503.
    expect(lines[7]).toMatchObject({ operation: 'reserve', failedOpen: false, level: 40 });
    const text = readFileSync(file, 'utf8');
    for (const secret of ['alice.smith', token, 'confidential-namespace-name', 'body-secret', '\u001f']) {
      expect(text).not.toContain(secret);
    }
  });

  test('AUDIT_LOG=false writes nothing', async () => {
    const file = join(scratch(), 'audit.log');
    node = await startObservedNode({ AUDIT_LOG: 'false', AUDIT_LOG_FILE: file });
    await call(node.url, 'POST', '/v1/namespaces', { key: newKey(), body: { namespace: ['x'] } });
    await node.close();
    node = undefined;
    expect(() => readFileSync(file)).toThrow(/ENOENT/);
  });
});

const hasAny = (text: string, characters: readonly string[]): boolean =>
  characters.some((c) => text.includes(c));

describe('audit lines resist hostile text', () => {
  const hostile =
    'evil\n{"decision":"finalized","forged":true}\r\u001b[31mred\u001b[0m\u2028\u202eoverride\u0000';
  const events: IdempotencyEvent[] = [
    {
      type: 'reserved',
      scope: `${hostile}\u001f${hostile}`,
      key: hostile,
      method: 'POST',
      route: hostile,
      owner: 'o',
      tookOver: true,
      durationMs: 1,
      elapsedMs: 2,
    },
    {
      type: 'lease-lost',
      scope: `p\u001fbob`,
      key: 'k',
      method: 'POST',
      route: '/r',
      owner: 'o',
      phase: 'finalize',
      status: 201,
      durationMs: 1,
      executionMs: 3,
    },
  ];

  function capture() {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    });
    return { chunks, stream };
  }

  test('control, line-separator and bidi characters in keys, scopes and routes are escaped: one line, nothing forged', () => {
    const { chunks, stream } = capture();
    const audit = createAuditLog(pino(stream), { maskPrincipal: principalMasker('k'), splitScope });
    for (const event of events) audit(event);
    const text = chunks.join('');
    const lines = text.split('\n').filter(Boolean);
    expect(lines).toHaveLength(2);
    const [taken, lost] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(taken).toMatchObject({ decision: 'lease-taken-over', prefix: expect.stringContaining('\\u{a}') });
    expect(taken?.forged).toBeUndefined();
    expect(hasAny(String(taken?.key), ['\n', '\r', '\u0000', '\u001b', '\u2028', '\u202e'])).toBe(false);
    expect(String(taken?.route)).toContain('\\u{1b}[31m');
    expect(lost).toMatchObject({ decision: 'lease-lost', phase: 'finalize', status: 201, level: 40 });
    expect(String(lost?.principal)).toMatch(/^b\*\*\*#/);
  });

  test('pretty-printed (a terminal), hostile text cannot colour, move or split a line', async () => {
    const { chunks, stream } = capture();
    const prettyStream = pretty({ colorize: false, destination: stream, sync: true });
    const audit = createAuditLog(pino(prettyStream), { maskPrincipal: principalMasker('k'), splitScope });
    audit(events[0] as IdempotencyEvent);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const text = chunks.join('');
    expect(hasAny(text, ['\r', '\u0000', '\u001b', '\u2028', '\u202e'])).toBe(false);
    expect(text).not.toMatch(/^\{"decision"/m);
  });

  test('with the level off, no line is built: the principal is not even masked', () => {
    const { chunks, stream } = capture();
    let masked = 0;
    const audit = createAuditLog(pino({ level: 'error' }, stream), {
      maskPrincipal: (principal) => {
        masked++;
        return principal;
      },
      splitScope,
    });
    for (const event of events) audit(event);
    expect(masked).toBe(0);
    expect(chunks).toEqual([]);
    const warnings = createAuditLog(pino({ level: 'warn' }, stream), {
      maskPrincipal: principalMasker('k'),
      splitScope,
    });
    for (const event of events) warnings(event);
    expect(chunks.join('').split('\n').filter(Boolean)).toHaveLength(1); // the lease-lost warning only
  });

  test('the mask keeps at most 3 characters (a third of short names) and a keyed hash', () => {
    const mask = principalMasker('key-1');
    expect(mask('anonymous')).toMatch(/^ano\*\*\*#[0-9a-f]{8}$/);
    expect(mask('bob')).toMatch(/^b\*\*\*#/);
    expect(mask('al')).toMatch(/^\*\*\*#/);
    expect(mask('alice')).toBe(mask('alice'));
    expect(mask('alice')).not.toBe(mask('alicf'));
    // Remembered masks stay right past the bound, when the memo starts over.
    const first = mask('alice');
    const fresh = principalMasker('key-1');
    for (let i = 0; i < 2_500; i++) expect(mask(`user-${i}`)).toBe(fresh(`user-${i}`));
    expect(mask('alice')).toBe(first);
    expect(principalMasker('key-2')('alice')).not.toBe(mask('alice'));
    expect(principalMasker(undefined)('alice')).not.toBe(principalMasker(undefined)('alice'));
  });
});
