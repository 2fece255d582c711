export { responseOf } from './answers.js';
export { settleWebResponse } from './capture.js';
export { describeWebRequest, pathAndQuery, readBody, type WebRequestParts } from './describe.js';
export { executionOf, type HandlerIdempotencyOptions, withIdempotency } from './handler.js';
export type { WebIdempotencyOptions } from './options.js';
export { type AnsweredResult, answerWithout, startWebExecution } from './start.js';
