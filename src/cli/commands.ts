import { accountCommand } from './account.js';
import type { Command } from './command.js';
import { importCommand } from './import.js';
import { keysCommand } from './keys.js';
import { reindexCommand } from './reindex.js';
import { serveCommand } from './serve.js';
import { templateCommand } from './template.js';

/** Every command of the CLI, by name. */
export const COMMANDS: Record<string, Command> = {
  serve: serveCommand,
  account: accountCommand,
  keys: keysCommand,
  import: importCommand,
  reindex: reindexCommand,
  template: templateCommand,
};
