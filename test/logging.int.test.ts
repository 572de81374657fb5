// What the logs hold, with the production logger (logger.ts) on both databases: never a query string
// (searches carry patient names and codes; a misdirected token request carries a password), and every
// unexpected error as a 500 with its stack in the log but nothing internal in the answer.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { FhirClient } from './support/fhir-client.js';

describe.each(BACKENDS)('log lines on %s', (backend) => {
  const raw: string[] = [];
  const lines = () => raw.map((line) => JSON.parse(line) as Record<string, unknown>);
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, {}, { logger: createLogger('info', { write: (line: string) => raw.push(line) }) });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  /** Lines are written when the response has been sent, which can be just after inject resolves. */
  const logged = async (predicate: (line: Record<string, unknown>) => boolean) => {
    for (let i = 0; i < 100; i++) {
      if (lines().some(predicate)) return true;
      await new Promise((r) => setTimeout(r, 10));
    }
    return false;
  };
  const completions = () => lines().filter((l) => l.event === 'access').length;
  const completedAfter = (before: number) => () => completions() > before;

  it('a search is logged by its path and route, never with its query string', async () => {
    const secret = `SecretName${randomUUID().slice(0, 8)}`;
    const before = completions();
    const res = await fhir.get(
      `/fhir/Patient?name=${secret}&identifier=http://example.org/mrn|${secret}&_has:Condition:subject:code=86406008`,
    );
    expect(res.statusCode).toBe(200);
    expect(await logged(completedAfter(before))).toBe(true);
    const access = lines().find((l) => l.event === 'access' && l.path === '/fhir/Patient');
    expect(access).toMatchObject({ method: 'GET', path: '/fhir/Patient', route: '/fhir/:type', status: 200 });
    expect(raw.join('\n')).not.toContain(secret);
    expect(raw.join('\n')).not.toContain('86406008');
  });

  it('credentials in the query string of the token endpoint are refused and never logged', async () => {
    const password = `SecretPassword${randomUUID()}`;
    const before = completions();
    const res = await t.app.inject({
      method: 'POST',
      url: `/v1/ambient/api/auth/token?username=someone&password=${password}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `username=someone&password=${password}`,
    });
    expect(res.statusCode).toBe(400);
    expect(await logged(completedAfter(before))).toBe(true);
    expect(raw.join('\n')).not.toContain(password);
  });

  it('an unexpected error (corrupt stored JSON) is a generic 500, logged with its stack', async () => {
    const id = (await fhir.post('/fhir/Patient', '{"resourceType":"Patient"}')).json().id as string;
    const db = openDatabase(t.database.url);
    try {
      await db.execute('UPDATE resource SET content = ? WHERE type = ? AND id = ?', [
        '{"resourceType":',
        'Patient',
        id,
      ]);
    } finally {
      await db.close();
    }
    const res = await fhir.patch(`/fhir/Patient/${id}`, '[{"op":"add","path":"/active","value":true}]', {
      'content-type': 'application/json-patch+json',
    });
    expect(res.statusCode).toBe(500);
    expect(res.json().issue[0]).toMatchObject({ code: 'exception', diagnostics: 'Internal server error' });
    expect(res.body).not.toContain('JSON');
    const isError = (l: Record<string, unknown>) =>
      l.level === 50 && JSON.stringify(l.err ?? {}).includes('SyntaxError') && typeof l.req_id === 'string';
    expect(await logged(isError)).toBe(true);
    const error = lines().find(isError)!.err as { stack?: string };
    expect(error.stack).toContain('patch');
  });
});
