// Random FHIR resources for property tests (fast-check), shaped by the compiled R4 rules: every element,
// choice type, backbone element, contained resource and required binding of every resource type can
// appear, with valid-looking values most of the time and garbage (wrong JSON types, bad formats, empty
// objects, unknown elements, huge numbers, odd Unicode) some of the time. The validator and the HTTP
// robustness suites use them to check that any input gets an answer, never a crash.
//
// The resource is built from a choice sequence (a list of numbers drawn by fast-check), Hypothesis-style:
// each decision consumes one number, and an exhausted list means "the simplest choice" (omit optional
// elements, valid values), so shrinking the list shrinks the resource towards a minimal one.
import fc from 'fast-check';
import type { ElementRule, R4Registry } from '../../src/definitions/registry.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** The numbers a resource is built from; 0 (also when exhausted) is always the simplest choice. */
class Choices {
  private index = 0;
  constructor(private readonly values: readonly number[]) {}

  /** A number in [0, n). */
  pick(n: number): number {
    if (n <= 1 || this.index >= this.values.length) {
      if (n > 1) this.index++;
      return 0;
    }
    return this.values[this.index++] % n;
  }

  /** True with probability about 1/n (never once the choices are exhausted). */
  oneIn(n: number): boolean {
    return this.index < this.values.length ? this.pick(n) === n - 1 : false;
  }

  from<T>(items: readonly T[]): T {
    return items[this.pick(items.length)];
  }
}

/** Valid-looking values per primitive type (the first is the one an exhausted sequence picks). */
const VALID_PRIMITIVES: Record<string, readonly Json[]> = {
  boolean: [true, false],
  integer: [0, 1, -7, 2147483647, -2147483648],
  positiveInt: [1, 2, 100, 2147483647],
  unsignedInt: [0, 1, 42, 2147483647],
  decimal: [0, 1.5, -0.001, 123456.789, 1e-7, 6.02e23],
  string: ['x', 'Chalmers', 'Ünïcödé ✓ 漢字', 'with\nnewline', ' padded ', '🙂 emoji'],
  markdown: ['**bold**', 'plain text'],
  code: ['active', 'final', 'a-code', 'male'],
  id: ['a1', 'example', 'A-b.c', 'x'.repeat(64)],
  uri: ['http://example.org/fhir', 'urn:uuid:6b1d2b4c-6f0a-4f3e-9d8a-2b4c6f0a4f3e', 'relative/path'],
  url: ['http://example.org', 'https://example.org/a?b=c'],
  canonical: ['http://hl7.org/fhir/StructureDefinition/Patient', 'http://example.org/vs|1.0'],
  oid: ['urn:oid:1.2.3.4', 'urn:oid:2.16.840.1.113883'],
  uuid: ['urn:uuid:6b1d2b4c-6f0a-4f3e-9d8a-2b4c6f0a4f3e'],
  date: ['2020', '2020-02', '2020-02-29', '1900-01-01'],
  dateTime: ['2020-02-29T12:30:00Z', '2020', '2021-03-04T05:06:07.123+14:00', '1970-01-01T00:00:00-05:00'],
  instant: ['2020-02-29T12:30:00Z', '2021-03-04T05:06:07.123456+01:00'],
  time: ['12:30:00', '23:59:60', '00:00:00.5'],
  base64Binary: ['aGVsbG8=', 'AAAA'],
  xhtml: [
    '<div xmlns="http://www.w3.org/1999/xhtml">text</div>',
    '<div xmlns="http://www.w3.org/1999/xhtml"><p>a</p></div>',
  ],
};

/** Values no primitive type accepts everywhere: wrong JSON types, bad formats, extremes, odd Unicode. */
const GARBAGE: readonly Json[] = [
  null,
  '',
  ' ',
  [],
  {},
  [null],
  [[]],
  true,
  0,
  -0.5,
  1e308,
  -1e308,
  2 ** 53 + 1,
  4294967296,
  'not a date',
  '2020-13-45',
  '2020-02-30T25:61:61Z',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udc00x',
  '\u202e\u200b',
  'x'.repeat(3000),
  '<div>unclosed',
  '<script>alert(1)</script>',
  "'; DROP TABLE resources; --",
  '${jndi:ldap://x}',
  '%00%ff',
  '../../etc/passwd',
  { resourceType: 'Patient' },
  { extension: [] },
  { id: 'only-id' },
  { value: { nested: { deeper: [1, 2, 3] } } },
];

const REFERENCE_VALUES: readonly string[] = [
  'Patient/p1',
  'Observation/o-1/_history/2',
  '#contained-1',
  'urn:uuid:6b1d2b4c-6f0a-4f3e-9d8a-2b4c6f0a4f3e',
  'http://example.org/fhir/Patient/x',
  'Unknown/1',
  'Patient/',
  'Patient?identifier=a|b',
  '',
];

export interface ArbitraryOptions {
  /** How deep complex values and backbone elements nest (default 5). */
  readonly maxDepth?: number;
  /** About 1 in this many values is garbage and 1 in this many objects gets an unknown key (default 12). */
  readonly garbageOneIn?: number;
  /** Most elements to pick per object (default 5; required elements come on top). */
  readonly maxElements?: number;
}

/** The children of every object in a type, by path prefix ('' is the type's root). */
type ChildIndex = Map<string, [name: string, rule: ElementRule][]>;

export class ResourceBuilder {
  private readonly children = new Map<string, ChildIndex>();
  private readonly maxDepth: number;
  private readonly garbageOneIn: number;
  private readonly maxElements: number;

  constructor(
    private readonly registry: R4Registry,
    options: ArbitraryOptions = {},
  ) {
    this.maxDepth = options.maxDepth ?? 5;
    this.garbageOneIn = options.garbageOneIn ?? 12;
    this.maxElements = options.maxElements ?? 5;
  }

  /** A resource of `type` built from `choices`. */
  build(type: string, choices: readonly number[]): JsonObject {
    const c = new Choices(choices);
    return this.resource(type, c, 0);
  }

  private resource(type: string, c: Choices, depth: number): JsonObject {
    const body = this.object(type, '', c, depth);
    delete body.resourceType;
    return { resourceType: type, ...body };
  }

  private index(type: string): ChildIndex {
    let index = this.children.get(type);
    if (!index) {
      index = new Map();
      for (const [path, rule] of Object.entries(this.registry.type(type)?.elements ?? {})) {
        const dot = path.lastIndexOf('.');
        const parent = dot < 0 ? '' : path.slice(0, dot);
        const list = index.get(parent) ?? [];
        list.push([dot < 0 ? path : path.slice(dot + 1), rule]);
        index.set(parent, list);
      }
      this.children.set(type, index);
    }
    return index;
  }

  private object(type: string, prefix: string, c: Choices, depth: number): JsonObject {
    const out: JsonObject = {};
    const children = this.index(type).get(prefix) ?? [];
    const deep = depth >= this.maxDepth;
    const required = children.filter(([, rule]) => (rule.min ?? 0) > 0);
    const wanted = new Set(required);
    // Something other than id and extensions, so that the object is not empty (ele-1).
    const content = children.filter(([name]) => name !== 'id' && !name.endsWith('xtension'));
    if (wanted.size === 0 && content.length > 0) wanted.add(c.from(content));
    if (!deep && children.length > 0) {
      const extra = c.pick(this.maxElements + 1);
      for (let i = 0; i < extra; i++) wanted.add(c.from(children));
    }
    for (const child of wanted) {
      const [name, rule] = child;
      if ((rule.min ?? 0) > 0 && c.oneIn(this.garbageOneIn * 2)) continue; // a required element left out
      const path = prefix ? `${prefix}.${name}` : name;
      const types = rule.types ?? [{ code: 'BackboneElement' }];
      const chosen = c.from(types);
      const jsonName = rule.choice ? name.replace('[x]', chosen.code[0].toUpperCase() + chosen.code.slice(1)) : name;
      const many = rule.max === '*' || (typeof rule.max === 'number' && rule.max > 1);
      const value = (): Json => this.value(type, path, rule, chosen.code, chosen.targets, c, depth + 1);
      if (many) {
        const count = deep ? 1 : 1 + c.pick(3);
        out[jsonName] = Array.from({ length: count }, value);
        if (c.oneIn(this.garbageOneIn * 2)) out[jsonName] = value(); // a single value where an array belongs
      } else {
        out[jsonName] = value();
        if (c.oneIn(this.garbageOneIn * 2)) out[jsonName] = [out[jsonName]]; // an array where one value belongs
      }
      if (this.registry.primitiveType(chosen.code) && c.oneIn(this.garbageOneIn)) {
        out[`_${jsonName}`] = c.oneIn(3)
          ? { extension: [{ url: 'http://example.org/ext', valueString: 'x' }] }
          : { id: 'e1' };
      }
    }
    if (c.oneIn(this.garbageOneIn)) {
      // defineProperty: `__proto__` must become an own member, as JSON.parse makes it.
      const key = c.from(['unknownElement', 'fhir_comments', '_unknown', 'Name', '', '__proto__', 'constructor']);
      Object.defineProperty(out, key, { value: 'x', enumerable: true, writable: true, configurable: true });
    }
    return out;
  }

  private value(
    type: string,
    path: string,
    rule: ElementRule,
    code: string,
    targets: readonly string[] | undefined,
    c: Choices,
    depth: number,
  ): Json {
    if (c.oneIn(this.garbageOneIn)) return c.from(GARBAGE);
    if (rule.contentReference) return this.object(type, rule.contentReference, c, depth);
    if (this.registry.primitiveType(code)) return this.primitive(code, rule.binding, c);
    if (this.index(type).has(path)) return this.object(type, path, c, depth); // backbone element
    if (code === 'Resource' || this.registry.isResourceType(code)) {
      const resourceType = code === 'Resource' ? c.from(this.registry.resourceTypes) : code;
      return depth >= this.maxDepth
        ? { resourceType: 'Basic', code: { text: 'x' } }
        : this.resource(resourceType, c, depth);
    }
    if (code === 'Reference') {
      const reference: JsonObject = this.object('Reference', '', c, depth);
      const target = targets?.length ? c.from(targets) : 'Patient';
      reference.reference = c.oneIn(3)
        ? c.from(REFERENCE_VALUES)
        : `${target === 'Resource' ? 'Patient' : target}/r${c.pick(5)}`;
      return reference;
    }
    if (code === 'Extension') {
      const extension = this.object('Extension', '', c, depth);
      extension.url = c.oneIn(this.garbageOneIn) ? c.from(GARBAGE) : 'http://example.org/fhir/StructureDefinition/ext';
      if (!Object.keys(extension).some((k) => k.startsWith('value') || k === 'extension')) extension.valueString = 'v';
      return extension;
    }
    if (this.registry.type(code)) return this.object(code, '', c, depth);
    return 'x';
  }

  private primitive(code: string, binding: string | undefined, c: Choices): Json {
    const valueSet = binding ? this.registry.valueSet(binding) : undefined;
    if (valueSet && 'codes' in valueSet && !c.oneIn(this.garbageOneIn)) {
      const codes = Object.values(valueSet.codes).flat();
      if (codes.length) return c.from(codes);
    }
    const samples = VALID_PRIMITIVES[code] ?? VALID_PRIMITIVES.string;
    return c.from(samples);
  }
}

/** fast-check arbitrary: a random resource of one of `types` (default every R4 resource type). */
export function arbitraryResource(
  registry: R4Registry,
  options: ArbitraryOptions & { readonly types?: readonly string[]; readonly maxChoices?: number } = {},
): fc.Arbitrary<{ type: string; resource: JsonObject }> {
  const builder = new ResourceBuilder(registry, options);
  const types = options.types ?? registry.resourceTypes;
  return fc
    .record({
      type: fc.constantFrom(...types),
      choices: fc.array(fc.nat({ max: 0xffff }), { maxLength: options.maxChoices ?? 300, size: 'max' }),
    })
    .map(({ type, choices }) => ({ type, resource: builder.build(type, choices) }));
}

/** Arbitrary JSON values of every shape, for inputs that need not look like FHIR at all. */
export function arbitraryJson(): fc.Arbitrary<unknown> {
  return fc.jsonValue({ maxDepth: 6 });
}

/** A JSON object with a `resourceType` (often a real one) and arbitrary other members. */
export function arbitraryResourceLike(registry: R4Registry): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(
      fc.oneof(
        fc.constantFrom(...registry.resourceTypes),
        fc.string(),
        fc.constantFrom('Resource', 'DomainResource', 'Element'),
      ),
      fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 5 }), { maxKeys: 8 }),
    )
    .map(([resourceType, rest]) => ({ ...rest, resourceType }));
}
