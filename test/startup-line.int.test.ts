// Which database a command worked on is never a guess (docs/cli.md): `serve` names it in its start-up
// line, by its absolute path, with its account count (and how to create one when there is none, and that
// the file was created now); every account, keys and template command names it on standard error.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createAccountCommand } from '../src/cli/account.js';
import { startServerProcess } from './support/server-process.js';

const dir = mkdtempSync(join(tmpdir(), 'ambient-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The start-up line of a server on `databaseUrl`, once it listens; the server is stopped. */
async function startupLine(databaseUrl: string): Promise<Record<string, unknown>> {
  const server = await startServerProcess({ DATABASE_URL: databaseUrl });
  try {
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('ambient-fhir listening'));
    return JSON.parse(line!) as Record<string, unknown>;
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
}

describe('naming the database', () => {
  const file = join(dir, 'new-folder', 'ambient.db');

  it('serve: a new database by its absolute path, created now, no account and how to make one', async () => {
    // A relative path, as DATABASE_URL's default is: the line resolves it against the working directory.
    const line = await startupLine(`sqlite:${relative(process.cwd(), file)}`);
    expect(line).toMatchObject({ database: `sqlite:${file}`, database_created: true, accounts: 0 });
    expect(line.msg).toMatch(
      /no account yet: create one with `ambient-fhir account create <username> --password-stdin`/,
    );
  });

  it('account create names the database on standard error, JSON on standard output; serve then counts it', async () => {
    let stdout = '';
    let stderr = '';
    const code = await createAccountCommand({
      stdin: Readable.from([`pw-${randomUUID()}\n`]),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: { DATABASE_URL: `sqlite:${file}` },
    }).run(['create', `svc-${randomUUID()}`, '--password-stdin']);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toHaveProperty('username');
    expect(stderr).toBe(`database: sqlite:${file}\n`);
    const line = await startupLine(`sqlite:${file}`);
    expect(line).toMatchObject({ database: `sqlite:${file}`, accounts: 1, msg: 'ambient-fhir listening' });
    expect(line).not.toHaveProperty('database_created');
  });

  it('a command on a path where there was no database says it created one there', async () => {
    let stderr = '';
    const elsewhere = join(dir, 'typo', 'ambiant.db');
    await createAccountCommand({
      stdin: Readable.from([]),
      stdout: { write: () => undefined },
      stderr: { write: (text: string) => (stderr += text) },
      env: { DATABASE_URL: `sqlite:${elsewhere}` },
    }).run(['list']);
    expect(stderr).toBe(`database: sqlite:${elsewhere} (created now: there was none at this path)\n`);
  });
});
