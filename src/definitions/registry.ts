/**
 * Run-time access to the compiled R4 rules in `generated/r4.json` (written by `build-r4.ts` at build time).
 * The file is read once per process; every lookup after that is a Map access.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type {
  CompartmentRule,
  ElementRule,
  PrimitiveTypeRule,
  R4Definitions,
  SearchParameterRule,
  SearchParameterType,
  SkippedConstraint,
  TypeRule,
  ValueSetRule,
} from './types.js';

export type * from './types.js';

/** A search parameter with the spec's defaults filled in, ready for the search planner. */
export interface SearchParameterDefinition extends SearchParameterRule {
  modifiers: string[];
  multipleOr: boolean;
  multipleAnd: boolean;
}

export interface R4Registry {
  readonly fhirVersion: string;
  /** Sorted names of every concrete R4 resource type. */
  readonly resourceTypes: readonly string[];
  readonly skippedConstraints: readonly SkippedConstraint[];
  isResourceType(name: string): boolean;
  /** A resource or complex data type (abstract ones too: `Resource`, `DomainResource`, `Element`...). */
  type(name: string): TypeRule | undefined;
  /** Element rule by type and path; the path may be relative (`contact.name`) or prefixed (`Patient.contact.name`). */
  element(typeName: string, path: string): ElementRule | undefined;
  primitiveType(name: string): PrimitiveTypeRule | undefined;
  /** A value set named by a required binding (canonical URL, with or without `|version`). */
  valueSet(url: string): ValueSetRule | undefined;
  searchParameters(resourceType: string): readonly SearchParameterDefinition[];
  searchParameter(resourceType: string, code: string): SearchParameterDefinition | undefined;
  /** The R4 compartment of resources of type `code` (Patient, Encounter, RelatedPerson, Practitioner, Device). */
  compartment(code: string): CompartmentRule | undefined;
  /** Every compartment type, in the order the definitions list them. */
  readonly compartments: readonly CompartmentRule[];
  /** The top-level elements a resource type marks isSummary (without `[x]`); none for an unknown type. */
  summaryElements(resourceType: string): readonly string[];
}

/**
 * Modifiers allowed per parameter type (https://hl7.org/fhir/R4/search.html#modifiers). R4 SearchParameter resources
 * do not list them, so they come from the spec's table. Reference parameters also accept `:[type]` for any target.
 */
export const STANDARD_MODIFIERS: Record<SearchParameterType, readonly string[]> = {
  string: ['missing', 'exact', 'contains'],
  token: ['missing', 'text', 'not', 'above', 'below', 'in', 'not-in', 'of-type'],
  reference: ['missing', 'identifier', 'above', 'below'],
  date: ['missing'],
  number: ['missing'],
  quantity: ['missing'],
  uri: ['missing', 'above', 'below'],
  composite: ['missing'],
  special: [],
};

const registries = new Map<string, R4Registry>();

/** Where `npm run build` writes the compiled rules: `<repo>/generated/r4.json` (this file sits two levels down). */
export function defaultDefinitionsPath(): string {
  return join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), 'generated', 'r4.json');
}

/** Loads (once per path, then cached) the compiled R4 definitions. */
export function loadR4Definitions(path: string = defaultDefinitionsPath()): R4Registry {
  const cached = registries.get(path);
  if (cached) return cached;
  if (!existsSync(path)) {
    throw new Error(`FHIR R4 definitions not found at ${path}: run \`npm run build\` to generate them.`);
  }
  const definitions = JSON.parse(readFileSync(path, 'utf8')) as R4Definitions;
  if (!definitions.summaryElements) {
    throw new Error(
      `FHIR R4 definitions at ${path} are from an older build: run \`npm run build\` to regenerate them.`,
    );
  }
  // build-r4 writes the file without them; the next build step adds them. Without them no binding is checked.
  if (!definitions.valueSets) {
    throw new Error(
      `FHIR R4 definitions at ${path} lack the required value sets' codes: run \`npm run build\` to complete them.`,
    );
  }
  const registry = createRegistry(definitions);
  registries.set(path, registry);
  return registry;
}

export function createRegistry(definitions: R4Definitions): R4Registry {
  const resourceTypes = new Set(definitions.resourceTypes);
  const types = new Map(Object.entries(definitions.types));
  const primitives = new Map(Object.entries(definitions.primitiveTypes));
  const valueSets = new Map(Object.entries(definitions.valueSets));
  const searchParametersByType = new Map<string, SearchParameterDefinition[]>();
  const searchParameterByKey = new Map<string, SearchParameterDefinition>();
  for (const [resourceType, rules] of Object.entries(definitions.searchParameters)) {
    const list = rules.map(withSearchDefaults);
    searchParametersByType.set(resourceType, list);
    for (const parameter of list) searchParameterByKey.set(`${resourceType}|${parameter.code}`, parameter);
  }

  const compartments = new Map(Object.entries(definitions.compartments ?? {}));
  const summaryElements = new Map(Object.entries(definitions.summaryElements));

  return {
    fhirVersion: definitions.fhirVersion,
    resourceTypes: definitions.resourceTypes,
    skippedConstraints: definitions.skippedConstraints,
    isResourceType: (name) => resourceTypes.has(name),
    type: (name) => types.get(name),
    element(typeName, path) {
      const relative = path.startsWith(`${typeName}.`) ? path.slice(typeName.length + 1) : path;
      return types.get(typeName)?.elements[relative];
    },
    primitiveType: (name) => primitives.get(name),
    valueSet(url) {
      const bar = url.indexOf('|');
      return valueSets.get(bar < 0 ? url : url.slice(0, bar));
    },
    searchParameters: (resourceType) => searchParametersByType.get(resourceType) ?? [],
    searchParameter: (resourceType, code) => searchParameterByKey.get(`${resourceType}|${code}`),
    compartment: (code) => compartments.get(code),
    compartments: [...compartments.values()],
    summaryElements: (resourceType) => summaryElements.get(resourceType) ?? [],
  };
}

function withSearchDefaults(rule: SearchParameterRule): SearchParameterDefinition {
  return {
    ...rule,
    modifiers: rule.modifiers ?? [...STANDARD_MODIFIERS[rule.type]],
    multipleOr: rule.multipleOr ?? true,
    multipleAnd: rule.multipleAnd ?? true,
  };
}
