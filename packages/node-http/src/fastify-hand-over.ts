import type { ServerResponse } from 'node:http';
import type { Execution } from '@idem/core';
import { type HandedOverSettlement, type HeaderSource, settleHandedOver } from './settle-handed-over.js';

/**
 * Fastify's hand-over, as the Fastify plugin and the NestJS module on platform-fastify both take it: a request
 * under a key keeps its {@link settleHandedOver} settlement under {@link SETTLEMENT}, every covered route ends
 * its `onSend` hooks with {@link handOver}, and a hijacked reply is captured as the app writes it. (Structural
 * types only: this package does not depend on Fastify.)
 */

/** Where a Fastify request under a key keeps the settlement of its answer (decorate it: {@link decorateSettlement}). */
export const SETTLEMENT: unique symbol = Symbol('@idem/node-http settlement');

type Settled = { [SETTLEMENT]?: HandedOverSettlement | undefined };

/** The part of a Fastify instance the settlement is decorated on. */
export interface FastifySettlementHost {
  hasRequestDecorator(name: string | symbol): boolean;
  decorateRequest(name: string | symbol, value: unknown): unknown;
}

/** The part of Fastify's reply a settlement needs. */
export interface FastifyReplyLike extends HeaderSource {
  readonly request: object;
  readonly raw: ServerResponse;
  hijack(): unknown;
}

/** A hook's callback in `onSend`: the payload to write next, or Fastify's error answer. */
export type OnSendDone = (error: Error | null, payload?: unknown) => void;

/**
 * Declare {@link SETTLEMENT} on the requests of `fastify` (once, whichever adapter comes first), so that every
 * request keeps one shape. Throws what Fastify throws once it has started.
 */
export function decorateSettlement(fastify: FastifySettlementHost): void {
  if (!fastify.hasRequestDecorator(SETTLEMENT)) fastify.decorateRequest(SETTLEMENT, undefined);
}

/**
 * The last `onSend` hook of a covered route: the answer Fastify is about to write, handed to the request's
 * settlement around the `done` that writes it. One function for every route and request.
 */
export function handOver(request: object, _reply: unknown, payload: unknown, done: OnSendDone): void {
  const settlement = (request as Settled)[SETTLEMENT];
  if (settlement === undefined) {
    done(null, payload);
    return;
  }
  settlement.sending(payload);
  try {
    done(null, payload); // throws when Fastify cannot write it: its error answer comes next
  } finally {
    settlement.sent();
  }
}

/**
 * Settle `execution` by the answer of `reply`: as Fastify hands it over ({@link handOver}), and, after
 * `reply.hijack()`, as the app writes it on the response itself.
 */
export function settleOnReply(execution: Execution, reply: FastifyReplyLike): void {
  (reply.request as Settled)[SETTLEMENT] = settleHandedOver(execution, reply.raw, reply);
  (reply as { hijack: FastifyReplyLike['hijack'] }).hijack = hijackCaptured;
}

/** `reply.hijack()` of a request under a key: what the app then writes itself is captured from here. */
function hijackCaptured(this: FastifyReplyLike): unknown {
  (this.request as Settled)[SETTLEMENT]?.captureWrites();
  return (Object.getPrototypeOf(this) as FastifyReplyLike).hijack.call(this);
}
