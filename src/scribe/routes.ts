// The scribe records API (docs/api.md "Scribe"), as one encapsulated Fastify plugin: the routes, their
// body parsers (multipart lives only here), and the worker pool, started when the app is ready and stopped
// (its jobs given back to the queue) when it closes. Errors have the OAuth shape, as on every /v1/ path.
// A FAILED record can be retried: POST /scribe/{id}/retry queues its job again.
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditAccess } from '../auth/audit.js';
import type { Principal } from '../auth/principal.js';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { FhirServices } from '../fhir/services.js';
import { openCursor, signCursor } from '../page-cursor.js';
import type { CursorKey } from '../page-cursor.js';
import type { AppMetrics } from '../metrics/metrics.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { AudioInput } from './engines/engine.js';
import { createEngines } from './engines/index.js';
import type { Engines } from './engines/index.js';
import { fieldName, fieldsFromJson, parseSubmission, SUBMISSION_LIMITS } from './input.js';
import type { FieldValues, Submission } from './input.js';
import { ScribeProcessor } from './processor.js';
import { JobQueue } from './queue.js';
import { markFailed, recordJson, ScribeRecords } from './records.js';
import { recordSchema, submittedSchema, templateListSchema, templateSchema, recordListSchema } from './schemas.js';
import { templateJson, TemplateStore } from './templates.js';
import { WorkerPool } from './worker-pool.js';

export const SCRIBE_PATH = '/v1/ambient/api/scribe';
export const TEMPLATES_PATH = '/v1/ambient/api/templates';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface ScribeRoutesOptions {
  readonly services: FhirServices;
  readonly db: SqlDatabase;
  /** Engines other than the configuration's (tests). */
  readonly engines?: Engines;
  /** The app's metrics, when AMBIENT_METRICS_PORT is set: queue depth and job outcomes. */
  readonly metrics?: AppMetrics;
}

type ScribeScope = 'scribe.read' | 'scribe.write';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What a list cursor is bound to: the account whose records it pages. */
const listOf = (accountId: string): string => `scribe:${accountId}`;

/** The list's cursor: the id the next page starts below, signed (page-cursor.ts), opaque to clients. */
export async function encodeCursor(key: CursorKey, accountId: string, before: number): Promise<string> {
  return signCursor(await key.read(), [before], listOf(accountId));
}

export async function decodeCursor(key: CursorKey, accountId: string, cursor: string): Promise<number | undefined> {
  const values = openCursor(await key.read(), cursor, listOf(accountId));
  return values?.length === 1 && Number.isSafeInteger(values[0]) ? (values[0] as number) : undefined;
}

function isAudio(file: AudioInput): boolean {
  const type = file.contentType.toLowerCase();
  return (
    type.startsWith('audio/') ||
    type === 'video/webm' ||
    type === 'video/mp4' ||
    type === 'application/ogg' ||
    (type === 'application/octet-stream' &&
      /\.(mp3|mp4|mpeg|mpga|m4a|wav|webm|ogg|oga|flac|aac|opus)$/i.test(file.filename))
  );
}

/** A client-given name without control characters (stored as TEXT, shown in messages), cut to `max`. */
function printable(value: string | undefined, max: number): string {
  // eslint-disable-next-line no-control-regex
  return (value ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, max);
}

/** A multipart/form-data body: text parts become field values (repeated names give several), files audio. */
async function readMultipart(
  request: FastifyRequest,
  maxBytes: number,
): Promise<{ fields: FieldValues; audio: AudioInput[] }> {
  const fields: FieldValues = new Map();
  const audio: AudioInput[] = [];
  const add = (name: string, value: unknown) => fields.set(name, [...(fields.get(name) ?? []), value]);
  let total = 0;
  try {
    for await (const part of request.parts()) {
      const name = fieldName(part.fieldname);
      if (part.type === 'file') {
        const data = await part.toBuffer();
        total += data.length;
        if (name === 'audio_files') {
          audio.push({
            filename: printable(part.filename, 200) || `audio-${audio.length + 1}`,
            contentType: printable(part.mimetype, 100) || 'application/octet-stream',
            data,
          });
        } else {
          // `curl -F transcripts=@visit.txt`: a text file is the field's value.
          try {
            add(name, utf8.decode(data));
          } catch {
            throw new AppError(
              'bad-request',
              `Invalid scribe request: ${name}: the file ${part.filename} is not UTF-8 text`,
            );
          }
        }
      } else {
        if (part.valueTruncated)
          throw new AppError('payload-too-large', `${name}: the field is larger than the server accepts`);
        total += typeof part.value === 'string' ? Buffer.byteLength(part.value) : 0;
        add(name, part.value);
      }
      if (total > maxBytes)
        throw new AppError('payload-too-large', 'The request body is larger than the server accepts');
    }
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') {
      throw new AppError('payload-too-large', 'audio_files: a file is larger than the server accepts');
    }
    if (code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') {
      throw new AppError('payload-too-large', 'The form has more parts than the server accepts');
    }
    if (code === 'FST_PROTO_VIOLATION')
      throw new AppError('bad-request', 'Invalid scribe request: a field name is not allowed');
    throw error;
  }
  audio.forEach((file, i) => {
    if (!isAudio(file)) {
      throw new AppError(
        'bad-request',
        `Invalid scribe request: audio_files[${i}] (${file.filename}): ${file.contentType} is not an audio type (audio/*, video/webm, video/mp4)`,
      );
    }
  });
  return { fields, audio };
}

/** An application/x-www-form-urlencoded body (repeated fields arrive as arrays). */
function fieldsFromForm(body: unknown): FieldValues {
  const fields: FieldValues = new Map();
  for (const [name, value] of Object.entries((body ?? {}) as Record<string, unknown>)) {
    const key = fieldName(name);
    fields.set(key, [...(fields.get(key) ?? []), ...(Array.isArray(value) ? value : [value])]);
  }
  return fields;
}

/** The onRequest hook that requires one scope of the authenticated caller. */
type ScopeGuard = (scope: ScribeScope) => (request: FastifyRequest) => Promise<void>;

/** What the scribe routes share: the plugin's stores and worker pool, and how a request's caller is known. */
interface ScribeContext {
  readonly services: FhirServices;
  readonly config: Config;
  readonly engines: Engines;
  readonly templates: TemplateStore;
  readonly records: ScribeRecords;
  readonly pool: WorkerPool;
  readonly guard: ScopeGuard;
  /** The authenticated caller. */
  readonly principal: (request: FastifyRequest) => Principal;
}

/**
 * The job queue and its worker pool, started when the app is ready and stopped (its jobs given back to the
 * queue) when it closes.
 */
function startWorkerPool(
  app: FastifyInstance,
  options: ScribeRoutesOptions,
  parts: { engines: Engines; templates: TemplateStore; records: ScribeRecords },
): WorkerPool {
  const settings = options.services.config.scribe;
  const leaseMs = settings.leaseSeconds * 1000;
  const queue = new JobQueue(options.db, {
    leaseMs,
    maxAttempts: settings.maxAttempts,
    retryBaseMs: settings.retryBaseMs,
  });
  const processor = new ScribeProcessor({
    records: parts.records,
    queue,
    templates: parts.templates,
    notes: parts.engines.notes,
    stt: parts.engines.stt,
    services: options.services,
  });
  const pool = new WorkerPool(
    queue,
    (job, signal) => processor.process(job, signal),
    (tx, job, reason) => markFailed(tx, job.recordId, reason, new Date().toISOString()),
    {
      size: settings.workers,
      pollMs: settings.pollMs,
      leaseMs,
      logger: app.log,
      onOutcome: (outcome) => options.metrics?.scribeJob(outcome),
    },
  );
  options.metrics?.observeScribe({ depth: () => queue.depth(), active: () => pool.active });
  app.addHook('onReady', async () => pool.start());
  // preClose: before any onClose hook, so the database (closed by app.ts's onClose) is still open to give jobs back.
  app.addHook('preClose', async () => pool.stop());
  return pool;
}

/** The bodies a submission may come in: JSON and forms (the app's parsers) and multipart, nothing else. */
async function registerBodyParsers(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(multipart, {
    throwFileSizeLimit: true,
    limits: {
      fileSize: config.maxBodyBytes,
      fieldSize: config.maxBodyBytes,
      files: SUBMISSION_LIMITS.transcripts + SUBMISSION_LIMITS.audioFiles + 10,
      fields: 1000,
      parts: 1200,
    },
  });
  app.addContentTypeParser('*', (_request, _payload, done) =>
    done(
      new AppError(
        'unsupported-media-type',
        'Send the scribe request as application/json or multipart/form-data (or application/x-www-form-urlencoded)',
      ),
    ),
  );
}

/** A submission's fields and audio, whichever of the accepted bodies it came in. */
async function readSubmissionBody(
  request: FastifyRequest,
  maxBodyBytes: number,
): Promise<{ fields: FieldValues; audio: AudioInput[] }> {
  if (request.isMultipart()) return readMultipart(request, maxBodyBytes);
  if ((request.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
    return { fields: fieldsFromForm(request.body), audio: [] };
  }
  return { fields: fieldsFromJson(request.body), audio: [] };
}

/** Do the templates and the referenced resources exist (and may the caller read them)? */
async function checkAgainstStore(ctx: ScribeContext, caller: Principal, submission: Submission): Promise<void> {
  const missing = await ctx.templates.unknown(submission.templateIds);
  if (missing.length > 0) {
    throw new AppError(
      'unknown-template',
      `template_ids: no template with id ${missing.join(', ')} (GET ${TEMPLATES_PATH} lists them)`,
    );
  }
  const found: Record<string, Record<string, unknown>> = {};
  for (const field of ['patient', 'encounter'] as const) {
    const reference = submission[field];
    if (!reference) continue;
    const [type, id] = reference.split('/');
    if (!caller.canFhir('read', type)) {
      throw new AppError(
        'forbidden',
        `${field}: the token's scopes do not allow reading ${type} (needs system/${type}.r)`,
      );
    }
    const current = await ctx.services.store.read(type, id);
    if (!current || current.deleted || current.content === null) {
      throw new AppError('bad-request', `Invalid scribe request: ${field}: ${reference} does not exist`);
    }
    found[field] = JSON.parse(current.content) as Record<string, unknown>;
  }
  // An encounter of another patient would file the note in the wrong chart.
  const subject = (found.encounter?.subject as { reference?: unknown } | undefined)?.reference;
  if (
    submission.patient &&
    typeof subject === 'string' &&
    subject.startsWith('Patient/') &&
    subject !== submission.patient
  ) {
    throw new AppError(
      'bad-request',
      `Invalid scribe request: encounter: ${submission.encounter} is an encounter of ${subject}, not of ${submission.patient}`,
    );
  }
}

/** POST the scribe path: a submission, stored and queued for the workers (202 with its Location). */
function submitRoute(app: FastifyInstance, ctx: ScribeContext): void {
  app.post(
    SCRIBE_PATH,
    { onRequest: ctx.guard('scribe.write'), schema: { response: { 202: submittedSchema } } },
    async (request, reply) => {
      const caller = ctx.principal(request);
      const { fields, audio } = await readSubmissionBody(request, ctx.config.maxBodyBytes);
      const submission = parseSubmission(fields, audio, ctx.engines.stt !== undefined);
      await checkAgainstStore(ctx, caller, submission);
      const record = await ctx.records.submit(caller.accountId, submission);
      ctx.pool.wake();
      auditAccess(request, { interaction: 'scribe.submit', ids: [String(record.id)] });
      return reply
        .code(202)
        .header('Location', `${ctx.config.publicUrl}${SCRIBE_PATH}/${record.id}`)
        .send({ scribe_id: record.id, status: record.status, submitted_at: record.submittedAt });
    },
  );
}

/** The list's page size and where it starts, from the query (400 when either is not valid). */
async function pageQuery(
  ctx: ScribeContext,
  accountId: string,
  query: Record<string, unknown>,
): Promise<{ limit: number; before: number | undefined }> {
  const one = (name: string): string | undefined => {
    const value = query[name];
    return Array.isArray(value) ? String(value[value.length - 1]) : value === undefined ? undefined : String(value);
  };
  const limitText = one('limit');
  const limit = limitText === undefined || limitText === '' ? DEFAULT_PAGE_SIZE : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE || !/^\d*$/.test(limitText ?? '')) {
    throw new AppError('bad-request', `limit: must be an integer from 1 to ${MAX_PAGE_SIZE}, got "${limitText}"`);
  }
  const cursorText = one('cursor');
  let before: number | undefined;
  if (cursorText !== undefined && cursorText !== '') {
    before = await decodeCursor(ctx.services.cursorKey, accountId, cursorText);
    if (before === undefined)
      throw new AppError('bad-request', 'cursor: not a cursor of this API (pass next_cursor as given)');
  }
  return { limit, before };
}

/** GET the scribe path, and GET one record: the caller's own records only. */
function recordRoutes(app: FastifyInstance, ctx: ScribeContext): void {
  app.get(
    SCRIBE_PATH,
    { onRequest: ctx.guard('scribe.read'), schema: { response: { 200: recordListSchema } } },
    async (request, reply) => {
      const accountId = ctx.principal(request).accountId;
      const { limit, before } = await pageQuery(ctx, accountId, request.query as Record<string, unknown>);
      const page = await ctx.records.list(accountId, limit, before);
      auditAccess(request, { interaction: 'scribe.list', ids: page.records.map((r) => String(r.id)) });
      return reply.send({
        items: page.records.map(recordJson),
        next_cursor:
          page.nextBefore === undefined ? null : await encodeCursor(ctx.services.cursorKey, accountId, page.nextBefore),
      });
    },
  );

  app.get(
    `${SCRIBE_PATH}/:scribe_id`,
    { onRequest: ctx.guard('scribe.read'), schema: { response: { 200: recordSchema } } },
    async (request, reply) => {
      const { scribe_id: raw } = request.params as { scribe_id: string };
      const id = recordIdOf(raw);
      const record = Number.isSafeInteger(id)
        ? await ctx.records.getOwned(id, ctx.principal(request).accountId)
        : undefined;
      if (!record) throw new AppError('scribe-not-found', `No scribe record ${raw}`);
      auditAccess(request, { interaction: 'scribe.read', ids: [String(record.id)] });
      return reply.send(recordJson(record));
    },
  );
}

/** The record id of a path, or NaN: unknown, malformed and other accounts' ids all get the same 404. */
function recordIdOf(raw: string): number {
  return /^\d{1,15}$/.test(raw) ? Number(raw) : NaN;
}

/** POST a record's retry: a FAILED record of the caller back IN_PROGRESS, its job queued again (202). */
function retryRoute(app: FastifyInstance, ctx: ScribeContext): void {
  app.post(
    `${SCRIBE_PATH}/:scribe_id/retry`,
    { onRequest: ctx.guard('scribe.write'), schema: { response: { 202: recordSchema } } },
    async (request, reply) => {
      const { scribe_id: raw } = request.params as { scribe_id: string };
      const result = await ctx.records.retry(recordIdOf(raw), ctx.principal(request).accountId);
      if (result.outcome === 'not-found') throw new AppError('scribe-not-found', `No scribe record ${raw}`);
      if (result.outcome === 'not-failed') {
        throw new AppError(
          'scribe-not-failed',
          `Scribe record ${raw} is ${result.status}: only a FAILED record can be retried`,
        );
      }
      ctx.pool.wake();
      auditAccess(request, { interaction: 'scribe.retry', ids: [String(result.record.id)] });
      return reply
        .code(202)
        .header('Location', `${ctx.config.publicUrl}${SCRIBE_PATH}/${result.record.id}`)
        .send(recordJson(result.record));
    },
  );
}

/** GET the templates, and GET one template. */
function templateRoutes(app: FastifyInstance, ctx: ScribeContext): void {
  app.get(
    TEMPLATES_PATH,
    { onRequest: ctx.guard('scribe.read'), schema: { response: { 200: templateListSchema } } },
    async (request, reply) => {
      auditAccess(request, { interaction: 'scribe.templates' });
      return reply.send({ items: (await ctx.templates.list()).map(templateJson) });
    },
  );

  app.get(
    `${TEMPLATES_PATH}/:template_id`,
    { onRequest: ctx.guard('scribe.read'), schema: { response: { 200: templateSchema } } },
    async (request, reply) => {
      const { template_id: raw } = request.params as { template_id: string };
      const template = /^\d{1,9}$/.test(raw) ? await ctx.templates.get(Number(raw)) : undefined;
      if (!template) throw new AppError('resource-not-found', `No template ${raw} (GET ${TEMPLATES_PATH} lists them)`);
      auditAccess(request, { interaction: 'scribe.template', ids: [String(template.id)] });
      return reply.send(templateJson(template));
    },
  );
}

/** 405 with Allow for the methods a path does not serve. */
function methodsNotAllowed(app: FastifyInstance): void {
  const notAllowed = (url: string, allow: string, methods: ('GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE')[]) =>
    app.route({
      method: methods,
      url,
      // Answered without a token, as any other path's methods are (405 names the served ones).
      config: { public: true },
      handler: async () => {
        throw new AppError('method-not-allowed', `Use ${allow} ${url}`, { headers: { Allow: allow } });
      },
    });
  notAllowed(SCRIBE_PATH, 'GET, POST', ['PUT', 'PATCH', 'DELETE']);
  notAllowed(`${SCRIBE_PATH}/:scribe_id`, 'GET', ['POST', 'PUT', 'PATCH', 'DELETE']);
  notAllowed(`${SCRIBE_PATH}/:scribe_id/retry`, 'POST', ['GET', 'PUT', 'PATCH', 'DELETE']);
  notAllowed(TEMPLATES_PATH, 'GET', ['POST', 'PUT', 'PATCH', 'DELETE']);
  notAllowed(`${TEMPLATES_PATH}/:template_id`, 'GET', ['POST', 'PUT', 'PATCH', 'DELETE']);
}

export async function scribeRoutes(app: FastifyInstance, options: ScribeRoutesOptions): Promise<void> {
  const { services, db } = options;
  const config = services.config;
  const engines = options.engines ?? createEngines(config.scribe);
  const templates = new TemplateStore(db);
  const records = new ScribeRecords(db);
  const pool = startWorkerPool(app, options, { engines, templates, records });

  await registerBodyParsers(app, config);

  // Authenticated by the scope the plugin is registered in (http/authenticated.ts); each route needs its scope.
  const guard = (scope: ScribeScope) => async (request: FastifyRequest) => {
    if (!request.principal!.hasScope(scope)) {
      throw new AppError('forbidden', `The token's scopes do not include ${scope}, which this request needs`);
    }
  };
  const principal = (request: FastifyRequest): Principal => request.principal!;

  const ctx: ScribeContext = { services, config, engines, templates, records, pool, guard, principal };
  submitRoute(app, ctx);
  recordRoutes(app, ctx);
  retryRoute(app, ctx);
  templateRoutes(app, ctx);
  methodsNotAllowed(app);
}
