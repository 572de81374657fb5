// `ambient-fhir reindex [--type T]... [--batch-size N]`: rebuild the search index tables of DATABASE_URL
// from the stored resources, in batches (search/reindex.ts). Safe while a server runs on the database.
import { loadR4Definitions } from '../definitions/registry.js';
import { createSearchCatalog } from '../search/engine.js';
import { reindex } from '../search/reindex.js';
import type { CliIo, Command } from './command.js';
import { processIo } from './command.js';
import { loadCliConfig, openCliDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

const HELP: CommandHelp = {
  name: 'reindex',
  synopsis: '[--type <ResourceType>]... [--batch-size <n>]',
  about: `Rebuilds the search index tables of the database named by DATABASE_URL from the stored resources,
in batches of --batch-size resources (default 500); --type (repeatable) limits it to those resource types.
Safe while a server runs on the database. Progress goes to stderr on a terminal, the summary to stdout.
Exit codes: 0 done, 1 failed, 2 wrong usage.`,
};

export function createReindexCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'rebuild the search index tables from the stored resources: reindex [--type T]... [--batch-size N]',
    help: HELP,
    async run(args) {
      const types: string[] = [];
      let batchSize = 500;
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      for (let i = 0; i < args.length; i++) {
        const arg = args[i];
        if (arg === '--type' && args[i + 1]) types.push(args[++i]);
        else if (arg === '--batch-size' && /^[1-9][0-9]{0,5}$/.test(args[i + 1] ?? '')) batchSize = Number(args[++i]);
        else return usageError(io, HELP, `Unknown argument ${arg}`);
      }
      const registry = loadR4Definitions();
      const unknown = types.filter((t) => !registry.isResourceType(t));
      if (unknown.length > 0) {
        return usageError(io, HELP, `Not R4 resource types: ${unknown.join(', ')}`);
      }
      const config = loadCliConfig(io);
      const db = await openCliDatabase(config);
      try {
        const catalog = createSearchCatalog(registry, `${config.publicUrl}/fhir`);
        const tty = Boolean(io.stderr.isTTY);
        const summary = await reindex(db, catalog, {
          types,
          batchSize,
          onProgress: tty ? (p) => io.stderr.write(`\r${p.resources} resources, ${p.rows} index rows `) : undefined,
        });
        if (tty) io.stderr.write('\n');
        const rate = summary.seconds > 0 ? Math.round(summary.resources / summary.seconds) : summary.resources;
        io.stdout.write(
          `Reindexed ${summary.resources} resources (${summary.rows} index rows) in ${summary.seconds.toFixed(1)} s (${rate} resources/s).\n`,
        );
        return 0;
      } finally {
        await db.close();
      }
    },
  };
}
