// The code picker's logic (code-picker.tsx): the value sets offered for a resource type, the `$expand`
// request, and the text Insert puts into the JSON editor. Offered are the value sets of the type's
// top-level required bindings (scripts/build-console.mjs compiles them from the R4 definitions); any
// other canonical url can be typed in.
import consoleTypes from '../../generated/console-types.json';

/** The element types a binding can sit on, as the build records them. */
export type CodedType = 'code' | 'Coding' | 'CodeableConcept';

export interface Binding {
  readonly element: string;
  readonly valueSet: string;
  readonly type: CodedType;
}

/** One code of an expansion (`expansion.contains`). */
export interface ExpansionCode {
  readonly system?: string;
  readonly version?: string;
  readonly code?: string;
  readonly display?: string;
  /** A grouping code, not to be used in data. */
  readonly abstract?: boolean;
}

/** Per type, `{ element: [value set url, element type] }` (scripts/build-console.mjs). */
const REQUIRED_BINDINGS: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>> =
  consoleTypes.requiredBindings;

/** Codes asked for at once: a picker lists a screenful; a filter narrows a longer value set. */
export const EXPAND_COUNT = 50;

/** The type's top-level elements with a required binding, in the definition's order. */
export function bindingsOf(type: string): Binding[] {
  return Object.entries(REQUIRED_BINDINGS[type] ?? {}).map(([element, [valueSet, coded]]) => ({
    element,
    valueSet,
    type: coded as CodedType,
  }));
}

/** The `$expand` request of a value set (a canonical url, `|version` allowed) with an optional filter. */
export function expandPath(url: string, filter: string, count = EXPAND_COUNT): string {
  const params = new URLSearchParams({ url: url.trim() });
  if (filter.trim()) params.set('filter', filter.trim());
  params.set('count', String(count));
  return `/fhir/ValueSet/$expand?${params}`;
}

/**
 * What Insert writes for a code of `valueSet` in a resource of `type`: where the value set is bound to
 * a top-level `code` element of the type, the code as a JSON string (`"female"`); where it is bound to
 * a CodeableConcept, a CodeableConcept with that one coding; anywhere else (a Coding element, a nested
 * element, a value set typed in) a Coding, which goes into a `coding` array or a Coding element as it is.
 */
export function insertionFor(type: string, valueSet: string, code: ExpansionCode): string {
  const bound = bindingsOf(type).filter((b) => b.valueSet === valueSet.trim().split('|')[0]);
  const coding = { system: code.system, code: code.code, display: code.display };
  if (bound.some((b) => b.type === 'code')) return JSON.stringify(code.code ?? '');
  return oneLine(bound.some((b) => b.type === 'CodeableConcept') ? { coding: [coding] } : coding);
}

/** JSON on one line with a space after each `:` and `,` as a person types it (strings hold no newline). */
const oneLine = (value: unknown) => JSON.stringify(value, null, 1).replace(/\n */g, ' ');

/** `text` with `snippet` in place of its selection `start`..`end`, and where the caret goes after it. */
export function insertAt(text: string, start: number, end: number, snippet: string): { text: string; caret: number } {
  return { text: text.slice(0, start) + snippet + text.slice(end), caret: start + snippet.length };
}
