import type { FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, noSuchNamespace } from '../catalog/iceberg-error.js';
import { MAX_UPDATES_PER_COMMIT } from '../catalog/limits.js';
import * as repo from '../catalog/repository.js';
import { SEPARATOR } from '../catalog/repository.js';
import type { Executor, LockMode } from '../database/executor.js';
import { type Answer, JSON_TYPE, metadataAnswerText } from '../http/answer.js';

export type Params = { prefix?: string; namespace?: string; table?: string };

export function namespaceParts(text: string): string[] {
  const parts = text.split(SEPARATOR);
  if (parts.some((part) => part === '')) throw badRequest(`invalid namespace: ${JSON.stringify(text)}`);
  return parts;
}

export function namespaceOf(request: FastifyRequest): { prefix: string; parts: string[]; key: string } {
  const params = request.params as Params;
  const parts = namespaceParts(params.namespace ?? '');
  return { prefix: params.prefix ?? '', parts, key: parts.join(SEPARATOR) };
}

export function body(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest('the request body must be a JSON object');
  return value as Record<string, unknown>;
}

export function identifier(value: unknown, field: string): { namespace: string[]; name: string } {
  const id = value as { namespace?: unknown; name?: unknown } | null;
  if (typeof id !== 'object' || id === null || !Array.isArray(id.namespace) || typeof id.name !== 'string') {
    throw badRequest(`${field} must be { namespace: string[], name: string }`);
  }
  if (!id.namespace.every((p) => typeof p === 'string' && p !== ''))
    throw badRequest(`${field}.namespace must hold names`);
  return { namespace: id.namespace as string[], name: id.name };
}

/**
 * Refuse a commit with more updates than {@link MAX_UPDATES_PER_COMMIT}: a shape check, made before the key is
 * reserved (the schema has already checked that `updates` is an array).
 */
export function checkUpdateCount(input: Record<string, unknown>, field: string): void {
  const updates = input.updates;
  if (Array.isArray(updates) && updates.length > MAX_UPDATES_PER_COMMIT)
    throw badRequest(`${field} must have at most ${MAX_UPDATES_PER_COMMIT} updates, got ${updates.length}`);
}

export function stringMap(value: unknown, field: string): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest(`${field} must be an object`);
  for (const [k, v] of Object.entries(value))
    if (typeof v !== 'string') throw badRequest(`${field}.${k} must be a string`);
  return value as Record<string, string>;
}

/** The namespace's properties, or a 404; `lock` as in {@link repo.getNamespace}. */
export async function requireNamespace(ex: Executor, prefix: string, key: string, lock?: LockMode) {
  const properties = await repo.getNamespace(ex, prefix, key, lock === undefined ? {} : { lock });
  if (properties === undefined) throw noSuchNamespace(key.split(SEPARATOR).join('.'));
  return properties;
}

/** A LoadTableResult / LoadViewResult. `config` comes last: a replay rebuilds it (idempotency/replay.ts). */
export const loadResult = (entity: repo.Entity) => ({
  'metadata-location': entity.metadataLocation,
  metadata: entity.metadata,
  config: {},
});

/** The JSON text of `entity`'s load result, written from the metadata's stored text. */
const loadResultText = (entity: repo.Entity) =>
  metadataAnswerText(entity.metadataLocation, entity.text, true);

/** The load result of `entity` as a mutation's answer. */
export const loadAnswer = (entity: repo.Entity): Answer => ({
  status: 200,
  body: loadResult(entity),
  text: loadResultText(entity),
});

/**
 * Send the load result of `entity` (a GET): the metadata's stored text as it is, never parsed exactly and
 * written again. It is checked to be JSON first (`JSON.parse`, about a tenth of the cost of both), so that a
 * damaged row answers a 500 as it did, never a 200 whose body is not JSON.
 */
export function sendLoadResult(reply: FastifyReply, entity: repo.Entity) {
  JSON.parse(entity.text);
  return reply.type(JSON_TYPE).send(loadResultText(entity));
}
