// FHIRPath Patch paths are the client's code: a runaway regular expression in one must not stall the server.
// A real server process per database, so that a blocked event loop shows as an unanswered /healthz here
// instead of blocking the test itself.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../src/auth/accounts.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { FHIR_JSON, fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const operation = (type: string, path: string) => ({
  resourceType: 'Parameters',
  parameter: [
    {
      name: 'operation',
      part: [
        { name: 'type', valueCode: type },
        { name: 'path', valueString: path },
      ],
    },
  ],
});

describe.each(BACKENDS)('request FHIRPath over HTTP on %s', (backend) => {
  let database: TestDatabase;
  let server: ServerProcess;
  let fhir: FhirClient;
  let patientId: string;

  beforeAll(async () => {
    database = await testDatabase(backend);
    const db = openDatabase(database.url);
    await migrate(db);
    const username = `fhirpath-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    // The attack needed only `u` in the review; a FHIRPath Patch now needs `r` too (it reads the resource).
    await new AccountStore(db).create({ username, password, scopes: ['system/Patient.cru'] });
    await db.close();
    server = await startServerProcess({ DATABASE_URL: database.url });
    const http = httpInject(server.url);
    fhir = fhirClient(http, await passwordToken(http, username, password));
    // 40 "a" and a "!": JavaScript's RegExp needs hours for (a+)+$ on it (28 took 4.7 s, doubling per "a").
    const created = await fhir.create({ resourceType: 'Patient', name: [{ family: 'a'.repeat(40) + '!' }] });
    patientId = created.json<{ id: string }>().id;
  }, 60_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await database?.dispose();
  });

  const patch = (body: unknown) =>
    fetch(`${server.url}/fhir/Patient/${patientId}`, {
      method: 'PATCH',
      headers: { ...fhir.auth, 'content-type': FHIR_JSON },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });

  it('answers the (a+)+$ patch, and /healthz answers while it runs', async () => {
    const attack = patch(operation('delete', "Patient.name.where(family.matches('(a+)+$'))"));
    const health = fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
    const [patched, healthz] = await Promise.all([attack, health]);
    expect(healthz.status).toBe(200);
    // No name matches, so the delete changes nothing: a correct answer, not a refusal.
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as { name: unknown[] }).name).toEqual([{ family: 'a'.repeat(40) + '!' }]);
  }, 30_000);

  it('refuses a backreference with a 400 OperationOutcome naming it', async () => {
    const res = await patch(operation('delete', "Patient.name.where(family.matches('(a)\\\\1'))"));
    expect(res.status).toBe(400);
    const outcome = (await res.json()) as { resourceType: string; issue: { diagnostics: string; details: unknown }[] };
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].diagnostics).toMatch(/backreferences/);
    expect(JSON.stringify(outcome.issue[0].details)).toContain('fhirpath-unsupported');
  });

  it('refuses an over-long path with a 400, and one that builds a huge string with a 422', async () => {
    const long = await patch(operation('delete', 'Patient.name' + '.given'.repeat(200)));
    expect(long.status).toBe(400);
    const forty = `'${'a'.repeat(40)}'`;
    const costly = await patch(
      operation('delete', `Patient.name.where(family = ${forty}${`.replace('', ${forty})`.repeat(5)})`),
    );
    expect(costly.status).toBe(422);
    expect(JSON.stringify(await costly.json())).toContain('too-costly');
  });
});
