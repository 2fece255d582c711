export { clientGoneSignal, isResponseGone } from './client-gone.js';
export { bodyOfParsed, declaresBody, describeRequest, type NodeRequestParts } from './describe-request.js';
export {
  decorateSettlement,
  type FastifyReplyLike,
  type FastifySettlementHost,
  handOver,
  type OnSendDone,
  SETTLEMENT,
  settleOnReply,
} from './fastify-hand-over.js';
export { type KeptBody, keepBody } from './keep-body.js';
export type { NodeIdempotencyOptions } from './options.js';
export { type HandedOverSettlement, type HeaderSource, settleHandedOver } from './settle-handed-over.js';
export { settleOnResponse } from './settle-on-response.js';
export { startExecution } from './start-execution.js';
export { writeResponse } from './write-response.js';
