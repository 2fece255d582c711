export { clientGoneSignal, isResponseGone } from './client-gone.js';
export { declaresBody, describeRequest, type NodeRequestParts } from './describe-request.js';
export { errorResponse } from './error-response.js';
export { type KeptBody, keepBody } from './keep-body.js';
export type { FormatError, NodeIdempotencyOptions } from './options.js';
export { type ResponseSettlement, settleOnResponse } from './settle-on-response.js';
export { startExecution } from './start-execution.js';
export { type WholeResponse, writeResponse } from './write-response.js';
