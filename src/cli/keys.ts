// `ambient-fhir keys <verb>`: the JWT signing keys (CONTRACT.md). `rotate` adds a key that signs every
// new token from then on, in every server process on the database; tokens signed by older keys stay
// valid until they expire, because every key in use stays published and trusted. `retire` takes an older
// key out of use: its tokens are refused from the next request on.
import { addSigningKey, listSigningKeys, retireSigningKey } from '../auth/signing-keys.js';
import type { SigningKeyInfo } from '../auth/signing-keys.js';
import { printJson, processIo, runAdmin, withDatabase } from './account.js';
import type { CliIo } from './account.js';
import type { Command } from './command.js';
import { UsageError } from './command.js';

const USAGE = `Usage: ambient-fhir keys <verb>

  rotate        create a new signing key; it signs new tokens, older tokens stay valid until they expire
  list          the signing keys (kid, algorithm, created_at, retired_at; never the private key)
  retire <kid>  take a key out of use: tokens it signed are refused from the next request on, and it
                leaves the JWKS; the current signing key cannot be retired (rotate first)

Works on the database named by DATABASE_URL.
`;

const keyJson = (key: SigningKeyInfo) => ({
  kid: key.kid,
  algorithm: key.algorithm,
  created_at: key.createdAt,
  ...(key.retiredAt ? { retired_at: key.retiredAt } : {}),
});

export function createKeysCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'manage the token signing keys (rotate, list, retire)',
    async run(args: string[]): Promise<number> {
      const [verb, ...rest] = args;
      if (verb === undefined || verb === 'help' || verb === '--help' || verb === '-h') {
        (verb === undefined ? io.stderr : io.stdout).write(USAGE);
        return verb === undefined ? 2 : 0;
      }
      if (rest.includes('--help') || rest.includes('-h')) {
        io.stdout.write(USAGE);
        return 0;
      }
      return runAdmin(io, USAGE, async () => {
        // No verb takes options, and a kid (a base64url thumbprint) may begin with "-": every argument is
        // positional (an option parser would take `-R...` for an unknown option).
        const positionals = rest[0] === '--' ? rest.slice(1) : rest;
        const wanted = verb === 'retire' ? 1 : 0;
        if (positionals.length !== wanted) {
          throw new UsageError(wanted === 1 ? 'keys retire takes exactly one kid' : `keys ${verb} takes no arguments`);
        }
        if (verb === 'rotate') {
          printJson(io, keyJson(await withDatabase(io, (db) => addSigningKey(db))));
        } else if (verb === 'retire') {
          printJson(io, keyJson(await withDatabase(io, (db) => retireSigningKey(db, positionals[0]))));
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
