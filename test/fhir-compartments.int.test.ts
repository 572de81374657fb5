// Compartment search (https://hl7.org/fhir/R4/search.html#2.21.1.2) and Patient $everything
// (https://hl7.org/fhir/R4/patient-operation-everything.html) over HTTP, on SQLite and PostgreSQL: the
// R4 CompartmentDefinitions decide membership, every search feature works inside a compartment, scopes
// narrow `*` and `$everything`, and `$everything` pages visit every resource once, even across writes
// and from another server process.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient, linkOf, pathOf } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

interface Entry {
  fullUrl?: string;
  resource: { resourceType: string; id: string; [key: string]: unknown };
  search?: { mode: string };
}
interface Bundle {
  resourceType: string;
  type: string;
  total?: number;
  link: { relation: string; url: string }[];
  entry?: Entry[];
}

const BASE = `${TEST_PUBLIC_URL}/fhir`;
const keyOf = (e: Entry) => `${e.resource.resourceType}/${e.resource.id}`;
const matches = (b: Bundle) => (b.entry ?? []).filter((e) => e.search?.mode === 'match').map(keyOf);
const included = (b: Bundle) => (b.entry ?? []).filter((e) => e.search?.mode === 'include').map(keyOf);
const nextOf = (b: Bundle) => linkOf(b, 'next');

describe.each(BACKENDS)('compartments and $everything on %s', (backend) => {
  let t: TestApp;
  let admin: FhirClient;
  const tag = randomUUID().slice(0, 8);
  const ids: Record<string, string> = {};
  const create = async (resource: { resourceType: string; [k: string]: unknown }): Promise<string> => {
    const res = await admin.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    return `${resource.resourceType as string}/${res.json().id as string}`;
  };
  const get = async (url: string, client = admin, headers: Record<string, string> = {}) => {
    const res = await client.get(pathOf(url), headers);
    return { status: res.statusCode, body: res.json() as Bundle & { issue?: { code: string; diagnostics: string }[] } };
  };
  /** Follows next links from `url`, returning every page. */
  const walk = async (url: string, client = admin): Promise<Bundle[]> => {
    const pages: Bundle[] = [];
    let next: string | undefined = url;
    while (next) {
      const { status, body } = await get(next, client);
      expect(status, JSON.stringify(body)).toBe(200);
      pages.push(body);
      next = nextOf(body);
      expect(pages.length).toBeLessThan(50);
    }
    return pages;
  };

  beforeAll(async () => {
    t = await startTestApp(backend);
    admin = await t.client('system/*.cruds');
    ids.doctor = await create({ resourceType: 'Practitioner', name: [{ family: `Doc${tag}` }] });
    ids.org = await create({ resourceType: 'Organization', name: `Org ${tag}` });
    ids.med = await create({ resourceType: 'Medication', code: { text: `med ${tag}` } });
    ids.patient = await create({
      resourceType: 'Patient',
      name: [{ family: `Pat${tag}` }],
      managingOrganization: { reference: ids.org },
    });
    ids.other = await create({ resourceType: 'Patient', name: [{ family: `Other${tag}` }] });
    ids.encounter = await create({
      resourceType: 'Encounter',
      status: 'finished',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      subject: { reference: ids.patient },
      participant: [{ individual: { reference: ids.doctor } }],
      period: { start: '2021-03-01T10:00:00Z', end: '2021-03-01T11:00:00Z' },
      serviceProvider: { reference: ids.org },
    });
    const observation = (year: number, code: string, subject = ids.patient) => ({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code }] },
      subject: { reference: subject },
      encounter: { reference: ids.encounter },
      performer: [{ reference: ids.doctor }],
      effectiveDateTime: `${year}-06-01`,
    });
    ids.obs2020 = await create(observation(2020, '8302-2'));
    ids.obs2021 = await create(observation(2021, '8302-2'));
    ids.obs2022 = await create(observation(2022, '29463-7'));
    ids.otherObs = await create(observation(2021, '8302-2', ids.other));
    ids.condition = await create({
      resourceType: 'Condition',
      subject: { reference: ids.patient },
      code: { text: `condition ${tag}` },
      asserter: { reference: ids.doctor },
    });
    ids.request = await create({
      resourceType: 'MedicationRequest',
      status: 'active',
      intent: 'order',
      subject: { reference: ids.patient },
      medicationReference: { reference: ids.med },
      authoredOn: '2021-05-01',
    });
  });
  afterAll(async () => t?.close());

  const patientId = () => ids.patient.split('/')[1];
  const compartmentMembers = () => [
    ids.patient,
    ids.encounter,
    ids.obs2020,
    ids.obs2021,
    ids.obs2022,
    ids.condition,
    ids.request,
  ];

  describe('compartment search', () => {
    it('Patient/{id}/Observation: exactly the patient’s observations, with links that keep the path', async () => {
      const { status, body } = await get(`/fhir/${ids.patient}/Observation`);
      expect(status).toBe(200);
      expect(body.type).toBe('searchset');
      expect(matches(body).sort()).toEqual([ids.obs2020, ids.obs2021, ids.obs2022].sort());
      expect(body.total).toBe(3);
      expect(body.entry![0].fullUrl).toBe(`${BASE}/${keyOf(body.entry![0])}`);
      expect(body.link.find((l) => l.relation === 'self')!.url).toBe(`${BASE}/${ids.patient}/Observation`);
    });

    it('takes every search feature: criteria, sort, paging, _include, _total, chains', async () => {
      const code = await get(`/fhir/${ids.patient}/Observation?code=http://loinc.org|8302-2&_total=accurate`);
      expect(matches(code.body).sort()).toEqual([ids.obs2020, ids.obs2021].sort());
      expect(code.body.total).toBe(2);

      const pages = await walk(`/fhir/${ids.patient}/Observation?_sort=-date&_count=1`);
      expect(pages.map(matches).flat()).toEqual([ids.obs2022, ids.obs2021, ids.obs2020]);
      for (const link of pages.slice(0, -1).map(nextOf))
        expect(link).toMatch(new RegExp(`^${BASE}/${ids.patient}/Observation\\?_sort=-date&_count=1&_cursor=`));

      const include = await get(`/fhir/${ids.patient}/Observation?date=2021&_include=Observation:performer`);
      expect(matches(include.body)).toEqual([ids.obs2021]);
      expect(included(include.body)).toEqual([ids.doctor]);

      const chain = await get(`/fhir/${ids.patient}/Observation?performer:Practitioner.name=Doc${tag}&date=le2021`);
      expect(matches(chain.body).sort()).toEqual([ids.obs2020, ids.obs2021].sort());

      const none = await get(`/fhir/${ids.other}/Observation?code=http://loinc.org|29463-7`);
      expect(matches(none.body)).toEqual([]);
    });

    it('a cursor of one compartment is refused in another (400)', async () => {
      const first = await get(`/fhir/${ids.patient}/Observation?_count=1`);
      const next = nextOf(first.body)!;
      const cursor = new URL(next).searchParams.get('_cursor')!;
      const replay = await get(`/fhir/${ids.other}/Observation?_count=1&_cursor=${encodeURIComponent(cursor)}`);
      expect(replay.status).toBe(400);
      expect(replay.body.issue![0].diagnostics).toContain('_cursor');
    });

    it('Patient/{id}/*: every member type, the patient itself included, nothing of another patient', async () => {
      const pages = await walk(`/fhir/${ids.patient}/*?_count=4`);
      const all = pages.map(matches).flat();
      expect(all.sort()).toEqual(compartmentMembers().sort());
      expect(nextOf(pages[0])).toContain(`${BASE}/${ids.patient}/*?_count=4&_cursor=`);
      const typed = await get(`/fhir/${ids.patient}/*?_type=Condition,Encounter`);
      expect(matches(typed.body).sort()).toEqual([ids.condition, ids.encounter].sort());
    });

    it('POST [compartment]/[id]/[type]/_search and POST [compartment]/[id]/_search (http.html#search)', async () => {
      const post = async (url: string, form: string, client = admin) => {
        const res = await client.postForm(url, form);
        return {
          status: res.statusCode,
          body: res.json() as Bundle & { issue?: { code: string; diagnostics: string }[] },
        };
      };
      // The form's parameters join the URL's; the links are GET links of the compartment search.
      const typed = await post(`/fhir/${ids.patient}/Observation/_search?date=le2021`, 'code=http://loinc.org|8302-2');
      expect(typed.status).toBe(200);
      expect(matches(typed.body).sort()).toEqual([ids.obs2020, ids.obs2021].sort());
      expect(typed.body.link.find((l) => l.relation === 'self')!.url).toMatch(
        new RegExp(`^${BASE}/${ids.patient}/Observation\\?`),
      );

      const star = await post(`/fhir/${ids.patient}/_search`, '_count=4');
      expect(star.status).toBe(200);
      expect(nextOf(star.body)).toContain(`${BASE}/${ids.patient}/*?_count=4&_cursor=`);
      const rest = await walk(nextOf(star.body)!);
      expect([...matches(star.body), ...rest.map(matches).flat()].sort()).toEqual(compartmentMembers().sort());

      // Scopes as for GET: `*` narrowed silently, a named type the caller may not search 403.
      const narrow = await t.client('system/Observation.s system/Patient.s');
      const narrowStar = await post(`/fhir/${ids.patient}/_search`, '', narrow);
      expect(matches(narrowStar.body).sort()).toEqual([ids.patient, ids.obs2020, ids.obs2021, ids.obs2022].sort());
      const forbidden = await post(`/fhir/${ids.patient}/Condition/_search`, '', narrow);
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.issue![0].code).toBe('forbidden');

      // A body that is not a form: 415; another method on the path: 405; no such compartment: 404.
      const json = await admin.post(`/fhir/${ids.patient}/Observation/_search`, { code: 'x' });
      expect(json.statusCode).toBe(415);
      const put = await admin.put(`/fhir/${ids.patient}/_search`, '{}');
      expect(put.statusCode).toBe(405);
      const notCompartment = await post(`/fhir/${ids.obs2020}/_search`, '');
      expect(notCompartment.status).toBe(404);
      expect(notCompartment.body.issue![0].diagnostics).toContain('not an R4 compartment');
    });

    it('`*` leaves out silently the types the caller may not search; a named one is 403', async () => {
      const narrow = await t.client('system/Observation.s system/Patient.s');
      const star = await get(`/fhir/${ids.patient}/*`, narrow);
      expect(star.status).toBe(200);
      expect(matches(star.body).sort()).toEqual([ids.patient, ids.obs2020, ids.obs2021, ids.obs2022].sort());
      const named = await get(`/fhir/${ids.patient}/Condition`, narrow);
      expect(named.status).toBe(403);
      expect(named.body.issue![0].code).toBe('forbidden');
      const include = await get(`/fhir/${ids.patient}/Observation?_include=Observation:performer`, narrow);
      expect(include.status).toBe(403);
    });

    it('the other R4 compartments: Encounter, Practitioner', async () => {
      const encounter = await get(`/fhir/${ids.encounter}/Observation`);
      expect(matches(encounter.body).sort()).toEqual([ids.obs2020, ids.obs2021, ids.obs2022, ids.otherObs].sort());
      const ownEncounter = await get(`/fhir/${ids.encounter}/Encounter`);
      expect(matches(ownEncounter.body)).toEqual([ids.encounter]);

      const doctor = await get(`/fhir/${ids.doctor}/*?_count=100`);
      expect(matches(doctor.body).sort()).toEqual(
        [ids.doctor, ids.encounter, ids.obs2020, ids.obs2021, ids.obs2022, ids.otherObs, ids.condition].sort(),
      );
    });

    it('works as a batch entry, and as a transaction entry that sees the transaction’s writes', async () => {
      const res = await admin.post('/fhir', {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { request: { method: 'GET', url: `${ids.patient}/Observation?date=2021` } },
          { request: { method: 'GET', url: `${BASE}/${ids.patient}/Practitioner` } },
        ],
      });
      expect(res.statusCode, res.body).toBe(200);
      const [found, refused] = res.json().entry;
      expect(found.response.status).toBe('200 OK');
      expect(matches(found.resource)).toEqual([ids.obs2021]);
      expect(refused.response.status).toMatch(/^400/);

      const tx = await admin.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            fullUrl: 'urn:uuid:6f1b2c4e-0000-4000-8000-000000000001',
            resource: {
              resourceType: 'Flag',
              status: 'active',
              code: { text: tag },
              subject: { reference: ids.other },
            },
            request: { method: 'POST', url: 'Flag' },
          },
          { request: { method: 'GET', url: `${ids.other}/Flag` } },
        ],
      });
      expect(tx.statusCode, tx.body).toBe(200);
      const [, search] = tx.json().entry;
      expect(matches(search.resource)).toHaveLength(1);
    });

    it('answers bad requests with a 4xx OperationOutcome', async () => {
      const notMember = await get(`/fhir/${ids.patient}/Practitioner`);
      expect(notMember.status).toBe(400);
      expect(notMember.body.issue![0].diagnostics).toContain('not in the Patient compartment');
      expect((await get(`/fhir/${ids.patient}/*?_type=Medication`)).status).toBe(400);
      const notCompartment = await get(`/fhir/${ids.org}/Patient`);
      expect(notCompartment.status).toBe(404);
      expect(notCompartment.body.issue![0].diagnostics).toContain('not an R4 compartment');
      expect((await get(`/fhir/${ids.patient}/NoSuchType`)).status).toBe(404);
      expect((await get(`/fhir/Patient/${'x'.repeat(65)}/Observation`)).status).toBe(400);
      for (const [method, url] of [
        ['POST', `/fhir/${ids.patient}/Observation`],
        ['DELETE', `/fhir/${ids.patient}/*`],
        ['POST', `/fhir/${ids.patient}/$everything`],
      ] as const) {
        const res = await admin.request(method, url, method === 'POST' ? '{}' : undefined);
        expect(res.statusCode, `${method} ${url}`).toBe(405);
        expect(res.json().resourceType).toBe('OperationOutcome');
      }
      const unknownParam = await get(`/fhir/${ids.patient}/Observation?nonsense=1`, admin, {
        prefer: 'handling=strict',
      });
      expect(unknownParam.status).toBe(400);
    });
  });

  describe('Patient $everything', () => {
    const everything = (query = '') => `/fhir/${ids.patient}/$everything${query}`;

    it('pages through the compartment once, with what it refers to as includes', async () => {
      const pages = await walk(everything('?_count=2'));
      expect(pages.length).toBe(4);
      const all = pages.map(matches).flat();
      expect(all.sort()).toEqual(compartmentMembers().sort());
      expect(new Set(all).size).toBe(all.length);
      const refs = new Set(pages.map(included).flat());
      expect([...refs].sort()).toEqual([ids.doctor, ids.org, ids.med].sort());
      for (const page of pages) {
        expect(page.type).toBe('searchset');
        expect(matches(page).length).toBeLessThanOrEqual(2);
        // Another patient's data never comes along.
        expect(page.entry!.map(keyOf)).not.toContain(ids.other);
        expect(page.entry!.map(keyOf)).not.toContain(ids.otherObs);
      }
      expect(nextOf(pages[0])).toMatch(new RegExp(`^${BASE}/${ids.patient}/\\$everything\\?_count=2&_cursor=`));
    });

    it('a walk with writes between pages sees each resource once, and new ones', async () => {
      const first = await get(everything('?_count=3'));
      const seen = matches(first.body);
      // Written between pages: an update of a resource already seen and a new member.
      const [type, id] = seen[0].split('/');
      const current = (await get(`/fhir/${type}/${id}`)).body as unknown as Record<string, unknown>;
      await admin.put(`/fhir/${type}/${id}`, { ...current, meta: undefined, language: 'en' });
      const added = await create({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'late' },
        subject: { reference: ids.patient },
      });
      const rest = await walk(nextOf(first.body)!);
      const all = [...seen, ...rest.map(matches).flat()];
      expect(all.sort()).toEqual([...compartmentMembers(), added].sort());
      ids.late = added;
    });

    it('the next link works on another server process on the same database', async () => {
      const first = await get(everything('?_count=2'));
      const other = await assembleApp(t.config);
      await other.ready();
      try {
        const second = await get(nextOf(first.body)!, fhirClient(other, admin.token));
        expect(second.status).toBe(200);
        const own = await get(nextOf(first.body)!);
        expect(matches(second.body)).toEqual(matches(own.body));
        expect(matches(second.body)).toHaveLength(2);
        expect(matches(second.body).some((k) => matches(first.body).includes(k))).toBe(false);
      } finally {
        await other.close();
      }
    });

    it('_type, start/end (clinical dates) and _since (lastUpdated) narrow it', async () => {
      // _type names every type returned: the Practitioner the Observations refer to does not come along.
      const typed = await get(everything('?_type=Observation,Condition&_count=100'));
      expect(matches(typed.body).sort()).toEqual(
        [ids.obs2020, ids.obs2021, ids.obs2022, ids.condition, ids.late].sort(),
      );
      expect(included(typed.body)).toEqual([]);
      expect(typed.body.entry!.map(keyOf)).not.toContain(ids.doctor);

      // Each type by its `date` parameter: Observation by its effective date, Encounter by its period; the
      // late observation has no date and MedicationRequest's `date` (dosage timing) is empty here, so both
      // are left out; Patient and Condition have no `date` parameter and are not filtered.
      const dated = await get(everything('?start=2021-01-01&end=2021-12-31&_count=100'));
      expect(matches(dated.body).sort()).toEqual([ids.patient, ids.encounter, ids.obs2021, ids.condition].sort());
      const fromOnly = await get(everything('?_type=Observation&start=2021-07-01&_count=100'));
      expect(matches(fromOnly.body)).toEqual([ids.obs2022]);

      const before = new Date(Date.now() - 1).toISOString();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const since = new Date().toISOString();
      const touched = await create({
        resourceType: 'Condition',
        subject: { reference: ids.patient },
        code: { text: 'recent' },
      });
      // The patient comes whatever _since says (it was written long before); what changed since, too.
      const recent = await get(everything(`?_since=${encodeURIComponent(since)}&_count=100`));
      expect(matches(recent.body)).toEqual([ids.patient, touched]);
      expect(recent.body.total).toBe(2);
      const future = await get(everything(`?_since=2999-01-01T00:00:00Z`));
      expect(matches(future.body)).toEqual([ids.patient]);
      const wider = await get(everything(`?_since=${encodeURIComponent(before)}&_type=Condition&_count=100`));
      expect(matches(wider.body)).toEqual([touched]);
    });

    it('filters every type by the read scopes; needs read on the Patient', async () => {
      const narrow = await t.client('system/Patient.r system/Observation.r');
      const { status, body } = await get(everything('?_count=100'), narrow);
      expect(status).toBe(200);
      expect(matches(body).sort()).toEqual([ids.patient, ids.obs2020, ids.obs2021, ids.obs2022, ids.late].sort());
      expect(included(body)).toEqual([]);
      const noPatient = await t.client('system/Observation.rs');
      const refused = await get(everything(), noPatient);
      expect(refused.status).toBe(403);
      expect(refused.body.issue![0].code).toBe('forbidden');
      expect((await get(everything('?_type=Condition'), narrow)).status).toBe(403);
    });

    it('answers bad requests with a 4xx OperationOutcome', async () => {
      const unknownType = await get(everything('?_type=NoSuchType'));
      expect(unknownType.status).toBe(400);
      expect(unknownType.body.issue![0].diagnostics).toContain('NoSuchType');
      expect((await get(everything('?_type=Practitioner'))).status).toBe(400);
      expect((await get(everything('?start=yesterday'))).status).toBe(400);
      expect((await get(everything('?_since=2021-13-01'))).status).toBe(400);
      const unknown = await get(everything('?code=1'));
      expect(unknown.status).toBe(400);
      expect(unknown.body.issue![0].diagnostics).toContain('start, end, _since, _type and _count');
      expect((await get(`/fhir/Patient/${randomUUID()}/$everything`)).status).toBe(404);
      // The type-level operation stays unsupported.
      const typeLevel = await get('/fhir/Patient/$everything');
      expect(typeLevel.status).toBe(400);
      expect(typeLevel.body.issue![0].code).toBe('not-supported');
      expect((await get(`/fhir/Observation/${patientId()}/$everything`)).status).toBe(400);
    });

    it('_count is capped as in a search', async () => {
      const { body } = await get(everything('?_count=5000'));
      expect(matches(body).length).toBeGreaterThan(0);
      expect(nextOf(body)).toBeUndefined();
      expect(body.total).toBe(matches(body).length);
    });
  });

  it('never answers odd input with a 500', async () => {
    const p = ids.patient;
    const urls = [
      `/fhir/Patient/%00/Observation`,
      `/fhir/Patient/a%2Fb/Observation`,
      `/fhir/${p}/Observation?_cursor=garbage`,
      `/fhir/${p}/$everything?_cursor=garbage`,
      `/fhir/${p}/$everything?_count=abc`,
      `/fhir/${p}/$everything?start=2020&start=2021`,
      `/fhir/${p}/$everything?_type=`,
      `/fhir/${p}/$everything?end=${'9'.repeat(5000)}`,
      `/fhir/${p}/*?_sort=date`,
      `/fhir/${p}/*?_include=*&_revinclude=Provenance:target&_total=accurate`,
      `/fhir/${p}/*?_type=${'Observation,'.repeat(2000)}`,
      `/fhir/${p}/Observation?_has:Condition:subject:code=x&subject:Patient.name=x`,
      `/fhir/${p}/%2A`,
      `/fhir/Patient/*/Observation`,
      `/fhir/Patient/${p.split('/')[1]}/Observation/extra`,
    ];
    for (const url of urls) {
      const res = await admin.get(url);
      expect(res.statusCode, `${url}: ${res.body.slice(0, 300)}`).toBeLessThan(500);
      if (res.statusCode >= 400) expect(res.json().resourceType, url).toBe('OperationOutcome');
    }
  });

  it('the CapabilityStatement lists the compartments and Patient $everything', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/fhir/metadata' });
    const statement = res.json();
    expect(statement.rest[0].compartment.sort()).toEqual(
      ['device', 'encounter', 'patient', 'practitioner', 'relatedPerson']
        .map((id) => `http://hl7.org/fhir/CompartmentDefinition/${id}`)
        .sort(),
    );
    const patient = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patient.operation).toContainEqual({
      name: 'everything',
      definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything',
    });
    const observation = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Observation');
    expect(observation.operation.map((o: { name: string }) => o.name)).not.toContain('everything');
  });
});
