// Conditional create, update and delete, and conditional references in transactions, on both databases.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

describe.each(BACKENDS)('conditional interactions on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const system = 'http://example.org/mrn';
  const patientWith = (value: string, extra: Record<string, unknown> = {}) => ({
    resourceType: 'Patient',
    identifier: [{ system, value }],
    ...extra,
  });
  const create = (body: unknown, ifNoneExist?: string) =>
    fhir.post('/fhir/Patient', body, ifNoneExist ? { 'if-none-exist': ifNoneExist } : {});
  const search = async (query: string) => (await fhir.get(`/fhir/Patient?${query}`)).json().entry ?? [];

  it('creates once with If-None-Exist, then answers the existing resource (200)', async () => {
    const value = randomUUID();
    const first = await create(patientWith(value), `identifier=${system}|${value}`);
    expect(first.statusCode).toBe(201);
    const second = await create(patientWith(value, { gender: 'male' }), `identifier=${system}|${value}`);
    expect(second.statusCode).toBe(200);
    expect(second.json().id).toBe(first.json().id);
    expect(second.json().gender).toBeUndefined();
    expect(await search(`identifier=${system}|${value}`)).toHaveLength(1);
  });

  it('answers 412 when If-None-Exist matches several, and 400 for unknown criteria', async () => {
    const value = randomUUID();
    await create(patientWith(value));
    await create(patientWith(value));
    expect((await create(patientWith(value), `identifier=${system}|${value}`)).statusCode).toBe(412);
    expect((await create(patientWith(value), 'no-such-parameter=1')).statusCode).toBe(400);
  });

  it('never creates two resources from concurrent conditional creates with the same criteria', async () => {
    const value = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 12 }, () => create(patientWith(value), `identifier=${system}|${value}`)),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(11);
    expect(new Set(results.map((r) => r.json().id)).size).toBe(1);
    expect(await search(`identifier=${system}|${value}`)).toHaveLength(1);
  });

  it('updates conditionally: none → 201, one → 200 on that id, several → 412', async () => {
    const value = randomUUID();
    const put = (body: unknown) =>
      fhir.put(`/fhir/Patient?identifier=${encodeURIComponent(`${system}|${value}`)}`, body);
    const created = await put(patientWith(value, { gender: 'female' }));
    expect(created.statusCode).toBe(201);
    const updated = await put(patientWith(value, { gender: 'male' }));
    expect(updated.statusCode).toBe(200);
    expect(updated.json().id).toBe(created.json().id);
    expect(updated.json().meta.versionId).toBe('2');
    await create(patientWith(value));
    expect((await put(patientWith(value))).statusCode).toBe(412);
  });

  it('deletes conditionally: one match → deleted; none → 204; several → 412', async () => {
    const value = randomUUID();
    const id = (await create(patientWith(value))).json().id;
    const del = (v: string) => fhir.delete(`/fhir/Patient?identifier=${encodeURIComponent(`${system}|${v}`)}`);
    expect((await del(value)).statusCode).toBe(204);
    expect((await fhir.get(`/fhir/Patient/${id}`)).statusCode).toBe(410);
    expect((await del(randomUUID())).statusCode).toBe(204);
    const twice = randomUUID();
    await create(patientWith(twice));
    await create(patientWith(twice));
    expect((await del(twice)).statusCode).toBe(412);
  });

  it('patches conditionally: one match → patched; none → 404; several → 412; If-Match still holds', async () => {
    const value = randomUUID();
    const id = (await create(patientWith(value))).json().id;
    const patch = (v: string, operations: unknown[], headers: Record<string, string> = {}) =>
      fhir.patch(`/fhir/Patient?identifier=${encodeURIComponent(`${system}|${v}`)}`, operations, {
        'content-type': 'application/json-patch+json',
        ...headers,
      });
    const patched = await patch(value, [{ op: 'add', path: '/gender', value: 'female' }]);
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ id, gender: 'female', meta: { versionId: '2' } });
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json().gender).toBe('female');
    const stale = await patch(value, [{ op: 'replace', path: '/gender', value: 'male' }], { 'if-match': 'W/"1"' });
    expect(stale.statusCode).toBe(412);
    const none = await patch(randomUUID(), [{ op: 'add', path: '/gender', value: 'male' }]);
    expect(none.statusCode).toBe(404);
    expect(none.json().issue[0].diagnostics).toMatch(/No Patient matches/);
    const twice = randomUUID();
    await create(patientWith(twice));
    await create(patientWith(twice));
    expect((await patch(twice, [{ op: 'add', path: '/gender', value: 'male' }])).statusCode).toBe(412);
    expect(await search(`identifier=${system}|${twice}&gender=male`)).toHaveLength(0);
  });

  it('patches conditionally in a transaction, and needs search as well as update on the type', async () => {
    const value = randomUUID();
    const id = (await create(patientWith(value))).json().id;
    const operations = [{ op: 'add', path: '/birthDate', value: '1970-01-01' }];
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: {
            resourceType: 'Binary',
            contentType: 'application/json-patch+json',
            data: Buffer.from(JSON.stringify(operations)).toString('base64'),
          },
          request: { method: 'PATCH', url: `Patient?identifier=${encodeURIComponent(`${system}|${value}`)}` },
        },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().entry[0].response).toMatchObject({ status: '200 OK', etag: 'W/"2"' });
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json().birthDate).toBe('1970-01-01');

    // Refused before the body is read: the criteria are a search.
    const updateOnly = await t.client('system/Patient.u');
    const refused = await updateOnly.patch(
      `/fhir/Patient?identifier=${encodeURIComponent(`${system}|${value}`)}`,
      [{ op: 'add', path: '/gender', value: 'male' }],
      { 'content-type': 'application/json-patch+json' },
    );
    expect(refused.statusCode).toBe(403);
    expect((await fhir.get(`/fhir/Patient/${id}`)).json().gender).toBe(undefined);
  });

  it('resolves conditional references and ifNoneExist inside a transaction', async () => {
    const npi = randomUUID();
    const practitioner = await fhir.post('/fhir/Practitioner', {
      resourceType: 'Practitioner',
      identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: npi }],
    });
    const patientValue = randomUUID();
    const existing = (await create(patientWith(patientValue))).json();
    const patientUrl = `urn:uuid:${randomUUID()}`;
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: patientUrl,
          resource: patientWith(patientValue),
          request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=${system}|${patientValue}` },
        },
        {
          resource: {
            resourceType: 'Encounter',
            status: 'finished',
            class: { code: 'AMB' },
            subject: { reference: patientUrl },
            participant: [
              { individual: { reference: `Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|${npi}` } },
            ],
          },
          request: { method: 'POST', url: 'Encounter' },
        },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const [patientEntry, encounterEntry] = res.json().entry;
    expect(patientEntry.response.status).toBe('200 OK');
    const encounter = (await fhir.get(`/fhir/${encounterEntry.response.location}`)).json();
    expect(encounter.subject.reference).toBe(`Patient/${existing.id}`);
    expect(encounter.participant[0].individual.reference).toBe(`Practitioner/${practitioner.json().id}`);
  });

  it('fails a transaction whose conditional reference matches nothing', async () => {
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'x' },
            subject: { reference: `Patient?identifier=${system}|${randomUUID()}` },
          },
          request: { method: 'POST', url: 'Observation' },
        },
      ],
    });
    expect(res.statusCode).toBe(412);
    expect(res.json().issue[0].diagnostics).toContain('matches no resource');
  });
});
