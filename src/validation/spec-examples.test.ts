/**
 * Every official R4 example must validate, except the few in test/support/known-invalid-examples.ts that break R4's own rules.
 * Fixtures: test/fixtures/r4-spec-examples (see its README).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { fixturesDir } from '../../test/support/fixtures.js';
import { KNOWN_INVALID_EXAMPLES } from '../../test/support/known-invalid-examples.js';
import { validateResource } from './validate.js';

const registry = loadR4Definitions();
const examplesDir = join(fixturesDir(), 'r4-spec-examples');

interface Example {
  key: string;
  resource: Record<string, unknown>;
}

const NARRATIVE_PREFIX = 'with-narrative/';

function readAllExamples(): Example[] {
  const ndjson = gunzipSync(readFileSync(join(examplesDir, 'all-r4-examples.ndjson.gz'))).toString('utf8');
  return ndjson
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => {
      const resource = JSON.parse(line) as Record<string, unknown>;
      return { key: `${resource.resourceType}/${resource.id}`, resource };
    });
}

function errorSummary(resource: unknown): string[] {
  return validateResource(resource, registry)
    .filter((issue) => issue.severity === 'error')
    .map((issue) => issue.diagnostics);
}

describe('official R4 examples', () => {
  const examples = readAllExamples();
  const knownInvalid = new Map(KNOWN_INVALID_EXAMPLES.map((entry) => [entry.key, entry]));

  it('covers the whole example set', () => {
    expect(examples).toHaveLength(2459);
    expect(new Set(examples.map((e) => e.resource.resourceType)).size).toBe(141);
  });

  it('accepts every example except the known-invalid ones', () => {
    const rejected = examples
      .filter((example) => !knownInvalid.has(example.key))
      .map((example) => ({ key: example.key, errors: errorSummary(example.resource) }))
      .filter((result) => result.errors.length > 0);
    expect(rejected).toEqual([]);
  });

  it.each(KNOWN_INVALID_EXAMPLES)('rejects $key for the stated reason', (entry) => {
    const matches = entry.key.startsWith(NARRATIVE_PREFIX)
      ? [JSON.parse(readFileSync(join(examplesDir, entry.key), 'utf8'))]
      : examples.filter((example) => example.key === entry.key).map((example) => example.resource);
    expect(matches).toHaveLength(1);
    const issues = validateResource(matches[0], registry).filter((issue) => issue.severity === 'error');
    expect(issues.map((issue) => [issue.expression, issue.code])).toEqual([[entry.expression, entry.code]]);
  });

  it('accepts the examples that keep their XHTML narrative', () => {
    const dir = join(examplesDir, 'with-narrative');
    const results = readdirSync(dir)
      .filter((file) => file.endsWith('.json') && !knownInvalid.has(`${NARRATIVE_PREFIX}${file}`))
      .map((file) => ({ file, errors: errorSummary(JSON.parse(readFileSync(join(dir, file), 'utf8'))) }));
    expect(results.length).toBeGreaterThan(0);
    expect(results.filter((result) => result.errors.length > 0)).toEqual([]);
  });

  it('accepts the per-type example files', () => {
    const dir = join(examplesDir, 'by-type');
    const rejected: { file: string; errors: string[] }[] = [];
    for (const type of readdirSync(dir)) {
      for (const file of readdirSync(join(dir, type)).filter((f) => f.endsWith('.json'))) {
        const errors = errorSummary(JSON.parse(readFileSync(join(dir, type, file), 'utf8')));
        if (errors.length) rejected.push({ file: `${type}/${file}`, errors });
      }
    }
    expect(rejected).toEqual([]);
  });
});
