// `ambient-fhir keys <verb>`: the JWT signing keys (CONTRACT.md). `rotate` adds a key that signs every
// new token from then on, in every server process on the database; tokens signed by older keys stay
// valid until they expire, because every key stays published and trusted.
import { parseArgs } from 'node:util';
import { addSigningKey, listSigningKeys } from '../auth/signing-keys.js';
import type { SigningKeyInfo } from '../auth/signing-keys.js';
import { printJson, processIo, runAdmin, withDatabase } from './account.js';
import type { CliIo } from './account.js';
import type { Command } from './command.js';
import { UsageError } from './command.js';

const USAGE = `Usage: ambient-fhir keys <verb>

  rotate   create a new signing key; it signs new tokens, older tokens stay valid until they expire
  list     the signing keys (kid, algorithm, created_at; never the private key)

Works on the database named by DATABASE_URL.
`;

const keyJson = (key: SigningKeyInfo) => ({ kid: key.kid, algorithm: key.algorithm, created_at: key.createdAt });

export function createKeysCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'manage the token signing keys (rotate, list)',
    async run(args: string[]): Promise<number> {
      const [verb, ...rest] = args;
      if (verb === undefined || verb === 'help' || verb === '--help' || verb === '-h') {
        (verb === undefined ? io.stderr : io.stdout).write(USAGE);
        return verb === undefined ? 2 : 0;
      }
      return runAdmin(io, USAGE, async () => {
        try {
          const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
          if (positionals.length > 0) throw new UsageError(`keys ${verb} takes no arguments`);
        } catch (error) {
          throw error instanceof UsageError ? error : new UsageError((error as Error).message);
        }
        if (verb === 'rotate') {
          printJson(io, keyJson(await withDatabase(io, (db) => addSigningKey(db))));
        } else if (verb === 'list') {
          printJson(io, (await withDatabase(io, (db) => listSigningKeys(db))).map(keyJson));
        } else {
          throw new UsageError(`Unknown verb "${verb}"`);
        }
      });
    },
  };
}

export const keysCommand: Command = createKeysCommand();
