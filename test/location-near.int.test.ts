// Location `near` (https://hl7.org/fhir/R4/location.html#positional) over HTTP on both databases: a
// great-circle distance, not a box (the case of a peer server's CI: 900 km from Florence finds Leipzig
// only), in any UCUM length unit, across the antimeridian and over a pole, with the distance on each
// match (the location-distance extension, in metres), paged, counted, chained, and bad values a 400.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const FLORENCE = '43.77925|11.24626';

/** Cities with their coordinates; Kraków lies inside the latitude/longitude box of 900 km around Florence. */
const PLACES = {
  leipzig: [51.3397, 12.3731],
  jakarta: [-6.2, 106.8167],
  krakow: [50.06143, 19.93658],
  eastOfAntimeridian: [0, 179.9],
  westOfAntimeridian: [0, -179.9],
  greenwich: [0, 0],
  nearPoleLon0: [89.5, 0],
  nearPoleLon180: [89.5, 180],
  southOfPole: [87, 0],
  // 500 m and 1.5 km north of the equator at 0°.
  fiveHundredMetres: [0.0045, 0],
  fifteenHundredMetres: [0.0135, 0],
} as const;

type Entry = {
  resource: { resourceType: string; id: string };
  search: { mode: string; extension?: { url: string; valueDistance: Record<string, unknown> }[] };
};

describe.each(BACKENDS)('Location near on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const ids: Record<string, string> = {};
  const names = new Map<string, string>();

  const search = async (query: string): Promise<{ total?: number; entry?: Entry[] }> => {
    const res = await fhir.get(`/fhir/Location?${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const found = (bundle: { entry?: Entry[] }): string[] =>
    (bundle.entry ?? [])
      .filter((e) => e.search.mode === 'match')
      .map((e) => names.get(e.resource.id)!)
      .sort();

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    for (const [name, [latitude, longitude]] of Object.entries(PLACES)) {
      const res = await fhir.create({ resourceType: 'Location', name, position: { latitude, longitude } });
      expect(res.statusCode, res.body).toBe(201);
      ids[name] = res.json().id;
      names.set(ids[name], name);
    }
    // A Location without a position is never near anything.
    expect((await fhir.create({ resourceType: 'Location', name: 'nowhere' })).statusCode).toBe(201);
  }, 60_000);
  afterAll(() => t?.close());

  it('900 km from Florence finds Leipzig (845 km) only: not Kraków (960 km), inside the box', async () => {
    const bundle = await search(`near=${FLORENCE}|900|km`);
    expect(bundle.total).toBe(1);
    expect(found(bundle)).toEqual(['leipzig']);
    const [match] = bundle.entry!;
    expect(match.search.extension).toHaveLength(1);
    const [extension] = match.search.extension!;
    expect(extension.url).toBe('http://hl7.org/fhir/StructureDefinition/location-distance');
    expect(extension.valueDistance).toMatchObject({ unit: 'm', system: 'http://unitsofmeasure.org', code: 'm' });
    // Florence to Leipzig is 845 km on the great circle.
    const metres = extension.valueDistance.value as number;
    expect(metres).toBeGreaterThan(844_000);
    expect(metres).toBeLessThan(846_000);

    // In XML too: the extension is an element of Bundle.entry.search.
    const xml = await fhir.get(`/fhir/Location?near=${FLORENCE}|900|km&_format=xml`);
    expect(xml.statusCode).toBe(200);
    expect(xml.body).toContain('<extension url="http://hl7.org/fhir/StructureDefinition/location-distance">');
    expect(xml.body).toContain('<code value="m"/>');

    const counted = await search(`near=${FLORENCE}|900|km&_summary=count`);
    expect(counted.total).toBe(1);
    expect(counted.entry).toBeUndefined();
  });

  it('is a circle: Kraków comes in between 959 and 961 km', async () => {
    expect(found(await search(`near=${FLORENCE}|959|km`))).toEqual(['leipzig']);
    expect(found(await search(`near=${FLORENCE}|961|km`))).toEqual(['krakow', 'leipzig']);
  });

  it('takes any UCUM length, km when the unit is left out, and a default distance when that is', async () => {
    for (const query of [`${FLORENCE}|900000|m`, `${FLORENCE}|560|[mi_i]`, `${FLORENCE}|900`, `${FLORENCE}|900|`]) {
      expect(found(await search(`near=${query}`)), query).toEqual(['leipzig']);
    }
    // Without a distance, near is 1 km.
    expect(found(await search('near=0|0'))).toEqual(['fiveHundredMetres', 'greenwich']);
    expect(found(await search('near=0|0|1.6|km'))).toEqual(['fifteenHundredMetres', 'fiveHundredMetres', 'greenwich']);
  });

  it('crosses the antimeridian and passes over a pole', async () => {
    // 0.2° of the equator apart (22 km), on either side of ±180°: 5.6 km and 16.7 km from 179.95°W.
    expect(found(await search('near=0|179.95|8|km'))).toEqual(['eastOfAntimeridian']);
    expect(found(await search('near=0|-179.95|8|km'))).toEqual(['westOfAntimeridian']);
    expect(found(await search('near=0|-179.95|17|km'))).toEqual(['eastOfAntimeridian', 'westOfAntimeridian']);
    // Over the pole 89.5°N 0° and 89.5°N 180° are 1° (111 km) apart; 87°N is 278 km away.
    expect(found(await search('near=89.5|0|120|km'))).toEqual(['nearPoleLon0', 'nearPoleLon180']);
    expect(found(await search('near=89.5|0|300|km'))).toEqual(['nearPoleLon0', 'nearPoleLon180', 'southOfPole']);
    // Half the circumference reaches everything that has a position.
    const everywhere = await search('near=0|0|20100|km&_count=100');
    expect(found(everywhere)).toEqual(Object.keys(PLACES).sort());
  });

  it('ORs values, and measures each match from the nearest of them', async () => {
    const bundle = await search(`near=${FLORENCE}|900|km,-6.2|106.8|10|km`);
    expect(found(bundle)).toEqual(['jakarta', 'leipzig']);
    const jakarta = bundle.entry!.find((e) => e.resource.id === ids.jakarta)!;
    // 0.0167° of longitude on the equator's side: under 2 km.
    expect(jakarta.search.extension![0].valueDistance.value as number).toBeLessThan(2000);
  });

  it('pages: each match once, each with its distance, in the default order', async () => {
    const pages = await fhir.pages('/fhir/Location?near=0|0|20100|km&_count=2');
    expect(pages.length).toBeGreaterThan(4);
    const seen = pages.flatMap((page) => (page.entry as Entry[] | undefined) ?? []);
    expect(seen.map((e) => names.get(e.resource.id)).sort()).toEqual(Object.keys(PLACES).sort());
    for (const entry of seen) expect(entry.search.extension?.[0].valueDistance.value).toEqual(expect.any(Number));
  });

  it('works in chains, with :missing, and is no sort order', async () => {
    const encounter = await fhir.create({
      resourceType: 'Encounter',
      status: 'finished',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      location: [{ location: { reference: `Location/${ids.leipzig}` } }],
    });
    expect(encounter.statusCode).toBe(201);
    const chained = await fhir.get(`/fhir/Encounter?location.near=${FLORENCE}|900|km`);
    expect(chained.json().entry.map((e: Entry) => e.resource.id)).toEqual([encounter.json().id]);
    expect((await fhir.get(`/fhir/Encounter?location.near=${FLORENCE}|800|km`)).json().total).toBe(0);

    const missing = await search('near:missing=true');
    expect(missing.entry!.map((e) => e.resource.id)).not.toContain(ids.leipzig);
    expect(missing.total).toBe(1);

    const sorted = await fhir.get('/fhir/Location?_sort=near');
    expect(sorted.statusCode).toBe(400);
  });

  it.each([
    ['91|0|1|km', 'latitude'],
    ['0|181|1|km', 'longitude'],
    ['abc|0', 'latitude'],
    ['0|0|-1|km', 'distance'],
    ['0|0|1|kg', 'unit of length'],
    ['0|0|1|Cel', 'unit of length'],
    ['0|0|1|km|x', 'latitude|longitude'],
    ['0', 'latitude|longitude'],
    ['0|0|1e400|km', 'distance'],
  ])('near=%s is a 400 naming the %s', async (value, what) => {
    const res = await fhir.get(`/fhir/Location?near=${encodeURIComponent(value)}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].diagnostics).toContain(what);
  });

  it('is in the CapabilityStatement', async () => {
    const statement = (await fhir.get('/fhir/metadata')).json();
    const location = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Location');
    expect(location.searchParam).toContainEqual(
      expect.objectContaining({
        name: 'near',
        type: 'special',
        definition: 'http://hl7.org/fhir/SearchParameter/Location-near',
      }),
    );
  });
});
