// Security headers on every response (OWASP REST Security Cheat Sheet): the API serves no HTML of its own, so it
// forbids sniffing, framing and referrers outright; HSTS goes out only over HTTPS (RFC 6797 §7.2). The
// CSP's `sandbox` matters for Binary content (http/binary-reply.ts): opened in a browser, uploaded HTML or
// SVG runs in an opaque origin, without scripts, never as the API's origin. The one page of the server's
// own, the web console's (http/console.ts), sets a CSP of its own, which this hook leaves as it is.
import type { FastifyInstance } from 'fastify';
import { isHttps } from './transport.js';

const ALWAYS: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'; sandbox",
  'Referrer-Policy': 'no-referrer',
};

export const HSTS = 'max-age=31536000; includeSubDomains';

export function registerSecurityHeaders(app: FastifyInstance): void {
  // A callback hook, not an async one: every response passes here, and a promise per hook adds up.
  app.addHook('onSend', (request, reply, payload, done) => {
    for (const [name, value] of Object.entries(ALWAYS)) {
      if (name !== 'Content-Security-Policy' || !reply.hasHeader(name)) reply.header(name, value);
    }
    if (isHttps(request)) reply.header('Strict-Transport-Security', HSTS);
    done(null, payload);
  });
}
