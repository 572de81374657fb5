/**
 * Validates a FHIR R4 resource (parsed JSON) against the base specification: structure, cardinality, primitive
 * formats, required value sets, reference targets and error invariants. Collects every issue before answering.
 *
 * Spec: https://hl7.org/fhir/R4/validation.html, https://hl7.org/fhir/R4/json.html. Design: docs/validation.md.
 */
import type { TypedValue } from '@medplum/core';
import type { R4Registry } from '../definitions/registry.js';
import { ReferenceParser } from '../fhir/references.js';
import { fhirPathCopies, forFhirPath, type FhirPathCopies } from './fhirpath-copies.js';
import { evaluateInvariant, type InvariantScope } from './invariants.js';
import { describeJson, isBase64, PrimitiveChecker } from './primitives.js';
import {
  shapeCatalog,
  type BindingCheck,
  type CompiledConstraint,
  type ElementShape,
  type ObjectShape,
  type PropertyShape,
  type ShapeCatalog,
} from './shapes.js';

export interface ValidationIssue {
  severity: 'error' | 'warning';
  /** FHIR IssueType code (https://hl7.org/fhir/R4/valueset-issue-type.html). */
  code: 'structure' | 'required' | 'value' | 'invariant' | 'code-invalid' | 'invalid' | 'informational';
  /** FHIRPath-style location of the problem: `Patient.name[0].given[1]`. */
  expression: string;
  /** What rule was broken, for a human. */
  diagnostics: string;
  /** `base`: structure, cardinality, type, value set. `invariant`: a FHIRPath constraint. */
  rule: 'base' | 'invariant';
  /** The profile (`url|version`) whose rule this is; absent for the base R4 rules. */
  profile?: string;
}

type JsonObject = Record<string, unknown>;

interface Validator {
  catalog: ShapeCatalog;
  primitives: PrimitiveChecker;
  /** Knows relative references only: for callers that name no server base. */
  relativeReferences: ReferenceParser;
}
const validators = new WeakMap<R4Registry, Validator>();

function validatorFor(registry: R4Registry): Validator {
  let validator = validators.get(registry);
  if (!validator) {
    validator = {
      catalog: shapeCatalog(registry),
      primitives: new PrimitiveChecker(registry),
      relativeReferences: new ReferenceParser(undefined, (t) => registry.isResourceType(t)),
    };
    validators.set(registry, validator);
  }
  return validator;
}

/**
 * Validates `resource` against the R4 base rules and returns every issue found (empty when valid). It never
 * changes `resource`. `references` tells which references name a resource of this server, whose target type
 * is then checked (relative, or absolute on the server's base); without it, relative references only.
 */
export function validateResource(
  resource: unknown,
  registry: R4Registry,
  references?: ReferenceParser,
): ValidationIssue[] {
  const validator = validatorFor(registry);
  const walk = new ResourceWalk(
    registry,
    validator,
    fhirPathCopies(resource),
    references ?? validator.relativeReferences,
  );
  walk.resource(resource, '', undefined);
  return walk.issues;
}

class ResourceWalk {
  readonly issues: ValidationIssue[] = [];
  /** Local references (`#id`) seen in each resource being walked, innermost last: for dom-3. */
  private readonly referenceFrames: Set<string>[] = [];
  private readonly referencesByResource = new WeakMap<object, Set<string>>();
  private readonly catalog: ShapeCatalog;
  private readonly primitives: PrimitiveChecker;

  constructor(
    private readonly registry: R4Registry,
    validator: Validator,
    /** What FHIRPath reads instead of the input where it would write into it (see fhirpath-copies.ts). */
    private readonly copies: FhirPathCopies,
    private readonly references: ReferenceParser,
  ) {
    this.catalog = validator.catalog;
    this.primitives = validator.primitives;
  }

  /**
   * A resource at the root (`path` empty), contained in another (`container` set), or inside a Bundle entry or
   * Parameters (a resource of its own, so it is its own %rootResource).
   */
  resource(value: unknown, path: string, container: InvariantScope | undefined): void {
    if (!isObject(value)) {
      this.add('invalid', path || 'Resource', `expected a resource (a JSON object), found ${describeJson(value)}`);
      return;
    }
    const resourceType = value.resourceType;
    if (resourceType === undefined) {
      this.add('required', join(path || 'Resource', 'resourceType'), 'missing: every resource must name its type');
      return;
    }
    const shape = typeof resourceType === 'string' ? this.resourceShape(resourceType) : undefined;
    if (!shape) {
      this.add(
        'invalid',
        join(path || 'Resource', 'resourceType'),
        `${JSON.stringify(resourceType)} is not an R4 resource type`,
      );
      return;
    }
    const self: TypedValue = { type: resourceType as string, value: forFhirPath(value, this.copies) };
    const scope: InvariantScope = { resource: self, rootResource: container?.rootResource ?? self };
    const resourcePath = path || (resourceType as string);
    const references = new Set<string>();
    this.referenceFrames.push(references);
    this.object(value, shape, resourcePath, scope);
    this.referenceFrames.pop();
    this.referencesByResource.set(value, references);
    // What a contained resource refers to counts for its container too (%resource.descendants() in dom-3).
    if (container) for (const reference of references) this.currentReferences().add(reference);
    if (Array.isArray(value.contained)) this.checkContainedAreReferenced(value.contained, references, resourcePath);
  }

  /**
   * dom-3, checked without FHIRPath (the engine's descendants() needs schemas): a contained resource must be
   * referenced from elsewhere in the resource (`#id`), or must itself refer to its container (`#`).
   */
  private checkContainedAreReferenced(contained: unknown[], references: Set<string>, path: string): void {
    contained.forEach((resource, i) => {
      if (!isObject(resource) || typeof resource.id !== 'string') return;
      const refersToContainer = this.referencesByResource.get(resource)?.has('#') ?? false;
      if (!references.has(`#${resource.id}`) && !refersToContainer) {
        this.addInvariant(
          `${path}.contained[${i}]`,
          'dom-3',
          'If the resource is contained in another resource, it SHALL be referred to from elsewhere in the resource or SHALL refer to the containing resource',
        );
      }
    });
  }

  private currentReferences(): Set<string> {
    return this.referenceFrames[this.referenceFrames.length - 1];
  }

  private resourceShape(resourceType: string): ObjectShape | undefined {
    return this.registry.isResourceType(resourceType) ? this.catalog.typeShape(resourceType) : undefined;
  }

  /**
   * Checks one JSON object against the shape of its type or backbone element. Returns false for an empty object,
   * which makes every further rule on it (invariants included) moot.
   */
  private object(value: JsonObject, shape: ObjectShape, path: string, scope: InvariantScope): boolean {
    const keys = Object.keys(value);
    if (keys.length === 0) {
      this.add('structure', path, 'empty object: an element must have a value or children (json.html, ele-1)');
      return false;
    }
    if (!shape.isResource && keys.length === 1 && keys[0] === 'id') {
      this.addInvariant(path, 'ele-1', 'All FHIR elements must have a @value or children (only an id found)');
    }

    const present = new Map<ElementShape, PropertyShape[]>();
    for (const key of keys) {
      if (key === 'resourceType' && shape.isResource) continue;
      const isExtensionSibling = key.startsWith('_');
      const property = shape.properties.get(isExtensionSibling ? key.slice(1) : key);
      if (!property || (isExtensionSibling && property.kind !== 'primitive')) {
        this.add('structure', join(path, key), `unknown element '${key}' ${unknownElementHint(key, shape)}`);
        continue;
      }
      // A primitive and its `_name` sibling are one property: visit it once.
      const seen = present.get(property.element) ?? [];
      if (!seen.includes(property)) seen.push(property);
      present.set(property.element, seen);
    }

    for (const element of shape.elements) {
      const properties = present.get(element);
      if (!properties) {
        if (element.min > 0) {
          this.add('required', join(path, element.name), `minimum cardinality ${element.min}, found 0`);
        }
        continue;
      }
      if (element.max === 0) {
        this.add('structure', join(path, element.name), 'maximum cardinality 0: this element is not allowed here');
      }
      if (properties.length > 1) {
        const names = properties.map((p) => p.jsonName).join(', ');
        this.add('structure', join(path, element.name), `only one type is allowed for ${element.name}, found ${names}`);
      }
      for (const property of properties) this.property(value, property, join(path, property.jsonName), scope);
    }

    if (shape.constraints.length) this.invariants(shape.constraints, shape, shape.fhirType, value, path, scope);
    return true;
  }

  private property(owner: JsonObject, property: PropertyShape, path: string, scope: InvariantScope): void {
    if (property.kind === 'primitive') {
      this.primitiveProperty(owner[property.jsonName], owner[`_${property.jsonName}`], property, path, scope);
      return;
    }
    const value = owner[property.jsonName];
    const element = property.element;
    if (Array.isArray(value)) {
      if (!this.checkArray(value, element, path)) return;
      value.forEach((item, i) => this.complexItem(item, property, `${path}[${i}]`, scope));
    } else {
      if (element.isArray && value !== null)
        this.add('structure', path, `must be a JSON array (max ${maxText(element)})`);
      this.complexItem(value, property, path, scope);
    }
  }

  /** Array-level rules shared by primitives and complex values. Returns false when the items are not worth visiting. */
  private checkArray(value: unknown[], element: ElementShape, path: string): boolean {
    if (value.length === 0) {
      this.add('structure', path, 'empty array: omit the property instead (json.html)');
      return false;
    }
    if (!element.isArray) {
      this.add('structure', path, `maximum cardinality ${maxText(element)}, found an array of ${value.length}`);
    } else if (value.length > element.max) {
      this.add('structure', path, `maximum cardinality ${maxText(element)}, found ${value.length}`);
    }
    return true;
  }

  private complexItem(item: unknown, property: PropertyShape, path: string, scope: InvariantScope): void {
    if (item === null || item === undefined) {
      this.add('structure', path, 'null is not allowed here (json.html)');
      return;
    }
    if (property.kind === 'resource') {
      this.resource(item, path, property.isContained ? scope : undefined);
      return;
    }
    if (!isObject(item)) {
      this.add('structure', path, `expected a JSON object for ${property.type.code}, found ${describeJson(item)}`);
      return;
    }
    const shape = property.objectShape!();
    if (!this.object(item, shape, path, scope)) return;
    this.typeSpecificChecks(item, property, path);
    const constraints = property.element.constraints;
    if (constraints.length) this.invariants(constraints, shape, fhirPathType(property), item, path, scope);
  }

  /** Rules that the base spec states for particular types rather than through element definitions. */
  private typeSpecificChecks(item: JsonObject, property: PropertyShape, path: string): void {
    const binding = property.element.binding;
    switch (property.type.code) {
      case 'Extension':
        this.checkExtensionContent(item, path);
        break;
      case 'Reference':
        this.checkReferenceTarget(item, property.type.targets, path);
        if (typeof item.reference === 'string') this.currentReferences().add(item.reference);
        break;
      case 'Attachment':
        this.checkAttachmentSize(item, path);
        break;
      case 'Coding':
        if (binding) this.checkCoding(item, binding, path);
        break;
      case 'CodeableConcept':
        if (binding && Array.isArray(item.coding)) {
          item.coding.forEach((coding, i) => this.checkCoding(coding, binding, `${path}.coding[${i}]`));
        }
        break;
    }
  }

  /** ext-1, checked without FHIRPath: an extension carries nested extensions or a value, never both or neither. */
  private checkExtensionContent(item: JsonObject, path: string): void {
    const hasValue = Object.keys(item).some((key) => /^_?value[A-Z]/.test(key));
    const hasExtensions = item.extension !== undefined;
    if (hasValue === hasExtensions) {
      this.addInvariant(path, 'ext-1', 'Must have either extensions or value[x], not both');
    }
  }

  /** Attachment.size is "the number of bytes of data that make up this attachment (before base64 encoding)". */
  private checkAttachmentSize(item: JsonObject, path: string): void {
    if (typeof item.data !== 'string' || typeof item.size !== 'number' || !isBase64(item.data)) return;
    const actual = Buffer.from(item.data, 'base64').length;
    if (actual !== item.size) {
      this.add('value', `${path}.size`, `states ${item.size} bytes but data holds ${actual} bytes`);
    }
  }

  private checkReferenceTarget(item: JsonObject, targets: string[] | undefined, path: string): void {
    if (!targets || targets.includes('Resource') || typeof item.reference !== 'string') return;
    // A resource of this server, relative or absolute: the only form whose type we know without resolving it.
    const local = this.references.local(item.reference);
    if (!local || targets.includes(local.type)) return;
    this.add(
      'structure',
      `${path}.reference`,
      `reference to a ${local.type} is not allowed here: the target must be ${targets.join(' or ')}`,
    );
  }

  /** A coding in a required binding must use a code of the value set, when it uses one of the value set's systems. */
  private checkCoding(coding: unknown, binding: BindingCheck, path: string): void {
    if (!isObject(coding) || typeof coding.system !== 'string' || typeof coding.code !== 'string') return;
    const codes = binding.codesBySystem.get(coding.system);
    if (codes && !codes.has(coding.code)) {
      this.add('code-invalid', `${path}.code`, `code '${coding.code}' is not in the required value set ${binding.url}`);
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Primitives, with their `_name` extension siblings (https://hl7.org/fhir/R4/json.html#primitive)

  private primitiveProperty(
    value: unknown,
    extension: unknown,
    property: PropertyShape,
    path: string,
    scope: InvariantScope,
  ): void {
    const element = property.element;
    if (Array.isArray(value)) {
      if (!this.checkArray(value, element, path)) return;
      const extensions = Array.isArray(extension) ? extension : undefined;
      if (extension !== undefined && extensions?.length !== value.length) {
        this.add('structure', `${path}`, `_${property.jsonName} must be an array of the same length as the values`);
      }
      value.forEach((item, i) => {
        if (item === null) {
          if (!isObject(extensions?.[i])) this.add('structure', `${path}[${i}]`, 'null value without an extension');
        } else {
          this.primitiveValue(item, property, `${path}[${i}]`, scope);
        }
      });
    } else if (value !== undefined) {
      if (value === null) {
        this.add('structure', path, 'null is not allowed here (json.html)');
      } else {
        if (element.isArray) this.add('structure', path, `must be a JSON array (max ${maxText(element)})`);
        this.primitiveValue(value, property, path, scope);
      }
    }
    if (extension !== undefined) this.primitiveExtensions(extension, value, property, path, scope);
  }

  private primitiveExtensions(
    extension: unknown,
    value: unknown,
    property: PropertyShape,
    path: string,
    scope: InvariantScope,
  ): void {
    const elementShape = this.catalog.typeShape('Element')!;
    if (Array.isArray(extension)) {
      if (value === undefined && !this.checkArray(extension, property.element, path)) return;
      if (!Array.isArray(value) && value !== undefined) {
        this.add('structure', path, `_${property.jsonName} is an array but ${property.jsonName} is not`);
      }
      extension.forEach((item, i) => {
        const itemPath = `${path}[${i}]`;
        if (item === null) {
          if (!Array.isArray(value) || value[i] === null || value[i] === undefined) {
            this.add('structure', itemPath, 'null in both the value and its extension');
          }
        } else if (isObject(item)) {
          this.object(item, elementShape, itemPath, scope);
        } else {
          this.add('structure', itemPath, `expected a JSON object, found ${describeJson(item)}`);
        }
      });
    } else if (isObject(extension)) {
      if (Array.isArray(value)) this.add('structure', path, `_${property.jsonName} must be an array like the values`);
      this.object(extension, elementShape, path, scope);
    } else {
      this.add('structure', path, `_${property.jsonName} must be a JSON object, found ${describeJson(extension)}`);
    }
  }

  private primitiveValue(value: unknown, property: PropertyShape, path: string, scope: InvariantScope): void {
    const problem = this.primitives.check(property.type.code, value);
    if (problem) {
      this.issues.push({
        severity: problem.severity,
        code: problem.code,
        expression: path,
        diagnostics: `${path}: ${problem.message}`,
        rule: 'base',
      });
      if (problem.severity === 'error') return;
    }
    const binding = property.element.binding;
    if (binding && typeof value === 'string' && !binding.allCodes.has(value)) {
      this.add('code-invalid', path, `code '${value}' is not in the required value set ${binding.url}`);
    }
    if (typeof value === 'string' && value.startsWith('#') && LOCAL_REFERENCE_TYPES.has(property.type.code)) {
      this.currentReferences().add(value);
    }
    const constraints = property.element.constraints;
    if (constraints.length) this.invariants(constraints, undefined, property.type.code, value, path, scope);
  }

  // -------------------------------------------------------------------------------------------------------------

  private invariants(
    constraints: CompiledConstraint[],
    shape: ObjectShape | undefined,
    type: string,
    value: unknown,
    path: string,
    scope: InvariantScope,
  ): void {
    const readable = forFhirPath(value, this.copies);
    const context: TypedValue = {
      type,
      value: shape ? withAbsentShadowedNames(readable as JsonObject, shape) : readable,
    };
    for (const constraint of constraints) {
      if (evaluateInvariant(constraint, context, scope) === 'fail') {
        this.addInvariant(path, constraint.key, constraint.human);
      }
    }
  }

  private addInvariant(path: string, key: string, human: string): void {
    this.issues.push({
      severity: 'error',
      code: 'invariant',
      expression: path,
      diagnostics: `${path}: constraint ${key} failed: ${human}`,
      rule: 'invariant',
    });
  }

  private add(code: ValidationIssue['code'], expression: string, message: string): void {
    this.issues.push({ severity: 'error', code, expression, diagnostics: `${expression}: ${message}`, rule: 'base' });
  }
}

/** Types whose value may be a local reference to a contained resource (`#id`), as dom-3 reads them. */
const LOCAL_REFERENCE_TYPES = new Set(['canonical', 'uri', 'url']);

/** See ObjectShape.shadowedNames: an explicit `undefined` stops the engine reading `responseCode` as `response`. */
function withAbsentShadowedNames(value: JsonObject, shape: ObjectShape): JsonObject {
  if (shape.shadowedNames.length === 0) return value;
  const absent = shape.shadowedNames.filter((name) => !(name in value));
  if (absent.length === 0) return value;
  const copy: JsonObject = { ...value };
  for (const name of absent) copy[name] = undefined;
  return copy;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function join(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

function maxText(element: ElementShape): string {
  return element.max === Number.POSITIVE_INFINITY ? '*' : String(element.max);
}

/** Backbone elements go to FHIRPath as `BackboneElement`/`Element`; data types keep their name. */
function fhirPathType(property: PropertyShape): string {
  return property.type.profile ?? property.type.code;
}

/** Names the likely mistake when a property looks like a choice element with an unknown type (`valueFoo`). */
function unknownElementHint(key: string, shape: ObjectShape): string {
  const name = key.replace(/^_/, '');
  const choice = shape.elements.find((e) => e.name.endsWith('[x]') && name.startsWith(e.name.slice(0, -3)));
  if (choice) return `(not an allowed type for ${choice.name}: ${choice.jsonNames.join(', ')})`;
  return '(not defined for this type in R4)';
}
