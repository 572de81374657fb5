// FHIR R4's XML representation checked on the spec's examples: every R4 example (and the Synthea and US
// Core examples) goes JSON → XML → JSON unchanged; HL7's own XML files read into their JSON twins and
// are written back element for element; and an independent implementation (the `fhir` package, which
// reads and writes R4 XML from its own copy of the definitions) reads our XML into the JSON and writes
// XML that we read into the JSON, but for its known deviations (knownDeviations below).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { Fhir } from 'fhir';
import { SaxesParser } from 'saxes';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { fhirXml } from '../src/fhir/xml/fhir-xml.js';
import { everyTypeAndEveryNth, fixturesDir } from './support/fixtures.js';
import { FULL } from './support/full-tests.js';

type Json = Record<string, unknown>;

const xml = fhirXml(loadR4Definitions());
const read = (text: string) => xml.read(text, 'The example')!;

function gzippedJson(path: string): Json {
  return JSON.parse(gunzipSync(readFileSync(path)).toString('utf8')) as Json;
}

function corpus(): { name: string; resource: Json }[] {
  const dir = fixturesDir();
  const all: { name: string; resource: Json }[] = [];
  const ndjson = gunzipSync(readFileSync(join(dir, 'r4-spec-examples', 'all-r4-examples.ndjson.gz'))).toString('utf8');
  for (const line of ndjson.split('\n')) {
    if (line.trim() === '') continue;
    const resource = JSON.parse(line) as Json;
    all.push({ name: `${String(resource.resourceType)}/${String(resource.id)}`, resource });
  }
  const folders: [string, (file: string) => Json][] = [
    [join(dir, 'r4-spec-examples', 'with-narrative'), (f) => JSON.parse(readFileSync(f, 'utf8')) as Json],
    [join(dir, 'us-core', 'examples-6.1.0'), (f) => JSON.parse(readFileSync(f, 'utf8')) as Json],
    [join(dir, 'synthea-r4-bundles'), gzippedJson],
  ];
  for (const [folder, load] of folders) {
    for (const file of readdirSync(folder).filter((f) => /\.json(\.gz)?$/.test(f))) {
      all.push({ name: file, resource: load(join(folder, file)) });
    }
  }
  return all;
}

const examples = corpus();

/**
 * An XHTML narrative as a list of its parts (elements with sorted attributes, text without the
 * whitespace-only runs between elements), for comparing narratives that differ only in how they were
 * serialised (entities, quotes, indentation).
 */
function canonicalXhtml(div: string): string {
  const parts: string[] = [];
  const parser = new SaxesParser({ xmlns: true });
  parser.on('opentag', (tag) => {
    const attributes = Object.values(tag.attributes)
      .map((a) => `${a.uri}|${a.local}=${a.value}`)
      .sort();
    parts.push(`<${tag.uri}|${tag.local} ${attributes.join(' ')}>`);
  });
  parser.on('closetag', () => parts.push('</>'));
  parser.on('text', (text) => {
    if (text.trim() !== '') parts.push(text);
  });
  parser.write(div).close();
  return parts.join('');
}

/** `value` with every narrative in canonical form (canonicalXhtml). */
function canonicalNarratives(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalNarratives);
  if (value === null || typeof value !== 'object') return value;
  const object: Json = {};
  for (const [key, child] of Object.entries(value)) {
    object[key] = key === 'div' && typeof child === 'string' ? canonicalXhtml(child) : canonicalNarratives(child);
  }
  return object;
}

/**
 * What the `fhir` package (4.12) gives that R4 JSON would not, undone so that the rest can be compared
 * exactly, each against the expected JSON:
 * - decimals as JSON strings ("1.5"), where R4 JSON has numbers (json.html#primitive);
 * - repeated primitives whose values are all absent (extensions only) as `[]` beside their `_name`, and
 *   the nulls that align values with their extensions dropped (`["a"]` for `["a", null]`);
 * - narratives re-serialised: whitespace between elements dropped, entities and quotes rewritten (the
 *   same XHTML, not the same text: compared by canonicalXhtml);
 * - XML comments kept as `fhir_comments` (DSTU2's JSON, not R4's).
 */
function knownDeviations(theirs: unknown, expected: unknown): unknown {
  if (Array.isArray(theirs)) {
    const reference = Array.isArray(expected) ? expected : [];
    if (reference.includes(null)) {
      const values = theirs.slice();
      return reference.map((item) => (item === null ? null : knownDeviations(values.shift(), item)));
    }
    return theirs.map((item, i) => knownDeviations(item, reference[i]));
  }
  if (typeof theirs === 'string' && typeof expected === 'number') return Number(theirs);
  if (typeof theirs === 'string' && typeof expected === 'string' && theirs.startsWith('<div')) {
    return canonicalXhtml(theirs) === canonicalXhtml(expected) ? expected : theirs;
  }
  if (theirs === null || typeof theirs !== 'object') return theirs;
  const reference = (expected ?? {}) as Json;
  const object: Json = {};
  for (const [key, child] of Object.entries(theirs)) {
    if (key === 'fhir_comments') continue;
    if (Array.isArray(child) && child.length === 0 && reference[key] === undefined) continue;
    const value = knownDeviations(child, reference[key]);
    // An element whose only content was a comment.
    if (isEmptyObject(value) && reference[key] === undefined) continue;
    object[key] = value;
  }
  return object;
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

/** Whether `value` holds a primitive with extensions and no value (`_active` without `active`). */
function hasValuelessPrimitive(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasValuelessPrimitive);
  if (value === null || typeof value !== 'object') return false;
  const object = value as Json;
  return Object.entries(object).some(
    ([key, child]) => (key.startsWith('_') && object[key.slice(1)] === undefined) || hasValuelessPrimitive(child),
  );
}

/**
 * What the `fhir` package's writer leaves out: repeated primitives that have extensions and no values
 * (`_event` without `event`), and so an element that held only them.
 */
function withoutValuelessRepeats(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutValuelessRepeats);
  if (value === null || typeof value !== 'object') return value;
  const object = value as Json;
  const result: Json = {};
  for (const [key, child] of Object.entries(object)) {
    if (key.startsWith('_') && Array.isArray(child) && object[key.slice(1)] === undefined) continue;
    const kept = withoutValuelessRepeats(child);
    // An element left with nothing is not written at all.
    if (!isEmptyObject(kept)) result[key] = kept;
  }
  return result;
}

/**
 * Why the `fhir` package's reader may fail on R4 XML, by what the XML holds: a decimal with an exponent
 * (`1e-22`, valid in R4), or a primitive with extensions and no `value` (a TypeError inside it).
 */
function theirReaderFailsOn(resource: Json, text: string, message: string): boolean {
  if (message.startsWith('Value should be a decimal number')) return /value="-?[0-9.]+[eE][-+]?[0-9]+"/.test(text);
  return hasValuelessPrimitive(resource) && message.includes("reading 'value'");
}

describe('FHIR XML: every example JSON → XML → JSON', () => {
  it(`gives back all ${examples.length} examples unchanged`, () => {
    expect(examples.length).toBeGreaterThan(2459 + 14 + 180 + 40);
    const changed: string[] = [];
    let bytes = 0;
    const started = performance.now();
    for (const { name, resource } of examples) {
      const text = xml.write(resource);
      bytes += text.length;
      if (!isDeepStrictEqual(read(text), resource)) changed.push(name);
    }
    expect(changed).toEqual([]);
    const ms = performance.now() - started;
    console.log(
      `[xml] ${examples.length} examples, ${(bytes / 1e6).toFixed(1)} MB of XML, written and read back in ${ms.toFixed(0)} ms`,
    );
  }, 120_000);

  it('writes pretty XML that reads back the same', () => {
    for (const { resource } of examples.filter((_, i) => i % 25 === 0)) {
      const pretty = xml.write(resource, true);
      expect(pretty.split('\n').length).toBeGreaterThan(2);
      expect(read(pretty)).toStrictEqual(resource);
    }
  });
});

describe("HL7's XML examples (fhir-test-cases)", () => {
  const dir = join(fixturesDir(), 'fhir-test-cases-r4-xml');
  const files = readdirSync(dir).filter((f) => f.endsWith('.xml'));

  const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

  /** An XML document as its elements and attributes, without comments, whitespace and xsi: attributes. */
  function elementTree(text: string): string[] {
    const parts: string[] = [];
    const parser = new SaxesParser({ xmlns: true });
    parser.on('opentag', (tag) => {
      const attributes = Object.values(tag.attributes)
        .filter((a) => a.prefix === '' && a.local !== 'xmlns')
        // A decimal's lexical form (1.00, 1.0e0) is not kept: the server holds FHIR JSON, whose numbers
        // are JavaScript's (docs/fhir.md).
        .map((a) => `${a.local}=${a.local === 'value' && DECIMAL.test(a.value) ? Number(a.value) : a.value}`)
        .sort();
      parts.push(`<${tag.uri}|${tag.local} ${attributes.join(' ')}>`);
    });
    parser.on('closetag', () => parts.push('</>'));
    parser.on('text', (t) => {
      if (t.trim() !== '') parts.push(t);
    });
    parser.write(text).close();
    return parts;
  }

  it('reads each into the JSON of the same example, where the folder has it', () => {
    const paired = files.filter((f) => files.length > 0 && readdirSync(dir).includes(f.replace(/\.xml$/, '.json')));
    expect(paired.length).toBe(4);
    for (const file of paired) {
      const json = JSON.parse(readFileSync(join(dir, file.replace(/\.xml$/, '.json')), 'utf8')) as Json;
      expect(read(readFileSync(join(dir, file), 'utf8')), file).toStrictEqual(json);
    }
  });

  it('writes what it read element for element as HL7 did: order, attributes, values, narrative', () => {
    expect(files.length).toBe(10);
    for (const file of files) {
      const original = readFileSync(join(dir, file), 'utf8');
      const ours = xml.write(read(original), true);
      expect(elementTree(ours), file).toEqual(elementTree(original));
    }
  });

  it('reads them as the fhir package does, but for its known deviations', () => {
    const fhir = new Fhir();
    for (const file of files) {
      const original = readFileSync(join(dir, file), 'utf8');
      const ours = read(original);
      let theirs: unknown;
      try {
        theirs = fhir.xmlToObj(original);
      } catch (error) {
        expect(theirReaderFailsOn(ours, original, (error as Error).message), file).toBe(true);
        continue;
      }
      expect(canonicalNarratives(knownDeviations(theirs, ours)), file).toStrictEqual(canonicalNarratives(ours));
    }
  });
});

describe('the fhir package, an independent implementation of R4 XML', () => {
  // Its converters take ~15 ms an example: a sample (every R4 resource type) in `npm test`, all with
  // AMBIENT_FULL_TESTS=1.
  const sample = FULL ? examples : everyTypeAndEveryNth(examples, ({ resource }) => String(resource.resourceType), 40);
  const fhir = new Fhir();

  it(`reads our XML of ${sample.length} examples into their JSON`, () => {
    const differ: string[] = [];
    let failed = 0;
    for (const { name, resource } of sample) {
      const text = xml.write(resource);
      let theirs: unknown;
      try {
        theirs = fhir.xmlToObj(text);
      } catch (error) {
        if (!theirReaderFailsOn(resource, text, (error as Error).message)) differ.push(`${name}: ${String(error)}`);
        failed++;
        continue;
      }
      const expected = canonicalNarratives(resource);
      if (!isDeepStrictEqual(canonicalNarratives(knownDeviations(theirs, resource)), expected)) differ.push(name);
    }
    expect(differ).toEqual([]);
    expect(failed).toBeLessThan(sample.length / 50);
  }, 120_000);

  it(`writes XML of ${sample.length} examples that we read into their JSON`, () => {
    const differ: string[] = [];
    for (const { name, resource } of sample) {
      const ours = read(fhir.objToXml(resource));
      if (!isDeepStrictEqual(canonicalNarratives(ours), canonicalNarratives(withoutValuelessRepeats(resource)))) {
        differ.push(name);
      }
    }
    expect(differ).toEqual([]);
  }, 120_000);
});
