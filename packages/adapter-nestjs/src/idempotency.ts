import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import {
  type BeginResult,
  createIdempotency,
  type Execution,
  errorResponse,
  type HeaderValue,
  type Idempotency,
  type IdempotencyOverrides,
  type WholeResponse,
} from '@idem/core';
import {
  bodyOfParsed,
  decorateSettlement,
  describeRequest,
  type FastifyReplyLike,
  type FastifySettlementHost,
  handOver,
  isResponseGone,
  type NodeIdempotencyOptions,
  settleOnReply,
  settleOnResponse,
  writeResponse,
} from '@idem/node-http';
import {
  type CallHandler,
  type DynamicModule,
  type ExecutionContext,
  Inject,
  Injectable,
  Module,
  type NestInterceptor,
  Optional,
  SetMetadata,
} from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost, Reflector } from '@nestjs/core';
import { Observable, type Observer, type Subscriber, type Unsubscribable } from 'rxjs';

/** The request of either platform, as the hooks (`scope`, `formatError`, `redact`) receive it. */
export interface NestHttpRequest {
  readonly method: string;
  readonly url: string;
  readonly originalUrl?: string;
  readonly headers: IncomingHttpHeaders;
  readonly body?: unknown;
  /** The exact bytes of the body, with `NestFactory.create(AppModule, { rawBody: true })`. */
  readonly rawBody?: Buffer;
  /** Set by the route: Express's `req.route.path`, Fastify's `request.routeOptions.url`. */
  readonly route?: { readonly path?: unknown };
  readonly routeOptions?: { readonly url?: string };
  readonly raw?: { readonly readableEnded?: boolean };
  readonly readableEnded?: boolean;
  /** The execution under the reserved key, in the handler; `null` while none (or when the request runs without one). */
  idempotency?: Execution<NestHttpRequest> | null | undefined;
  [other: string]: unknown;
}

/** Options of {@link IdempotencyModule}: the coordinator's, plus `scope` and `formatError` over the request. */
export interface NestIdempotencyOptions extends NodeIdempotencyOptions<NestHttpRequest> {}

/** Options one handler (or controller) may override with {@link Idempotent}. */
export type IdempotentOptions = IdempotencyOverrides<NestHttpRequest>;

/** The injection token of the module's options. */
export const IDEMPOTENCY_OPTIONS = Symbol('@idem/adapter-nestjs options');
const IDEMPOTENT = '@idem/adapter-nestjs idempotent';

/**
 * A handler's (or a whole controller's) own options: `@Idempotent({ lifetimeMs: 86_400_000 })`, or
 * `@Idempotent(false)` to leave it uncovered. Without it a handler is covered by the module's options (its
 * methods: POST, PUT, PATCH and DELETE by default).
 */
export const Idempotent = (options: IdempotentOptions | false = {}) => SetMetadata(IDEMPOTENT, options);

/** The response of either platform: Express's is the Node.js one, Fastify's reply has it as `raw`. */
const nodeResponse = (response: ServerResponse | { raw: ServerResponse }): ServerResponse =>
  'raw' in response && response.raw !== undefined ? response.raw : (response as ServerResponse);

/** The route template the request identity includes: the platform's, else the path. */
function routeOf(request: NestHttpRequest): string {
  const template = request.routeOptions?.url ?? request.route?.path;
  if (typeof template === 'string') return template;
  const url = request.originalUrl ?? request.url;
  return url.split('?')[0] ?? url;
}

/**
 * The body bytes as received (`rawBody: true`), else the parsed body; a declared body that nothing read is
 * `UNSEEN_BODY` (answered 415 before anything is reserved).
 */
function bodyOf(request: NestHttpRequest): unknown {
  const ended = request.raw?.readableEnded ?? request.readableEnded;
  return bodyOfParsed(request.headers, ended, request.rawBody, request.body);
}

/** Where the interceptor keeps its {@link Interceptor}: a symbol, so that no field of a subclass meets it. */
const INTERCEPTOR = Symbol('@idem/adapter-nestjs interceptor');
type Holding = { [INTERCEPTOR]: Interceptor };

/**
 * The interceptor the module installs for every route: it runs after the guards (so `scope` sees what your
 * authentication set) and before the pipes. It hands the request to the coordinator through `@idem/node-http`,
 * the layer the Express and Fastify adapters share, answers a replay or a refusal itself (the handler does not
 * run), and otherwise settles the key by what is written to the response.
 *
 * Its state and its work are an undecorated class's, held under a symbol. The build lowers every `#` member of a
 * class with Nest's (legacy) decorators to a WeakMap or WeakSet, each use to a lookup in it on every request, and
 * such members fail when Nest calls the instance through a proxy (`instanceDecorator`) or a copy of it; named
 * fields would show in `Object.keys` and meet a subclass's own. A symbol does neither, and reads through both.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    @Inject(IDEMPOTENCY_OPTIONS) options: NestIdempotencyOptions,
    @Inject(Reflector) reflector: Reflector,
    @Optional() @Inject(HttpAdapterHost) adapterHost?: HttpAdapterHost,
  ) {
    (this as unknown as Holding)[INTERCEPTOR] = new Interceptor(options, reflector, adapterHost);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return (this as unknown as Holding)[INTERCEPTOR].intercept(context, next);
  }
}

/** What {@link IdempotencyInterceptor} does, in a class without decorators (its `#` members stay native). */
class Interceptor {
  readonly #base: Idempotency<NestHttpRequest>;
  readonly #options: NestIdempotencyOptions;
  readonly #reflector: Reflector;
  /**
   * Each handler's coordinator, by controller class and handler (a handler inherited by two controllers may
   * be covered in one and not the other), made once: the module's, or its own overrides over the same timers.
   */
  readonly #perHandler = new WeakMap<object, WeakMap<object, Idempotency<NestHttpRequest> | false>>();

  /** On platform-fastify: the answer is taken where Fastify hands it over ({@link handOverOn}). */
  readonly #handedOver: boolean;

  constructor(options: NestIdempotencyOptions, reflector: Reflector, adapterHost?: HttpAdapterHost) {
    this.#options = options;
    this.#reflector = reflector;
    this.#base = createIdempotency<NestHttpRequest>(options);
    const adapter = adapterHost?.httpAdapter;
    this.#handedOver = adapter?.getType() === 'fastify' && handOverOn(adapter.getInstance());
  }

  #coordinatorOf(context: ExecutionContext): Idempotency<NestHttpRequest> | false {
    const handler = context.getHandler();
    const controller = context.getClass();
    let handlers = this.#perHandler.get(controller);
    if (handlers === undefined) {
      handlers = new WeakMap();
      this.#perHandler.set(controller, handlers);
    }
    let idem = handlers.get(handler);
    if (idem === undefined) {
      idem = this.#made(
        this.#reflector.get<IdempotentOptions | false | undefined>(IDEMPOTENT, controller),
        this.#reflector.get<IdempotentOptions | false | undefined>(IDEMPOTENT, handler),
      );
      handlers.set(handler, idem);
    }
    return idem;
  }

  /** The coordinator of a handler: its own options over its controller's (statuses status by status). */
  #made(
    ofClass: IdempotentOptions | false | undefined,
    ofHandler: IdempotentOptions | false | undefined,
  ): Idempotency<NestHttpRequest> | false {
    if (ofHandler === false || (ofHandler === undefined && ofClass === false)) return false;
    const base = ofClass === false || ofClass === undefined ? {} : ofClass;
    const own = ofHandler ?? {};
    if (ofClass === undefined && ofHandler === undefined) return this.#base;
    const statuses =
      base.statuses === undefined && own.statuses === undefined
        ? undefined
        : { ...base.statuses, ...own.statuses };
    return this.#base.with({ ...base, ...own, ...(statuses === undefined ? {} : { statuses }) });
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const idem = context.getType() === 'http' ? this.#coordinatorOf(context) : false;
    const http = context.switchToHttp();
    const request = http.getRequest<NestHttpRequest>();
    // Taken once: a second module's interceptor (two forRoot imports) passes it on.
    if (idem === false || !idem.covers(request.method) || request.idempotency !== undefined)
      return next.handle();
    request.idempotency = null;
    const response = http.getResponse<ServerResponse | { raw: ServerResponse }>();
    const options = this.#options;
    const handedOver = this.#handedOver;
    return new Observable(
      (subscriber) => new Interception(idem, options, handedOver, request, response, next, subscriber),
    );
  }
}

/**
 * One intercepted request, from `begin` to the handler's end: the observer of the handler's observable, and
 * the teardown of the one Nest subscribes to (a class rather than closures: one object per request).
 */
class Interception implements Observer<unknown>, Unsubscribable {
  readonly #res: ServerResponse;
  #execution: Execution<NestHttpRequest> | undefined;
  #inner: Unsubscribable | undefined;
  #done = false;

  constructor(
    idem: Idempotency<NestHttpRequest>,
    options: NestIdempotencyOptions,
    private readonly handedOver: boolean,
    private readonly request: NestHttpRequest,
    private readonly response: ServerResponse | { raw: ServerResponse },
    private readonly handler: CallHandler,
    private readonly subscriber: Subscriber<unknown>,
  ) {
    this.#res = nodeResponse(response);
    try {
      this.#start(idem, options);
    } catch (error) {
      subscriber.error(error);
    }
  }

  /** `begin`, and what it answered acted on: at once when it answered synchronously (a synchronous store). */
  #start(idem: Idempotency<NestHttpRequest>, options: NestIdempotencyOptions): void {
    const { request } = this;
    const parts = {
      method: request.method,
      url: request.originalUrl ?? request.url,
      headers: request.headers,
      route: routeOf(request),
      body: bodyOf(request),
      scope: options.scope?.(request),
      host: request,
    };
    const begun = idem.begin(describeRequest(idem, this.#res, parts));
    if (begun instanceof Promise) {
      begun
        .then((result) => this.#act(result, options))
        .catch((error: unknown) => this.subscriber.error(error));
    } else {
      this.#act(begun, options);
    }
  }

  #act(result: BeginResult<NestHttpRequest>, options: NestIdempotencyOptions): void {
    const { request } = this;
    const res = this.#res;
    switch (result.action) {
      case 'proceed':
        this.#run();
        return;
      case 'reject':
        // Answered here: the handler does not run, and nothing is emitted for Nest to send.
        sendWhole(this.response, res, errorResponse(result.error, request, options.formatError));
        return;
      case 'replay':
        sendWhole(this.response, res, result.response);
        return;
    }
    const { execution } = result;
    if (isResponseGone(res)) {
      // The client left while the key was reserved: release it, and run nothing.
      execution.abort().catch((error: unknown) => this.subscriber.error(error));
      return;
    }
    if (this.handedOver && isFastifyReply(this.response)) {
      // Fastify hands the answer to the last onSend hook (handOverOn): taken there, whole, as the Fastify
      // adapter takes it; what the app writes itself after `reply.hijack()` is captured as it is written.
      settleOnReply(execution, this.response);
    } else {
      settleOnResponse(execution, res);
    }
    this.#execution = execution;
    request.idempotency = execution;
    this.#run();
  }

  #run(): void {
    this.#inner = this.handler.handle().subscribe(this);
  }

  next(value: unknown): void {
    this.subscriber.next(value);
  }

  error(error: unknown): void {
    this.#done = true;
    this.subscriber.error(error);
  }

  complete(): void {
    this.#done = true;
    this.subscriber.complete();
  }

  /**
   * Nest tears the handler down when its client leaves: a handler stopped before it answered has no answer to
   * store, and its key is released (what was written by then settles it as ever).
   */
  unsubscribe(): void {
    this.#inner?.unsubscribe();
    if (!this.#done && this.#execution !== undefined && !this.#res.headersSent) void this.#execution.abort();
  }
}

/** The part of Fastify's reply that sends a whole answer (the response of platform-fastify). */
interface FastifyReplySender extends FastifyReplyLike {
  code(status: number): FastifyReplySender;
  headers(headers: Record<string, HeaderValue>): FastifyReplySender;
  send(body?: unknown): unknown;
}

/** The part of Nest's Fastify instance the hand-over is installed with. */
interface FastifyLike extends FastifySettlementHost {
  addHook(name: 'onRoute', hook: (route: { onSend?: unknown }) => void): unknown;
}

const handingOver = new WeakSet<object>();

/**
 * Put {@link handOver} last among the onSend hooks of every route Nest adds from now on (its routes are added
 * after the interceptor is made), once per Fastify instance. False when the instance takes no more hooks (it
 * has started): answers are then captured as they are written, as on Express. On a route without the hook
 * (added before, or another plugin replaced its hooks) the answer is captured as it is written too: the
 * settlement starts a capture at the first head, write or end it did not see handed over.
 */
function handOverOn(instance: unknown): boolean {
  const fastify = instance as FastifyLike;
  if (handingOver.has(fastify)) return true;
  try {
    decorateSettlement(fastify);
    fastify.addHook('onRoute', (route) => {
      route.onSend = [...[route.onSend ?? []].flat(), handOver];
    });
  } catch {
    return false; // started already: no hook can be added now
  }
  handingOver.add(fastify);
  return true;
}
const isFastifyReply = (response: object): response is FastifyReplySender =>
  'raw' in response && typeof (response as Partial<FastifyReplySender>).send === 'function';

/**
 * Send a whole answer (a replay, a refusal) as the platform sends one: through Fastify's reply, which adds the
 * headers it holds for this response (an `onRequest` hook's `reply.header`: a request id, CORS) and runs its
 * `onSend` hooks, as the Fastify adapter's replays do; on Express, on the Node response, where such headers
 * are set already.
 */
function sendWhole(response: object, res: ServerResponse, whole: WholeResponse): void {
  if (isFastifyReply(response)) {
    // Bytes, which Fastify sends as they are: a string would go through a serializer the app set on the reply
    // (`reply.serializer`), and a JSON error body would be encoded twice. No body: send(null) would send `null`.
    const { body } = whole;
    response
      .code(whole.status)
      .headers(whole.headers)
      .send(typeof body === 'string' ? Buffer.from(body) : (body ?? undefined));
  } else {
    writeResponse(res, whole);
  }
}

/** Options of {@link IdempotencyModule.forRootAsync}. */
export interface IdempotencyModuleAsyncOptions {
  readonly imports?: DynamicModule['imports'];
  // biome-ignore lint/suspicious/noExplicitAny: Nest's injection tokens are of any kind
  readonly inject?: any[];
  readonly useFactory: (...args: never[]) => NestIdempotencyOptions | Promise<NestIdempotencyOptions>;
}

/**
 * Idempotency for every route of the app, on `@nestjs/platform-express` and `@nestjs/platform-fastify`: a
 * global interceptor over the module's options. Give the app `rawBody: true` so that the fingerprint hashes
 * the exact bytes sent.
 *
 * @example
 * @Module({ imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })], controllers: [OrdersController] })
 * class AppModule {}
 * const app = await NestFactory.create(AppModule, { rawBody: true });
 */
@Module({})
export class IdempotencyModule {
  static forRoot(options: NestIdempotencyOptions): DynamicModule {
    return {
      module: IdempotencyModule,
      global: true,
      providers: [
        { provide: IDEMPOTENCY_OPTIONS, useValue: options },
        { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
      ],
      exports: [IDEMPOTENCY_OPTIONS],
    };
  }

  static forRootAsync(options: IdempotencyModuleAsyncOptions): DynamicModule {
    return {
      module: IdempotencyModule,
      global: true,
      imports: options.imports ?? [],
      providers: [
        { provide: IDEMPOTENCY_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
        { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
      ],
      exports: [IDEMPOTENCY_OPTIONS],
    };
  }
}
