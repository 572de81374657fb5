// Caching (RFC 9111): patient data, tokens and records must never sit in a shared or browser cache, so
// every response (errors too) says `Cache-Control: no-store`, unless its route chose its own caching
// (the discovery documents: SMART configuration, JWKS). The CapabilityStatement is the other exception:
// it is public, the same for everyone and holds no patient data, so caches may keep it.
import type { FastifyInstance } from 'fastify';
import { pathOf } from '../url-parts.js';

const CACHEABLE = new Set(['/fhir/metadata', '/fhir/metadata/']);

export function registerCacheControl(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (!reply.hasHeader('cache-control') && !CACHEABLE.has(pathOf(request.url))) {
      reply.header('Cache-Control', 'no-store');
    }
    return payload;
  });
}
