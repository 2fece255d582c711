export {
  type AppResponse,
  type Business,
  createBusiness,
  json,
  STREAM_PLANS,
  type StreamPlan,
  type ThrowPoint,
} from './business.js';
export {
  describeFigures,
  describeLosses,
  type ExactlyOnceFigures,
  type ExactlyOnceOptions,
  exactlyOnceSuite,
  freshKeyPerAttempt,
  inPool,
  jsonOrText,
  runExactlyOnce,
} from './exactly-once-suite.js';
export { parseExposition, type Sample, total } from './exposition.js';
export { httpBehaviourSuite } from './http-behaviour-suite.js';
export { BODY_KIND_TYPE, BODY_KINDS, type BodyKind, toBodyKind } from './identity-suite.js';
export type { AdapterKind } from './lifecycle-matrix.js';
export {
  type FaultRates,
  faultRates,
  type LossyProxy,
  type LossyProxyStats,
  startLossyProxy,
} from './lossy-proxy.js';
export { instrument, spiedStore, stores } from './stores.js';
export {
  type LeavingAnswer,
  type MakeServer,
  newKey,
  postLeaving,
  type ServerConfig,
  type SuiteHarness,
  settled,
} from './support.js';
export {
  brokenResponse,
  lateResponse,
  serveFetch,
  streamedResponse,
  throwAfterResponse,
  webResponse,
} from './web-answers.js';
