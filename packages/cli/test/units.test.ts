import { describe, expect, test } from 'vitest';
import { normalizeKey } from '../src/commands.js';
import { humanBytes, humanDuration } from '../src/output.js';
import { parseStoreUrl, secretsOf } from '../src/store-url.js';

describe('store URLs', () => {
  test.each([
    ['postgres://u:p4ssw0rd@db:5432/orders', 'postgres', 'postgres://u:***@db:5432/orders'],
    [
      'postgresql://db/orders?sslmode=require&password=s3cr3t',
      'postgres',
      'postgresql://db/orders?sslmode=require&password=***',
    ],
    ['mysql://root@127.0.0.1:3306/test', 'mysql', 'mysql://root@127.0.0.1:3306/test'],
    ['SQLITE:./data/catalog.db', 'sqlite', 'sqlite:./data/catalog.db'],
    ['sqlite:///var/lib/idem.db', 'sqlite', 'sqlite:/var/lib/idem.db'],
    ['redis://:hunter22@cache:6380/2', 'redis', 'redis://:***@cache:6380/2'],
    ['rediss://default:hunter22@cache', 'redis', 'rediss://default:***@cache'],
  ])('%s is a %s store shown as %s', (text, kind, shown) => {
    const parsed = parseStoreUrl(text);
    expect(parsed.kind).toBe(kind);
    expect(parsed.shown).toBe(shown);
  });

  test('a cluster URL names every node; a password with ":" and "@" in it stays whole and hidden', () => {
    const parsed = parseStoreUrl('redis+cluster://admin:p%40ss:w0rd@10.0.0.1:7000,10.0.0.2,[::1]:7002');
    expect(parsed).toMatchObject({
      kind: 'redis-cluster',
      username: 'admin',
      password: 'p@ss:w0rd',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 6379 },
        { host: '::1', port: 7002 },
      ],
      shown: 'redis+cluster://admin:***@10.0.0.1:7000,10.0.0.2,[::1]:7002',
    });
    expect(secretsOf('redis+cluster://admin:p%40ss:w0rd@10.0.0.1:7000')).toEqual([
      'p%40ss:w0rd',
      'p@ss:w0rd',
    ]);
  });

  test.each([
    ['mongodb://u:p4ssw0rd@db/x', /got a "mongodb:" URL/],
    ['./records.db', /got a URL without a scheme/],
    ['postgres://u:p4ssw0rd@db', /names no database/],
    ['postgres:db/orders', /not a valid postgres:\/\/ URL/],
    ['sqlite:', /names no file/],
    ['sqlite::memory:', /name a file/],
    ['redis+cluster://u:p4ssw0rd@a:1,b:99999', /not host:port/],
  ])('%s is refused without quoting it', (text, message) => {
    expect(() => parseStoreUrl(text)).toThrow(message);
    try {
      parseStoreUrl(text);
    } catch (error) {
      expect((error as Error).message).not.toContain('p4ssw0rd');
    }
  });
});

test('durations in their largest unit and the next', () => {
  expect(humanDuration(380)).toBe('380 ms');
  expect(humanDuration(45_000)).toBe('45 s');
  expect(humanDuration(60_000)).toBe('1 min');
  expect(humanDuration(14 * 60_000 + 2_000)).toBe('14 min 2 s');
  expect(humanDuration(86_400_000 + 58_000)).toBe('1 d');
  expect(humanDuration(3 * 86_400_000 + 4 * 3_600_000)).toBe('3 d 4 h');
  expect(humanBytes(53)).toBe('53 B');
  expect(humanBytes(1536)).toBe('1.5 KiB');
  expect(humanBytes(8 * 1024 * 1024)).toBe('8.0 MiB');
});

test('a key is normalized as the coordinator stores it', () => {
  expect(normalizeKey('"0193A4C2-7D1E-7B3A-9F10-2C4D5E6F7A81"')).toBe('0193a4c2-7d1e-7b3a-9f10-2c4d5e6f7a81');
  expect(normalizeKey('order-1041')).toBe('order-1041');
});
