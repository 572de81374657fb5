// FHIR JSON → FHIR R4 XML (https://hl7.org/fhir/R4/xml.html), driven by the compiled R4 definitions:
// elements in the order the definitions give (not the JSON's key order), primitives as `value`
// attributes with their `_name` companions' `id` and `extension`, elements' `id` and an extension's
// `url` as attributes, resources named by their type (wrapped where a resource sits inside another),
// and the narrative's XHTML as XML.
import { SaxesParser } from 'saxes';
import type { ObjectShape, PropertyShape, ShapeCatalog } from '../../validation/shapes.js';
import { escapeAttribute, escapeText, FHIR_NS, XHTML_NS } from './xml-text.js';

type JsonObject = Record<string, unknown>;

/** A shape's JSON property names in the order their elements are written in XML. */
const orders = new WeakMap<ObjectShape, ReadonlyMap<string, number>>();

export function elementOrder(shape: ObjectShape): ReadonlyMap<string, number> {
  let order = orders.get(shape);
  if (!order) {
    const built = new Map<string, number>();
    for (const element of shape.elements) for (const name of element.jsonNames) built.set(name, built.size);
    orders.set(shape, built);
    order = built;
  }
  return order;
}

/** `id` of an element (not of a resource) and an extension's `url` are XML attributes. */
export function isAttribute(shape: ObjectShape, name: string): boolean {
  return (name === 'id' && !shape.isResource) || (name === 'url' && shape.fhirType === 'Extension');
}

const objectShapes = new WeakMap<PropertyShape, ObjectShape>();

/** The shape of a complex property's values (memoised: the catalog builds a key string per lookup). */
export function objectShapeOf(property: PropertyShape): ObjectShape {
  let shape = objectShapes.get(property);
  if (!shape) {
    shape = property.objectShape!();
    objectShapes.set(property, shape);
  }
  return shape;
}

/** A property holding a resource: `Resource` (contained, Bundle.entry.resource) or a named type (Bundle.entry.response.outcome). */
export function holdsResource(property: PropertyShape): boolean {
  return property.kind === 'resource' || (property.kind === 'complex' && objectShapeOf(property).isResource);
}

/** A JSON value the definitions do not expect here: the server wrote something that is not R4. */
function notR4(path: string, what: string): Error {
  return new Error(`Cannot write ${path} as FHIR XML: ${what}`);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function primitiveText(value: unknown, path: string): string {
  if (typeof value === 'string') return value;
  // A JSON number's shortest form is also a valid FHIR decimal or integer in XML.
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw notR4(path, `expected a primitive value, found ${typeof value}`);
}

/**
 * The narrative's XHTML as it goes into the XML: as it is when it is one well-formed `<div>` in the XHTML
 * namespace (a `<div>` that names no namespace gets it), or else, since the JSON side only checks that
 * it starts with `<div`, as the text of an empty div, escaped, so that the document stays well-formed.
 */
export function narrativeXhtml(div: string): string {
  const trimmed = div.trim();
  let root: { local: string; uri: string; prefix: string } | undefined;
  let wellFormed = true;
  const parser = new SaxesParser({ xmlns: true, position: false });
  parser.on('doctype', () => (wellFormed = false));
  parser.on('opentag', (tag) => (root ??= { local: tag.local, uri: tag.uri, prefix: tag.prefix }));
  parser.on('error', () => (wellFormed = false));
  try {
    parser.write(trimmed).close();
  } catch {
    wellFormed = false;
  }
  // Only the element itself: an XML declaration or a DOCTYPE before it cannot sit inside a document.
  if (wellFormed && trimmed.startsWith('<div') && root?.local === 'div' && root.prefix === '') {
    if (root.uri === XHTML_NS) return trimmed;
    if (root.uri === '') return `<div xmlns="${XHTML_NS}"${trimmed.slice('<div'.length)}`;
  }
  return `<div xmlns="${XHTML_NS}">${escapeText(div)}</div>`;
}

class XmlWriter {
  out = '';
  /** The shape of a primitive's `_name` companion: `id` and `extension`. */
  private readonly element: ObjectShape;

  constructor(
    private readonly catalog: ShapeCatalog,
    private readonly pretty: boolean,
  ) {
    this.element = catalog.typeShape('Element')!;
  }

  private newline(depth: number): string {
    return this.pretty ? `\n${'  '.repeat(depth)}` : '';
  }

  resource(resource: unknown, depth: number, path: string): void {
    if (!isObject(resource) || typeof resource.resourceType !== 'string') throw notR4(path, 'not a resource');
    const type = resource.resourceType;
    const shape = this.catalog.typeShape(type);
    if (!shape?.isResource) throw notR4(path, `${type} is not an R4 resource type`);
    const names = this.childNames(resource, shape, path || type);
    this.out += `<${type}${depth === 0 ? ` xmlns="${FHIR_NS}"` : ''}`;
    this.close(type, resource, shape, names, depth, path || type);
  }

  /** Ends the start tag, then the children and the end tag, or `/>` when there are none. */
  private close(name: string, value: JsonObject, shape: ObjectShape, names: string[], depth: number, path: string) {
    if (names.length === 0) {
      this.out += '/>';
      return;
    }
    this.out += '>';
    for (const child of names) {
      this.property(child, value, shape.properties.get(child)!, depth + 1, `${path}.${child}`);
    }
    this.out += `${this.newline(depth)}</${name}>`;
  }

  /** An element of a complex type or a backbone element, with its attributes and children. */
  private complex(name: string, value: unknown, shape: ObjectShape, depth: number, path: string): void {
    if (!isObject(value)) throw notR4(path, 'expected a JSON object');
    let attributes = '';
    if (value.id !== undefined) attributes += ` id="${escapeAttribute(primitiveText(value.id, `${path}.id`))}"`;
    if (shape.fhirType === 'Extension' && value.url !== undefined) {
      attributes += ` url="${escapeAttribute(primitiveText(value.url, `${path}.url`))}"`;
    }
    const names = this.childNames(value, shape, path);
    this.out += `${this.newline(depth)}<${name}${attributes}`;
    this.close(name, value, shape, names, depth, path);
  }

  /** The names of the object's child elements, in definition order. */
  private childNames(value: JsonObject, shape: ObjectShape, path: string): string[] {
    const order = elementOrder(shape);
    const names: [number, string][] = [];
    for (const key of Object.keys(value)) {
      if (key === 'resourceType' && shape.isResource) continue;
      const name = key.startsWith('_') ? key.slice(1) : key;
      const position = order.get(name);
      if (position === undefined) throw notR4(`${path}.${key}`, 'not an element of this type');
      if (isAttribute(shape, name)) continue;
      // A primitive and its `_name` companion are one element: written once.
      if (name !== key && value[name] !== undefined) continue;
      names.push([position, name]);
    }
    return names.sort((a, b) => a[0] - b[0]).map(([, name]) => name);
  }

  private property(name: string, owner: JsonObject, property: PropertyShape, depth: number, path: string): void {
    const value = owner[name];
    if (property.kind === 'primitive') {
      if (property.type.code === 'xhtml') {
        this.out += `${this.newline(depth)}${narrativeXhtml(primitiveText(value, path))}`;
        return;
      }
      this.primitives(name, value, owner[`_${name}`], depth, path);
      return;
    }
    const items = Array.isArray(value) ? value : [value];
    items.forEach((item, i) => {
      const itemPath = Array.isArray(value) ? `${path}[${i}]` : path;
      if (holdsResource(property)) {
        this.out += `${this.newline(depth)}<${name}>${this.newline(depth + 1)}`;
        this.resource(item, depth + 1, itemPath);
        this.out += `${this.newline(depth)}</${name}>`;
      } else {
        this.complex(name, item, objectShapeOf(property), depth, itemPath);
      }
    });
  }

  /** One element per value; `values` and `companions` (`_name`) are aligned arrays, or single values. */
  private primitives(name: string, values: unknown, companions: unknown, depth: number, path: string): void {
    if (!Array.isArray(values) && !Array.isArray(companions)) {
      this.primitive(name, values, companions, depth, path);
      return;
    }
    const valueList = Array.isArray(values) ? values : [];
    const companionList = Array.isArray(companions) ? companions : [];
    const length = Math.max(valueList.length, companionList.length);
    for (let i = 0; i < length; i++) this.primitive(name, valueList[i], companionList[i], depth, `${path}[${i}]`);
  }

  private primitive(name: string, value: unknown, companion: unknown, depth: number, path: string): void {
    const hasValue = value !== undefined && value !== null;
    const hasCompanion = companion !== undefined && companion !== null;
    if (!hasValue && !hasCompanion) return;
    if (!hasCompanion) {
      this.out += `${this.newline(depth)}<${name} value="${escapeAttribute(primitiveText(value, path))}"/>`;
      return;
    }
    const element = this.element;
    if (!isObject(companion)) throw notR4(`${path}`, '_ companion is not an object');
    let attributes = '';
    if (companion.id !== undefined) {
      attributes += ` id="${escapeAttribute(primitiveText(companion.id, `${path}.id`))}"`;
    }
    if (hasValue) attributes += ` value="${escapeAttribute(primitiveText(value, path))}"`;
    const names = this.childNames(companion, element, path);
    this.out += `${this.newline(depth)}<${name}${attributes}`;
    this.close(name, companion, element, names, depth, path);
  }
}

/**
 * A FHIR resource (JSON, as parsed) in FHIR R4 XML, with the XML declaration; `pretty` indents. Throws a
 * plain Error (a bug: the server answers only R4 resources) when the JSON is not R4.
 */
export function resourceToXml(resource: JsonObject, catalog: ShapeCatalog, { pretty = false } = {}): string {
  const writer = new XmlWriter(catalog, pretty);
  writer.out = `<?xml version="1.0" encoding="UTF-8"?>${pretty ? '\n' : ''}`;
  writer.resource(resource, 0, '');
  return writer.out;
}
