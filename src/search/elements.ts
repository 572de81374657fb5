// _summary and _elements (https://hl7.org/fhir/R4/search.html#summary, #elements): the only place a
// search parses and re-serialises resources. Top-level elements are kept or dropped; the result is
// marked SUBSETTED in meta.tag as the spec asks.
import type { R4Registry } from '../definitions/registry.js';
import type { SummaryMode } from './parse.js';

const ALWAYS = ['resourceType', 'id', 'meta'];
// Kept by _summary=true besides the elements the definitions mark isSummary (registry.summaryElements):
// modifiers are never dropped (implicitRules, modifierExtension), and language says how to read the rest.
const SUMMARY_ALWAYS = ['implicitRules', 'language', 'modifierExtension'];
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

export type Subsetter = (resourceText: string, type: string) => string;

/** Top-level element names (without [x]) that the type requires (min ≥ 1). */
function mandatory(registry: R4Registry, type: string): string[] {
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
  registry: R4Registry,
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
