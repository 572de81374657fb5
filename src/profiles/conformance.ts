// Checks a resource (or a data type value) against a compiled profile (compile.ts): cardinality, types,
// reference targets, fixed and pattern values, slicing, invariants, and the codes of required bindings
// (collected here, decided by the terminology engine afterwards: profiles.ts). It runs after the base R4
// validation, so it can take the instance's shape for granted (arrays where R4 allows many, objects for
// complex types) and only adds what the profile narrows.
import { toTypedValue, type TypedValue } from '@medplum/core';
import type { R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import type { ReferenceParser } from '../fhir/references.js';
import type { RequestFhirPathBudget } from '../request-fhirpath/request-fhirpath.js';
import { evaluateInvariant, type InvariantScope } from '../validation/invariants.js';
import type { ValidationIssue } from '../validation/validate.js';
import { typeOfSuffix, type CompiledProfile, type ElementNode, type InvariantBudget } from './compile.js';
import type { Discriminator } from './elements.js';
import { outOfBound } from './value-bounds.js';

type JsonObject = Record<string, unknown>;

/** One value of an element in the instance, with the type its JSON name gives it (for a choice). */
interface Item {
  value: unknown;
  /** The JSON property: `valueQuantity`, `name`. */
  jsonName: string;
  /** The type a choice property names; undefined for other elements. */
  type?: string;
}

/** A code to look up in a required binding's value set once the walk is over. */
export interface PendingBinding {
  valueSet: string;
  /** The codings of a Coding or CodeableConcept, or a code alone. */
  codings: { system?: string; code: string }[];
  expression: string;
  element: string;
}

/** Resolves the profiles a type names (a slice's or an extension's), for `profile` discriminators and checks. */
export type ProfileLookup = (url: string) => CompiledProfile | undefined;

/** The codes of an expanded value set: `system|code`, and the codes alone (for a `code` with no system). */
export interface ValueSetMembers {
  readonly keys: ReadonlySet<string>;
  readonly codes: ReadonlySet<string>;
}

/** The expansions of the value sets that tell slices apart, made before the walk; undefined when unknown. */
export type MembersLookup = (valueSet: string) => ValueSetMembers | undefined;

/** What a slice told apart by a required binding states: its value set. */
class BindingValue {
  constructor(readonly valueSet: string) {}
}

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Profiles checked inside one another (an extension's own profile inside a resource's) at most this deep. */
const MAX_NESTED_PROFILES = 4;

/**
 * Values visited and slices tried, per resource, across its profiles: a profile with thousands of slices
 * told apart by `profile` over thousands of values would otherwise cost their product of walks.
 */
export const MAX_PROFILE_STEPS = 1_000_000;

export class ProfileWalk {
  readonly issues: ValidationIssue[] = [];
  readonly bindings: PendingBinding[] = [];
  /** The value checked at depth 0: %rootResource. */
  private root: unknown;
  /** Shared with the walks of `profile` discriminators, so the bound holds for the whole check. */
  private steps = { taken: 0 };

  constructor(
    private readonly registry: R4Registry,
    private readonly references: ReferenceParser,
    private readonly lookup: ProfileLookup,
    private readonly budget: InvariantBudget,
    private readonly requestBudget: RequestFhirPathBudget,
    private readonly members: MembersLookup = () => undefined,
  ) {}

  /**
   * Checks `value` (at `path`) against `profile`; the issues name the profile. `resource` is the resource
   * holding the value (%resource), unless the value is a resource itself.
   */
  check(profile: CompiledProfile, value: unknown, path: string, depth = 0, resource?: unknown): void {
    if (depth === 0) this.root = value;
    const label = profile.version ? `${profile.url}|${profile.version}` : profile.url;
    const ctx = new Context(profile, label, depth, resourceTypeOf(value) ? value : (resource ?? this.root));
    const type = resourceTypeOf(value);
    if (type !== undefined && type !== profile.type) {
      this.add(ctx, profile.root, 'structure', path, `a ${type} cannot conform to a profile of ${profile.type}`);
      return;
    }
    this.item(ctx, profile.root, { value, jsonName: path }, path);
  }

  /** The children of `node` in one object of the instance. */
  private object(ctx: Context, node: ElementNode, value: JsonObject, path: string): void {
    for (const child of node.children.values()) this.element(ctx, child, value, `${path}.${child.name}`, path);
  }

  private element(ctx: Context, node: ElementNode, owner: JsonObject, fallbackPath: string, ownerPath: string) {
    const items = this.itemsOf(owner, node.name);
    const itemPath = (item: Item, i: number, count: number) =>
      `${ownerPath}.${item.jsonName}${count > 1 || Array.isArray(owner[item.jsonName]) ? `[${i}]` : ''}`;
    this.cardinality(ctx, node, items.length, items.length ? `${ownerPath}.${items[0].jsonName}` : fallbackPath);
    const paths = items.map((item, i) => itemPath(item, i, items.length));
    items.forEach((item, i) => this.item(ctx, node, item, paths[i]));
    if (node.slices.length > 0) this.slices(ctx, node, items, paths, fallbackPath);
  }

  private cardinality(ctx: Context, node: ElementNode, count: number, path: string): void {
    if (node.min !== undefined && count < node.min) {
      this.add(ctx, node, 'required', path, `minimum cardinality ${node.min}, found ${count}`);
    }
    if (node.max !== undefined && count > node.max) {
      this.add(ctx, node, 'structure', path, `maximum cardinality ${node.max}, found ${count}`);
    }
  }

  /** Every rule of `node` on one value of it. */
  private item(ctx: Context, node: ElementNode, item: Item, path: string): void {
    this.step();
    const { value } = item;
    if (node.types && item.type !== undefined && !node.types.some((t) => t.code === item.type)) {
      const allowed = node.types.map((t) => t.code).join(', ');
      this.add(ctx, node, 'structure', path, `type ${item.type} is not allowed here: ${allowed}`);
      return;
    }
    const resourceType = resourceTypeOf(value);
    if (node.types && resourceType !== undefined && !allowsResource(node.types, resourceType)) {
      const allowed = node.types.map((t) => t.code).join(', ');
      this.add(ctx, node, 'structure', path, `a ${resourceType} is not allowed here: ${allowed}`);
      return;
    }
    if (node.fixed !== undefined && !deepEqual(value, node.fixed)) {
      this.add(ctx, node, 'value', path, `must be exactly ${preview(node.fixed)}`);
    }
    if (node.pattern !== undefined && !matchesPattern(value, node.pattern)) {
      this.add(ctx, node, 'value', path, `must match the pattern ${preview(node.pattern)}`);
    }
    if (node.minValue && outOfBound(value, node.minValue, 'min')) {
      this.add(ctx, node, 'value', path, `must be at least ${preview(node.minValue.value)}`);
    }
    if (node.maxValue && outOfBound(value, node.maxValue, 'max')) {
      this.add(ctx, node, 'value', path, `must be at most ${preview(node.maxValue.value)}`);
    }
    if (node.maxLength !== undefined && typeof value === 'string' && [...value].length > node.maxLength) {
      this.add(ctx, node, 'value', path, `must have at most ${node.maxLength} characters`);
    }
    if (node.requiredBinding) this.binding(ctx, node, value, path);
    if (node.types && isObject(value)) this.typeProfiles(ctx, node, item, value, path);
    if (node.invariants.length > 0) this.invariants(ctx, node, item, path);
    if (isObject(value)) this.object(ctx, node, value, path);
  }

  /** The node's invariants on one value, evaluated as the base validation evaluates R4's. */
  private invariants(ctx: Context, node: ElementNode, item: Item, path: string): void {
    this.budget.current = this.requestBudget;
    const context: TypedValue = { type: fhirTypeOf(ctx, node, item), value: item.value };
    const scope: InvariantScope = { resource: toTypedValue(ctx.resource), rootResource: toTypedValue(this.root) };
    for (const { severity, constraint } of node.invariants) {
      if (evaluateInvariant(constraint, context, scope) !== 'fail') continue;
      this.issues.push({
        severity,
        code: 'invariant',
        expression: path,
        diagnostics: `${path}: constraint ${constraint.key} failed: ${constraint.human} (profile ${ctx.label}, element ${node.id})`,
        rule: 'invariant',
        profile: ctx.label,
      });
    }
  }

  /** Reference targets, and the profiles of data types and extensions that the server holds. */
  private typeProfiles(ctx: Context, node: ElementNode, item: Item, value: JsonObject, path: string): void {
    const resourceType = resourceTypeOf(value);
    const type = item.type ?? resourceType ?? (node.types!.length === 1 ? node.types![0].code : undefined);
    const declared =
      node.types!.find((t) => t.code === type) ??
      (resourceType ? node.types!.find((t) => t.code === 'Resource' || t.code === 'DomainResource') : undefined);
    if (!declared) return;
    if (type === 'Reference' && declared.targetProfile?.length && typeof value.reference === 'string') {
      const local = this.references.local(value.reference);
      // A target profile the server cannot use (unknown, or its base unknown) may be of any type: then the
      // others do not narrow the reference either.
      const targets = declared.targetProfile.map((url) => this.targetType(url));
      const known = targets.every((t) => t !== undefined);
      if (local && known && !targets.includes(local.type) && !targets.includes('Resource')) {
        this.add(ctx, node, 'structure', `${path}.reference`, `must refer to a ${targets.join(' or ')}`);
      }
    }
    if (ctx.depth + 1 > MAX_NESTED_PROFILES) return;
    // R4: the value conforms to at least one of the type's profiles (those the server holds).
    const held = (declared.profile ?? []).flatMap((url) => this.lookup(url) ?? []);
    if (held.length === 1) {
      this.check(held[0], value, path, ctx.depth + 1, ctx.resource);
    } else if (held.length > 1 && !held.some((profile) => this.conforms(profile.url, value, ctx.resource))) {
      const urls = held.map((profile) => profile.url).join(', ');
      this.add(ctx, node, 'structure', path, `conforms to none of its profiles ${urls}`);
    }
  }

  /** The resource type a target profile constrains: an R4 type's own url, or a profile the server holds. */
  private targetType(url: string): string | undefined {
    const r4 = /^http:\/\/hl7\.org\/fhir\/StructureDefinition\/([A-Za-z]+)$/.exec(url);
    if (r4 && this.registry.isResourceType(r4[1])) return r4[1];
    return this.lookup(url)?.type;
  }

  private binding(ctx: Context, node: ElementNode, value: unknown, path: string): void {
    const codings = codingsOf(value);
    if (codings.length === 0) return; // nothing coded (a CodeableConcept with text only)
    this.bindings.push({
      valueSet: node.requiredBinding!,
      codings,
      expression: path,
      element: `${ctx.label}|${node.id}`,
    });
  }

  /** Slicing: which slice each value belongs to, the slices' cardinalities, closed and ordered slicing. */
  private slices(ctx: Context, node: ElementNode, items: Item[], paths: string[], fallbackPath: string): void {
    const slicing = node.slicing;
    if (!slicing || slicing.discriminator.length === 0) {
      // Slices without a discriminator cannot be told apart: only the element's own rules apply.
      return;
    }
    const unsupported = slicing.discriminator.find((d) => !supportedPath(d.path));
    if (unsupported) {
      this.warn(ctx, node, fallbackPath, `slicing by ${unsupported.path} is not checked`);
      return;
    }
    // A slice that states nothing to compare a discriminator with (one told apart by a required binding: the
    // walk expands no value set) is not checked, rather than found empty. The others are, unless the slicing
    // is closed or ordered: a value in none of them may be in that one.
    const vague = node.slices.filter((s) =>
      slicing.discriminator.some((d) => {
        const expected = stated(s, d);
        return expected === undefined || (expected instanceof BindingValue && !this.members(expected.valueSet));
      }),
    );
    if (vague.length > 0) {
      const why = `no discriminator value is stated for slice ${vague.map((s) => s.sliceName).join(', ')}`;
      if (slicing.rules !== 'open' || slicing.ordered) {
        this.warn(ctx, node, fallbackPath, `the slicing is not checked: ${why}`);
        return;
      }
      this.warn(ctx, node, fallbackPath, `${why}: not checked`);
    }
    const slices = node.slices.filter((s) => !vague.includes(s));
    const counts = new Map<ElementNode, number>(slices.map((s) => [s, 0]));
    let lastSlice = -1;
    let unmatchedSeen = false;
    items.forEach((item, i) => {
      const index = slices.findIndex((slice) => this.inSlice(slice, item, slicing.discriminator));
      if (index < 0) {
        unmatchedSeen = true;
        if (slicing.rules === 'closed') {
          this.add(
            ctx,
            node,
            'structure',
            paths[i],
            `matches none of the slices ${sliceNames(node)}, and the slicing is closed`,
          );
        }
        return;
      }
      const slice = slices[index];
      counts.set(slice, counts.get(slice)! + 1);
      if (slicing.ordered && index < lastSlice) {
        this.add(ctx, node, 'structure', paths[i], `slice ${slice.sliceName} is out of order (the slicing is ordered)`);
      }
      if (slicing.rules === 'openAtEnd' && unmatchedSeen) {
        this.add(ctx, node, 'structure', paths[i], `slice ${slice.sliceName} must come before the values in no slice`);
      }
      lastSlice = Math.max(lastSlice, index);
      this.item(ctx, slice, item, paths[i]);
    });
    for (const slice of slices) this.cardinality(ctx, slice, counts.get(slice)!, fallbackPath);
  }

  private inSlice(slice: ElementNode, item: Item, discriminators: readonly Discriminator[]): boolean {
    this.step();
    return discriminators.every((d) => {
      const expected = stated(slice, d);
      if (expected === undefined) return false;
      const values = d.path === '$this' ? [item] : this.valuesAt(item.value, d.path);
      if (expected instanceof BindingValue) {
        const members = this.members(expected.valueSet)!;
        return values.some((v) => codingsOf(v.value).some((c) => isMember(members, c)));
      }
      switch (d.type) {
        case 'value':
        case 'pattern':
          return values.some((v) => matchesPattern(v.value, expected));
        case 'exists':
          return expected === true ? values.length > 0 : values.length === 0;
        case 'type':
          return values.some((v) => (expected as string[]).includes(v.type ?? resourceTypeOf(v.value) ?? ''));
        case 'profile':
          return values.some((v) => (expected as string[]).some((url) => this.conforms(url, v.value, undefined)));
      }
    });
  }

  /** Whether `value` conforms to the profile `url`, checked on a walk of its own (its issues are not reported). */
  private conforms(url: string, value: unknown, resource: unknown): boolean {
    const profile = this.lookup(url);
    if (!profile) return false;
    const walk = new ProfileWalk(
      this.registry,
      this.references,
      this.lookup,
      this.budget,
      this.requestBudget,
      this.members,
    );
    walk.root = this.root;
    walk.steps = this.steps;
    walk.check(profile, value, profile.type, MAX_NESTED_PROFILES, resource);
    // Its required bindings are not decided here (that is asynchronous): a slice is told apart without them.
    return !walk.issues.some((issue) => issue.severity === 'error');
  }

  /** The values of a dotted discriminator path below `value` (arrays flattened, choices by their prefix). */
  private valuesAt(value: unknown, path: string): Item[] {
    let current: Item[] = [{ value, jsonName: '' }];
    for (const name of path.split('.')) {
      const next: Item[] = [];
      for (const item of current) if (isObject(item.value)) next.push(...this.itemsOf(item.value, name));
      current = next;
    }
    return current;
  }

  /** The values of element `name` in `owner`: an array's items, a choice's one property. */
  private itemsOf(owner: JsonObject, name: string): Item[] {
    if (name.endsWith('[x]')) {
      const prefix = name.slice(0, -3);
      for (const key of Object.keys(owner)) {
        const suffix = key.slice(prefix.length);
        if (key.startsWith(prefix) && /^[A-Z]/.test(suffix)) {
          const type = typeOfSuffix(this.registry, suffix);
          return valuesOf(owner, key).map((value) => ({ value, jsonName: key, type }));
        }
      }
      return [];
    }
    return valuesOf(owner, name).map((value) => ({ value, jsonName: name }));
  }

  private step(): void {
    if (++this.steps.taken > MAX_PROFILE_STEPS) {
      throw new AppError(
        'profile-too-costly',
        `Checking the resource against its profiles took more than ${MAX_PROFILE_STEPS} steps (values and slices)`,
      );
    }
  }

  /** Something the profile says that this walk does not check. */
  private warn(ctx: Context, node: ElementNode, path: string, message: string): void {
    this.issues.push({
      severity: 'warning',
      code: 'informational',
      expression: path,
      diagnostics: `${path}: ${message} (profile ${ctx.label}, element ${node.id})`,
      rule: 'base',
      profile: ctx.label,
    });
  }

  private add(ctx: Context, node: ElementNode, code: ValidationIssue['code'], path: string, message: string): void {
    this.issues.push({
      severity: 'error',
      code,
      expression: path,
      diagnostics: `${path}: ${message} (profile ${ctx.label}, element ${node.id})`,
      rule: 'base',
      profile: ctx.label,
    });
  }
}

class Context {
  constructor(
    readonly profile: CompiledProfile,
    readonly label: string,
    readonly depth: number,
    /** %resource: the resource the values belong to. */
    readonly resource: unknown,
  ) {}
}

/** The FHIR type of a value as FHIRPath is told it: its choice type, resource type, the element's one type. */
function fhirTypeOf(ctx: Context, node: ElementNode, item: Item): string {
  if (node === ctx.profile.root) return ctx.profile.type;
  const known = item.type ?? resourceTypeOf(item.value) ?? (node.types?.length === 1 ? node.types[0].code : undefined);
  if (known) return known;
  if (typeof item.value === 'string') return 'string';
  if (typeof item.value === 'number') return 'decimal';
  if (typeof item.value === 'boolean') return 'boolean';
  return 'BackboneElement';
}

/** Whether a resource of `resourceType` may stand where `types` are allowed. */
function allowsResource(types: readonly { code: string }[], resourceType: string): boolean {
  return types.some((t) => t.code === resourceType || t.code === 'Resource' || t.code === 'DomainResource');
}

/** A value and its `_name` sibling count as one: a primitive carried by an extension alone is present. */
function valuesOf(owner: JsonObject, key: string): unknown[] {
  const value = owner[key] ?? owner[`_${key}`];
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value.filter((v) => v !== null) : [value];
}

/**
 * The elements a discriminator path names below a slice: each element on the way and its slices (R4's
 * blood pressure profile fixes component:SystolicBP.code.coding:SBPCode.code, for code.coding.code).
 */
function descend(node: ElementNode, path: string): ElementNode[] {
  let current = [node];
  for (const name of path.split('.')) {
    current = current.flatMap((n) => {
      const child = n.children.get(name) ?? n.children.get(`${name}[x]`);
      return child ? [child, ...child.slices] : [];
    });
  }
  return current;
}

/**
 * What a slice states for a discriminator to compare values with: a fixed or pattern value (or an
 * extension's url), whether the element must be present, its types, its profiles; undefined if nothing.
 */
function stated(slice: ElementNode, d: Discriminator): unknown {
  for (const target of d.path === '$this' ? [slice] : descend(slice, d.path)) {
    const value = statedBy(target, d.type);
    if (value !== undefined) return value;
  }
  return d.type === 'value' || d.type === 'pattern' ? extensionUrl(slice, d.path) : undefined;
}

function statedBy(target: ElementNode, type: Discriminator['type']): unknown {
  switch (type) {
    case 'value':
    case 'pattern':
      // R4 lets a required binding tell slices apart where no value is fixed.
      return (
        target.fixed ??
        target.pattern ??
        (target.requiredBinding ? new BindingValue(target.requiredBinding) : undefined)
      );
    case 'exists':
      if ((target.min ?? 0) > 0) return true;
      return target.max === 0 ? false : undefined;
    case 'type':
      return target.types?.map((t) => t.code);
    case 'profile': {
      const urls = target.types?.flatMap((t) => t.profile ?? []) ?? [];
      return urls.length > 0 ? urls : undefined;
    }
  }
}

/**
 * The value sets that tell slices of `profile` apart (required bindings stated where a discriminator
 * finds no fixed or pattern value), to expand before a walk.
 */
export function sliceValueSets(profile: CompiledProfile): string[] {
  const found = new Set<string>();
  const visit = (node: ElementNode) => {
    for (const slice of node.slices) {
      for (const d of node.slicing?.discriminator ?? []) {
        const expected = stated(slice, d);
        if (expected instanceof BindingValue) found.add(expected.valueSet);
      }
      visit(slice);
    }
    for (const child of node.children.values()) visit(child);
  };
  visit(profile.root);
  return [...found];
}

/** The codes of a code, Coding or CodeableConcept. */
function codingsOf(value: unknown): { system?: string; code: string }[] {
  if (typeof value === 'string') return [{ code: value }];
  if (!isObject(value)) return [];
  if (typeof value.code === 'string') {
    return [{ ...(typeof value.system === 'string' ? { system: value.system } : {}), code: value.code }];
  }
  return Array.isArray(value.coding) ? value.coding.flatMap(codingsOf) : [];
}

export function isMember(members: ValueSetMembers, coding: { system?: string; code: string }): boolean {
  return coding.system === undefined
    ? members.codes.has(coding.code)
    : members.keys.has(`${coding.system}|${coding.code}`);
}

/** An extension slice is told apart by its url, which its type's profile names. */
function extensionUrl(slice: ElementNode, path: string): string | undefined {
  if (path !== 'url') return undefined;
  const type = slice.types?.find((t) => t.code === 'Extension');
  return type?.profile?.[0];
}

/** Discriminator paths this checker follows: dotted element names (no resolve(), extension(), ofType()). */
function supportedPath(path: string): boolean {
  return path === '$this' || /^[A-Za-z][A-Za-z0-9]*(\[x\])?(\.[A-Za-z][A-Za-z0-9]*(\[x\])?)*$/.test(path);
}

function resourceTypeOf(value: unknown): string | undefined {
  return isObject(value) && typeof value.resourceType === 'string' ? value.resourceType : undefined;
}

function sliceNames(node: ElementNode): string {
  return node.slices.map((s) => s.sliceName).join(', ');
}

/** fixed[x]: the same value, nothing more and nothing less. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => deepEqual(a[k], b[k]));
}

/**
 * pattern[x] (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.pattern_x_): each
 * element the pattern has, the value has with the same content; each item of a pattern's array matches
 * some item of the value's.
 */
export function matchesPattern(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern)) {
    const values = Array.isArray(value) ? value : [value];
    return pattern.every((p) => values.some((v) => matchesPattern(v, p)));
  }
  if (isObject(pattern)) {
    if (!isObject(value)) return false;
    return Object.entries(pattern).every(([key, p]) => value[key] !== undefined && matchesPattern(value[key], p));
  }
  return value === pattern;
}

function preview(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
