// Each request's logger (`request.log`, carrying its `req_id`), made only when the request logs
// something its level lets through. Fastify makes a pino child per request, and a child with the
// server's redaction costs 10-20 µs to make: most requests log nothing but their access line, which
// goes through the server's logger with the id among its fields (access-log.ts).
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilent, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** Fastify's `childLoggerFactory`: a logger that becomes `parent.child(bindings, options)` when first used. */
export function lazyRequestLogger(
  parent: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  // Not a pino logger (none configured: Fastify's silent stand-in): as Fastify would.
  if (typeof (parent as Partial<Logger>).isLevelEnabled !== 'function') return parent.child(bindings, options);
  return new LazyRequestLogger(parent as FastifyBaseLogger & Pick<Logger, 'isLevelEnabled'>, bindings, options);
}

/**
 * A class rather than an object literal of closures: one small object per request, and no getters in a
 * literal (V8 keeps what they close over, here the whole request, alive until the next full collection).
 */
class LazyRequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger & Pick<Logger, 'isLevelEnabled'>,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level as LevelWithSilent;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }

  silent(): void {}
  fatal(...args: unknown[]): void {
    this.log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.log('error', args);
  }
  warn(...args: unknown[]): void {
    this.log('warn', args);
  }
  info(...args: unknown[]): void {
    this.log('info', args);
  }
  debug(...args: unknown[]): void {
    this.log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.log('trace', args);
  }

  private log(level: Level, args: unknown[]): void {
    if (!this.made && !this.parent.isLevelEnabled(level)) return;
    (this.real()[level] as (...a: unknown[]) => void)(...args);
  }

  private real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }
}
