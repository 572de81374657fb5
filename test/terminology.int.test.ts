// The terminology operations over HTTP on both databases (docs/terminology.md): ValueSet $expand and
// $validate-code, CodeSystem $lookup and $validate-code, on the type and on an instance, by GET and by
// POST with a Parameters body, over R4's value sets and code systems and those stored on the server;
// scopes (read or search on the type), 422 for what needs an external terminology, 400 for bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER_CS = 'http://hl7.org/fhir/administrative-gender';
const SHAPES = 'http://example.org/fhir/CodeSystem/shapes';
const POLYGONS = 'http://example.org/fhir/ValueSet/polygons';

interface Contains {
  system: string;
  code: string;
  display?: string;
}
interface Expanded {
  resourceType: string;
  url?: string;
  expansion: {
    identifier: string;
    timestamp: string;
    total: number;
    offset: number;
    parameter?: { name: string; [value: string]: unknown }[];
    contains?: Contains[];
  };
}
interface Parameters {
  resourceType: string;
  parameter: { name: string; valueBoolean?: boolean; valueString?: string; part?: unknown[] }[];
}
interface Outcome {
  resourceType: string;
  issue: { code: string; diagnostics?: string; details?: { coding: { code: string }[] } }[];
}

const codes = (res: Reply) => (res.json<Expanded>().expansion.contains ?? []).map((c) => c.code).sort();
const param = (res: Reply, name: string) => res.json<Parameters>().parameter.find((p) => p.name === name);

/** The answer is an OperationOutcome with this status, issue code and catalogue code (and mentions `text`). */
function expectOutcome(res: Reply, status: number, issue: string, code: string, text?: string) {
  expect(res.statusCode, res.body).toBe(status);
  const outcome = res.json<Outcome>();
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue[0]).toMatchObject({ code: issue, details: { coding: [{ code }] } });
  if (text) expect(outcome.issue[0]!.diagnostics).toContain(text);
}

const parameters = (...parameter: Record<string, unknown>[]) => ({ resourceType: 'Parameters', parameter });

describe.each(BACKENDS)('terminology operations on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  let codeSystemId: string;
  let valueSetId: string;

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    const cs = await fhir.create({
      resourceType: 'CodeSystem',
      url: SHAPES,
      version: '1',
      name: 'Shapes',
      status: 'active',
      content: 'complete',
      property: [{ code: 'sides', type: 'integer' }],
      concept: [
        {
          code: 'polygon',
          display: 'Polygon',
          concept: [
            {
              code: 'triangle',
              display: 'Triangle',
              property: [{ code: 'sides', valueInteger: 3 }],
              designation: [{ language: 'fr', value: 'Triangle' }],
            },
            { code: 'square', display: 'Square', property: [{ code: 'sides', valueInteger: 4 }] },
          ],
        },
        { code: 'circle', display: 'Circle' },
      ],
    });
    expect(cs.statusCode, cs.body).toBe(201);
    codeSystemId = cs.json().id;
    const vs = await fhir.create({
      resourceType: 'ValueSet',
      url: POLYGONS,
      version: '1',
      name: 'Polygons',
      status: 'active',
      compose: { include: [{ system: SHAPES, filter: [{ property: 'concept', op: 'is-a', value: 'polygon' }] }] },
    });
    expect(vs.statusCode, vs.body).toBe(201);
    valueSetId = vs.json().id;
  });

  afterAll(async () => {
    await t?.close();
  });

  describe('$expand', () => {
    it('expands an R4 value set by url (GET), with the expansion the spec describes', async () => {
      const res = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}`);
      expect(res.statusCode, res.body).toBe(200);
      const vs = res.json<Expanded>();
      expect(vs).toMatchObject({ resourceType: 'ValueSet', url: GENDER_VS });
      expect(vs.expansion.identifier).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
      expect(Number.isNaN(Date.parse(vs.expansion.timestamp))).toBe(false);
      expect(vs.expansion).toMatchObject({ total: 4, offset: 0, parameter: [{ name: 'url', valueUri: GENDER_VS }] });
      expect(vs.expansion.contains).toContainEqual({ system: GENDER_CS, code: 'female', display: 'Female' });
      expect(codes(res)).toEqual(['female', 'male', 'other', 'unknown']);
    });

    it('pages with count and offset and filters by text, echoing them', async () => {
      const page = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}&count=2&offset=1`);
      expect(page.statusCode, page.body).toBe(200);
      const expansion = page.json<Expanded>().expansion;
      expect(expansion).toMatchObject({ total: 4, offset: 1 });
      expect(expansion.contains).toHaveLength(2);
      expect(expansion.parameter).toEqual(
        expect.arrayContaining([
          { name: 'offset', valueInteger: 1 },
          { name: 'count', valueInteger: 2 },
        ]),
      );
      const filtered = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}&filter=FEM`);
      expect(codes(filtered)).toEqual(['female']);
      expect(filtered.json<Expanded>().expansion.total).toBe(1);
    });

    it('expands a v3 value set through its is-a filter and exclude', async () => {
      const url = 'http://terminology.hl7.org/ValueSet/v3-ActEncounterCode';
      const res = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(url)}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(codes(res)).toEqual(expect.arrayContaining(['AMB', 'EMER', 'IMP']));
      expect(codes(res)).not.toContain('_ActEncounterCode');
    });

    it('takes a Parameters body (POST), with url or an inline valueSet', async () => {
      const byUrl = await fhir.post(
        '/fhir/ValueSet/$expand',
        parameters({ name: 'url', valueUri: GENDER_VS }, { name: 'count', valueInteger: 1 }),
      );
      expect(byUrl.statusCode, byUrl.body).toBe(200);
      expect(byUrl.json<Expanded>().expansion).toMatchObject({ total: 4 });
      expect(byUrl.json<Expanded>().expansion.contains).toHaveLength(1);
      const inline = await fhir.post(
        '/fhir/ValueSet/$expand',
        parameters({
          name: 'valueSet',
          resource: {
            resourceType: 'ValueSet',
            status: 'draft',
            compose: {
              include: [
                { system: GENDER_CS, concept: [{ code: 'male' }] },
                { system: SHAPES, filter: [{ property: 'sides', op: '=', value: '4' }] },
              ],
            },
          },
        }),
      );
      expect(inline.statusCode, inline.body).toBe(200);
      expect(inline.json<Expanded>().expansion.contains).toEqual([
        { system: GENDER_CS, code: 'male', display: 'Male' },
        { system: SHAPES, code: 'square', display: 'Square' },
      ]);
    });

    it('expands stored value sets over stored code systems, by url and as an instance (GET and POST)', async () => {
      const byUrl = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(POLYGONS)}`);
      expect(byUrl.statusCode, byUrl.body).toBe(200);
      expect(codes(byUrl)).toEqual(['polygon', 'square', 'triangle']);
      const instance = await fhir.get(`/fhir/ValueSet/${valueSetId}/$expand?filter=tri`);
      expect(instance.statusCode, instance.body).toBe(200);
      expect(instance.json<Expanded>().expansion.contains).toEqual([
        { system: SHAPES, code: 'triangle', display: 'Triangle' },
      ]);
      const posted = await fhir.post(
        `/fhir/ValueSet/${valueSetId}/$expand`,
        parameters({ name: 'count', valueInteger: 0 }),
      );
      expect(posted.statusCode, posted.body).toBe(200);
      expect(posted.json<Expanded>().expansion).toMatchObject({ total: 3 });
      expect(posted.json<Expanded>().expansion.contains).toBeUndefined();
      // A nested stored value set, intersected with a concept list.
      const nested = await fhir.post(
        '/fhir/ValueSet/$expand',
        parameters({
          name: 'valueSet',
          resource: {
            resourceType: 'ValueSet',
            status: 'draft',
            compose: {
              include: [{ valueSet: [POLYGONS] }],
              exclude: [{ system: SHAPES, concept: [{ code: 'polygon' }] }],
            },
          },
        }),
      );
      expect(codes(nested)).toEqual(['square', 'triangle']);
    });

    it('answers 422 naming a value set that needs SNOMED CT or LOINC', async () => {
      const snomed = 'http://hl7.org/fhir/ValueSet/clinical-findings';
      const res = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(snomed)}`);
      expectOutcome(res, 422, 'not-supported', 'terminology-not-supported', snomed);
      expect(res.json<Outcome>().issue[0]!.diagnostics).toContain('http://snomed.info/sct');
      const loinc = 'http://hl7.org/fhir/ValueSet/observation-codes';
      const loincRes = await fhir.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(loinc)}`);
      expectOutcome(loincRes, 422, 'not-supported', 'terminology-not-supported', loinc);
      const check = await fhir.get(
        `/fhir/ValueSet/$validate-code?url=${encodeURIComponent(snomed)}&system=http://snomed.info/sct&code=404684003`,
      );
      expectOutcome(check, 422, 'not-supported', 'terminology-not-supported', snomed);
    });

    it('answers 422 too-costly for value sets that include each other', async () => {
      for (const [url, other] of [
        ['urn:test:cycle-a', 'urn:test:cycle-b'],
        ['urn:test:cycle-b', 'urn:test:cycle-a'],
      ]) {
        const res = await fhir.create({
          resourceType: 'ValueSet',
          url,
          status: 'draft',
          compose: { include: [{ valueSet: [other] }] },
        });
        expect(res.statusCode, res.body).toBe(201);
      }
      const res = await fhir.get('/fhir/ValueSet/$expand?url=urn:test:cycle-a');
      expectOutcome(res, 422, 'too-costly', 'expansion-too-costly', 'urn:test:cycle-a');
      // Each code system named is looked up among the stored ones: at most 100 per request.
      const include = Array.from({ length: 101 }, (_, i) => ({
        system: `urn:test:system-${i}`,
        concept: [{ code: 'a' }],
      }));
      const many = await fhir.post(
        '/fhir/ValueSet/$expand',
        parameters({ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'draft', compose: { include } } }),
      );
      expectOutcome(many, 422, 'too-costly', 'expansion-too-costly', 'more than 100');
      const hundred = await fhir.post(
        '/fhir/ValueSet/$expand',
        parameters(
          {
            name: 'valueSet',
            resource: { resourceType: 'ValueSet', status: 'draft', compose: { include: include.slice(1) } },
          },
          { name: 'count', valueInteger: 1 },
        ),
      );
      expect(hundred.statusCode, hundred.body).toBe(200);
      expect(hundred.json<Expanded>().expansion.total).toBe(100);
    });
  });

  describe('$validate-code', () => {
    it('validates a code in a value set: code and system (GET), coding and codeableConcept (POST), instance', async () => {
      const ok = await fhir.get(
        `/fhir/ValueSet/$validate-code?url=${encodeURIComponent(GENDER_VS)}&system=${GENDER_CS}&code=male`,
      );
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.json<Parameters>().resourceType).toBe('Parameters');
      expect(param(ok, 'result')).toEqual({ name: 'result', valueBoolean: true });
      expect(param(ok, 'display')).toEqual({ name: 'display', valueString: 'Male' });
      const no = await fhir.get(
        `/fhir/ValueSet/$validate-code?url=${encodeURIComponent(GENDER_VS)}&system=${GENDER_CS}&code=robot`,
      );
      expect(param(no, 'result')).toEqual({ name: 'result', valueBoolean: false });
      expect(param(no, 'message')?.valueString).toContain('robot');
      const coding = await fhir.post(
        '/fhir/ValueSet/$validate-code',
        parameters(
          { name: 'url', valueUri: POLYGONS },
          { name: 'coding', valueCoding: { system: SHAPES, code: 'square' } },
        ),
      );
      expect(coding.statusCode, coding.body).toBe(200);
      expect(param(coding, 'result')?.valueBoolean).toBe(true);
      const concept = await fhir.post(
        `/fhir/ValueSet/${valueSetId}/$validate-code`,
        parameters({
          name: 'codeableConcept',
          valueCodeableConcept: {
            coding: [
              { system: SHAPES, code: 'circle' },
              { system: SHAPES, code: 'triangle' },
            ],
          },
        }),
      );
      expect(concept.statusCode, concept.body).toBe(200);
      expect(param(concept, 'result')?.valueBoolean).toBe(true);
      const outside = await fhir.get(`/fhir/ValueSet/${valueSetId}/$validate-code?system=${SHAPES}&code=circle`);
      expect(param(outside, 'result')?.valueBoolean).toBe(false);
      const wrongDisplay = await fhir.get(
        `/fhir/ValueSet/${valueSetId}/$validate-code?system=${SHAPES}&code=square&display=Box`,
      );
      expect(param(wrongDisplay, 'result')?.valueBoolean).toBe(false);
      expect(param(wrongDisplay, 'message')?.valueString).toContain('Square');
    });

    it('validates a code in a code system, by url and as an instance', async () => {
      const ok = await fhir.get(`/fhir/CodeSystem/$validate-code?url=${GENDER_CS}&code=other`);
      expect(ok.statusCode, ok.body).toBe(200);
      expect(param(ok, 'result')?.valueBoolean).toBe(true);
      expect(param(ok, 'display')?.valueString).toBe('Other');
      const instance = await fhir.post(
        `/fhir/CodeSystem/${codeSystemId}/$validate-code`,
        parameters({ name: 'coding', valueCoding: { system: SHAPES, code: 'hexagon' } }),
      );
      expect(instance.statusCode, instance.body).toBe(200);
      expect(param(instance, 'result')?.valueBoolean).toBe(false);
      expect(param(instance, 'message')?.valueString).toContain('hexagon');
      // Without url, the coding's system names the code system.
      const bySystem = await fhir.post(
        '/fhir/CodeSystem/$validate-code',
        parameters({ name: 'coding', valueCoding: { system: SHAPES, code: 'circle', display: 'Circle' } }),
      );
      expect(bySystem.statusCode, bySystem.body).toBe(200);
      expect(param(bySystem, 'result')?.valueBoolean).toBe(true);
      const snomed = await fhir.get('/fhir/CodeSystem/$validate-code?url=http://snomed.info/sct&code=404684003');
      expectOutcome(snomed, 422, 'not-supported', 'terminology-not-supported', 'http://snomed.info/sct');
    });
  });

  describe('$lookup', () => {
    it('looks up an R4 code (GET) and a stored one with designations and properties (POST)', async () => {
      const res = await fhir.get(`/fhir/CodeSystem/$lookup?system=${GENDER_CS}&code=female`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<Parameters>().parameter.slice(0, 3)).toEqual([
        { name: 'name', valueString: 'AdministrativeGender' },
        { name: 'version', valueString: '4.0.1' },
        { name: 'display', valueString: 'Female' },
      ]);
      const stored = await fhir.post(
        '/fhir/CodeSystem/$lookup',
        parameters({ name: 'coding', valueCoding: { system: SHAPES, code: 'triangle' } }),
      );
      expect(stored.statusCode, stored.body).toBe(200);
      expect(stored.json<Parameters>().parameter).toEqual([
        { name: 'name', valueString: 'Shapes' },
        { name: 'version', valueString: '1' },
        { name: 'display', valueString: 'Triangle' },
        {
          name: 'designation',
          part: [
            { name: 'language', valueCode: 'fr' },
            { name: 'value', valueString: 'Triangle' },
          ],
        },
        {
          name: 'property',
          part: [
            { name: 'code', valueCode: 'sides' },
            { name: 'value', valueInteger: 3 },
          ],
        },
        {
          name: 'property',
          part: [
            { name: 'code', valueCode: 'parent' },
            { name: 'value', valueCode: 'polygon' },
          ],
        },
      ]);
    });

    it('takes a Parameters body in XML and answers in XML', async () => {
      const xml =
        '<Parameters xmlns="http://hl7.org/fhir"><parameter><name value="system"/>' +
        `<valueUri value="${GENDER_CS}"/></parameter><parameter><name value="code"/>` +
        '<valueCode value="unknown"/></parameter></Parameters>';
      const res = await fhir.post('/fhir/CodeSystem/$lookup', xml, {
        'content-type': 'application/fhir+xml',
        accept: 'application/fhir+xml',
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toContain('application/fhir+xml');
      expect(res.body).toContain('<name value="display"/><valueString value="Unknown"/>');
    });

    it('answers 404 for an unknown code or system and 422 for SNOMED CT', async () => {
      expectOutcome(
        await fhir.get(`/fhir/CodeSystem/$lookup?system=${GENDER_CS}&code=robot`),
        404,
        'not-found',
        'terminology-not-found',
        'robot',
      );
      expectOutcome(
        await fhir.get('/fhir/CodeSystem/$lookup?system=urn:test:nothing&code=x'),
        404,
        'not-found',
        'terminology-not-found',
        'urn:test:nothing',
      );
      expectOutcome(
        await fhir.get('/fhir/CodeSystem/$lookup?system=http://snomed.info/sct&code=404684003'),
        422,
        'not-supported',
        'terminology-not-supported',
        'http://snomed.info/sct',
      );
    });
  });

  describe('scopes', () => {
    it('needs read or search on ValueSet or CodeSystem (403 otherwise, before a POST body)', async () => {
      const patientOnly = await t.client('system/Patient.cruds');
      const expand = `/fhir/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}`;
      const lookup = `/fhir/CodeSystem/$lookup?system=${GENDER_CS}&code=male`;
      expectOutcome(await patientOnly.get(expand), 403, 'forbidden', 'forbidden', 'ValueSet');
      expectOutcome(await patientOnly.get(lookup), 403, 'forbidden', 'forbidden', 'CodeSystem');
      expectOutcome(
        await patientOnly.post(`/fhir/ValueSet/${valueSetId}/$validate-code`, '{not json'),
        403,
        'forbidden',
        'forbidden',
      );
      expectOutcome(
        await patientOnly.get(`/fhir/CodeSystem/${codeSystemId}/$validate-code?code=square`),
        403,
        'forbidden',
        'forbidden',
      );
      const valueSetRead = await t.client('system/ValueSet.r');
      expect((await valueSetRead.get(expand)).statusCode).toBe(200);
      expectOutcome(await valueSetRead.get(lookup), 403, 'forbidden', 'forbidden');
      const codeSystemSearch = await t.client('system/CodeSystem.s');
      const looked = await codeSystemSearch.get(lookup);
      expect(looked.statusCode, looked.body).toBe(200);
      expect(param(looked, 'display')?.valueString).toBe('Male');
      // With read on ValueSet only, stored ValueSets are found by url; stored CodeSystems are not looked into.
      const storedSet = await valueSetRead.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(POLYGONS)}`);
      expectOutcome(storedSet, 422, 'not-supported', 'terminology-not-supported', SHAPES);
      const both = await t.client('system/ValueSet.s system/CodeSystem.r');
      expect(codes(await both.get(`/fhir/ValueSet/$expand?url=${encodeURIComponent(POLYGONS)}`))).toEqual([
        'polygon',
        'square',
        'triangle',
      ]);
    });
  });

  describe('bad input', () => {
    it('answers 400 with an OperationOutcome, never a 500', async () => {
      const url = encodeURIComponent(GENDER_VS);
      const bad: [string, string, unknown?][] = [
        ['GET', '/fhir/ValueSet/$expand'],
        ['GET', `/fhir/ValueSet/$expand?url=${url}&count=abc`],
        ['GET', `/fhir/ValueSet/$expand?url=${url}&count=5000`],
        ['GET', `/fhir/ValueSet/$expand?url=${url}&offset=-1`],
        ['GET', `/fhir/ValueSet/$expand?url=${url}&url=${url}`],
        ['GET', `/fhir/ValueSet/$validate-code?url=${url}`],
        ['GET', `/fhir/ValueSet/$validate-code?url=${url}&coding=x`],
        ['GET', '/fhir/CodeSystem/$lookup?code=male'],
        ['GET', '/fhir/CodeSystem/$validate-code?code=male'],
        ['POST', '/fhir/ValueSet/$expand', { resourceType: 'Patient' }],
        ['POST', '/fhir/ValueSet/$expand', { resourceType: 'Parameters', parameter: 'url' }],
        ['POST', '/fhir/ValueSet/$expand', parameters({ name: 'url', valueInteger: 3 })],
        ['POST', '/fhir/ValueSet/$expand', parameters({ name: 'valueSet', resource: { resourceType: 'CodeSystem' } })],
        [
          'POST',
          '/fhir/ValueSet/$expand',
          parameters({
            name: 'valueSet',
            resource: { resourceType: 'ValueSet', status: 'draft', compose: { include: 'x' } },
          }),
        ],
        [
          'POST',
          '/fhir/ValueSet/$validate-code',
          parameters(
            { name: 'url', valueUri: GENDER_VS },
            { name: 'code', valueCode: 'male' },
            { name: 'coding', valueCoding: { code: 'male' } },
          ),
        ],
        ['POST', '/fhir/CodeSystem/$lookup', parameters({ name: 'coding', valueCoding: { system: GENDER_CS } })],
      ];
      for (const [method, path, body] of bad) {
        const res = await fhir.request(method as 'GET' | 'POST', path, body);
        expect(res.statusCode, `${method} ${path} ${JSON.stringify(body)}: ${res.body}`).toBe(400);
        expect(res.json<Outcome>().resourceType).toBe('OperationOutcome');
      }
      expectOutcome(
        await fhir.get('/fhir/ValueSet/$expand?url=urn:test:unknown'),
        404,
        'not-found',
        'terminology-not-found',
        'urn:test:unknown',
      );
      expectOutcome(await fhir.get('/fhir/ValueSet/no-such-set/$expand'), 404, 'not-found', 'resource-not-found');
    });
  });

  it('lists the operations in the CapabilityStatement', async () => {
    const res = await fhir.get('/fhir/metadata');
    const resources = res.json<{
      rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[];
    }>().rest[0]!.resource;
    const operations = (type: string) => resources.find((r) => r.type === type)?.operation?.map((o) => o.name) ?? [];
    expect(operations('ValueSet')).toEqual(expect.arrayContaining(['expand', 'validate-code']));
    expect(operations('CodeSystem')).toEqual(expect.arrayContaining(['lookup', 'validate-code']));
    expect(resources.find((r) => r.type === 'ValueSet')?.operation).toContainEqual({
      name: 'expand',
      definition: 'http://hl7.org/fhir/OperationDefinition/ValueSet-expand',
    });
  });

  // Last: it changes what the R4 url answers for the rest of the suite.
  it('prefers a stored value set over R4 for the same url and version', async () => {
    const res = await fhir.create({
      resourceType: 'ValueSet',
      url: GENDER_VS,
      version: '4.0.1',
      status: 'active',
      compose: { include: [{ system: GENDER_CS, concept: [{ code: 'unknown' }] }] },
    });
    expect(res.statusCode, res.body).toBe(201);
    const expanded = await fhir.get(
      `/fhir/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}&valueSetVersion=4.0.1`,
    );
    expect(expanded.statusCode, expanded.body).toBe(200);
    expect(codes(expanded)).toEqual(['unknown']);
  });
});
