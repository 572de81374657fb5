// The FHIR type model the FHIRPath evaluator navigates with: which JSON keys an element name maps to and
// what FHIR type each holds, from the registry's element rules. This is what lets `Observation.value as
// Quantity` work without loading StructureDefinitions: `value` is `value[x]`, so the evaluator looks
// at `valueQuantity`, `valueString`... and knows the type of whatever it finds.
import type { R4Registry } from '../../definitions/registry.js';

/** Where a node's elements are defined (root type + path for backbone elements) and its FHIR type. */
export class TypeState {
  /** Cached navigation: element name → the JSON keys to read and the state of what they hold. */
  readonly steps = new Map<string, readonly Step[]>();

  constructor(
    readonly root: string,
    readonly path: string,
    readonly fhirType: string,
    /** For `code` elements with a required binding: the value set, whose code system a token row records. */
    readonly binding?: string,
  ) {}
}

export interface Step {
  readonly key: string;
  /** Undefined for `Resource`-typed elements (contained, Bundle.entry.resource): the value says its type. */
  readonly state: TypeState | undefined;
}

const BACKBONE = new Set(['BackboneElement', 'Element']);

/** The primitive types R4 derives from others (their StructureDefinitions' baseDefinition). */
const PRIMITIVE_BASE: Record<string, string> = {
  canonical: 'uri',
  url: 'uri',
  oid: 'uri',
  uuid: 'uri',
  id: 'string',
  code: 'string',
  markdown: 'string',
  positiveInt: 'integer',
  unsignedInt: 'integer',
};

/** Bounds isA's cache (R4 has about 200 resource and data types). */
const IS_A_CACHE_TYPES = 1000;

export class TypeModel {
  private readonly states = new Map<string, TypeState>();

  constructor(readonly registry: R4Registry) {}

  /** The state of a value of a resource or data type. */
  stateOf(fhirType: string): TypeState {
    return this.intern(fhirType, '', fhirType);
  }

  /** The code system of `code` in a required value set, when the value set names exactly one that has it. */
  codeSystem(binding: string, code: string): string | undefined {
    let systems = this.bindingSystems.get(binding);
    if (!systems) {
      const valueSet = this.registry.valueSet(binding);
      systems = valueSet && 'codes' in valueSet ? Object.entries(valueSet.codes) : [];
      this.bindingSystems.set(binding, systems);
    }
    const found = systems.filter(([, codes]) => codes.includes(code));
    return found.length === 1 ? found[0][0] : undefined;
  }

  private readonly bindingSystems = new Map<string, [string, string[]][]>();

  isPrimitive(fhirType: string): boolean {
    return this.registry.primitiveType(fhirType) !== undefined;
  }

  /** Is `fhirType` the type `name` or derived from it (Age is a Quantity, canonical a uri, Patient a DomainResource)? */
  isA(fhirType: string, name: string): boolean {
    let byName = this.isACache.get(fhirType);
    if (!byName) {
      if (this.isACache.size >= IS_A_CACHE_TYPES) this.isACache.clear();
      byName = new Map();
      this.isACache.set(fhirType, byName);
    }
    let answer = byName.get(name);
    if (answer === undefined) {
      answer = this.derives(fhirType, name);
      if (byName.size < IS_A_CACHE_TYPES) byName.set(name, answer);
    }
    return answer;
  }

  /** Answers of isA by type and name: it runs for every node of a type filter, and lower-cased both each time. */
  private readonly isACache = new Map<string, Map<string, boolean>>();

  private derives(fhirType: string, name: string): boolean {
    const wanted = name.toLowerCase();
    for (let t: string | undefined = fhirType, guard = 0; t && guard < 10; guard++) {
      if (t.toLowerCase() === wanted) return true;
      t = PRIMITIVE_BASE[t] ?? this.registry.type(t)?.base;
    }
    return false;
  }

  /** The JSON keys (and their states) behind element `name` of a node in `state`. */
  steps(state: TypeState, name: string): readonly Step[] {
    const cached = state.steps.get(name);
    if (cached) return cached;
    const steps = this.computeSteps(state, name);
    state.steps.set(name, steps);
    return steps;
  }

  private intern(root: string, path: string, fhirType: string, binding?: string): TypeState {
    const key = `${root}|${path}|${fhirType}|${binding ?? ''}`;
    let state = this.states.get(key);
    if (!state) {
      state = new TypeState(root, path, fhirType, binding);
      this.states.set(key, state);
    }
    return state;
  }

  private computeSteps(state: TypeState, name: string): Step[] {
    if (this.isPrimitive(state.fhirType)) return [];
    let relative = state.path ? `${state.path}.${name}` : name;
    let rule = this.registry.element(state.root, relative);
    let choice = false;
    if (!rule) {
      rule = this.registry.element(state.root, `${relative}[x]`);
      choice = rule !== undefined;
    }
    if (!rule) {
      // A choice element named with its type (`onsetDateTime`, as the JSON spells it): that type only.
      for (let cut = name.length - 1; cut > 0; cut--) {
        if (name[cut] < 'A' || name[cut] > 'Z') continue;
        const prefix = name.slice(0, cut);
        const typeName = name.slice(cut);
        const choiceRule = this.registry.element(state.root, `${state.path ? `${state.path}.` : ''}${prefix}[x]`);
        const type = choiceRule?.types?.find((t) => t.code.toLowerCase() === typeName.toLowerCase());
        if (type && !BACKBONE.has(type.code)) return [{ key: name, state: this.stateOf(type.code) }];
      }
      // Elements inherited from a base type (Element.id, Resource.meta) when the type does not list them.
      const base = state.path === '' ? this.registry.type(state.root)?.base : undefined;
      return base ? this.computeSteps(this.intern(base, '', base), name) : [];
    }
    if (rule.contentReference) {
      relative = rule.contentReference.replace(/^#/, '').replace(new RegExp(`^${state.root}\\.`), '');
      rule = this.registry.element(state.root, relative);
      if (!rule) return [];
    }
    const steps: Step[] = [];
    for (const type of rule.types ?? []) {
      const key = choice || rule.choice ? `${name}${type.code[0].toUpperCase()}${type.code.slice(1)}` : name;
      let next: TypeState | undefined;
      if (BACKBONE.has(type.code)) next = this.intern(state.root, relative, 'BackboneElement');
      else if (type.code === 'code' && rule.binding) next = this.intern('code', '', 'code', rule.binding);
      else if (type.code === 'Resource' || type.code === 'DomainResource') next = undefined;
      else next = this.stateOf(type.code);
      steps.push({ key, state: next });
    }
    return steps;
  }
}
