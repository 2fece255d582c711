import type { Socket } from 'node:net';
import { isIdemError } from '@idem/core';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { IcebergError } from '../catalog/iceberg-error.js';
import { databaseErrorKind } from '../database/error-kind.js';

/** The Iceberg error type of each status the catalog answers with (the idempotency layer's answers too). */
export const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'BadRequestException',
  401: 'NotAuthorizedException',
  403: 'ForbiddenException',
  404: 'NotFoundException',
  406: 'UnsupportedOperationException',
  409: 'CommitFailedException',
  419: 'AuthenticationTimeoutException',
  422: 'UnprocessableEntityException',
  500: 'InternalServerError',
  503: 'ServiceUnavailableException',
};

export const errorTypeOf = (status: number): string =>
  ERROR_TYPES[status] ?? (status < 500 ? 'BadRequestException' : 'InternalServerError');

// Filesystem errors a client's location or name can cause: the request is at fault, not the server.
const INPUT_FS_CODES = new Set(['ENAMETOOLONG', 'EINVAL', 'ENOTDIR', 'EISDIR', 'ELOOP', 'EEXIST']);
// Storage that cannot take a write right now.
const BUSY_FS_CODES = new Set(['ENOSPC', 'EDQUOT', 'EMFILE', 'ENFILE', 'EAGAIN']);

const MAX_MESSAGE_CHARS = 500;
const clip = (text: string) =>
  text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;

interface ValidationFailure {
  readonly instancePath: string;
  readonly keyword: string;
  readonly message?: string;
  readonly params: { error?: string; tag?: string; tagValue?: unknown };
}

/** ajv's words, except for an unknown tag (an update's `action`, a requirement's `type`): that names it. */
function failureMessage(failure: ValidationFailure): string {
  const { params } = failure;
  if (failure.keyword === 'discriminator' && params.error === 'mapping')
    return `has an unknown ${params.tag}: ${JSON.stringify(String(params.tagValue).slice(0, 100))}`;
  return failure.message ?? 'is invalid';
}

/** A schema failure, naming the field: `body/updates/0 must have required property 'uuid'`. */
function validationMessage(error: FastifyError): string {
  // ajv reports the failures inside an anyOf first and the anyOf itself last: the last names the field.
  const failures = (error.validation ?? []) as ValidationFailure[];
  const last = failures[failures.length - 1];
  if (last === undefined) return error.message;
  return `${error.validationContext ?? 'request'}${last.instancePath} ${failureMessage(last)}`;
}

// Fastify's own client errors by code. The spec declares neither 413 nor 415 for any operation, but declares
// 400 for "an unexpected request body format ... such as invalid json" on every one: so those answer 400.
const FASTIFY_MESSAGES: Readonly<Record<string, string>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'the request body is too large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'the request body must be application/json',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'the request body does not match its Content-Length',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'the request body is empty',
  FST_ERR_CTP_INVALID_JSON_BODY: 'the request body is not valid JSON',
  FST_ERR_BAD_URL: 'the request path is not a valid URL (bad percent-encoding)',
  FST_ERR_MAX_PARAM_LENGTH: 'a path parameter is too long',
};

const unavailable = () =>
  new IcebergError(503, 'ServiceUnavailableException', 'the catalog database is unavailable; retry later');
const internal = () => new IcebergError(500, 'InternalServerError', 'internal error; see the server log');

/**
 * The answer for an error, by what it is (its class or code), never by "anything else". Messages never carry a
 * driver's or the filesystem's text: those can hold SQL, server paths or file content.
 */
export function toIcebergError(error: unknown): IcebergError {
  if (error instanceof IcebergError) return error;
  if (isIdemError(error)) return new IcebergError(error.status, errorTypeOf(error.status), error.message);
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  if (code === 'FST_ERR_VALIDATION')
    return new IcebergError(400, 'BadRequestException', clip(validationMessage(error as FastifyError)));
  if (typeof code === 'string' && code in FASTIFY_MESSAGES)
    return new IcebergError(400, 'BadRequestException', FASTIFY_MESSAGES[code] as string);
  // A value the idempotency store cannot hold (@idem/core's IDEMPOTENCY_STORE_LIMIT): the caller's error.
  if (code === 'IDEMPOTENCY_STORE_LIMIT')
    return new IcebergError(400, 'BadRequestException', clip((error as Error).message));
  // A COMMIT that never answered (src/database/deadline.ts): the Iceberg spec's "the commit state is unknown".
  if (code === 'ECOMMITUNKNOWN')
    return new IcebergError(500, 'CommitStateUnknownException', clip((error as Error).message));
  const database = databaseErrorKind(error);
  if (database === 'unavailable') return unavailable();
  if (database === 'conflict')
    return new IcebergError(409, 'AlreadyExistsException', 'it was created concurrently by another request');
  if (database === 'input')
    return new IcebergError(400, 'BadRequestException', 'a value does not fit the catalog');
  if (typeof code === 'string' && INPUT_FS_CODES.has(code))
    return new IcebergError(400, 'BadRequestException', `the location cannot be used (${code})`);
  if (typeof code === 'string' && BUSY_FS_CODES.has(code))
    return new IcebergError(
      503,
      'ServiceUnavailableException',
      `the warehouse cannot be written now (${code}); retry later`,
    );
  // Any other client error Fastify raised (it sets a 4xx statusCode only for the request's own faults).
  if (
    typeof statusCode === 'number' &&
    statusCode >= 400 &&
    statusCode < 500 &&
    typeof code === 'string' &&
    code.startsWith('FST_')
  )
    return new IcebergError(400, 'BadRequestException', clip((error as Error).message));
  return internal();
}

export function sendError(reply: FastifyReply, error: IcebergError) {
  if (error.code === 503) reply.header('retry-after', '1');
  return reply.code(error.code).type('application/json').send(error.toJSON());
}

/**
 * Answer every error, and every unknown route, as an `IcebergErrorResponse`. Before any route is made: a
 * route keeps the error handler there was when it was made.
 */
export const errorHandling = fp(
  async (app) => {
    app.setErrorHandler((error, request, reply) => {
      const answer = toIcebergError(error);
      if (answer.code >= 500) request.log[answer.code === 503 ? 'warn' : 'error'](error);
      return sendError(reply, answer);
    });
    app.setNotFoundHandler((request, reply) =>
      sendError(
        reply,
        new IcebergError(404, 'NotFoundException', clip(`no route for ${request.method} ${request.url}`)),
      ),
    );
  },
  { fastify: '5.x', name: 'reference-server/errors' },
);

/** Fastify's `frameworkErrors`: a path that cannot be decoded, or a path parameter over the router's limit. */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  void sendError(reply, toIcebergError(error));
}

/**
 * Fastify's `clientErrorHandler`, for a request Node could not parse (a request line or headers over its size
 * limit, a client that took too long): an `IcebergErrorResponse` too, written to the socket.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket) {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'the request took too long to arrive']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [400, 'Bad Request', 'the request line or headers are too large']
        : [400, 'Bad Request', 'the request is not valid HTTP'];
  const body = JSON.stringify(new IcebergError(status, errorTypeOf(status), message).toJSON());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
