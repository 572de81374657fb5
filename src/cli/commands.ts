import { createAccountCommand } from './account.js';
import type { CliIo, Command } from './command.js';
import { processIo } from './command.js';
import { createDbCommand } from './db.js';
import { createImportCommand } from './import.js';
import { createKeysCommand } from './keys.js';
import { createReindexCommand } from './reindex.js';
import { createServeCommand } from './serve.js';
import { createTemplateCommand } from './template.js';

/** Every command of the CLI, by name, writing to io (tests pass their own). */
export function createCommands(io: CliIo = processIo()): Readonly<Record<string, Command>> {
  return {
    serve: createServeCommand(io),
    account: createAccountCommand(io),
    keys: createKeysCommand(io),
    import: createImportCommand(io),
    reindex: createReindexCommand(io),
    template: createTemplateCommand(io),
    db: createDbCommand(io),
  };
}
