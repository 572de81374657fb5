// `ambient-fhir db copy --to <postgres-url>`: the database DATABASE_URL names, copied whole into an empty
// PostgreSQL database and verified table by table (storage/copy/copy-database.ts; docs/postgres.md).
import { redactUrl } from '../config.js';
import { copyDatabase, refreshCopiedStatistics, targetRefusal } from '../storage/copy/copy-database.js';
import type { CopyProgress, CopyReport } from '../storage/copy/copy-database.js';
import { TABLES_NOT_COPIED } from '../storage/copy/tables.js';
import { databaseLabel } from '../storage/database-url.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import { DatabaseUnavailableError } from '../storage/sql/database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { parseCommandArgs } from './arguments.js';
import type { CliIo, Command } from './command.js';
import { processIo, StartupError, UsageError } from './command.js';
import { databaseFailure, reason } from './failures.js';
import { loadCliConfig, openCliDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

const HELP: CommandHelp = {
  name: 'db',
  verbs: {
    copy: {
      synopsis: 'copy --to <postgres-url>',
      about: `Copies the whole database named by DATABASE_URL (every version of every resource, the search
index, accounts, signing keys, scribe records and templates; not export jobs) into the empty PostgreSQL
database --to names, then counts and checksums every table on both sides. The copy is one transaction
on the target, kept only when every table agrees: otherwise the target is left empty, as it was.
A target whose tables hold any row is refused. Stop the servers on DATABASE_URL first: a write during
the copy makes it differ. Progress goes to stderr, the table of counts and checksums to stdout.`,
    },
  },
  about: `Exit codes: 0 copied and verified, 1 refused, failed or different, 2 wrong usage.`,
};

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/** Progress on stderr: on a terminal one line per table, rewritten; elsewhere a line per tenth of a table. */
function progressPrinter(io: CliIo): (progress: CopyProgress) => void {
  const tty = Boolean(io.stderr.isTTY);
  let shown = '';
  let tenth = -1;
  return ({ phase, table, rows, total }) => {
    const key = `${phase} ${table}`;
    if (key !== shown) {
      if (tty && shown !== '') io.stderr.write('\n');
      shown = key;
      tenth = -1;
    }
    const line = `${phase === 'copy' ? 'copying' : 'verifying'} ${table}: ${rows}/${total} rows`;
    if (tty) {
      io.stderr.write(`\r${line}`);
      return;
    }
    const now = total === 0 ? 10 : Math.floor((rows * 10) / total);
    if (now > tenth && (rows > 0 || total === 0)) {
      tenth = now;
      io.stderr.write(`${line}\n`);
    }
  };
}

/** The table of counts and checksums (the first 16 digits of each; the whole are compared). */
export function formatReport(report: CopyReport): string {
  const header = ['table', 'source rows', 'target rows', 'source checksum', 'target checksum', ''];
  const lines = report.tables.map((t) => [
    t.table,
    String(t.source.rows),
    String(t.target.rows),
    t.source.checksum.slice(0, 16),
    t.target.checksum.slice(0, 16),
    t.agrees ? 'ok' : 'DIFFERS',
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...lines.map((l) => l[c].length)));
  const format = (cells: string[]) =>
    cells
      .map((cell, c) => (c === 1 || c === 2 ? cell.padStart(widths[c]) : cell.padEnd(widths[c])))
      .join('  ')
      .trimEnd();
  return [format(header), ...lines.map(format)].join('\n') + '\n';
}

async function openTarget(url: string): Promise<SqlDatabase> {
  const target = openDatabase(url);
  try {
    const refusal = await targetRefusal(target);
    if (refusal !== undefined) {
      throw new StartupError(
        `the database named by --to (${redactUrl(url)}) ${refusal}; db copy writes only into an empty database`,
      );
    }
    await migrate(target);
    return target;
  } catch (error) {
    await target.close().catch(() => undefined);
    throw error instanceof StartupError ? error : databaseFailure(url, error, '--to');
  }
}

async function copy(io: CliIo, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { to: { type: 'string' } });
  if (positionals.length > 0) throw new UsageError(`db copy takes no arguments but --to (got "${positionals[0]}")`);
  const to = values.to;
  if (to === undefined || to === '') throw new UsageError('db copy needs --to <postgres-url>');
  if (!POSTGRES_URL.test(to)) {
    throw new UsageError(`--to must be a postgres:// or postgresql:// URL, got "${redactUrl(to)}"`);
  }
  const config = loadCliConfig(io);
  const { label, new: missing } = databaseLabel(config.databaseUrl);
  if (missing) throw new StartupError(`there is no database to copy: DATABASE_URL names ${label}, which holds none`);
  if (config.databaseUrl === to) throw new StartupError('--to names the database DATABASE_URL names');
  const source = await openCliDatabase(config);
  try {
    io.stderr.write(`database: ${label}\n`);
    const target = await openTarget(to);
    try {
      io.stderr.write(`copying to ${redactUrl(to)}; not copied: ${Object.keys(TABLES_NOT_COPIED).join(', ')}\n`);
      let report: CopyReport;
      try {
        report = await copyDatabase(source, target, { onProgress: progressPrinter(io) });
      } catch (error) {
        if (io.stderr.isTTY) io.stderr.write('\n');
        // A connection lost comes wrapped (storage/sql/database.ts): its cause says what happened.
        const cause = error instanceof DatabaseUnavailableError && error.cause !== undefined ? error.cause : error;
        throw new StartupError(`the copy stopped and nothing was kept in the target: ${reason(cause)}`);
      }
      if (io.stderr.isTTY) io.stderr.write('\n');
      io.stdout.write(formatReport(report));
      if (report.agrees) await refreshStatistics(io, target);
      return summarise(io, report);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

/** VACUUM (ANALYZE) of the copy: a failure leaves it to autovacuum (the copy is committed and verified). */
async function refreshStatistics(io: CliIo, target: SqlDatabase): Promise<void> {
  io.stderr.write('refreshing the planner statistics of the copy (VACUUM (ANALYZE))\n');
  try {
    await refreshCopiedStatistics(target);
  } catch (error) {
    io.stderr.write(
      `warning: VACUUM (ANALYZE) on the copy failed (${reason(error)}); autovacuum will get there, or run it yourself\n`,
    );
  }
}

function summarise(io: CliIo, report: CopyReport): number {
  const rows = report.tables.reduce((sum, t) => sum + t.source.rows, 0);
  const resources = report.tables.find((t) => t.table === 'resource')?.source.rows ?? 0;
  const rate = report.seconds > 0 ? Math.round(resources / report.seconds) : resources;
  if (report.agrees) {
    io.stdout.write(
      `Copied ${rows} rows of ${report.tables.length} tables (${resources} resources) in ${report.seconds.toFixed(1)} s ` +
        `(${rate} resources/s); every count and checksum agrees.\n` +
        Object.entries(TABLES_NOT_COPIED)
          .map(([table, why]) => `Not copied: ${table} (${why}).\n`)
          .join(''),
    );
    return 0;
  }
  const differing = report.tables.filter((t) => !t.agrees).map((t) => t.table);
  io.stderr.write(
    `ambient-fhir db: the copy differs from the source in ${differing.join(', ')}; nothing was kept in the target. ` +
      'Was a server still writing to DATABASE_URL? Stop it and run db copy again.\n',
  );
  return 1;
}

export function createDbCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'copy the whole database into an empty PostgreSQL database: db copy --to <postgres-url>',
    help: HELP,
    async run(args) {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      const [verb, ...rest] = args;
      try {
        return await copy(io, rest);
      } catch (error) {
        if (error instanceof UsageError) return usageError(io, HELP, error.message, verb);
        throw error;
      }
    },
  };
}
