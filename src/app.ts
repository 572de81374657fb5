// buildApp(config) → a Fastify instance that is not listening yet (main.ts listens; tests inject).
import cors from '@fastify/cors';
import formbody from '@fastify/formbody';
import Fastify, { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { LOG_SERIALIZERS } from './logger.js';
import type { Logger } from './logger.js';
import type { AuthModule } from './auth/principal.js';
import type { Config } from './config.js';
import type { R4Registry } from './definitions/registry.js';
import { AppError } from './errors.js';
import { createFhirServices } from './services.js';
import { registerAccessLog } from './http/access-log.js';
import { BodyBytesInFlight, registerBodyBudget } from './http/body-budget.js';
import { registerBodyParsers } from './http/body-parsers.js';
import { registerCacheControl } from './http/cache-control.js';
import { registerCompression } from './http/compression.js';
import { CONSOLE_DIR, consoleRoutes, loadConsoleFiles } from './http/console.js';
import { errorHandler, sendError } from './http/error-handler.js';
import { authenticatedScope } from './http/authenticated.js';
import { exportRoutes } from './http/export-routes.js';
import { AsyncRequestService } from './export/async-requests.js';
import { ExportJobs } from './export/jobs.js';
import { assertInRouteTable, fhirRoutes } from './http/fhir-routes.js';
import { registerFhirFormats } from './http/fhir-reply.js';
import { fhirXml } from './fhir/xml/fhir-xml.js';
import { registerRequestIdHeader, REQUEST_ID_LOG_FIELD, requestIdFor } from './http/request-id.js';
import { serverTimeouts } from './http/server-timeouts.js';
import { clientErrorHandler } from './http/client-errors.js';
import { registerMetrics } from './metrics/metrics.js';
import { scribeRoutes } from './scribe/routes.js';
import { closeRefusedUpgrades, subscriptionRoutes } from './http/subscription-routes.js';
import type { SqlDatabase } from './storage/sql/database.js';
import { pathOf } from './url-parts.js';
import { lazyRequestLogger } from './http/request-logger.js';

export interface AppParts {
  readonly config: Config;
  /** An open, migrated database; the app closes it when it closes. */
  readonly db: SqlDatabase;
  readonly definitions: R4Registry;
  readonly auth: AuthModule;
  /** The JSON-lines logger (see logger.ts); tests leave it out to stay quiet. */
  readonly logger?: Logger;
  /** TLS_CERT_FILE + TLS_KEY_FILE contents: the listener speaks HTTPS. */
  readonly https?: { readonly cert: Buffer; readonly key: Buffer };
}

export async function buildApp(parts: AppParts): Promise<FastifyInstance> {
  const { config, db, definitions, auth } = parts;
  const timeouts = serverTimeouts(config);
  const app = Fastify({
    ...(parts.https
      ? { https: { cert: parts.https.cert, key: parts.https.key, ...timeouts.node } }
      : { http: { ...timeouts.node } }),
    requestTimeout: timeouts.requestTimeout,
    keepAliveTimeout: timeouts.keepAliveTimeout,
    // Whatever logger is given, requests are logged by path, never with their query string (logger.ts).
    ...(parts.logger
      ? { loggerInstance: parts.logger.child({}, { serializers: LOG_SERIALIZERS }) as FastifyBaseLogger }
      : { logger: false }),
    // One line per request, ours (http/access-log.ts), instead of Fastify's "incoming request" and
    // "request completed" pair; the request id under one name in every line of the request.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: REQUEST_ID_LOG_FIELD }),
    childLoggerFactory: lazyRequestLogger,
    requestIdHeader: false,
    genReqId: requestIdFor,
    bodyLimit: config.maxBodyBytes,
    // Errors Fastify raises before routing (a malformed URL, a path parameter too long) get the same
    // OperationOutcome (or OAuth error) as every other error.
    frameworkErrors: (error, request, reply) => errorHandler(error, request, reply),
    // And those Node's parser refuses before Fastify (headers too large, too slow, not HTTP).
    clientErrorHandler,
    // Only the named proxies: the client address is then the right-most one they do not vouch for.
    trustProxy: config.trustProxy.length > 0 ? [...config.trustProxy] : false,
    // FHIR ids may hold dots and dashes; keep routing exact and case-sensitive.
    routerOptions: { caseSensitive: true, ignoreTrailingSlash: true, maxParamLength: 200 },
  });

  app.setErrorHandler(errorHandler);
  // First, so that every route registered after it compresses its replies.
  await registerCompression(app);
  registerRequestIdHeader(app);
  registerAccessLog(app);
  closeRefusedUpgrades(app);
  const metrics = registerMetrics(app, config, db);
  registerBodyParsers(app);
  registerBodyBudget(app, new BodyBytesInFlight(config.maxBodyBytesInFlight), config.maxBodyBytes);
  registerCacheControl(app);
  await app.register(formbody, { bodyLimit: config.maxBodyBytes });
  if (config.corsOrigins.length > 0) {
    await app.register(cors, {
      origin: config.corsOrigins.includes('*') ? true : [...config.corsOrigins],
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
      allowedHeaders: [
        'Authorization',
        'Content-Type',
        'Accept',
        'If-Match',
        'If-None-Match',
        'If-None-Exist',
        'If-Modified-Since',
        'Prefer',
        // Binary writes (https://hl7.org/fhir/R4/http.html#binary).
        'X-Security-Context',
      ],
      exposedHeaders: [
        'Location',
        'Content-Location',
        'ETag',
        'Last-Modified',
        'RateLimit-Limit',
        'RateLimit-Remaining',
        'RateLimit-Reset',
        'Retry-After',
        'WWW-Authenticate',
        'X-Progress',
      ],
      maxAge: 600,
    });
  }

  const jobs = jobStore(config, db);
  const services = { ...createFhirServices(config, db, definitions), asyncRequests: jobs.asyncRequests };

  registerProbes(app, db);

  // The web console: its page and assets need no token (the API behind it does).
  const publicPath = new URL(config.publicUrl).pathname.replace(/\/+$/, '');
  await app.register(consoleRoutes, { files: loadConsoleFiles(CONSOLE_DIR, publicPath), publicPath });

  // JSON or XML, negotiated before authentication so that every answer of a FHIR route is in the client's format.
  const xml = fhirXml(definitions);
  registerFhirFormats(app, xml);

  // Every /fhir route is one of the table's (fhir/router.ts), registered with it.
  app.addHook('onRoute', (route) => assertInRouteTable(route, services.router.routes));
  await auth.registerRoutes(app);
  await app.register(authenticatedScope, {
    authenticator: auth.authenticator,
    routes: async (scope) => {
      await scope.register(fhirRoutes, { services, xml });
      await scope.register(exportRoutes, { services, definitions, catalog: services.search.catalog, db, ...jobs });
      await scope.register(scribeRoutes, { services, db, metrics });
      await scope.register(subscriptionRoutes, {
        services,
        db,
        delivered: (outcome) => metrics?.subscriptionDelivery(outcome.ok ? 'delivered' : 'failed'),
      });
    },
  });

  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const error =
      path === '/fhir' || path.startsWith('/fhir/')
        ? services.router.unmatched(path)
        : new AppError('unknown-route', `No endpoint at ${request.method} ${path}`);
    return sendError(request, reply, error);
  });

  app.addHook('onClose', async () => {
    await auth.close();
    await db.close();
  });
  return app;
}

/** Liveness (the process answers) and readiness (its database answers). */
function registerProbes(app: FastifyInstance, db: SqlDatabase): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await db.ping();
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable', error: 'database unreachable' });
    }
  });
}

/**
 * Export jobs and asynchronous requests share one job store (export/jobs.ts), run by the export plugin;
 * the FHIR routes start requests in it.
 */
function jobStore(config: Config, db: SqlDatabase): { jobs: ExportJobs; asyncRequests: AsyncRequestService } {
  const jobs = new ExportJobs(db, {
    limits: {
      maxActive: config.export.maxActive,
      maxActiveRequests: config.export.requestMaxActive,
      maxBytesPerAccount: config.export.maxBytesPerAccount,
    },
  });
  return { jobs, asyncRequests: new AsyncRequestService(jobs, config.publicUrl) };
}
