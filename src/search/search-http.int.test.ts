// Search end to end through HTTP with real tokens (assembleApp + app.inject), on both databases: the
// the specification examples, POST _search, system search, strict and lenient handling, paging links, and scopes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../test/support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from '../../test/support/test-app.js';
import type { TestApp } from '../../test/support/test-app.js';
import type { FhirClient } from '../../test/support/fhir-client.js';

type Bundle = {
  resourceType: string;
  type: string;
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { fullUrl: string; resource: { resourceType: string; id: string }; search: { mode: string } }[];
};

describe.each(BACKENDS)('search over HTTP on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const ids: Record<string, string> = {};

  const create = async (resource: { resourceType: string; [k: string]: unknown }) => {
    const res = await fhir.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  };
  const matches = (bundle: Bundle) =>
    (bundle.entry ?? [])
      .filter((e) => e.search.mode === 'match')
      .map((e) => `${e.resource.resourceType}/${e.resource.id}`);

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    ids.patient = await create({
      resourceType: 'Patient',
      name: [{ family: 'Ångström', given: ['Anders'] }],
      gender: 'male',
      birthDate: '1970-01-01',
      address: [{ postalCode: '90210', city: 'Beverly Hills' }],
    });
    ids.other = await create({
      resourceType: 'Patient',
      name: [{ family: 'Other' }],
      address: [{ postalCode: '10001' }],
    });
    ids.practitioner = await create({ resourceType: 'Practitioner', name: [{ family: 'Welby' }] });
    ids.role = await create({
      resourceType: 'PractitionerRole',
      practitioner: { reference: `Practitioner/${ids.practitioner}` },
    });
    ids.encounter = await create({
      resourceType: 'Encounter',
      status: 'finished',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
      subject: { reference: `Patient/${ids.patient}` },
      participant: [
        { individual: { reference: `Practitioner/${ids.practitioner}` } },
        { individual: { reference: `PractitionerRole/${ids.role}` } },
      ],
      period: { start: '2024-01-01T00:00:00Z', end: '2024-01-04T12:00:00Z' },
    });
    ids.shortEncounter = await create({
      resourceType: 'Encounter',
      status: 'finished',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      subject: { reference: `Patient/${ids.other}` },
      period: { start: '2024-02-01T09:00:00Z', end: '2024-02-01T10:00:00Z' },
    });
    ids.appointment = await create({
      resourceType: 'Appointment',
      status: 'booked',
      start: '2024-03-01T09:00:00Z',
      end: '2024-03-01T09:30:00Z',
      participant: [{ actor: { reference: `Patient/${ids.patient}` }, status: 'accepted' }],
    });
    ids.request = await create({
      resourceType: 'MedicationRequest',
      status: 'active',
      intent: 'order',
      medicationCodeableConcept: { text: 'aspirin' },
      subject: { reference: `Patient/${ids.patient}` },
    });
  }, 60_000);

  afterAll(async () => t?.close());

  it('answers the the specification examples', async () => {
    const practitioner = `Practitioner/${ids.practitioner}`;
    for (const url of [
      `/fhir/Encounter?participant=${ids.practitioner}`,
      `/fhir/Encounter?participant=${practitioner}`,
      `/fhir/Encounter?practitioner=${ids.practitioner}`,
    ]) {
      const res = await fhir.get(url);
      expect(res.statusCode).toBe(200);
      expect(matches(res.json()), url).toEqual([`Encounter/${ids.encounter}`]);
    }
    expect(matches((await fhir.get(`/fhir/Encounter?practitioner=PractitionerRole/${ids.role}`)).json())).toEqual([]);
    expect(matches((await fhir.get(`/fhir/Encounter?participant=PractitionerRole/${ids.role}`)).json())).toEqual([
      `Encounter/${ids.encounter}`,
    ]);
    expect(matches((await fhir.get('/fhir/Patient?address-postalcode=90210')).json())).toEqual([
      `Patient/${ids.patient}`,
    ]);
    expect(matches((await fhir.get('/fhir/Encounter?_length=ge3')).json())).toEqual([`Encounter/${ids.encounter}`]);
    expect(matches((await fhir.get('/fhir/Patient?name=angstrom')).json())).toEqual([`Patient/${ids.patient}`]);
    const revinclude = (
      await fhir.get(`/fhir/Patient?_id=${ids.patient}&_revinclude=Appointment:patient`)
    ).json() as Bundle;
    expect(revinclude.entry!.map((e) => `${e.search.mode} ${e.resource.resourceType}`)).toEqual([
      'match Patient',
      'include Appointment',
    ]);
    const include = (await fhir.get('/fhir/MedicationRequest?_include=MedicationRequest:patient')).json() as Bundle;
    expect(include.entry!.map((e) => `${e.search.mode} ${e.resource.resourceType}/${e.resource.id}`)).toEqual([
      `match MedicationRequest/${ids.request}`,
      `include Patient/${ids.patient}`,
    ]);
    expect(include.entry![0].fullUrl).toBe(`${TEST_PUBLIC_URL}/fhir/MedicationRequest/${ids.request}`);
  });

  it('returns an empty searchset Bundle when nothing matches', async () => {
    const res = await fhir.get('/fhir/Patient?_id=does-not-exist');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/fhir+json');
    const bundle = res.json() as Bundle;
    expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'searchset', total: 0 });
    expect(bundle.entry).toBeUndefined();
  });

  it('takes the parameters of POST _search from a form body', async () => {
    const res = await fhir.postForm('/fhir/Patient/_search?gender=male', 'address-postalcode=90210');
    expect(res.statusCode, res.body).toBe(200);
    expect(matches(res.json())).toEqual([`Patient/${ids.patient}`]);
  });

  it('searches several types at once', async () => {
    const res = await fhir.get('/fhir?_type=Patient,Practitioner&name=welby,other');
    expect(matches(res.json()).sort()).toEqual([`Patient/${ids.other}`, `Practitioner/${ids.practitioner}`]);
  });

  it('reports unknown parameters, or refuses them with Prefer: handling=strict', async () => {
    const lenient = (await fhir.get('/fhir/Patient?gender=male&fuzzy=yes')).json() as Bundle;
    expect(lenient.entry!.map((e) => e.search.mode)).toEqual(['match', 'outcome']);
    expect(lenient.link!.find((l) => l.relation === 'self')!.url).toBe(`${TEST_PUBLIC_URL}/fhir/Patient?gender=male`);
    const strict = await fhir.get('/fhir/Patient?gender=male&fuzzy=yes', { prefer: 'handling=strict' });
    expect(strict.statusCode).toBe(400);
    expect(strict.json()).toMatchObject({ resourceType: 'OperationOutcome' });
    const invalid = await fhir.get('/fhir/Patient?birthdate=yesterday');
    expect(invalid.statusCode).toBe(400);
    expect(
      (invalid.json() as { issue: { details: { coding: { code: string }[] } }[] }).issue[0].details.coding[0].code,
    ).toBe('invalid-search');
  });

  it('refuses an unknown _sort parameter with 400 (lenient handling too), and counts for _count=0', async () => {
    const sorted = await fhir.get('/fhir/Patient?_sort=no-such-param');
    expect(sorted.statusCode).toBe(400);
    expect((sorted.json() as { issue: { diagnostics: string }[] }).issue[0].diagnostics).toContain('no-such-param');
    const counted = (await fhir.get('/fhir/Patient?gender=male&_count=0')).json() as Bundle;
    expect(counted.entry ?? []).toHaveLength(0);
    const all = (await fhir.get('/fhir/Patient?gender=male&_total=accurate')).json() as Bundle;
    expect(all.total).toBeGreaterThan(0);
    expect(counted.total).toBe(all.total);
  });

  it('pages with links the client follows as they are', async () => {
    const first = (await fhir.get('/fhir/Patient?_count=1&_sort=family')).json() as Bundle;
    expect(matches(first)).toEqual([`Patient/${ids.patient}`]);
    const next = first.link!.find((l) => l.relation === 'next')!.url;
    expect(next.startsWith(`${TEST_PUBLIC_URL}/fhir/Patient?`)).toBe(true);
    const second = (await fhir.get(next.slice(TEST_PUBLIC_URL.length))).json() as Bundle;
    expect(matches(second)).toEqual([`Patient/${ids.other}`]);
    expect(second.link!.find((l) => l.relation === 'next')).toBeUndefined();
    const tampered = await fhir.get(`${next.slice(TEST_PUBLIC_URL.length)}x`);
    expect(tampered.statusCode).toBe(400);
  });

  it('needs a token, and scopes that cover every type the search passes through', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/fhir/Patient' })).statusCode).toBe(401);
    const limited = await t.client('system/Patient.rs');
    expect((await limited.get('/fhir/Patient?name=other')).statusCode).toBe(200);
    expect((await limited.get('/fhir/Encounter')).statusCode).toBe(403);
    expect((await limited.get('/fhir/Patient?_has:Encounter:patient:class=IMP')).statusCode).toBe(403);
    expect((await limited.get('/fhir/Patient?_revinclude=Appointment:patient')).statusCode).toBe(403);
    expect((await limited.get('/fhir/Patient?general-practitioner:Practitioner.name=x')).statusCode).toBe(403);
    const readOnly = await t.client('system/Patient.r');
    expect((await readOnly.get('/fhir/Patient')).statusCode).toBe(403);
  });

  it('lists the search parameters in the CapabilityStatement', async () => {
    const statement = (await t.app.inject({ method: 'GET', url: '/fhir/metadata' })).json() as {
      rest: { resource: { type: string; searchParam: { name: string }[] }[] }[];
    };
    const encounter = statement.rest[0].resource.find((r) => r.type === 'Encounter')!;
    expect(encounter.searchParam.map((p) => p.name)).toEqual(
      expect.arrayContaining(['_length', 'patient', 'practitioner']),
    );
  });
});
