import { storeConformance } from '@idem/store-conformance';
import { createMemoryStore } from '@idem/store-memory';
import { describe, test } from 'vitest';

// One process, one store: the memory store is its own "backend", so every instance is the same object.
storeConformance({ describe, test }, () => {
  const store = createMemoryStore({ sweepIntervalMs: false });
  return { store, cleanup: () => store.close() };
});
