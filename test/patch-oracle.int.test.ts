// JSON Patch is no oracle (issue 23, item 9), through HTTP on both databases: a caller who may update a
// type but not read it gets one answer for every patch that cannot be applied, whatever the stored
// resource holds, so its error texts tell nothing of what the resource holds. A caller who may read it
// still gets the reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { FHIR_JSON, JSON_PATCH } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { startRobustnessApp } from './support/robustness.js';
import type { TestApp } from './support/test-app.js';

describe.each(BACKENDS)('JSON Patch answers without r on %s', (backend) => {
  let t: TestApp;
  let everything: FhirClient;
  let updateOnly: FhirClient;
  let readUpdate: FhirClient;
  /** Two Patients that differ in everything the patches below touch. */
  let full: string;
  let empty: string;

  beforeAll(async () => {
    t = await startRobustnessApp(backend);
    everything = await t.client();
    updateOnly = await t.client('system/Patient.u');
    readUpdate = await t.client('system/Patient.ru');
    const create = async (resource: Record<string, unknown>) => {
      const res = await everything.post('/fhir/Patient', resource);
      expect(res.statusCode, res.body).toBe(201);
      return (res.json() as { id: string }).id;
    };
    full = await create({
      resourceType: 'Patient',
      active: true,
      name: [{ family: 'Secretfamily', given: ['Secretgiven'] }],
      deceasedDateTime: '2020-02-02',
      contact: [{ name: { family: 'Secretcontact' } }],
    });
    empty = await create({ resourceType: 'Patient' });
  });
  afterAll(async () => t?.close());

  const patch = (client: FhirClient, id: string, operations: unknown) =>
    client.patch(`/fhir/Patient/${id}`, operations, { 'content-type': JSON_PATCH });

  // Each fails on both Patients, for reasons that differ with what each holds.
  const FAILING: [string, unknown[]][] = [
    ['a path below a primitive', [{ op: 'add', path: '/active/x', value: 1 }]],
    ['a path below a string of a name', [{ op: 'add', path: '/name/0/family/x', value: 1 }]],
    ['an index past the end', [{ op: 'replace', path: '/name/5/given/0', value: 'x' }]],
    ['a member that is not there', [{ op: 'remove', path: '/name/0/prefix' }]],
    ['a result that is no valid Patient', [{ op: 'add', path: '/notAnElement', value: 1 }]],
    ['a result with a bad value', [{ op: 'replace', path: '/gender', value: 'not-a-gender' }]],
    ['a second deceased[x]', [{ op: 'add', path: '/deceasedBoolean', value: 'no' }]],
  ];

  it.each(FAILING)('answers %s with one 422, the same for every resource, naming nothing in it', async (_name, ops) => {
    const answers = await Promise.all([full, empty].map((id) => patch(updateOnly, id, ops)));
    for (const [i, res] of answers.entries()) {
      expect(res.statusCode, res.body).toBe(422);
      expect(res.headers['content-type']).toContain(FHIR_JSON);
      const body = res.body.replaceAll([full, empty][i], '<id>');
      expect(body).not.toMatch(/Secret|boolean|true|2020|deceased|family|given|contact|operation 0/);
    }
    expect(answers[0].body.replaceAll(full, '<id>')).toBe(answers[1].body.replaceAll(empty, '<id>'));
    expect(answers[0].json().issue[0].details.coding[0].code).toBe('patch-failed');
    // And nothing was written.
    const read = await everything.get(`/fhir/Patient/${full}`);
    expect(read.json().meta.versionId).toBe('1');
  });

  it('still explains a malformed patch (which says nothing of the resource), and the reason to a caller with r', async () => {
    const malformed = await patch(updateOnly, full, { op: 'add' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().issue[0].diagnostics).toContain('must be an array of operations');
    const withRead = await patch(readUpdate, full, [{ op: 'add', path: '/active/x', value: 1 }]);
    expect(withRead.statusCode).toBe(422);
    expect(withRead.json().issue[0].diagnostics).toContain('operation 0 (add /active/x)');
    const invalid = await patch(readUpdate, full, [{ op: 'add', path: '/notAnElement', value: 1 }]);
    expect(invalid.statusCode).toBe(401);
    expect(JSON.stringify(invalid.json().issue)).toContain('notAnElement');
  });

  it('applies a patch that does apply, without a body for a caller without r', async () => {
    const res = await patch(updateOnly, empty, [{ op: 'add', path: '/gender', value: 'other' }]);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
    const read = await everything.get(`/fhir/Patient/${empty}`);
    expect(read.json().gender).toBe('other');
  });
});
