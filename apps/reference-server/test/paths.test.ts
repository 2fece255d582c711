import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { IcebergError } from '../src/catalog/iceberg-error.js';
import { confine, localPath } from '../src/catalog/paths.js';

const base = realpathSync(mkdtempSync(join(tmpdir(), 'idem-paths-')));
const warehouse = join(base, 'warehouse');
const outside = join(base, 'outside');
mkdirSync(join(warehouse, 'ns'), { recursive: true });
mkdirSync(outside);
symlinkSync(outside, join(warehouse, 'ns', 'escape'));
symlinkSync(join(warehouse, 'ns'), join(warehouse, 'alias'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const root = { path: warehouse, url: pathToFileURL(warehouse).href };

/** The status a location meets, or the real path it resolves to. */
async function outcome(location: string, allowRoot = false): Promise<number | string> {
  try {
    return await confine(root, location, { field: 'location', allowRoot });
  } catch (error) {
    if (error instanceof IcebergError) return error.code;
    throw error;
  }
}

describe('localPath: what a location may be', () => {
  test.each([
    ['s3://bucket/table', /other schemes are not served/],
    ['gs://bucket/table', /other schemes are not served/],
    ['C:\\warehouse\\table', /other schemes are not served/],
    ['\\\\server\\share\\table', /absolute path/],
    ['relative/table', /absolute path/],
    ['file://evil.example/etc/passwd', /not a local file: URL/],
    ['file:///w/a%2Fb', /not a local file: URL/],
    ['file:///w/a%00b', /control characters/],
    ['/w/a\u0000b', /control characters/],
    ['', /must not be empty/],
    [`/${'x'.repeat(3000)}`, /at most 2048 bytes/],
  ])('%j is refused with a 400', (location, message) => {
    expect(() => localPath(location, 'location')).toThrow(message);
  });

  test.each([
    ['/w/t/', '/w/t'],
    ['/w//t/./x/..', '/w/t'],
    ['file:///w/t', '/w/t'],
    ['file://localhost/w/t', '/w/t'],
    ['FILE:///w/t', '/w/t'],
    ['file:///w/%2e%2e/etc', '/etc'],
    ['file:///w/a%20b', '/w/a b'],
  ])('%j is the local path %j', (location, path) => {
    expect(localPath(location, 'location')).toBe(path);
  });
});

describe('confine: inside the warehouse, by real path', () => {
  test('a path inside, existing or not, resolves to its real path', async () => {
    expect(await outcome(join(warehouse, 'ns', 'table'))).toBe(join(warehouse, 'ns', 'table'));
    expect(await outcome(`${pathToFileURL(warehouse).href}/ns/new/deeper/`)).toBe(
      join(warehouse, 'ns', 'new', 'deeper'),
    );
    // A symlink that stays inside is followed and allowed.
    expect(await outcome(join(warehouse, 'alias', 't'))).toBe(join(warehouse, 'ns', 't'));
  });

  test.each([
    ['an absolute path outside', () => '/etc/passwd'],
    ['a ../ escape', () => `${warehouse}/ns/../../outside/t`],
    ['a ../ escape after decoding', () => `${pathToFileURL(warehouse).href}/%2e%2e/outside`],
    ['a symlink inside pointing outside', () => join(warehouse, 'ns', 'escape', 't')],
    ['/proc/self', () => '/proc/self/status'],
    ['the filesystem root', () => 'file:///'],
    ['a sibling that shares the prefix', () => `${warehouse}-other/t`],
    ['the warehouse itself', () => `${warehouse}/`],
  ])('%s is a 403', async (_name, location) => {
    expect(await outcome(location())).toBe(403);
  });

  test('the warehouse itself only where allowed', async () => {
    expect(await outcome(warehouse, true)).toBe(warehouse);
  });
});
