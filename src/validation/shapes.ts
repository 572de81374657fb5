/**
 * Turns the registry's element rules into lookup structures shaped like JSON objects: for each object (a resource,
 * a data type, a backbone element) the map from JSON property name (`valueQuantity`, `given`) to the element it
 * belongs to. Built lazily, once per type or backbone path, and kept for the life of the registry.
 */
import {
  DotAtom,
  FhirPathAtom,
  FunctionAtom,
  IndexerAtom,
  LiteralAtom,
  parseFhirPath,
  SymbolAtom,
  type Atom,
} from '@medplum/core';
import type { ElementRule, ElementType, R4Registry, ValueSetRule } from '../definitions/registry.js';
import { shortCircuitOf } from './invariants.js';
import type { ShortCircuit } from './invariants.js';

export interface CompiledConstraint {
  key: string;
  human: string;
  expression: string;
  atom: FhirPathAtom;
  /**
   * The element names the expression starts its paths from (`name`, `telecom` in pat-1), or undefined when it
   * also looks at the context as a whole or at variables. When none of them is present in an object, the outcome
   * is the same as on an empty object, so it is computed once (invariants.ts).
   */
  roots?: string[];
  outcomeWhenRootsAbsent?: 'pass' | 'fail' | 'error';
  /** The sides of a top-level `or` or `implies`, decided one by one (invariants.ts). */
  shortCircuit?: ShortCircuit;
}

/** One element of an object, however many JSON properties it spans (a choice spans one per type). */
export interface ElementShape {
  /** Name as in the definition: `name`, `value[x]`. */
  name: string;
  /** `Patient.name`: used in diagnostics. */
  definitionPath: string;
  min: number;
  max: number;
  isArray: boolean;
  jsonNames: string[];
  constraints: CompiledConstraint[];
  /** Allowed codes for a required binding; undefined when unbound or the value set cannot be checked. */
  binding?: BindingCheck;
}

export interface BindingCheck {
  url: string;
  codesBySystem: Map<string, Set<string>>;
  allCodes: Set<string>;
}

export type PropertyKind = 'primitive' | 'complex' | 'resource';

/** A JSON property: one element with one type (a choice element yields one property per type). */
export interface PropertyShape {
  jsonName: string;
  element: ElementShape;
  type: ElementType;
  kind: PropertyKind;
  /** True for `DomainResource.contained`: the resource is validated as contained in the enclosing one. */
  isContained: boolean;
  /** For complex values: the shape of the object (data type, or backbone element of the enclosing type). */
  objectShape?: () => ObjectShape;
}

export interface ObjectShape {
  /** FHIR type name given to FHIRPath (`Patient`, `HumanName`, `BackboneElement`). */
  fhirType: string;
  properties: Map<string, PropertyShape>;
  elements: ElementShape[];
  /** Invariants on the type, including those inherited through its base types. */
  constraints: CompiledConstraint[];
  isResource: boolean;
  /**
   * Element names that are a prefix of another property (`response` and `responseCode` in TestScript). Without a
   * schema, the FHIRPath engine reads an absent `response` as the choice-style `responseCode`; invariants.ts guards.
   */
  shadowedNames: string[];
}

export class ShapeCatalog {
  private readonly shapes = new Map<string, ObjectShape>();
  private readonly bindings = new Map<string, BindingCheck | undefined>();
  private readonly typeConstraints = new Map<string, CompiledConstraint[]>();

  constructor(readonly registry: R4Registry) {}

  /** The shape of a resource or complex data type. */
  typeShape(typeName: string): ObjectShape | undefined {
    if (!this.registry.type(typeName)) return undefined;
    return this.shape(typeName, '');
  }

  isPrimitive(typeCode: string): boolean {
    return this.registry.primitiveType(typeCode) !== undefined;
  }

  /**
   * Shape of the object at `path` within `typeName`: '' is the type itself, `contact` a backbone element.
   * Backbone children are stored under the type with dotted paths, so the shape collects the direct children.
   */
  private shape(typeName: string, path: string): ObjectShape {
    const key = `${typeName}#${path}`;
    let shape = this.shapes.get(key);
    if (!shape) {
      shape = this.buildShape(typeName, path);
      this.shapes.set(key, shape);
    }
    return shape;
  }

  private buildShape(typeName: string, path: string): ObjectShape {
    const type = this.registry.type(typeName)!;
    const prefix = path ? `${path}.` : '';
    const elements: ElementShape[] = [];
    const properties = new Map<string, PropertyShape>();
    for (const [elementPath, rule] of Object.entries(type.elements)) {
      if (!elementPath.startsWith(prefix)) continue;
      const name = elementPath.slice(prefix.length);
      if (name.includes('.')) continue;
      const element = this.buildElement(typeName, elementPath, name, rule);
      elements.push(element);
      for (const property of this.buildProperties(typeName, elementPath, element, rule)) {
        properties.set(property.jsonName, property);
      }
    }
    const isRoot = path === '';
    const jsonNames = [...properties.keys()];
    const shadowedNames = elements
      .filter((e) => !e.name.endsWith('[x]'))
      .map((e) => e.name)
      .filter((name) =>
        jsonNames.some(
          (other) => other.length > name.length && other.startsWith(name) && /[A-Z]/.test(other[name.length]),
        ),
      );
    return {
      shadowedNames,
      fhirType: isRoot ? typeName : 'BackboneElement',
      properties,
      elements,
      constraints: isRoot ? this.inheritedConstraints(typeName) : [],
      isResource: isRoot && type.kind === 'resource',
    };
  }

  private buildElement(typeName: string, elementPath: string, name: string, rule: ElementRule): ElementShape {
    const max = rule.max === undefined ? 1 : rule.max === '*' ? Number.POSITIVE_INFINITY : rule.max;
    const types = this.resolveTypes(typeName, rule);
    const choiceBase = name.replace('[x]', '');
    return {
      name,
      definitionPath: `${typeName}.${elementPath}`,
      min: rule.min ?? 0,
      max,
      // max 0 elements (SimpleQuantity.comparator) are forbidden; treat their JSON as single-valued.
      isArray: max > 1,
      jsonNames: rule.choice ? types.map((t) => choiceBase + capitalise(t.code)) : [name],
      constraints: compileConstraints(rule.constraints),
      binding: rule.binding ? this.binding(rule.binding) : undefined,
    };
  }

  private buildProperties(
    typeName: string,
    elementPath: string,
    element: ElementShape,
    rule: ElementRule,
  ): PropertyShape[] {
    const types = this.resolveTypes(typeName, rule);
    // A contentReference element has the children of the element it points to.
    const childPath = rule.contentReference ?? elementPath;
    return types.map((type, i) => {
      const kind: PropertyKind = this.isPrimitive(type.code)
        ? 'primitive'
        : type.code === 'Resource'
          ? 'resource'
          : 'complex';
      const property: PropertyShape = {
        jsonName: element.jsonNames[rule.choice ? i : 0],
        element,
        type,
        kind,
        isContained: kind === 'resource' && elementPath === 'contained',
      };
      if (kind === 'complex') {
        const inline = type.code === 'BackboneElement' || type.code === 'Element';
        const objectType = type.profile ?? type.code;
        property.objectShape = inline ? () => this.shape(typeName, childPath) : () => this.shape(objectType, '');
      }
      return property;
    });
  }

  /** A contentReference element has no types of its own: it takes those of the referenced element. */
  private resolveTypes(typeName: string, rule: ElementRule): ElementType[] {
    if (rule.types) return rule.types;
    const target = rule.contentReference ? this.registry.element(typeName, rule.contentReference) : undefined;
    return target?.types ?? [];
  }

  private inheritedConstraints(typeName: string): CompiledConstraint[] {
    let constraints = this.typeConstraints.get(typeName);
    if (!constraints) {
      const type = this.registry.type(typeName);
      const own = compileConstraints(type?.constraints);
      const inherited = type?.base ? this.inheritedConstraints(type.base) : [];
      constraints = [...own, ...inherited];
      this.typeConstraints.set(typeName, constraints);
    }
    return constraints;
  }

  private binding(url: string): BindingCheck | undefined {
    if (!this.bindings.has(url)) this.bindings.set(url, toBindingCheck(url, this.registry.valueSet(url)));
    return this.bindings.get(url);
  }
}

function toBindingCheck(url: string, valueSet: ValueSetRule | undefined): BindingCheck | undefined {
  if (!valueSet || 'unchecked' in valueSet) return undefined;
  const codesBySystem = new Map<string, Set<string>>();
  const allCodes = new Set<string>();
  for (const [system, codes] of Object.entries(valueSet.codes)) {
    codesBySystem.set(system, new Set(codes));
    for (const code of codes) allCodes.add(code);
  }
  return { url, codesBySystem, allCodes };
}

function compileConstraints(rules: ElementRule['constraints']): CompiledConstraint[] {
  return (rules ?? []).map((rule) => constraintOf(rule, parseFhirPath(rule.expression)));
}

/** An invariant ready for evaluateInvariant, from its parsed (or guarded) expression. */
export function constraintOf(
  rule: { key: string; human: string; expression: string },
  atom: FhirPathAtom,
): CompiledConstraint {
  const roots = rootIdentifiers(atom.child);
  return { ...rule, atom, roots: roots ? [...roots] : undefined, shortCircuit: shortCircuitOf(atom) };
}

/**
 * Identifiers that an expression navigates from its input. Undefined when the outcome may depend on more than the
 * properties those identifiers name: a function or `$this` applied to the input itself, or a `%variable`.
 */
export function rootIdentifiers(atom: Atom): Set<string> | undefined {
  if (atom instanceof FhirPathAtom) return rootIdentifiers(atom.child);
  if (atom instanceof LiteralAtom) return new Set();
  if (atom instanceof SymbolAtom) return /^[%$]/.test(atom.name) ? undefined : new Set([atom.name]);
  // The right side of `a.b` and the arguments of `a.where(...)` see only what `a` yields.
  if (atom instanceof DotAtom) return rootIdentifiers(atom.left);
  if (atom instanceof FunctionAtom) return undefined;
  if (atom instanceof IndexerAtom) return union(rootIdentifiers(atom.left), rootIdentifiers(atom.expr));
  const operator = atom as { left?: Atom; right?: Atom; child?: Atom };
  if (operator.left && operator.right) return union(rootIdentifiers(operator.left), rootIdentifiers(operator.right));
  if (operator.child) return rootIdentifiers(operator.child);
  return undefined;
}

function union(a: Set<string> | undefined, b: Set<string> | undefined): Set<string> | undefined {
  return a && b ? new Set([...a, ...b]) : undefined;
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

const catalogs = new WeakMap<R4Registry, ShapeCatalog>();

/** One catalog per registry, so shapes are compiled once per process. */
export function shapeCatalog(registry: R4Registry): ShapeCatalog {
  let catalog = catalogs.get(registry);
  if (!catalog) {
    catalog = new ShapeCatalog(registry);
    catalogs.set(registry, catalog);
  }
  return catalog;
}
