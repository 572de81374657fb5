// Several server processes as one service (docs/api.md "processes"): `serve --workers N` on one port,
// and separate processes (hosts) on one database behind a front. The end-to-end suites also run
// against two processes as the `processes` vitest project (vitest.config.ts).
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../src/auth/accounts.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { postgresTestDatabase, sqliteTestDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { bearer, fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { startProcessPair } from './support/process-pair.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const PUBLIC_URL = 'http://fhir.test:8080';

/** One request on a connection of its own (no keep-alive), so that the cluster may hand it to any worker. */
function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: options.method ?? 'GET', headers: { connection: 'close', ...options.headers }, agent: false },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

async function tokenFor(url: string, username: string, password: string): Promise<string> {
  const res = await request(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }).toString(),
  });
  expect(res.status).toBe(200);
  return (JSON.parse(res.body) as { access_token: string }).access_token;
}

/** The process ids in the access lines of a server's output, one per request answered. */
function answeringPids(output: string): number[] {
  return output
    .split('\n')
    .filter((line) => line.includes('"event":"access"') && line.includes('"path":"/fhir/Patient"'))
    .map((line) => (JSON.parse(line) as { pid: number }).pid);
}

describe('serve --workers', () => {
  it('refuses more than one process on SQLite, naming why', async () => {
    const database = sqliteTestDatabase();
    const server = startServerProcess({ DATABASE_URL: database.url }, ['--workers', '2']);
    await expect(server).rejects.toThrow(/--workers 2 \(or AMBIENT_WORKERS\) needs PostgreSQL/);
    await database.dispose();
  });

  it('refuses a malformed --workers value as a usage error', async () => {
    const database = sqliteTestDatabase();
    await expect(startServerProcess({ DATABASE_URL: database.url }, ['--workers', 'two'])).rejects.toThrow(
      /--workers takes a number of processes from 1 to 64, got "two"/,
    );
    await database.dispose();
  });

  describe('on PostgreSQL', () => {
    let database: TestDatabase;
    let server: ServerProcess;
    let admin: SqlDatabase;
    let accounts: AccountStore;

    beforeAll(async () => {
      database = await postgresTestDatabase();
      server = await startServerProcess({ DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL }, [
        '--workers',
        '2',
      ]);
      // The server answers once its first process listens; on a busy machine the second can take seconds
      // more, and until it listens every connection goes to the first (seen in CI).
      const listening = () => server.output().match(/"msg":"server process listening"/g)?.length ?? 0;
      for (const started = Date.now(); listening() < 2; await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() - started > 30_000)
          throw new Error(`the second server process never listened:\n${server.output()}`);
      }
      admin = openDatabase(database.url);
      accounts = new AccountStore(admin);
    });
    afterAll(async () => {
      if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
      await admin?.close();
      await database?.dispose();
    });

    it('answers on one port from two processes, which share tokens and one rate limit', async () => {
      const username = `worker-${randomUUID()}`;
      await accounts.create({ username, password: 'pw-workers-1', scopes: ['system/*.cruds'], rateLimit: 12 });
      const token = await tokenFor(server.url, username, 'pw-workers-1');
      const statuses: number[] = [];
      for (let i = 0; i < 16; i++) {
        const res = await request(`${server.url}/fhir/Patient?_count=1`, {
          headers: bearer(token),
        });
        statuses.push(res.status);
      }
      // Counted together: exactly 12 pass, wherever they landed, then 429 (each process alone would grant 12).
      expect(statuses).toEqual([...Array(12).fill(200), ...Array(4).fill(429)]);
      const pids = new Set(answeringPids(server.output()));
      expect(pids.size).toBe(2);
      expect(pids.has(server.child.pid!)).toBe(false);
    });

    it('replaces a process that dies, and stops every process on SIGTERM with exit 0', async () => {
      const username = `worker-${randomUUID()}`;
      await accounts.create({ username, password: 'pw-workers-2', scopes: ['system/*.cruds'] });
      const token = await tokenFor(server.url, username, 'pw-workers-2');
      const before = new Set(answeringPids(server.output()));
      const victim = [...before][0];
      process.kill(victim, 'SIGKILL');
      await expect
        .poll(() => /"worker":3,"worker_pid":\d+,"msg":"server process listening"/.test(server.output()), {
          timeout: 20_000,
        })
        .toBe(true);
      const answeredBefore = answeringPids(server.output()).length;
      for (let i = 0; i < 6; i++) {
        const res = await request(`${server.url}/fhir/Patient?_count=1`, {
          headers: bearer(token),
        });
        expect(res.status).toBe(200);
      }
      // A process writes its access line after the answer has gone: wait for all six.
      await expect
        .poll(() => answeringPids(server.output()).length, { timeout: 10_000 })
        .toBeGreaterThanOrEqual(answeredBefore + 6);
      const after = answeringPids(server.output()).slice(answeredBefore);
      expect(after).toHaveLength(6);
      expect(after).not.toContain(victim);
      expect(new Set(after).size).toBe(2);

      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(server.output()).toMatch(/"reason":"SIGTERM","msg":"stopping the server processes"/);
    });
  });
});

describe('two processes on one database behind a front', () => {
  let database: TestDatabase;
  let admin: SqlDatabase;

  beforeAll(async () => {
    database = await postgresTestDatabase();
    admin = openDatabase(database.url);
  });
  afterAll(async () => {
    await admin?.close();
    await database?.dispose();
  });

  it('serves one client alternately from both: a token and a next link from one work on the other', async () => {
    const pair = await startProcessPair({ DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL });
    try {
      const username = `pair-${randomUUID()}`;
      await new AccountStore(admin).create({ username, password: 'pw-pair-long', scopes: ['system/*.cruds'] });
      const fhir = fhirClient(pair, await passwordToken(pair, username, 'pw-pair-long'));
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const created = await fhir.create({ resourceType: 'Patient', name: [{ family: `Pair${i}` }] });
        expect(created.statusCode).toBe(201);
        ids.push(created.json().id as string);
      }
      const pages = await fhir.pages('/fhir/Patient?_count=2&_sort=_id');
      const seen = pages.flatMap((bundle) => (bundle.entry ?? []).map((e) => e.resource!.id));
      expect(seen).toEqual([...ids].sort());
      expect(pair.served[0]).toBeGreaterThan(3);
      expect(Math.abs(pair.served[0] - pair.served[1])).toBeLessThanOrEqual(1);
    } finally {
      await pair.close();
    }
  });

  it('shares revocation, key rotation and client-assertion replay checks between the processes', async () => {
    const pair = await startProcessPair({ DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL });
    const cli = (...args: string[]) => {
      const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
        env: { ...process.env, DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL },
        encoding: 'utf8',
      });
      expect(result.status, result.stderr).toBe(0);
    };
    const login = async (username: string, password: string) =>
      fhirClient(pair, await passwordToken(pair, username, password));
    /** Two requests: through the front, one reaches each process. */
    const bothAnswer = async (fhir: FhirClient) =>
      [await fhir.get('/fhir/Patient?_count=1'), await fhir.get('/fhir/Patient?_count=1')].map((r) => r.statusCode);
    try {
      const accounts = new AccountStore(admin);
      const username = `shared-${randomUUID()}`;
      const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
      const kid = `es-${randomUUID()}`;
      await accounts.create({
        username,
        password: 'pw-shared-1',
        scopes: ['system/*.cruds'],
        jwks: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES384', use: 'sig' }] }),
      });

      // Revocation by the CLI, seen by both processes at their next request.
      const before = await login(username, 'pw-shared-1');
      expect(await bothAnswer(before)).toEqual([200, 200]);
      cli('account', 'revoke-tokens', username);
      expect(await bothAnswer(before)).toEqual([401, 401]);

      // A key rotated by the CLI: a token signed with the new key (by one process) is taken by both.
      cli('keys', 'rotate');
      const after = await login(username, 'pw-shared-1');
      expect(await bothAnswer(after)).toEqual([200, 200]);

      // A client assertion accepted by one process is a replay for the other.
      const assertion = await new SignJWT({
        iss: username,
        sub: username,
        aud: `${PUBLIC_URL}/v1/ambient/api/auth/token`,
        jti: randomUUID(),
        exp: Math.floor(Date.now() / 1000) + 120,
      })
        .setProtectedHeader({ alg: 'ES384', kid, typ: 'JWT' })
        .sign(privateKey);
      const grant = () =>
        pair.inject({
          method: 'POST',
          url: '/v1/ambient/api/auth/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({
            grant_type: 'client_credentials',
            client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
            client_assertion: assertion,
            scope: 'system/Patient.rs',
          }).toString(),
        });
      const first = await grant();
      expect(first.statusCode).toBe(200);
      const replay = await grant();
      expect(replay.statusCode).toBe(401);
      expect(replay.json().error).toBe('invalid_client');
      expect(Math.abs(pair.served[0] - pair.served[1])).toBeLessThanOrEqual(1);
    } finally {
      await pair.close();
    }
  });
});
