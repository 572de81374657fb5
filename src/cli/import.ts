// `ambient-fhir import <files or folders>`: load Bundles and NDJSON (plain or gzipped) into DATABASE_URL.
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createFhirServices } from '../fhir/create-services.js';
import { refreshSearchStatistics } from '../search/engine.js';
import { Importer } from '../import/importer.js';
import type { ImportProgress, ImportSummary } from '../import/importer.js';
import { findSourceFiles } from '../import/sources.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { Command } from './command.js';

const MAX_FAILURES_SHOWN = 50;

function progressBar(progress: ImportProgress, startedAt: number): string {
  const width = 30;
  const done = Math.round((progress.filesDone / Math.max(1, progress.filesTotal)) * width);
  const seconds = (performance.now() - startedAt) / 1000;
  const rate = seconds > 0 ? Math.round(progress.resources / seconds) : 0;
  return `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${progress.filesDone}/${progress.filesTotal} files, ${progress.resources} resources, ${rate}/s `;
}

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

export const importCommand: Command = {
  summary: 'load transaction/batch Bundles and NDJSON files (plain or .gz): import <files or folders>',
  async run(args) {
    if (args.length === 0 || args.includes('--help')) {
      process.stderr.write('Usage: ambient-fhir import <file or folder> [...]\n');
      return args.length === 0 ? 2 : 0;
    }
    let files;
    try {
      files = findSourceFiles(args);
    } catch (error) {
      process.stderr.write(
        `Cannot read ${(error as NodeJS.ErrnoException).path ?? args.join(' ')}: ${(error as Error).message}\n`,
      );
      return 1;
    }
    if (files.length === 0) {
      process.stderr.write('No .json, .ndjson, .json.gz or .ndjson.gz files found.\n');
      return 1;
    }
    const config = loadConfig();
    const db = openDatabase(config.databaseUrl, config);
    try {
      await migrate(db);
      const importer = new Importer(createFhirServices(config, db, loadR4Definitions()));
      const startedAt = performance.now();
      const tty = process.stderr.isTTY;
      const summary = await importer.importFiles(
        files,
        tty ? (p) => process.stderr.write(progressBar(p, startedAt)) : undefined,
      );
      if (tty) process.stderr.write('\n');
      process.stdout.write(`${formatSummary(summary)}\n`);
      if (summary.resources > 0) {
        // What was loaded is loaded: stale statistics only make the first searches slower.
        await refreshSearchStatistics(db, true).catch((error: unknown) =>
          process.stderr.write(`Warning: could not refresh the database statistics: ${(error as Error).message}\n`),
        );
      }
      return summary.failures.length > 0 ? 1 : 0;
    } finally {
      await db.close();
    }
  },
};
