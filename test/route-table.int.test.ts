// The route table (src/fhir/router.ts) is the one source of the FHIR routes: Fastify serves each of its
// routes and no other under /fhir, a Bundle entry reaches exactly the routes marked for Bundles, another
// method on a served path is 405 naming the served ones, and the CapabilityStatement lists what the
// table serves and nothing else. A route added in one place only fails here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertInRouteTable } from '../src/http/fhir-routes.js';
import { FHIR_ROUTES } from '../src/fhir/router.js';
import { FhirRouter, fhirUrl } from '../src/fhir/routing.js';
import type { FhirRoute, RouteMethod } from '../src/fhir/routing.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const METHODS: readonly RouteMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** A path of the route with its parameters filled in (a type that passes every type restriction). */
function samplePath(route: FhirRoute): string {
  const type = route.types?.[0] ?? 'Patient';
  return route.path
    .split('/')
    .map((segment) =>
      segment === ':type' ? type : segment === ':member' ? 'Observation' : segment.startsWith(':') ? 'x1' : segment,
    )
    .join('/');
}

describe('the FHIR route table', () => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp('sqlite');
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  it('names each route once, and Fastify serves every one of them', () => {
    const keys = FHIR_ROUTES.map((route) => `${route.method} ${route.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(FHIR_ROUTES.map((route) => route.name)).size).toBe(new Set(keys).size - 3); // export kick-offs: GET and POST share a name
    for (const route of FHIR_ROUTES) {
      expect(t.app.hasRoute({ method: route.method, url: fhirUrl(route) }), `${route.method} ${fhirUrl(route)}`).toBe(
        true,
      );
    }
  });

  it('refuses at start-up a /fhir route registered outside the table', () => {
    expect(() => assertInRouteTable({ method: 'GET', url: '/fhir/Patient/:id/$stats' } as never, FHIR_ROUTES)).toThrow(
      /outside the FHIR route table/,
    );
    expect(() => assertInRouteTable({ method: 'POST', url: '/fhir/:type/:id' } as never, FHIR_ROUTES)).toThrow(
      /POST \/fhir\/:type\/:id/,
    );
    expect(() => assertInRouteTable({ method: 'GET', url: '/fhir/:type/:id' } as never, FHIR_ROUTES)).not.toThrow();
    expect(() => assertInRouteTable({ method: 'GET', url: '/healthz' } as never, FHIR_ROUTES)).not.toThrow();
  });

  it('answers another method on every served path with 405 and the methods the table serves there', async () => {
    // What the table serves on a path, by its own matcher: `GET Patient/_search` is a read of id _search.
    const router = new FhirRouter(FHIR_ROUTES, (name) => ['Patient', 'Group', 'Observation'].includes(name));
    const paths = new Map(FHIR_ROUTES.map((route) => [samplePath(route), undefined]));
    for (const path of paths.keys()) {
      const served = new Set<string>(router.methodsAt(path.split('/').filter((s) => s !== '')));
      for (const method of METHODS.filter((m) => !served.has(m))) {
        const res = await fhir.request(method, `/fhir/${path}`);
        expect(res.statusCode, `${method} /fhir/${path}: ${res.body}`).toBe(405);
        const allow = String(res.headers.allow).split(', ');
        expect(new Set(allow.filter((m) => m !== 'HEAD')), `${method} /fhir/${path}`).toEqual(served);
      }
    }
  });

  it('sends a Bundle entry to the route the same request reaches over HTTP, and no other', async () => {
    // One batch entry per route and method: the entries a Bundle may hold succeed or fail as their
    // interaction does; the others are refused as no interaction a Bundle supports.
    const entries = FHIR_ROUTES.filter((route) => !route.path.includes('$')).map((route) => ({
      route,
      request: {
        method: route.method,
        url: `${samplePath(route) || '/'}${route.entry?.query === 'criteria' ? '?identifier=none' : ''}`,
      },
    }));
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'batch',
      entry: entries.map(({ route, request }) => ({
        request,
        ...(route.body === 'resource' ? { resource: { resourceType: 'Patient', id: 'x1' } } : {}),
      })),
    });
    expect(res.statusCode, res.body).toBe(200);
    const answers = (res.json() as { entry: { response: { status: string; outcome?: unknown } }[] }).entry;
    entries.forEach(({ route, request }, i) => {
      const refused = JSON.stringify(answers[i].response.outcome ?? '').includes('is not an interaction this server');
      expect(refused, `${request.method} ${request.url}: ${JSON.stringify(answers[i].response)}`).toBe(!route.entry);
    });
  });

  it('lists in the CapabilityStatement exactly the interactions and operations the table serves', async () => {
    const statement = (await t.app.inject({ method: 'GET', url: '/fhir/metadata' })).json() as {
      rest: {
        interaction: { code: string }[];
        operation: { name: string }[];
        resource: { type: string; interaction: { code: string }[]; operation: { name: string }[] }[];
      }[];
    };
    const [rest] = statement.rest;
    const onType = (route: FhirRoute) => route.path.startsWith(':type') || /^[A-Z]/.test(route.path);
    const typeCodes = new Set(FHIR_ROUTES.filter((r) => onType(r) && !r.operation).map((r) => r.interaction));
    typeCodes.delete('search-compartment'); // R4 lists compartments, not an interaction code, for these
    const patient = rest.resource.find((r) => r.type === 'Patient')!;
    expect(new Set(patient.interaction.map((i) => i.code))).toEqual(typeCodes);
    expect(new Set(rest.interaction.map((i) => i.code))).toEqual(
      new Set(['transaction', 'batch', 'history-system', 'search-system']),
    );
    const operations = (type: string) =>
      new Set(
        FHIR_ROUTES.filter(
          (r) =>
            r.operation &&
            (r.path.startsWith(':type') ? !r.types || r.types.includes(type) : r.path.split('/')[0] === type),
        ).map((r) => r.operation!.name),
      );
    for (const type of ['Patient', 'Group', 'Observation']) {
      const listed = rest.resource.find((r) => r.type === type)!.operation.map((o) => o.name);
      expect(new Set(listed), type).toEqual(operations(type));
      expect(listed.length, type).toBe(new Set(listed).size);
    }
    expect(rest.operation.map((o) => o.name)).toEqual(['versions', 'export']);
  });
});
