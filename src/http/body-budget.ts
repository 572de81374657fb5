// A bound on the request body bytes the process holds at once (AMBIENT_MAX_BODY_BYTES_IN_FLIGHT). Each
// body is bounded on its own (AMBIENT_MAX_BODY_BYTES), but twenty 16 MiB bodies arriving together are
// 320 MiB of buffers, and several times that once parsed. A body's bytes are taken when it starts to be
// read (all at once from its Content-Length, chunk by chunk when it has none) and given back when its
// response is finished or its connection closes: the parsed body lives that long. A body that does not fit
// is refused at once with 503 and Retry-After rather than queued, so that a flood holds neither memory nor
// waiting sockets; small bodies still fit beside large ones. Runs after onRequest, so only requests that
// passed authentication and the scope check of their route (fhir-routes.ts) take any of it.
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';

/** Seconds a refused client is asked to wait: bodies in flight are usually done within one. */
const RETRY_AFTER_SECONDS = 1;

export class BodyBytesInFlight {
  private held = 0;

  constructor(readonly limit: number) {}

  /** Takes `bytes` if they fit under the limit; false (nothing taken) when they do not. */
  tryTake(bytes: number): boolean {
    if (this.held + bytes > this.limit) return false;
    this.held += bytes;
    return true;
  }

  give(bytes: number): void {
    this.held -= bytes;
  }

  get inFlight(): number {
    return this.held;
  }
}

function busy(): AppError {
  return new AppError(
    'server-busy',
    'The server is reading as many request bodies as it holds at once (AMBIENT_MAX_BODY_BYTES_IN_FLIGHT): retry shortly',
    { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } },
  );
}

export function registerBodyBudget(app: FastifyInstance, budget: BodyBytesInFlight, maxBodyBytes: number): void {
  app.addHook('preParsing', async (request: FastifyRequest, reply: FastifyReply, payload: Readable) => {
    const declared = request.headers['content-length'];
    const chunked = request.headers['transfer-encoding'] !== undefined;
    if (declared === undefined && !chunked) return payload;
    let taken = 0;
    let given = false;
    const giveBack = () => {
      if (given) return;
      given = true;
      budget.give(taken);
    };
    if (declared !== undefined && !chunked) {
      const bytes = Number(declared);
      // Nothing to hold, or more than any body may have: the parser refuses it (413) without reading it.
      if (!(bytes > 0) || bytes > maxBodyBytes) return payload;
      if (!budget.tryTake(bytes)) throw busy();
      taken = bytes;
      reply.raw.once('close', giveBack);
      return payload;
    }
    reply.raw.once('close', giveBack);
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        if (!budget.tryTake(chunk.length)) return done(busy());
        taken += chunk.length;
        done(null, chunk);
      },
    });
    payload.on('error', (error) => counted.destroy(error));
    return payload.pipe(counted);
  });
}
