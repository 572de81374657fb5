// A CodeSystem's concepts by code, with the hierarchy both ways: from nesting
// (https://hl7.org/fhir/R4/codesystem.html#hierarchy) and from the `parent`, `subsumedBy` and `child`
// properties some code systems use instead. Built once per CodeSystem object and kept with it.
import type { CodeSystemResource, Concept, ConceptProperty } from '../definitions/terminology.js';

export interface IndexedConcept {
  readonly concept: Concept;
  readonly parents: Set<string>;
  readonly children: Set<string>;
}

const PARENT_PROPERTIES = new Set(['parent', 'subsumedBy']);

/** A property's value as text, whatever its type; undefined for a Coding without a code. */
export function propertyText(property: ConceptProperty): string | undefined {
  if (property.valueCode !== undefined) return property.valueCode;
  if (property.valueCoding !== undefined) return property.valueCoding.code;
  if (property.valueString !== undefined) return property.valueString;
  if (property.valueBoolean !== undefined) return String(property.valueBoolean);
  if (property.valueInteger !== undefined) return String(property.valueInteger);
  if (property.valueDecimal !== undefined) return String(property.valueDecimal);
  return property.valueDateTime;
}

export class CodeSystemIndex {
  readonly concepts = new Map<string, IndexedConcept>();
  /** Lower-cased codes, for a code system that says it is not case-sensitive. */
  private readonly folded?: Map<string, string>;

  constructor(readonly codeSystem: CodeSystemResource) {
    // Iterative walk: a deeply nested stored CodeSystem must not exhaust the stack.
    const stack: { concept: Concept; parent?: string }[] = (codeSystem.concept ?? []).map((concept) => ({ concept }));
    while (stack.length > 0) {
      const { concept, parent } = stack.pop()!;
      if (typeof concept?.code !== 'string') continue;
      let entry = this.concepts.get(concept.code);
      if (!entry) {
        entry = { concept, parents: new Set(), children: new Set() };
        this.concepts.set(concept.code, entry);
      }
      if (parent !== undefined) entry.parents.add(parent);
      for (const child of concept.concept ?? []) stack.push({ concept: child, parent: concept.code });
    }
    for (const [code, entry] of this.concepts) {
      for (const property of entry.concept.property ?? []) {
        const value = propertyText(property);
        if (value === undefined || value === code) continue;
        if (PARENT_PROPERTIES.has(property.code)) entry.parents.add(value);
        else if (property.code === 'child') this.concepts.get(value)?.parents.add(code);
      }
    }
    for (const [code, entry] of this.concepts) {
      for (const parent of entry.parents) this.concepts.get(parent)?.children.add(code);
    }
    if (codeSystem.caseSensitive === false) {
      this.folded = new Map([...this.concepts.keys()].map((code) => [code.toLowerCase(), code]));
    }
  }

  get(code: string): IndexedConcept | undefined {
    const exact = this.concepts.get(code);
    if (exact || !this.folded) return exact;
    const folded = this.folded.get(code.toLowerCase());
    return folded === undefined ? undefined : this.concepts.get(folded);
  }

  /** The code's descendants (not itself), each once, whatever cycles a stored hierarchy has. */
  descendants(code: string): Set<string> {
    return this.walk(code, (entry) => entry.children);
  }

  ancestors(code: string): Set<string> {
    return this.walk(code, (entry) => entry.parents);
  }

  private walk(code: string, next: (entry: IndexedConcept) => Set<string>): Set<string> {
    const found = new Set<string>();
    const start = this.get(code);
    if (!start) return found;
    const queue = [...next(start)];
    while (queue.length > 0) {
      const current = queue.pop()!;
      if (found.has(current) || current === start.concept.code) continue;
      found.add(current);
      const entry = this.concepts.get(current);
      if (entry) queue.push(...next(entry));
    }
    return found;
  }
}

const indexes = new WeakMap<CodeSystemResource, CodeSystemIndex>();

export function indexOf(codeSystem: CodeSystemResource): CodeSystemIndex {
  let index = indexes.get(codeSystem);
  if (!index) {
    index = new CodeSystemIndex(codeSystem);
    indexes.set(codeSystem, index);
  }
  return index;
}
