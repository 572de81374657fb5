// https://hl7.org/fhir/smart-app-launch/conformance.html#using-well-known: SMART discovery, without auth, at
// `/.well-known/smart-configuration` and under the FHIR base. It names only what really works: the token
// endpoint's client_credentials grant with a private_key_jwt client assertion (RS384 or ES384; SMART
// Backend Services) and the password grant; system scopes.
import type { FastifyInstance } from 'fastify';
import { CLIENT_ASSERTION_ALGORITHMS } from './client-keys.js';
import { GRANT_TYPES, TOKEN_PATH } from './token-endpoint.js';

export const SMART_CONFIGURATION_PATHS = ['/.well-known/smart-configuration', '/fhir/.well-known/smart-configuration'];

/** The scopes a client may ask for: SMART v2 and v1 system scopes (any type or one type) and the scribe API's. */
export const SCOPES_SUPPORTED = [
  'system/*.cruds',
  'system/*.rs',
  'system/*.read',
  'system/*.write',
  'system/*.*',
  'scribe.read',
  'scribe.write',
];

export function tokenEndpointUrl(publicUrl: string): string {
  return `${publicUrl}${TOKEN_PATH}`;
}

export function smartConfiguration(publicUrl: string): Record<string, unknown> {
  return {
    token_endpoint: tokenEndpointUrl(publicUrl),
    token_endpoint_auth_methods_supported: ['private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: [...CLIENT_ASSERTION_ALGORITHMS],
    grant_types_supported: [...GRANT_TYPES],
    scopes_supported: SCOPES_SUPPORTED,
    capabilities: ['client-confidential-asymmetric'],
  };
}

export function registerSmartConfiguration(app: FastifyInstance, publicUrl: string): void {
  const body = JSON.stringify(smartConfiguration(publicUrl));
  for (const url of SMART_CONFIGURATION_PATHS) {
    app.get(url, async (_request, reply) =>
      reply.type('application/json').header('Cache-Control', 'public, max-age=300').send(body),
    );
  }
}
