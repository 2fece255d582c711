export {
  type AppResponse,
  type Business,
  createBusiness,
  json,
  STREAM_PLANS,
  type StreamPlan,
  type ThrowPoint,
} from './business.js';
export { httpBehaviourSuite } from './http-behaviour-suite.js';
export { instrument, stores } from './stores.js';
export { type MakeServer, newKey, type ServerConfig, type SuiteHarness, settled } from './support.js';
