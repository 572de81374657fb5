// The hand-made resources behind the table-driven search suite (search-table.int.test.ts). Each one
// exists to exercise a type, prefix or modifier; the expected ids of every query are worked out from
// these by hand (never by running the engine), so keep the table in step when you change one.
import type { FhirResource } from '../../src/storage/store.js';

export const TEST_BASE = 'http://127.0.0.1:8080/fhir';

const UCUM = 'http://unitsofmeasure.org';
const LOINC = 'http://loinc.org';
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

const tag = (code: string) => ({ tag: [{ system: 'http://example.org/tags', code }] });

export const FIXTURE: readonly (FhirResource & { id: string })[] = [
  // --- Patients -------------------------------------------------------------------------------
  {
    resourceType: 'Patient',
    id: 'p1',
    meta: { ...tag('a'), profile: ['http://example.org/StructureDefinition/p1'], source: 'http://source.example/a' },
    identifier: [
      {
        system: 'http://hospital.example/mrn',
        value: 'MRN1',
        type: { coding: [{ system: V2_0203, code: 'MR' }], text: 'Medical record number' },
      },
      { system: 'http://hl7.org/fhir/sid/us-ssn', value: '999-11-2222' },
    ],
    active: true,
    name: [{ use: 'official', family: 'Smith', given: ['John', 'Quincy'], prefix: ['Mr.'] }],
    telecom: [
      { system: 'email', value: 'john@example.org' },
      { system: 'phone', value: '555-1000' },
    ],
    gender: 'male',
    birthDate: '1980-05-15',
    deceasedBoolean: false,
    address: [
      { use: 'home', line: ['1 Main Street'], city: 'Springfield', state: 'IL', postalCode: '12345', country: 'US' },
    ],
    generalPractitioner: [{ reference: 'Practitioner/pr1' }],
    managingOrganization: { reference: 'Organization/o1' },
  },
  {
    resourceType: 'Patient',
    id: 'p2',
    meta: {
      ...tag('b'),
      security: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-Confidentiality', code: 'R' }],
    },
    identifier: [{ system: 'http://hospital.example/mrn', value: 'MRN2' }],
    active: false,
    name: [{ family: 'Smythe', given: ['Jane'] }],
    telecom: [{ system: 'phone', value: '555-2000' }],
    gender: 'female',
    birthDate: '1980',
    address: [{ line: ['2 Oak Avenue'], city: 'Shelbyville', state: 'IL', postalCode: '12346', country: 'US' }],
    generalPractitioner: [{ reference: `${TEST_BASE}/Practitioner/pr2` }],
    managingOrganization: { reference: 'Organization/o2' },
  },
  {
    resourceType: 'Patient',
    id: 'p3',
    identifier: [
      {
        system: 'http://other.example/ids',
        value: 'MRN1',
        type: { coding: [{ system: V2_0203, code: 'DL' }] },
      },
    ],
    name: [{ family: 'Chloé', given: ['Zoë'] }],
    gender: 'female',
    birthDate: '1975-12-31',
    deceasedDateTime: '2020-03-04T10:00:00Z',
    address: [{ city: 'São Paulo', country: 'BR', postalCode: '01000-000' }],
    managingOrganization: { reference: 'Organization/o2' },
  },
  {
    resourceType: 'Patient',
    id: 'p4',
    meta: tag('a'),
    name: [{ family: 'Müller', given: ['Jürgen'] }],
    gender: 'male',
    birthDate: '1990-02',
    link: [{ other: { reference: 'Patient/p1' }, type: 'seealso' }],
  },
  {
    resourceType: 'Patient',
    id: 'p5',
    name: [{ text: 'Dr. Who' }],
    gender: 'unknown',
  },
  {
    resourceType: 'Patient',
    id: 'p6',
    identifier: [{ system: 'http://hospital.example/mrn', value: 'A|B,C' }],
    name: [{ family: "O'Brien, Jr", given: ['Seán'] }],
    gender: 'other',
    birthDate: '2000-01-01',
    address: [{ line: ['100% Real_Street'], city: 'Dublin', postalCode: 'D01' }],
  },

  // --- Practitioners, organisations, others ----------------------------------------------------
  {
    resourceType: 'Practitioner',
    id: 'pr1',
    identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: '1111111111' }],
    name: [{ family: 'House', given: ['Gregory'], prefix: ['Dr.'] }],
    gender: 'male',
    address: [{ city: 'Princeton', state: 'NJ', postalCode: '08540' }],
  },
  {
    resourceType: 'Practitioner',
    id: 'pr2',
    identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: '2222222222' }],
    name: [{ family: 'Quinn', given: ['Michaela'] }],
    gender: 'female',
  },
  {
    resourceType: 'PractitionerRole',
    id: 'prr1',
    practitioner: { reference: 'Practitioner/pr1' },
    organization: { reference: 'Organization/o1' },
  },
  {
    resourceType: 'RelatedPerson',
    id: 'rp1',
    patient: { reference: 'Patient/p1' },
    name: [{ family: 'Smith', given: ['Mary'] }],
  },
  {
    resourceType: 'Organization',
    id: 'o1',
    name: 'Acme Hospital',
    identifier: [{ system: 'http://org.example', value: 'ACME' }],
    address: [{ city: 'Springfield', postalCode: '12345' }],
  },
  {
    resourceType: 'Organization',
    id: 'o2',
    name: 'Beta Clinic',
    partOf: { reference: 'Organization/o1' },
  },
  {
    resourceType: 'Group',
    id: 'g1',
    type: 'person',
    actual: true,
    member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }],
    characteristic: [
      {
        code: { coding: [{ system: 'http://example.org/c', code: 'smoker' }] },
        valueCodeableConcept: { coding: [{ system: 'http://example.org/yn', code: 'yes' }] },
        exclude: false,
      },
    ],
  },
  {
    resourceType: 'Medication',
    id: 'm1',
    code: {
      coding: [{ system: 'http://www.nlm.nih.gov/research/umls/rxnorm', code: '1049502' }],
      text: 'Aspirin 81 mg',
    },
  },

  // --- Observations -----------------------------------------------------------------------------
  {
    resourceType: 'Observation',
    id: 'obs1',
    status: 'final',
    category: [
      { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
    ],
    code: {
      coding: [
        { system: LOINC, code: '29463-7', display: 'Body weight' },
        { system: 'http://snomed.info/sct', code: '27113001' },
      ],
      text: 'Weight',
    },
    subject: { reference: 'Patient/p1' },
    performer: [{ reference: 'Practitioner/pr1' }],
    effectiveDateTime: '2021-06-01T10:30:00Z',
    valueQuantity: { value: 70.5, unit: 'kg', system: UCUM, code: 'kg' },
  },
  {
    resourceType: 'Observation',
    id: 'obs2',
    status: 'final',
    category: [
      { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
    ],
    code: { coding: [{ system: LOINC, code: '29463-7', display: 'Body weight' }] },
    subject: { reference: 'Patient/p2' },
    effectivePeriod: { start: '2021-06-01T00:00:00Z', end: '2021-06-03T00:00:00Z' },
    valueQuantity: { value: 70500, unit: 'g', system: UCUM, code: 'g' },
  },
  {
    resourceType: 'Observation',
    id: 'obs3',
    status: 'preliminary',
    code: { coding: [{ system: LOINC, code: '8310-5', display: 'Body temperature' }] },
    subject: { reference: 'Patient/p3' },
    effectiveDateTime: '2021-07',
    valueQuantity: { value: 37, unit: 'Cel', system: UCUM, code: 'Cel' },
  },
  {
    resourceType: 'Observation',
    id: 'obs4',
    status: 'final',
    code: { coding: [{ system: LOINC, code: '85354-9', display: 'Blood pressure panel' }] },
    subject: { reference: 'Patient/p1' },
    effectivePeriod: { start: '2022-01-01T08:00:00Z' },
    component: [
      {
        code: { coding: [{ system: LOINC, code: '8480-6', display: 'Systolic' }] },
        valueQuantity: { value: 120, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' },
      },
      {
        code: { coding: [{ system: LOINC, code: '8462-4', display: 'Diastolic' }] },
        valueQuantity: { value: 80, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' },
      },
    ],
  },
  {
    resourceType: 'Observation',
    id: 'obs5',
    status: 'final',
    code: { coding: [{ system: LOINC, code: '72166-2', display: 'Tobacco smoking status' }] },
    subject: { reference: 'Patient/p2' },
    effectiveDateTime: '2019-01-01',
    valueCodeableConcept: {
      coding: [{ system: 'http://snomed.info/sct', code: '449868002', display: 'Smokes tobacco daily' }],
    },
  },
  {
    resourceType: 'Observation',
    id: 'obs6',
    status: 'amended',
    code: { coding: [{ system: 'http://example.org/local', code: 'note' }] },
    subject: { reference: 'Group/g1' },
    valueString: 'Patient feels Fine',
    focus: [{ reference: 'http://other.example/fhir/Patient/x1' }],
  },
  {
    resourceType: 'Observation',
    id: 'obs7',
    status: 'final',
    code: { coding: [{ system: LOINC, code: '29463-7' }] },
    subject: { reference: 'Patient/p4' },
    effectiveDateTime: '2021-06-02',
    valueQuantity: { value: 154, unit: 'lb', system: UCUM, code: '[lb_av]' },
  },
  {
    resourceType: 'Observation',
    id: 'obs8',
    status: 'final',
    code: { coding: [{ system: LOINC, code: '8310-5' }] },
    subject: { reference: 'Patient/p4' },
    effectiveDateTime: '2021-07-15T12:00:00+02:00',
    valueQuantity: { value: 98.6, unit: 'degF', system: UCUM, code: '[degF]' },
  },
  {
    resourceType: 'Observation',
    id: 'obs9',
    status: 'final',
    code: { coding: [{ system: 'http://example.org/local', code: 'score' }] },
    subject: { reference: 'Patient/p5' },
    valueQuantity: { value: 5, unit: 'points' },
    effectiveDateTime: '2023-03-03T03:03:03.300Z',
  },

  // --- Encounters -------------------------------------------------------------------------------
  {
    resourceType: 'Encounter',
    id: 'e1',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
    subject: { reference: 'Patient/p1' },
    participant: [
      { individual: { reference: 'Practitioner/pr1' } },
      { individual: { reference: 'RelatedPerson/rp1' } },
    ],
    period: { start: '2021-06-01T09:00:00Z', end: '2021-06-01T10:00:00Z' },
    length: { value: 60, unit: 'min', system: UCUM, code: 'min' },
    serviceProvider: { reference: 'Organization/o1' },
  },
  {
    resourceType: 'Encounter',
    id: 'e2',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
    subject: { reference: 'Patient/p2' },
    participant: [
      { individual: { reference: 'Practitioner/pr2' } },
      { individual: { reference: 'PractitionerRole/prr1' } },
    ],
    period: { start: '2021-06-01T00:00:00Z', end: '2021-06-04T00:00:00Z' },
    length: { value: 4320, unit: 'min', system: UCUM, code: 'min' },
  },
  {
    resourceType: 'Encounter',
    id: 'e3',
    status: 'in-progress',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
    subject: { reference: 'Patient/p3' },
    participant: [
      {
        individual: {
          type: 'Practitioner',
          identifier: { system: 'http://hl7.org/fhir/sid/us-npi', value: '3333333333' },
        },
      },
    ],
    period: { start: '2022-01-01T00:00:00Z', end: '2022-01-06T12:00:00Z' },
    serviceProvider: { reference: 'Organization/o2' },
  },
  {
    resourceType: 'Encounter',
    id: 'e4',
    status: 'planned',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
    subject: { reference: 'Group/g1' },
    participant: [{ individual: { reference: 'Practitioner/pr1' } }],
    period: { start: '2023-01-01T00:00:00Z' },
    length: { value: 2, unit: 'd', system: UCUM, code: 'd' },
  },
  {
    resourceType: 'Encounter',
    id: 'e5',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'EMER' },
    subject: { reference: 'Patient/p4' },
    period: { start: '2020-02-29T22:00:00Z', end: '2020-03-01T02:00:00Z' },
  },

  // --- Conditions, requests, appointments, other types ------------------------------------------
  {
    resourceType: 'Condition',
    id: 'c1',
    clinicalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }],
    },
    code: { coding: [{ system: 'http://snomed.info/sct', code: '44054006', display: 'Diabetes mellitus type 2' }] },
    subject: { reference: 'Patient/p1' },
    onsetAge: { value: 40, unit: 'years', system: UCUM, code: 'a' },
    recordedDate: '2020-05-15',
  },
  {
    resourceType: 'Condition',
    id: 'c2',
    clinicalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'resolved' }],
    },
    code: { coding: [{ system: 'http://snomed.info/sct', code: '195662009', display: 'Acute viral pharyngitis' }] },
    subject: { reference: 'Patient/p2' },
    onsetDateTime: '2021-01-10',
    abatementString: 'after two weeks',
  },
  {
    resourceType: 'Condition',
    id: 'c3',
    code: { text: 'Headache' },
    subject: { reference: 'Patient/p3' },
    onsetPeriod: { start: '2019-01-01', end: '2019-06-30' },
  },
  {
    resourceType: 'MedicationRequest',
    id: 'mr1',
    status: 'active',
    intent: 'order',
    medicationReference: { reference: 'Medication/m1' },
    subject: { reference: 'Patient/p1' },
    requester: { reference: 'Practitioner/pr1' },
    authoredOn: '2021-06-01',
  },
  {
    resourceType: 'MedicationRequest',
    id: 'mr2',
    status: 'stopped',
    intent: 'plan',
    medicationCodeableConcept: { coding: [{ system: 'http://www.nlm.nih.gov/research/umls/rxnorm', code: '197361' }] },
    subject: { reference: 'Patient/p2' },
    authoredOn: '2022-02-02',
  },
  {
    resourceType: 'Appointment',
    id: 'a1',
    status: 'booked',
    participant: [
      { actor: { reference: 'Patient/p1' }, status: 'accepted' },
      { actor: { reference: 'Practitioner/pr1' }, status: 'accepted' },
    ],
    start: '2024-01-01T09:00:00Z',
    end: '2024-01-01T09:30:00Z',
  },
  {
    resourceType: 'Appointment',
    id: 'a2',
    status: 'cancelled',
    participant: [{ actor: { reference: 'Patient/p2' }, status: 'declined' }],
  },
  {
    resourceType: 'RiskAssessment',
    id: 'ra1',
    status: 'final',
    subject: { reference: 'Patient/p1' },
    prediction: [{ probabilityDecimal: 0.25 }, { probabilityDecimal: 0.8 }],
  },
  {
    resourceType: 'RiskAssessment',
    id: 'ra2',
    status: 'final',
    subject: { reference: 'Patient/p2' },
    prediction: [{ probabilityRange: { low: { value: 0.4 }, high: { value: 0.6 } } }],
  },
  {
    resourceType: 'RiskAssessment',
    id: 'ra3',
    status: 'final',
    subject: { reference: 'Patient/p3' },
    prediction: [{ probabilityDecimal: 100 }],
  },
  {
    resourceType: 'ValueSet',
    id: 'vs1',
    url: 'http://example.org/fhir/ValueSet/colors',
    status: 'active',
    name: 'Colors',
  },
  {
    resourceType: 'ValueSet',
    id: 'vs2',
    url: 'http://example.org/fhir/ValueSet/colors/warm',
    status: 'draft',
    name: 'WarmColors',
  },
  {
    resourceType: 'ValueSet',
    id: 'vs3',
    url: 'urn:oid:1.2.3.4',
    status: 'retired',
    name: 'Legacy',
  },
  {
    resourceType: 'DocumentReference',
    id: 'd1',
    status: 'current',
    subject: { reference: 'Patient/p1' },
    relatesTo: [{ code: 'replaces', target: { reference: 'DocumentReference/d2' } }],
    content: [{ attachment: { contentType: 'text/plain' } }],
  },
  {
    resourceType: 'DocumentReference',
    id: 'd2',
    status: 'superseded',
    subject: { reference: 'Patient/p1' },
    content: [{ attachment: { contentType: 'text/plain' } }],
  },
];
