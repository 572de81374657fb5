import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { redactUrl } from '../config.js';
import { createLogger } from '../logger.js';
import type { CliIo, Command } from './command.js';
import { processIo, StartupError } from './command.js';
import { databaseFailure, isDatabaseAccessError, listenFailure, oneLine, reason, tlsFailure } from './failures.js';
import { loadCliConfig } from './startup.js';
import { databaseLabel } from '../storage/database-url.js';
import { DatabaseUnavailableError } from '../storage/sql/database.js';
import { SHUTDOWN_MESSAGE, superviseWorkers } from './cluster.js';
import { limitHeapGrowth } from './heap.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

const HELP: CommandHelp = {
  name: 'serve',
  synopsis: '[--workers N]',
  about: `Serves the API (what npm start runs) until SIGTERM or SIGINT, which stop it gracefully: no new
connections, the requests in flight finish, the database is closed, exit 0.

--workers N (or AMBIENT_WORKERS, default 1) runs N server processes on one port (Node's cluster
module), for more than one core; they share everything through the database, so N > 1 needs
PostgreSQL (DATABASE_URL=postgres://...). Without REDIS_URL their rate limits and lockouts are counted
together in the parent process; with it, across hosts. A process that dies is replaced.

Configured by the environment (docs/configuration.md): HOST, PORT, DATABASE_URL, AMBIENT_PUBLIC_URL,
TLS_CERT_FILE and TLS_KEY_FILE, REDIS_URL, LOG_LEVEL and the AMBIENT_* settings. Logs are JSON lines on
stdout. A start-up failure (an invalid setting, an unreachable database or Redis, a port in use,
unreadable TLS files) prints one line on stderr and exits 1.`,
};

/**
 * Stop accepting, let in-flight requests finish, close the database. The first of the triggers starts
 * it; a later one exits at once, except in a cluster worker, which the primary and a service manager
 * (systemd signals every process of the unit) may both ask: there the later ones are ignored. A request
 * that never ends (a client sending its body a byte a minute, or reading nothing) would hold the process
 * for Node's five-minute request timeout: after `timeoutMs` it exits 1 all the same, saying so.
 */
function shutDownOn(app: FastifyInstance, timeoutMs: number): void {
  let closing = false;
  const shutDown = (trigger: string) => {
    if (closing) {
      if (!cluster.isWorker) process.exit(1);
      return;
    }
    closing = true;
    app.log.info({ signal: trigger }, 'shutting down');
    setTimeout(() => {
      app.log.error({ timeout_ms: timeoutMs }, 'shutdown did not finish in time: exiting with requests in flight');
      process.exit(1);
    }, timeoutMs).unref();
    // close() ends the connections idle at that moment; one whose request finishes later would stay
    // open for the keep-alive timeout (72 s) and hold the process: they are ended as they turn idle.
    setInterval(() => app.server.closeIdleConnections(), 250).unref();
    app.close().then(
      () => process.exit(0),
      (error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => shutDown(signal));
  if (cluster.isWorker) {
    process.on('message', (message) => {
      if (message === SHUTDOWN_MESSAGE) shutDown('primary');
    });
    // The primary is gone (killed): a worker left alone would serve on with nobody to replace it.
    process.on('disconnect', () => shutDown('primary gone'));
  }
}

/** `--workers N` from the arguments, or undefined when absent; anything else is a usage error. */
export function parseServeArguments(args: readonly string[]): { workers?: number } | string {
  if (args.length === 0) return {};
  const [flag, value, ...rest] = args[0].startsWith('--workers=')
    ? ['--workers', args[0].slice(10), ...args.slice(1)]
    : args;
  if (flag !== '--workers' || rest.length > 0) return `serve takes only --workers N, got "${args.join(' ')}"`;
  const workers = Number(value);
  if (value === undefined || !/^\d+$/.test(value) || workers < 1 || workers > 64) {
    return `--workers takes a number of processes from 1 to 64, got "${value ?? ''}"`;
  }
  return { workers };
}

/** Reads the TLS files first, so that a missing or unreadable one is named (assembleApp reads them again). */
function checkTlsFiles(config: Config): void {
  for (const [variable, path] of [
    ['TLS_CERT_FILE', config.tlsCertFile],
    ['TLS_KEY_FILE', config.tlsKeyFile],
  ] as const) {
    if (path === undefined) continue;
    try {
      readFileSync(path);
    } catch (error) {
      throw tlsFailure(error, variable, path);
    }
  }
}

/** What assembleApp's failure was: the database, Redis, the TLS pair, or else its own message. */
function assemblyFailure(config: Config, error: unknown): StartupError {
  const cause = (error as { cause?: unknown }).cause;
  if (config.redisUrl && /REDIS_URL/.test((error as Error).message ?? '')) {
    return new StartupError(
      `cannot connect to the Redis server named by REDIS_URL (${redactUrl(config.redisUrl)}): ${reason(cause ?? error)}`,
    );
  }
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^ERR_OSSL|^ERR_SSL/.test(code)) return tlsFailure(error);
  if (error instanceof DatabaseUnavailableError || isDatabaseAccessError(error)) {
    return databaseFailure(config.databaseUrl, error);
  }
  return new StartupError(`cannot start: ${oneLine(error)}`);
}

export function createServeCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'serve the API (what npm start runs)',
    help: HELP,
    async run(args) {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      const parsed = parseServeArguments(args);
      if (typeof parsed === 'string') return usageError(io, HELP, parsed);
      // The workers inherit the arguments and the environment: the notes on the configuration are the primary's to print.
      const config = loadCliConfig(io, {
        inform: (line) => (cluster.isWorker ? undefined : io.stderr.write(`${line}\n`)),
      });
      const workers = parsed.workers ?? config.workers;
      if (workers > 1 && !/^postgres(ql)?:/.test(config.databaseUrl)) {
        throw new StartupError(
          `--workers ${workers} (or AMBIENT_WORKERS) needs PostgreSQL: SQLite allows one writing process; set DATABASE_URL=postgres://... or run one process`,
        );
      }
      checkTlsFiles(config);
      const logger = createLogger(config.logLevel);
      if (workers > 1 && cluster.isPrimary) {
        return superviseWorkers({ workers, logger, shareRateLimits: !config.redisUrl });
      }
      limitHeapGrowth();
      // Loaded here, not with the CLI: the other commands (import, account...) and a cluster's primary
      // never need the server's modules, which took 0.2 s of every command's start.
      const { assembleApp } = await import('../assemble.js');
      // Before it is opened: opening a SQLite file that is not there creates it, empty.
      const database = databaseLabel(config.databaseUrl);
      let app: FastifyInstance;
      try {
        app = await assembleApp(config, logger);
      } catch (error) {
        throw assemblyFailure(config, error);
      }
      let address: string;
      try {
        address = await app.listen({ host: config.host, port: config.port });
      } catch (error) {
        await app.close().catch(() => undefined);
        throw listenFailure(config.host, config.port, error);
      }
      const accounts = app.accountCount ?? 0;
      app.log.info(
        {
          address,
          url: config.publicUrl,
          database: database.label,
          ...(database.new ? { database_created: true } : {}),
          accounts,
          tls: Boolean(config.tlsCertFile),
        },
        accounts > 0
          ? 'ambient-fhir listening'
          : 'ambient-fhir listening; the database holds no account yet: create one with ' +
              '`ambient-fhir account create <username> --password-stdin` (the password on standard input)',
      );
      shutDownOn(app, config.shutdownTimeoutMs);
      // The server runs until a signal closes it.
      return new Promise<number>(() => undefined);
    },
  };
}
