import { conformanceGroups, storeConformance } from '@idem/store-conformance';
import { createMemoryStore } from '@idem/store-memory';
import { describe, test } from 'vitest';

// One process, one store: the memory store is its own "backend", so every instance is the same object.
storeConformance(
  { describe, test },
  () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    return { store, cleanup: () => store.close() };
  },
  { inspection: ['forget', 'list', 'stats'] },
);

// Bounded by size: a record larger than maxSizeBytes is refused (IdemStoreLimitError), never dropped in silence.
describe('bounded by maxSizeBytes', () => {
  conformanceGroups.limits({ describe, test }, () => {
    const store = createMemoryStore({ sweepIntervalMs: false, maxSizeBytes: 64 * 1024 });
    return { store, cleanup: () => store.close() };
  });
});
