// Caching of FHIR answers (RFC 9111): patient data must never sit in a shared or browser cache, so every
// /fhir response (errors too) says `Cache-Control: no-store`. The CapabilityStatement is the exception:
// it is public, the same for everyone and holds no patient data, so caches may keep it.
import type { FastifyInstance } from 'fastify';

const CACHEABLE = new Set(['/fhir/metadata', '/fhir/metadata/']);

export function registerFhirCacheControl(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const path = request.url.split('?')[0];
    if ((path === '/fhir' || path.startsWith('/fhir/')) && !CACHEABLE.has(path)) {
      reply.header('Cache-Control', 'no-store');
    }
    return payload;
  });
}
