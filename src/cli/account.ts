// `ambient-fhir account <verb>`: service-account administration (docs/api.md "Service accounts"). A thin
// shell around auth/accounts.ts: parse arguments, open DATABASE_URL, call the store, print JSON.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { AccountStore, accountJson } from '../auth/accounts.js';
import type { AccountChanges } from '../auth/accounts.js';
import { loadR4Definitions } from '../definitions/registry.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { parseCommandArgs } from './arguments.js';
import type { CliIo, Command } from './command.js';
import { processIo, StartupError, UsageError } from './command.js';
import { oneLine } from './failures.js';
import { withDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

/**
 * Runs a command body, turning refusals into messages on stderr and exit codes: a wrong use prints the
 * problem and the usage of the command (or of its verb) and exits 2; anything else prints one line, 1.
 */
export async function runAdmin(io: CliIo, help: CommandHelp, verb: string, body: () => Promise<void>): Promise<number> {
  try {
    await body();
    return 0;
  } catch (error) {
    if (error instanceof UsageError) return usageError(io, help, error.message, verb);
    io.stderr.write(`${error instanceof StartupError ? `ambient-fhir ${help.name}: ` : 'Error: '}${oneLine(error)}\n`);
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

const HELP: CommandHelp = {
  name: 'account',
  verbs: {
    create: {
      synopsis:
        'create <username> (--password-stdin | --jwks-file <path>) [--scopes "<s> <s>"] [--rate-limit <per-minute>] [--inactive] [--no-api-access]',
      about: `Creates a service account. The password is read from standard input (one line), e.g.
printf '%s\\n' "$PASSWORD" | ambient-fhir account create alice --password-stdin
Default scopes: "system/*.cruds scribe.read scribe.write"; --rate-limit 0 (the default) means no limit;
--inactive and --no-api-access create it unable to get tokens. A second create of a username is refused.
--jwks-file registers public keys (a JWKS of RS384 and/or ES384 public keys, each with a kid) for SMART
Backend Services: the username is the client_id. Created with --jwks-file and without --password-stdin,
the account gets a random password nobody knows (it gets tokens by client assertion only).`,
    },
    update: {
      synopsis:
        'update <username> [--active true|false] [--api-access true|false] [--scopes "..."] [--rate-limit N] [--password-stdin] [--jwks-file <path>]',
      about: `Changes only what is named. A new password, --active false and --api-access false also end the
account's tokens (as revoke-tokens): reactivating it later does not bring them back. --jwks-file replaces
the account's registered public keys (SMART Backend Services).`,
    },
    list: { synopsis: 'list', about: 'Prints every account as a JSON array.' },
    show: {
      synopsis: 'show <username>',
      about: 'Prints the account (with the kid and alg of each registered public key, as client_keys).',
    },
    delete: {
      synopsis: 'delete <username>',
      about: 'Deletes the account; its tokens are refused from the next request on.',
    },
    'revoke-tokens': {
      synopsis: 'revoke-tokens <username>',
      about: 'Every token issued to the account before now is refused from the next request on.',
    },
    unlock: {
      synopsis: 'unlock <username>',
      about: `Clears the account's failed-login lockout (for every client address) in every server process on
the database, from its next token request on.`,
    },
  },
  about: `Works on the database named by DATABASE_URL, whether or not a server runs on it; a running server
sees the change on its next request. Prints the account as JSON (never the password or its hash).
Exit codes: 0 done, 1 refused (e.g. an unknown username), 2 wrong usage.`,
};

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

/** The text of a --jwks-file (checked by the account store: public RS384/ES384 keys only). */
async function jwksFile(path: string | undefined): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new Error(`Cannot read the JWKS file ${path}: ${(error as Error).message}`);
  }
}

export function createAccountCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'administer service accounts (create, update, list, show, delete, revoke-tokens, unlock)',
    help: HELP,
    async run(args: string[]): Promise<number> {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      const [verb, ...rest] = args;
      return runAdmin(io, HELP, verb, async () => {
        const store = (db: SqlDatabase) => new AccountStore(db, { isResourceType: resourceTypeCheck() });
        switch (verb) {
          case 'create': {
            const { values, positionals } = parseCommandArgs(rest, {
              'password-stdin': { type: 'boolean' },
              scopes: { type: 'string' },
              'rate-limit': { type: 'string' },
              inactive: { type: 'boolean' },
              'no-api-access': { type: 'boolean' },
              'jwks-file': { type: 'string' },
            });
            const username = oneUsername(positionals, 'create');
            const jwksPath = str(values['jwks-file']);
            if (!values['password-stdin'] && jwksPath === undefined) {
              throw new UsageError(
                'account create needs --password-stdin (the password is read from standard input) or --jwks-file',
              );
            }
            const rateLimit = rateLimitOption(str(values['rate-limit']));
            const scopes = scopesOption(str(values.scopes));
            const jwks = await jwksFile(jwksPath);
            // A client with keys only: a password nobody knows, never printed, so only assertions get tokens.
            const password = values['password-stdin']
              ? await readPasswordLine(io)
              : randomBytes(32).toString('base64url');
            const account = await withDatabase(io, (db) =>
              store(db).create({
                username,
                password,
                scopes,
                rateLimit,
                active: !values.inactive,
                apiAccess: !values['no-api-access'],
                jwks,
              }),
            );
            printJson(io, accountJson(account));
            return;
          }
          case 'update': {
            const { values, positionals } = parseCommandArgs(rest, {
              active: { type: 'string' },
              'api-access': { type: 'string' },
              scopes: { type: 'string' },
              'rate-limit': { type: 'string' },
              'password-stdin': { type: 'boolean' },
              'jwks-file': { type: 'string' },
            });
            const username = oneUsername(positionals, 'update');
            const changes: AccountChanges = {
              active: booleanOption('active', str(values.active)),
              apiAccess: booleanOption('api-access', str(values['api-access'])),
              scopes: scopesOption(str(values.scopes)),
              rateLimit: rateLimitOption(str(values['rate-limit'])),
              password: values['password-stdin'] ? await readPasswordLine(io) : undefined,
              jwks: await jwksFile(str(values['jwks-file'])),
            };
            if (Object.values(changes).every((v) => v === undefined)) {
              throw new UsageError('account update: name at least one change');
            }
            printJson(io, accountJson(await withDatabase(io, (db) => store(db).update(username, changes))));
            return;
          }
          case 'list': {
            const { positionals } = parseCommandArgs(rest, {});
            if (positionals.length > 0) throw new UsageError('account list takes no arguments');
            const accounts = await withDatabase(io, (db) => store(db).list());
            printJson(io, accounts.map(accountJson));
            return;
          }
          case 'show':
          case 'delete':
          case 'revoke-tokens':
          case 'unlock': {
            const { positionals } = parseCommandArgs(rest, {});
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
