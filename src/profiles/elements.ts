// The element definitions of a profile, as enforcement reads them: the snapshot a StructureDefinition
// carries, or one generated from its differential and its base's elements, as the snapshot algorithm
// (https://hl7.org/fhir/R4/profiling.html#snapshot) merges them: an element of the differential
// overrides, property by property, the base's element with the same id (path and slice names); elements
// the base does not have (slices, and children of data types the base does not expand) are added. Only
// the properties enforced are kept (ProfileElement); narrative properties (short, definition, comment,
// mapping) never reach the merge.
import { AppError } from '../errors.js';

/** A type of an element: its code and the profiles it or its target must conform to. */
export interface ProfileType {
  code: string;
  profile?: string[];
  targetProfile?: string[];
}

export interface Discriminator {
  type: 'value' | 'exists' | 'pattern' | 'type' | 'profile';
  path: string;
}

export interface Slicing {
  discriminator: Discriminator[];
  ordered: boolean;
  rules: 'closed' | 'open' | 'openAtEnd';
}

export interface ProfileConstraint {
  key: string;
  severity: 'error' | 'warning';
  human: string;
  expression?: string;
}

/** One element of a profile, keyed by its id: the path with the slice names (`Observation.component:systolic.code`). */
export interface ProfileElement {
  id: string;
  path: string;
  sliceName?: string;
  min?: number;
  /** A count, or `*`. */
  max?: string;
  type?: ProfileType[];
  fixed?: { name: string; value: unknown };
  pattern?: { name: string; value: unknown };
  /** minValue[x] and maxValue[x]: the bounds of a number, date, time or Quantity. */
  minValue?: { name: string; value: unknown };
  maxValue?: { name: string; value: unknown };
  /** Characters a string may have at most. */
  maxLength?: number;
  /** The value set of a required binding. */
  requiredBinding?: string;
  constraint?: ProfileConstraint[];
  slicing?: Slicing;
}

/** The most element definitions a profile may have (its snapshot, or its differential merged with its base's). */
export const MAX_PROFILE_ELEMENTS = 5000;

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function invalid(message: string, expression?: string): AppError {
  return new AppError('profile-invalid', message, expression ? { expression } : {});
}

/**
 * The elements of one ElementDefinition list (a snapshot's or a differential's), keyed by id. Ids are
 * recomputed from the paths and slice names in order (a child of a slice follows its slice), so that a
 * list written without ids, or with ids that disagree with its paths, is read the same way.
 */
export function readElements(list: unknown, where: string, type: string): ProfileElement[] {
  if (!Array.isArray(list)) throw invalid(`${where}.element must be an array`, `${where}.element`);
  if (list.length > MAX_PROFILE_ELEMENTS) {
    throw invalid(`${where} has more than ${MAX_PROFILE_ELEMENTS} elements`, `${where}.element`);
  }
  /** The id each path currently stands for: the last slice seen at it, or the path itself. */
  const current = new Map<string, string>();
  return list.map((raw, i) => {
    const at = `${where}.element[${i}]`;
    if (!isObject(raw) || typeof raw.path !== 'string') throw invalid(`${at} must be an element with a path`, at);
    const path = raw.path;
    if (path !== type && !path.startsWith(`${type}.`)) {
      throw invalid(`${at}.path ${path} is not an element of ${type}`, `${at}.path`);
    }
    const dot = path.lastIndexOf('.');
    const parentPath = dot < 0 ? '' : path.slice(0, dot);
    const name = dot < 0 ? path : path.slice(dot + 1);
    const parentId = parentPath ? (current.get(parentPath) ?? parentPath) : '';
    const sliceName = typeof raw.sliceName === 'string' ? raw.sliceName : undefined;
    if (sliceName !== undefined && !/^[^\s.:]+$/.test(sliceName)) {
      throw invalid(`${at}.sliceName "${sliceName}" must be a name without spaces, dots or colons`, `${at}.sliceName`);
    }
    const ownId = `${parentId ? `${parentId}.` : ''}${name}`;
    const id = sliceName === undefined ? ownId : `${ownId}:${sliceName}`;
    // A new element at a path ends the slices of its children: they follow their own slice from here.
    for (const key of [...current.keys()]) if (key.startsWith(`${path}.`)) current.delete(key);
    current.set(path, id);
    return readElement(raw, id, path, sliceName, at);
  });
}

function readElement(raw: JsonObject, id: string, path: string, sliceName: string | undefined, at: string) {
  const element: ProfileElement = { id, path, ...(sliceName !== undefined ? { sliceName } : {}) };
  if (typeof raw.min === 'number') element.min = raw.min;
  if (typeof raw.max === 'string') {
    if (raw.max !== '*' && !/^\d+$/.test(raw.max)) throw invalid(`${at}.max must be a count or *`, `${at}.max`);
    element.max = raw.max;
  }
  if (Array.isArray(raw.type)) {
    element.type = raw.type.filter(isObject).map((t) => ({
      code: String(t.code),
      ...(Array.isArray(t.profile) ? { profile: t.profile.map(String) } : {}),
      ...(Array.isArray(t.targetProfile) ? { targetProfile: t.targetProfile.map(String) } : {}),
    }));
  }
  for (const [key, value] of Object.entries(raw)) {
    if (key.startsWith('fixed') && key.length > 5) element.fixed = { name: key, value };
    else if (key.startsWith('pattern') && key.length > 7) element.pattern = { name: key, value };
    else if (key.startsWith('minValue') && key.length > 8) element.minValue = { name: key, value };
    else if (key.startsWith('maxValue') && key.length > 8) element.maxValue = { name: key, value };
  }
  if (typeof raw.maxLength === 'number') element.maxLength = raw.maxLength;
  const binding = raw.binding;
  if (isObject(binding) && binding.strength === 'required' && typeof binding.valueSet === 'string') {
    element.requiredBinding = binding.valueSet;
  }
  if (Array.isArray(raw.constraint)) {
    element.constraint = raw.constraint.filter(isObject).map((c, i) => {
      if (typeof c.key !== 'string') throw invalid(`${at}.constraint[${i}] has no key`, `${at}.constraint[${i}]`);
      return {
        key: c.key,
        severity: c.severity === 'warning' ? 'warning' : 'error',
        human: typeof c.human === 'string' ? c.human : c.key,
        ...(typeof c.expression === 'string' ? { expression: c.expression } : {}),
      };
    });
  }
  if (isObject(raw.slicing)) element.slicing = readSlicing(raw.slicing, `${at}.slicing`);
  return element;
}

function readSlicing(raw: JsonObject, at: string): Slicing {
  const discriminators = Array.isArray(raw.discriminator) ? raw.discriminator : [];
  return {
    discriminator: discriminators.map((d: unknown, i) => {
      if (!isObject(d) || typeof d.path !== 'string' || typeof d.type !== 'string') {
        throw invalid(`${at}.discriminator[${i}] needs a type and a path`, `${at}.discriminator[${i}]`);
      }
      if (!['value', 'exists', 'pattern', 'type', 'profile'].includes(d.type)) {
        throw invalid(`${at}.discriminator[${i}].type ${d.type} is not an R4 discriminator type`);
      }
      return { type: d.type as Discriminator['type'], path: d.path };
    }),
    ordered: raw.ordered === true,
    rules: raw.rules === 'closed' || raw.rules === 'openAtEnd' ? raw.rules : 'open',
  };
}

/**
 * The snapshot of a differential over its base's elements (none for an R4 base: its rules are the base
 * validation's). An element of the differential replaces each property it states; the constraints add
 * to the base's, as the snapshot algorithm says. Order: the base's, with new elements after the last
 * element of their parent (so a slice follows its sliced element and its siblings).
 */
export function mergeDifferential(base: readonly ProfileElement[], differential: readonly ProfileElement[]) {
  const merged = new Map<string, ProfileElement>(base.map((e) => [e.id, e]));
  for (const element of differential) {
    const inherited = merged.get(element.id);
    if (!inherited) {
      merged.set(element.id, element);
      continue;
    }
    const constraints = [...(inherited.constraint ?? [])];
    for (const c of element.constraint ?? []) if (!constraints.some((k) => k.key === c.key)) constraints.push(c);
    merged.set(element.id, {
      ...inherited,
      ...element,
      ...(constraints.length ? { constraint: constraints } : {}),
    });
  }
  if (merged.size > MAX_PROFILE_ELEMENTS) {
    throw invalid(`The profile and its bases have more than ${MAX_PROFILE_ELEMENTS} elements`);
  }
  return [...merged.values()];
}
