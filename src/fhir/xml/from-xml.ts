// FHIR R4 XML (https://hl7.org/fhir/R4/xml.html) → FHIR JSON, driven by the compiled R4 definitions, with
// the limits JSON bodies have (json-limits.ts). The XML is read by saxes, a strict XML 1.0 parser that
// expands only XML's five predefined entities and character references: a DOCTYPE (so every DTD,
// external entity and entity expansion) is refused outright. What is XML-specific (not well-formed, a
// DOCTYPE, another namespace, text where FHIR has `value` attributes, an attribute FHIR does not have) is
// a 400 here; an element the definitions do not know is carried into the JSON under its name, so that
// the validator refuses it with the same OperationOutcome a JSON body gets.
import { SaxesParser } from 'saxes';
import type { SaxesAttributeNS, SaxesTagNS } from 'saxes';
import { AppError } from '../../errors.js';
import { jsonDepth, MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../json-limits.js';
import type { ObjectShape, PropertyShape, ShapeCatalog } from '../../validation/shapes.js';
import { holdsResource, isAttribute, objectShapeOf } from './to-xml.js';
import { FHIR_NS, XHTML_NS } from './xml-text.js';

type JsonObject = Record<string, unknown>;

/** Deepest element nesting read: as deep as JSON may nest (a resource's XML never nests deeper than its JSON). */
export const MAX_XML_DEPTH = MAX_JSON_DEPTH;

const XMLNS_NS = 'http://www.w3.org/2000/xmlns/';
/** A JSON number's lexical form: FHIR's integer and decimal in XML are written the same way. */
const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

/** The child elements of one open element, gathered by name until it closes. */
interface Gathered {
  /** Values (null where only the companion exists) or objects. */
  items: unknown[];
  /** For primitives: each value's `id`/`extension` (the JSON `_name` companion), null when none. */
  companions?: (JsonObject | null)[];
  isArray: boolean;
}

interface Frame {
  /** The element's name (its JSON property name, or a resource's type). */
  readonly name: string;
  /** Undefined for an element the definitions do not know (carried under its name for the validator). */
  readonly shape?: ObjectShape;
  /** `resource`: named by its type. `wrapper`: holds one resource (contained, Bundle.entry.resource). */
  readonly kind: 'resource' | 'complex' | 'primitive' | 'wrapper' | 'unknown';
  /** The property this element is in its parent (undefined for the root and a wrapped resource). */
  readonly property?: PropertyShape;
  readonly object: JsonObject;
  /** Made when the first child closes: most elements have none. */
  children?: Map<string, Gathered>;
  value?: unknown;
  /** Where a primitive frame's `value` came from: its `value` attribute. */
  hasValue?: boolean;
  /** A wrapper's resource, once read. */
  wrapped?: JsonObject;
}

function invalid(what: string, message: string): AppError {
  return new AppError('invalid-xml', `${what} is not FHIR XML: ${message}`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export class FhirXmlReader {
  private readonly stack: Frame[] = [];
  private elements = 0;
  private result?: JsonObject;
  /** While inside the narrative's div: where its start tag began and how deep inside it the parser is. */
  private xhtml?: { start: number; depth: number; owner: Frame; prefixes: Set<string> };
  private readonly parser = new SaxesParser({ xmlns: true });
  private text = '';
  /** The shape of a primitive element: its `id` attribute and `extension` children. */
  private readonly element: ObjectShape;

  constructor(
    private readonly catalog: ShapeCatalog,
    private readonly what: string,
  ) {
    this.element = catalog.typeShape('Element')!;
    const parser = this.parser;
    parser.on('doctype', () => {
      throw invalid(what, 'a DOCTYPE is not allowed (no DTDs, no entity declarations)');
    });
    parser.on('xmldecl', (decl) => {
      if (decl.encoding !== undefined && !/^utf-?8$/i.test(decl.encoding)) {
        throw invalid(what, `FHIR XML is UTF-8; the declaration says ${decl.encoding.slice(0, 40)}`);
      }
    });
    parser.on('opentag', (tag) => this.open(tag as SaxesTagNS));
    parser.on('closetag', () => this.close());
    parser.on('text', (text) => this.characters(text));
    parser.on('cdata', (text) => this.characters(text));
  }

  /** The resource the XML holds, or undefined for an empty (or blank) body. */
  read(bytes: Uint8Array | string): JsonObject | undefined {
    try {
      this.text = typeof bytes === 'string' ? bytes : utf8.decode(bytes);
    } catch {
      throw invalid(this.what, 'not valid UTF-8');
    }
    if (this.text.trim() === '') return undefined;
    try {
      this.parser.write(this.text).close();
    } catch (error) {
      if (error instanceof AppError) throw error;
      throw new AppError(
        'invalid-xml',
        `${this.what} is not well-formed XML: ${(error as Error).message.slice(0, 200)}`,
      );
    }
    const result = this.result!;
    if (jsonDepth(result, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
      throw invalid(this.what, `its resource nests deeper than ${MAX_JSON_DEPTH} levels as JSON`);
    }
    return result;
  }

  private open(tag: SaxesTagNS): void {
    if (++this.elements > MAX_JSON_VALUES) {
      throw new AppError(
        'payload-too-large',
        `${this.what} holds more than ${MAX_JSON_VALUES.toLocaleString('en-US')} XML elements, the most this server reads`,
      );
    }
    if (this.stack.length + (this.xhtml?.depth ?? 0) >= MAX_XML_DEPTH) {
      throw invalid(this.what, `it is nested deeper than ${MAX_XML_DEPTH} levels`);
    }
    if (this.xhtml) {
      this.xhtml.depth++;
      this.assertSelfContained(tag);
      return;
    }
    const parent = this.stack.at(-1);
    if (tag.uri === XHTML_NS && tag.local === 'div' && parent && this.isNarrativeDiv(parent)) {
      if (tag.prefix !== '' || tag.ns[''] !== XHTML_NS) {
        throw invalid(this.what, `the narrative must be a <div xmlns="${XHTML_NS}"> element`);
      }
      this.xhtml = {
        start: this.text.lastIndexOf('<', this.parser.position - 1),
        depth: 1,
        owner: parent,
        prefixes: new Set(),
      };
      this.assertSelfContained(tag);
      return;
    }
    if (tag.uri !== FHIR_NS) {
      throw invalid(this.what, `<${tag.name.slice(0, 64)}> is not in the FHIR namespace (${FHIR_NS})`);
    }
    const frame = this.frameFor(tag.local, parent);
    this.attributes(frame, tag.attributes as Record<string, SaxesAttributeNS>, tag.local);
    this.stack.push(frame);
  }

  /**
   * The div goes into JSON as its own text, so every namespace prefix in it must be declared inside it
   * (not on the resource around it). Declarations anywhere in the div count: a document that uses one
   * outside its scope was not well-formed to begin with.
   */
  private assertSelfContained(tag: SaxesTagNS): void {
    const prefixes = this.xhtml!.prefixes;
    for (const prefix of Object.keys(tag.ns)) prefixes.add(prefix);
    const used = [
      tag.prefix,
      ...Object.values(tag.attributes as Record<string, SaxesAttributeNS>).map((a) => a.prefix),
    ];
    for (const prefix of used) {
      if (prefix === '' || prefix === 'xml' || prefix === 'xmlns' || prefixes.has(prefix)) continue;
      throw invalid(
        this.what,
        `the narrative uses the namespace prefix ${prefix.slice(0, 64)} declared outside its div`,
      );
    }
  }

  private isNarrativeDiv(parent: Frame): boolean {
    return parent.shape?.properties.get('div')?.type.code === 'xhtml';
  }

  private frameFor(name: string, parent: Frame | undefined): Frame {
    if (!parent || parent.kind === 'wrapper') {
      if (parent?.wrapped) throw invalid(this.what, `<${parent.name}> holds more than one resource`);
      const shape = this.catalog.typeShape(name);
      return {
        name,
        shape: shape?.isResource ? shape : undefined,
        kind: 'resource',
        object: { resourceType: name },
      };
    }
    if (parent.kind === 'primitive' && name !== 'extension') {
      throw invalid(this.what, `<${parent.name}> is a primitive: it holds only extensions, not <${name}>`);
    }
    const property = parent.shape?.properties.get(name);
    if (parent.shape && isAttribute(parent.shape, name)) {
      throw invalid(this.what, `${name} of <${parent.name}> is an attribute in FHIR XML, not an element`);
    }
    if (!property) return { name, kind: 'unknown', object: {} };
    if (property.kind === 'primitive') {
      if (property.type.code === 'xhtml') {
        throw invalid(this.what, `<${name}> must be an XHTML <div> (namespace ${XHTML_NS})`);
      }
      return { name, shape: this.element, kind: 'primitive', property, object: {} };
    }
    if (holdsResource(property)) return { name, kind: 'wrapper', property, object: {} };
    return { name, shape: objectShapeOf(property), kind: 'complex', property, object: {} };
  }

  private attributes(frame: Frame, attributes: Record<string, SaxesAttributeNS>, element: string): void {
    for (const attribute of Object.values(attributes)) {
      // Namespace declarations, and attributes of other vocabularies (xsi:schemaLocation), are not FHIR's.
      if (attribute.uri === XMLNS_NS || attribute.prefix !== '') continue;
      const { local, value } = attribute;
      if (local === 'value' && (frame.kind === 'primitive' || frame.kind === 'unknown')) {
        frame.value = frame.kind === 'primitive' ? this.primitiveValue(frame.property!, value) : value;
        frame.hasValue = true;
      } else if (frame.kind === 'unknown' || (frame.shape && local !== 'value' && isAttribute(frame.shape, local))) {
        frame.object[local] = value;
      } else {
        throw invalid(this.what, `<${element}> has an attribute ${local.slice(0, 64)} that FHIR does not define`);
      }
    }
  }

  /** A `value` attribute as its JSON value: FHIR's booleans and numbers as JSON's, when they are valid. */
  private primitiveValue(property: PropertyShape, value: string): unknown {
    const json = this.catalog.registry.primitiveType(property.type.code)?.json;
    // Anything else stays a string, which the validator then refuses at this element as a JSON body's would be.
    if (json === 'boolean') return value === 'true' ? true : value === 'false' ? false : value;
    if (json === 'number') return JSON_NUMBER.test(value) ? Number(value) : value;
    return value;
  }

  private characters(text: string): void {
    if (this.xhtml || this.stack.length === 0 || text.trim() === '') return;
    const name = this.stack.at(-1)!.name;
    throw invalid(this.what, `<${name}> holds text; FHIR XML carries values in value attributes`);
  }

  private close(): void {
    const xhtml = this.xhtml;
    if (xhtml) {
      if (--xhtml.depth > 0) return;
      this.xhtml = undefined;
      gather(xhtml.owner, 'div', this.text.slice(xhtml.start, this.parser.position), null, false);
      return;
    }
    const frame = this.stack.pop()!;
    const value = this.finish(frame);
    const parent = this.stack.at(-1);
    if (!parent) {
      this.result = value as JsonObject;
    } else if (parent.kind === 'wrapper') {
      parent.wrapped = value as JsonObject;
    } else if (frame.kind === 'primitive') {
      const companion = Object.keys(frame.object).length > 0 ? frame.object : null;
      gather(parent, frame.name, frame.hasValue ? frame.value : null, companion, frame.property!.element.isArray);
    } else {
      gather(parent, frame.name, value, undefined, frame.property?.element.isArray ?? false);
    }
  }

  /** The element as JSON once all its children are in. */
  private finish(frame: Frame): unknown {
    if (frame.kind === 'wrapper') {
      if (!frame.wrapped) throw invalid(this.what, `<${frame.name}> must hold a resource`);
      return frame.wrapped;
    }
    const object = frame.object;
    for (const [name, gathered] of frame.children ?? []) {
      const many = gathered.isArray || gathered.items.length > 1;
      const { items, companions } = gathered;
      if (!companions) {
        object[name] = many ? items : items[0];
        continue;
      }
      if (items.some((item) => item !== null)) object[name] = many ? items : items[0];
      if (companions.some((companion) => companion !== null)) object[`_${name}`] = many ? companions : companions[0];
    }
    if (frame.kind === 'unknown' && frame.hasValue) {
      // Carried for the validator to name: a bare value, or the value beside the element's children.
      if (Object.keys(object).length === 0) return frame.value;
      object.value = frame.value;
    }
    return object;
  }
}

function gather(
  frame: Frame,
  name: string,
  item: unknown,
  companion: JsonObject | null | undefined,
  isArray: boolean,
): void {
  const children = (frame.children ??= new Map());
  let gathered = children.get(name);
  if (!gathered) {
    gathered = { items: [], isArray, ...(companion === undefined ? {} : { companions: [] }) };
    children.set(name, gathered);
  }
  gathered.items.push(item);
  if (companion !== undefined) gathered.companions?.push(companion);
}

/**
 * The resource in FHIR XML `bytes` as FHIR JSON, or undefined when they are blank. Refuses (AppError)
 * what is not well-formed UTF-8 XML in FHIR's namespace, a DOCTYPE, more than MAX_JSON_VALUES elements
 * (413) and nesting deeper than MAX_XML_DEPTH; `what` names the input in messages.
 */
export function resourceFromXml(
  bytes: Uint8Array | string,
  catalog: ShapeCatalog,
  what: string,
): JsonObject | undefined {
  return new FhirXmlReader(catalog, what).read(bytes);
}

/** Stops the parser at the root element: nothing after it is read. */
class RootFound extends Error {}

/**
 * The root element of XML `bytes` (its local name and namespace), read no further; undefined when the
 * bytes are not UTF-8, not well-formed up to it, or carry a DOCTYPE (then they are no FHIR resource).
 */
export function xmlRootElement(bytes: Uint8Array): { local: string; uri: string } | undefined {
  let root: { local: string; uri: string } | undefined;
  const parser = new SaxesParser({ xmlns: true, position: false });
  parser.on('doctype', () => {
    throw new RootFound();
  });
  parser.on('opentag', (tag) => {
    root = { local: tag.local, uri: tag.uri };
    throw new RootFound();
  });
  try {
    parser.write(utf8.decode(bytes)).close();
  } catch {
    // RootFound, or what a parser says of bytes that are not XML: either way the answer is known.
  }
  return root;
}
