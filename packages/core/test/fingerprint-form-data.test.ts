import { ErrorCode } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { expectExecute, expectReject, post, setup } from './support/coordinator.js';

// A `FormData` is what a fetch-style framework may keep of a form it parsed once its bytes are gone (Hono's
// `c.req.formData()`): `begin` hashes it as its entries in order (names, string values, files by name, type and
// bytes), so that the same form is the same request and any difference is another.

const URLENCODED = 'application/x-www-form-urlencoded';
const MULTIPART = 'multipart/form-data; boundary=----fixed';

type Entry = [name: string, value: string] | [name: string, bytes: string, file: string, type: string];
const form = (...entries: Entry[]): FormData => {
  const data = new FormData();
  for (const [name, value, file, type] of entries) {
    if (file === undefined) data.append(name, value);
    else data.append(name, new Blob([value], { type }), file);
  }
  return data;
};

const base: Entry[] = [
  ['item', 'book'],
  ['qty', '1'],
  ['doc', 'hello', 'a.txt', 'text/plain'],
];

/** Forms that differ from `base` in one way each: never the same request. */
const others: Record<string, Entry[]> = {
  'a value': [['item', 'pen'], base[1], base[2]] as Entry[],
  'a name': [['items', 'book'], base[1], base[2]] as Entry[],
  'the order of the entries': [base[1], base[0], base[2]] as Entry[],
  'an entry more': [...base, ['qty', '1']],
  'an entry less': base.slice(0, 2),
  'a file’s bytes': [base[0], base[1], ['doc', 'hellO', 'a.txt', 'text/plain']] as Entry[],
  'a file’s name': [base[0], base[1], ['doc', 'hello', 'b.txt', 'text/plain']] as Entry[],
  'a file’s type': [base[0], base[1], ['doc', 'hello', 'a.txt', 'text/html']] as Entry[],
  'a file where a string was': [base[0], base[1], ['doc', 'hello']] as Entry[],
};

describe('fingerprint: a FormData body', () => {
  for (const contentType of [URLENCODED, MULTIPART]) {
    test(`${contentType}: the same form (built again, files read again) is the same request`, async () => {
      const { idem } = setup();
      expectExecute(await idem.begin(post({ contentType, body: form(...base) })));
      // Same key, same fingerprint, the first still in flight: in progress, not a reused key.
      expectReject(await idem.begin(post({ contentType, body: form(...base) })), 409, ErrorCode.InProgress);
    });

    if (contentType === MULTIPART)
      test.for(['----other', '"quoted; with a semicolon"'])(
        `${contentType}: the same form under another boundary (%s: a retry draws a new one) is the same request`,
        async (boundary) => {
          const { idem } = setup();
          expectExecute(await idem.begin(post({ contentType, body: form(...base) })));
          const retried = `multipart/form-data; boundary=${boundary}`;
          expectReject(
            await idem.begin(post({ contentType: retried, body: form(...base) })),
            409,
            ErrorCode.InProgress,
          );
        },
      );

    for (const [difference, entries] of Object.entries(others)) {
      test(`${contentType}: another ${difference} is another request`, async () => {
        const { idem } = setup();
        expectExecute(await idem.begin(post({ contentType, body: form(...base) })));
        expectReject(
          await idem.begin(post({ contentType, body: form(...entries) })),
          422,
          ErrorCode.KeyReused,
        );
      });
    }
  }

  test('the same entries under another media type are another request', async () => {
    const { idem } = setup();
    expectExecute(await idem.begin(post({ contentType: MULTIPART, body: form(...base) })));
    expectReject(
      await idem.begin(post({ contentType: URLENCODED, body: form(...base) })),
      422,
      ErrorCode.KeyReused,
    );
  });

  test('a file whose bytes cannot be read: begin rejects, nothing is reserved', async () => {
    const { idem, backend } = setup();
    const data = form(...base);
    const file = data.get('doc') as File;
    file.arrayBuffer = () => Promise.reject(new Error('file read failed'));
    const broken = new FormData();
    broken.append('doc', file);
    await expect(idem.begin(post({ contentType: MULTIPART, body: broken }))).rejects.toThrow(
      'file read failed',
    );
    expect(backend.calls).toEqual([]);
  });

  test('a host fingerprint function gets the FormData itself', async () => {
    const seen: unknown[] = [];
    const { idem } = setup({
      fingerprint: (request) => {
        seen.push(request.body);
        return 'fp';
      },
    });
    const body = form(...base);
    expectExecute(await idem.begin(post({ contentType: MULTIPART, body })));
    expect(seen).toEqual([body]);
  });
});
