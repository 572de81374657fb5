/**
 * Official R4 examples that break a rule of R4 itself, so the validator rightly rejects them. Keep this list short:
 * a validator that rejects the spec's own examples is usually the one that is wrong. Each entry names the issue
 * (expression and code) the validator must report, and why the example is at fault.
 */
import type { ValidationIssue } from '../../src/validation/validate.js';

export interface KnownInvalidExample {
  /** `ResourceType/id` of the example in all-r4-examples.ndjson.gz, or `with-narrative/<file>`. */
  key: string;
  expression: string;
  code: ValidationIssue['code'];
  reason: string;
}

const SDF_4 =
  'sdf-4 (abstract = true or baseDefinition.exists()): this logical model of a pattern is not abstract and has no baseDefinition';

export const KNOWN_INVALID_EXAMPLES: KnownInvalidExample[] = [
  { key: 'StructureDefinition/Definition', expression: 'StructureDefinition', code: 'invariant', reason: SDF_4 },
  { key: 'StructureDefinition/Event', expression: 'StructureDefinition', code: 'invariant', reason: SDF_4 },
  { key: 'StructureDefinition/FiveWs', expression: 'StructureDefinition', code: 'invariant', reason: SDF_4 },
  { key: 'StructureDefinition/Request', expression: 'StructureDefinition', code: 'invariant', reason: SDF_4 },
  {
    key: 'DeviceMetric/example',
    expression: 'DeviceMetric.parent.reference',
    code: 'structure',
    reason: 'DeviceMetric.parent is Reference(Device) in R4, but the example points at DeviceDefinition/dc102',
  },
  {
    key: 'SearchParameter/questionnaireresponse-extensions-QuestionnaireResponse-item-subject',
    expression: 'SearchParameter.id',
    code: 'value',
    reason: 'the id has 67 characters; an R4 id is at most 64 ([A-Za-z0-9\\-\\.]{1,64})',
  },
  {
    key: 'with-narrative/medicationrequest0301.json',
    expression: 'MedicationRequest.dispenseRequest.performer.reference',
    code: 'structure',
    reason:
      'dispenseRequest.performer is Reference(Organization) in R4; this later fhir-test-cases copy points at ' +
      'Practitioner/f001 (the copy in all-r4-examples.ndjson.gz has Organization/f001 and passes)',
  },
];
