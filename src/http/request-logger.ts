// Each request's logger (`request.log`, carrying its `req_id`), made only when the request logs
// something its level lets through. Fastify makes a pino child per request, and a child with the
// server's redaction costs 10-20 µs to make: most requests log nothing but their access line, which
// goes through the server's logger with the id among its fields (access-log.ts).
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilent, Logger } from 'pino';

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

/** Fastify's `childLoggerFactory`: a logger that becomes `parent.child(bindings, options)` when first used. */
export function lazyRequestLogger(
  parent: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  const pinoParent = parent as Partial<Logger>;
  // Not a pino logger (none configured: Fastify's silent stand-in): as Fastify would.
  if (typeof pinoParent.isLevelEnabled !== 'function') return parent.child(bindings, options);
  let child: FastifyBaseLogger | undefined;
  const real = (): FastifyBaseLogger => (child ??= parent.child(bindings, options));
  const logger = {
    get level(): string {
      return child?.level ?? parent.level;
    },
    set level(level: string) {
      real().level = level as LevelWithSilent;
    },
    child: (more: Bindings, moreOptions?: ChildLoggerOptions) => real().child(more, moreOptions),
    silent: () => undefined,
  } as unknown as Record<(typeof LEVELS)[number], (...args: unknown[]) => void> & FastifyBaseLogger;
  for (const level of LEVELS) {
    logger[level] = (...args: unknown[]) => {
      if (!child && !pinoParent.isLevelEnabled!(level)) return;
      (real()[level] as (...a: unknown[]) => void)(...args);
    };
  }
  return logger;
}
