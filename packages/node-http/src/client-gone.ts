import type { ServerResponse } from 'node:http';

/**
 * A signal aborted when the client behind `res` leaves before the response is complete: what a waiting
 * `begin` (`inFlight: { strategy: 'wait' }`) needs. Create it only when something waits: most requests never
 * do, and a normally finished response aborts nothing (an abort costs a DOMException).
 */
export function clientGoneSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  if (isResponseGone(res)) controller.abort();
  else
    res.once('close', () => {
      if (!res.writableFinished) controller.abort();
    });
  return controller.signal;
}

/** `true` when the client behind `res` is gone: the connection closed before the response did. */
export function isResponseGone(res: ServerResponse): boolean {
  return res.destroyed || res.socket?.destroyed === true;
}

/**
 * `true` when the connection behind `res` is gone, an HTTP/2 response's stream included (it has no `destroyed`
 * of its own): what the settlements check before they wait for a `close` that may have come already.
 */
export const isConnectionGone = (res: ServerResponse): boolean =>
  res.destroyed === true ||
  res.socket?.destroyed === true ||
  (res as { stream?: { destroyed?: boolean } }).stream?.destroyed === true;
