// What an operator meets on the command line: --help everywhere (in-process, every command and verb, then a
// few real processes), one clear line and a non-zero exit for each start-up failure, unknown AMBIENT_*
// names, and import's progress lines when its output is a pipe. The processes run the source through tsx.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cliProcess as cli } from '../../test/support/cli-process.js';
import type { CliResult as Result } from '../../test/support/cli-process.js';
import { FULL } from '../../test/support/full-tests.js';
import { createCommands } from './commands.js';
import { runCli } from './main.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const UNREACHABLE_POSTGRES = 'postgres://admin:s3cret@127.0.0.1:1/ambient';

/** Runs the CLI in-process with its own streams and environment. */
async function inProcess(argv: string[], env: Record<string, string> = {}): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdin: Readable.from([]),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/** Exactly one line on stderr, no stack trace. */
function oneLine(result: Result): string {
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(result.stderr).not.toMatch(/^\s+at /m);
  return lines[0];
}

const sqliteUrl = () => `sqlite:${join(mkdtempSync(join(tmpdir(), 'ambient-cli-')), 'cli.db')}`;

/** Every command and verb, as `--help` reaches them. */
function everyHelpInvocation(): string[][] {
  const invocations: string[][] = [];
  for (const [name, command] of Object.entries(createCommands())) {
    invocations.push([name, '--help'], [name, '-h']);
    for (const verb of Object.keys(command.help.verbs ?? {}))
      invocations.push([name, verb, '--help'], [name, verb, '-h']);
  }
  return invocations;
}

describe('--help', () => {
  it('prints the overview on stdout and exits 0 for --help, -h and help; no command or an unknown one is exit 2', async () => {
    for (const flag of ['--help', '-h', 'help']) {
      const result = await inProcess([flag]);
      expect(result.code).toBe(0);
      expect(result.stderr).toBe('');
      for (const name of ['serve', 'account', 'keys', 'import', 'reindex', 'template', 'db']) {
        expect(result.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
      }
    }
    for (const argv of [[], ['nope']]) {
      const result = await inProcess(argv);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain('Usage: ambient-fhir <command>');
    }
  });

  it('prints the usage of every command and verb on stdout with exit 0, starting nothing', async () => {
    const invocations = everyHelpInvocation();
    expect(invocations.length).toBeGreaterThan(30);
    // An unreachable database: help that tried to open it would fail.
    for (const argv of invocations) {
      const result = await inProcess(argv, { DATABASE_URL: UNREACHABLE_POSTGRES });
      expect(result.code, argv.join(' ')).toBe(0);
      expect(result.stderr, argv.join(' ')).toBe('');
      const verb = argv.length === 3 ? ` ${argv[1]}` : '';
      expect(result.stdout, argv.join(' ')).toMatch(new RegExp(`^Usage: ambient-fhir ${argv[0]}${verb}`));
    }
    expect((await inProcess(['help', 'keys'])).stdout).toMatch(/^Usage: ambient-fhir keys <verb>/);
  });

  it('prints the problem and the usage on stderr with exit 2 for a wrong use', async () => {
    const wrong: [string[], string][] = [
      [['account'], 'Usage: ambient-fhir account <verb>'],
      [['account', 'frobnicate'], 'Unknown verb "frobnicate"'],
      [['account', 'create', 'alice', '--no-such-option'], 'Usage: ambient-fhir account create <username>'],
      [['keys', 'retire'], 'Usage: ambient-fhir keys retire <kid>'],
      [['template', 'show', 'x'], 'Usage: ambient-fhir template show <id>'],
      [['import'], 'Usage: ambient-fhir import'],
      [['import', '--progress-every', 'soon', 'x.ndjson'], '--progress-every takes a number of seconds'],
      [['reindex', '--bogus'], 'Usage: ambient-fhir reindex'],
      [['serve', 'extra'], 'Usage: ambient-fhir serve'],
      [['db', 'copy'], 'Usage: ambient-fhir db copy --to <postgres-url>'],
    ];
    for (const [argv, text] of wrong) {
      const result = await inProcess(argv, { DATABASE_URL: UNREACHABLE_POSTGRES });
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout, argv.join(' ')).toBe('');
      expect(result.stderr, argv.join(' ')).toContain(text);
    }
  });

  it('every command and verb is in the command table of docs/cli.md', () => {
    const page = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');
    const table = page.slice(page.indexOf('## Commands'), page.indexOf('## Accounts and keys'));
    for (const [name, command] of Object.entries(createCommands())) {
      expect(table, name).toContain(`| \`${name}`);
      for (const verb of Object.keys(command.help.verbs ?? {}))
        expect(table, `${name} ${verb}`).toMatch(new RegExp(`[ |]${verb}[ \\\\\`]`));
    }
  });

  it('--version and -v print the version of package.json alone on stdout with exit 0, starting nothing', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const flag of ['--version', '-v']) {
      const result = await inProcess([flag], { DATABASE_URL: UNREACHABLE_POSTGRES });
      expect(result).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
    expect((await inProcess(['--help'])).stdout).toContain('ambient-fhir --version');
  });

  it('as a process: help on stdout with exit 0 (serve --help does not start a server), wrong use on stderr with 2', async () => {
    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('Usage: ambient-fhir <command>');
    const serve = await cli(['serve', '--help'], { PORT: '1' });
    expect(serve.code).toBe(0);
    expect(serve.stdout).toMatch(/^Usage: ambient-fhir serve/);
    expect(serve.stderr).toBe('');
    const create = await cli(['account', 'create', '--help']);
    expect(create.code).toBe(0);
    expect(create.stdout).toMatch(/^Usage: ambient-fhir account create <username> /);
    const wrong = await cli(['account', 'create']);
    expect(wrong.code).toBe(2);
    expect(wrong.stdout).toBe('');
    expect(wrong.stderr).toContain('account create takes exactly one username');
  });
});

describe('start-up failures: one line, exit 1', () => {
  it('an invalid PORT', async () => {
    for (const port of ['abc', '99999']) {
      const result = await cli(['serve'], { PORT: port, DATABASE_URL: sqliteUrl() });
      expect(result.code).toBe(1);
      expect(oneLine(result)).toBe(
        `ambient-fhir serve: Invalid configuration: PORT must be an integer between 0 and 65535, got "${port}"`,
      );
    }
  });

  it('an unreachable database, named by DATABASE_URL without its password, for serve and every database command', async () => {
    const line = (command: string) =>
      `ambient-fhir ${command}: cannot connect to the database named by DATABASE_URL (postgres://admin:***@127.0.0.1:1/ambient): connection refused`;
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-'));
    const file = join(dir, 'Patient.ndjson');
    writeFileSync(file, `${JSON.stringify({ resourceType: 'Patient' })}\n`);
    const runs: [string, string[]][] = [
      ['serve', ['serve']],
      ['account', ['account', 'list']],
      ['keys', ['keys', 'list']],
      ['template', ['template', 'list']],
      ['import', ['import', file]],
      ['reindex', ['reindex']],
      ['db', ['db', 'copy', '--to', 'postgres://127.0.0.1:1/target']],
    ];
    for (const [command, argv] of runs) {
      // Each a process of its own in the full run; `npm test` starts serve as one and runs the other commands
      // in-process (the same code but src/main.ts's two lines, which serve goes through).
      const run = FULL || command === 'serve' ? cli : inProcess;
      const result = await run(argv, { DATABASE_URL: UNREACHABLE_POSTGRES, PORT: '0' });
      expect(result.code, command).toBe(1);
      expect(oneLine(result)).toBe(line(command));
      expect(result.stderr).not.toContain('s3cret');
    }
  });

  it('a port in use', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    try {
      const port = (blocker.address() as AddressInfo).port;
      const result = await cli(['serve'], { PORT: String(port), DATABASE_URL: sqliteUrl() });
      expect(result.code).toBe(1);
      expect(oneLine(result)).toBe(
        `ambient-fhir serve: cannot listen on HOST=127.0.0.1 PORT=${port}: address already in use (another process listens there: stop it or choose another PORT)`,
      );
    } finally {
      blocker.close();
    }
  });

  it('unreadable TLS files, and files that are not a certificate and key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-tls-'));
    const missing = await cli(['serve'], {
      PORT: '0',
      DATABASE_URL: sqliteUrl(),
      TLS_CERT_FILE: join(dir, 'cert.pem'),
      TLS_KEY_FILE: join(dir, 'key.pem'),
    });
    expect(missing.code).toBe(1);
    expect(oneLine(missing)).toMatch(
      /^ambient-fhir serve: cannot read TLS_CERT_FILE \(.*cert\.pem\): ENOENT: no such file or directory/,
    );
    writeFileSync(join(dir, 'junk.pem'), 'not a certificate\n');
    const junk = await cli(['serve'], {
      PORT: '0',
      DATABASE_URL: sqliteUrl(),
      TLS_CERT_FILE: join(dir, 'junk.pem'),
      TLS_KEY_FILE: join(dir, 'junk.pem'),
    });
    expect(junk.code).toBe(1);
    expect(oneLine(junk)).toMatch(/^ambient-fhir serve: TLS_CERT_FILE and TLS_KEY_FILE are not a PEM certificate/);
  });

  it('an unreachable REDIS_URL, without its password', async () => {
    const result = await cli(['serve'], {
      PORT: '0',
      DATABASE_URL: sqliteUrl(),
      REDIS_URL: 'redis://:s3cret@127.0.0.1:1',
    });
    expect(result.code).toBe(1);
    expect(oneLine(result)).toBe(
      'ambient-fhir serve: cannot connect to the Redis server named by REDIS_URL (redis://:***@127.0.0.1:1): connection refused',
    );
  });

  it('warns about a misspelt AMBIENT_* name on stderr, one line before the failure', async () => {
    const result = await cli(['serve'], { PORT: 'abc', AMBIENT_CORS_ORIGIN: 'https://a.example' });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'warning: AMBIENT_CORS_ORIGIN is not a setting of ambient-fhir and is ignored; the closest known name is AMBIENT_CORS_ORIGINS',
      'ambient-fhir serve: Invalid configuration: PORT must be an integer between 0 and 65535, got "abc"',
    ]);
  });
});

describe('a misspelt DATABASE_URL', () => {
  it('is warned about by the account commands, which name the database they used instead', async () => {
    const url = sqliteUrl();
    const result = await cli(['account', 'list'], { DATABASE_URL: url, DATABSE_URL: 'sqlite:/elsewhere.db' });
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe('[]');
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'warning: DATABSE_URL is not a setting of ambient-fhir and is ignored; the closest known name is DATABASE_URL',
      `database: ${url} (created now: there was none at this path)`,
    ]);
  });
});

describe('import progress off a terminal', () => {
  it('prints progress lines (files, count, rate) on a pipe, and the summary on stdout', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-progress-'));
    const file = join(dir, 'Patient.ndjson');
    writeFileSync(
      file,
      Array.from({ length: 5 }, (_, i) => JSON.stringify({ resourceType: 'Patient', id: `progress-${i}` })).join('\n'),
    );
    const result = await cli(['import', '--progress-every', '0', file], { DATABASE_URL: sqliteUrl() });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toMatch(/^import: \d+\/1 files, \d+ resources, \d+ resources\/s, [0-9.]+ s$/);
    }
    expect(lines.at(-1)).toMatch(/^import: 1\/1 files, 5 resources, /);
    expect(result.stderr).not.toContain('\r');
    expect(result.stdout).toMatch(/^Loaded 5 resources from 1 files/m);
  });
});
