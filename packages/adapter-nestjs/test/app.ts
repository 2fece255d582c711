import type { ServerResponse } from 'node:http';
import { pipeline, Readable } from 'node:stream';
import { IdempotencyModule, type NestHttpRequest } from '@idem/adapter-nestjs';
import {
  type AppResponse,
  BODY_KIND_TYPE,
  type Business,
  type MakeServer,
  toBodyKind,
} from '@idem/adapter-suite';
import { Controller, Get, Module, Param, Post, Put, Req, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import express from 'express';
import 'reflect-metadata';

export type Platform = 'express' | 'fastify';

/** Either platform's response: Express's is the Node.js one; Fastify's reply keeps it as `raw`. */
type AnyResponse = ServerResponse & {
  raw?: ServerResponse;
  code?: (status: number) => AnyResponse;
  headers?: (headers: Record<string, string>) => AnyResponse;
  hijack?: () => void;
  status?: (status: number) => AnyResponse;
  set?: (headers: Record<string, string>) => AnyResponse;
  send: (body: unknown) => unknown;
};

function send(res: AnyResponse, answer: AppResponse): void {
  if (res.code !== undefined && res.headers !== undefined) {
    res
      .code(answer.status)
      .headers?.(answer.headers as Record<string, string>)
      .send(answer.body);
    return;
  }
  res
    .status?.(answer.status)
    .set?.(answer.headers as Record<string, string>)
    .send(answer.body);
}

/** The Node.js response, taken over from the framework (Fastify is told it is not its to send). */
function raw(res: AnyResponse): ServerResponse {
  if (res.raw === undefined) return res;
  res.hijack?.();
  return res.raw;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The suite's routes as one Nest controller over `business`. */
function controllerOf(business: Business) {
  @Controller()
  class SuiteController {
    @Post('orders')
    orders(@Req() req: NestHttpRequest, @Res() res: AnyResponse) {
      send(res, business.createOrder(req.body));
    }
    @Get('orders')
    list(@Res() res: AnyResponse) {
      send(res, business.listOrders());
    }
    @Post('items/:id')
    item(@Param('id') id: string, @Req() req: NestHttpRequest, @Res() res: AnyResponse) {
      send(res, business.item(id, req.body));
    }
    @Post('status/:code')
    status(@Param('code') code: string, @Res() res: AnyResponse) {
      send(res, business.status(Number(code)));
    }
    @Post('throw')
    throws() {
      business.throws();
    }
    @Post('slow/:ms')
    async slow(@Param('ms') ms: string, @Res() res: AnyResponse) {
      send(res, await business.slow(Number(ms)));
    }
    @Post('late/:ms')
    async late(@Param('ms') ms: string, @Res() res: AnyResponse) {
      const out = raw(res);
      out.writeHead(200, { 'content-type': 'text/plain' });
      out.flushHeaders();
      out.end(await business.late(Number(ms)));
    }
    @Post('plan/:name')
    plan(@Param('name') name: string, @Res() res: AnyResponse) {
      const chunks = business.plan(name);
      const out = raw(res);
      // The status line goes out with the first chunk, as a stream piped into the response sends it.
      out.statusCode = 200;
      out.setHeader('content-type', 'text/plain');
      pipeline(Readable.from(chunks), out, () => {});
    }
    @Post('throw-after/:point')
    async throwAfter(@Param('point') point: string, @Res() res: AnyResponse) {
      const run = business.throwAfter(point);
      const out = raw(res);
      out.writeHead(200, { 'content-type': 'text/plain' });
      out.flushHeaders();
      if (run.point !== 'status') out.write('first,');
      if (run.point === 'end') out.end('end');
      await sleep(20);
      // What Nest's error handling does to a response under way: it cannot change its status any more.
      if (!out.writableEnded) out.destroy();
      run.fail();
    }
    @Post('destroy')
    destroy(@Res() res: AnyResponse) {
      business.destroy();
      const out = raw(res);
      setTimeout(() => out.destroy(), 10);
    }
    @Put('files/:id')
    async files(
      @Param('id') id: string,
      @Req() req: NestHttpRequest & AsyncIterable<Buffer>,
      @Res() res: AnyResponse,
    ) {
      const source = (req.raw ?? req) as AsyncIterable<Buffer>;
      const body = (req as { body?: unknown }).body;
      const chunks: Buffer[] = [];
      for await (const chunk of (body as AsyncIterable<Buffer> | undefined) ?? source) chunks.push(chunk);
      send(res, business.upload(id, Buffer.concat(chunks).toString()));
    }
    @Post('big/:bytes')
    big(@Param('bytes') bytes: string, @Res() res: AnyResponse) {
      send(res, business.big(Number(bytes)));
    }
    @Post('binary')
    binary(@Res() res: AnyResponse) {
      send(res, business.binary());
    }
  }
  return SuiteController;
}

/** The suite's app on NestJS over `platform`, with the module's options as the suite gives them. */
export function nestServer(platform: Platform): MakeServer {
  return async ({ options, business }) => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          ...options,
          scope:
            (options.scope as ((request: NestHttpRequest) => string | undefined) | undefined) ??
            ((request) => request.headers['x-principal'] as string | undefined),
        } as Parameters<typeof IdempotencyModule.forRoot>[0]),
      ],
      controllers: [controllerOf(business)],
    })
    class AppModule {}
    const app =
      platform === 'express'
        ? await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false, rawBody: true })
        : await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false, rawBody: true });
    if (platform === 'express') {
      // A body kind the suite names, and multipart, as bytes; octet-stream is left to the handler.
      const instance = app.getHttpAdapter().getInstance() as express.Express;
      instance.use(express.raw({ type: BODY_KIND_TYPE }), (req, _res, next) => {
        if (Buffer.isBuffer(req.body)) req.body = toBodyKind(req.get('x-body-kind'), req.body);
        next();
      });
      instance.use(express.raw({ type: 'multipart/form-data' }));
      instance.use(express.text());
    } else {
      const instance = app.getHttpAdapter().getInstance() as import('fastify').FastifyInstance;
      instance.addContentTypeParser(BODY_KIND_TYPE, { parseAs: 'buffer' }, (request, body, done) =>
        done(null, toBodyKind(request.headers['x-body-kind'] as string | undefined, body as Buffer)),
      );
      instance.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_request, body, done) =>
        done(null, body),
      );
      instance.addContentTypeParser('application/octet-stream', (_request, payload, done) =>
        done(null, payload),
      );
    }
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    return { url, close: () => app.close() };
  };
}
