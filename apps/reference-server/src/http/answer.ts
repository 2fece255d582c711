import type { FastifyReply } from 'fastify';
import { stringifyLosslessJson } from '../catalog/lossless-json.js';

/** A catalog answer: a status and an optional JSON body, sent exactly as it is stored for replay. */
export interface Answer {
  readonly status: number;
  readonly body?: unknown;
  /** The body's JSON text, when it is at hand: what `render` would write for `body` ({@link metadataAnswerText}). */
  readonly text?: string;
}

/** An answer as mutations render it for the client and for the idempotency record (idempotency/mutate.ts). */
export interface RenderedAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string | null;
}

/**
 * The content type of every JSON answer, charset included: what Fastify would send for a string body anyway
 * (it appends `; charset=utf-8` to one without), so the first answer, the stored record and every replay (a
 * Buffer, which Fastify leaves alone) carry the same header.
 */
export const JSON_TYPE = 'application/json; charset=utf-8';

export function render(answer: Answer): RenderedAnswer {
  // Longs as exact digits: the stored replay carries the very text the first answer had.
  const body = answer.text ?? (answer.body === undefined ? null : stringifyLosslessJson(answer.body));
  return { status: answer.status, headers: body === null ? {} : { 'content-type': JSON_TYPE }, body };
}

export function sendRendered(reply: FastifyReply, { status, headers, body }: RenderedAnswer) {
  reply.code(status).headers(headers);
  return body === null ? reply.send() : reply.send(body);
}

export const send = (reply: FastifyReply, answer: Answer) => sendRendered(reply, render(answer));

/**
 * The JSON text of a metadata answer, `{"metadata-location", "metadata"}` and, for a load result, `"config": {}`,
 * from the text of its metadata (`stringifyLosslessJson`'s, as stored): the text `render` writes for the same
 * value, without writing metadata of megabytes once more.
 */
export function metadataAnswerText(metadataLocation: string, metadataText: string, config: boolean): string {
  const location = JSON.stringify(metadataLocation);
  return `{"metadata-location":${location},"metadata":${metadataText}${config ? ',"config":{}' : ''}}`;
}

/** A CommitTableResponse-shaped answer (a commit, an unregister): its text written from the metadata's text. */
export const metadataAnswer = (
  metadataLocation: string,
  metadata: unknown,
  metadataText: string,
): Answer => ({
  status: 200,
  body: { 'metadata-location': metadataLocation, metadata },
  text: metadataAnswerText(metadataLocation, metadataText, false),
});
