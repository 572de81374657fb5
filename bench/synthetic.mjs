// The synthetic part of `npm run bench`: a seeded generator of a realistic clinical record set of any size
// (1M+ resources), loaded with the import command, then p50/p99 of a fixed search mix over it. Synthea's
// fixtures stop at ~70,000 resources; index and plan problems show only at larger sizes.
//
// Per patient, on average: 1 Patient, 5 Encounters, 30 Observations, 3 Conditions, 2 MedicationRequests
// (41 resources), plus a Practitioner per 200 patients (at least 5) and an Organization per 1,000 (at
// least 2). Codes are drawn with a skew (a few very common, a few rare), as in real records.
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { run } from './processes.mjs';
import { getJson, timeSearch } from './timed-search.mjs';

const RESOURCES_PER_PATIENT = 41;
const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';
const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
const UCUM = 'http://unitsofmeasure.org';
const MRN = 'http://example.org/mrn';
const OBSERVATION_CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';

/** A small, fast, seedable PRNG: the same seed gives the same data set, byte for byte. */
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks from `[weight, ...]` rows with probability proportional to the weight. */
function weighted(rows) {
  const total = rows.reduce((sum, row) => sum + row[0], 0);
  return (rng) => {
    let x = rng() * total;
    for (const row of rows) if ((x -= row[0]) < 0) return row;
    return rows[rows.length - 1];
  };
}

// Family names with a Zipf-like skew, so that some prefixes match many patients and others few;
// accented and non-Latin-1 letters exercise the accent-insensitive string index.
const FAMILIES = (
  'Smith Johnson García Müller Williams Nguyen Brown Martínez Jones Hernández Miller López Davis ' +
  'González Wilson Kowalski Anderson Pérez Taylor Schröder Thomas Sánchez Moore Kim Jackson Núñez ' +
  "Martin Patel Lee O'Brien Thompson Chen White Dvořák Harris Østergaard Clark Yılmaz Lewis " +
  'Lefèvre Robinson Wiśniewski Walker Ibáñez Young Rossi Allen Peña King Tanaka Wright Çelik Scott ' +
  'Johansson Torres Okafor Hill Mensah Flores Haddad Green Cohen Adams Dubois Nelson Moreau Baker ' +
  'Girard Hall Virtanen Rivera Korhonen Campbell Suzuki Mitchell Singh Carter Kumar Roberts Shah ' +
  'Murphy Kelly Park Wang Zhang Sato Russo Ferrari Esposito Bianchi Fournier Jensen Hansen Larsen ' +
  'Karlsson Nilsson Novák Abboud Levi Ramírez'
)
  .split(' ')
  .map((name, rank) => [1 / (rank + 1) ** 0.7, name]);
const GIVEN = {
  female: (
    'Zoë Chloé Renée Inés Noémie Åsa Maria Emma Olivia Ava Sophia Isabella Mia Amelia Harper Aaliyah ' +
    'Fatima Mei Yuki Priya Ananya Siobhán Łucja Grace'
  ).split(' '),
  male: (
    'José André Björn Søren François Jürgen Liam Noah Oliver Elijah James William Lucas Mateo ' +
    'Muhammad Wei Hiroshi Arjun Kwame Diego Seán Ömer'
  ).split(' '),
};
const STREETS = ['Main St', 'Oak Ave', 'Maple Dr', 'Cedar Ln', 'Elm St', 'Pine Rd', 'Washington Blvd', 'Lakeview Dr'];
// City, state, ZIP prefix, UTC offset in minutes (the patient's dates are written in that zone).
const CITIES = [
  ['Boston', 'MA', '021', -300],
  ['Worcester', 'MA', '016', -300],
  ['New York', 'NY', '100', -300],
  ['Buffalo', 'NY', '142', -300],
  ['Philadelphia', 'PA', '191', -300],
  ['Pittsburgh', 'PA', '152', -300],
  ['Baltimore', 'MD', '212', -300],
  ['Atlanta', 'GA', '303', -300],
  ['Miami', 'FL', '331', -300],
  ['Orlando', 'FL', '328', -300],
  ['Detroit', 'MI', '482', -300],
  ['Chicago', 'IL', '606', -360],
  ['Minneapolis', 'MN', '554', -360],
  ['St. Louis', 'MO', '631', -360],
  ['Nashville', 'TN', '372', -360],
  ['New Orleans', 'LA', '701', -360],
  ['Houston', 'TX', '770', -360],
  ['Dallas', 'TX', '752', -360],
  ['San Antonio', 'TX', '782', -360],
  ['Denver', 'CO', '802', -420],
  ['Cañon City', 'CO', '812', -420],
  ['Española', 'NM', '875', -420],
  ['Phoenix', 'AZ', '850', -420],
  ['Salt Lake City', 'UT', '841', -420],
  ['Seattle', 'WA', '981', -480],
  ['Portland', 'OR', '972', -480],
  ['San Francisco', 'CA', '941', -480],
  ['San José', 'CA', '951', -480],
  ['Los Angeles', 'CA', '900', -480],
  ['San Diego', 'CA', '921', -480],
  ['Anchorage', 'AK', '995', -540],
  ['Honolulu', 'HI', '968', -600],
];
const ENCOUNTER_CLASS = weighted([
  [75, 'AMB', 'ambulatory', 15, 60],
  [15, 'EMER', 'emergency', 60, 8 * 60],
  [10, 'IMP', 'inpatient encounter', 24 * 60, 10 * 24 * 60],
]);
const ENCOUNTER_TYPE = {
  AMB: [
    ['185349003', 'Encounter for check up'],
    ['162673000', 'General examination of patient'],
    ['185345009', 'Encounter for symptom'],
    ['390906007', 'Follow-up encounter'],
  ],
  EMER: [
    ['50849002', 'Emergency room admission'],
    ['183452005', 'Emergency hospital admission'],
  ],
  IMP: [
    ['32485007', 'Hospital admission'],
    ['305408004', 'Admission to surgical department'],
  ],
};
// [weight, LOINC, display, category, UCUM unit, low, high, decimals]; 85354-9 is the blood pressure panel.
const OBSERVATION = weighted([
  [120, '8302-2', 'Body height', 'vital-signs', 'cm', 50, 200, 1],
  [120, '29463-7', 'Body weight', 'vital-signs', 'kg', 3, 150, 1],
  [110, '8867-4', 'Heart rate', 'vital-signs', '/min', 48, 130, 0],
  [100, '85354-9', 'Blood pressure panel with all children optional', 'vital-signs'],
  [80, '39156-5', 'Body mass index (BMI) [Ratio]', 'vital-signs', 'kg/m2', 15, 45, 1],
  [70, '9279-1', 'Respiratory rate', 'vital-signs', '/min', 10, 28, 0],
  [60, '2339-0', 'Glucose [Mass/volume] in Blood', 'laboratory', 'mg/dL', 60, 260, 0],
  [50, '8310-5', 'Body temperature', 'vital-signs', 'Cel', 35.8, 39.8, 1],
  [40, '2708-6', 'Oxygen saturation in Arterial blood', 'vital-signs', '%', 88, 100, 0],
  [35, '72514-3', 'Pain severity - 0-10 verbal numeric rating [Score] - Reported', 'vital-signs', '{score}', 0, 10, 0],
  [30, '2093-3', 'Cholesterol [Mass/volume] in Serum or Plasma', 'laboratory', 'mg/dL', 120, 300, 0],
  [30, '2571-8', 'Triglycerides', 'laboratory', 'mg/dL', 50, 400, 0],
  [
    30,
    '18262-6',
    'Cholesterol in LDL [Mass/volume] in Serum or Plasma by Direct assay',
    'laboratory',
    'mg/dL',
    50,
    220,
    0,
  ],
  [30, '2085-9', 'Cholesterol in HDL [Mass/volume] in Serum or Plasma', 'laboratory', 'mg/dL', 25, 95, 0],
  [25, '4548-4', 'Hemoglobin A1c/Hemoglobin.total in Blood', 'laboratory', '%', 4.5, 12, 1],
  [25, '38483-4', 'Creatinine [Mass/volume] in Blood', 'laboratory', 'mg/dL', 0.5, 2.5, 2],
  [25, '6299-2', 'Urea nitrogen [Mass/volume] in Blood', 'laboratory', 'mg/dL', 7, 40, 0],
  [25, '2947-0', 'Sodium [Moles/volume] in Blood', 'laboratory', 'mmol/L', 130, 150, 0],
  [25, '6298-4', 'Potassium [Moles/volume] in Blood', 'laboratory', 'mmol/L', 3.2, 5.5, 1],
  [25, '2069-3', 'Chloride [Moles/volume] in Blood', 'laboratory', 'mmol/L', 95, 110, 0],
  [25, '20565-8', 'Carbon dioxide, total [Moles/volume] in Blood', 'laboratory', 'mmol/L', 20, 32, 0],
  [25, '49765-1', 'Calcium [Mass/volume] in Blood', 'laboratory', 'mg/dL', 8.5, 10.5, 1],
  [20, '718-7', 'Hemoglobin [Mass/volume] in Blood', 'laboratory', 'g/dL', 9, 18, 1],
  [20, '6690-2', 'Leukocytes [#/volume] in Blood by Automated count', 'laboratory', '10*3/uL', 3, 15, 1],
  [20, '789-8', 'Erythrocytes [#/volume] in Blood by Automated count', 'laboratory', '10*6/uL', 3.5, 6, 2],
  [20, '777-3', 'Platelets [#/volume] in Blood by Automated count', 'laboratory', '10*3/uL', 100, 450, 0],
  [
    10,
    '1742-6',
    'Alanine aminotransferase [Enzymatic activity/volume] in Serum or Plasma',
    'laboratory',
    'U/L',
    5,
    80,
    0,
  ],
  [10, '33914-3', 'Glomerular filtration rate/1.73 sq M.predicted', 'laboratory', 'mL/min/{1.73_m2}', 30, 120, 0],
  [2, '3016-3', 'Thyrotropin [Units/volume] in Serum or Plasma', 'laboratory', 'm[IU]/L', 0.3, 6, 2],
  [1, '1988-5', 'C reactive protein [Mass/volume] in Serum or Plasma', 'laboratory', 'mg/L', 0.1, 50, 1],
  [0.5, '2857-1', 'Prostate specific Ag [Mass/volume] in Serum or Plasma', 'laboratory', 'ng/mL', 0.1, 10, 2],
]);
// [weight, SNOMED, display, chronic]: acute ones are resolved (with an abatement), chronic ones active.
const CONDITION = weighted([
  [60, '38341003', 'Hypertension', true],
  [50, '444814009', 'Viral sinusitis (disorder)', false],
  [45, '195662009', 'Acute viral pharyngitis (disorder)', false],
  [40, '10509002', 'Acute bronchitis (disorder)', false],
  [35, '55822004', 'Hyperlipidemia', true],
  [30, '15777000', 'Prediabetes', true],
  [30, '162864005', 'Body mass index 30+ - obesity (finding)', true],
  [25, '44054006', 'Diabetes', true],
  [20, '65363002', 'Otitis media', false],
  [20, '195967001', 'Asthma', true],
  [15, '44465007', 'Sprain of ankle', false],
  [15, '239873007', 'Osteoarthritis of knee', true],
  [12, '271737000', 'Anemia (disorder)', true],
  [10, '35489007', 'Depressive disorder', true],
  [10, '37796009', 'Migraine', true],
  [8, '431855005', 'Chronic kidney disease stage 1 (disorder)', true],
  [6, '13645005', 'Chronic obstructive bronchitis (disorder)', true],
  [5, '840539006', 'COVID-19', false],
  [1, '254837009', 'Malignant neoplasm of breast (disorder)', true],
]);
const MEDICATION = weighted([
  [40, '314076', 'lisinopril 10 MG Oral Tablet'],
  [35, '313782', 'Acetaminophen 325 MG Oral Tablet'],
  [30, '860975', '24 HR Metformin hydrochloride 500 MG Extended Release Oral Tablet'],
  [30, '197361', 'Amlodipine 5 MG Oral Tablet'],
  [25, '259255', 'Atorvastatin 80 MG Oral Tablet'],
  [25, '308182', 'Amoxicillin 250 MG Oral Capsule'],
  [20, '310798', 'Hydrochlorothiazide 25 MG Oral Tablet'],
  [20, '312961', 'Simvastatin 20 MG Oral Tablet'],
  [15, '745679', '200 ACTUAT Albuterol 0.09 MG/ACTUAT Metered Dose Inhaler'],
  [10, '834061', 'Penicillin V Potassium 250 MG Oral Tablet'],
  [5, '1049221', 'Acetaminophen 325 MG / Oxycodone Hydrochloride 5 MG Oral Tablet'],
]);

const DAY = 86_400_000;
const FIRST_BIRTH = Date.UTC(1930, 0, 1);
const LAST_BIRTH = Date.UTC(2020, 11, 31);
const FIRST_VISIT = Date.UTC(2010, 0, 1);
const LAST_VISIT = Date.UTC(2025, 11, 31);

const pad = (n, width) => String(n).padStart(width, '0');
const two = (n) => pad(n, 2);
const ref = (type, id) => ({ reference: `${type}/${id}` });
const coding = (system, code, display) => ({ coding: [{ system, code, display }], text: display });

/** An R4 dateTime in the patient's zone, to the second: `2019-03-04T10:22:00-05:00`. */
function dateTime(ms, offsetMinutes) {
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, 19);
  const abs = Math.abs(offsetMinutes);
  return `${local}${offsetMinutes < 0 ? '-' : '+'}${two(Math.floor(abs / 60))}:${two(abs % 60)}`;
}

const round = (value, decimals) => Math.round(value * 10 ** decimals) / 10 ** decimals;

/** A value between low and high, bunched towards the middle like real measurements. */
const measurement = (rng, low, high, decimals) => round(low + ((rng() + rng()) / 2) * (high - low), decimals);

function quantity(value, unit) {
  return { value, unit, system: UCUM, code: unit };
}

/** How many patients (and practitioners, organisations) make about `total` resources. */
export function syntheticPlan(total) {
  const patients = Math.max(1, Math.round(total / (RESOURCES_PER_PATIENT + 1 / 200 + 1 / 1000)));
  return {
    patients,
    practitioners: Math.max(5, Math.ceil(patients / 200)),
    organizations: Math.max(2, Math.ceil(patients / 1000)),
  };
}

/** One NDJSON file, written in ~1 MB chunks that wait for the disk (memory stays flat at any size). */
class NdjsonFile {
  constructor(path) {
    this.path = path;
    this.stream = createWriteStream(path);
    this.buffer = '';
    this.lines = 0;
  }

  add(resource) {
    this.buffer += `${JSON.stringify(resource)}\n`;
    this.lines++;
  }

  async flush(threshold = 0) {
    if (this.buffer.length <= threshold) return;
    const chunk = this.buffer;
    this.buffer = '';
    if (!this.stream.write(chunk)) await once(this.stream, 'drain');
  }

  async close() {
    await this.flush();
    this.stream.end();
    await once(this.stream, 'finish');
  }
}

// Numbered so that a plain `import <dir>` loads them in this order too (the importer sorts names it
// does not recognise as a resource type after those it does, alphabetically): referenced resources first.
const FILES = ['Organization', 'Practitioner', 'Patient', 'Encounter', 'Condition', 'Observation', 'MedicationRequest'];

/**
 * Writes about `total` resources as NDJSON into `dir` (created if needed), one file per type, every
 * resource with an explicit id and every reference by id. Answers the files in load order, the counts,
 * and the facts the search mix needs (values that exist in the data, and how often).
 */
export async function generateSynthetic(dir, total, seed = 1) {
  const started = performance.now();
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  const rng = mulberry32(seed);
  const pick = (list) => list[Math.floor(rng() * list.length)];
  const plan = syntheticPlan(total);
  const files = Object.fromEntries(
    FILES.map((type, i) => [type, new NdjsonFile(join(dir, `${i + 1}-${type}.ndjson`))]),
  );
  const family = weighted(FAMILIES);
  const organizationIds = Array.from({ length: plan.organizations }, (_, i) => `org-${pad(i + 1, 3)}`);
  const practitionerIds = Array.from({ length: plan.practitioners }, (_, i) => `pr-${pad(i + 1, 4)}`);
  const sequence = { Encounter: 0, Observation: 0, Condition: 0, MedicationRequest: 0 };
  const nextId = (type, prefix, width) => `${prefix}-${pad(++sequence[type], width)}`;
  const observationCodes = {};
  const conditionCodes = {};
  const families = {};
  const familyObservations = {};
  const patientsWithCode = {};
  const facts = { seed, total, plan, heaviest: { observations: -1 } };

  organizationIds.forEach((id, i) => {
    const [city, state, zip] = CITIES[i % CITIES.length];
    files.Organization.add({
      resourceType: 'Organization',
      id,
      identifier: [{ system: 'http://example.org/organization', value: id.toUpperCase() }],
      active: true,
      type: [coding('http://terminology.hl7.org/CodeSystem/organization-type', 'prov', 'Healthcare Provider')],
      name: `${city} General Hospital ${i + 1}`,
      telecom: [{ system: 'phone', value: `555-${zip}-${pad(1000 + i, 4)}`, use: 'work' }],
      address: [{ line: [`${100 + i} Hospital Way`], city, state, postalCode: `${zip}${two(i % 100)}`, country: 'US' }],
    });
  });
  practitionerIds.forEach((id, i) => {
    const gender = rng() < 0.5 ? 'female' : 'male';
    files.Practitioner.add({
      resourceType: 'Practitioner',
      id,
      identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: String(9_990_000_000 + i) }],
      active: true,
      name: [{ use: 'official', family: family(rng)[1], given: [pick(GIVEN[gender])], prefix: ['Dr.'] }],
      telecom: [{ system: 'email', value: `${id}@example.org`, use: 'work' }],
      gender,
    });
  });

  for (let p = 1; p <= plan.patients; p++) {
    const patientId = `p-${pad(p, 6)}`;
    const subject = ref('Patient', patientId);
    const gender = rng() < 0.02 ? 'unknown' : rng() < 0.5 ? 'female' : 'male';
    const [city, state, zip, offset] = pick(CITIES);
    const postalCode = `${zip}${two(Math.floor(rng() * 100))}`;
    const birth = FIRST_BIRTH + Math.floor(rng() * ((LAST_BIRTH - FIRST_BIRTH) / DAY)) * DAY;
    const birthDate = new Date(birth).toISOString().slice(0, 10);
    const gp = pick(practitionerIds);
    const organization = pick(organizationIds);
    // An odd multiplier permutes 32-bit numbers: unique MRNs that do not sort like the patient ids.
    const mrn = `M${pad(((p * 2654435761) >>> 0).toString(16).toUpperCase(), 8)}`;
    const familyName = family(rng)[1];
    families[familyName] = (families[familyName] ?? 0) + 1;
    const given = [pick(GIVEN[gender === 'male' ? 'male' : 'female'])];
    if (rng() < 0.3) given.push(pick(GIVEN[gender === 'male' ? 'male' : 'female']));

    // Visits, in time order, between 2010 (or birth) and 2025.
    const encounterCount = 1 + Math.floor(rng() * 9);
    const firstVisit = Math.max(FIRST_VISIT, birth);
    const starts = Array.from(
      { length: encounterCount },
      () => firstVisit + Math.floor(rng() * (LAST_VISIT - firstVisit)),
    ).sort((a, b) => a - b);
    const encounters = starts.map((start) => {
      const [, code, display, minMinutes, maxMinutes] = ENCOUNTER_CLASS(rng);
      const end = start + (minMinutes + Math.floor(rng() * (maxMinutes - minMinutes))) * 60_000;
      const [typeCode, typeDisplay] = pick(ENCOUNTER_TYPE[code]);
      const id = nextId('Encounter', 'e', 7);
      files.Encounter.add({
        resourceType: 'Encounter',
        id,
        status: 'finished',
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code, display },
        type: [coding(SNOMED, typeCode, typeDisplay)],
        subject,
        participant: [
          {
            type: [coding('http://terminology.hl7.org/CodeSystem/v3-ParticipationType', 'PPRF', 'primary performer')],
            individual: ref('Practitioner', rng() < 0.7 ? gp : pick(practitionerIds)),
          },
        ],
        period: { start: dateTime(start, offset), end: dateTime(end, offset) },
        serviceProvider: ref('Organization', organization),
      });
      return { id, start, end, practitioner: gp };
    });
    const last = encounters[encounters.length - 1];

    let observations = 0;
    const codesSeen = new Set();
    for (const encounter of encounters) {
      const count = Math.floor(rng() * 13);
      for (let k = 0; k < count; k++) {
        const [, code, display, category, unit, low, high, decimals] = OBSERVATION(rng);
        observationCodes[code] = (observationCodes[code] ?? 0) + 1;
        observations++;
        codesSeen.add(code);
        const observation = {
          resourceType: 'Observation',
          id: nextId('Observation', 'o', 8),
          status: 'final',
          category: [
            {
              coding: [
                {
                  system: OBSERVATION_CATEGORY,
                  code: category,
                  display: category === 'laboratory' ? 'Laboratory' : 'Vital Signs',
                },
              ],
            },
          ],
          code: coding(LOINC, code, display),
          subject,
          encounter: ref('Encounter', encounter.id),
          effectiveDateTime: dateTime(encounter.start + Math.floor(rng() * (encounter.end - encounter.start)), offset),
        };
        if (unit) observation.valueQuantity = quantity(measurement(rng, low, high, decimals), unit);
        else {
          observation.component = [
            {
              code: coding(LOINC, '8480-6', 'Systolic blood pressure'),
              valueQuantity: quantity(measurement(rng, 95, 175, 0), 'mm[Hg]'),
            },
            {
              code: coding(LOINC, '8462-4', 'Diastolic blood pressure'),
              valueQuantity: quantity(measurement(rng, 55, 105, 0), 'mm[Hg]'),
            },
          ];
        }
        files.Observation.add(observation);
      }
    }

    const conditionCount = Math.floor(rng() * 7);
    for (let k = 0; k < conditionCount; k++) {
      const [, code, display, chronic] = CONDITION(rng);
      conditionCodes[code] = (conditionCodes[code] ?? 0) + 1;
      const encounter = pick(encounters);
      const condition = {
        resourceType: 'Condition',
        id: nextId('Condition', 'c', 7),
        clinicalStatus: coding(
          'http://terminology.hl7.org/CodeSystem/condition-clinical',
          chronic ? 'active' : 'resolved',
          chronic ? 'Active' : 'Resolved',
        ),
        verificationStatus: coding(
          'http://terminology.hl7.org/CodeSystem/condition-ver-status',
          rng() < 0.9 ? 'confirmed' : 'provisional',
        ),
        category: [
          coding(
            'http://terminology.hl7.org/CodeSystem/condition-category',
            'encounter-diagnosis',
            'Encounter Diagnosis',
          ),
        ],
        code: coding(SNOMED, code, display),
        subject,
        encounter: ref('Encounter', encounter.id),
        onsetDateTime: dateTime(encounter.start, offset),
        recordedDate: dateTime(encounter.end, offset),
      };
      if (!chronic)
        condition.abatementDateTime = dateTime(encounter.start + (7 + Math.floor(rng() * 21)) * DAY, offset);
      files.Condition.add(condition);
    }

    const medicationCount = Math.floor(rng() * 5);
    for (let k = 0; k < medicationCount; k++) {
      const [, code, display] = MEDICATION(rng);
      const encounter = pick(encounters);
      const recent = encounter.start > LAST_VISIT - 365 * DAY;
      files.MedicationRequest.add({
        resourceType: 'MedicationRequest',
        id: nextId('MedicationRequest', 'm', 7),
        status: recent ? 'active' : rng() < 0.85 ? 'completed' : 'stopped',
        intent: 'order',
        medicationCodeableConcept: coding(RXNORM, code, display),
        subject,
        encounter: ref('Encounter', encounter.id),
        authoredOn: dateTime(encounter.end - 60_000, offset),
        requester: ref('Practitioner', encounter.practitioner),
        dosageInstruction: [
          {
            sequence: 1,
            text: 'Take one by mouth daily',
            timing: { repeat: { frequency: 1, period: 1, periodUnit: 'd' } },
          },
        ],
      });
    }

    const patient = {
      resourceType: 'Patient',
      id: patientId,
      identifier: [
        {
          use: 'usual',
          type: coding('http://terminology.hl7.org/CodeSystem/v2-0203', 'MR', 'Medical record number'),
          system: MRN,
          value: mrn,
        },
      ],
      active: true,
      name: [{ use: 'official', family: familyName, given }],
      telecom: [{ system: 'phone', value: `555-${zip}-${pad(p % 10000, 4)}`, use: rng() < 0.6 ? 'mobile' : 'home' }],
      gender,
      birthDate,
      address: [
        {
          use: 'home',
          line: [`${1 + Math.floor(rng() * 9999)} ${pick(STREETS)}`],
          city,
          state,
          postalCode,
          country: 'US',
        },
      ],
      generalPractitioner: [ref('Practitioner', gp)],
      managingOrganization: ref('Organization', organization),
    };
    // Some of the oldest patients have died, after their last visit.
    if (birth < Date.UTC(1945, 0, 1) && rng() < 0.2) patient.deceasedDateTime = dateTime(last.end + 30 * DAY, offset);
    files.Patient.add(patient);

    if (p === Math.min(42, plan.patients)) {
      facts.sample = {
        id: patientId,
        mrn,
        family: familyName,
        postalCode,
        gender,
        birthDate,
        encounters: encounterCount,
      };
    }
    if (observations > facts.heaviest.observations) {
      facts.heaviest = { id: patientId, observations, encounters: encounterCount };
    }
    familyObservations[familyName] = (familyObservations[familyName] ?? 0) + observations;
    for (const code of codesSeen) patientsWithCode[code] = (patientsWithCode[code] ?? 0) + 1;
    await Promise.all(Object.values(files).map((file) => file.flush(1 << 20)));
  }
  await Promise.all(Object.values(files).map((file) => file.close()));

  const byCount = (counts) => Object.entries(counts).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const observationsByCount = byCount(observationCodes);
  facts.commonObservation = observationsByCount[0];
  facts.rareObservation = observationsByCount[observationsByCount.length - 1];
  facts.commonCondition = byCount(conditionCodes)[0];
  // The name searches use the commonest family whose prefix has an accent (Müller: `name=Mül`), so they
  // match many patients and go through the accent folding.
  facts.family = byCount(families).find(([name]) => /[^ -~]/.test(name.slice(0, 3))) ?? byCount(families)[0];
  facts.familyObservations = familyObservations[facts.family[0]];
  facts.rareObservationPatients = patientsWithCode[facts.rareObservation[0]];
  const counts = Object.fromEntries(FILES.map((type) => [type, files[type].lines]));
  const resources = Object.values(counts).reduce((a, b) => a + b, 0);
  facts.counts = counts;
  return {
    dir,
    files: FILES.map((type) => files[type].path),
    counts,
    resources,
    facts,
    seconds: +((performance.now() - started) / 1000).toFixed(1),
  };
}

// Printed by the import process as it exits: its peak RSS, which the benchmark cannot read from outside
// once the process is gone.
const PEAK_RSS = `data:text/javascript,${encodeURIComponent(
  "import { writeSync } from 'node:fs'; process.on('exit', () => writeSync(2, `\\npeak-rss-kb ${process.resourceUsage().maxRSS}\\n`));",
)}`;

/** Runs the import command on `paths`; answers resources, seconds, resources/s and its peak RSS. */
export async function timedImport(bin, env, paths) {
  const started = performance.now();
  const output = await run(process.execPath, [`--import=${PEAK_RSS}`, bin, 'import', ...paths], { env });
  const seconds = (performance.now() - started) / 1000;
  const loaded = Number(/Loaded (\d+) resources/.exec(output)?.[1] ?? 0);
  const peakKb = Number(/peak-rss-kb (\d+)/.exec(output)?.[1] ?? 0);
  return {
    resources: loaded,
    seconds: +seconds.toFixed(1),
    perSec: Math.round(loaded / seconds),
    peakRssMb: peakKb ? Math.round(peakKb / 1024) : undefined,
  };
}

/** The database's size on disk: the SQLite file with its WAL, or the tables (with indexes and TOAST) of a schema. */
export async function databaseBytes(databaseUrl, schema) {
  if (databaseUrl.startsWith('sqlite:')) {
    const path = databaseUrl.slice('sqlite:'.length);
    return [path, `${path}-wal`].filter((f) => existsSync(f)).reduce((sum, f) => sum + statSync(f).size, 0);
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT sum(pg_total_relation_size(c.oid))::bigint AS bytes FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
      [schema],
    );
    return Number(rows[0].bytes ?? 0);
  } finally {
    await client.end();
  }
}

const matches = (bundle) => (bundle.entry ?? []).filter((e) => (e.search?.mode ?? 'match') === 'match').length;

/** The fixed search mix, with values taken from the generator's facts so that every search matches. */
export function syntheticQueries(facts) {
  const q = encodeURIComponent;
  const { sample, heaviest } = facts;
  const prefix = facts.family[0].slice(0, 3);
  const common = `${LOINC}|${facts.commonObservation[0]}`;
  const rare = `${LOINC}|${facts.rareObservation[0]}`;
  return {
    'Patient?name (prefix)': `Patient?name=${q(prefix)}`,
    'Patient?identifier': `Patient?identifier=${q(`${MRN}|${sample.mrn}`)}`,
    'Patient?birthdate=ge&gender': 'Patient?birthdate=ge1990-01-01&gender=female',
    'Patient?address-postalcode': `Patient?address-postalcode=${sample.postalCode}`,
    'Observation?code (common)': `Observation?code=${q(common)}`,
    'Observation?code (rare)': `Observation?code=${q(rare)}`,
    'Observation?code&date=ge': `Observation?code=${q(common)}&date=ge2024-01-01`,
    'Observation?patient&_sort=-date (3 pages)': `Observation?patient=Patient/${heaviest.id}&_sort=-date&_count=20`,
    'Observation?subject:Patient.name (chain)': `Observation?subject:Patient.name=${q(prefix)}&_count=10`,
    'Patient?_has:Observation:patient:code (rare)': `Patient?_has:Observation:patient:code=${q(rare)}&_count=10`,
    // The common code is the slow case of the Synthea mix: the reverse chain reaches most patients.
    'Patient?_has:Observation:patient:code (common)': `Patient?_has:Observation:patient:code=${q(common)}&_count=10`,
    'Encounter?patient&_include=Encounter:practitioner': `Encounter?patient=Patient/${heaviest.id}&_include=Encounter:practitioner`,
    'Patient?_id&_revinclude=Encounter:patient': `Patient?_id=${heaviest.id}&_revinclude=Encounter:patient`,
    'Condition?code': `Condition?code=${q(`${SNOMED}|${facts.commonCondition[0]}`)}&_count=50`,
    'MedicationRequest?authoredon=ge': 'MedicationRequest?authoredon=ge2025-01-01&_count=20',
    'Observation?value-quantity=gt100 mg/dL': `Observation?value-quantity=${q(`gt100|${UCUM}|mg/dL`)}`,
  };
}

/**
 * Counts the server must get exactly right, since the generator knows them: a search that answers fast
 * but wrong would otherwise go unnoticed. Answers [{ name, expected, actual }].
 */
export async function syntheticChecks(baseUrl, token, facts) {
  const fhir = `${baseUrl}/fhir`;
  const q = encodeURIComponent;
  const checks = [
    ['Patient total', 'Patient?_summary=count', facts.counts.Patient],
    ['Observation total', 'Observation?_summary=count', facts.counts.Observation],
    ['Patient?identifier', `Patient?identifier=${q(`${MRN}|${facts.sample.mrn}`)}&_summary=count`, 1],
    [
      'Observation?code (rare)',
      `Observation?code=${q(`${LOINC}|${facts.rareObservation[0]}`)}&_summary=count`,
      facts.rareObservation[1],
    ],
    [
      'Observation?code (common)',
      `Observation?code=${q(`${LOINC}|${facts.commonObservation[0]}`)}&_summary=count`,
      facts.commonObservation[1],
    ],
    [
      'Condition?code',
      `Condition?code=${q(`${SNOMED}|${facts.commonCondition[0]}`)}&_summary=count`,
      facts.commonCondition[1],
    ],
    ['Encounter?patient', `Encounter?patient=Patient/${facts.heaviest.id}&_summary=count`, facts.heaviest.encounters],
    [
      'Observation?patient',
      `Observation?patient=Patient/${facts.heaviest.id}&_summary=count`,
      facts.heaviest.observations,
    ],
  ];
  const family = facts.family[0];
  // No given name starts like these families, so the prefix matches the family's patients only.
  checks.push(
    ['Patient?family:exact', `Patient?family:exact=${q(family)}&_summary=count`, facts.family[1]],
    ['Patient?name (prefix)', `Patient?name=${q(family.slice(0, 3))}&_summary=count`, facts.family[1]],
    [
      'Observation?subject:Patient.name (chain)',
      `Observation?subject:Patient.name=${q(family.slice(0, 3))}&_summary=count`,
      facts.familyObservations,
    ],
    [
      'Patient?_has:Observation:patient:code (rare)',
      `Patient?_has:Observation:patient:code=${q(`${LOINC}|${facts.rareObservation[0]}`)}&_summary=count`,
      facts.rareObservationPatients,
    ],
  );
  const results = [];
  for (const [name, query, expected] of checks) {
    const bundle = await getJson(`${fhir}/${query}`, token);
    results.push({ name, expected, actual: bundle.total });
  }
  return results;
}

/**
 * Runs each search of the mix `n` times with `concurrency` clients, or for at most `maxSeconds` (a
 * search that takes seconds at 1M resources still gets a row without holding the run for hours).
 */
export async function syntheticMix(baseUrl, token, { facts, n = 200, concurrency = 8, maxSeconds = 60 }) {
  const fhir = `${baseUrl}/fhir`;
  const rows = [];
  for (const [name, query] of Object.entries(syntheticQueries(facts))) {
    const first = await getJson(`${fhir}/${query}`, token);
    const timed = await timeSearch(baseUrl, token, query, {
      n,
      concurrency,
      maxSeconds,
      pages: name.includes('pages') ? 3 : 1,
    });
    rows.push({ name, query, matches: matches(first), ...timed });
  }
  return rows;
}

/**
 * The same searches on a small and on the large data set, each `{ url, token, facts, cpuMs }` with a
 * server of its own (`cpuMs()`: the server process's CPU plus its database's), taken in the order small,
 * large, large, small so that the machine's drifting speed falls on both sizes alike. Answers per search
 * the server side's CPU ms per search at each size and their ratio: the cost of a page should not grow
 * with the data (each page is an index range, or a walk in `pk` order that stops after the page).
 */
export async function sizeComparison(small, large, { n = 500, concurrency = 8, maxSeconds = 30 }) {
  const smallQueries = syntheticQueries(small.facts);
  const largeQueries = syntheticQueries(large.facts);
  const rows = [];
  for (const name of Object.keys(largeQueries)) {
    const pages = name.includes('pages') ? 3 : 1;
    const sizes = { small: { ...small, query: smallQueries[name] }, large: { ...large, query: largeQueries[name] } };
    const spent = { small: { ms: 0, requests: 0 }, large: { ms: 0, requests: 0 } };
    for (const size of ['small', 'large']) {
      // One untimed pass each, so that neither side pays for the first plans and compilations.
      const { url, token, query } = sizes[size];
      await timeSearch(url, token, query, { n: 50, concurrency, pages });
    }
    for (const size of ['small', 'large', 'large', 'small']) {
      const { url, token, query, cpuMs } = sizes[size];
      const before = cpuMs();
      const timed = await timeSearch(url, token, query, { n, concurrency, pages, maxSeconds });
      spent[size].ms += cpuMs() - before;
      spent[size].requests += timed.requests;
    }
    const perSearch = (size) => spent[size].ms / spent[size].requests;
    rows.push({
      name,
      matches: {
        small: matches(await getJson(`${small.url}/fhir/${smallQueries[name]}`, small.token)),
        large: matches(await getJson(`${large.url}/fhir/${largeQueries[name]}`, large.token)),
      },
      smallCpuMs: +perSearch('small').toFixed(3),
      largeCpuMs: +perSearch('large').toFixed(3),
      ratio: +(perSearch('large') / perSearch('small')).toFixed(2),
    });
  }
  return rows;
}
