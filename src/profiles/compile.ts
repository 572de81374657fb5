// A profile's elements (elements.ts) compiled into the tree the checker walks (conformance.ts): one node
// per element id, children by element name, slices under their sliced element. Invariants are compiled
// once here, under the request FHIRPath guard (request-fhirpath.ts): a profile's expressions come from
// whoever stored it, so they run with the same limits as a request's. An invariant the guard refuses is
// kept as skipped, with the reason, and $validate reports it.
import type { R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { guardRequestFhirPath, RequestFhirPathBudget } from '../request-fhirpath/request-fhirpath.js';
import { constraintOf, type CompiledConstraint } from '../validation/shapes.js';
import type { Discriminator, ProfileElement, ProfileType, Slicing } from './elements.js';

export interface CompiledInvariant {
  severity: 'error' | 'warning';
  /** Evaluated as the base validation evaluates R4's (validation/invariants.ts), on a guarded tree. */
  constraint: CompiledConstraint;
}

export interface ElementNode {
  /** The element's id in the profile (`Observation.component:systolic.code`), named in issues. */
  id: string;
  /** The element's name in its parent: `code`, `value[x]`. */
  name: string;
  sliceName?: string;
  /** A slice a differential made by naming a choice's type (`valueQuantity` for `value[x]`). */
  renamed?: true;
  min?: number;
  max?: number;
  types?: ProfileType[];
  fixed?: unknown;
  pattern?: unknown;
  minValue?: { name: string; value: unknown };
  maxValue?: { name: string; value: unknown };
  maxLength?: number;
  requiredBinding?: string;
  invariants: CompiledInvariant[];
  children: Map<string, ElementNode>;
  slicing?: Slicing;
  slices: ElementNode[];
}

export interface CompiledProfile {
  url: string;
  version?: string;
  /** The type it constrains (`Patient`, or a data type such as `Extension`). */
  type: string;
  root: ElementNode;
  /** The profiles and target profiles its types name, to resolve before a check. */
  typeProfiles: string[];
  /** Invariants not checked, with the reason. */
  skipped: { key: string; element: string; reason: string }[];
}

/**
 * The budget the compiled invariants charge: set to the checking request's own before they run, since a
 * compiled profile is shared by every request that checks against it.
 */
export class InvariantBudget extends RequestFhirPathBudget {
  current: RequestFhirPathBudget = new RequestFhirPathBudget();

  override spend(steps: number): void {
    this.current.spend(steps);
  }

  override spendChars(chars: number): void {
    this.current.spendChars(chars);
  }
}

function node(id: string, name: string, sliceName?: string): ElementNode {
  return { id, name, ...(sliceName ? { sliceName } : {}), invariants: [], children: new Map(), slices: [] };
}

/** `value[x]` for `valueQuantity` when the base type's element is a choice (a differential may name the type). */
function choiceName(registry: R4Registry, type: string, parentPath: string, name: string): string | undefined {
  if (!/^[a-z][A-Za-z0-9]*[A-Z]/.test(name)) return undefined;
  for (let cut = name.length - 1; cut > 0; cut--) {
    if (!/[A-Z]/.test(name[cut])) continue;
    const candidate = `${name.slice(0, cut)}[x]`;
    const path = parentPath ? `${parentPath}.${candidate}` : candidate;
    if (registry.element(type, path)?.choice) return candidate;
  }
  return undefined;
}

/** Elements every element has (Element's), whatever its type. */
const ELEMENT_CHILDREN = new Set(['id', 'extension', 'modifierExtension']);

/**
 * Whether an element path (without slice names) names an element of `type`: through backbone elements,
 * into the data types of elements (`Patient.identifier.system`), a choice by one of its types
 * (`Observation.valueQuantity.code`) and content references.
 */
export function elementPathExists(registry: R4Registry, type: string, path: string): boolean {
  const segments = path.split('.');
  if (segments[0] !== type) return false;
  return pathWithin(registry, type, '', segments.slice(1), 0);
}

function pathWithin(registry: R4Registry, type: string, prefix: string, rest: string[], depth: number): boolean {
  if (rest.length === 0) return true;
  if (depth > 32) return false;
  const [segment, ...after] = rest;
  if (ELEMENT_CHILDREN.has(segment) && after.length === 0) return true;
  let candidate = prefix ? `${prefix}.${segment}` : segment;
  let rule = elementOf(registry, type, candidate);
  let types = rule?.types?.map((t) => t.code) ?? [];
  if (!rule) {
    const choice = choiceName(registry, type, prefix, segment);
    if (!choice) return ELEMENT_CHILDREN.has(segment) && pathWithin(registry, 'Extension', '', after, depth + 1);
    candidate = prefix ? `${prefix}.${choice}` : choice;
    rule = elementOf(registry, type, candidate);
    types = [typeOfSuffix(registry, segment.slice(choice.length - 3))];
  }
  if (!rule) return false;
  const inside = rule.contentReference ?? candidate;
  if (pathWithin(registry, type, inside, after, depth + 1)) return true;
  return types.some((code) => registry.type(code) !== undefined && pathWithin(registry, code, '', after, depth + 1));
}

/** An element of a type or of the types it derives from (`Patient.meta` is Resource's). */
function elementOf(registry: R4Registry, type: string, path: string) {
  for (let t: string | undefined = type; t; t = registry.type(t)?.base) {
    const rule = registry.element(t, path);
    if (rule) return rule;
  }
  return undefined;
}

/** The type code a choice property's suffix names: `Quantity`, or `string` for `String`. */
export function typeOfSuffix(registry: R4Registry, suffix: string): string {
  const lower = suffix[0].toLowerCase() + suffix.slice(1);
  return registry.primitiveType(lower) ? lower : suffix;
}

export function compileProfile(
  registry: R4Registry,
  profile: { url: string; version?: string; type: string },
  elements: readonly ProfileElement[],
  budget: InvariantBudget,
): CompiledProfile {
  const root = node(profile.type, profile.type);
  const skipped: CompiledProfile['skipped'] = [];
  const byId = new Map<string, ElementNode>([[profile.type, root]]);
  const typeProfiles = new Set<string>();
  for (const element of elements) {
    if (addsNothing(registry, profile.type, element)) continue;
    for (const t of element.type ?? [])
      for (const url of [...(t.profile ?? []), ...(t.targetProfile ?? [])]) typeProfiles.add(url);
    const target = placeOf(registry, profile.type, element, byId, root);
    apply(target, element, budget, skipped, registry, profile.type);
  }
  restrictRenamedChoices(root);
  dropRepeatedOnSlices(root);
  sliceExtensionsByUrl(root);
  return {
    url: profile.url,
    ...(profile.version !== undefined ? { version: profile.version } : {}),
    type: profile.type,
    root,
    typeProfiles: [...typeProfiles],
    skipped,
  };
}

/** The node of an element id, made (with its ancestors) where missing. */
function placeOf(
  registry: R4Registry,
  type: string,
  element: ProfileElement,
  byId: Map<string, ElementNode>,
  root: ElementNode,
): ElementNode {
  const existing = byId.get(element.id);
  if (existing) return existing;
  const segments = element.id.split('.');
  let current = root;
  let id = segments[0];
  // The path without slice names, to ask the R4 definitions whether a name is a renamed choice.
  let plainPath = '';
  for (const segment of segments.slice(1)) {
    const [rawName, sliceName] = segment.split(':');
    let name = rawName;
    let typeSlice: string | undefined;
    const choice = rawName.endsWith('[x]') ? undefined : choiceName(registry, type, plainPath, rawName);
    if (choice) {
      // `valueQuantity`: the choice restricted to one type, a type slice of `value[x]`.
      typeSlice = rawName;
      name = choice;
    }
    plainPath = plainPath ? `${plainPath}.${name}` : name;
    id = `${id}.${name}`;
    let child = byId.get(id);
    if (!child) {
      child = node(id, name);
      current.children.set(name, child);
      byId.set(id, child);
    }
    current = child;
    const slice = sliceName ?? typeSlice;
    if (slice !== undefined) {
      id = `${id}:${slice}`;
      let sliceNode = byId.get(id);
      if (!sliceNode) {
        sliceNode = node(id, name, slice);
        if (typeSlice && !sliceName) {
          sliceNode.types = [{ code: typeOfSuffix(registry, typeSlice.slice(name.length - 3)) }];
          sliceNode.renamed = true;
        }
        current.slices.push(sliceNode);
        byId.set(id, sliceNode);
      }
      current = sliceNode;
    }
  }
  return current;
}

function apply(
  target: ElementNode,
  element: ProfileElement,
  budget: InvariantBudget,
  skipped: CompiledProfile['skipped'],
  registry: R4Registry,
  type: string,
): void {
  if (element.min !== undefined) target.min = element.min;
  if (element.max !== undefined) target.max = element.max === '*' ? Number.POSITIVE_INFINITY : Number(element.max);
  if (element.type && element.type.length > 0) target.types = element.type;
  if (element.fixed) target.fixed = element.fixed.value;
  if (element.pattern) target.pattern = element.pattern.value;
  if (element.minValue) target.minValue = element.minValue;
  if (element.maxValue) target.maxValue = element.maxValue;
  if (element.maxLength !== undefined) target.maxLength = element.maxLength;
  if (element.requiredBinding) target.requiredBinding = element.requiredBinding;
  if (element.slicing) target.slicing = element.slicing;
  for (const constraint of element.constraint ?? []) {
    if (target.invariants.some((i) => i.constraint.key === constraint.key)) continue;
    // The base R4 invariants (ele-1, dom-2...) are the base validation's: a snapshot repeats them everywhere.
    if (isBaseInvariant(registry, type, element.path, constraint.key)) continue;
    if (!constraint.expression) {
      skipped.push({ key: constraint.key, element: element.id, reason: 'it has no FHIRPath expression' });
      continue;
    }
    try {
      const atom = guardRequestFhirPath(constraint.expression, budget);
      const compiled = constraintOf(
        { key: constraint.key, human: constraint.human, expression: constraint.expression },
        atom,
      );
      target.invariants.push({ severity: constraint.severity, constraint: compiled });
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      skipped.push({ key: constraint.key, element: element.id, reason: error.message });
    }
  }
}

/**
 * A snapshot repeats on each slice the invariants and the binding of the element it slices: rules that
 * hold for every value already, so a value in a slice would be checked (and reported) twice.
 */
function dropRepeatedOnSlices(node: ElementNode): void {
  for (const slice of node.slices) withoutRepeats(slice, node);
  for (const child of node.children.values()) dropRepeatedOnSlices(child);
}

function withoutRepeats(inner: ElementNode, outer: ElementNode): void {
  inner.invariants = inner.invariants.filter(
    (i) => !outer.invariants.some((o) => o.constraint.key === i.constraint.key),
  );
  if (inner.requiredBinding !== undefined && inner.requiredBinding === outer.requiredBinding) {
    delete inner.requiredBinding;
  }
  for (const [name, child] of inner.children) {
    const same = outer.children.get(name);
    if (same) withoutRepeats(child, same);
  }
  dropRepeatedOnSlices(inner);
}

/**
 * A choice whose types a differential names (`valueQuantity`) allows those types only, told apart by
 * type, as the snapshot generator writes it (`value[x]` typed Quantity, sliced by type on $this, closed).
 */
function restrictRenamedChoices(node: ElementNode): void {
  const renamed = node.slices.filter((s) => s.renamed).map((s) => s.types![0].code);
  if (renamed.length > 0) {
    node.types = node.types ? node.types.filter((t) => renamed.includes(t.code)) : renamed.map((code) => ({ code }));
    node.slicing ??= { discriminator: [{ type: 'type', path: '$this' }], ordered: false, rules: 'closed' };
  }
  for (const child of node.children.values()) restrictRenamedChoices(child);
  for (const slice of node.slices) restrictRenamedChoices(slice);
}

/**
 * R4 slices every extension element by url, open (Element.extension): a differential over an R4 type
 * states only its slices, since the base's snapshot carries the slicing.
 */
function sliceExtensionsByUrl(node: ElementNode): void {
  if ((node.name === 'extension' || node.name === 'modifierExtension') && node.slices.length > 0) {
    node.slicing ??= { discriminator: [{ type: 'value', path: 'url' }], ordered: false, rules: 'open' };
  }
  for (const child of node.children.values()) sliceExtensionsByUrl(child);
  for (const slice of node.slices) sliceExtensionsByUrl(slice);
}

/**
 * A snapshot repeats every element of the base: one that narrows nothing R4 states is left to the base
 * validation, so the walk visits only what the profile adds.
 */
function addsNothing(registry: R4Registry, type: string, element: ProfileElement): boolean {
  if (element.sliceName || element.slicing || element.fixed || element.pattern) return false;
  if (element.minValue || element.maxValue || element.maxLength !== undefined) return false;
  if (element.id !== element.path) return false; // inside a slice
  if (element.path === type)
    return (element.constraint ?? []).every((c) => isBaseInvariant(registry, type, type, c.key));
  const base = registry.element(type, element.path.slice(type.length + 1));
  if (!base) return false;
  if (element.min !== undefined && element.min !== (base.min ?? 0)) return false;
  if (element.max !== undefined && element.max !== String(base.max ?? 1)) return false;
  if (element.requiredBinding && element.requiredBinding.split('|')[0] !== base.binding) return false;
  if ((element.constraint ?? []).some((c) => !isBaseInvariant(registry, type, element.path, c.key))) return false;
  const baseTypes = base.types ?? [];
  if (element.type && element.type.length !== baseTypes.length) return false;
  return (element.type ?? []).every(
    (t) =>
      (t.profile ?? []).every((url) => url === `http://hl7.org/fhir/StructureDefinition/${t.code}`) &&
      (t.targetProfile ?? []).every((url) => {
        const target = url.replace('http://hl7.org/fhir/StructureDefinition/', '');
        const allowed = baseTypes.find((b) => b.code === t.code)?.targets ?? [];
        return allowed.includes(target) || allowed.includes('Resource');
      }),
  );
}

/** Invariant keys of the R4 base spec: ele-1, dom-*, ext-1 and the ones of each type and element. */
function isBaseInvariant(registry: R4Registry, type: string, path: string, key: string): boolean {
  if (/^(ele|dom|ext|ref|txt|qty|per|sqty|inv|ide|cpt|att|ctr)-\d+$/.test(key)) return true;
  const relative = path === type ? undefined : path.slice(type.length + 1);
  const rule = relative === undefined ? registry.type(type) : registry.element(type, relative);
  return rule?.constraints?.some((c) => c.key === key) ?? false;
}

export type { Discriminator };
