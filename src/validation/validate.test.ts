import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { validateResource, type ValidationIssue } from './validate.js';

const registry = loadR4Definitions();

function issuesOf(resource: unknown): ValidationIssue[] {
  return validateResource(resource, registry);
}

/** The (expression, code) pairs of the errors, which is what each rule below pins down. */
function errorsOf(resource: unknown): [string, string][] {
  return issuesOf(resource)
    .filter((i) => i.severity === 'error')
    .map((i) => [i.expression, i.code]);
}

const patient = (extra: Record<string, unknown>) => ({ resourceType: 'Patient', ...extra });

describe('resource type', () => {
  it('accepts a minimal valid resource', () => {
    expect(issuesOf({ resourceType: 'Patient', id: 'p1', gender: 'female' })).toEqual([]);
  });

  it('requires resourceType', () => {
    expect(errorsOf({ id: 'x' })).toEqual([['Resource.resourceType', 'required']]);
  });

  it('rejects a type that is not an R4 resource', () => {
    expect(errorsOf({ resourceType: 'Patientt' })).toEqual([['Resource.resourceType', 'invalid']]);
    expect(errorsOf({ resourceType: 'SubscriptionStatus' })).toEqual([['Resource.resourceType', 'invalid']]);
    expect(errorsOf({ resourceType: 'DomainResource' })).toEqual([['Resource.resourceType', 'invalid']]);
  });

  it('rejects input that is not a JSON object', () => {
    expect(errorsOf([{ resourceType: 'Patient' }])).toEqual([['Resource', 'invalid']]);
    expect(errorsOf('Patient')).toEqual([['Resource', 'invalid']]);
  });
});

describe('unknown elements', () => {
  it('reports a property the type does not define', () => {
    expect(errorsOf(patient({ unknownElement: true }))).toEqual([['Patient.unknownElement', 'structure']]);
    expect(errorsOf(patient({ fhir_comments: ['x'] }))).toEqual([['Patient.fhir_comments', 'structure']]);
  });

  it('reports unknown properties inside data types and backbone elements', () => {
    expect(errorsOf(patient({ name: [{ family: 'Doe', nickname: 'J' }] }))).toEqual([
      ['Patient.name[0].nickname', 'structure'],
    ]);
    expect(errorsOf(patient({ contact: [{ name: { family: 'Doe' }, colour: 'red' }] }))).toEqual([
      ['Patient.contact[0].colour', 'structure'],
    ]);
  });

  it('reports a choice element with a type it does not allow', () => {
    const issues = issuesOf(observation({ valueFoo: 1 }));
    expect(issues.map((i) => [i.expression, i.code])).toEqual([['Observation.valueFoo', 'structure']]);
    expect(issues[0].diagnostics).toContain('value[x]');
  });

  it('reports two types given for one choice element', () => {
    expect(errorsOf(observation({ valueString: 'a', valueQuantity: { value: 1 } }))).toEqual([
      ['Observation.value[x]', 'structure'],
    ]);
  });

  it('reports resourceType inside a data type', () => {
    expect(errorsOf(patient({ name: [{ resourceType: 'HumanName', family: 'Doe' }] }))).toEqual([
      ['Patient.name[0].resourceType', 'structure'],
    ]);
  });
});

function observation(extra: Record<string, unknown>) {
  return { resourceType: 'Observation', status: 'final', code: { text: 'x' }, ...extra };
}

describe('cardinality', () => {
  it('reports a missing required element with its minimum', () => {
    const issues = issuesOf({ resourceType: 'Appointment', participant: [{ status: 'accepted', type: [] }] });
    const status = issues.find((i) => i.expression === 'Appointment.status');
    expect(status).toMatchObject({ code: 'required', rule: 'base', severity: 'error' });
    expect(status?.diagnostics).toBe('Appointment.status: minimum cardinality 1, found 0');
  });

  it('reports a missing required choice element by its [x] name', () => {
    expect(errorsOf({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', subject: {} })).toEqual([
      ['MedicationRequest.medication[x]', 'required'],
      ['MedicationRequest.subject', 'structure'],
    ]);
  });

  it('reports an array where the element holds one value', () => {
    expect(errorsOf(patient({ gender: ['male'] }))).toEqual([['Patient.gender', 'structure']]);
    expect(errorsOf(patient({ maritalStatus: [{ text: 'x' }] }))).toEqual([['Patient.maritalStatus', 'structure']]);
  });

  it('reports a single value where the element is a list', () => {
    expect(errorsOf(patient({ name: { family: 'Doe' } }))).toEqual([['Patient.name', 'structure']]);
    expect(errorsOf(patient({ name: [{ given: 'John' }] }))).toEqual([['Patient.name[0].given', 'structure']]);
  });

  it('reports an element that a constraint profile forbids (SimpleQuantity.comparator)', () => {
    const errors = errorsOf(observation({ referenceRange: [{ low: { value: 1, comparator: '<' } }] }));
    expect(errors).toEqual([
      ['Observation.referenceRange[0].low.comparator', 'structure'],
      ['Observation.referenceRange[0].low', 'invariant'],
    ]);
  });
});

describe('primitive types', () => {
  it.each([
    ['boolean as a string', { active: 'true' }, 'Patient.active', 'structure'],
    ['date with a bad format', { birthDate: 'not a date' }, 'Patient.birthDate', 'value'],
    ['date with a month out of range', { birthDate: '1990-13-01' }, 'Patient.birthDate', 'value'],
    [
      'dateTime with a time but no zone',
      { deceasedDateTime: '2020-11-11T10:58:14' },
      'Patient.deceasedDateTime',
      'value',
    ],
    ['integer with a fraction', { multipleBirthInteger: 1.5 }, 'Patient.multipleBirthInteger', 'value'],
    ['integer beyond 32 bits', { multipleBirthInteger: 2147483648 }, 'Patient.multipleBirthInteger', 'value'],
    ['integer as a string', { multipleBirthInteger: '2' }, 'Patient.multipleBirthInteger', 'structure'],
    ['id with an underscore', { id: 'bad_id' }, 'Patient.id', 'value'],
    ['id longer than 64', { id: 'a'.repeat(65) }, 'Patient.id', 'value'],
    ['uri with a space', { implicitRules: 'http://a b' }, 'Patient.implicitRules', 'value'],
    ['code with two spaces', { gender: 'fe  male' }, 'Patient.gender', 'value'],
    ['empty string', { gender: '' }, 'Patient.gender', 'value'],
  ])('rejects %s', (_name, extra, expression, code) => {
    expect(errorsOf(patient(extra))).toEqual([[expression, code]]);
  });

  it('accepts the formats the spec allows', () => {
    const resource = patient({
      id: 'A-z.0',
      birthDate: '1990',
      deceasedDateTime: '2020-02-29T23:59:60.123+14:00',
      multipleBirthInteger: -2147483648,
      name: [{ given: ['Ann\u00a0Marie'] }],
      meta: { lastUpdated: '2020-01-01T00:00:00Z', versionId: '1', source: 'urn:uuid:x' },
    });
    expect(issuesOf(resource)).toEqual([]);
  });

  it.each([
    [
      'instant without a time zone',
      patient({ meta: { lastUpdated: '2020-01-01T00:00:00' } }),
      'Patient.meta.lastUpdated',
    ],
    ['canonical with whitespace', patient({ meta: { profile: ['http://x y'] } }), 'Patient.meta.profile[0]'],
    ['decimal as a string', observation({ valueQuantity: { value: '1.0' } }), 'Observation.valueQuantity.value'],
    ['time without seconds', observation({ valueTime: '10:30' }), 'Observation.valueTime'],
    [
      'positiveInt of 0',
      observation({ valueSampledData: sampled({ dimensions: 0 }) }),
      'Observation.valueSampledData.dimensions',
    ],
    ['unsignedInt below 0', patient({ photo: [{ size: -1 }] }), 'Patient.photo[0].size'],
    [
      'base64Binary with a bad character',
      patient({ photo: [{ contentType: 'image/png', data: '%%%2@()()' }] }),
      'Patient.photo[0].data',
    ],
    [
      'oid without urn:oid:',
      patient({ extension: [{ url: 'http://example.org/x', valueOid: '1.2.3' }] }),
      'Patient.extension[0].valueOid',
    ],
    [
      'uuid in upper case',
      patient({
        extension: [{ url: 'http://example.org/x', valueUuid: 'urn:uuid:A0B1C2D3-0000-0000-0000-000000000000' }],
      }),
      'Patient.extension[0].valueUuid',
    ],
  ])('rejects %s', (_name, resource, expression) => {
    expect(errorsOf(resource)).toEqual([[expression, expect.stringMatching(/^(value|structure)$/)]]);
  });

  it('warns, without rejecting, on a whitespace-only string', () => {
    expect(issuesOf(patient({ name: [{ family: '   ' }] }))).toEqual([
      expect.objectContaining({ severity: 'warning', expression: 'Patient.name[0].family', code: 'value' }),
    ]);
  });

  it('accepts base64 with line breaks, and checks the Attachment size against it', () => {
    const photo = (data: string, size: number) => patient({ photo: [{ contentType: 'text/plain', data, size }] });
    expect(errorsOf(photo('SGVs\r\nbG8=', 5))).toEqual([]);
    expect(errorsOf(photo('SGVsbG8=', 100))).toEqual([['Patient.photo[0].size', 'value']]);
  });
});

function sampled(extra: Record<string, unknown>) {
  return { origin: { value: 0 }, period: 1, ...extra };
}

describe('JSON representation rules (json.html, ele-1)', () => {
  it('rejects empty objects, arrays and nulls', () => {
    expect(errorsOf(patient({ maritalStatus: {} }))).toEqual([['Patient.maritalStatus', 'structure']]);
    expect(errorsOf(patient({ name: [] }))).toEqual([['Patient.name', 'structure']]);
    expect(errorsOf(patient({ gender: null }))).toEqual([['Patient.gender', 'structure']]);
    expect(errorsOf(patient({ name: [null] }))).toEqual([['Patient.name[0]', 'structure']]);
  });

  it('rejects an element that holds only an id (ele-1)', () => {
    const issues = issuesOf(patient({ maritalStatus: { id: 'x' } }));
    expect(issues.map((i) => [i.expression, i.code, i.rule])).toEqual([
      ['Patient.maritalStatus', 'invariant', 'invariant'],
    ]);
  });
});

describe('primitive extensions (_name)', () => {
  const ext = { extension: [{ url: 'http://example.org/x', valueString: 'y' }] };

  it('accepts an extension sibling, alone or beside a value', () => {
    expect(issuesOf(patient({ birthDate: '1990-01-01', _birthDate: ext }))).toEqual([]);
    expect(issuesOf(patient({ _birthDate: ext }))).toEqual([]);
  });

  it('accepts nulls that line up with extensions in primitive arrays', () => {
    expect(issuesOf(patient({ name: [{ given: ['A', null], _given: [null, ext] }] }))).toEqual([]);
  });

  it('rejects a null without an extension at the same index', () => {
    expect(errorsOf(patient({ name: [{ given: ['A', null] }] }))).toEqual([['Patient.name[0].given[1]', 'structure']]);
    expect(errorsOf(patient({ name: [{ given: ['A', null], _given: [ext, null] }] }))).toEqual([
      ['Patient.name[0].given[1]', 'structure'],
      ['Patient.name[0].given[1]', 'structure'],
    ]);
  });

  it('rejects misaligned arrays and wrong JSON types', () => {
    expect(errorsOf(patient({ name: [{ given: ['A', 'B'], _given: [ext] }] }))).toEqual([
      ['Patient.name[0].given', 'structure'],
    ]);
    expect(errorsOf(patient({ birthDate: '1990', _birthDate: 'x' }))).toEqual([['Patient.birthDate', 'structure']]);
  });

  it('validates the content of the extension sibling', () => {
    expect(errorsOf(patient({ _birthDate: { value: 0 } }))).toEqual([['Patient.birthDate.value', 'structure']]);
  });

  it('rejects an extension sibling of a complex element', () => {
    expect(errorsOf(patient({ _name: ext }))).toEqual([['Patient._name', 'structure']]);
  });
});

describe('required value sets', () => {
  it('rejects a code outside a required binding', () => {
    const issues = issuesOf(patient({ gender: 'fem' }));
    expect(issues.map((i) => [i.expression, i.code, i.rule])).toEqual([['Patient.gender', 'code-invalid', 'base']]);
    expect(errorsOf({ resourceType: 'Observation', status: 'done', code: { text: 'x' } })).toEqual([
      ['Observation.status', 'code-invalid'],
    ]);
  });

  it('checks bound codes inside data types', () => {
    expect(errorsOf(patient({ name: [{ use: 'nick' }] }))).toEqual([['Patient.name[0].use', 'code-invalid']]);
  });

  it('checks Coding and CodeableConcept codes only when the system is the value set’s', () => {
    const languages = 'urn:ietf:bcp:47';
    const bad = { system: 'http://hl7.org/fhir/contact-point-system', code: 'telepathy' };
    expect(
      errorsOf(patient({ communication: [{ language: { coding: [{ system: languages, code: 'xx' }] } }] })),
    ).toEqual([]);
    const group = {
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [bad] }],
    };
    expect(errorsOf(group)).toEqual([]); // Communication.category is bound by example: not checked
    const statement = {
      resourceType: 'AllergyIntolerance',
      patient: { reference: 'Patient/1' },
      clinicalStatus: {
        coding: [
          { system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'gone' },
          { system: 'http://example.org/local', code: 'gone' },
        ],
      },
    };
    expect(errorsOf(statement)).toEqual([['AllergyIntolerance.clinicalStatus.coding[0].code', 'code-invalid']]);
  });
});

describe('references', () => {
  it('rejects a relative reference to a type the element does not allow', () => {
    const issues = issuesOf(observation({ subject: { reference: 'Medication/123' } }));
    expect(issues.map((i) => [i.expression, i.code])).toEqual([['Observation.subject.reference', 'structure']]);
  });

  it('accepts allowed targets, versioned references, absolute URLs and Reference(Any)', () => {
    expect(errorsOf(observation({ subject: { reference: 'Patient/123/_history/2' } }))).toEqual([]);
    expect(errorsOf(observation({ subject: { reference: 'http://other.org/fhir/Medication/1' } }))).toEqual([]);
    expect(errorsOf(observation({ focus: [{ reference: 'Medication/123' }] }))).toEqual([]);
  });
});

describe('contained resources', () => {
  const containedPatient = { resourceType: 'Patient', id: 'p1', gender: 'female' };

  it('validates each contained resource as its own type', () => {
    const resource = observation({
      contained: [{ ...containedPatient, gender: 'fem' }],
      subject: { reference: '#p1' },
    });
    expect(errorsOf(resource)).toEqual([['Observation.contained[0].gender', 'code-invalid']]);
  });

  it('rejects nested contained resources (dom-2)', () => {
    const nested = { ...containedPatient, contained: [{ resourceType: 'Organization', id: 'o1', name: 'x' }] };
    const resource = observation({ contained: [nested], subject: { reference: '#p1' } });
    expect(errorsOf(resource)).toContainEqual(['Observation', 'invariant']);
  });

  it('rejects a contained resource that nothing refers to (dom-3)', () => {
    const issues = issuesOf(observation({ contained: [containedPatient] }));
    expect(issues.map((i) => [i.expression, i.code, i.rule])).toEqual([
      ['Observation.contained[0]', 'invariant', 'invariant'],
    ]);
    expect(issues[0].diagnostics).toContain('dom-3');
  });

  it('validates resources inside Bundle entries', () => {
    const bundle = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient({ gender: 'x' }) }] };
    expect(errorsOf(bundle)).toEqual([['Bundle.entry[0].resource.gender', 'code-invalid']]);
  });
});

describe('recursive elements (contentReference)', () => {
  it('validates Questionnaire.item.item with the rules of Questionnaire.item', () => {
    const questionnaire = {
      resourceType: 'Questionnaire',
      status: 'draft',
      item: [{ linkId: '1', type: 'group', item: [{ type: 'string' }, { linkId: '1.2', type: 'bogus' }] }],
    };
    expect(errorsOf(questionnaire)).toEqual([
      ['Questionnaire.item[0].item[0].linkId', 'required'],
      ['Questionnaire.item[0].item[1].type', 'code-invalid'],
    ]);
  });
});

describe('extensions', () => {
  it('validates value[x] of an extension', () => {
    const errors = errorsOf(patient({ extension: [{ url: 'http://example.org/x', valueDate: '2020-1-1' }] }));
    expect(errors).toEqual([['Patient.extension[0].valueDate', 'value']]);
  });

  it('requires a url, and either a value or nested extensions (ext-1)', () => {
    expect(errorsOf(patient({ extension: [{ valueString: 'x' }] }))).toEqual([
      ['Patient.extension[0].url', 'required'],
    ]);
    expect(errorsOf(patient({ extension: [{ url: 'http://example.org/x' }] }))).toEqual([
      ['Patient.extension[0]', 'invariant'],
    ]);
  });
});

describe('invariants', () => {
  it('reports a failed element invariant with its key', () => {
    const issues = issuesOf(patient({ contact: [{ gender: 'male' }] }));
    expect(issues.map((i) => [i.expression, i.code, i.rule])).toEqual([
      ['Patient.contact[0]', 'invariant', 'invariant'],
    ]);
    expect(issues[0].diagnostics).toContain('pat-1');
  });

  it('reports a failed data type invariant (per-1 on Period)', () => {
    const encounter = {
      resourceType: 'Encounter',
      status: 'finished',
      class: { code: 'AMB' },
      period: { start: '2020-02-01', end: '2020-01-01' },
    };
    expect(errorsOf(encounter)).toEqual([['Encounter.period', 'invariant']]);
  });

  it('does not reject when an invariant cannot be decided (different precisions compare as empty)', () => {
    const encounter = {
      resourceType: 'Encounter',
      status: 'finished',
      class: { code: 'AMB' },
      period: { start: '2023-06-21', end: '2023-06-21T06:20:00Z' },
    };
    expect(errorsOf(encounter)).toEqual([]);
  });

  it('reports a resource-level invariant', () => {
    const errors = errorsOf({
      resourceType: 'RiskAssessment',
      status: 'final',
      subject: { reference: 'Patient/1' },
      prediction: [{ probabilityDecimal: 101 }],
    });
    expect(errors).toEqual([['RiskAssessment.prediction[0]', 'invariant']]);
  });

  it('reports a local reference to a missing contained resource (ref-1)', () => {
    expect(errorsOf(observation({ subject: { reference: '#nowhere' } }))).toEqual([
      ['Observation.subject', 'invariant'],
    ]);
  });
});

describe('collecting every issue', () => {
  it('reports all problems of a resource in one pass', () => {
    const resource = {
      resourceType: 'Patient',
      id: 'bad id',
      gender: 'fem',
      birthDate: '1990-02-30T00:00',
      name: [{ family: '' }],
      contact: [{}],
      colour: 'red',
    };
    expect(errorsOf(resource)).toEqual([
      ['Patient.colour', 'structure'],
      ['Patient.id', 'value'],
      ['Patient.name[0].family', 'value'],
      ['Patient.gender', 'code-invalid'],
      ['Patient.birthDate', 'value'],
      ['Patient.contact[0]', 'structure'],
    ]);
  });
});
