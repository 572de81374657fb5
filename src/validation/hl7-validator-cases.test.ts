/**
 * Our verdicts against the HL7 Java reference validator's expected outcomes, on the fhir-test-cases validator
 * cases that concern base-R4 structure: cardinality, types and formats, unknown elements, ids, invariants, JSON
 * syntax. Cases that need profiles, terminology servers, extension definitions, bundle reference resolution or
 * validator options are out of scope. Fixtures: test/fixtures/fhir-test-cases-validator-r4 (see its README).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { fixturesDir } from '../../test/support/fixtures.js';
import { KNOWN_DISAGREEMENTS } from '../../test/support/known-disagreements.js';
import { validateResource } from './validate.js';

interface IndexEntry {
  name: string;
  file: string;
  format: string;
  expectedValid: boolean;
  errorCategories: string[];
}

interface ManifestEntry {
  name: string;
  [option: string]: unknown;
}

/** Error categories (index.json's tags) that a base-R4 structural validator is expected to find. */
const STRUCTURAL_CATEGORIES = new Set([
  'cardinality',
  'unknown-element',
  'datatype-format',
  'resource-id',
  'invariant',
  'json-syntax',
]);

/** Manifest options that switch on checks beyond the base spec, or switch base checks off. */
const OUT_OF_SCOPE_OPTIONS = [
  'allow-comments',
  'validateContains',
  'noHtmlInMarkdown',
  'security-checks',
  'no-experimental-content',
];

const casesDir = join(fixturesDir(), 'fhir-test-cases-validator-r4');
const registry = loadR4Definitions();

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(join(casesDir, file), 'utf8')) as T;
}

function inScope(entry: IndexEntry, manifest: ManifestEntry | undefined): boolean {
  if (entry.format !== 'json' && entry.format !== 'ndjson') return false;
  if (!entry.errorCategories.every((category) => STRUCTURAL_CATEGORIES.has(category))) return false;
  return !OUT_OF_SCOPE_OPTIONS.some((option) => manifest?.[option] !== undefined);
}

/**
 * Our verdict, as the server would give it: text that is not JSON is rejected before validation (400), so it counts
 * as invalid here too. A UTF-8 byte order mark is allowed, as JSON parsers on the wire accept it.
 */
function ourErrors(entry: IndexEntry): string[] {
  const text = readFileSync(join(casesDir, entry.file), 'utf8').replace(/^\uFEFF/, '');
  const documents = entry.format === 'ndjson' ? text.split('\n').filter((line) => line.trim()) : [text];
  const errors: string[] = [];
  for (const document of documents) {
    let resource: unknown;
    try {
      resource = JSON.parse(document);
    } catch (err) {
      errors.push(`not JSON: ${(err as Error).message}`);
      continue;
    }
    for (const issue of validateResource(resource, registry)) {
      if (issue.severity === 'error') errors.push(issue.diagnostics);
    }
  }
  return errors;
}

describe('HL7 validator test cases (R4, base structure)', () => {
  const index = readJson<IndexEntry[]>('index.json');
  const manifest = readJson<{ 'test-cases': ManifestEntry[] }>('manifest-r4-subset.json')['test-cases'];
  const manifestByName = new Map(manifest.map((entry) => [entry.name, entry]));
  const cases = index.filter((entry) => inScope(entry, manifestByName.get(entry.name)));
  const knownDisagreements = new Map(KNOWN_DISAGREEMENTS.map((d) => [d.name, d]));

  it('selects the structural cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    for (const disagreement of KNOWN_DISAGREEMENTS) expect(cases.map((c) => c.name)).toContain(disagreement.name);
  });

  it.each(cases.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
    const errors = ourErrors(entry);
    const weSayValid = errors.length === 0;
    const known = knownDisagreements.get(entry.name);
    if (known) {
      expect(known.expected).toBe(entry.expectedValid ? 'valid' : 'invalid');
      expect(weSayValid, `listed as a known disagreement: ${known.reason}`).toBe(!entry.expectedValid);
    } else {
      expect({ valid: weSayValid, errors }).toEqual({
        valid: entry.expectedValid,
        errors: entry.expectedValid ? [] : expect.arrayContaining([expect.any(String)]),
      });
    }
  });
});
