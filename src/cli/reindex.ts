// `ambient-fhir reindex [--type T]... [--batch-size N]`: rebuild the search index tables of DATABASE_URL
// from the stored resources, in batches (search/reindex.ts). Safe while a server runs on the database.
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createSearchCatalog } from '../search/engine.js';
import { reindex } from '../search/reindex.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { Command } from './command.js';

const USAGE = 'Usage: ambient-fhir reindex [--type <ResourceType>]... [--batch-size <n>]\n';

export const reindexCommand: Command = {
  summary: 'rebuild the search index tables from the stored resources: reindex [--type T]... [--batch-size N]',
  async run(args) {
    const types: string[] = [];
    let batchSize = 500;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (arg === '--help') {
        process.stdout.write(USAGE);
        return 0;
      }
      if (arg === '--type' && args[i + 1]) types.push(args[++i]);
      else if (arg === '--batch-size' && /^[1-9][0-9]{0,5}$/.test(args[i + 1] ?? '')) batchSize = Number(args[++i]);
      else {
        process.stderr.write(`Unknown argument ${arg}\n${USAGE}`);
        return 2;
      }
    }
    const registry = loadR4Definitions();
    const unknown = types.filter((t) => !registry.isResourceType(t));
    if (unknown.length > 0) {
      process.stderr.write(`Not R4 resource types: ${unknown.join(', ')}\n`);
      return 2;
    }
    const config = loadConfig();
    const db = openDatabase(config.databaseUrl);
    try {
      await migrate(db);
      const catalog = createSearchCatalog(registry, `${config.publicUrl}/fhir`);
      const tty = process.stderr.isTTY;
      const summary = await reindex(db, catalog, {
        types,
        batchSize,
        onProgress: tty ? (p) => process.stderr.write(`\r${p.resources} resources, ${p.rows} index rows `) : undefined,
      });
      if (tty) process.stderr.write('\n');
      const rate = summary.seconds > 0 ? Math.round(summary.resources / summary.seconds) : summary.resources;
      process.stdout.write(
        `Reindexed ${summary.resources} resources (${summary.rows} index rows) in ${summary.seconds.toFixed(1)} s (${rate} resources/s).\n`,
      );
      return 0;
    } finally {
      await db.close();
    }
  },
};
