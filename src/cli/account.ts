// `ambient-fhir account <verb>`: service-account administration (CONTRACT.md "Service accounts"). A thin
// shell around auth/accounts.ts: parse arguments, open DATABASE_URL, call the store, print JSON.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { AccountStore, accountJson } from '../auth/accounts.js';
import type { AccountChanges } from '../auth/accounts.js';
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { Command } from './command.js';
import { UsageError } from './command.js';

/** Where a command reads and writes; tests pass their own streams and environment. */
export interface CliIo {
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: Record<string, string | undefined>;
}

export function processIo(): CliIo {
  return { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/** Opens (and migrates) the database DATABASE_URL names, runs fn, and closes it. */
export async function withDatabase<T>(io: CliIo, fn: (db: SqlDatabase) => Promise<T>): Promise<T> {
  const config = loadConfig(io.env);
  const db = openDatabase(config.databaseUrl);
  try {
    await migrate(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Runs a command body, turning refusals into messages on stderr and exit codes (2 usage, 1 refused). */
export async function runAdmin(io: CliIo, usage: string, body: () => Promise<void>): Promise<number> {
  try {
    await body();
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`${error.message}\n\n${usage}`);
      return 2;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr.write(`Error: ${message}\n`);
    return 1;
  }
}

export function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** The first line of standard input, without its line ending. */
export async function readPasswordLine(io: CliIo): Promise<string> {
  if (io.stdin.isTTY) io.stderr.write('Password: ');
  let text = '';
  for await (const chunk of io.stdin) {
    text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    if (text.includes('\n')) break;
  }
  const line = text.split('\n')[0].replace(/\r$/, '');
  if (line === '') throw new UsageError('--password-stdin: standard input held no password (one line expected)');
  return line;
}

const USAGE = `Usage: ambient-fhir account <verb> ...

  create <username> --password-stdin [--scopes "<s> <s>"] [--rate-limit <per-minute>] [--inactive] [--no-api-access]
  update <username> [--active true|false] [--api-access true|false] [--scopes "..."] [--rate-limit N] [--password-stdin]
  list
  show <username>
  delete <username>
  revoke-tokens <username>
  unlock <username>

A new password, --active false and --api-access false also end the account's tokens (as revoke-tokens):
reactivating it later does not bring them back. unlock clears the account's failed-login lockout (for
every client address) in every server process on the database, from its next token request on.

The password is read from standard input (one line), e.g. printf '%s\\n' "$PASSWORD" | ambient-fhir account create ...
Default scopes: "system/*.cruds scribe.read scribe.write"; --rate-limit 0 (the default) means no limit.
Works on the database named by DATABASE_URL. Prints the account as JSON.
`;

function parse(args: string[], options: NonNullable<ParseArgsConfig['options']>) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function oneUsername(positionals: string[], verb: string): string {
  if (positionals.length !== 1) throw new UsageError(`account ${verb} takes exactly one username`);
  return positionals[0];
}

function booleanOption(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  const v = value.toLowerCase();
  if (v === 'true' || v === 'yes' || v === '1') return true;
  if (v === 'false' || v === 'no' || v === '0') return false;
  throw new UsageError(`--${name} takes true or false, got "${value}"`);
}

function rateLimitOption(value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim())) {
    throw new UsageError(`--rate-limit takes a whole number of requests per minute (0 for none), got "${value}"`);
  }
  const n = Number(value);
  return n === 0 ? null : n;
}

function scopesOption(value: string | undefined): string[] | undefined {
  return value === undefined ? undefined : value.split(/\s+/).filter((s) => s !== '');
}

/** R4's resource types, so that a scope naming a misspelt type is refused; syntax only without the definitions. */
function resourceTypeCheck(): ((name: string) => boolean) | undefined {
  try {
    const definitions = loadR4Definitions();
    return (name) => definitions.isResourceType(name);
  } catch {
    return undefined;
  }
}

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

export function createAccountCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'administer service accounts (create, update, list, show, delete, revoke-tokens, unlock)',
    async run(args: string[]): Promise<number> {
      const [verb, ...rest] = args;
      if (verb === undefined || verb === 'help' || verb === '--help' || verb === '-h') {
        (verb === undefined ? io.stderr : io.stdout).write(USAGE);
        return verb === undefined ? 2 : 0;
      }
      return runAdmin(io, USAGE, async () => {
        const store = (db: SqlDatabase) => new AccountStore(db, { isResourceType: resourceTypeCheck() });
        switch (verb) {
          case 'create': {
            const { values, positionals } = parse(rest, {
              'password-stdin': { type: 'boolean' },
              scopes: { type: 'string' },
              'rate-limit': { type: 'string' },
              inactive: { type: 'boolean' },
              'no-api-access': { type: 'boolean' },
            });
            const username = oneUsername(positionals, 'create');
            if (!values['password-stdin']) {
              throw new UsageError('account create needs --password-stdin: the password is read from standard input');
            }
            const rateLimit = rateLimitOption(str(values['rate-limit']));
            const scopes = scopesOption(str(values.scopes));
            const password = await readPasswordLine(io);
            const account = await withDatabase(io, (db) =>
              store(db).create({
                username,
                password,
                scopes,
                rateLimit,
                active: !values.inactive,
                apiAccess: !values['no-api-access'],
              }),
            );
            printJson(io, accountJson(account));
            return;
          }
          case 'update': {
            const { values, positionals } = parse(rest, {
              active: { type: 'string' },
              'api-access': { type: 'string' },
              scopes: { type: 'string' },
              'rate-limit': { type: 'string' },
              'password-stdin': { type: 'boolean' },
            });
            const username = oneUsername(positionals, 'update');
            const changes: AccountChanges = {
              active: booleanOption('active', str(values.active)),
              apiAccess: booleanOption('api-access', str(values['api-access'])),
              scopes: scopesOption(str(values.scopes)),
              rateLimit: rateLimitOption(str(values['rate-limit'])),
              password: values['password-stdin'] ? await readPasswordLine(io) : undefined,
            };
            if (Object.values(changes).every((v) => v === undefined)) {
              throw new UsageError('account update: name at least one change');
            }
            printJson(io, accountJson(await withDatabase(io, (db) => store(db).update(username, changes))));
            return;
          }
          case 'list': {
            const { positionals } = parse(rest, {});
            if (positionals.length > 0) throw new UsageError('account list takes no arguments');
            const accounts = await withDatabase(io, (db) => store(db).list());
            printJson(io, accounts.map(accountJson));
            return;
          }
          case 'show':
          case 'delete':
          case 'revoke-tokens':
          case 'unlock': {
            const { positionals } = parse(rest, {});
            const username = oneUsername(positionals, verb);
            const account = await withDatabase(io, (db) => {
              const accounts = store(db);
              if (verb === 'show') return accounts.require(username);
              if (verb === 'delete') return accounts.delete(username);
              if (verb === 'unlock') return accounts.unlock(username);
              return accounts.revokeTokens(username);
            });
            const extra = verb === 'delete' ? { deleted: true } : verb === 'unlock' ? { unlocked: true } : {};
            printJson(io, { ...extra, ...accountJson(account) });
            return;
          }
          default:
            throw new UsageError(`Unknown verb "${verb}"`);
        }
      });
    },
  };
}

export const accountCommand: Command = createAccountCommand();
