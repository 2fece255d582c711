import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * When the request must be answered by (`performance.now()` ms): its arrival plus REQUEST_TIMEOUT_MS.
     * Every database wait it makes is bounded by the time left (src/database/deadline.ts).
     */
    deadline: number;
  }
}

export interface RequestDeadlineOptions {
  /** How long a request may take from its arrival, in ms (REQUEST_TIMEOUT_MS). */
  readonly requestTimeoutMs: number;
}

/**
 * One deadline for the whole request, from its arrival: the first onRequest hook, so that no other hook's
 * time is left out of it.
 */
export const requestDeadline = fp<RequestDeadlineOptions>(
  async (app, { requestTimeoutMs }) => {
    app.decorateRequest('deadline', 0);
    app.addHook('onRequest', async (request) => {
      request.deadline = performance.now() + requestTimeoutMs;
    });
  },
  { fastify: '5.x', name: 'reference-server/deadline' },
);
