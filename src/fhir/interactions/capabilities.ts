// https://hl7.org/fhir/R4/http.html#capabilities
import { BULK_DATA_CAPABILITY, SYSTEM_EXPORT_OPERATION, TYPE_EXPORT_OPERATIONS } from '../../export/capabilities.js';
import type { FhirServices } from '../services.js';

/**
 * What the server supports. Each list here is what the router (http/fhir-routes.ts) really serves:
 * extend it in the same change that adds a route, and the CapabilityStatement follows.
 */
export const SUPPORTED_TYPE_INTERACTIONS = [
  'read',
  'vread',
  'update',
  'patch',
  'delete',
  'history-instance',
  'history-type',
  'create',
  'search-type',
] as const;
export const SUPPORTED_TYPE_OPERATIONS = ['validate'] as const;
/** Operations served on one type only, with their OperationDefinition (fhir-routes.ts). */
const TYPE_SPECIFIC_OPERATIONS: Readonly<Record<string, readonly { name: string; definition: string }[]>> = {
  Patient: [{ name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything' }],
};
export const SUPPORTED_SYSTEM_INTERACTIONS = ['transaction', 'batch', 'history-system', 'search-system'] as const;
/** The PATCH content types (http/fhir-routes.ts patchFormat): JSON Patch and FHIRPath Patch. */
export const SUPPORTED_PATCH_FORMATS = ['application/json-patch+json', 'application/fhir+json'] as const;

/**
 * https://hl7.org/fhir/R4/valueset-reference-handling-policy.html: literal references to this server
 * (`local`), and, with AMBIENT_REFERENTIAL_INTEGRITY, checked before each write commits (`enforced`).
 */
function referencePolicy(services: FhirServices): string[] {
  return services.config.referentialIntegrity ? ['literal', 'local', 'enforced'] : ['literal', 'local'];
}

/** Binary's REST behaviour beyond the common interactions (https://hl7.org/fhir/R4/http.html#binary). */
export const BINARY_DOCUMENTATION =
  'Raw content: create and update take any content type (stored as contentType and base64 data; X-Security-Context sets securityContext); read and vread answer the content in its own type unless Accept or _format asks for application/fhir+json.';

let cached: { key: string; json: string } | undefined;

export function capabilityStatement(services: FhirServices, version: string): string {
  const key = `${services.baseUrl}|${version}|${services.config.referentialIntegrity}`;
  if (cached?.key === key) return cached.json;
  const resource = services.types.resourceTypes.map((type) => {
    const includes = services.search.capabilityIncludes(type);
    return {
      type,
      profile: `http://hl7.org/fhir/StructureDefinition/${type}`,
      ...(type === 'Binary' ? { documentation: BINARY_DOCUMENTATION } : {}),
      interaction: SUPPORTED_TYPE_INTERACTIONS.map((code) => ({ code })),
      versioning: 'versioned-update',
      readHistory: true,
      updateCreate: true,
      conditionalCreate: true,
      conditionalUpdate: true,
      conditionalDelete: 'single',
      conditionalRead: 'full-support',
      referencePolicy: referencePolicy(services),
      searchInclude: includes.include,
      searchRevInclude: includes.revinclude,
      searchParam: services.search.capabilitySearchParams(type),
      operation: [
        ...SUPPORTED_TYPE_OPERATIONS.map((name) => ({
          name,
          definition: `http://hl7.org/fhir/OperationDefinition/Resource-${name}`,
        })),
        ...(TYPE_SPECIFIC_OPERATIONS[type] ?? []),
        ...(TYPE_EXPORT_OPERATIONS[type] ? [TYPE_EXPORT_OPERATIONS[type]] : []),
      ],
    };
  });
  const statement = {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: new Date().toISOString(),
    publisher: 'ambient-fhir',
    kind: 'instance',
    instantiates: [BULK_DATA_CAPABILITY],
    software: { name: 'ambient-fhir', version },
    implementation: { description: 'ambient-fhir FHIR R4 server', url: services.baseUrl },
    fhirVersion: '4.0.1',
    format: ['application/fhir+json', 'json'],
    patchFormat: [...SUPPORTED_PATCH_FORMATS],
    rest: [
      {
        mode: 'server',
        security: {
          // SMART: where to get a token (https://hl7.org/fhir/smart-app-launch/conformance.html).
          extension: [
            {
              url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
              extension: [{ url: 'token', valueUri: `${services.config.publicUrl}/v1/ambient/api/auth/token` }],
            },
          ],
          cors: services.config.corsOrigins.length > 0,
          service: [
            {
              coding: [
                { system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' },
              ],
            },
          ],
          description:
            'Bearer tokens (JWT, ES256) from POST /v1/ambient/api/auth/token: the password grant, or SMART Backend Services (client_credentials with an RS384 or ES384 client assertion); SMART on FHIR v2 system scopes.',
        },
        resource,
        interaction: SUPPORTED_SYSTEM_INTERACTIONS.map((code) => ({ code })),
        searchParam: services.search.capabilitySystemSearchParams(),
        operation: [SYSTEM_EXPORT_OPERATION],
        // GET /fhir/{Compartment}/{id}/{type}: every R4 compartment (fhir/interactions/compartment-search.ts).
        compartment: services.types.compartments.map((c) => c.url),
      },
    ],
  };
  cached = { key, json: JSON.stringify(statement) };
  return cached.json;
}
