import type { FastifyIdempotencyOptions } from '@idem/adapter-fastify';
import { IdemStoreUnavailableError, type StoredResponse } from '@idem/core';
import type { FastifyRequest } from 'fastify';
import { getEntityByUuid } from '../catalog/repository.js';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { prefixOf } from './scope.js';
import {
  isCompact,
  isObject,
  type MetadataAnswer,
  metadataAnswerOf,
  uuidOf,
  withBody,
} from './stored-answer.js';

/** Table and view config handed to clients with every load result (storage settings, credentials). */
const tableConfig = (): Record<string, string> => ({});

/**
 * The idempotency plugin's `rebuildReplay`. A replayed load result (create, register, replace) shows the
 * table or view as it is now, as the spec allows ("an equivalent final response ... may reflect a newer
 * state"), found by its UUID; once it is gone, the metadata file it was answered with. A commit's answer
 * replays as it was: stored, or, when it was too large to store, rebuilt from the file the commit wrote (else
 * the table as it is now). Only when neither is there is the stored (compact) answer replayed.
 */
export function replayRebuilder(
  db: CatalogDatabase,
  warehouse: Warehouse,
): NonNullable<FastifyIdempotencyOptions['rebuildReplay']> {
  /** The table or view with this UUID as it is now, wherever it has been renamed to since. */
  const current = async (request: FastifyRequest, uuid: string | undefined) => {
    if (uuid === undefined) return undefined;
    // Inside the mutation's transaction when the key was met there; read before it (readBeforeTransaction),
    // under the request's deadline. A read that fails is the retryable 503 (the coordinator's, for this error):
    // the replay cannot be made as it is now.
    const entity = await getEntityByUuid(
      request.transaction ?? db.until(request.deadline),
      prefixOf(request),
      uuid,
    ).catch((error: unknown) => {
      throw new IdemStoreUnavailableError(
        'the catalog database did not answer the read of this replay in time',
        {
          cause: error,
        },
      );
    });
    return entity === undefined
      ? undefined
      : { 'metadata-location': entity.metadataLocation, metadata: entity.metadata };
  };

  /**
   * The metadata file a compact answer names, as it was answered (metadata files are immutable: each commit
   * writes a new one), read through the warehouse (confined, bounded in size and time); undefined when it is
   * gone (purged, expired from the log) or is not that table's or view's.
   */
  const file = async (answer: MetadataAnswer, request: FastifyRequest) => {
    const location = answer['metadata-location'];
    const metadata = await warehouse
      .readMetadata(location, 'metadata-location', request.deadline)
      .catch(() => undefined);
    return isObject(metadata) && uuidOf(metadata) === uuidOf(answer.metadata)
      ? { 'metadata-location': location, metadata }
      : undefined;
  };

  const rebuild = async (stored: StoredResponse, answer: MetadataAnswer, host: FastifyRequest) => {
    const uuid = uuidOf(answer.metadata);
    if (!('config' in answer)) {
      const rebuilt = (await file(answer, host)) ?? (await current(host, uuid));
      return rebuilt === undefined ? undefined : withBody(stored, rebuilt);
    }
    const rebuilt = (await current(host, uuid)) ?? (isCompact(answer) ? await file(answer, host) : undefined);
    return withBody(stored, { ...answer, ...rebuilt, config: tableConfig() });
  };

  // Synchronous for the answers replayed as stored (a namespace, an error, a commit's whole answer): no promise.
  return (stored, { host }) => {
    const answer = metadataAnswerOf(stored);
    if (answer === undefined || (!('config' in answer) && !isCompact(answer))) return undefined;
    return rebuild(stored, answer, host);
  };
}
