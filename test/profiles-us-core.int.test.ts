// US Core 6.1.0 against profile enforcement (docs/validation.md, "Profiles"), on both databases: the IG's own
// StructureDefinitions (differentials over R4, over R4's vital signs profile, or over one another), value
// sets and code systems (test/fixtures/us-core/profiles-6.1.0, CC0) stored through the API; then every US
// Core example that claims a US Core profile is POSTed and must be accepted, and examples broken in ways
// their profile forbids must be refused with an issue naming the profile and the element. The explained
// disagreements are listed (REFUSED_EXAMPLES, ACCEPTED_BREAKAGES): one that goes away or a new one fails.
// The profiles are not among the fixtures this repository carries yet: the suite runs where they are.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

type Json = Record<string, any>;

const US_CORE = 'http://hl7.org/fhir/us/core/StructureDefinition/';
const FIXTURES = new URL('./fixtures/us-core/', import.meta.url);
const readJson = (url: URL) => JSON.parse(readFileSync(url, 'utf8')) as Json;
const folder = (name: string) =>
  readdirSync(new URL(`${name}/`, FIXTURES))
    .sort()
    .map((file) => ({ file, resource: readJson(new URL(`${name}/${file}`, FIXTURES)) }));

/** The US Core examples by file name, those that claim a US Core profile (the others claim none, or SDC's). */
const EXAMPLES = new Map<string, Json>(
  folder('examples-6.1.0')
    .filter(({ resource }) => (resource.meta?.profile ?? []).some((p: string) => p.startsWith(US_CORE)))
    .map(({ file, resource }) => [file, resource]),
);

/**
 * What is stored first: code systems, value sets, then the profiles, each after its base (US Core's vital
 * signs profile derives from R4's, kept with the other R4 profile fixtures).
 */
function conformanceResources(): Json[] {
  const r4VitalSigns = readJson(
    new URL('./fixtures/profiles/hl7-r4-examples/StructureDefinition-vitalsigns.json', import.meta.url),
  );
  const all = [r4VitalSigns, ...folder('profiles-6.1.0').map(({ resource }) => resource)];
  const rank = (r: Json) => ['CodeSystem', 'ValueSet', 'StructureDefinition'].indexOf(String(r.resourceType));
  const byUrl = new Map(all.map((r) => [String(r.url), r]));
  const ordered: Json[] = [];
  const place = (r: Json) => {
    if (ordered.includes(r)) return;
    const base = byUrl.get(String(r.baseDefinition));
    if (base) place(base);
    ordered.push(r);
  };
  [...all].sort((a, b) => rank(a) - rank(b)).forEach(place);
  return ordered;
}

const withoutId = ({ id: _, ...rest }: Json) => rest;

/**
 * Examples refused, and why: the text their refusal must contain. Either R4 itself refuses them (the
 * search suite's import sees the same two), or the example breaks a rule of a profile it inherits.
 */
const REFUSED_EXAMPLES: Record<string, { reason: string; diagnostics: string }> = {
  'diagnosticreport-cbc.json': {
    reason: 'R4: its text has a status but no div (Narrative.div is 1..1)',
    diagnostics: 'DiagnosticReport.text.div: minimum cardinality 1, found 0',
  },
  'patient-example-targeted-provenance.json': {
    reason: 'R4: _gender carries only an id, no value or extension (ele-1)',
    diagnostics: 'Patient.gender: constraint ele-1 failed',
  },
  'observation-satO2-fiO2.json': {
    reason:
      "the flow rate's unit L/min (fixed by the pulse oximetry profile) is not in R4 vital signs' required " +
      'ucum-vitals-common binding on component.value[x]; US Core loosens it to extensible, which a derived ' +
      'profile may not (its ignoreWarnings.txt: "illegal attempt to change the binding ... from required to ' +
      'extensible", "validation errors may occur" with this profile)',
    diagnostics:
      'http://unitsofmeasure.org#L/min is not in the required value set http://hl7.org/fhir/ValueSet/ucum-vitals-common|4.0.1',
  },
};

interface Breakage {
  example: string;
  /** What is broken: the case's name. */
  what: string;
  /**
   * The profile (under US_CORE) and element the refusal must name: its id as a snapshot has it, a choice
   * the differential names by type (`valueQuantity`) being a type slice of `value[x]`.
   */
  profile: string;
  element: string;
  change: (resource: Json) => void;
}

const category = (system: string, code: string) => ({ coding: [{ system, code }] });
const OBSERVATION_CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';

const BREAKAGES: Breakage[] = [
  {
    example: 'patient-example.json',
    what: 'a Patient without identifier',
    profile: 'us-core-patient',
    element: 'Patient.identifier',
    change: (r) => delete r.identifier,
  },
  {
    example: 'patient-example.json',
    what: 'a Patient without name',
    profile: 'us-core-patient',
    element: 'Patient.name',
    change: (r) => delete r.name,
  },
  {
    example: 'patient-example.json',
    what: 'a Patient without gender',
    profile: 'us-core-patient',
    element: 'Patient.gender',
    change: (r) => delete r.gender,
  },
  {
    example: 'patient-example.json',
    what: 'a Patient identifier without system',
    profile: 'us-core-patient',
    element: 'Patient.identifier.system',
    change: (r) => delete r.identifier[0].system,
  },
  {
    example: 'patient-example.json',
    what: 'a Patient name with neither family nor given (us-core-6)',
    profile: 'us-core-patient',
    element: 'Patient.name',
    change: (r) => (r.name = [{ use: 'official', text: 'Amy Shaw' }]),
  },
  {
    example: 'patient-example.json',
    what: 'a race extension without its text',
    profile: 'us-core-race',
    element: 'Extension.extension:text',
    change: (r) => {
      const race = r.extension.find((e: Json) => e.url === `${US_CORE}us-core-race`);
      race.extension = race.extension.filter((e: Json) => e.url !== 'text');
    },
  },
  {
    example: 'patient-example.json',
    what: 'a birth sex outside its value set',
    profile: 'us-core-birthsex',
    element: 'Extension.value[x]',
    change: (r) => (r.extension.find((e: Json) => e.url === `${US_CORE}us-core-birthsex`).valueCode = 'X'),
  },
  {
    example: 'weight.json',
    what: 'a body weight without the vital-signs category',
    profile: 'us-core-body-weight',
    element: 'Observation.category:VSCat',
    change: (r) => (r.category = [category(OBSERVATION_CATEGORY, 'exam')]),
  },
  {
    example: 'weight.json',
    what: 'a body weight in millimetres',
    profile: 'us-core-body-weight',
    element: 'Observation.value[x]:valueQuantity.code',
    change: (r) => Object.assign(r.valueQuantity, { code: 'mm', unit: 'mm' }),
  },
  {
    example: 'weight.json',
    what: 'a body weight with another unit system than the fixed one',
    profile: 'us-core-body-weight',
    element: 'Observation.value[x]:valueQuantity.system',
    change: (r) => (r.valueQuantity.system = 'http://example.org/units'),
  },
  {
    example: 'blood-pressure.json',
    what: 'a blood pressure without its diastolic component',
    profile: 'us-core-blood-pressure',
    element: 'Observation.component:diastolic',
    change: (r) => (r.component = r.component.slice(0, 1)),
  },
  {
    example: 'blood-pressure.json',
    what: 'a systolic pressure in mmHg rather than the fixed mm[Hg]',
    profile: 'us-core-blood-pressure',
    element: 'Observation.component:systolic.value[x]:valueQuantity.code',
    change: (r) => (r.component[0].valueQuantity.code = 'mmHg'),
  },
  {
    example: 'heart-rate.json',
    what: 'a heart rate coded as a respiratory rate',
    profile: 'us-core-heart-rate',
    element: 'Observation.code',
    change: (r) => (r.code = { coding: [{ system: 'http://loinc.org', code: '9279-1' }] }),
  },
  {
    example: 'oxygen-saturation.json',
    what: 'a pulse oximetry without the O2Sat coding',
    profile: 'us-core-pulse-oximetry',
    element: 'Observation.code.coding:O2Sat',
    change: (r) => (r.code.coding = r.code.coding.filter((c: Json) => c.code !== '2708-6')),
  },
  {
    example: 'observation-serum-glucose.json',
    what: 'a lab result without the laboratory category',
    profile: 'us-core-observation-lab',
    element: 'Observation.category:us-core',
    change: (r) => (r.category = [category(OBSERVATION_CATEGORY, 'exam')]),
  },
  {
    example: 'observation-serum-glucose.json',
    what: 'a lab result without subject (from its base, clinical result)',
    profile: 'us-core-observation-lab',
    element: 'Observation.subject',
    change: (r) => delete r.subject,
  },
  {
    example: 'observation-serum-glucose.json',
    what: 'a lab result dated by year only (us-core-1)',
    profile: 'us-core-observation-lab',
    element: 'Observation.effective[x]',
    change: (r) => (r.effectiveDateTime = '2005'),
  },
  {
    example: 'some-day-smoker.json',
    what: 'a smoking status with a status outside its value set',
    profile: 'us-core-smokingstatus',
    element: 'Observation.status',
    change: (r) => (r.status = 'preliminary'),
  },
  {
    example: 'some-day-smoker.json',
    what: 'a smoking status without the social-history category',
    profile: 'us-core-smokingstatus',
    element: 'Observation.category:SocialHistory',
    change: (r) => (r.category = [category(OBSERVATION_CATEGORY, 'survey')]),
  },
  {
    example: 'Observation-PHQ9-item-example-44250-9.json',
    what: 'a screening item without the survey category',
    profile: 'us-core-observation-screening-assessment',
    element: 'Observation.category:survey',
    change: (r) => (r.category = r.category.filter((c: Json) => c.coding[0].code !== 'survey')),
  },
  {
    example: 'colonoscopy.json',
    what: 'a care plan narrative with a status outside US Core narrative status',
    profile: 'us-core-careplan',
    element: 'CarePlan.text.status',
    change: (r) => (r.text.status = 'extensions'),
  },
  {
    example: 'colonoscopy.json',
    what: 'a care plan without the assess-plan category',
    profile: 'us-core-careplan',
    element: 'CarePlan.category:AssessPlan',
    change: (r) => (r.category = [{ text: 'plan' }]),
  },
  {
    example: 'condition-encounter-diagnosis-example1.json',
    what: 'an encounter diagnosis categorised as a problem',
    profile: 'us-core-condition-encounter-diagnosis',
    element: 'Condition.category:us-core',
    change: (r) =>
      (r.category = [category('http://terminology.hl7.org/CodeSystem/condition-category', 'problem-list-item')]),
  },
  {
    example: 'condition-SDOH-example.json',
    what: 'a problem without the problem-list-item category',
    profile: 'us-core-condition-problems-health-concerns',
    element: 'Condition.category:us-core',
    change: (r) => (r.category = r.category.filter((c: Json) => c.coding[0].code !== 'problem-list-item')),
  },
  {
    example: 'careteam-example.json',
    what: 'a care team participant without member',
    profile: 'us-core-careteam',
    element: 'CareTeam.participant.member',
    change: (r) => delete r.participant[0].member,
  },
  {
    example: 'diagnosticreport-metabolic-panel.json',
    what: 'a lab report without the LAB category',
    profile: 'us-core-diagnosticreport-lab',
    element: 'DiagnosticReport.category:LaboratorySlice',
    change: (r) => (r.category = [{ text: 'lab' }]),
  },
  {
    example: 'diagnosticreport-metabolic-panel.json',
    what: 'a final lab report without issued (us-core-9)',
    profile: 'us-core-diagnosticreport-lab',
    element: 'DiagnosticReport',
    change: (r) => delete r.issued,
  },
  {
    example: 'coverage-example.json',
    what: 'a coverage without relationship',
    profile: 'us-core-coverage',
    element: 'Coverage.relationship',
    change: (r) => delete r.relationship,
  },
  {
    example: 'coverage-example.json',
    what: 'a coverage with two member ids',
    profile: 'us-core-coverage',
    element: 'Coverage.identifier:memberid',
    change: (r) => r.identifier.push({ ...r.identifier[0], value: '2' }),
  },
  {
    example: 'coverage-example.json',
    what: 'a coverage with neither member id nor subscriber id (us-core-15)',
    profile: 'us-core-coverage',
    element: 'Coverage',
    change: (r) => {
      delete r.identifier;
      delete r.subscriberId;
    },
  },
  {
    example: 'practitioner-1.json',
    what: 'a practitioner name without family',
    profile: 'us-core-practitioner',
    element: 'Practitioner.name.family',
    change: (r) => delete r.name[0].family,
  },
  {
    example: 'practitioner-1.json',
    what: 'an NPI of nine digits (us-core-16)',
    profile: 'us-core-practitioner',
    element: 'Practitioner.identifier:NPI',
    change: (r) => (r.identifier[0].value = '994133910'),
  },
  {
    example: 'practitioner-1.json',
    what: 'an NPI whose check digit is wrong (us-core-17)',
    profile: 'us-core-practitioner',
    element: 'Practitioner.identifier:NPI',
    change: (r) => (r.identifier[0].value = '9941339101'),
  },
  {
    example: 'encounter-1036.json',
    what: 'an encounter without type',
    profile: 'us-core-encounter',
    element: 'Encounter.type',
    change: (r) => delete r.type,
  },
  {
    example: 'medicationrequest-coded-oral-axid.json',
    what: 'an order without requester (us-core-21)',
    profile: 'us-core-medicationrequest',
    element: 'MedicationRequest',
    change: (r) => delete r.requester,
  },
  {
    example: 'procedure-rehab.json',
    what: 'a completed procedure without performed (us-core-7)',
    profile: 'us-core-procedure',
    element: 'Procedure',
    change: (r) => {
      for (const key of Object.keys(r)) if (key.startsWith('performed')) delete r[key];
    },
  },
  {
    example: 'relatedperson-shaw-niece.json',
    what: 'a related person with neither name nor relationship (us-core-14)',
    profile: 'us-core-relatedperson',
    element: 'RelatedPerson',
    change: (r) => {
      delete r.name;
      delete r.relationship;
    },
  },
  {
    example: 'udi-1.json',
    what: 'an implantable device without patient',
    profile: 'us-core-implantable-device',
    element: 'Device.patient',
    change: (r) => delete r.patient,
  },
  {
    example: 'documentreference-discharge-summary.json',
    what: 'a document reference without type',
    profile: 'us-core-documentreference',
    element: 'DocumentReference.type',
    change: (r) => delete r.type,
  },
  {
    example: 'documentreference-discharge-summary.json',
    what: 'a document reference typed outside its value set',
    profile: 'us-core-documentreference',
    element: 'DocumentReference.type',
    change: (r) => (r.type = { coding: [{ system: 'http://loinc.org', code: '8867-4' }] }),
  },
  {
    example: 'QuestionnaireResponse-phq-9-example.json',
    what: 'a questionnaire response without subject',
    profile: 'us-core-questionnaireresponse',
    element: 'QuestionnaireResponse.subject',
    change: (r) => delete r.subject,
  },
];

/** Breakages accepted, and why: what the server does not check. */
const ACCEPTED_BREAKAGES: Record<string, string> = {
  'a birth sex outside its value set':
    'the birth sex value set is made of two VSAC value sets (cts.nlm.nih.gov), which the server does not hold: ' +
    'the binding is not checked',
  'a document reference typed outside its value set':
    'us-core-documentreference-type includes LOINC, which the server cannot expand: the binding is not checked',
  'a questionnaire response without subject':
    "us-core-questionnaireresponse derives from SDC's sdc-questionnaireresponse, which is not among the " +
    'fixtures (the SDC IG source has no JSON of it): a profile whose base is unknown is not checked',
};

/** A breakage refused as expected: 401, an error that names the profile and the element. */
function refusedAsExpected(res: Reply, breakage: Breakage): boolean {
  if (res.statusCode !== 401) return false;
  return res
    .json<{ issue: { severity: string; diagnostics?: string }[] }>()
    .issue.some(
      (i) =>
        i.severity === 'error' &&
        i.diagnostics?.includes(`profile ${US_CORE}${breakage.profile}`) &&
        i.diagnostics.includes(`element ${breakage.element})`),
    );
}

const PROFILES_PRESENT = existsSync(new URL('profiles-6.1.0/', FIXTURES));

describe.skipIf(!PROFILES_PRESENT).each(BACKENDS)('US Core 6.1.0 profiles on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const agreement = { examples: 0, accepted: 0, breakages: 0, refused: 0 };

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    for (const resource of conformanceResources()) {
      const res = await fhir.post(`/fhir/${String(resource.resourceType)}`, withoutId(resource));
      expect(res.statusCode, `${String(resource.url)}: ${res.body}`).toBe(201);
    }
  });
  afterAll(async () => {
    console.log(
      `US Core 6.1.0 on ${backend}: ${agreement.accepted}/${agreement.examples} examples accepted, ` +
        `${agreement.refused}/${agreement.breakages} breakages refused`,
    );
    await t?.close();
  });

  it('accepts every example that claims a US Core profile, but the explained ones', async () => {
    const refused: Record<string, string> = {};
    for (const [file, example] of EXAMPLES) {
      const res = await fhir.post(`/fhir/${String(example.resourceType)}`, withoutId(example));
      agreement.examples++;
      if (res.statusCode === 201) {
        agreement.accepted++;
        expect(res.json<Json>().meta.profile, file).toEqual(example.meta.profile);
      } else {
        expect(res.statusCode, `${file}: ${res.body}`).toBe(401);
        refused[file] = res.body;
      }
    }
    expect(Object.keys(refused).sort()).toEqual(Object.keys(REFUSED_EXAMPLES).sort());
    for (const [file, { reason, diagnostics }] of Object.entries(REFUSED_EXAMPLES)) {
      expect(refused[file], `${file}: ${reason}`).toContain(diagnostics);
    }
    expect(EXAMPLES.size).toBe(174);
  });

  it('refuses examples broken in ways their profile forbids, naming the profile and the element', async () => {
    const accepted: string[] = [];
    for (const breakage of BREAKAGES) {
      const broken = withoutId(structuredClone(EXAMPLES.get(breakage.example)!));
      breakage.change(broken);
      const res = await fhir.post(`/fhir/${String(broken.resourceType)}`, broken);
      agreement.breakages++;
      if (refusedAsExpected(res, breakage)) agreement.refused++;
      else if (res.statusCode === 201) accepted.push(breakage.what);
      else expect.fail(`${breakage.what}: refused, but not for the profile and element meant: ${res.body}`);
    }
    expect(accepted.sort()).toEqual(Object.keys(ACCEPTED_BREAKAGES).sort());
  });
});
