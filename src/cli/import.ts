// `ambient-fhir import <files or folders>`: load Bundles and NDJSON (plain or gzipped) into DATABASE_URL.
import { parseCommandArgs } from './arguments.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createFhirServices } from '../services.js';
import { refreshSearchStatistics } from '../search/engine.js';
import { Importer } from '../import/importer.js';
import { ValidationPool } from '../import/validation-pool.js';
import type { ImportSummary } from '../import/importer.js';
import { DEFAULT_PROGRESS_EVERY_MS, progressReporter } from '../import/progress.js';
import { findSourceFiles } from '../import/sources.js';
import type { CliIo, Command } from './command.js';
import { processIo } from './command.js';
import { limitHeapGrowth } from './heap.js';
import { loadCliConfig, openCliDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

const MAX_FAILURES_SHOWN = 50;
/**
 * NDJSON transactions in flight where the database writes them in parallel (PostgreSQL): while it writes
 * one chunk, the importer validates and indexes the next (docs/benchmarks.md, "Import").
 */
const IMPORT_TRANSACTIONS_IN_FLIGHT = 4;
/**
 * NDJSON lines per transaction where one transaction is written at a time (SQLite): a page that several
 * resources of a transaction change is written to the WAL once per commit, so larger ones write less
 * (issue 13: 1,000 lines wrote half the WAL frames of 250). Bounded by AMBIENT_MAX_BUNDLE_ENTRIES.
 */
const SERIAL_IMPORT_CHUNK = 1000;

const HELP: CommandHelp = {
  name: 'import',
  synopsis: '[--progress-every <seconds>] <file or folder> [...]',
  about: `Loads transaction/batch Bundles and NDJSON files (plain or gzipped: *.json, *.ndjson, *.json.gz,
*.ndjson.gz; folders are read recursively) into the database named by DATABASE_URL, through the
transaction interaction (validated, indexed and versioned as through the API).

Progress goes to stderr: a bar on a terminal, otherwise a line (files, resources, resources/s) every
--progress-every seconds (default ${DEFAULT_PROGRESS_EVERY_MS / 1000}; 0: on every update). The summary goes to stdout.
Exit codes: 0 everything loaded, 1 something failed (each failure is listed), 2 wrong usage.`,
};

export function formatSummary(summary: ImportSummary): string {
  const rate = summary.seconds > 0 ? Math.round(summary.resources / summary.seconds) : summary.resources;
  const lines = [
    `Loaded ${summary.resources} resources from ${summary.files} files in ${summary.seconds.toFixed(1)} s (${rate} resources/s).`,
  ];
  if (summary.failures.length > 0) {
    lines.push(`${summary.failures.length} failed:`);
    for (const failure of summary.failures.slice(0, MAX_FAILURES_SHOWN)) {
      const where =
        failure.line !== undefined ? `:${failure.line}` : failure.entry !== undefined ? ` entry ${failure.entry}` : '';
      lines.push(`  ${failure.file}${where}: ${failure.reason}`);
    }
    if (summary.failures.length > MAX_FAILURES_SHOWN)
      lines.push(`  ... and ${summary.failures.length - MAX_FAILURES_SHOWN} more`);
  }
  return lines.join('\n');
}

export function createImportCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'load transaction/batch Bundles and NDJSON files (plain or .gz): import <files or folders>',
    help: HELP,
    async run(args) {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      let parsed;
      try {
        parsed = parseCommandArgs(args, { 'progress-every': { type: 'string' } });
      } catch (error) {
        return usageError(io, HELP, (error as Error).message);
      }
      const every = parsed.values['progress-every'];
      if (every !== undefined && !/^\d+(\.\d+)?$/.test(every)) {
        return usageError(io, HELP, `--progress-every takes a number of seconds, got "${every}"`);
      }
      const paths = parsed.positionals;
      if (paths.length === 0) return usageError(io, HELP, 'import needs at least one file or folder');
      let files;
      try {
        files = findSourceFiles(paths);
      } catch (error) {
        io.stderr.write(
          `Cannot read ${(error as NodeJS.ErrnoException).path ?? paths.join(' ')}: ${(error as Error).message}\n`,
        );
        return 1;
      }
      if (files.length === 0) {
        io.stderr.write('No .json, .ndjson, .json.gz or .ndjson.gz files found.\n');
        return 1;
      }
      // Before the workers start: the flag holds for each thread's heap created after it.
      limitHeapGrowth();
      const config = loadCliConfig(io);
      const db = await openCliDatabase(config, { ...config, bulkLoad: true });
      const validationPool = new ValidationPool(undefined, `${config.publicUrl}/fhir`);
      try {
        const parallel = db.dialect.concurrentWriters;
        const importer = new Importer(createFhirServices(config, db, loadR4Definitions()), {
          concurrency: parallel ? IMPORT_TRANSACTIONS_IN_FLIGHT : 1,
          chunkSize: parallel ? undefined : SERIAL_IMPORT_CHUNK,
          validationPool,
          database: db,
        });
        const progress = progressReporter({
          tty: Boolean(io.stderr.isTTY),
          write: (text) => io.stderr.write(text),
          everyMs: every !== undefined ? Number(every) * 1000 : DEFAULT_PROGRESS_EVERY_MS,
        });
        const summary = await importer.importFiles(files, (p) => progress.update(p));
        progress.finish();
        io.stdout.write(`${formatSummary(summary)}\n`);
        if (summary.resources > 0) {
          // What was loaded is loaded: stale statistics only make the first searches slower.
          await refreshSearchStatistics(db, true).catch((error: unknown) =>
            io.stderr.write(`Warning: could not refresh the database statistics: ${(error as Error).message}\n`),
          );
        }
        return summary.failures.length > 0 ? 1 : 0;
      } finally {
        await validationPool.close();
        await db.close();
      }
    },
  };
}
