// Profiles over HTTP on both databases (docs/validation.md, "Profiles"): StructureDefinitions stored
// through the API and enforced on every create and update of a resource whose meta.profile names them
// (cardinality, types, fixed and pattern values, required bindings through the terminology engine,
// slicing, invariants), a differential merged over its base (R4, or a stored profile), $validate's
// `profile`, supportedProfile, and a profile changed or deleted counting from the next write.
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

const EXAMPLES = new URL('./fixtures/profiles/hl7-r4-examples/', import.meta.url);
const example = (name: string) => JSON.parse(readFileSync(new URL(name, EXAMPLES), 'utf8')) as Record<string, any>;

const SSN = 'http://hl7.org/fhir/sid/us-ssn';
const LOINC = 'http://loinc.org';

interface Outcome {
  resourceType: string;
  issue: { severity: string; code: string; diagnostics?: string; expression?: string[] }[];
}

/**
 * A profile of `type` stored as a differential of `element`, over R4's type unless `more` names another
 * `baseDefinition` (`more` adds or replaces any other field: version, kind, context).
 */
function profileOf(url: string, type: string, element: Record<string, unknown>[], more: Record<string, unknown> = {}) {
  return {
    resourceType: 'StructureDefinition',
    url,
    name: 'TestProfile',
    status: 'active',
    kind: 'resource',
    abstract: false,
    type,
    baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`,
    derivation: 'constraint',
    ...more,
    differential: { element },
  };
}

/** A Patient profile written as a differential over R4's Patient. */
function strictPatient(url: string, version = '1.0.0', genderValueSet?: string) {
  return profileOf(
    url,
    'Patient',
    [
      {
        id: 'Patient',
        path: 'Patient',
        constraint: [
          {
            key: 'sp-1',
            severity: 'error',
            human: 'A patient needs a family name',
            expression: 'name.family.exists()',
          },
        ],
      },
      { id: 'Patient.identifier', path: 'Patient.identifier', min: 1 },
      { id: 'Patient.identifier.system', path: 'Patient.identifier.system', min: 1, fixedUri: SSN },
      { id: 'Patient.birthDate', path: 'Patient.birthDate', min: 1 },
      ...(genderValueSet
        ? [
            {
              id: 'Patient.gender',
              path: 'Patient.gender',
              binding: { strength: 'required', valueSet: genderValueSet },
            },
          ]
        : []),
    ],
    { version },
  );
}

/** A blood-pressure Observation profile: a pattern on code, component sliced by code (closed), Quantity values. */
function pressureProfile(url: string) {
  const codeSlice = (name: string, code: string) => [
    { id: `Observation.component:${name}`, path: 'Observation.component', sliceName: name, min: 1, max: '1' },
    {
      id: `Observation.component:${name}.code`,
      path: 'Observation.component.code',
      patternCodeableConcept: { coding: [{ system: LOINC, code }] },
    },
  ];
  return profileOf(url, 'Observation', [
    { id: 'Observation.status', path: 'Observation.status', fixedCode: 'final' },
    {
      id: 'Observation.code',
      path: 'Observation.code',
      patternCodeableConcept: { coding: [{ system: LOINC, code: '85354-9' }] },
    },
    {
      id: 'Observation.component',
      path: 'Observation.component',
      min: 2,
      slicing: { discriminator: [{ type: 'pattern', path: 'code' }], ordered: true, rules: 'closed' },
    },
    { id: 'Observation.component.value[x]', path: 'Observation.component.value[x]', type: [{ code: 'Quantity' }] },
    ...codeSlice('systolic', '8480-6'),
    ...codeSlice('diastolic', '8462-4'),
  ]);
}

const patient = (profile: string, extra: Record<string, unknown> = {}) => ({
  resourceType: 'Patient',
  meta: { profile: [profile] },
  identifier: [{ system: SSN, value: '123-45-6789' }],
  name: [{ family: 'Chalmers', given: ['Peter'] }],
  birthDate: '1974-12-25',
  gender: 'male',
  ...extra,
});

const component = (code: string, value: unknown = { valueQuantity: { value: 120, unit: 'mmHg' } }) => ({
  code: { coding: [{ system: LOINC, code }] },
  ...(value as object),
});

const pressure = (profile: string, components: unknown[], extra: Record<string, unknown> = {}) => ({
  resourceType: 'Observation',
  meta: { profile: [profile] },
  status: 'final',
  code: { coding: [{ system: LOINC, code: '85354-9', display: 'Blood pressure panel' }], text: 'BP' },
  subject: { display: 'someone' },
  component: components,
  ...extra,
});

describe.each(BACKENDS)('profiles on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const run = randomUUID().slice(0, 8);
  const PATIENT = `http://example.org/fhir/StructureDefinition/strict-patient-${run}`;
  const PRESSURE = `http://example.org/fhir/StructureDefinition/pressure-${run}`;
  const DERIVED = `http://example.org/fhir/StructureDefinition/contactable-patient-${run}`;
  const GENDERS = `http://example.org/fhir/ValueSet/two-genders-${run}`;
  let patientProfileId: string;

  /** Stores a resource and answers its id (201 expected). */
  const store = async (resource: Record<string, unknown>) => {
    const res = await fhir.post(`/fhir/${String(resource.resourceType)}`, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string }>().id;
  };

  /** The write is refused with 401 (docs/api.md's invalid-resource) and an issue naming each `texts`. */
  const expectRefused = (res: Reply, ...texts: string[]) => {
    expect(res.statusCode, res.body).toBe(401);
    const outcome = res.json<Outcome>();
    expect(outcome.resourceType).toBe('OperationOutcome');
    const diagnostics = outcome.issue.map((i) => i.diagnostics ?? '').join('\n');
    for (const text of texts) expect(diagnostics).toContain(text);
    return outcome;
  };

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    await store({
      resourceType: 'ValueSet',
      url: GENDERS,
      status: 'active',
      compose: {
        include: [
          { system: 'http://hl7.org/fhir/administrative-gender', concept: [{ code: 'male' }, { code: 'female' }] },
        ],
      },
    });
    patientProfileId = await store(strictPatient(PATIENT, '1.0.0', GENDERS));
    await store(pressureProfile(PRESSURE));
  });
  afterAll(async () => t?.close());

  describe('a differential over R4', () => {
    it('accepts a conforming Patient and reads it back', async () => {
      const res = await fhir.post('/fhir/Patient', patient(PATIENT));
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json<{ meta: { profile: string[] } }>().meta.profile).toEqual([PATIENT]);
    });

    it('refuses a missing required element, naming the profile, the element and the rule', async () => {
      const { birthDate: _, ...noBirthDate } = patient(PATIENT);
      const outcome = expectRefused(await fhir.post('/fhir/Patient', noBirthDate), 'minimum cardinality 1, found 0');
      const issue = outcome.issue.find((i) => i.diagnostics?.includes('birthDate'))!;
      expect(issue.diagnostics).toContain(`profile ${PATIENT}|1.0.0`);
      expect(issue.diagnostics).toContain('element Patient.birthDate');
      expect(issue.code).toBe('required');
      expect(issue.expression).toEqual(['Patient.birthDate']);
    });

    it('refuses a fixed value broken, and every issue at once', async () => {
      const res = await fhir.post(
        '/fhir/Patient',
        patient(PATIENT, { identifier: [{ system: 'urn:other', value: '1' }], name: [{ given: ['Only'] }] }),
      );
      const outcome = expectRefused(res, `must be exactly "${SSN}"`, 'constraint sp-1 failed');
      expect(outcome.issue.find((i) => i.diagnostics?.includes('must be exactly'))!.expression).toEqual([
        'Patient.identifier[0].system',
      ]);
    });

    it('checks a required binding with the terminology engine, against a stored ValueSet', async () => {
      expectRefused(
        await fhir.post('/fhir/Patient', patient(PATIENT, { gender: 'other' })),
        `other is not in the required value set ${GENDERS}`,
      );
      expect((await fhir.post('/fhir/Patient', patient(PATIENT, { gender: 'female' }))).statusCode).toBe(201);
    });

    it('holds updates and PATCH to the profile too, and stores nothing refused', async () => {
      const id = await store(patient(PATIENT));
      const { birthDate: _, ...noBirthDate } = patient(PATIENT);
      expectRefused(await fhir.put(`/fhir/Patient/${id}`, { ...noBirthDate, id }), 'Patient.birthDate');
      const patch = await fhir.request(
        'PATCH',
        `/fhir/Patient/${id}`,
        JSON.stringify([{ op: 'remove', path: '/birthDate' }]),
        {
          'content-type': 'application/json-patch+json',
        },
      );
      expectRefused(patch, 'Patient.birthDate');
      const read = await fhir.get(`/fhir/Patient/${id}`);
      expect(read.json<{ birthDate: string; meta: { versionId: string } }>()).toMatchObject({
        birthDate: '1974-12-25',
        meta: { versionId: '1' },
      });
    });

    it('holds the entries of a transaction to their profiles: all or nothing', async () => {
      const family = `Tx${run}`;
      const { birthDate: _, ...noBirthDate } = patient(PATIENT, { name: [{ family }] });
      const res = await fhir.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: patient(PATIENT, { name: [{ family }] }), request: { method: 'POST', url: 'Patient' } },
          { resource: noBirthDate, request: { method: 'POST', url: 'Patient' } },
        ],
      });
      expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
      expect(res.body).toContain('Patient.birthDate');
      const found = await fhir.get(`/fhir/Patient?family=${family}`);
      expect(found.json<{ total: number }>().total).toBe(0);
    });

    it('ignores a profile it does not know on write, and warns of it in $validate', async () => {
      const unknown = `http://example.org/fhir/StructureDefinition/unknown-${run}`;
      const res = await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile: [unknown] } });
      expect(res.statusCode, res.body).toBe(201);
      const validated = await fhir.post('/fhir/Patient/$validate', {
        resourceType: 'Patient',
        meta: { profile: [unknown] },
      });
      expect(validated.statusCode).toBe(200);
      const warning = validated.json<Outcome>().issue.find((i) => i.severity === 'warning');
      expect(warning?.diagnostics).toContain(`profile ${unknown} is not known to this server`);
    });

    it('refuses a resource that names a profile of another type', async () => {
      const res = await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile: [PRESSURE] } });
      expectRefused(res, `profile ${PRESSURE} constrains Observation, not Patient`);
    });
  });

  describe('slicing and patterns', () => {
    it('accepts both slices in order', async () => {
      const res = await fhir.post('/fhir/Observation', pressure(PRESSURE, [component('8480-6'), component('8462-4')]));
      expect(res.statusCode, res.body).toBe(201);
    });

    it('refuses a missing slice, an unknown component (closed), the wrong order, a wrong value type', async () => {
      expectRefused(
        await fhir.post('/fhir/Observation', pressure(PRESSURE, [component('8480-6'), component('8480-6')])),
        'maximum cardinality 1, found 2',
        'element Observation.component:diastolic',
      );
      expectRefused(
        await fhir.post(
          '/fhir/Observation',
          pressure(PRESSURE, [component('8480-6'), component('8462-4'), component('9999-9')]),
        ),
        'matches none of the slices systolic, diastolic, and the slicing is closed',
      );
      expectRefused(
        await fhir.post('/fhir/Observation', pressure(PRESSURE, [component('8462-4'), component('8480-6')])),
        'slice systolic is out of order',
      );
      expectRefused(
        await fhir.post(
          '/fhir/Observation',
          pressure(PRESSURE, [component('8480-6', { valueString: '120' }), component('8462-4')]),
        ),
        'type string is not allowed here: Quantity',
      );
    });

    it('refuses a code that does not match the pattern, and a fixed status broken', async () => {
      const res = await fhir.post(
        '/fhir/Observation',
        pressure(PRESSURE, [component('8480-6'), component('8462-4')], {
          status: 'preliminary',
          code: { coding: [{ system: LOINC, code: '8867-4' }] },
        }),
      );
      expectRefused(res, 'Observation.status: must be exactly "final"', 'Observation.code: must match the pattern');
    });
  });

  describe('a profile derived from a stored profile', () => {
    beforeAll(async () => {
      await store(
        profileOf(
          DERIVED,
          'Patient',
          [
            { id: 'Patient.telecom', path: 'Patient.telecom', min: 1 },
            { id: 'Patient.name', path: 'Patient.name', max: '1' },
          ],
          { baseDefinition: `${PATIENT}|1.0.0` },
        ),
      );
    });

    it('holds a resource to its own rules and to its base profile', async () => {
      const ok = await fhir.post('/fhir/Patient', patient(DERIVED, { telecom: [{ system: 'phone', value: '555' }] }));
      expect(ok.statusCode, ok.body).toBe(201);
      const { birthDate: _, ...noBirthDate } = patient(DERIVED, {
        name: [{ family: 'A' }, { family: 'B' }],
      });
      expectRefused(
        await fhir.post('/fhir/Patient', noBirthDate),
        'Patient.telecom: minimum cardinality 1, found 0',
        'Patient.name: maximum cardinality 1, found 2',
        'Patient.birthDate: minimum cardinality 1, found 0',
      );
    });
  });

  describe('$validate', () => {
    it('takes profile= in the query and in a Parameters body', async () => {
      const bare = { resourceType: 'Patient', name: [{ family: 'X' }] };
      const byQuery = await fhir.post(`/fhir/Patient/$validate?profile=${encodeURIComponent(PATIENT)}`, bare);
      expect(byQuery.statusCode).toBe(200);
      const errors = byQuery.json<Outcome>().issue.filter((i) => i.severity === 'error');
      expect(errors.map((i) => i.expression?.[0])).toEqual(
        expect.arrayContaining(['Patient.identifier', 'Patient.birthDate']),
      );
      const byBody = await fhir.post('/fhir/Patient/$validate', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'resource', resource: bare },
          { name: 'profile', valueCanonical: PATIENT },
        ],
      });
      expect(byBody.json<Outcome>().issue.filter((i) => i.severity === 'error')).toHaveLength(errors.length);
      const valid = await fhir.post(`/fhir/Patient/$validate?profile=${encodeURIComponent(PATIENT)}`, patient(PATIENT));
      expect(valid.json<Outcome>().issue).toEqual([
        expect.objectContaining({ severity: 'information', code: 'informational' }),
      ]);
    });
  });

  describe('slices told apart by a required binding', () => {
    const PROBLEM = `http://example.org/fhir/StructureDefinition/problem-${run}`;
    const PROBLEM_CATEGORIES = `http://example.org/fhir/ValueSet/problem-categories-${run}`;
    const CATEGORY = 'http://terminology.hl7.org/CodeSystem/condition-category';
    const condition = (...codes: string[]) => ({
      resourceType: 'Condition',
      meta: { profile: [PROBLEM] },
      subject: { display: 'someone' },
      category: codes.map((code) => ({ coding: [{ system: CATEGORY, code }] })),
      code: { text: 'asthma' },
    });

    beforeAll(async () => {
      await store({
        resourceType: 'ValueSet',
        url: PROBLEM_CATEGORIES,
        status: 'active',
        compose: { include: [{ system: CATEGORY, concept: [{ code: 'problem-list-item' }] }] },
      });
      await store(
        profileOf(PROBLEM, 'Condition', [
          { id: 'Condition', path: 'Condition' },
          {
            id: 'Condition.category',
            path: 'Condition.category',
            slicing: { discriminator: [{ type: 'pattern', path: '$this' }], rules: 'open' },
          },
          {
            id: 'Condition.category:problem',
            path: 'Condition.category',
            sliceName: 'problem',
            min: 1,
            max: '1',
            binding: { strength: 'required', valueSet: PROBLEM_CATEGORIES },
          },
        ]),
      );
    });

    it('puts a value in the slice when its code is in the value set, and counts the slice', async () => {
      expect((await fhir.post('/fhir/Condition', condition('problem-list-item'))).statusCode).toBe(201);
      expect(
        (await fhir.post('/fhir/Condition', condition('encounter-diagnosis', 'problem-list-item'))).statusCode,
      ).toBe(201);
      expectRefused(
        await fhir.post('/fhir/Condition', condition('encounter-diagnosis')),
        'minimum cardinality 1, found 0',
        'element Condition.category:problem',
      );
      expectRefused(
        await fhir.post('/fhir/Condition', condition('problem-list-item', 'problem-list-item')),
        'maximum cardinality 1, found 2',
      );
    });
  });

  describe('value bounds', () => {
    const BOUNDED = `http://example.org/fhir/StructureDefinition/bounded-weight-${run}`;
    const weight = (value: number, code: string) => ({
      resourceType: 'Observation',
      meta: { profile: [BOUNDED] },
      status: 'final',
      code: { text: 'weight' },
      effectiveDateTime: '2024-06-15',
      valueQuantity: { value, unit: code, system: 'http://unitsofmeasure.org', code },
      note: [{ text: 'short' }],
    });

    beforeAll(async () => {
      await store(
        profileOf(BOUNDED, 'Observation', [
          { id: 'Observation', path: 'Observation' },
          {
            id: 'Observation.effective[x]',
            path: 'Observation.effective[x]',
            type: [{ code: 'dateTime' }],
            minValueDateTime: '2024-01-01',
          },
          {
            id: 'Observation.valueQuantity',
            path: 'Observation.valueQuantity',
            minValueQuantity: { value: 0.5, system: 'http://unitsofmeasure.org', code: 'kg' },
            maxValueQuantity: { value: 300, system: 'http://unitsofmeasure.org', code: 'kg' },
          },
          { id: 'Observation.note.text', path: 'Observation.note.text', maxLength: 10 },
        ]),
      );
    });

    it('holds values to minValue, maxValue (UCUM units converted) and maxLength', async () => {
      expect((await fhir.post('/fhir/Observation', weight(70, 'kg'))).statusCode).toBe(201);
      expect((await fhir.post('/fhir/Observation', weight(70_000, 'g'))).statusCode).toBe(201);
      expectRefused(
        await fhir.post('/fhir/Observation', weight(400_000, 'g')),
        'Observation.valueQuantity: must be at most {"value":300',
      );
      expectRefused(await fhir.post('/fhir/Observation', weight(400, 'g')), 'must be at least {"value":0.5');
      expectRefused(
        await fhir.post('/fhir/Observation', { ...weight(70, 'kg'), effectiveDateTime: '2023-12-31T23:00:00Z' }),
        'Observation.effectiveDateTime: must be at least "2024-01-01"',
      );
      expectRefused(
        await fhir.post('/fhir/Observation', { ...weight(70, 'kg'), note: [{ text: 'much too long' }] }),
        'Observation.note[0].text: must have at most 10 characters',
      );
    });
  });

  describe('profiles of resources inside resources', () => {
    const NAMED = `http://example.org/fhir/StructureDefinition/named-patient-${run}`;
    const BORN = `http://example.org/fhir/StructureDefinition/born-patient-${run}`;
    const BUNDLE = `http://example.org/fhir/StructureDefinition/patient-bundle-${run}`;
    const PARAMETERS = `http://example.org/fhir/StructureDefinition/either-parameters-${run}`;
    const patientProfile = (url: string, path: string, expression?: string) =>
      profileOf(url, 'Patient', [
        {
          id: 'Patient',
          path: 'Patient',
          ...(expression ? { constraint: [{ key: 'in-1', severity: 'error', human: 'in-1', expression }] } : {}),
        },
        { id: path, path, min: 1 },
      ]);
    const outerProfile = (url: string, type: string, element: Record<string, unknown>[]) =>
      profileOf(url, type, [{ id: type, path: type }, ...element]);
    const validate = async (url: string, resource: Record<string, unknown>) => {
      const res = await fhir.post(
        `/fhir/${String(resource.resourceType)}/$validate?profile=${encodeURIComponent(url)}`,
        resource,
      );
      expect(res.statusCode).toBe(200);
      return res
        .json<Outcome>()
        .issue.filter((i) => i.severity === 'error')
        .map((i) => i.diagnostics ?? '');
    };

    beforeAll(async () => {
      // %resource in the inner profile's invariant is the inner Patient, not the Bundle.
      await store(patientProfile(NAMED, 'Patient.name', "%resource.resourceType = 'Patient'"));
      await store(patientProfile(BORN, 'Patient.birthDate'));
      await store(
        outerProfile(BUNDLE, 'Bundle', [
          { id: 'Bundle.entry.resource', path: 'Bundle.entry.resource', type: [{ code: 'Patient', profile: [NAMED] }] },
        ]),
      );
      await store(
        outerProfile(PARAMETERS, 'Parameters', [
          {
            id: 'Parameters.parameter.resource',
            path: 'Parameters.parameter.resource',
            type: [{ code: 'Resource', profile: [NAMED, BORN] }],
          },
        ]),
      );
    });

    it('holds a resource element narrowed to a type and a profile: the type, the profile, its %resource', async () => {
      const entry = (resource: Record<string, unknown>) => ({ fullUrl: `urn:uuid:${randomUUID()}`, resource });
      const bundle = (...resources: Record<string, unknown>[]) => ({
        resourceType: 'Bundle',
        type: 'collection',
        entry: resources.map(entry),
      });
      expect(await validate(BUNDLE, bundle({ resourceType: 'Patient', name: [{ family: 'A' }] }))).toEqual([]);
      const wrongType = await validate(BUNDLE, bundle({ resourceType: 'Practitioner', name: [{ family: 'A' }] }));
      expect(wrongType.join('\n')).toContain('a Practitioner is not allowed here: Patient');
      const unnamed = await validate(BUNDLE, bundle({ resourceType: 'Patient', gender: 'male' }));
      expect(unnamed.join('\n')).toContain(
        `Bundle.entry[0].resource.name: minimum cardinality 1, found 0 (profile ${NAMED}`,
      );
    });

    it('takes a value that conforms to one of several profiles of its type, and refuses one that conforms to none', async () => {
      const parameters = (resource: Record<string, unknown>) => ({
        resourceType: 'Parameters',
        parameter: [{ name: 'p', resource }],
      });
      expect(await validate(PARAMETERS, parameters({ resourceType: 'Patient', name: [{ family: 'A' }] }))).toEqual([]);
      expect(await validate(PARAMETERS, parameters({ resourceType: 'Patient', birthDate: '2000-01-01' }))).toEqual([]);
      const neither = await validate(PARAMETERS, parameters({ resourceType: 'Patient', gender: 'male' }));
      expect(neither.join('\n')).toContain(`conforms to none of its profiles ${NAMED}, ${BORN}`);
    });
  });

  describe('the CapabilityStatement and changes', () => {
    type Statement = { rest: { resource: { type: string; supportedProfile?: string[] }[] }[] };
    const profilesIn = (statement: Statement, type: string) =>
      statement.rest[0].resource.find((r) => r.type === type)?.supportedProfile ?? [];
    /** The statement as a client that takes `encoding` gets it (the server keeps its compressed forms). */
    const statementIn = async (encoding: 'gzip' | 'br'): Promise<Statement> => {
      const res = await fhir.get('/fhir/metadata', { 'accept-encoding': encoding });
      expect(res.headers['content-encoding']).toBe(encoding);
      const text = (encoding === 'br' ? brotliDecompressSync : gunzipSync)(res.rawPayload).toString('utf8');
      return JSON.parse(text) as Statement;
    };

    it('lists stored profiles in supportedProfile as url|version', async () => {
      const statement = (await fhir.get('/fhir/metadata')).json<Statement>();
      expect(profilesIn(statement, 'Patient')).toContain(`${PATIENT}|1.0.0`);
      expect(profilesIn(statement, 'Observation')).toContain(PRESSURE);
      expect(profilesIn(statement, 'Observation')).not.toContain(`${PATIENT}|1.0.0`);
      // Its date is when it was last made (the other database's server in this process makes its own).
      const undated = (s: Statement) => ({ ...s, date: undefined });
      expect(undated(await statementIn('gzip'))).toEqual(undated(statement));
      expect(undated(await statementIn('br'))).toEqual(undated(statement));
    });

    it('applies a profile updated or deleted from the next write on', async () => {
      const loose = strictPatient(PATIENT, '1.0.0', GENDERS);
      loose.differential.element = loose.differential.element.filter((e) => e.path !== 'Patient.birthDate');
      const updated = await fhir.put(`/fhir/StructureDefinition/${patientProfileId}`, {
        ...loose,
        id: patientProfileId,
      });
      expect(updated.statusCode, updated.body).toBe(200);
      const { birthDate: _, ...noBirthDate } = patient(PATIENT);
      expect((await fhir.post('/fhir/Patient', noBirthDate)).statusCode).toBe(201);
      expectRefused(await fhir.post('/fhir/Patient', { ...noBirthDate, identifier: undefined }), 'Patient.identifier');

      expect((await fhir.delete(`/fhir/StructureDefinition/${patientProfileId}`)).statusCode).toBe(204);
      const after = await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile: [PATIENT] } });
      expect(after.statusCode, after.body).toBe(201);
      // The compressed forms kept of the statement follow it: the deleted profile is gone from them too.
      for (const encoding of ['gzip', 'br'] as const) {
        expect(profilesIn(await statementIn(encoding), 'Patient').join()).not.toContain(PATIENT);
        expect(profilesIn(await statementIn(encoding), 'Observation')).toContain(PRESSURE);
      }
    });
  });

  describe('abuse', () => {
    /** A Patient profile over R4 with these differential elements. */
    const profileWith = (url: string, element: Record<string, unknown>[], base?: string) =>
      profileOf(
        url,
        'Patient',
        element.some((e) => e.id === 'Patient') ? element : [{ id: 'Patient', path: 'Patient' }, ...element],
        base ? { baseDefinition: base } : {},
      );
    const invariant = (key: string, expression: string) => ({
      id: 'Patient',
      path: 'Patient',
      constraint: [{ key, severity: 'error', human: key, expression }],
    });
    const warnings = async (profile: string) => {
      const res = await fhir.post(`/fhir/Patient/$validate?profile=${encodeURIComponent(profile)}`, {
        resourceType: 'Patient',
      });
      return res
        .json<Outcome>()
        .issue.filter((i) => i.severity === 'warning')
        .map((i) => i.diagnostics ?? '');
    };

    it('runs a profile invariant under the request FHIRPath budget: 422, nothing stored', async () => {
      const url = `http://example.org/fhir/StructureDefinition/quadratic-${run}`;
      await store(
        profileWith(url, [invariant('q-1', 'name.given.all(%resource.name.given.all(%resource.name.given.exists()))')]),
      );
      const family = `Costly${run}`;
      const res = await fhir.post('/fhir/Patient', {
        resourceType: 'Patient',
        meta: { profile: [url] },
        name: [{ family, given: Array.from({ length: 1000 }, (_, i) => `g${i}`) }],
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json<Outcome>().issue[0].code).toBe('too-costly');
      expect((await fhir.get(`/fhir/Patient?family=${family}`)).json<{ total: number }>().total).toBe(0);
    });

    it('skips an invariant the guard refuses (descendants(), |), and $validate says so', async () => {
      const url = `http://example.org/fhir/StructureDefinition/unsupported-${run}`;
      await store(
        profileWith(url, [
          {
            id: 'Patient',
            path: 'Patient',
            constraint: [
              { key: 'u-1', severity: 'error', human: 'u-1', expression: 'descendants().exists()' },
              { key: 'u-2', severity: 'error', human: 'u-2', expression: '(name | telecom).exists()' },
            ],
          },
        ]),
      );
      expect((await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile: [url] } })).statusCode).toBe(
        201,
      );
      const said = await warnings(url);
      expect(said.join('\n')).toContain('constraint u-1 of Patient');
      expect(said.join('\n')).toContain('constraint u-2 of Patient');
    });

    it('refuses more than 20 profiles on one resource with 400', async () => {
      const profile = Array.from({ length: 21 }, (_, i) => `http://example.org/fhir/StructureDefinition/many-${i}`);
      const res = await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile } });
      expect(res.statusCode).toBe(400);
      expect(res.json<Outcome>().issue[0].diagnostics).toContain('at most 20 profiles');
    });

    it('ignores profiles whose bases form a cycle, and names the cycle in $validate', async () => {
      const a = `http://example.org/fhir/StructureDefinition/cycle-a-${run}`;
      const b = `http://example.org/fhir/StructureDefinition/cycle-b-${run}`;
      await store(profileWith(a, [{ id: 'Patient.gender', path: 'Patient.gender', min: 1 }], b));
      await store(profileWith(b, [{ id: 'Patient.birthDate', path: 'Patient.birthDate', min: 1 }], a));
      expect((await fhir.post('/fhir/Patient', { resourceType: 'Patient', meta: { profile: [a] } })).statusCode).toBe(
        201,
      );
      expect((await warnings(a)).join('\n')).toContain(`${a} → ${b} → ${a}`);
    });

    it('refuses to store a profile of a type that is not R4 (422), and stores nothing', async () => {
      const url = `http://example.org/fhir/StructureDefinition/unreadable-${run}`;
      const res = await fhir.post('/fhir/StructureDefinition', {
        ...profileWith(url, []),
        type: 'Spaceship',
        differential: { element: [{ id: 'Spaceship', path: 'Spaceship' }] },
      });
      expect(res.statusCode, res.body).toBe(422);
      const issue = res.json<Outcome>().issue[0];
      expect(issue.diagnostics).toContain('"Spaceship" is none');
      expect(issue.expression).toEqual(['StructureDefinition.type']);
      const found = await fhir.get(`/fhir/StructureDefinition?url=${encodeURIComponent(url)}`);
      expect(found.json<{ total: number }>().total).toBe(0);
    });

    it('bounds the values and slices one check visits: 422, nothing stored', async () => {
      const extension = `http://example.org/fhir/StructureDefinition/flag-${run}`;
      await store(
        profileOf(
          extension,
          'Extension',
          [
            { id: 'Extension', path: 'Extension' },
            { id: 'Extension.url', path: 'Extension.url', fixedUri: extension },
            { id: 'Extension.value[x]', path: 'Extension.value[x]', type: [{ code: 'boolean' }] },
          ],
          { kind: 'complex-type', context: [{ type: 'element', expression: 'Patient' }] },
        ),
      );
      // 50 slices told apart by profile: each value is walked against the extension profile per slice.
      const url = `http://example.org/fhir/StructureDefinition/many-slices-${run}`;
      await store(
        profileWith(url, [
          {
            id: 'Patient.extension',
            path: 'Patient.extension',
            slicing: { discriminator: [{ type: 'profile', path: '$this' }], rules: 'open' },
          },
          ...Array.from({ length: 50 }, (_, i) => ({
            id: `Patient.extension:s${i}`,
            path: 'Patient.extension',
            sliceName: `s${i}`,
            type: [{ code: 'Extension', profile: [extension] }],
          })),
        ]),
      );
      const family = `Slices${run}`;
      const res = await fhir.post('/fhir/Patient', {
        resourceType: 'Patient',
        meta: { profile: [url] },
        name: [{ family }],
        extension: Array.from({ length: 10_000 }, () => ({ url: 'urn:other', valueBoolean: true })),
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json<Outcome>().issue[0].diagnostics).toContain('more than 1000000 steps');
      expect((await fhir.get(`/fhir/Patient?family=${family}`)).json<{ total: number }>().total).toBe(0);
    });

    it('enforces profiles for a writer that may not read StructureDefinitions or ValueSets', async () => {
      const writer = await t.client('system/Observation.cruds');
      expectRefused(
        await writer.post('/fhir/Observation', pressure(PRESSURE, [component('8480-6')])),
        'element Observation.component:diastolic',
      );
      expect((await writer.get('/fhir/StructureDefinition')).statusCode).toBe(403);
    });
  });

  describe('the R4 vital signs profiles (hl7.fhir.r4.examples, CC0)', () => {
    const vitalsigns = example('StructureDefinition-vitalsigns.json');
    const heartrate = example('StructureDefinition-heartrate.json');
    const bp = example('StructureDefinition-bp.json');
    const HEART = `http://example.org/fhir/StructureDefinition/heartrate-from-differential-${run}`;

    beforeAll(async () => {
      // Stored under their own urls; a second heart rate profile with the differential alone, whose
      // snapshot the server generates from the stored vital signs profile.
      for (const sd of [vitalsigns, heartrate, bp]) {
        const { id: _, ...rest } = sd;
        const res = await fhir.put(`/fhir/StructureDefinition?url=${encodeURIComponent(String(sd.url))}`, rest);
        expect([200, 201], res.body).toContain(res.statusCode);
      }
      const { id: _, snapshot: __, text: ___, ...differentialOnly } = heartrate;
      await store({ ...differentialOnly, url: HEART });
    });

    it('accepts the spec examples that claim them', async () => {
      for (const name of ['Observation-heart-rate.json', 'Observation-blood-pressure.json', 'Observation-bmi.json']) {
        const { id: _, ...resource } = example(name);
        const res = await fhir.post('/fhir/Observation', resource);
        expect(res.statusCode, `${name}: ${res.body}`).toBe(201);
      }
    });

    it('gives the same verdicts from the generated snapshot as from the published one', async () => {
      const { id: _, ...rate } = example('Observation-heart-rate.json');
      const broken: [string, Record<string, unknown>][] = [
        ['conforming', rate],
        ['no LOINC code', { ...rate, code: { coding: [{ system: LOINC, code: '1234-5' }] } }],
        [
          'no value unit code',
          { ...rate, valueQuantity: { value: 44, unit: 'beats/minute', system: 'http://unitsofmeasure.org' } },
        ],
        ['wrong unit', { ...rate, valueQuantity: { ...rate.valueQuantity, code: 'mm' } }],
        ['no category', { ...rate, category: undefined }],
        ['no subject', { ...rate, subject: undefined }],
        ['a string value', { ...rate, valueQuantity: undefined, valueString: 'fast' }],
      ];
      for (const [name, resource] of broken) {
        const verdicts = [];
        for (const url of [String(heartrate.url), HEART]) {
          const res = await fhir.post(`/fhir/Observation/$validate?profile=${encodeURIComponent(url)}`, {
            ...resource,
            meta: undefined,
          });
          const errors = res.json<Outcome>().issue.filter((i) => i.severity === 'error');
          verdicts.push(errors.map((i) => i.diagnostics!.replace(url, 'PROFILE').replace(/\|4\.0\.1/, '')).sort());
        }
        expect(verdicts[1], name).toEqual(verdicts[0]);
        if (name === 'conforming') expect(verdicts[0]).toEqual([]);
        else expect(verdicts[0].length, name).toBeGreaterThan(0);
      }
    });

    it('accepts a blood pressure with both components, and refuses one without its diastolic', async () => {
      // bp tells its components apart by code.coding.code, which it fixes in a slice of code.coding.
      const { id: _, ...resource } = example('Observation-blood-pressure.json');
      const complete = { ...resource, meta: { profile: [String(bp.url)] } };
      const ok = await fhir.post('/fhir/Observation', complete);
      expect(ok.statusCode, ok.body).toBe(201);
      const res = await fhir.post('/fhir/Observation', { ...complete, component: resource.component.slice(0, 1) });
      const outcome = expectRefused(res, 'element Observation.component:DiastolicBP');
      expect(outcome.issue.map((i) => i.diagnostics).join('\n')).not.toContain('SystolicBP');
    });
  });
});
