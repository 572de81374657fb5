// A stored content that does not parse, or names another resource (written by hand into the database, a
// disk fault), is never served as the resource (issue 23, item 12): read and vread answer 500 with an
// OperationOutcome `exception` (code stored-content-corrupt), on both databases, and the log line says
// which resource without quoting its content.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { FHIR_JSON } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

/** In every corrupt content: it must reach neither the client nor the log. */
const MARKER = 'Corruptmarkerfamily';

describe.each(BACKENDS)('corrupt stored content on %s', (backend) => {
  let t: TestApp;
  let admin: SqlDatabase;
  let fhir: FhirClient;
  const logLines: string[] = [];

  beforeAll(async () => {
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString());
        done();
      },
    });
    t = await startTestApp(backend, {}, { logger: pino({ level: 'info' }, stream) });
    admin = openDatabase(t.database.url);
    fhir = await t.client();
  });
  afterAll(async () => {
    await admin?.close();
    await t?.close();
  });

  const get = (url: string, accept = FHIR_JSON) => fhir.get(url, { accept });

  const stored = async (resource: { resourceType: string; [k: string]: unknown }) => {
    const res = await fhir.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  };

  /** Overwrites the stored text of the current version and of its history row, as a hand edit would. */
  const corrupt = async (type: string, id: string, content: string) => {
    await admin.execute('UPDATE resource SET content = ? WHERE type = ? AND id = ?', [content, type, id]);
    await admin.execute('UPDATE resource_history SET content = ? WHERE type = ? AND id = ?', [content, type, id]);
  };

  const expectStorageError = (
    res: { statusCode: number; body: string; headers: Record<string, unknown> },
    what: string,
  ) => {
    expect(res.statusCode, `${what}: ${res.body.slice(0, 300)}`).toBe(500);
    expect(res.headers['content-type'], what).toContain(FHIR_JSON);
    const outcome = JSON.parse(res.body) as {
      resourceType: string;
      issue: { code: string; details: { coding: { code: string }[] } }[];
    };
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].code).toBe('exception');
    expect(outcome.issue[0].details.coding[0].code).toBe('stored-content-corrupt');
    expect(res.body).not.toContain(MARKER);
  };

  it.each([
    ['text cut short', (id: string) => `{"resourceType":"Patient","id":"${id}","name":[{"family":"${MARKER}"`],
    ['not JSON at all', () => `${MARKER} <html>`],
    ['JSON that is no object', () => `["${MARKER}"]`],
    [
      'another resource type',
      (id: string) => `{"resourceType":"Observation","id":"${id}","note":[{"text":"${MARKER}"}]}`,
    ],
    ['another id', () => `{"resourceType":"Patient","id":"someone-else","name":[{"family":"${MARKER}"}]}`],
  ])(
    'answers a read and a vread of %s with 500 stored-content-corrupt, logged without the content',
    async (what, content) => {
      const id = await stored({ resourceType: 'Patient', active: true });
      await corrupt('Patient', id, content(id));
      const before = logLines.length;
      expectStorageError(await get(`/fhir/Patient/${id}`), `read of ${what}`);
      expectStorageError(await get(`/fhir/Patient/${id}?_pretty=true`), `pretty read of ${what}`);
      expectStorageError(await get(`/fhir/Patient/${id}/_history/1`), `vread of ${what}`);
      const logged = logLines.slice(before).join('');
      expect(logged).toContain(`Patient/${id}`);
      expect(logged).not.toContain(MARKER);
    },
  );

  it('answers a raw Binary read of a corrupt Binary the same way', async () => {
    const id = await stored({ resourceType: 'Binary', contentType: 'text/plain', data: 'aGVsbG8=' });
    await corrupt('Binary', id, `{"resourceType":"Binary","id":"${id}","data":"${MARKER}`);
    expectStorageError(await get(`/fhir/Binary/${id}`, 'text/plain'), 'raw Binary read');
    expectStorageError(await get(`/fhir/Binary/${id}`), 'Binary read as FHIR JSON');
    // One whose securityContext would be read first (to decide who may read it): the same answer.
    await corrupt(
      'Binary',
      id,
      `{"resourceType":"Binary","id":"${id}","securityContext":{"reference":"Patient/${MARKER}`,
    );
    expectStorageError(await get(`/fhir/Binary/${id}`, 'text/plain'), 'raw Binary read with a securityContext');
    expectStorageError(await get(`/fhir/Binary/${id}/_history/1`), 'Binary vread with a securityContext');
  });

  it('still serves what is intact, byte for byte', async () => {
    const id = await stored({ resourceType: 'Patient', name: [{ family: 'Intact' }] });
    const res = await get(`/fhir/Patient/${id}`);
    expect(res.statusCode).toBe(200);
    const [row] = await admin.query<{ content: string }>('SELECT content FROM resource WHERE type = ? AND id = ?', [
      'Patient',
      id,
    ]);
    expect(res.body).toBe(row.content);
  });
});
