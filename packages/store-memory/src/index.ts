export {
  createMemoryStore,
  type EvictionEvent,
  type MemoryStore,
  type MemoryStoreOptions,
} from './create-memory-store.js';
