// AMBIENT_REFERENTIAL_INTEGRITY=1: local references must point at resources that exist, and a resource
// others refer to cannot be deleted. Off by default (tested too), on both databases.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { ReferenceParser } from '../src/fhir/references.js';
import { localReferences } from '../src/storage/link-writer.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

describe('localReferences', () => {
  const registry = loadR4Definitions();
  it('finds relative and own-base references (http or https), also in contained resources, and nothing else', () => {
    const refs = localReferences(
      {
        resourceType: 'Observation',
        subject: { reference: 'Patient/p1' },
        performer: [
          { reference: 'https://fhir.example/fhir/Practitioner/d1/_history/2' },
          { reference: 'https://other.example/fhir/Practitioner/x' },
          // The http spelling of an https base names this server too (a proxy may end TLS).
          { reference: 'http://fhir.example/fhir/Organization/o1' },
        ],
        hasMember: [{ reference: '#c1' }, { reference: 'urn:uuid:0f1e' }, { reference: 'Patient?identifier=a|b' }],
        contained: [
          {
            resourceType: 'Observation',
            id: 'c1',
            subject: { reference: 'Patient/p1' },
            device: { reference: 'Device/dev' },
          },
        ],
      },
      new ReferenceParser('https://fhir.example/fhir', (t) => registry.isResourceType(t)),
    );
    expect(refs).toEqual([
      { type: 'Patient', id: 'p1' },
      { type: 'Practitioner', id: 'd1' },
      { type: 'Organization', id: 'o1' },
      { type: 'Device', id: 'dev' },
    ]);
  });
});

describe.each(BACKENDS)('referential integrity on %s', (backend) => {
  let strict: TestApp;
  let lenient: TestApp;
  let strictAuth: Record<string, string>;
  let lenientAuth: Record<string, string>;
  beforeAll(async () => {
    strict = await startTestApp(backend, { AMBIENT_REFERENTIAL_INTEGRITY: '1' });
    lenient = await startTestApp(backend);
    strictAuth = { authorization: `Bearer ${await strict.token()}`, 'content-type': 'application/fhir+json' };
    lenientAuth = { authorization: `Bearer ${await lenient.token()}`, 'content-type': 'application/fhir+json' };
  });
  afterAll(async () => {
    await strict?.close();
    await lenient?.close();
  });

  const observationOf = (patient: string) => ({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'x' },
    subject: { reference: patient },
  });

  it('refuses a write pointing at nothing, naming the reference, and stores nothing', async () => {
    const missing = `Patient/missing-${randomUUID()}`;
    const res = await strict.app.inject({
      method: 'POST',
      url: '/fhir/Observation',
      headers: strictAuth,
      payload: JSON.stringify(observationOf(missing)),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].diagnostics).toContain(missing);
    const history = await strict.app.inject({
      method: 'GET',
      url: '/fhir/Observation/_history?_count=1',
      headers: strictAuth,
    });
    expect(history.json().entry ?? []).toHaveLength(0);
  });

  it('accepts references to existing resources, and between entries of one transaction in any order', async () => {
    const patient = (
      await strict.app.inject({
        method: 'POST',
        url: '/fhir/Patient',
        headers: strictAuth,
        payload: '{"resourceType":"Patient"}',
      })
    ).json();
    const ok = await strict.app.inject({
      method: 'POST',
      url: '/fhir/Observation',
      headers: strictAuth,
      payload: JSON.stringify(observationOf(`Patient/${patient.id}`)),
    });
    expect(ok.statusCode).toBe(201);
    const urn = `urn:uuid:${randomUUID()}`;
    const tx = await strict.app.inject({
      method: 'POST',
      url: '/fhir',
      headers: strictAuth,
      payload: JSON.stringify({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: observationOf(urn), request: { method: 'POST', url: 'Observation' } },
          { fullUrl: urn, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        ],
      }),
    });
    expect(tx.statusCode, tx.body).toBe(200);
  });

  it('refuses to delete a resource others refer to, until they are gone', async () => {
    const patient = (
      await strict.app.inject({
        method: 'POST',
        url: '/fhir/Patient',
        headers: strictAuth,
        payload: '{"resourceType":"Patient"}',
      })
    ).json();
    const observation = (
      await strict.app.inject({
        method: 'POST',
        url: '/fhir/Observation',
        headers: strictAuth,
        payload: JSON.stringify(observationOf(`Patient/${patient.id}`)),
      })
    ).json();
    const refused = await strict.app.inject({
      method: 'DELETE',
      url: `/fhir/Patient/${patient.id}`,
      headers: strictAuth,
    });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().issue[0].diagnostics).toContain(`Observation/${observation.id}`);
    expect(
      (await strict.app.inject({ method: 'GET', url: `/fhir/Patient/${patient.id}`, headers: strictAuth })).statusCode,
    ).toBe(200);
    expect(
      (await strict.app.inject({ method: 'DELETE', url: `/fhir/Observation/${observation.id}`, headers: strictAuth }))
        .statusCode,
    ).toBe(204);
    expect(
      (await strict.app.inject({ method: 'DELETE', url: `/fhir/Patient/${patient.id}`, headers: strictAuth }))
        .statusCode,
    ).toBe(204);
  });

  it('is off by default: dangling references and deletes are accepted', async () => {
    const res = await lenient.app.inject({
      method: 'POST',
      url: '/fhir/Observation',
      headers: lenientAuth,
      payload: JSON.stringify(observationOf('Patient/elsewhere')),
    });
    expect(res.statusCode).toBe(201);
  });
});
