// How long the HTTP(S) server waits for a client, as Fastify and Node options. Without these a client that
// sends its headers or body one byte every few seconds holds a socket (and its buffers) forever: Fastify
// turns Node's request timeout off by default.
import type { Config } from '../config.js';

export interface ServerTimeouts {
  /** Fastify's own option: it sets `server.requestTimeout`. */
  readonly requestTimeout: number;
  /** Options of `http.createServer` / `https.createServer`. */
  readonly node: {
    readonly requestTimeout: number;
    readonly headersTimeout: number;
    readonly connectionsCheckingInterval: number;
  };
  /** Fastify's option for idle keep-alive sockets. */
  readonly keepAliveTimeout: number;
}

// Longer than the idle timeout of common proxies and load balancers (60 s), so that they close an idle
// connection before we do and never send a request on a socket we are closing (Fastify's default).
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export function serverTimeouts(config: Pick<Config, 'requestTimeoutMs'>): ServerTimeouts {
  const timeout = config.requestTimeoutMs;
  return {
    requestTimeout: timeout,
    node: {
      // The whole request, headers and body, from its first byte: past it Node answers 408 (through
      // Fastify's clientError handler) and closes the socket. The response is not covered: a long search or
      // a large page being written is never cut by it.
      requestTimeout: timeout,
      // Headers are part of the request, so the same bound (Node requires headersTimeout <= requestTimeout).
      headersTimeout: timeout,
      // Node looks for expired requests only this often (30 s by default, which would let a 500 ms timeout
      // run 30 s); a fifth of the timeout, within 50 ms to 1 s, keeps the overshoot small at little cost.
      connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(timeout / 5))),
    },
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  };
}
