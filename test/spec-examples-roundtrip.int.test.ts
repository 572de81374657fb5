// Every official R4 example is accepted on create and reads back equal apart from id and meta
// (a validator that rejects the spec's own examples is wrong). The few that break R4's rules are in
// test/support/known-invalid-examples.ts and must be refused, naming the rule.
// `npm test` runs a sample on SQLite (every type, every 10th example and every known-invalid one: the
// validator meets the whole corpus in src/validation/spec-examples.test.ts); `npm run test:full` runs the
// whole corpus on both databases.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendsQuickOn } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { everyTypeAndEveryNth, fixturesDir } from './support/fixtures.js';
import { FULL } from './support/full-tests.js';
import { KNOWN_INVALID_EXAMPLES } from './support/known-invalid-examples.js';
import { FHIR_JSON } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

type Resource = { resourceType: string; id?: string; meta?: Record<string, unknown> } & Record<string, unknown>;

const examples: Resource[] = gunzipSync(
  readFileSync(join(fixturesDir(), 'r4-spec-examples', 'all-r4-examples.ndjson.gz')),
)
  .toString('utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line) as Resource);

/**
 * Valid R4, refused by this server's default configuration: a rest-hook Subscription may only name an
 * endpoint under AMBIENT_SUBSCRIPTION_ENDPOINTS, unset here (and these examples' hosts are not ours to call).
 */
const REFUSED_BY_DEFAULT = [
  { key: 'Subscription/example', expression: 'Subscription.channel.endpoint' },
  { key: 'Subscription/example-error', expression: 'Subscription.channel.endpoint' },
];

const knownInvalid = new Map([...KNOWN_INVALID_EXAMPLES, ...REFUSED_BY_DEFAULT].map((e) => [e.key, e]));

/** The example as the server should give it back: the same, but for id and the server's meta fields. */
function withoutServerFields(resource: Resource): Resource {
  const { id: _id, meta, ...rest } = resource;
  const { versionId: _v, lastUpdated: _l, ...clientMeta } = meta ?? {};
  return Object.keys(clientMeta).length > 0 ? { ...rest, meta: clientMeta } : rest;
}

const keyOf = (example: Resource) => `${example.resourceType}/${example.id}`;
const quickSample = new Set(everyTypeAndEveryNth(examples, (example) => example.resourceType, 10));
const sample = FULL ? examples : examples.filter((e) => quickSample.has(e) || knownInvalid.has(keyOf(e)));

describe.each(backendsQuickOn('sqlite'))('the %s store accepts and returns every R4 example', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  it(`creates and reads back ${sample.length} of the ${examples.length} examples`, async () => {
    expect(examples.length).toBe(2459);
    const failures: string[] = [];
    let accepted = 0;
    for (const example of sample) {
      const key = keyOf(example);
      const res = await fhir.post(`/fhir/${example.resourceType}`, example);
      const expectedInvalid = knownInvalid.get(key);
      if (expectedInvalid) {
        const expressions =
          res.statusCode === 401 ? res.json().issue.flatMap((i: { expression?: string[] }) => i.expression ?? []) : [];
        if (!expressions.includes(expectedInvalid.expression))
          failures.push(`${key}: expected refusal at ${expectedInvalid.expression}, got ${res.statusCode}`);
        continue;
      }
      if (res.statusCode !== 201) {
        failures.push(`${key}: ${res.statusCode} ${res.body.slice(0, 300)}`);
        continue;
      }
      // As FHIR JSON: a Binary is otherwise answered as its raw content.
      const read = await fhir.get(`/fhir/${example.resourceType}/${res.json().id}`, { accept: FHIR_JSON });
      expect(withoutServerFields(read.json())).toEqual(withoutServerFields(example));
      accepted++;
    }
    expect(failures).toEqual([]);
    expect(accepted).toBe(
      sample.length - [...knownInvalid.keys()].filter((k) => !k.startsWith('with-narrative/')).length,
    );
    // The full run's 2,459 creates and reads: ~35 s on an idle CI machine, past 60 s on a loaded one.
  }, 180_000);
});
