// FHIRPath Patch (a Parameters resource of operations): https://hl7.org/fhir/R4/fhirpatch.html
import { AppError } from '../../errors.js';
import {
  compileRequestFhirPath,
  RequestFhirPathBudget,
  type RequestFhirPath,
} from '../../request-fhirpath/request-fhirpath.js';

type Json = Record<string, unknown>;

interface Part {
  name?: string;
  part?: Part[];
  [key: string]: unknown;
}

interface PatchOperation {
  type: 'add' | 'insert' | 'delete' | 'replace' | 'move';
  path: string;
  name?: string;
  value?: unknown;
  index?: number;
  source?: number;
  destination?: number;
}

const TYPES = new Set(['add', 'insert', 'delete', 'replace', 'move']);

/** Client JSON: a parameter or part must be an object before anything looks into it. */
function assertPart(part: unknown, what: string): asserts part is Part {
  if (!part || typeof part !== 'object' || Array.isArray(part)) {
    const got = part === null ? 'null' : Array.isArray(part) ? 'an array' : typeof part;
    throw new AppError('bad-request', `${what} must be an object, got ${got}`);
  }
}

/** The value of a part: its value[x], or an object built from its sub-parts (for complex values). */
function partValue(part: Part): unknown {
  const valueKey = Object.keys(part).find((k) => k.startsWith('value') && k.length > 5);
  if (valueKey) return part[valueKey];
  if (Array.isArray(part.part)) {
    const object: Json = {};
    for (const child of part.part) {
      assertPart(child, 'A part of a FHIRPath Patch value');
      if (!child.name) continue;
      const value = partValue(child);
      if (value === undefined) continue;
      if (child.name in object) {
        const existing = object[child.name];
        object[child.name] = Array.isArray(existing) ? [...existing, value] : [existing, value];
      } else object[child.name] = value;
    }
    return object;
  }
  return undefined;
}

export function parseFhirPathPatch(parameters: unknown): PatchOperation[] {
  const p = parameters as { resourceType?: string; parameter?: Part[] };
  if (!p || p.resourceType !== 'Parameters' || !Array.isArray(p.parameter)) {
    throw new AppError(
      'bad-request',
      'A FHIRPath Patch body must be a Parameters resource with "operation" parameters',
    );
  }
  return p.parameter.map((parameter, i) => {
    assertPart(parameter, `Parameter ${i} of the patch`);
    if (parameter.name !== 'operation' || !Array.isArray(parameter.part)) {
      throw new AppError('bad-request', `Parameter ${i} of the patch must be an "operation" with parts`);
    }
    parameter.part.forEach((part) => assertPart(part, `A part of operation ${i}`));
    const parts = new Map(parameter.part.map((part) => [part.name, part]));
    const type = parts.get('type')?.valueCode;
    const path = parts.get('path')?.valueString;
    if (typeof type !== 'string' || !TYPES.has(type)) {
      throw new AppError('bad-request', `Operation ${i}: "type" must be one of ${[...TYPES].join(', ')}`);
    }
    if (typeof path !== 'string' || path === '')
      throw new AppError('bad-request', `Operation ${i}: "path" is required`);
    const integer = (name: string): number | undefined => {
      const value = parts.get(name)?.valueInteger;
      return typeof value === 'number' ? value : undefined;
    };
    const op: PatchOperation = {
      type: type as PatchOperation['type'],
      path,
      name: parts.get('name')?.valueString as string | undefined,
      value: parts.get('value') ? partValue(parts.get('value')!) : undefined,
      index: integer('index'),
      source: integer('source'),
      destination: integer('destination'),
    };
    const need = (what: keyof PatchOperation) => {
      if (op[what] === undefined) throw new AppError('bad-request', `Operation ${i} (${type}): "${what}" is required`);
    };
    const required: Record<PatchOperation['type'], (keyof PatchOperation)[]> = {
      add: ['name', 'value'],
      insert: ['value', 'index'],
      delete: [],
      replace: ['value'],
      move: ['source', 'destination'],
    };
    required[op.type].forEach(need);
    return op;
  });
}

/**
 * The paths are the client's FHIRPath: they run under one budget per patch (src/request-fhirpath/request-fhirpath.ts),
 * which also pays for our own walks of the resource, so that many operations on a large resource are bounded too.
 */
class PatchContext {
  readonly budget = new RequestFhirPathBudget();
  private readonly compiled = new Map<string, RequestFhirPath>();

  evaluate(root: Json, path: string): unknown[] {
    let expression = this.compiled.get(path);
    if (!expression) this.compiled.set(path, (expression = compileRequestFhirPath(path, this.budget)));
    return expression(root);
  }
}

/** Splits `a.b.where(x='y').c` into `a.b.where(x='y')` and `c` (the last member access). */
function splitLastMember(path: string): [string, string] | undefined {
  let depth = 0;
  let quote = false;
  for (let i = path.length - 1; i >= 0; i--) {
    const c = path[i];
    if (c === "'") quote = !quote;
    if (quote) continue;
    if (c === ')' || c === ']') depth++;
    if (c === '(' || c === '[') depth--;
    if (c === '.' && depth === 0) {
      const member = path.slice(i + 1);
      return /^[A-Za-z][A-Za-z0-9_]*$/.test(member) ? [path.slice(0, i), member] : undefined;
    }
  }
  return undefined;
}

interface Location {
  readonly parent: Json;
  readonly key: string;
  /** The position in parent[key] when that is an array. */
  readonly index?: number;
}

/** Where an object found by FHIRPath sits in the resource (FHIRPath returns the very objects of the tree). */
function locateObject(ctx: PatchContext, root: Json, target: object): Location | undefined {
  const stack: Json[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    ctx.budget.spend(1);
    for (const [key, value] of Object.entries(node)) {
      if (value === target) return { parent: node, key };
      if (Array.isArray(value)) {
        ctx.budget.spend(value.length);
        const index = value.indexOf(target);
        if (index >= 0) return { parent: node, key, index };
        for (const item of value) if (item && typeof item === 'object') stack.push(item as Json);
      } else if (value && typeof value === 'object') stack.push(value as Json);
    }
  }
  return undefined;
}

/** The one element `path` selects, with its location; a primitive is found through its parent element. */
function locateSingle(ctx: PatchContext, root: Json, path: string): Location | undefined {
  const results = ctx.evaluate(root, path);
  if (results.length === 0) return undefined;
  if (results.length > 1)
    throw new AppError('patch-failed', `The path "${path}" selects ${results.length} elements, not one`);
  const [result] = results;
  if (result && typeof result === 'object') return locateObject(ctx, root, result);
  // `X.member[n]`: the n-th value of the member across the elements X selects.
  const indexed = /^(.*)\[(\d+)\]$/.exec(path);
  if (indexed) {
    const inner = splitLastMember(indexed[1]);
    if (inner) {
      const slots: Location[] = [];
      for (const parent of ctx.evaluate(root, inner[0])) {
        if (!parent || typeof parent !== 'object') continue;
        const value = (parent as Json)[inner[1]];
        if (Array.isArray(value))
          value.forEach((_, index) => slots.push({ parent: parent as Json, key: inner[1], index }));
        else if (value !== undefined) slots.push({ parent: parent as Json, key: inner[1] });
      }
      const slot = slots[Number(indexed[2])];
      if (slot) return slot;
    }
  }
  const split = splitLastMember(path);
  if (!split) throw new AppError('patch-failed', `Cannot locate the element "${path}" selects`);
  const parents = ctx.evaluate(root, split[0]).filter((p): p is Json => Boolean(p) && typeof p === 'object');
  for (const parent of parents) {
    const key = Object.keys(parent).find(
      (k) => k === split[1] || (k.startsWith(split[1]) && /^[A-Z]/.test(k.slice(split[1].length))),
    );
    if (!key) continue;
    const value = parent[key];
    if (Array.isArray(value)) {
      const index = value.indexOf(result);
      if (index >= 0) return { parent, key, index };
    } else if (value === result) return { parent, key };
  }
  throw new AppError('patch-failed', `Cannot locate the element "${path}" selects`);
}

/** The list a repeating path names (`Patient.identifier`), created empty on its parent when absent. */
function locateList(ctx: PatchContext, root: Json, path: string): unknown[] {
  const split = splitLastMember(path);
  const parents = split ? ctx.evaluate(root, split[0]) : [root];
  if (parents.length !== 1 || !parents[0] || typeof parents[0] !== 'object') {
    throw new AppError('patch-failed', `The path "${path}" must name one repeating element`);
  }
  const parent = parents[0] as Json;
  const key = split ? split[1] : path;
  if (parent[key] === undefined) parent[key] = [];
  if (!Array.isArray(parent[key])) throw new AppError('patch-failed', `"${path}" is not a repeating element`);
  return parent[key] as unknown[];
}

function removeAt(location: Location): void {
  const { parent, key, index } = location;
  if (index === undefined) {
    delete parent[key];
    return;
  }
  const list = parent[key] as unknown[];
  list.splice(index, 1);
  if (list.length === 0) delete parent[key];
}

function applyOne(ctx: PatchContext, root: Json, op: PatchOperation): void {
  switch (op.type) {
    case 'add': {
      const targets = ctx.evaluate(root, op.path);
      if (targets.length !== 1 || !targets[0] || typeof targets[0] !== 'object') {
        throw new AppError(
          'patch-failed',
          `add: the path "${op.path}" must select one element, found ${targets.length}`,
        );
      }
      const target = targets[0] as Json;
      const existing = target[op.name!];
      if (existing === undefined) target[op.name!] = op.value;
      else if (Array.isArray(existing)) existing.push(op.value);
      else throw new AppError('patch-failed', `add: ${op.path}.${op.name} already has a value (use replace)`);
      return;
    }
    case 'insert': {
      const list = locateList(ctx, root, op.path);
      if (op.index! < 0 || op.index! > list.length)
        throw new AppError('patch-failed', `insert: index ${op.index} is out of range`);
      list.splice(op.index!, 0, op.value);
      return;
    }
    case 'delete': {
      // Deleting what is not there is not an error (fhirpatch.html: no match, no change).
      const location = locateSingle(ctx, root, op.path);
      if (location) removeAt(location);
      return;
    }
    case 'replace': {
      const location = locateSingle(ctx, root, op.path);
      if (!location) throw new AppError('patch-failed', `replace: the path "${op.path}" selects nothing`);
      if (location.index === undefined) location.parent[location.key] = op.value;
      else (location.parent[location.key] as unknown[])[location.index] = op.value;
      return;
    }
    case 'move': {
      const list = locateList(ctx, root, op.path);
      if (op.source! < 0 || op.source! >= list.length || op.destination! < 0 || op.destination! >= list.length) {
        throw new AppError(
          'patch-failed',
          `move: source ${op.source} or destination ${op.destination} is out of range`,
        );
      }
      const [item] = list.splice(op.source!, 1);
      list.splice(op.destination!, 0, item);
      return;
    }
  }
}

/** Applies a FHIRPath Patch to a copy of the resource. */
export function applyFhirPathPatch<T extends object>(resource: T, parameters: unknown): T {
  const operations = parseFhirPathPatch(parameters);
  const copy = structuredClone(resource) as Json;
  const ctx = new PatchContext();
  for (const op of operations) applyOne(ctx, copy, op);
  return copy as T;
}
