// FHIR R4's XML representation (https://hl7.org/fhir/R4/xml.html), both ways, from the compiled R4
// definitions: one codec per set of definitions, its shapes built as types are first met.
import type { R4Registry } from '../../definitions/registry.js';
import { shapeCatalog } from '../../validation/shapes.js';
import type { ShapeCatalog } from '../../validation/shapes.js';
import { resourceFromXml, xmlRootElement } from './from-xml.js';
import { resourceToXml } from './to-xml.js';
import { FHIR_NS } from './xml-text.js';

type JsonObject = Record<string, unknown>;

export class FhirXml {
  constructor(private readonly catalog: ShapeCatalog) {}

  /** A resource (parsed, or as stored JSON text) in FHIR XML; `pretty` indents. */
  write(resource: JsonObject | string, pretty = false): string {
    const parsed = typeof resource === 'string' ? (JSON.parse(resource) as JsonObject) : resource;
    return resourceToXml(parsed, this.catalog, { pretty });
  }

  /**
   * The resource in FHIR XML `bytes` as FHIR JSON (undefined when blank), under the limits of a JSON
   * body; 4xx AppErrors name the input as `what`.
   */
  read(bytes: Uint8Array | string, what: string): JsonObject | undefined {
    return resourceFromXml(bytes, this.catalog, what);
  }

  /** Whether XML `bytes` are a FHIR resource of `type` (their root element), without reading the rest. */
  isResourceOf(bytes: Uint8Array, type: string): boolean {
    const root = xmlRootElement(bytes);
    return root?.uri === FHIR_NS && root.local === type;
  }
}

const codecs = new WeakMap<R4Registry, FhirXml>();

export function fhirXml(registry: R4Registry): FhirXml {
  let codec = codecs.get(registry);
  if (!codec) {
    codec = new FhirXml(shapeCatalog(registry));
    codecs.set(registry, codec);
  }
  return codec;
}
