export {
  createMemoryStore,
  type MemoryStore,
  type MemoryStoreOptions,
} from './create-memory-store.js';
export { type ReplayCacheOptions, withReplayCache } from './replay-cache.js';
