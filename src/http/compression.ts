// Response compression (docs/api.md "Running it"): gzip or br when the client's Accept-Encoding allows,
// through @fastify/compress. Registered before any route, so every route's replies pass through it: FHIR
// replies (sent as pre-serialised strings), errors, the scribe and auth APIs. Measured costs and the
// choice of levels: docs/benchmarks.md "Compression".
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { negotiate } from '@fastify/accept-negotiator';
import compress from '@fastify/compress';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** What the server compresses with, in its order of preference. */
const ENCODINGS: ('br' | 'gzip')[] = ['br', 'gzip'];

/**
 * Bodies smaller than this go out as they are. Compressing a 1.5 KB answer (a search page of two
 * Encounters) to 0.6 KB cost the server 0.04-0.05 ms of CPU, 7-10% of such a search, and saved the
 * client nothing it could notice: both fit in the first round trip of a TCP connection (its initial
 * window is ten segments, about 14 KB). From 4 KB the bytes saved start to count for a client on a
 * slow or metered link.
 */
export const COMPRESSION_THRESHOLD_BYTES = 4096;

/**
 * Brotli quality 1: an API answers many small bodies, each compressed as it is sent, where CPU is what
 * runs out first. Measured on a 10 KB search page: 0.04 ms (1.77 KB) against 0.13 ms (1.5 KB) at quality
 * 4; on the 735 KB CapabilityStatement 1.0 ms (34 KB) against 2.2 ms (27 KB), and gzip 6 4.7 ms (29 KB).
 * zlib's default, 11, is meant for static assets compressed once (hundreds of times slower).
 */
export const BROTLI_QUALITY = 1;

/**
 * gzip level 1, as nginx's default `gzip_comp_level`, for the same reason as brotli's quality: a 10 KB
 * search page 0.05 ms against 0.09 ms at level 6 (zlib's default), 4% larger; the 735 KB
 * CapabilityStatement 1.9 ms (53 KB) against 4.4 ms (29 KB). Node's fetch asks for gzip, not br.
 */
export const GZIP_LEVEL = 1;

/**
 * Bodies up to this size (every search page, read and write answer of the comparison workload) are
 * compressed in one call on the event loop, larger ones and streams through a zlib stream on the thread
 * pool. @fastify/compress's own default on 2 cores is 8 KB, which sends a 9 KB search page through the
 * stream path: a stream, a pipeline and an AbortSignal per response cost more than the compression
 * itself and halved the search rate (docs/benchmarks.md, "Compression"). At 64 KB one call takes
 * ~0.3 ms at the most (brotli 4 or gzip 6; less at the levels above), so the event loop is never held longer.
 */
export const SYNC_COMPRESSION_MAX_BYTES = 64 * 1024;

export async function registerCompression(app: FastifyInstance): Promise<void> {
  await app.register(compress, {
    global: true,
    // Request bodies are not decompressed: clients send them as they are (and a compressed upload would
    // need its own size limit on the inflated bytes).
    globalDecompression: false,
    encodings: ENCODINGS,
    threshold: COMPRESSION_THRESHOLD_BYTES,
    syncThreshold: SYNC_COMPRESSION_MAX_BYTES,
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    zlibOptions: { level: GZIP_LEVEL },
  });
  // `Vary: Accept-Encoding` on every body that could have been compressed, also when this client got it
  // uncompressed, so that a shared cache never hands one client's encoding to another. (@fastify/compress
  // adds it only when it compresses, and spells it in lower case: so do we, so that it is never doubled.)
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (
      (typeof payload === 'string' || Buffer.isBuffer(payload)) &&
      Buffer.byteLength(payload) >= COMPRESSION_THRESHOLD_BYTES
    ) {
      const vary = reply.getHeader('Vary');
      const values = vary === undefined ? [] : Array.isArray(vary) ? vary : [String(vary)];
      if (!values.some((v) => v.toLowerCase().includes('accept-encoding'))) {
        reply.header('Vary', [...values, 'accept-encoding'].join(', '));
      }
    }
    done(null, payload);
  });
}

/**
 * The compressed forms of bodies that every client gets alike, by their text: at most two (one server's
 * CapabilityStatement, and the one before it while a change replaces it).
 */
const sharedBodies = new Map<string, Map<'br' | 'gzip', Buffer>>();
const MAX_SHARED_BODIES = 2;

/**
 * Sends `text`, a body every client gets alike until it changes (the CapabilityStatement: 735 KB, which
 * took 8-11 ms of CPU to compress per request, for a request that needs no token), in the encoding the
 * client accepts, compressed once per text and encoding instead of per request; the first request pays
 * one compression on the event loop (1-2 ms). Answers undefined, sending nothing, when the client takes
 * it as it is: the caller sends it then. Negotiates as @fastify/compress does, which lets an answer
 * with its Content-Encoding set pass.
 */
export function sendShared(
  request: FastifyRequest,
  reply: FastifyReply,
  contentType: string,
  text: string,
): FastifyReply | undefined {
  const header = request.headers['accept-encoding'];
  if (header === undefined || request.headers['x-no-compression'] !== undefined) return undefined;
  // As @fastify/compress: "*" and x-gzip stand for gzip.
  const encoding = negotiate(header.toLowerCase().replace(/\*|x-gzip/gu, 'gzip'), ENCODINGS);
  if (encoding !== 'br' && encoding !== 'gzip') return undefined;
  let forms = sharedBodies.get(text);
  if (!forms) {
    if (sharedBodies.size >= MAX_SHARED_BODIES) sharedBodies.clear();
    forms = new Map();
    sharedBodies.set(text, forms);
  }
  let body = forms.get(encoding);
  if (!body) {
    body =
      encoding === 'br'
        ? brotliCompressSync(text, { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } })
        : gzipSync(text, { level: GZIP_LEVEL });
    forms.set(encoding, body);
  }
  return reply.type(contentType).header('Content-Encoding', encoding).send(body);
}
