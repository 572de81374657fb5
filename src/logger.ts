import { pino } from 'pino';
import type { DestinationStream, Logger as PinoLogger } from 'pino';
import { pathOf } from './url-parts.js';

export type Logger = PinoLogger;

/** What a log line may know of a request (a FastifyRequest, or Node's raw request before routing). */
interface LoggedRequest {
  readonly method?: string;
  readonly url?: string;
  readonly ip?: string;
  readonly routeOptions?: { readonly url?: string };
}

/**
 * A request as log lines show it: method, path and route pattern, never the query string. Searches put
 * names, identifiers and diagnosis codes there, and a client that sends its credentials to the token
 * endpoint in the URL puts a password there. Fastify's own serializer logs `req.url` whole; this one
 * replaces it (see buildApp), should a line ever log a request. (Fastify's own per-request lines are off:
 * each request has one access line, src/http/access-log.ts.)
 */
export function requestLogFields(request: LoggedRequest): Record<string, unknown> {
  return {
    method: request.method,
    path: pathOf(request.url ?? ''),
    route: request.routeOptions?.url,
    remoteAddress: request.ip,
  };
}

export const LOG_SERIALIZERS = { req: requestLogFields };

/**
 * JSON lines on stdout (docs/api.md), or on `destination` (tests). Request logs carry method, path and
 * status only: query strings, headers and bodies are never logged, and these paths are censored should
 * a log call ever include them.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    serializers: LOG_SERIALIZERS,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'password', 'access_token', 'token', '*.password'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
