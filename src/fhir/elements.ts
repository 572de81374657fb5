// _summary and _elements (https://hl7.org/fhir/R4/search.html#summary, #elements), on a search's entries
// and on a read, a vread or the CapabilityStatement: the only place a resource is parsed and
// re-serialised for its representation. Top-level elements are kept or dropped; the result is marked
// SUBSETTED in meta.tag as the spec asks.
import { AppError } from '../errors.js';

export type SummaryMode = 'true' | 'text' | 'data' | 'count' | 'false';
export const SUMMARY_MODES: readonly SummaryMode[] = ['true', 'text', 'data', 'count', 'false'];

/** What the subsetting needs of the R4 definitions (the registry has it). */
export interface ElementDefinitions {
  type(name: string): { readonly elements: Readonly<Record<string, { readonly min?: number }>> } | undefined;
  summaryElements(name: string): readonly string[];
}

const ALWAYS = ['resourceType', 'id', 'meta'];
// Kept by _summary=true besides the elements the definitions mark isSummary (registry.summaryElements):
// modifiers are never dropped (implicitRules, modifierExtension), and language says how to read the rest.
const SUMMARY_ALWAYS = ['implicitRules', 'language', 'modifierExtension'];
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

export type Subsetter = (resourceText: string, type: string) => string;

/** Top-level element names (without [x]) that the type requires (min ≥ 1). */
function mandatory(registry: ElementDefinitions, type: string): string[] {
  const elements = registry.type(type)?.elements ?? {};
  return Object.entries(elements)
    .filter(([path, rule]) => !path.includes('.') && (rule.min ?? 0) >= 1)
    .map(([path]) => path.replace('[x]', ''));
}

/** Does JSON key `key` hold element `name` (`valueQuantity` holds `value`, `_birthDate` holds `birthDate`)? */
function keyMatches(key: string, names: ReadonlySet<string>): boolean {
  const bare = key.startsWith('_') ? key.slice(1) : key;
  if (names.has(bare)) return true;
  for (let i = bare.length - 1; i > 0; i--) {
    if (bare[i] >= 'A' && bare[i] <= 'Z' && names.has(bare.slice(0, i))) return true;
  }
  return false;
}

function subset(resource: Record<string, unknown>, keep: ReadonlySet<string>, drop?: ReadonlySet<string>): string {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) {
    if (drop ? !keyMatches(key, drop) : keyMatches(key, keep)) out[key] = value;
  }
  const meta = (out.meta ?? {}) as Record<string, unknown>;
  const tags = Array.isArray(meta.tag) ? meta.tag : [];
  out.meta = { ...meta, tag: [...tags, SUBSETTED] };
  // resourceType first, as stored.
  return JSON.stringify({ resourceType: out.resourceType, ...out });
}

/** The function that rewrites each entry for `_summary` / `_elements`, or undefined when resources go out as stored. */
export function subsetter(
  registry: ElementDefinitions,
  summary: SummaryMode | undefined,
  elements: readonly string[] | undefined,
): Subsetter | undefined {
  if (elements && elements.length > 0) {
    const wanted = elements.map((e) => e.replace(/^[A-Z][A-Za-z]+\./, '').split('.')[0]);
    return (text, type) => subset(JSON.parse(text), new Set([...ALWAYS, ...wanted, ...mandatory(registry, type)]));
  }
  switch (summary) {
    case 'true':
      return (text, type) =>
        subset(JSON.parse(text), new Set([...ALWAYS, ...SUMMARY_ALWAYS, ...registry.summaryElements(type)]));
    case 'text':
      return (text, type) => subset(JSON.parse(text), new Set([...ALWAYS, 'text', ...mandatory(registry, type)]));
    case 'data':
      return (text) => subset(JSON.parse(text), new Set(), new Set(['text']));
    default:
      return undefined;
  }
}

/**
 * `_summary` and `_elements` of a read, a vread or `metadata` (http.html#read: servers may support them
 * there as on a search): the subsetter, or undefined when the resource goes out whole. `count` has no
 * meaning outside a search; an unknown mode, or both parameters, is a 400.
 */
export function readSubsetter(registry: ElementDefinitions, query: string): Subsetter | undefined {
  if (query === '' || (!query.includes('_summary') && !query.includes('_elements'))) return undefined;
  const params = new URLSearchParams(query);
  const summary = params.get('_summary') ?? undefined;
  const elements = params
    .getAll('_elements')
    .flatMap((value) => value.split(','))
    .map((e) => e.trim())
    .filter(Boolean);
  if (summary !== undefined && elements.length > 0) {
    throw new AppError('bad-request', '_summary and _elements cannot be used together');
  }
  if (summary !== undefined && (!(SUMMARY_MODES as readonly string[]).includes(summary) || summary === 'count')) {
    throw new AppError('bad-request', `_summary on a read must be one of true, text, data, false, got "${summary}"`);
  }
  return subsetter(registry, summary as SummaryMode | undefined, elements);
}
