// The R4 Patient compartment (https://hl7.org/fhir/R4/compartmentdefinition-patient.html) as the export
// walks it: for each resource type, the search parameters through which a resource belongs to a
// patient's compartment. `/Patient/$export` and `/Group/{id}/$export` export the compartments of
// patients. Read from the compiled CompartmentDefinitions (definitions/), the same ones compartment
// search and $everything use.
import type { R4Registry } from '../definitions/registry.js';

/** Types → their compartment parameters; member types without any (only `self`) are left out (pure). */
export function patientCompartmentParams(
  registry: Pick<R4Registry, 'compartment'>,
): ReadonlyMap<string, readonly string[]> {
  const rule = registry.compartment('Patient');
  if (!rule) throw new Error('the compiled definitions lack the R4 Patient CompartmentDefinition');
  return new Map(
    Object.entries(rule.members)
      .filter(([, member]) => member.params.length > 0)
      .map(([type, member]) => [type, [...member.params]]),
  );
}
