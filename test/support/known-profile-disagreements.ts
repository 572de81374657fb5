/**
 * The HL7 validator's profile test cases (test/fixtures/fhir-test-cases-validator-r4-profiles) where our verdict
 * differs from the Java reference validator's, and why; and the cases' StructureDefinitions that the server
 * refuses to store as they are. test/profiles-hl7-cases.int.test.ts fails on any disagreement or refusal not
 * listed here, and on any listed one that no longer happens (so the lists stay true).
 */
import type { KnownDisagreement } from './known-disagreements.js';

export interface RefusedProfile {
  /** The file, relative to the fixture folder. */
  file: string;
  /** A part of the refusal's diagnostics. */
  refusal: string;
  /** Whether the test's repair (repairProfile) makes it storable without changing what it constrains. */
  repairable: boolean;
  reason: string;
}

const NOT_R4_VALID =
  'Not a valid R4 StructureDefinition, so the server refuses it as it refuses any invalid resource; the Java ' +
  'validator loads supporting files without validating them. The test stores it after filling in what R4 ' +
  'requires and the profile leaves out (status, name, element ids from paths and slice names), which changes ' +
  'nothing it constrains.';

export const REFUSED_PROFILES: RefusedProfile[] = [
  ...[
    'cases/obs-max-decimal-profile.json',
    'cases/obs-percent-profile.json',
    'cases/obs-value-min-profile.json',
    'cases/param-mintime-profile.json',
    'cases/parameters-profiled-resource-profiles-patient.json',
    'cases/profile-slicing-support-patient.json',
    'cases/profile-slicing-support-practitioner.json',
    'cases/profile-slicing-support-practitionerrole.json',
  ].map((file) => ({ file, refusal: 'sdf-14', repairable: true, reason: `Elements without ids. ${NOT_R4_VALID}` })),
  {
    file: 'cases/parameters-profiled-resource-profiles-patient2.json',
    refusal: 'sdf-14',
    repairable: false,
    reason:
      `Elements without ids. ${NOT_R4_VALID} Repaired, it is still refused (422 profile-invalid): it constrains ` +
      'Patient.dateOfBirth, which Patient does not have, so no resource could conform to it.',
  },
  ...[
    'cases/parameters-profiled-resource-profile-params.json',
    'cases/parameters-profiled-resource-profile-params-multiples.json',
  ].map((file) => ({
    file,
    refusal: 'StructureDefinition.status: minimum cardinality 1',
    repairable: true,
    reason: `No status. ${NOT_R4_VALID}`,
  })),
  {
    file: 'cases/sdoh-type-slice-profile.json',
    refusal: 'StructureDefinition.name: minimum cardinality 1',
    repairable: true,
    reason: `No name. ${NOT_R4_VALID}`,
  },
  {
    file: 'cases/additional-bindings-profile-2.json',
    refusal: 'StructureDefinition.abstract: expected a JSON boolean',
    repairable: true,
    reason: `"abstract": "false" is a string. ${NOT_R4_VALID}`,
  },
  ...['cases/toplevel-minvalueduration-profile.json', 'cases/toplevel-maxvalueduration-profile.json'].map((file) => ({
    file,
    refusal: 'ValueDuration',
    repairable: false,
    reason:
      'minValueDuration/maxValueDuration do not exist in R4 (minValue[x] and maxValue[x] allow no Duration; R5 ' +
      'added it), so the StructureDefinition is not valid R4 and cannot be stored; the instance is then validated ' +
      'against a profile the server does not hold (a warning).',
  })),
];

export const KNOWN_PROFILE_DISAGREEMENTS: KnownDisagreement[] = [
  {
    name: 'obs-max-decimal',
    expected: 'valid',
    reason:
      'The profile puts maxValueDecimal 100 on Observation.value[x].value and the instance has 150.25: we refuse ' +
      "it. The instance's own id (test-fail-max-value-decimal-sub-element) says it should fail; Java's recorded " +
      'outcome has no error, so Java does not apply the bound below a choice element.',
  },
  {
    name: 'ad-practitioner-resource',
    expected: 'invalid',
    reason:
      'The StructureDefinition says derivation "specialization" (a new type), so the server does not use it as a ' +
      'profile ($validate warns that it holds no such profile); Java applies it as a profile anyway, and its fixed ' +
      'ContactPoint {use: home} on a slice then fails on a telecom that also has system and value.',
  },
  {
    name: 'sdoh-type-slice',
    expected: 'invalid',
    reason:
      "Java's one error is a LOINC display that is not LOINC's (checked against a terminology server); LOINC is not " +
      'held here, and displays are not checked.',
  },
  ...['toplevel-minvalueduration-fail', 'toplevel-maxvalueduration-fail'].map((name) => ({
    name,
    expected: 'invalid' as const,
    reason:
      'The profile uses minValueDuration/maxValueDuration, which R4 does not have, so the server refuses to store ' +
      'it (REFUSED_PROFILES) and validates against a profile it does not hold (a warning).',
  })),
  {
    name: 'additional-bindings-observation-2',
    expected: 'invalid',
    reason:
      'The required binding is an additional binding, given by the R5 extension ' +
      'extension-ElementDefinition.binding.additional on an example binding; the server reads only ' +
      'ElementDefinition.binding itself.',
  },
  {
    name: 'res-inv-example-good',
    expected: 'invalid',
    reason:
      "Java's errors come from Organization.endpoint's targetProfile (smart-app-launch user-access-endpoint), which " +
      'the case does not supply: Java counts a profile it cannot resolve as an error; we ignore profiles we do ' +
      'not hold.',
  },
  {
    name: 'res-inv-example-bad',
    expected: 'invalid',
    reason:
      'Java finds the Organization failing uab-1 and its endpoint reference missing from the Bundle ' +
      '(aggregation "bundled"). uab-1 uses subsetOf(), outside the allow-list of FHIRPath functions for ' +
      "profiles' invariants, so it is skipped; aggregation is not checked. $validate warns of the skipped uab-1.",
  },
  {
    name: 'parameters-profiled-resource-multiple',
    expected: 'valid',
    reason:
      'parameter.resource names two profiles in type.profile; a value must conform to at least one. The first ' +
      'requires Patient.name, which the Patient lacks; the second constrains Patient.dateOfBirth, which Patient ' +
      'does not have, and the server refuses to store it. So the Patient conforms to no profile it holds, and ' +
      'we refuse it; Java reports no issue at all on it (its outcome gives no reason).',
  },
];
