// `ambient-fhir keys <verb>`: the JWT signing keys (docs/api.md). `rotate` adds a key that signs every
// new token from then on, in every server process on the database; tokens signed by older keys stay
// valid until they expire, because every key in use stays published and trusted. `retire` takes an older
// key out of use: its tokens are refused from the next request on.
import { addSigningKey, listSigningKeys, retireSigningKey } from '../auth/signing-keys.js';
import type { SigningKeyInfo } from '../auth/signing-keys.js';
import { printJson, runAdmin } from './account.js';
import type { CliIo, Command } from './command.js';
import { processIo, UsageError } from './command.js';
import { withDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp } from './usage.js';

const HELP: CommandHelp = {
  name: 'keys',
  verbs: {
    rotate: {
      synopsis: 'rotate',
      about: 'Creates a new signing key; it signs new tokens, older tokens stay valid until they expire.',
    },
    list: {
      synopsis: 'list',
      about: 'Prints the signing keys (kid, algorithm, created_at, retired_at; never the private key).',
    },
    retire: {
      synopsis: 'retire <kid>',
      about: `Takes a key out of use: tokens it signed are refused from the next request on, and it leaves the
JWKS. The current signing key cannot be retired (rotate first). A kid starting with "-" may follow "--".`,
    },
  },
  about: `Works on the database named by DATABASE_URL; every server process on it sees the change on its next
request. Prints JSON. Exit codes: 0 done, 1 refused, 2 wrong usage.`,
};

const keyJson = (key: SigningKeyInfo) => ({
  kid: key.kid,
  algorithm: key.algorithm,
  created_at: key.createdAt,
  ...(key.retiredAt ? { retired_at: key.retiredAt } : {}),
});

export function createKeysCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'manage the token signing keys (rotate, list, retire)',
    help: HELP,
    async run(args: string[]): Promise<number> {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      const [verb, ...rest] = args;
      return runAdmin(io, HELP, verb, async () => {
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
