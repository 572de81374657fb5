import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { assembleApp } from '../assemble.js';
import type { Config } from '../config.js';
import { redactUrl } from '../config.js';
import { createLogger } from '../logger.js';
import type { CliIo, Command } from './command.js';
import { processIo, StartupError } from './command.js';
import { databaseFailure, isDatabaseAccessError, listenFailure, oneLine, reason, tlsFailure } from './failures.js';
import { loadCliConfig } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp, usageError } from './usage.js';

const HELP: CommandHelp = {
  name: 'serve',
  synopsis: '',
  about: `Serves the API (what npm start runs) until SIGTERM or SIGINT, which stop it gracefully: no new
connections, the requests in flight finish, the database is closed, exit 0.

Configured by the environment (README "Configuration"): HOST, PORT, DATABASE_URL, AMBIENT_PUBLIC_URL,
TLS_CERT_FILE and TLS_KEY_FILE, REDIS_URL, LOG_LEVEL and the AMBIENT_* settings. Logs are JSON lines on
stdout. A start-up failure (an invalid setting, an unreachable database or Redis, a port in use,
unreadable TLS files) prints one line on stderr and exits 1.`,
};

/** Stop accepting, let in-flight requests finish, close the database; a second signal exits at once. */
function shutDownOn(signals: NodeJS.Signals[], app: FastifyInstance): void {
  let closing = false;
  for (const signal of signals) {
    process.on(signal, () => {
      if (closing) process.exit(1);
      closing = true;
      app.log.info({ signal }, 'shutting down');
      app.close().then(
        () => process.exit(0),
        (error: unknown) => {
          app.log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
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
  if (isDatabaseAccessError(error)) return databaseFailure(config.databaseUrl, error);
  return new StartupError(`cannot start: ${oneLine(error)}`);
}

export function createServeCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'serve the API (what npm start runs)',
    help: HELP,
    async run(args) {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      if (args.length > 0) return usageError(io, HELP, `serve takes no arguments, got "${args.join(' ')}"`);
      const config = loadCliConfig(io, { inform: (line) => io.stderr.write(`${line}\n`) });
      checkTlsFiles(config);
      const logger = createLogger(config.logLevel);
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
      app.log.info(
        { address, url: config.publicUrl, database: redactUrl(config.databaseUrl), tls: Boolean(config.tlsCertFile) },
        'ambient-fhir listening',
      );
      shutDownOn(['SIGTERM', 'SIGINT'], app);
      // The server runs until a signal closes it.
      return new Promise<number>(() => undefined);
    },
  };
}
