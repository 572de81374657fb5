import { pino } from 'pino';
import type { Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/**
 * JSON lines on stdout (CONTRACT.md). Request logs carry method, URL and status only: headers and bodies
 * are never logged, and these paths are censored should a log call ever include them.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'password', 'access_token', 'token', '*.password'],
      censor: '[redacted]',
    },
  });
}
