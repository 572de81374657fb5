// A newcomer's first hour as one path: start the server in a fresh folder, then run the README's "A first
// request" commands exactly as written (its account, token, create, search and scribe visit; only the
// address and the way to call the command are the test's), then move the database to PostgreSQL with
// `db copy` and find everything again there.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runProcess as run } from './support/cli-process.js';
import { postgresTestDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
/** The command line from this checkout's sources, callable from any folder (as `ambient-fhir` is once installed). */
const COMMAND = [
  process.execPath,
  '--import',
  import.meta.resolve('tsx'),
  fileURLToPath(new URL('../src/main.ts', import.meta.url)),
] as const;
const hasCurl = spawnSync('curl', ['--version']).status === 0;

/** The commands of a README section's indented shell blocks, continuation lines joined. */
function shellCommands(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README has no section "${heading}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  const commands: string[] = [];
  let current = '';
  for (const line of markdown.slice(start, end < 0 ? undefined : end).split('\n')) {
    if (!line.startsWith('    ')) continue;
    current += `${line.slice(4)}\n`;
    if (!line.endsWith('\\')) {
      commands.push(current.trimEnd());
      current = '';
    }
  }
  return commands;
}

/**
 * The README's commands as one bash script, each command's output after a marker line of its own; `node
 * bin/ambient-fhir.js` becomes the command from source and the address the test server's.
 */
function readmeScript(commands: readonly string[], serverUrl: string): string {
  const [program, ...args] = COMMAND.map((part) => `'${part}'`);
  return [
    'set -euo pipefail',
    `ambient_fhir() { ${program} ${args.join(' ')} "$@"; }`,
    ...commands.flatMap((command, i) => [
      `echo '@@@ command ${i}'`,
      command.replaceAll('node bin/ambient-fhir.js', 'ambient_fhir').replaceAll('http://127.0.0.1:8080', serverUrl),
      'echo',
    ]),
  ].join('\n');
}

describe.skipIf(!hasCurl)("a newcomer's first hour: start, the README's first requests, then PostgreSQL", () => {
  const folder = mkdtempSync(join(tmpdir(), 'ambient-newcomer-'));
  // Only what a newcomer's shell has: no DATABASE_URL, so the default ./data/ambient.db in the folder.
  const env = { PATH: process.env.PATH ?? '', HOME: folder, LOG_LEVEL: 'info' };
  let server: ServerProcess | undefined;
  let target: TestDatabase | undefined;

  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await target?.dispose();
    rmSync(folder, { recursive: true, force: true });
  });

  const stop = async () => {
    server!.child.kill('SIGTERM');
    expect(await server!.exited).toBe(0);
    server = undefined;
  };

  let patientId = '';

  it('runs every command of "A first request" as written, on the default SQLite database', async () => {
    server = await startServerProcess({ ...env, PORT: '0' }, [], { command: COMMAND, cwd: folder });
    const commands = shellCommands(README, 'A first request');
    expect(commands).toHaveLength(6);
    const result = await run('bash', ['-c', readmeScript(commands, server.url)], { cwd: folder, env });
    expect(result.code, result.stderr).toBe(0);
    const outputs = result.stdout.split(/^@@@ command \d+\n/m).slice(1);

    const account = JSON.parse(outputs[0]) as { username: string; scopes: string[] };
    expect(account).toMatchObject({ username: 'alice', scopes: ['system/*.cruds', 'scribe.read', 'scribe.write'] });
    expect(result.stderr).toContain(`database: sqlite:${join(folder, 'data', 'ambient.db')}`);

    const created = JSON.parse(outputs[2]) as { resourceType: string; id: string; birthDate: string };
    expect(created).toMatchObject({ resourceType: 'Patient', birthDate: '1974-12-25' });
    patientId = created.id;

    const found = JSON.parse(outputs[3]) as { type: string; entry: { resource: { id: string } }[] };
    expect(found.type).toBe('searchset');
    expect(found.entry.map((e) => e.resource.id)).toEqual([patientId]);

    expect(JSON.parse(outputs[4])).toMatchObject({ scribe_id: 1, status: 'IN_PROGRESS' });
    const record = JSON.parse(outputs[5]) as { scribe_id: number; template_ids: number[]; transcripts: string[] };
    expect(record).toMatchObject({ scribe_id: 1, template_ids: [1] });
    expect(record.transcripts[0]).toMatch(/sore throat/);
    await stop();
  }, 120_000);

  it('moves to PostgreSQL with db copy, where the account, the Patient and the visit are all found', async () => {
    expect(patientId).not.toBe('');
    target = await postgresTestDatabase();
    const [program, ...args] = COMMAND;
    const copy = await run(program, [...args, 'db', 'copy', '--to', target.url], { cwd: folder, env });
    expect(copy.code, copy.stderr).toBe(0);

    server = await startServerProcess({ ...env, PORT: '0', DATABASE_URL: target.url }, [], {
      command: COMMAND,
      cwd: folder,
    });
    const token = await fetch(`${server.url}/v1/ambient/api/auth/token`, {
      method: 'POST',
      body: new URLSearchParams({ username: 'alice', password: 's3cret-passw0rd' }),
    }).then((res) => res.json() as Promise<{ access_token: string }>);
    const headers = { authorization: `Bearer ${token.access_token}` };
    const found = (await fetch(`${server.url}/fhir/Patient?name=chalm&birthdate=ge1970`, { headers }).then((res) =>
      res.json(),
    )) as { entry: { resource: { id: string; name: { family: string }[] } }[] };
    expect(found.entry.map((e) => [e.resource.id, e.resource.name[0].family])).toEqual([[patientId, 'Chalmers']]);
    const record = (await fetch(`${server.url}/v1/ambient/api/scribe/1`, { headers }).then((res) => res.json())) as {
      transcripts: string[];
    };
    expect(record.transcripts[0]).toMatch(/sore throat/);
    // And it goes on from there: a new Patient gets a place of its own.
    const created = await fetch(`${server.url}/fhir/Patient`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Second' }] }),
    });
    expect(created.status).toBe(201);
    expect(((await created.json()) as { id: string }).id).not.toBe(patientId);
    await stop();
  }, 120_000);
});
