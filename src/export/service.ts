// Bulk Data export (https://hl7.org/fhir/uv/bulkdata/STU2/export.html) as the HTTP layer calls it:
// kick-off (checks, then a queued job), status (progress or the manifest), files (chunk by chunk) and
// cancel. Who may see what: a job belongs to the account that started it; anyone else gets 404, as if
// it did not exist. The work itself runs in the background (runner.ts).
import type { Principal } from '../auth/principal.js';
import { AppError } from '../errors.js';
import type { FhirServices } from '../fhir/services.js';
import type { SearchCatalog } from '../search/catalog.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { ExportJobs, JobRecord, OutputFile } from './jobs.js';
import { parseKickoff } from './kickoff.js';
import type { Preferences } from './kickoff.js';
import { groupMemberCount, planTypeFilter } from './selection.js';
import type { ExportLevel, ExportSpec } from './selection.js';

/** How often a client should ask while a job runs (seconds). */
export const RETRY_AFTER_SECONDS = 2;

export interface KickoffRequest {
  readonly principal: Principal;
  readonly level: ExportLevel;
  readonly groupId?: string;
  readonly pairs: readonly (readonly [string, string])[];
  readonly prefer: Preferences;
  /** The kick-off URL, absolute, for the manifest's `request`. */
  readonly requestUrl: string;
}

export interface Manifest {
  readonly transactionTime: string;
  readonly request: string;
  readonly requiresAccessToken: true;
  readonly output: readonly { type: string; url: string; count: number }[];
  readonly error: readonly { type: string; url: string }[];
}

export type ExportStatus =
  | { readonly state: 'in-progress'; readonly progress: string }
  | { readonly state: 'completed'; readonly manifest: Manifest; readonly expiresAt: number }
  | { readonly state: 'failed'; readonly error: AppError };

/** An output file to send: its stored gzip bytes, a chunk at a time, and the sizes of both forms. */
export interface ExportFile extends OutputFile {
  readonly gzip: AsyncGenerator<Buffer>;
}

/** The file name of an output file in its URL: `<Type>-<n>.ndjson` (import loads files in name order). */
export function fileName(type: string, fileNo: number): string {
  return `${type}-${fileNo}.ndjson`;
}

export function parseFileName(name: string): { type: string; fileNo: number } | undefined {
  const match = /^([A-Z][A-Za-z]{0,63})-([1-9]\d{0,8})\.ndjson$/.exec(name);
  return match ? { type: match[1], fileNo: Number(match[2]) } : undefined;
}

function notFound(id: string): AppError {
  return new AppError('export-not-found', `No export ${id} for this account (unknown, cancelled or expired)`);
}

export class ExportService {
  constructor(
    private readonly services: FhirServices,
    private readonly db: SqlDatabase,
    private readonly jobs: ExportJobs,
    private readonly catalog: SearchCatalog,
    private readonly compartment: ReadonlyMap<string, readonly string[]>,
  ) {}

  /** Checks a kick-off and queues its job; answers the job id. */
  async kickoff(request: KickoffRequest): Promise<string> {
    const { principal } = request;
    if (!request.prefer.respondAsync) {
      throw new AppError('bad-request', '$export runs asynchronously: send Prefer: respond-async');
    }
    const types = this.services.types;
    const parameters = parseKickoff(request.pairs, {
      lenient: request.prefer.lenient,
      isResourceType: (name) => types.isResourceType(name),
    });
    const readable = (type: string) => principal.canFhir('read', type);
    for (const type of parameters.types ?? []) {
      if (!readable(type)) {
        throw new AppError(
          'forbidden',
          `_type: the token's scopes do not allow reading ${type} (needs system/${type}.r or wider)`,
        );
      }
    }
    const levelTypes =
      request.level === 'system'
        ? types.resourceTypes
        : ['Patient', ...types.resourceTypes.filter((t) => t !== 'Patient' && this.compartment.has(t))];
    const exported = (parameters.types ?? levelTypes).filter((t) => levelTypes.includes(t) && readable(t));
    if (exported.length === 0 && parameters.types) {
      throw new AppError(
        'bad-request',
        `_type: none of ${parameters.types.join(', ')} is in the Patient compartment that a ${request.level}-level export covers`,
        { expression: '_type' },
      );
    }
    if (exported.length === 0) {
      throw new AppError('forbidden', "The token's scopes do not allow reading any resource type this export covers");
    }
    const transactionTime = Date.now();
    const typeFilters = parameters.typeFilters.filter((f) => exported.includes(f.type));
    for (const filter of typeFilters) {
      planTypeFilter(this.db.dialect, this.catalog, filter, transactionTime, (t) => principal.canFhir('search', t));
    }
    const spec: ExportSpec = {
      level: request.level,
      ...(request.level === 'group' ? await this.group(principal, request.groupId ?? '') : {}),
      types: exported,
      ...(parameters.since !== undefined ? { since: parameters.since } : {}),
      typeFilters,
      scopes: principal.scopes,
    };
    return this.jobs.create(principal.accountId, request.requestUrl, spec, transactionTime);
  }

  /** The Group's pk and how many members it has (ExportSpec). */
  private async group(principal: Principal, id: string): Promise<{ groupPk: number; groupMembers: number }> {
    const groupPk = await this.groupPk(principal, id);
    const count = groupMemberCount(this.db.dialect, groupPk);
    const [row] = await this.db.query<{ n: number | string }>(count.text, count.params);
    return { groupPk, groupMembers: Number(row?.n ?? 0) };
  }

  /** The Group's pk: it must exist and be readable (its members are read from it). */
  private async groupPk(principal: Principal, id: string): Promise<number> {
    if (!principal.canFhir('read', 'Group')) {
      throw new AppError('forbidden', "The token's scopes do not allow reading Group (needs system/Group.r or wider)");
    }
    const [row] = await this.db.query<{ pk: number | string }>(
      'SELECT pk FROM resource WHERE type = ? AND id = ? AND deleted = 0',
      ['Group', id],
    );
    if (!row) throw new AppError('resource-not-found', `Group/${id} does not exist`);
    return Number(row.pk);
  }

  private async own(principal: Principal, id: string): Promise<JobRecord> {
    const job = await this.jobs.find(id, principal.accountId);
    if (!job) throw notFound(id);
    return job;
  }

  async status(principal: Principal, id: string, statusUrl: string): Promise<ExportStatus> {
    const job = await this.own(principal, id);
    if (job.state === 'failed') {
      const reason = job.error ?? 'the export failed';
      // A failure the client caused (its account's bound) keeps its own code; anything else is the server's.
      const error = job.errorCode
        ? new AppError(job.errorCode, reason)
        : new AppError('export-failed', `The export failed: ${reason}`);
      return { state: 'failed', error };
    }
    if (job.state !== 'completed' || !job.output || job.expiresAt === undefined) {
      return { state: 'in-progress', progress: progressText(job) };
    }
    return {
      state: 'completed',
      expiresAt: job.expiresAt,
      manifest: {
        transactionTime: new Date(job.transactionTime).toISOString(),
        request: job.request,
        requiresAccessToken: true,
        output: job.output.map((file) => ({
          type: file.type,
          url: `${statusUrl}/${fileName(file.type, file.fileNo)}`,
          count: file.count,
        })),
        error: [],
      },
    };
  }

  /** Cancels (and removes) an export, running or finished. */
  async cancel(principal: Principal, id: string): Promise<void> {
    await this.own(principal, id);
    await this.jobs.remove(id);
  }

  /**
   * One output file, its stored bytes read a chunk at a time as the response is written: the file must be
   * in the manifest of a completed export of this account, and its type still readable by the caller.
   */
  async file(principal: Principal, id: string, name: string): Promise<ExportFile> {
    const job = await this.own(principal, id);
    const parsed = parseFileName(name);
    const listed = parsed && job.output?.find((f) => f.type === parsed.type && f.fileNo === parsed.fileNo);
    if (job.state !== 'completed' || !parsed || !listed) {
      throw new AppError('export-not-found', `Export ${id} has no file ${name}`);
    }
    if (!principal.canFhir('read', parsed.type)) {
      throw new AppError(
        'forbidden',
        `The token's scopes no longer allow reading ${parsed.type} (needs system/${parsed.type}.r or wider)`,
      );
    }
    return { ...listed, gzip: this.jobs.read(id, parsed.type, parsed.fileNo, listed.bytes) };
  }
}

/** X-Progress: where the walk stands, e.g. "Observation (type 3 of 12), 12000 resources written". */
export function progressText(job: Pick<JobRecord, 'state' | 'spec' | 'progress'>): string {
  if (job.state === 'queued') return 'queued';
  const { typeIndex, resources } = job.progress;
  const { types } = job.spec as ExportSpec;
  const total = types.length;
  const type = types[Math.min(typeIndex, total - 1)];
  return `${type} (type ${Math.min(typeIndex + 1, total)} of ${total}), ${resources} resources written`;
}
