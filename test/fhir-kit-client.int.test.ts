// What a real FHIR client library sees: fhir-kit-client against a listening server.
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

describe('fhir-kit-client', () => {
  let t: TestApp;
  let client: Client;

  beforeAll(async () => {
    t = await startTestApp('sqlite');
    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
    client = new Client({ baseUrl: `${address}/fhir`, bearerToken: await t.token() });
  });
  afterAll(async () => t?.close());

  it('reads the CapabilityStatement', async () => {
    const cs = (await client.capabilityStatement()) as any;
    expect(cs.resourceType).toBe('CapabilityStatement');
    expect(cs.fhirVersion).toBe('4.0.1');
  });

  it('creates, reads, updates, vreads, lists history and deletes', async () => {
    const created = (await client.create({
      resourceType: 'Patient',
      body: { resourceType: 'Patient', name: [{ family: 'Kit', given: ['Fhir'] }], gender: 'other' },
    })) as any;
    expect(created.id).toBeTypeOf('string');
    expect(created.meta.versionId).toBe('1');

    const read = (await client.read({ resourceType: 'Patient', id: created.id })) as any;
    expect(read).toEqual(created);

    const updated = (await client.update({
      resourceType: 'Patient',
      id: created.id,
      body: { ...read, gender: 'female' },
    })) as any;
    expect(updated.meta.versionId).toBe('2');
    expect(updated.gender).toBe('female');

    const v1 = (await client.vread({ resourceType: 'Patient', id: created.id, version: '1' })) as any;
    expect(v1.gender).toBe('other');

    const history = (await client.history({ resourceType: 'Patient', id: created.id })) as any;
    expect(history.type).toBe('history');
    expect(history.entry.map((e: any) => e.resource.meta.versionId)).toEqual(['2', '1']);

    await client.delete({ resourceType: 'Patient', id: created.id });
    await expect(client.read({ resourceType: 'Patient', id: created.id })).rejects.toMatchObject({
      response: { status: 410 },
    });
  });

  it('sees validation failures as errors carrying the OperationOutcome', async () => {
    const failure = client.create({ resourceType: 'Appointment', body: { resourceType: 'Appointment' } });
    await expect(failure).rejects.toMatchObject({
      response: { status: 401, data: { resourceType: 'OperationOutcome' } },
    });
  });
});
