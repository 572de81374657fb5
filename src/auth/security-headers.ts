// Security headers on every response (OWASP REST Security Cheat Sheet): the API serves no HTML of its own, so it
// forbids sniffing, framing and referrers outright; HSTS goes out only over HTTPS (RFC 6797 §7.2). The
// CSP's `sandbox` matters for Binary content (http/binary-reply.ts): opened in a browser, uploaded HTML or
// SVG runs in an opaque origin, without scripts, never as the API's origin.
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
  app.addHook('onSend', async (request, reply, payload) => {
    reply.headers(ALWAYS);
    if (isHttps(request)) reply.header('Strict-Transport-Security', HSTS);
    return payload;
  });
}
