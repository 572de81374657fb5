import type { FastifyInstance } from 'fastify';
import { assembleApp } from '../assemble.js';
import { loadConfig, redactUrl } from '../config.js';
import { createLogger } from '../logger.js';
import type { Command } from './command.js';

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

export const serveCommand: Command = {
  summary: 'serve the API (what npm start runs)',
  async run() {
    const config = loadConfig();
    const logger = createLogger(config.logLevel);
    const app = await assembleApp(config, logger);
    const address = await app.listen({ host: config.host, port: config.port });
    app.log.info(
      { address, url: config.publicUrl, database: redactUrl(config.databaseUrl), tls: Boolean(config.tlsCertFile) },
      'ambient-fhir listening',
    );
    shutDownOn(['SIGTERM', 'SIGINT'], app);
    // The server runs until a signal closes it.
    return new Promise<number>(() => undefined);
  },
};
