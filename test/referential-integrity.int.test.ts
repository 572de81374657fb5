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

  describe('tells no writer whether a resource of a type it may not read exists', () => {
    const as = async (scopes: string) => ({
      authorization: `Bearer ${await strict.token(scopes)}`,
      'content-type': 'application/fhir+json',
    });
    const newPatient = async () =>
      (
        await strict.app.inject({
          method: 'POST',
          url: '/fhir/Patient',
          headers: strictAuth,
          payload: '{"resourceType":"Patient"}',
        })
      ).json().id as string;

    it('Observation-only: existing and missing Patients, relative or absolute, get the same 403', async () => {
      const observationOnly = await as('system/Observation.cruds');
      const existing = await newPatient();
      const answers = [];
      for (const reference of [
        `Patient/${existing}`,
        `Patient/missing-${randomUUID()}`,
        `https://fhir.test:8080/fhir/Patient/${existing}`,
        `http://fhir.test:8080/fhir/Patient/missing-${randomUUID()}`,
      ]) {
        const res = await strict.app.inject({
          method: 'POST',
          url: '/fhir/Observation',
          headers: observationOnly,
          payload: JSON.stringify(observationOf(reference)),
        });
        answers.push({ status: res.statusCode, issue: res.json().issue });
      }
      expect(answers[0].status).toBe(403);
      expect(answers[0].issue[0].diagnostics).toContain('system/Patient.r or .s');
      for (const answer of answers) expect(answer).toEqual(answers[0]);
      // An update answers the same.
      const own = await strict.app.inject({
        method: 'POST',
        url: '/fhir/Observation',
        headers: observationOnly,
        payload: JSON.stringify({ resourceType: 'Observation', status: 'final', code: { text: 'x' } }),
      });
      expect(own.statusCode).toBe(201);
      const id = own.json().id as string;
      for (const patient of [existing, `missing-${randomUUID()}`]) {
        const res = await strict.app.inject({
          method: 'PUT',
          url: `/fhir/Observation/${id}`,
          headers: observationOnly,
          payload: JSON.stringify({ ...observationOf(`Patient/${patient}`), id }),
        });
        expect({ status: res.statusCode, issue: res.json().issue }).toEqual(answers[0]);
      }
    });

    it('a writer that may read Patients is told, as it could look it up anyway', async () => {
      const reader = await as('system/Observation.cruds system/Patient.r');
      const ok = await strict.app.inject({
        method: 'POST',
        url: '/fhir/Observation',
        headers: reader,
        payload: JSON.stringify(observationOf(`Patient/${await newPatient()}`)),
      });
      expect(ok.statusCode).toBe(201);
      const missing = `Patient/missing-${randomUUID()}`;
      const refused = await strict.app.inject({
        method: 'POST',
        url: '/fhir/Observation',
        headers: reader,
        payload: JSON.stringify(observationOf(missing)),
      });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().issue[0].diagnostics).toContain(missing);
    });

    it('a transaction may refer to a Patient it creates without reading Patients', async () => {
      const writer = await as('system/Observation.c system/Patient.c');
      const urn = `urn:uuid:${randomUUID()}`;
      const res = await strict.app.inject({
        method: 'POST',
        url: '/fhir',
        headers: writer,
        payload: JSON.stringify({
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [
            { resource: observationOf(urn), request: { method: 'POST', url: 'Observation' } },
            { fullUrl: urn, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
          ],
        }),
      });
      expect(res.statusCode, res.body).toBe(200);
    });

    it('a refused delete names only the referrers the deleter may read', async () => {
      const patient = await newPatient();
      const observation = (
        await strict.app.inject({
          method: 'POST',
          url: '/fhir/Observation',
          headers: strictAuth,
          payload: JSON.stringify(observationOf(`Patient/${patient}`)),
        })
      ).json().id as string;
      const patientOnly = await as('system/Patient.cruds');
      const refused = await strict.app.inject({
        method: 'DELETE',
        url: `/fhir/Patient/${patient}`,
        headers: patientOnly,
      });
      expect(refused.statusCode).toBe(409);
      const diagnostics = refused.json().issue[0].diagnostics as string;
      expect(diagnostics).toBe(
        `Referential integrity: Patient/${patient} cannot be deleted while other resources refer to it`,
      );
      expect(diagnostics).not.toContain(observation);
      // The same through a conditional delete and a transaction entry.
      const conditional = await strict.app.inject({
        method: 'DELETE',
        url: `/fhir/Patient?_id=${patient}`,
        headers: patientOnly,
      });
      expect(conditional.statusCode).toBe(409);
      expect(conditional.json().issue[0].diagnostics).toBe(diagnostics);
      const transaction = await strict.app.inject({
        method: 'POST',
        url: '/fhir',
        headers: patientOnly,
        payload: JSON.stringify({
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ request: { method: 'DELETE', url: `Patient/${patient}` } }],
        }),
      });
      expect(transaction.statusCode).toBe(409);
      expect(transaction.body).not.toContain(observation);
      // A deleter that may read Observations is shown which one.
      const both = await as('system/Patient.cruds system/Observation.r');
      const named = await strict.app.inject({ method: 'DELETE', url: `/fhir/Patient/${patient}`, headers: both });
      expect(named.statusCode).toBe(409);
      expect(named.json().issue[0].diagnostics).toContain(`Observation/${observation} refers to it`);
    });
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
