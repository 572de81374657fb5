// Bulk Data export over HTTP (https://hl7.org/fhir/uv/bulkdata/STU2/export.html): the kick-off at the
// system, Patient and Group levels, the status URL (GET: progress or manifest, DELETE: cancel) and the
// NDJSON files; and the status URLs of asynchronous requests (async-routes.ts), whose jobs the same
// runner runs. The thin adapter: the FHIR side lives in export/ (service.ts, runner.ts).
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { AccountStore } from '../auth/accounts.js';
import { currentPrincipal } from '../auth/authenticator.js';
import type { R4Registry } from '../definitions/registry.js';
import { patientCompartmentParams } from '../export/compartment.js';
import type { ExportJobs } from '../export/jobs.js';
import type { AsyncRequestService } from '../export/async-requests.js';
import { asyncRequestHandlers, replyUnfinished } from './async-routes.js';
import { kickoffPairs, NDJSON, parsePrefer } from '../export/kickoff.js';
import { ExportRunner } from '../export/runner.js';
import { ExportService } from '../export/service.js';
import type { ExportLevel } from '../export/selection.js';
import { FHIR_ROUTES } from '../fhir/router.js';
import { fhirUrl } from '../fhir/routing.js';
import type { FhirServices } from '../fhir/services.js';
import type { SearchCatalog } from '../search/catalog.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { acceptsGzip, DownloadStream } from './download-stream.js';
import { assertJsonFormat, FHIR_JSON } from './fhir-reply.js';
import { queryOf } from '../url-parts.js';

export interface ExportRoutesOptions {
  readonly services: FhirServices;
  readonly definitions: R4Registry;
  /** The search engine's: one compiled catalog in the process (a second one was ~MBs of heap at export time). */
  readonly catalog: SearchCatalog;
  readonly db: SqlDatabase;
  /** The job store of exports and asynchronous requests (app.ts makes it: the FHIR routes start requests). */
  readonly jobs: ExportJobs;
  readonly asyncRequests: AsyncRequestService;
}

/** Where an export's status lives; its files are below it. */
export const STATUS_PATH = '/fhir/_export';

export async function exportRoutes(app: FastifyInstance, options: ExportRoutesOptions): Promise<void> {
  const { services, db } = options;
  const settings = services.config.export;
  const catalog = options.catalog;
  const compartment = patientCompartmentParams(options.definitions);
  const { jobs, asyncRequests } = options;
  const exports = new ExportService(services, db, jobs, catalog, compartment);
  const leaseMs = settings.leaseSeconds * 1000;
  const accounts = new AccountStore(db);
  const runner = new ExportRunner(db, jobs, catalog, compartment, {
    principalOf: (job) => currentPrincipal(accounts, job.accountId, job.spec.scopes),
    workers: settings.workers,
    leaseMs,
    ttlMs: settings.ttlSeconds * 1000,
    pollMs: Math.min(1000, leaseMs),
    logger: app.log,
    requestWorkers: settings.requestWorkers,
    runRequest: (job, principal, signal, save) => asyncRequests.run(services, job, principal, signal, save),
  });
  asyncRequests.started = () => runner.wake();
  app.addHook('onReady', async () => runner.start());
  // preClose: the database (closed by app.ts's onClose) is still open to give running jobs back.
  app.addHook('preClose', async () => runner.stop());

  const statusUrl = (id: string) => `${services.config.publicUrl}${STATUS_PATH}/${id}`;

  const kickoff = async (request: FastifyRequest, reply: FastifyReply, level: ExportLevel, groupId?: string) => {
    assertJsonFormat(request);
    const query = queryOf(request.url);
    const prefer = request.headers.prefer;
    const id = await exports.kickoff({
      principal: request.principal!,
      level,
      groupId,
      pairs: kickoffPairs(query, request.method === 'POST' ? request.body : undefined),
      prefer: parsePrefer(Array.isArray(prefer) ? prefer.join(',') : prefer),
      requestUrl: `${services.config.publicUrl}${request.url}`,
    });
    runner.wake();
    return reply.code(202).header('Content-Location', statusUrl(id)).send();
  };

  const served: Record<string, RouteHandlerMethod> = {
    'export-system': (request, reply) => kickoff(request, reply, 'system'),
    'export-patient': (request, reply) => kickoff(request, reply, 'patient'),
    'export-group': (request, reply) => kickoff(request, reply, 'group', (request.params as { id: string }).id),
    'export-status': (request, reply) => status(request, reply),
    'export-cancel': (request, reply) => cancel(request, reply),
    'export-file': (request, reply) => download(request, reply),
    ...asyncRequestHandlers(asyncRequests),
  };
  for (const route of FHIR_ROUTES.filter((r) => r.name in served)) {
    app.route({
      method: route.method,
      url: fhirUrl(route),
      config: { fhirRoute: route },
      // Files are stored gzip-compressed: sent as stored, or inflated as they go out (download below).
      ...(route.name === 'export-file' ? { compress: false as const } : {}),
      handler: served[route.name],
    });
  }

  async function status(request: FastifyRequest, reply: FastifyReply) {
    assertJsonFormat(request);
    const { job } = request.params as { job: string };
    const status = await exports.status(request.principal!, job, statusUrl(job));
    if (status.state !== 'completed') return replyUnfinished(reply, status);
    return reply
      .code(200)
      .header('Expires', new Date(status.expiresAt).toUTCString())
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(status.manifest));
  }

  async function cancel(request: FastifyRequest, reply: FastifyReply) {
    await exports.cancel(request.principal!, (request.params as { job: string }).job);
    const outcome = {
      resourceType: 'OperationOutcome',
      issue: [
        {
          severity: 'information',
          code: 'informational',
          diagnostics: 'The export was cancelled and its files removed',
        },
      ],
    };
    return reply.code(202).type(FHIR_JSON).send(JSON.stringify(outcome));
  }

  // Files are stored gzip-compressed: sent as stored to a client that accepts gzip, inflated as they go
  // out otherwise; so the route bypasses the compression plugin (which would compress them again).
  async function download(request: FastifyRequest, reply: FastifyReply) {
    const params = request.params as { job: string; file: string };
    const file = await exports.file(request.principal!, params.job, params.file);
    const gzip = acceptsGzip(request.headers['accept-encoding']);
    const stored = new DownloadStream(file.gzip, settings.downloadIdleTimeoutMs, () => {
      request.log.info({ export_id: params.job }, 'export: download dropped, its client read nothing');
      reply.raw.destroy();
    });
    reply.code(200).type(NDJSON).header('Vary', 'accept-encoding');
    if (gzip) {
      return reply.header('Content-Encoding', 'gzip').header('Content-Length', file.bytes).send(stored);
    }
    const inflated = pipeline(stored, createGunzip(), () => undefined);
    return reply.header('Content-Length', file.textBytes).send(inflated);
  }
}
