import fp from 'fastify-plugin';
import { badRequest } from '../catalog/iceberg-error.js';
import { MAX_BODY_BYTES, MAX_JSON_DEPTH, textProblem } from '../catalog/limits.js';
import { JsonTextError, parseLosslessJson } from '../catalog/lossless-json.js';

/** Where a number beyond a double's range was (1e400): reported with its place once the body is parsed. */
const BEYOND_RANGE = Symbol('a number beyond the range of a double');

/** Where a problem is, as a JSON pointer. */
const pointer = (path: readonly (string | number)[]) =>
  path.map((part) => `/${String(part).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');

/**
 * Why a parsed body cannot be taken, or undefined: nesting deeper than MAX_JSON_DEPTH (schema validation is
 * recursive), a `__proto__` key or a `constructor.prototype` (as Fastify's own parser refuses them), a
 * string no database column holds as sent (NUL, other control characters in keys, lone surrogates), or a number
 * no Iceberg type holds (beyond a double's range).
 */
function problemOf(value: unknown, path: (string | number)[]): string | undefined {
  if (path.length > MAX_JSON_DEPTH) return `body nests deeper than ${MAX_JSON_DEPTH} levels`;
  if (value === BEYOND_RANGE) return `body${pointer(path)} is a number beyond the range of any Iceberg type`;
  if (typeof value === 'string') {
    // Control characters other than NUL are text (a view's SQL has newlines); NUL and broken UTF-16 are not.
    if (value.includes('\u0000')) return `body${pointer(path)} must not contain NUL characters`;
    if (/[\ud800-\udfff]/u.test(value))
      return `body${pointer(path)} must be valid Unicode (a lone surrogate)`;
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const problem = problemOf(item, [...path, i]);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    if (key === '__proto__') return `body${pointer(path)} must not have a "__proto__" key`;
    if (key === 'constructor' && typeof item === 'object' && item !== null && 'prototype' in item)
      return `body${pointer(path)} must not have a "constructor.prototype" key`;
    const keyProblem = textProblem(key);
    if (keyProblem !== undefined) return `body${pointer(path)} has a key that ${keyProblem}`;
    const problem = problemOf(item, [...path, key]);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * Parse JSON bodies strictly, before any validation or idempotency key: the bytes must be UTF-8 (never
 * replaced by U+FFFD, which would make two different bodies equal), the text JSON, the value within the limits
 * above. Each failure is a 400 that says which. Numbers keep their exact value: an integer past 2^53 (a snapshot
 * id of the Java client) is a bigint (see catalog/lossless-json.ts).
 */
export const jsonBody = fp(
  async (app) => {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser(
      'application/json',
      { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES },
      (_request, body: Buffer, done) => {
        if (body.length === 0) return done(badRequest('the request body is empty'), undefined);
        let text: string;
        try {
          text = decoder.decode(body);
        } catch {
          return done(badRequest('the request body is not valid UTF-8'), undefined);
        }
        let value: unknown;
        try {
          // The parser is recursive: text nesting deeper than problemOf allows (a container one level below
          // the deepest value it takes) never reaches it.
          value = parseLosslessJson(text, { maxDepth: MAX_JSON_DEPTH + 1, beyondRange: () => BEYOND_RANGE });
        } catch (error) {
          const depth = error instanceof JsonTextError && error.problem === 'depth';
          return done(
            badRequest(
              depth
                ? `body nests deeper than ${MAX_JSON_DEPTH} levels`
                : 'the request body is not valid JSON',
            ),
            undefined,
          );
        }
        const problem = problemOf(value, []);
        if (problem !== undefined) return done(badRequest(problem), undefined);
        done(null, value);
      },
    );
  },
  { fastify: '5.x', name: 'reference-server/json-body' },
);
