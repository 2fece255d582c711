import { expect, test } from 'vitest';
import { expectExecute, post, setup } from './support/coordinator.js';

// Review: Node accepts `res.setHeader('Location', null)` (and sends "null"); the capture hands it on as null.

test('finish never throws: an allow-listed header whose value is null', async () => {
  const { idem } = setup();
  const execution = expectExecute(await idem.begin(post()));
  const finishing = execution.finish({
    status: 201,
    headers: { location: null as unknown as string, 'content-type': 'text/plain' },
    body: 'x',
  });
  await expect(finishing).resolves.toBeTypeOf('string');
});

test('finalizeWith throws only what the host finalize threw: a null header value', async () => {
  const { idem, backend } = setup();
  const execution = expectExecute(await idem.begin(post()));
  const tx = {
    reserve: backend.store.reserve,
    finalize: backend.store.finalize,
    release: backend.store.release,
  };
  await expect(
    execution.finalizeWith({ status: 201, headers: { etag: null as unknown as string }, body: 'x' }, tx),
  ).resolves.toBe('finalized');
});
