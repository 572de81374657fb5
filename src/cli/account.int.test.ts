// `account` and `keys` as an administrator uses them: in-process with their own stdin/stdout, on SQLite
// and PostgreSQL, plus one run of the real CLI process while a server is running on the same database.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../assemble.js';
import { loadConfig } from '../config.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { createAccountCommand } from './account.js';
import { createKeysCommand } from './keys.js';
import { fhirClient } from '../../test/support/fhir-client.js';
import { tokenRequest } from '../../test/support/token-requests.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: () => any;
}

describe.each(BACKENDS)('account and keys commands on %s', (backend) => {
  let database: TestDatabase;

  const run = async (command: 'account' | 'keys', args: string[], stdin = ''): Promise<Run> => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdin: Readable.from(stdin === '' ? [] : [stdin]),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: { DATABASE_URL: database.url },
    };
    const factory = command === 'account' ? createAccountCommand : createKeysCommand;
    const code = await factory(io).run(args);
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  };

  const username = () => `cli-${randomUUID()}@example.org`;

  beforeAll(async () => {
    database = await testDatabase(backend);
  });

  afterAll(async () => {
    await database?.dispose();
  });

  it('create prints the account (defaults) and never the password or its hash', async () => {
    const name = username();
    const res = await run('account', ['create', name, '--password-stdin'], 'correct horse battery\n');
    expect(res.code, res.stderr).toBe(0);
    const account = res.json();
    expect(account).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      username: name,
      active: true,
      api_access: true,
      scopes: ['system/*.cruds', 'scribe.read', 'scribe.write'],
      rate_limit: null,
      tokens_not_before: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(res.stdout).not.toContain('correct horse');
    expect(res.stdout).not.toContain('argon2');
  });

  it('create takes scopes, a rate limit and the flags', async () => {
    const name = username();
    const res = await run(
      'account',
      [
        'create',
        name,
        '--password-stdin',
        '--scopes',
        'system/Patient.rs  scribe.read',
        '--rate-limit',
        '120',
        '--inactive',
        '--no-api-access',
      ],
      'a-long-password\r\n',
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.json()).toMatchObject({
      username: name,
      scopes: ['system/Patient.rs', 'scribe.read'],
      rate_limit: 120,
      active: false,
      api_access: false,
    });
    const zero = await run(
      'account',
      ['create', username(), '--password-stdin', '--rate-limit', '0'],
      'a-long-password\n',
    );
    expect(zero.json()).toMatchObject({ rate_limit: null });
  });

  it('a second create of one username exits non-zero with a clear message', async () => {
    const name = username();
    expect((await run('account', ['create', name, '--password-stdin'], 'a-long-password\n')).code).toBe(0);
    const again = await run('account', ['create', name, '--password-stdin'], 'a-long-password\n');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`An account named "${name}" already exists`);
    expect(again.stdout).toBe('');
  });

  it.each([
    [['create'], 2, 'exactly one username'],
    [['create', 'x-user'], 2, '--password-stdin'],
    [['create', 'x-user', '--password-stdin', '--bogus'], 2, 'bogus'],
    [['create', 'x-user', '--password-stdin', '--rate-limit', 'many'], 2, '--rate-limit'],
    [['create', 'x-user', '--password-stdin', '--rate-limit', '-5'], 2, 'rate-limit'],
    [
      ['create', 'x-user', '--password-stdin', '--scopes', 'system/Patinet.rs'],
      1,
      'Patinet is not a FHIR R4 resource type',
    ],
    [['create', 'x-user', '--password-stdin', '--scopes', 'user/*.read'], 1, 'only system/ scopes'],
    [['create', 'x-user', '--password-stdin', '--scopes', 'system/*.rsx'], 1, 'cruds'],
    [['create', 'has space', '--password-stdin'], 1, 'spaces'],
    [['frobnicate'], 2, 'Unknown verb'],
    [[], 2, 'Usage'],
  ])('account %j exits %i with a clear message', async (args, code, message) => {
    const res = await run('account', args, 'a-long-password\n');
    expect(res.code).toBe(code);
    expect(res.stderr).toContain(message);
    expect(res.stdout).toBe('');
  });

  it('refuses a missing or short password', async () => {
    const empty = await run('account', ['create', username(), '--password-stdin'], '');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('no password');
    const short = await run('account', ['create', username(), '--password-stdin'], 'short\n');
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('at least 8 characters');
  });

  it('update changes only what is named', async () => {
    const name = username();
    const created = (
      await run('account', ['create', name, '--password-stdin', '--rate-limit', '10'], 'a-long-password\n')
    ).json();
    const updated = await run('account', ['update', name, '--active', 'false']);
    expect(updated.code, updated.stderr).toBe(0);
    // Deactivation also ends the account's tokens (tokens_not_before), so reactivation cannot revive them.
    expect(updated.json()).toEqual({
      ...created,
      active: false,
      tokens_not_before: expect.any(String),
      updated_at: expect.any(String),
    });
    const more = await run('account', [
      'update',
      name,
      '--api-access',
      'false',
      '--scopes',
      'scribe.read',
      '--rate-limit',
      '0',
    ]);
    expect(more.json()).toMatchObject({ active: false, api_access: false, scopes: ['scribe.read'], rate_limit: null });
    const back = await run('account', ['update', name, '--active', 'true', '--api-access', 'true']);
    expect(back.json()).toMatchObject({ active: true, api_access: true, scopes: ['scribe.read'] });
  });

  it('update refuses nothing to change, bad values and unknown usernames', async () => {
    const name = username();
    await run('account', ['create', name, '--password-stdin'], 'a-long-password\n');
    expect((await run('account', ['update', name])).code).toBe(2);
    const bad = await run('account', ['update', name, '--active', 'maybe']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--active takes true or false');
    const unknown = await run('account', ['update', `nobody-${randomUUID()}`, '--active', 'false']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No account named');
  });

  it('list, show, revoke-tokens and delete', async () => {
    const name = username();
    const created = (await run('account', ['create', name, '--password-stdin'], 'a-long-password\n')).json();
    const list = await run('account', ['list']);
    expect(list.code).toBe(0);
    expect(list.json()).toEqual(expect.arrayContaining([created]));
    expect(list.stdout).not.toContain('password');
    expect((await run('account', ['show', name])).json()).toEqual(created);
    const revoked = await run('account', ['revoke-tokens', name]);
    expect(revoked.code).toBe(0);
    expect(Date.parse(revoked.json().tokens_not_before)).toBeGreaterThan(Date.now() - 5000);
    const deleted = await run('account', ['delete', name]);
    expect(deleted.code).toBe(0);
    expect(deleted.json()).toMatchObject({ deleted: true, id: created.id, username: name });
    for (const verb of ['show', 'delete', 'revoke-tokens']) {
      const gone = await run('account', [verb, name]);
      expect(gone.code, verb).toBe(1);
      expect(gone.stderr).toContain(`No account named "${name}"`);
    }
  });

  it('unlock clears the lockout of an account; an unknown username exits non-zero with a clear message', async () => {
    const name = username();
    const created = (await run('account', ['create', name, '--password-stdin'], 'a-long-password\n')).json();
    const unlocked = await run('account', ['unlock', name]);
    expect(unlocked.code, unlocked.stderr).toBe(0);
    expect(unlocked.json()).toEqual({ unlocked: true, ...created });
    const unknown = await run('account', ['unlock', `nobody-${randomUUID()}`]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No account named');
    expect((await run('account', ['unlock'])).code).toBe(2);
  });

  it('keys retire takes an older key out of use, refuses the current signing key and unknown kids', async () => {
    const older = (await run('keys', ['rotate'])).json();
    const current = (await run('keys', ['rotate'])).json();
    const retired = await run('keys', ['retire', older.kid]);
    expect(retired.code, retired.stderr).toBe(0);
    expect(retired.json()).toEqual({ ...older, retired_at: expect.any(String) });
    const listed = (await run('keys', ['list'])).json() as { kid: string; retired_at?: string }[];
    expect(listed.find((k) => k.kid === older.kid)?.retired_at).toBe(retired.json().retired_at);
    expect(listed.find((k) => k.kid === current.kid)?.retired_at).toBeUndefined();
    const refused = await run('keys', ['retire', current.kid]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('is the current signing key: run keys rotate first');
    const unknown = await run('keys', ['retire', 'no-such-kid']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No signing key with kid "no-such-kid"');
    // A kid is base64url and may begin with "-": an argument, not an option (1 in 64 keys did that).
    const dashed = await run('keys', ['retire', '-R5no-such-kid']);
    expect(dashed.code, dashed.stderr).toBe(1);
    expect(dashed.stderr).toContain('No signing key with kid "-R5no-such-kid"');
    expect((await run('keys', ['retire', '--', '-R5no-such-kid'])).stderr).toContain('No signing key with kid');
    expect((await run('keys', ['retire'])).code).toBe(2);
    expect((await run('keys', ['rotate', 'extra'])).code).toBe(2);
  });

  it('keys rotate adds a key, keys list shows them without private parts', async () => {
    const first = await run('keys', ['rotate']);
    expect(first.code, first.stderr).toBe(0);
    const second = (await run('keys', ['rotate'])).json();
    expect(second).toEqual({ kid: expect.any(String), algorithm: 'ES256', created_at: expect.any(String) });
    const list = await run('keys', ['list']);
    expect(list.json().map((k: { kid: string }) => k.kid)).toEqual(
      expect.arrayContaining([first.json().kid, second.kid]),
    );
    expect(list.stdout).not.toMatch(/"d"|private/);
    expect((await run('keys', ['spin'])).code).toBe(2);
    expect((await run('keys', [])).code).toBe(2);
  });
});

describe('the CLI process while a server runs on the same database', () => {
  let database: TestDatabase;
  let app: FastifyInstance;

  const cli = (args: string[], stdin: string) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: database.url },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(stdin);
    });

  beforeAll(async () => {
    database = await testDatabase('sqlite');
    app = await assembleApp(loadConfig({ DATABASE_URL: database.url }));
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    await database?.dispose();
  });

  it('an account created, deactivated, revoked and unlocked by the CLI takes effect on the next request', async () => {
    const name = `proc-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    const created = await cli(
      ['account', 'create', name, '--password-stdin', '--scopes', 'system/Patient.rs'],
      `${password}\n`,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ username: name, scopes: ['system/Patient.rs'] });

    const getToken = () => tokenRequest(app, { username: name, password });
    const login = await getToken();
    expect(login.statusCode).toBe(200);
    let fhir = fhirClient(app, login.json<{ access_token: string }>().access_token);
    const read = () => fhir.get(`/fhir/Patient/${randomUUID()}`);
    expect((await read()).statusCode).toBe(404);

    expect((await cli(['account', 'update', name, '--active', 'false'], '')).code).toBe(0);
    expect((await read()).statusCode).toBe(401);
    expect((await cli(['account', 'update', name, '--active', 'true'], '')).code).toBe(0);
    // Reactivation does not bring back the tokens deactivation ended; a new one works.
    expect((await read()).statusCode).toBe(401);
    fhir = fhir.withToken((await getToken()).json<{ access_token: string }>().access_token);
    expect((await read()).statusCode).toBe(404);
    expect((await cli(['account', 'revoke-tokens', name], '')).code).toBe(0);
    expect((await read()).statusCode).toBe(401);

    // Ten wrong passwords lock the username for this address; the CLI's unlock is honoured at once.
    const wrong = () => tokenRequest(app, { username: name, password: 'not-the-password' });
    for (let i = 0; i < 10; i++) expect((await wrong()).statusCode).toBe(401);
    expect((await getToken()).statusCode).toBe(429);
    const unlocked = await cli(['account', 'unlock', name], '');
    expect(unlocked.code, unlocked.stderr).toBe(0);
    expect(JSON.parse(unlocked.stdout)).toMatchObject({ unlocked: true, username: name });
    expect((await getToken()).statusCode).toBe(200);
    const unknown = await cli(['account', 'unlock', `nobody-${randomUUID()}`], '');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No account named');

    const duplicate = await cli(['account', 'create', name, '--password-stdin'], `${password}\n`);
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain('already exists');
  });
});
