// What a real FHIR client library sees of compartments and $everything: fhir-kit-client's
// compartmentSearch, operation and nextPage against a listening server, on both databases.
import { createServer } from 'node:net';
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

/** A free port on 127.0.0.1, so that the public URL in the links is the address the client calls. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe.each(BACKENDS)('fhir-kit-client: compartments and $everything on %s', (backend) => {
  let t: TestApp;
  let client: Client;
  let patientId: string;
  const observationIds: string[] = [];

  beforeAll(async () => {
    const port = await freePort();
    t = await startTestApp(backend, { AMBIENT_PUBLIC_URL: `http://127.0.0.1:${port}` });
    await t.app.listen({ host: '127.0.0.1', port });
    client = new Client({ baseUrl: `http://127.0.0.1:${port}/fhir`, bearerToken: await t.token() });
    const patient = (await client.create({
      resourceType: 'Patient',
      body: { resourceType: 'Patient', name: [{ family: 'Kit' }] },
    })) as any;
    patientId = patient.id;
    for (let i = 0; i < 5; i++) {
      const observation = (await client.create({
        resourceType: 'Observation',
        body: {
          resourceType: 'Observation',
          status: 'final',
          code: { text: `kit ${i}` },
          subject: { reference: `Patient/${patientId}` },
        },
      })) as any;
      observationIds.push(observation.id);
    }
  });
  afterAll(async () => t?.close());

  const ids = (bundle: any, mode = 'match') =>
    (bundle.entry ?? []).filter((e: any) => e.search?.mode === mode).map((e: any) => e.resource.id);

  /** The matches of `first` and of every page after it, following `next` with nextPage. */
  const walk = async (first: any): Promise<string[]> => {
    let bundle = first;
    const seen = [...ids(bundle)];
    while (bundle.link.some((l: any) => l.relation === 'next')) {
      bundle = await client.nextPage({ bundle });
      seen.push(...ids(bundle));
    }
    return seen;
  };

  it('compartmentSearch and nextPage walk Patient/{id}/Observation', async () => {
    const first = await client.compartmentSearch({
      resourceType: 'Observation',
      compartment: { resourceType: 'Patient', id: patientId },
      searchParams: { _count: '2' },
    });
    expect(await walk(first)).toEqual(observationIds);
  });

  it('compartmentSearch with postSearch (POST Patient/{id}/Observation/_search) answers what GET does', async () => {
    const search = (postSearch: boolean) =>
      client.compartmentSearch({
        resourceType: 'Observation',
        compartment: { resourceType: 'Patient', id: patientId },
        searchParams: { 'code:text': 'kit 3' },
        options: { postSearch },
      }) as Promise<any>;
    const [posted, got] = [await search(true), await search(false)];
    expect(ids(posted)).toEqual([observationIds[3]]);
    expect(ids(posted)).toEqual(ids(got));
    const first = await client.compartmentSearch({
      resourceType: 'Observation',
      compartment: { resourceType: 'Patient', id: patientId },
      searchParams: { _count: '2' },
      options: { postSearch: true },
    });
    expect(await walk(first)).toEqual(observationIds);
  });

  it('operation $everything (GET) and nextPage walk the compartment', async () => {
    const first = (await client.operation({
      name: '$everything',
      resourceType: 'Patient',
      id: patientId,
      method: 'GET',
      input: { _count: '4' },
    })) as any;
    expect(first.type).toBe('searchset');
    expect(await walk(first)).toEqual([patientId, ...observationIds]);
  });

  it('sees $everything and the compartments in the CapabilityStatement', async () => {
    const cs = (await client.capabilityStatement()) as any;
    const patient = cs.rest[0].resource.find((r: any) => r.type === 'Patient');
    expect(patient.operation.map((o: any) => o.name)).toContain('everything');
    expect(cs.rest[0].compartment).toContain('http://hl7.org/fhir/CompartmentDefinition/patient');
  });
});
