export { type AppResponse, type Business, createBusiness, json } from './business.js';
export {
  httpBehaviourSuite,
  type MakeServer,
  newKey,
  type ServerConfig,
  type SuiteHarness,
} from './http-behaviour-suite.js';
export { instrument, stores } from './stores.js';
