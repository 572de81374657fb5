// Caching (RFC 9111): patient data, tokens and records must never sit in a shared or browser cache, so
// every response (errors too) says `Cache-Control: no-store`, unless its route chose its own caching
// (the discovery documents: SMART configuration, JWKS). The CapabilityStatement is the other exception:
// it is public, the same for everyone and holds no patient data, so caches may keep it (one copy per
// Accept: it comes in JSON or XML).
import type { FastifyInstance } from 'fastify';
import { pathOf } from '../url-parts.js';

const CACHEABLE = new Set(['/fhir/metadata', '/fhir/metadata/']);

export function registerCacheControl(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (CACHEABLE.has(pathOf(request.url))) {
      // In JSON or XML as Accept says (http/fhir-reply.ts): a cache keeps one per Accept.
      const vary = reply.getHeader('Vary');
      const values = vary === undefined ? [] : Array.isArray(vary) ? vary : [String(vary)];
      if (!values.some((v) => /(^|,)\s*accept\s*(,|$)/i.test(v)))
        reply.header('Vary', [...values, 'Accept'].join(', '));
    } else if (!reply.hasHeader('cache-control')) {
      reply.header('Cache-Control', 'no-store');
    }
    done(null, payload);
  });
}
