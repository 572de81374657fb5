// https://hl7.org/fhir/R4/http.html#capabilities: what the server supports, derived from the route
// table (router.ts), so that it lists exactly the interactions and operations that are served.
import type { FhirOperation, FhirRoute, Interaction } from '../routing.js';
import type { FhirServices } from '../services.js';

/** The Bulk Data IG's server capability, which the export routes of the table (router.ts) serve. */
const BULK_DATA_CAPABILITY = 'http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data';

/** R4's TypeRestfulInteraction and SystemRestfulInteraction codes. */
const TYPE_CODES: ReadonlySet<Interaction> = new Set<Interaction>([
  'read',
  'vread',
  'update',
  'patch',
  'delete',
  'history-instance',
  'history-type',
  'create',
  'search-type',
]);
const SYSTEM_CODES: ReadonlySet<Interaction> = new Set<Interaction>([
  'transaction',
  'batch',
  'delete',
  'history-system',
  'search-system',
]);

/** The PATCH content types (http/fhir-routes.ts reads them): JSON Patch and FHIRPath Patch (JSON or XML). */
export const SUPPORTED_PATCH_FORMATS = [
  'application/json-patch+json',
  'application/fhir+json',
  'application/fhir+xml',
] as const;

/** What the routes say of the CapabilityStatement: codes in table order, operations by type. */
interface RouteCapabilities {
  readonly typeInteractions: readonly Interaction[];
  readonly systemInteractions: readonly Interaction[];
  readonly systemOperations: readonly FhirOperation[];
  /** Operations on every type (a `:type` path), then those on named types. */
  operationsOn(type: string): FhirOperation[];
}

export function routeCapabilities(routes: readonly FhirRoute[]): RouteCapabilities {
  const typeInteractions = new Set<Interaction>();
  const systemInteractions = new Set<Interaction>();
  const systemOperations = new Map<string, FhirOperation>();
  const operations: { types?: readonly string[]; operation: FhirOperation }[] = [];
  for (const route of routes) {
    const first = route.path.split('/')[0];
    const onType = first !== '' && !first.startsWith('$') && !first.startsWith('_') && first !== 'metadata';
    if (route.operation) {
      if (!onType) systemOperations.set(route.operation.definition, route.operation);
      else if (first === ':type') operations.push({ types: route.types, operation: route.operation });
      else operations.push({ types: [first], operation: route.operation });
      continue;
    }
    for (const code of route.capabilityCodes ?? (route.interaction ? [route.interaction] : [])) {
      if (onType && TYPE_CODES.has(code)) typeInteractions.add(code);
      if (!onType && SYSTEM_CODES.has(code)) systemInteractions.add(code);
    }
  }
  return {
    typeInteractions: [...typeInteractions],
    systemInteractions: [...systemInteractions],
    systemOperations: [...systemOperations.values()],
    operationsOn(type) {
      const served = new Map<string, FhirOperation>();
      for (const { types, operation } of operations) {
        if (!types || types.includes(type)) served.set(operation.definition, operation);
      }
      return [...served.values()];
    },
  };
}

/**
 * https://hl7.org/fhir/R4/valueset-reference-handling-policy.html: literal references to this server
 * (`local`), and, with AMBIENT_REFERENTIAL_INTEGRITY, checked before each write commits (`enforced`).
 */
function referencePolicy(services: FhirServices): string[] {
  return services.config.referentialIntegrity ? ['literal', 'local', 'enforced'] : ['literal', 'local'];
}

/** Binary's REST behaviour beyond the common interactions (https://hl7.org/fhir/R4/http.html#binary). */
export const BINARY_DOCUMENTATION =
  'Raw content: create and update take any content type (stored as contentType and base64 data; X-Security-Context sets securityContext); read and vread answer the content in its own type unless _format is given or Accept names application/fhir+json or application/fhir+xml.';

let cached: { key: string; json: string } | undefined;

export type StoredProfile = Awaited<ReturnType<FhirServices['profiles']['supported']>>[number];

export function capabilityStatement(
  services: FhirServices,
  version: string,
  routes: readonly FhirRoute[],
  profiles: readonly StoredProfile[],
): string {
  const key = `${services.baseUrl}|${version}|${services.config.referentialIntegrity}|${JSON.stringify(profiles)}`;
  if (cached?.key === key) return cached.json;
  // The stored profiles of each type, as `url|version` (https://hl7.org/fhir/R4/capabilitystatement-definitions.html#CapabilityStatement.rest.resource.supportedProfile).
  const profilesOf = new Map<string, string[]>();
  for (const p of profiles) {
    const list = profilesOf.get(p.type) ?? [];
    list.push(p.version === undefined ? p.url : `${p.url}|${p.version}`);
    profilesOf.set(p.type, list);
  }
  const served = routeCapabilities(routes);
  const resource = services.types.resourceTypes.map((type) => {
    const includes = services.search.capabilityIncludes(type);
    return {
      type,
      profile: `http://hl7.org/fhir/StructureDefinition/${type}`,
      ...(profilesOf.has(type) ? { supportedProfile: profilesOf.get(type) } : {}),
      ...(type === 'Binary' ? { documentation: BINARY_DOCUMENTATION } : {}),
      interaction: served.typeInteractions.map((code) => ({ code })),
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
      operation: served.operationsOn(type),
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
    format: ['application/fhir+json', 'json', 'application/fhir+xml', 'xml'],
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
        // Where a websocket Subscription's client connects (https://hl7.org/fhir/R4/subscription.html#2.46.7.2).
        extension: [
          {
            url: 'http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket',
            valueUri: `${services.baseUrl.replace(/^http/, 'ws')}/$subscription-websocket`,
          },
        ],
        resource,
        interaction: served.systemInteractions.map((code) => ({ code })),
        searchParam: services.search.capabilitySystemSearchParams(),
        operation: served.systemOperations,
        // GET /fhir/{Compartment}/{id}/{type}: every R4 compartment (fhir/interactions/compartment-search.ts).
        compartment: services.types.compartments.map((c) => c.url),
      },
    ],
  };
  cached = { key, json: JSON.stringify(statement) };
  return cached.json;
}
