/**
 * Shape of `generated/r4.json`, the compact rules that `build-r4.ts` compiles from the FHIR R4 (4.0.1)
 * StructureDefinitions and SearchParameters, with the required value sets that the terminology engine expands
 * (src/terminology/build-r4-bindings.ts). The build steps write this shape and the registry reads it, so they all
 * import these types from here.
 *
 * Element paths are relative to their type: `Patient.contact.name` is stored under type `Patient` as `contact.name`.
 */

export const R4_FHIR_VERSION = '4.0.1';

export interface R4Definitions {
  fhirVersion: string;
  /** Sorted names of every concrete (non-abstract) R4 resource type. */
  resourceTypes: string[];
  /** Primitive types (boolean, string, date, ...) with the regex and JSON representation the spec gives them. */
  primitiveTypes: Record<string, PrimitiveTypeRule>;
  /** Resources (abstract ones too) and complex data types, by name. */
  types: Record<string, TypeRule>;
  /**
   * The value sets named by a required binding, by canonical URL (without `|version`): the terminology engine's
   * expansions, written by the build step after build-r4 (src/terminology/build-r4-bindings.ts).
   */
  valueSets: Record<string, ValueSetRule>;
  /** The R4 SearchParameters that apply to each concrete resource type, by resource type. */
  searchParameters: Record<string, SearchParameterRule[]>;
  /** Invariants dropped at build time, with the reason, so the docs and tests can list them. */
  skippedConstraints: SkippedConstraint[];
  /** The R4 CompartmentDefinitions (Patient, Encounter, RelatedPerson, Practitioner, Device), by compartment type. */
  compartments: Record<string, CompartmentRule>;
  /**
   * Per concrete resource type, the top-level elements its StructureDefinition marks isSummary (names without
   * `[x]`): what `_summary=true` keeps.
   */
  summaryElements: Record<string, string[]>;
}

/**
 * One compartment (https://hl7.org/fhir/R4/compartmentdefinition.html): which resources of which types are
 * in the compartment of a resource of type `code`.
 */
export interface CompartmentRule {
  code: string;
  url: string;
  /**
   * The member types: a resource is in `Code/id`'s compartment when one of `params` (reference search
   * parameters of its type) refers to `Code/id`, or, with `self`, when it is `Code/id` itself.
   */
  members: Record<string, { params: string[]; self: boolean }>;
}

export interface PrimitiveTypeRule {
  /** The JSON type of the value: FHIR's integer and decimal are JSON numbers, boolean is a JSON boolean. */
  json: 'string' | 'number' | 'boolean';
  /** Regex from the spec (unanchored, as published); absent when the spec gives none (xhtml). */
  regex?: string;
  minValue?: number;
  maxValue?: number;
  maxLength?: number;
}

export interface TypeRule {
  kind: 'resource' | 'complex-type';
  /** Name of the type this one specialises or constrains (`DomainResource`, `Element`, `Quantity`...). */
  base?: string;
  abstract?: true;
  /** Invariants on the type itself (not inherited ones: walk `base` for those). */
  constraints?: ConstraintRule[];
  /** Every element below the root, keyed by path relative to the type (`contact.name`, `value[x]`). */
  elements: Record<string, ElementRule>;
}

export interface ElementRule {
  /** Minimum cardinality; absent means 0. */
  min?: number;
  /** Maximum cardinality: a number or `*`; absent means 1. */
  max?: number | '*';
  /** Allowed types. Absent when `contentReference` is set (the referenced element's types apply). */
  types?: ElementType[];
  /** True for choice elements (`value[x]`): the JSON property name carries the type (`valueString`). */
  choice?: true;
  /** Canonical URL of the value set of a *required* binding (only required bindings are kept). */
  binding?: string;
  /** For recursive elements: the relative path whose definition applies here (`item` for `Questionnaire.item.item`). */
  contentReference?: string;
  /** Fixed or pattern values (none in base R4 resources, but carried through if the spec has any). */
  fixed?: unknown;
  pattern?: unknown;
  /** Invariants declared on this element (severity error, minus the ones skipped at build time). */
  constraints?: ConstraintRule[];
}

export interface ElementType {
  /** FHIR type code: a primitive (`string`, `id`), a complex type (`HumanName`), `BackboneElement`, `Resource`... */
  code: string;
  /** Resource type names allowed by a Reference or canonical (`Resource` allows any). */
  targets?: string[];
  /** A constraint profile that narrows the type (`SimpleQuantity`, `MoneyQuantity`). */
  profile?: string;
}

export interface ConstraintRule {
  key: string;
  human: string;
  expression: string;
}

export interface SkippedConstraint {
  key: string;
  /** Where the constraint was declared (`Element`, `Patient.contact`...). */
  context: string;
  reason: string;
}

/**
 * Codes allowed by a required value set, grouped by code system: the terminology engine's expansion. A value set the
 * engine cannot expand from R4's terminology (unknown, an external code system, past its bounds) is `unchecked`, with
 * the engine's error code and message: the validator then accepts any code rather than reject valid data.
 */
export type ValueSetRule = { codes: Record<string, string[]> } | { unchecked: string };

export type SearchParameterType =
  'number' | 'date' | 'string' | 'token' | 'reference' | 'composite' | 'quantity' | 'uri' | 'special';

export interface SearchParameterRule {
  code: string;
  type: SearchParameterType;
  /** FHIRPath expression restricted to this resource type (absent for `_text`, `_content`, `_query`). */
  expression?: string;
  /** Resource types a reference parameter may point to. */
  targets?: string[];
  /** Components of a composite parameter: the component parameter's code and its expression relative to the match. */
  components?: SearchParameterComponent[];
  /** Modifiers declared by the SearchParameter itself (R4 declares none; see `standardModifiers` in the registry). */
  modifiers?: string[];
  comparators?: string[];
  /** Absent means the spec default (true). */
  multipleOr?: boolean;
  multipleAnd?: boolean;
  url: string;
}

export interface SearchParameterComponent {
  code: string;
  expression: string;
}
