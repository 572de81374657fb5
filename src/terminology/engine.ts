// The terminology engine: ValueSet expansion and validation, CodeSystem lookup and validation
// (https://hl7.org/fhir/R4/terminology-service.html), over the R4 code systems and value sets
// (generated/r4-terminology.json.gz, read on first use) and those stored on the server (a stored one wins
// for the same url and version). Everything is computed in memory, within the bounds of LIMITS.
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import {
  loadR4Terminology,
  type CodeSystemResource,
  type Coding,
  type ConceptSetComponent,
  type ExpansionContains,
  type ValueSetFilter,
  type ValueSetResource,
} from '../definitions/terminology.js';
import { LinearRegex, UnsupportedPattern, type StepBudget } from '../request-fhirpath/linear-regex.js';
import { indexOf, propertyText, type CodeSystemIndex } from './code-system-index.js';

export const LIMITS = {
  /** Codes an $expand answers at most (`count` above it is a 400); also the default page. */
  maxCount: 1000,
  /** Codes a value set may expand to before paging, text filter or validation: 422 too-costly past it. */
  maxExpansion: 10_000,
  /** Value sets nested in value sets (compose.include.valueSet), the outer one counting as 1. */
  maxDepth: 16,
  /** re2js steps the `regex` filters of one request may take (linear-regex.ts charges them). */
  regexSteps: 20_000_000,
  /**
   * Codes one request may visit while expanding (each code a filter looks at, an include selects, a
   * nested value set or an exclude contributes): many includes of large code systems stop here.
   */
  maxWork: 500_000,
  /** Distinct canonical urls one request may look up among the stored resources (each a search). */
  maxLookups: 100,
};

/** The ValueSets and CodeSystems stored on the server with a canonical url (every version). */
export interface StoredTerminology {
  valueSets(url: string): Promise<ValueSetResource[]>;
  codeSystems(url: string): Promise<CodeSystemResource[]>;
}

/** One code of an expansion. */
export interface ExpandedCode {
  system: string;
  version?: string;
  code: string;
  display?: string;
  abstract?: boolean;
  inactive?: boolean;
}

type Expansion = Map<string, ExpandedCode>;

export interface ExpandOptions {
  filter?: string;
  offset?: number;
  count?: number;
  /** Echoed in expansion.parameter, as the request named them. */
  parameters?: { name: string; [value: string]: unknown }[];
}

export interface ParametersResource {
  resourceType: 'Parameters';
  parameter: { name: string; [value: string]: unknown }[];
}

interface R4Catalog {
  valueSets: Map<string, ValueSetResource[]>;
  codeSystems: Map<string, CodeSystemResource[]>;
}

let r4Catalog: R4Catalog | undefined;

/** The R4 terminology, read on the first terminology request of the process. */
function r4(): R4Catalog {
  if (!r4Catalog) {
    const { valueSets, codeSystems } = loadR4Terminology();
    const byUrl = <T extends { url?: string }>(resources: T[]) => {
      const map = new Map<string, T[]>();
      for (const resource of resources) {
        if (!resource.url) continue;
        const list = map.get(resource.url) ?? [];
        list.push(resource);
        map.set(resource.url, list);
      }
      return map;
    };
    r4Catalog = { valueSets: byUrl(valueSets), codeSystems: byUrl(codeSystems) };
  }
  return r4Catalog;
}

/** `url|version` → its parts; an explicit version wins over the canonical's. */
export function canonicalParts(canonical: string, version?: string): { url: string; version?: string } {
  const bar = canonical.indexOf('|');
  if (bar < 0) return { url: canonical, version };
  return { url: canonical.slice(0, bar), version: version ?? (canonical.slice(bar + 1) || undefined) };
}

/** The resource of that version, or the latest when none is asked (versions compared as numbers where they are). */
function pickVersion<T extends { version?: string }>(candidates: readonly T[], version?: string): T | undefined {
  if (version !== undefined) return candidates.find((c) => c.version === version);
  return [...candidates].sort((a, b) =>
    (b.version ?? '').localeCompare(a.version ?? '', undefined, { numeric: true }),
  )[0];
}

const name = (resource: { url?: string; version?: string; id?: string }) =>
  resource.url ? `${resource.url}${resource.version ? `|${resource.version}` : ''}` : `#${resource.id ?? '(inline)'}`;

/** Code systems whose concepts the server holds in full: the others (SNOMED CT, LOINC...) cannot be expanded. */
function holdsContent(cs: CodeSystemResource | undefined): boolean {
  return cs !== undefined && (cs.content === 'complete' || cs.content === undefined) && !cs.supplements;
}

const keyOf = (system: string, code: string) => `${system}\u0000${code}`;

interface ExpandContext {
  /** The value sets being expanded, outermost first: a cycle or a nesting past maxDepth stops. */
  readonly path: string[];
  readonly budget: StepBudget;
  /** Charged with the codes each step visits (LIMITS.maxWork). */
  readonly work: (codes: number) => void;
}

function workBudget(): (codes: number) => void {
  let left = LIMITS.maxWork;
  return (codes) => {
    left -= codes;
    if (left < 0) {
      throw new AppError(
        'expansion-too-costly',
        `This expansion visits more than ${LIMITS.maxWork} codes (large code systems included or filtered many times)`,
      );
    }
  };
}

function stepBudget(): StepBudget {
  let left = LIMITS.regexSteps;
  return {
    spend(steps) {
      left -= steps;
      if (left < 0) {
        throw new AppError(
          'expansion-too-costly',
          `The regex filters of this request take more than ${LIMITS.regexSteps} steps`,
        );
      }
    },
  };
}

export class TerminologyEngine {
  constructor(private readonly stored: StoredTerminology) {}

  async findValueSet(canonical: string, version?: string): Promise<ValueSetResource | undefined> {
    const parts = canonicalParts(canonical, version);
    const stored = pickVersion(await this.stored.valueSets(parts.url), parts.version);
    return stored ?? pickVersion(r4().valueSets.get(parts.url) ?? [], parts.version);
  }

  async findCodeSystem(canonical: string, version?: string): Promise<CodeSystemResource | undefined> {
    const parts = canonicalParts(canonical, version);
    const stored = pickVersion(await this.stored.codeSystems(parts.url), parts.version);
    return stored ?? pickVersion(r4().codeSystems.get(parts.url) ?? [], parts.version);
  }

  async requireValueSet(canonical: string, version?: string): Promise<ValueSetResource> {
    const vs = await this.findValueSet(canonical, version);
    if (!vs) {
      const asked = version === undefined ? canonical : `${canonical}|${version}`;
      throw new AppError('terminology-not-found', `No value set ${asked} is known to this server`);
    }
    return vs;
  }

  /** A code system whose content the server holds: 404 for one it does not know, 422 for one it cannot serve. */
  async requireCodeSystem(canonical: string, version?: string): Promise<CodeSystemResource> {
    const cs = await this.findCodeSystem(canonical, version);
    const asked = version === undefined ? canonical : `${canonical}|${version}`;
    if (!cs) throw new AppError('terminology-not-found', `No code system ${asked} is known to this server`);
    if (!holdsContent(cs)) {
      throw new AppError(
        'terminology-not-supported',
        `The server does not hold the content of code system ${asked} (content: ${cs.content ?? 'unknown'})`,
      );
    }
    return cs;
  }

  /** A CodeSystem at hand (stored by id, inline) if the server can serve its content; 422 otherwise. */
  servable(cs: CodeSystemResource, label: string): CodeSystemResource {
    if (!holdsContent(cs)) {
      throw new AppError(
        'terminology-not-supported',
        `Code system ${label} does not hold its content (content: ${cs.content ?? 'unknown'})`,
      );
    }
    return cs;
  }

  /** https://hl7.org/fhir/R4/valueset-operation-expand.html: the value set with an expansion page. */
  async expand(vs: ValueSetResource, options: ExpandOptions = {}): Promise<ValueSetResource> {
    const codes = [...(await this.expandAll(vs)).values()];
    const text = options.filter?.trim().toLowerCase();
    const matching = text
      ? codes.filter((c) => c.code.toLowerCase().includes(text) || c.display?.toLowerCase().includes(text))
      : codes;
    const offset = options.offset ?? 0;
    const count = options.count ?? LIMITS.maxCount;
    const page: ExpansionContains[] = matching.slice(offset, offset + count).map((c) => ({
      system: c.system,
      ...(c.version !== undefined ? { version: c.version } : {}),
      ...(c.abstract ? { abstract: true } : {}),
      ...(c.inactive ? { inactive: true } : {}),
      code: c.code,
      ...(c.display !== undefined ? { display: c.display } : {}),
    }));
    const { expansion: _previous, ...definition } = vs as ValueSetResource & { text?: unknown };
    return {
      ...definition,
      expansion: {
        identifier: `urn:uuid:${randomUUID()}`,
        timestamp: new Date().toISOString(),
        total: matching.length,
        offset,
        ...(options.parameters?.length ? { parameter: options.parameters } : {}),
        ...(page.length > 0 ? { contains: page } : {}),
      },
    } as ValueSetResource;
  }

  /** Every code of the value set (not paged), in compose order; 422 past LIMITS. */
  async expandAll(vs: ValueSetResource): Promise<Expansion> {
    return this.expandNested(vs, { path: [], budget: stepBudget(), work: workBudget() });
  }

  private async expandNested(vs: ValueSetResource, context: ExpandContext): Promise<Expansion> {
    const label = name(vs);
    if (context.path.includes(label)) {
      throw new AppError(
        'expansion-too-costly',
        `Value set ${label} includes itself (${[...context.path, label].join(' → ')})`,
      );
    }
    if (context.path.length >= LIMITS.maxDepth) {
      throw new AppError(
        'expansion-too-costly',
        `Value sets nest deeper than ${LIMITS.maxDepth} levels (${[...context.path, label].join(' → ')})`,
      );
    }
    const inner: ExpandContext = { ...context, path: [...context.path, label] };
    if (!vs.compose) {
      if (vs.expansion?.contains) return this.fromContains(vs.expansion.contains, label);
      throw new AppError('terminology-not-supported', `Value set ${label} has neither compose nor expansion`);
    }
    if (!Array.isArray(vs.compose.include) || vs.compose.include.length === 0) {
      throw new AppError('terminology-not-supported', `Value set ${label} includes nothing (compose.include)`);
    }
    const result: Expansion = new Map();
    for (const include of vs.compose.include) {
      const codes = await this.component(include, label, inner);
      context.work(codes.size);
      for (const [key, code] of codes) {
        if (!result.has(key)) result.set(key, code);
        if (result.size > LIMITS.maxExpansion) this.tooLarge(label);
      }
    }
    for (const exclude of Array.isArray(vs.compose.exclude) ? vs.compose.exclude : []) {
      const codes = await this.component(exclude, label, inner);
      context.work(codes.size);
      for (const key of codes.keys()) result.delete(key);
    }
    if (vs.compose.inactive === false) {
      for (const [key, code] of result) if (code.inactive) result.delete(key);
    }
    return result;
  }

  private tooLarge(label: string): never {
    throw new AppError(
      'expansion-too-costly',
      `Value set ${label} expands to more than ${LIMITS.maxExpansion} codes, the server's expansion limit`,
    );
  }

  private fromContains(contains: ExpansionContains[], label: string): Expansion {
    const result: Expansion = new Map();
    const stack = [...contains];
    while (stack.length > 0) {
      const entry = stack.pop()!;
      if (entry.contains) stack.push(...entry.contains);
      if (!entry.system || !entry.code) continue;
      result.set(keyOf(entry.system, entry.code), {
        system: entry.system,
        code: entry.code,
        ...(entry.version !== undefined ? { version: entry.version } : {}),
        ...(entry.display !== undefined ? { display: entry.display } : {}),
      });
      if (result.size > LIMITS.maxExpansion) this.tooLarge(label);
    }
    return result;
  }

  /** The codes one include (or exclude) names: its system's part intersected with its value sets. */
  private async component(component: ConceptSetComponent, label: string, context: ExpandContext): Promise<Expansion> {
    if (!component || typeof component !== 'object') {
      throw new AppError('terminology-not-supported', `Value set ${label} has a malformed include or exclude`);
    }
    let result: Expansion | undefined;
    if (typeof component.system === 'string') result = await this.systemPart(component, label, context);
    for (const nested of Array.isArray(component.valueSet) ? component.valueSet : []) {
      if (typeof nested !== 'string') continue;
      const vs = await this.findValueSet(nested);
      if (!vs) {
        throw new AppError('terminology-not-found', `Value set ${label} includes ${nested}, which is not known`);
      }
      const codes = await this.expandNested(vs, context);
      context.work(result?.size ?? 0);
      result = result === undefined ? codes : new Map([...result].filter(([key]) => codes.has(key)));
    }
    if (result === undefined) {
      throw new AppError('terminology-not-supported', `Value set ${label} has an include with no system or valueSet`);
    }
    return result;
  }

  private async systemPart(component: ConceptSetComponent, label: string, context: ExpandContext): Promise<Expansion> {
    const system = component.system!;
    const cs = await this.findCodeSystem(system, component.version);
    const index = cs && holdsContent(cs) ? indexOf(cs) : undefined;
    const result: Expansion = new Map();
    const entry = (code: string, display?: string): ExpandedCode => {
      const concept = index?.get(code)?.concept;
      const flags = concept?.property ?? [];
      const abstract = flags.some((p) => (p.code === 'notSelectable' || p.code === 'abstract') && p.valueBoolean);
      const inactive = flags.some(
        (p) =>
          (p.code === 'inactive' && p.valueBoolean) ||
          (p.code === 'status' && (p.valueCode === 'retired' || p.valueCode === 'deprecated')),
      );
      return {
        system,
        ...(component.version !== undefined ? { version: component.version } : {}),
        code: concept?.code ?? code,
        ...((display ?? concept?.display) !== undefined ? { display: display ?? concept?.display } : {}),
        ...(abstract ? { abstract } : {}),
        ...(inactive ? { inactive } : {}),
      };
    };
    if (Array.isArray(component.concept)) {
      context.work(component.concept.length);
      // Listed codes are taken as listed (the spec's enumerated value sets), even from a system not held.
      for (const listed of component.concept) {
        if (typeof listed?.code !== 'string') continue;
        result.set(keyOf(system, listed.code), entry(listed.code, listed.display));
        if (result.size > LIMITS.maxExpansion) this.tooLarge(label);
      }
      return result;
    }
    if (!index) {
      const why = cs
        ? `whose content it does not hold (content: ${cs.content ?? 'unknown'})`
        : 'which is not known to it (an external terminology)';
      throw new AppError(
        'terminology-not-supported',
        `Value set ${label} includes all or part of code system ${system}, ${why}: the server cannot expand it`,
      );
    }
    let codes: Set<string> | undefined;
    for (const filter of Array.isArray(component.filter) ? component.filter : []) {
      const matched = this.applyFilter(index, filter, label, context);
      codes = codes === undefined ? matched : new Set([...codes].filter((code) => matched.has(code)));
    }
    const selected = codes ?? new Set(index.concepts.keys());
    context.work(selected.size);
    for (const code of selected) {
      result.set(keyOf(system, code), entry(code));
      if (result.size > LIMITS.maxExpansion) this.tooLarge(label);
    }
    return result;
  }

  /** https://hl7.org/fhir/R4/valueset-definitions.html#ValueSet.compose.include.filter: the codes it selects. */
  private applyFilter(
    index: CodeSystemIndex,
    filter: ValueSetFilter,
    label: string,
    context: ExpandContext,
  ): Set<string> {
    const { property, op, value } = filter ?? ({} as ValueSetFilter);
    if (typeof property !== 'string' || typeof op !== 'string' || typeof value !== 'string') {
      throw new AppError('terminology-not-supported', `Value set ${label} has a filter without property, op and value`);
    }
    const all = [...index.concepts.keys()];
    context.work(all.length);
    const hierarchical = property === 'concept' || property === 'code';
    const codeOf = (code: string) => index.get(code)?.concept.code;
    switch (op) {
      case 'is-a':
      case 'descendent-of':
      case 'is-not-a':
      case 'generalizes': {
        if (!hierarchical) break;
        const code = codeOf(value);
        const related =
          code === undefined
            ? new Set<string>()
            : op === 'generalizes'
              ? index.ancestors(code)
              : index.descendants(code);
        if (code !== undefined && op !== 'descendent-of') related.add(code);
        return op === 'is-not-a' ? new Set(all.filter((c) => !related.has(c))) : related;
      }
      case '=':
      case 'in':
      case 'not-in': {
        const wanted = new Set(op === '=' ? [value] : value.split(',').map((v) => v.trim()));
        const hits = all.filter((code) => this.values(index, code, property).some((v) => wanted.has(v)));
        const hitSet = new Set(hits);
        return op === 'not-in' ? new Set(all.filter((c) => !hitSet.has(c))) : hitSet;
      }
      case 'exists': {
        const exists = value === 'true';
        return new Set(all.filter((code) => this.values(index, code, property).length > 0 === exists));
      }
      case 'regex': {
        let regex: LinearRegex;
        try {
          // The whole value must match (as a FHIR regex element does).
          regex = new LinearRegex(`^(?:${value})$`);
        } catch (error) {
          if (!(error instanceof UnsupportedPattern)) throw error;
          throw new AppError(
            'terminology-not-supported',
            `Value set ${label} has a regex filter the server does not run (${error.message})`,
          );
        }
        return new Set(
          all.filter((code) => this.values(index, code, property).some((v) => regex.test(v, context.budget))),
        );
      }
    }
    throw new AppError(
      'terminology-not-supported',
      `Value set ${label} has a filter "${property} ${op}" the server does not evaluate`,
    );
  }

  /** A concept's values of a filter's property: its code, its display, or a property of it. */
  private values(index: CodeSystemIndex, code: string, property: string): string[] {
    const concept = index.get(code)?.concept;
    if (!concept) return [];
    if (property === 'concept' || property === 'code') return [concept.code];
    if (property === 'display') return concept.display === undefined ? [] : [concept.display];
    return (concept.property ?? [])
      .filter((p) => p.code === property)
      .map(propertyText)
      .filter((v): v is string => v !== undefined);
  }

  /** https://hl7.org/fhir/R4/valueset-operation-validate-code.html: is one of the codings in the value set? */
  async validateInValueSet(vs: ValueSetResource, codings: readonly Coding[]): Promise<ParametersResource> {
    const expansion = await this.expandAll(vs);
    const messages: string[] = [];
    for (const coding of codings) {
      const code = coding.code ?? '';
      const found = coding.system
        ? expansion.get(keyOf(coding.system, code))
        : [...expansion.values()].find((c) => c.code === code);
      const named = coding.system ? `${coding.system}#${code}` : code;
      if (!found) {
        messages.push(`The code ${named} is not in value set ${name(vs)}`);
        continue;
      }
      if (coding.display !== undefined && found.display !== undefined && coding.display !== found.display) {
        messages.push(`The display "${coding.display}" of ${named} is not "${found.display}"`);
        continue;
      }
      return validationResult(true, found.display);
    }
    return validationResult(false, undefined, messages.join('; '));
  }

  /** https://hl7.org/fhir/R4/codesystem-operation-validate-code.html */
  async validateInCodeSystem(cs: CodeSystemResource, codings: readonly Coding[]): Promise<ParametersResource> {
    const index = indexOf(cs);
    const messages: string[] = [];
    for (const coding of codings) {
      const code = coding.code ?? '';
      if (coding.system !== undefined && coding.system !== cs.url) {
        messages.push(`The coding's system ${coding.system} is not ${cs.url}`);
        continue;
      }
      const concept = index.get(code)?.concept;
      if (!concept) {
        messages.push(`The code ${code} is not in code system ${name(cs)}`);
        continue;
      }
      if (coding.display !== undefined && concept.display !== undefined && coding.display !== concept.display) {
        messages.push(`The display "${coding.display}" of ${code} is not "${concept.display}"`);
        continue;
      }
      return validationResult(true, concept.display);
    }
    return validationResult(false, undefined, messages.join('; '));
  }

  /** https://hl7.org/fhir/R4/codesystem-operation-lookup.html */
  lookup(cs: CodeSystemResource, code: string, properties?: readonly string[]): ParametersResource {
    const index = indexOf(cs);
    const entry = index.get(code);
    if (!entry) throw new AppError('terminology-not-found', `The code ${code} is not in code system ${name(cs)}`);
    const { concept } = entry;
    const wanted = (property: string) => !properties?.length || properties.includes(property);
    const parameter: ParametersResource['parameter'] = [{ name: 'name', valueString: cs.name ?? cs.title ?? cs.url }];
    if (cs.version !== undefined) parameter.push({ name: 'version', valueString: cs.version });
    if (concept.display !== undefined) parameter.push({ name: 'display', valueString: concept.display });
    for (const designation of concept.designation ?? []) {
      parameter.push({
        name: 'designation',
        part: [
          ...(designation.language ? [{ name: 'language', valueCode: designation.language }] : []),
          ...(designation.use ? [{ name: 'use', valueCoding: designation.use }] : []),
          { name: 'value', valueString: designation.value },
        ],
      });
    }
    const property = (code: string, value: Record<string, unknown>) =>
      parameter.push({ name: 'property', part: [{ name: 'code', valueCode: code }, value] });
    for (const p of concept.property ?? []) {
      if (!wanted(p.code)) continue;
      const { code: _code, ...value } = p;
      const [key, v] = Object.entries(value)[0] ?? [];
      if (key) property(p.code, { name: 'value', [key]: v });
    }
    // The hierarchy, from nesting as from properties.
    if (wanted('parent') && !concept.property?.some((p) => p.code === 'parent')) {
      for (const parent of entry.parents) property('parent', { name: 'value', valueCode: parent });
    }
    if (wanted('child') && !concept.property?.some((p) => p.code === 'child')) {
      for (const child of entry.children) property('child', { name: 'value', valueCode: child });
    }
    return { resourceType: 'Parameters', parameter };
  }
}

function validationResult(result: boolean, display?: string, message?: string): ParametersResource {
  return {
    resourceType: 'Parameters',
    parameter: [
      { name: 'result', valueBoolean: result },
      ...(message ? [{ name: 'message', valueString: message }] : []),
      ...(display !== undefined ? [{ name: 'display', valueString: display }] : []),
    ],
  };
}
