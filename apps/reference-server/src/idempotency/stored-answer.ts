import type { StoredResponse } from '@idem/core';
import { MAX_STORED_JSON_DEPTH } from '../catalog/limits.js';
import { parseLosslessJson, stringifyLosslessJson } from '../catalog/lossless-json.js';
import type { RenderedAnswer } from '../http/answer.js';

type Json = Record<string, unknown>;

/**
 * A metadata answer: a LoadTableResult / LoadViewResult (create, register, replace: `config` included) or a
 * CommitTableResponse (commit, unregister: no `config`).
 */
export interface MetadataAnswer {
  readonly 'metadata-location': string;
  readonly metadata: Json;
  readonly config?: unknown;
}

export const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function isMetadataAnswer(value: unknown): value is MetadataAnswer {
  return isObject(value) && typeof value['metadata-location'] === 'string' && isObject(value.metadata);
}

/** The table-uuid or view-uuid of a metadata answer's metadata. */
export function uuidOf(metadata: Json): string | undefined {
  const value = metadata['table-uuid'] ?? metadata['view-uuid'];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The stored form of a compact answer: its metadata-location and its metadata's UUID alone. Every TableMetadata
 * and ViewMetadata has a `format-version`; a compact one has none.
 */
export const isCompact = (answer: MetadataAnswer) => answer.metadata['format-version'] === undefined;

/**
 * What the idempotency record keeps of an answer: the answer as rendered, so that its replay is the very text
 * the client was given. A metadata answer larger than the record holds (the coordinator would keep its status
 * alone, and the replay would be a 200 with no body) is kept compact: its `metadata-location` and its table's or
 * view's UUID, from which the replay is made again (replay.ts). (Not in `redact`: the coordinator has already
 * dropped a body over its cap by the time `redact` sees it.)
 */
export function storedAnswer(answer: { body?: unknown }, rendered: RenderedAnswer, maxBodyBytes: number) {
  if (rendered.body === null || Buffer.byteLength(rendered.body, 'utf8') <= maxBodyBytes) return rendered;
  const { body } = answer;
  if (!isMetadataAnswer(body)) return rendered;
  const uuid = uuidOf(body.metadata);
  const compact = {
    'metadata-location': body['metadata-location'],
    metadata:
      uuid === undefined ? {} : { [body.metadata['view-uuid'] === uuid ? 'view-uuid' : 'table-uuid']: uuid },
    ...('config' in body ? { config: {} } : {}),
  };
  return { ...rendered, body: stringifyLosslessJson(compact) };
}

const CONFIG_MEMBER = Buffer.from('"config"');
const bytesOf = (body: Uint8Array) => Buffer.from(body.buffer, body.byteOffset, body.byteLength);

const METADATA_LOCATION_MEMBER = Buffer.from('"metadata-location"');

/** A stored metadata answer, parsed; else undefined. */
export function metadataAnswerOf(response: StoredResponse): MetadataAnswer | undefined {
  if (response.body === null || !String(response.headers['content-type']).startsWith('application/json'))
    return undefined;
  // Every other answer (a namespace, an error) is told apart without parsing it, as in `withoutConfig`.
  if (bytesOf(response.body).indexOf(METADATA_LOCATION_MEMBER) === -1) return undefined;
  // Exact, both ways: a load result's metadata holds 64-bit snapshot ids. One level deeper than metadata may
  // nest (a registered file may nest MAX_STORED_JSON_DEPTH levels): the answer wraps it.
  const result = parseLosslessJson(bytesOf(response.body).toString(), {
    maxDepth: MAX_STORED_JSON_DEPTH + 1,
  });
  return isMetadataAnswer(result) ? result : undefined;
}

/** The stored response with another JSON body. */
export const withBody = (response: StoredResponse, body: object): StoredResponse => ({
  ...response,
  body: Buffer.from(stringifyLosslessJson(body)),
});

/**
 * A load result's `config` is where a catalog vends storage credentials: it is stored empty (the plugin's
 * `redact`), and a replay gets the config that holds now.
 */
export function withoutConfig(response: StoredResponse): StoredResponse {
  // A body that never mentions `"config"` has no config to empty, and is not parsed (a commit's answer holds
  // the table's whole metadata, and parsing it cost more than the rest of the commit's idempotency). The
  // catalog's answers are written by JSON.stringify and stringifyLosslessJson, which escape no letter.
  if (response.body === null || bytesOf(response.body).indexOf(CONFIG_MEMBER) === -1) return response;
  const answer = metadataAnswerOf(response);
  return answer === undefined || !('config' in answer) || isEmptyObject(answer.config)
    ? response
    : withBody(response, { ...answer, config: {} });
}

const isEmptyObject = (value: unknown): boolean => isObject(value) && Object.keys(value).length === 0;
