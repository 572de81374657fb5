// `_list` (https://hl7.org/fhir/R4/search.html#list) over HTTP on both databases: the resources a List
// names in entry.item, on type and system searches, with other criteria, paged over a List of 1,200
// entries; and, since it reads through the List, refused to a caller who may neither read nor search
// Lists (a peer's test: Blaze's search-system-list).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { Bundle, FhirClient } from './support/fhir-client.js';

const MANY = 1200;

describe.each(BACKENDS)('_list on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const ids: Record<string, string> = {};
  let many: string[] = [];

  const create = async (resource: { resourceType: string; [k: string]: unknown }): Promise<string> => {
    const res = await fhir.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id;
  };
  const list = (items: string[]) => ({
    resourceType: 'List',
    status: 'current',
    mode: 'working',
    entry: items.map((reference) => ({ item: { reference } })),
  });
  const search = async (url: string, client = fhir): Promise<Bundle> => {
    const res = await client.get(url);
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const keys = (bundle: Bundle): string[] =>
    (bundle.entry ?? [])
      .filter((e) => (e.search as { mode: string }).mode === 'match')
      .map((e) => `${e.resource!.resourceType}/${e.resource!.id}`);

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    ids.p1 = await create({ resourceType: 'Patient', name: [{ family: 'Listed' }] });
    ids.p2 = await create({ resourceType: 'Patient', name: [{ family: 'Unlisted' }] });
    ids.p3 = await create({ resourceType: 'Patient', name: [{ family: 'Other' }] });
    ids.o1 = await create({ resourceType: 'Observation', status: 'final', code: { text: 'listed' } });
    ids.list = await create(list([`Patient/${ids.p1}`, `Patient/${ids.p3}`, `Observation/${ids.o1}`]));
    ids.other = await create(list([`Patient/${ids.p2}`]));
    ids.gone = await create(list([`Patient/${ids.p2}`]));
    expect((await fhir.delete(`/fhir/List/${ids.gone}`)).statusCode).toBe(204);

    // A List of 1,200 Patients, created in transactions of 600.
    for (let batch = 0; batch < MANY / 600; batch++) {
      const res = await fhir.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: 600 }, (_, i) => ({
          resource: { resourceType: 'Patient', name: [{ family: `Many${batch * 600 + i}` }] },
          request: { method: 'POST', url: 'Patient' },
        })),
      });
      expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
      many.push(...res.json().entry.map((e: { response: { location: string } }) => e.response.location.split('/')[1]));
    }
    many = many.map((id) => `Patient/${id}`);
    ids.many = await create(list(many));
  }, 120_000);
  afterAll(() => t?.close());

  it('finds the items of the List, of the searched type', async () => {
    expect(keys(await search(`/fhir/Patient?_list=${ids.list}`))).toEqual([`Patient/${ids.p1}`, `Patient/${ids.p3}`]);
    expect(keys(await search(`/fhir/Observation?_list=${ids.list}`))).toEqual([`Observation/${ids.o1}`]);
    expect(keys(await search(`/fhir/Patient?_list=${ids.list}&name=other`))).toEqual([`Patient/${ids.p3}`]);
    expect(keys(await search(`/fhir/Patient?_list=${ids.list},${ids.other}`)).sort()).toEqual(
      [`Patient/${ids.p1}`, `Patient/${ids.p2}`, `Patient/${ids.p3}`].sort(),
    );
    // Two _list parameters: in both.
    expect(keys(await search(`/fhir/Patient?_list=${ids.list}&_list=${ids.other}`))).toEqual([]);
    // An unknown or deleted List has no items.
    expect((await search('/fhir/Patient?_list=no-such-list')).total).toBe(0);
    expect((await search(`/fhir/Patient?_list=${ids.gone}`)).total).toBe(0);
    expect((await search(`/fhir/Patient?_list=${ids.list}&_summary=count`)).total).toBe(2);
  });

  it('works on a system search, every type or those of _type', async () => {
    const all = await search(`/fhir?_list=${ids.list}`);
    expect(all.total).toBe(3);
    expect(keys(all)).toEqual([`Patient/${ids.p1}`, `Patient/${ids.p3}`, `Observation/${ids.o1}`]);
    expect(keys(await search(`/fhir?_list=${ids.list}&_type=Observation`))).toEqual([`Observation/${ids.o1}`]);
    const strict = await fhir.get(`/fhir?_list=${ids.list}`, { prefer: 'handling=strict' });
    expect(strict.statusCode).toBe(200);
  });

  it('pages through a List of 1,200 items, each once', async () => {
    const pages = await fhir.pages(`/fhir/Patient?_list=${ids.many}&_count=500`);
    expect(pages).toHaveLength(3);
    const seen = pages.flatMap(keys);
    expect(seen).toHaveLength(MANY);
    expect(new Set(seen)).toEqual(new Set(many));
    expect((await search(`/fhir/Patient?_list=${ids.many}&_total=accurate&_count=1`)).total).toBe(MANY);
  });

  it('needs read or search on List besides the searched type: the List is not revealed otherwise', async () => {
    const patientsOnly = await t.client('system/Patient.rs system/Observation.rs');
    for (const url of [`/fhir/Patient?_list=${ids.list}`, `/fhir?_list=${ids.list}&_type=Patient`]) {
      const res = await patientsOnly.get(url);
      expect(res.statusCode, url).toBe(403);
      expect(res.json().issue[0].code).toBe('forbidden');
      expect(res.json().issue[0].diagnostics).toContain('List');
    }
    // Nor through _has, the same question asked another way.
    expect((await patientsOnly.get(`/fhir/Patient?_has:List:item:_id=${ids.list}`)).statusCode).toBe(403);
    // Reading the List by id is enough (it shows the items anyway), as is searching Lists.
    for (const scopes of ['system/Patient.rs system/List.r', 'system/Patient.rs system/List.s']) {
      const client = await t.client(scopes);
      expect(keys(await search(`/fhir/Patient?_list=${ids.list}`, client)), scopes).toEqual([
        `Patient/${ids.p1}`,
        `Patient/${ids.p3}`,
      ]);
    }
    // And the searched type's own scope still counts.
    const listsOnly = await t.client('system/List.rs');
    expect((await listsOnly.get(`/fhir/Patient?_list=${ids.list}`)).statusCode).toBe(403);
  });

  it('answers bad values with a 400, functional lists as unsupported', async () => {
    expect((await fhir.get(`/fhir/Patient?_list:exact=${ids.list}`)).statusCode).toBe(400);
    expect((await fhir.get('/fhir/Patient?_list=a,')).statusCode).toBe(400);
    const functional = await search('/fhir/Patient?_list=$current-allergies');
    const outcome = functional.entry!.find((e) => e.resource!.resourceType === 'OperationOutcome')!;
    expect(JSON.stringify(outcome.resource)).toContain('functional lists');
    const strict = await fhir.get('/fhir/Patient?_list=$current-allergies', { prefer: 'handling=strict' });
    expect(strict.statusCode).toBe(400);
  });

  it('is in the CapabilityStatement, on each type and on system search', async () => {
    const statement = (await fhir.get('/fhir/metadata')).json();
    const patient = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patient.searchParam).toContainEqual(expect.objectContaining({ name: '_list', type: 'special' }));
    expect(statement.rest[0].searchParam).toContainEqual(expect.objectContaining({ name: '_list', type: 'special' }));
  });
});
