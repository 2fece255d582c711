import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The share of requests that meet each fault (a multiple of 1/60 is exact); the rest are delivered. Their sum is
 * the share of answers lost.
 */
export interface FaultRates {
  /** Forward the request, wait for the server's whole answer, then close the client's connection without it. */
  readonly dropAnswer: number;
  /** Forward the request, then reset both connections 0–3 ms later: the server may be mid-way, or done. */
  readonly resetAfterForward: number;
  /** Reset the client's connection; the request never reaches the server. */
  readonly resetBeforeForward: number;
  /** Answer `503` itself; the request never reaches the server. */
  readonly answer503: number;
}

/** What the proxy did, by request. */
export interface LossyProxyStats {
  requests: number;
  /** Reached the server (delivered, dropped or reset after forwarding). */
  forwarded: number;
  delivered: number;
  droppedAnswers: number;
  resetsAfterForward: number;
  resetsBeforeForward: number;
  answered503: number;
}

export interface LossyProxy {
  /** `http://127.0.0.1:<port>`: send here what should reach the target. */
  readonly url: string;
  readonly stats: Readonly<LossyProxyStats>;
  /** Requests whose answer the client did not get from the server (every fault). */
  lost(): number;
  close(): Promise<void>;
}

/** Split a share of lost answers over the four faults: half dropped answers, the rest evenly. */
export function faultRates(lossRate: number): FaultRates {
  return {
    dropAnswer: lossRate / 2,
    resetAfterForward: lossRate / 6,
    resetBeforeForward: lossRate / 6,
    answer503: lossRate / 6,
  };
}

/** mulberry32: a small seeded generator, so a run's faults can be replayed from its seed. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

// Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection; the proxy's own connections set theirs.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
]);

function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** What the proxy does with one request: one of the faults, or deliver it. */
export type Fault = keyof FaultRates | 'deliver';

const FAULTS = ['dropAnswer', 'resetAfterForward', 'resetBeforeForward', 'answer503'] as const;
const BLOCK = 60;

/**
 * Start a loopback HTTP proxy in front of `target` that loses a share of the answers, at random places
 * (seeded): it drops the answer after the server executed the request, resets connections before or after
 * forwarding, or answers 503 itself. A test sends its traffic through it to see what a client does when the network loses what the
 * server did.
 */
export async function startLossyProxy(
  target: string,
  options: {
    readonly faults: FaultRates;
    readonly seed?: number;
    /** What to do with the first requests, in order, before the dealt faults (a scripted test). @default [] */
    readonly script?: readonly Fault[];
  },
): Promise<LossyProxy> {
  const random = seeded(options.seed ?? 1);
  const { faults } = options;
  const script = [...(options.script ?? [])];
  const stats: LossyProxyStats = {
    requests: 0,
    forwarded: 0,
    delivered: 0,
    droppedAnswers: 0,
    resetsAfterForward: 0,
    resetsBeforeForward: 0,
    answered503: 0,
  };
  // Faults are dealt like cards: each block of BLOCK requests holds each fault its exact share of times, in a
  // seeded random order. The share lost is then the rate asked for, not a draw around it.
  const deck: Fault[] = [];
  const pick = (): Fault => {
    const scripted = script.shift();
    if (scripted !== undefined) return scripted;
    if (deck.length === 0) {
      for (const fault of FAULTS) deck.push(...Array<Fault>(Math.round(faults[fault] * BLOCK)).fill(fault));
      if (deck.length > BLOCK) throw new RangeError('the fault rates add up to more than 1');
      deck.push(...Array<Fault>(BLOCK - deck.length).fill('deliver'));
      for (let i = deck.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [deck[i], deck[j]] = [deck[j] as Fault, deck[i] as Fault];
      }
    }
    return deck.pop() as Fault;
  };
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const upstreamUrl = new URL(target);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readAll(req);
    stats.requests++;
    const fault = pick();
    if (fault === 'resetBeforeForward') {
      stats.resetsBeforeForward++;
      req.socket.resetAndDestroy();
      return;
    }
    if (fault === 'answer503') {
      stats.answered503++;
      res.writeHead(503, { 'content-type': 'text/plain' }).end('lossy proxy: unavailable');
      return;
    }
    stats.forwarded++;
    const upstream = httpRequest(new URL(req.url ?? '/', upstreamUrl), {
      method: req.method,
      headers: { ...endToEnd(req.headers), 'content-length': body.byteLength },
      agent,
    });
    upstream.on('error', () => req.socket.destroy());
    if (fault === 'resetAfterForward') {
      stats.resetsAfterForward++;
      upstream.on('finish', () => {
        setTimeout(
          () => {
            upstream.destroy();
            req.socket.resetAndDestroy();
          },
          Math.floor(random() * 4),
        );
      });
    }
    upstream.on('response', async (answer) => {
      const bytes = await readAll(answer).catch(() => undefined);
      if (fault === 'resetAfterForward') return;
      if (bytes === undefined) {
        req.socket.destroy();
        return;
      }
      if (fault === 'dropAnswer') {
        // The server did the work and answered; the client never hears of it.
        stats.droppedAnswers++;
        req.socket.destroy();
        return;
      }
      stats.delivered++;
      res
        .writeHead(answer.statusCode ?? 502, {
          ...endToEnd(answer.headers),
          'content-length': bytes.byteLength,
        })
        .end(bytes);
    });
    upstream.end(body);
  }

  const server = createServer((req, res) => {
    res.on('error', () => {});
    handle(req, res).catch(() => req.socket.destroy());
  });
  // A connection the proxy reset can still report errors on its way out; none of them concern the test.
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    lost: () =>
      stats.droppedAnswers + stats.resetsAfterForward + stats.resetsBeforeForward + stats.answered503,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        agent.destroy();
        server.close(() => resolve());
      }),
  };
}
