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
import type { FhirClient } from './support/fhir-client.js';

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
  let strictFhir: FhirClient;
  let lenientFhir: FhirClient;
  beforeAll(async () => {
    strict = await startTestApp(backend, { AMBIENT_REFERENTIAL_INTEGRITY: '1' });
    lenient = await startTestApp(backend);
    strictFhir = await strict.client();
    lenientFhir = await lenient.client();
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
    const res = await strictFhir.post('/fhir/Observation', observationOf(missing));
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].diagnostics).toContain(missing);
    const history = await strictFhir.get('/fhir/Observation/_history?_count=1');
    expect(history.json().entry ?? []).toHaveLength(0);
  });

  it('accepts references to existing resources, and between entries of one transaction in any order', async () => {
    const patient = (await strictFhir.post('/fhir/Patient', '{"resourceType":"Patient"}')).json();
    const ok = await strictFhir.post('/fhir/Observation', observationOf(`Patient/${patient.id}`));
    expect(ok.statusCode).toBe(201);
    const urn = `urn:uuid:${randomUUID()}`;
    const tx = await strictFhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: observationOf(urn), request: { method: 'POST', url: 'Observation' } },
        { fullUrl: urn, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
      ],
    });
    expect(tx.statusCode, tx.body).toBe(200);
  });

  it('refuses to delete a resource others refer to, until they are gone', async () => {
    const patient = (await strictFhir.post('/fhir/Patient', '{"resourceType":"Patient"}')).json();
    const observation = (await strictFhir.post('/fhir/Observation', observationOf(`Patient/${patient.id}`))).json();
    const refused = await strictFhir.delete(`/fhir/Patient/${patient.id}`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().issue[0].diagnostics).toContain(`Observation/${observation.id}`);
    expect((await strictFhir.get(`/fhir/Patient/${patient.id}`)).statusCode).toBe(200);
    expect((await strictFhir.delete(`/fhir/Observation/${observation.id}`)).statusCode).toBe(204);
    expect((await strictFhir.delete(`/fhir/Patient/${patient.id}`)).statusCode).toBe(204);
  });

  describe('tells no writer whether a resource of a type it may not read exists', () => {
    const as = (scopes: string) => strict.client(scopes);
    const newPatient = async () =>
      (await strictFhir.post('/fhir/Patient', '{"resourceType":"Patient"}')).json().id as string;

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
        const res = await observationOnly.post('/fhir/Observation', observationOf(reference));
        answers.push({ status: res.statusCode, issue: res.json().issue });
      }
      expect(answers[0].status).toBe(403);
      expect(answers[0].issue[0].diagnostics).toContain('system/Patient.r or .s');
      for (const answer of answers) expect(answer).toEqual(answers[0]);
      // An update answers the same.
      const own = await observationOnly.post('/fhir/Observation', {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
      });
      expect(own.statusCode).toBe(201);
      const id = own.json().id as string;
      for (const patient of [existing, `missing-${randomUUID()}`]) {
        const res = await observationOnly.put(`/fhir/Observation/${id}`, {
          ...observationOf(`Patient/${patient}`),
          id,
        });
        expect({ status: res.statusCode, issue: res.json().issue }).toEqual(answers[0]);
      }
    });

    it('a writer that may read Patients is told, as it could look it up anyway', async () => {
      const reader = await as('system/Observation.cruds system/Patient.r');
      const ok = await reader.post('/fhir/Observation', observationOf(`Patient/${await newPatient()}`));
      expect(ok.statusCode).toBe(201);
      const missing = `Patient/missing-${randomUUID()}`;
      const refused = await reader.post('/fhir/Observation', observationOf(missing));
      expect(refused.statusCode).toBe(400);
      expect(refused.json().issue[0].diagnostics).toContain(missing);
    });

    it('a transaction may refer to a Patient it creates without reading Patients', async () => {
      const writer = await as('system/Observation.c system/Patient.c');
      const urn = `urn:uuid:${randomUUID()}`;
      const res = await writer.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: observationOf(urn), request: { method: 'POST', url: 'Observation' } },
          { fullUrl: urn, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        ],
      });
      expect(res.statusCode, res.body).toBe(200);
    });

    it('a refused delete names only the referrers the deleter may read', async () => {
      const patient = await newPatient();
      const observation = (await strictFhir.post('/fhir/Observation', observationOf(`Patient/${patient}`))).json()
        .id as string;
      const patientOnly = await as('system/Patient.cruds');
      const refused = await patientOnly.delete(`/fhir/Patient/${patient}`);
      expect(refused.statusCode).toBe(409);
      const diagnostics = refused.json().issue[0].diagnostics as string;
      expect(diagnostics).toBe(
        `Referential integrity: Patient/${patient} cannot be deleted while other resources refer to it`,
      );
      expect(diagnostics).not.toContain(observation);
      // The same through a conditional delete and a transaction entry.
      const conditional = await patientOnly.delete(`/fhir/Patient?_id=${patient}`);
      expect(conditional.statusCode).toBe(409);
      expect(conditional.json().issue[0].diagnostics).toBe(diagnostics);
      const transaction = await patientOnly.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ request: { method: 'DELETE', url: `Patient/${patient}` } }],
      });
      expect(transaction.statusCode).toBe(409);
      expect(transaction.body).not.toContain(observation);
      // A deleter that may read Observations is shown which one.
      const both = await as('system/Patient.cruds system/Observation.r');
      const named = await both.delete(`/fhir/Patient/${patient}`);
      expect(named.statusCode).toBe(409);
      expect(named.json().issue[0].diagnostics).toContain(`Observation/${observation} refers to it`);
    });
  });

  it('is off by default: dangling references and deletes are accepted', async () => {
    const res = await lenientFhir.post('/fhir/Observation', observationOf('Patient/elsewhere'));
    expect(res.statusCode).toBe(201);
  });
});
