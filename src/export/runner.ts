// Runs export jobs in the background of a server process, off the request path: at most `workers` at
// once, claimed from the database (jobs.ts), so any process on the database may run any job; and, with
// workers of their own (`requestWorkers`), asynchronous requests (async-requests.ts). A job walks
// its types a page at a time (snapshot.ts) and writes NDJSON chunks of about CHUNK_BYTES, gzip-compressed
// (gzip-file.ts), with the progress that accounts for them; memory holds one page and one chunk, whatever
// the export's size.
// Every `pollMs` it looks for jobs (queued elsewhere, or left by a process that died: lease expired) and
// sweeps expired ones. stop() gives running jobs back, so a restart resumes them at once.
import { performance } from 'node:perf_hooks';
import type { Principal } from '../auth/principal.js';
import { binaryContextReadable } from '../fhir/binary.js';
import type { Logger } from '../logger.js';
import type { SearchCatalog } from '../search/catalog.js';
import type { ReadAfter, ReadBudget, SqlDatabase } from '../storage/sql/database.js';
import { currentWritePosition } from '../storage/write-positions.js';
import { EMPTY_GZIP, gzipEnd, gzipPiece } from './gzip-file.js';
import type { Chunk, ClaimedJob, ExportJobs, ExportProgress, JobKind, OutputFile, RequestResult } from './jobs.js';
import { ExportBoundError, JobLostError, START } from './jobs.js';
import { selectionFor } from './selection.js';
import type { ExportSpec } from './selection.js';
import { pageQuery, rowContent, versionAtQuery, versionContent } from './snapshot.js';
import type { PageRow, SnapshotWindow, VersionRow } from './snapshot.js';

/** A chunk is written once its lines reach this size (one line can make it larger), before compression. */
export const CHUNK_BYTES = 1024 * 1024;
/** A file holds at most this many resources; a larger type is split into several files. */
export const FILE_MAX_RESOURCES = 100_000;
/** Time one page read may take (a page is PAGE_ROWS resources). */
const PAGE_TIMEOUT_MS = 120_000;
/** How often expired jobs are looked for. */
const SWEEP_EVERY_MS = 5_000;

/** Runs an asynchronous request's job (AsyncRequestService.run), saving its answer through `save`. */
export type RequestRunner = (
  job: ClaimedJob,
  principal: Principal | undefined,
  signal: AbortSignal,
  save: (chunk: Chunk) => Promise<void>,
) => Promise<RequestResult>;

export interface RunnerOptions {
  readonly workers: number;
  /** Asynchronous requests this process runs at once (0: none), when `runRequest` is given. */
  readonly requestWorkers?: number;
  readonly runRequest?: RequestRunner;
  readonly leaseMs: number;
  readonly ttlMs: number;
  readonly pollMs: number;
  readonly chunkBytes?: number;
  readonly logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  /**
   * Who runs the job, as of now (auth/authenticator.ts currentPrincipal): the kick-off token's scopes
   * within the account's current ones; undefined when the account may no longer read anything.
   */
  readonly principalOf: (job: ClaimedJob) => Promise<Principal | undefined>;
}

class StoppedError extends Error {}

/** Lines waiting to be written as the next chunk of the current file. */
class ChunkBuffer {
  lines: string[] = [];
  bytes = 0;

  add(line: string): void {
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line) + 1;
  }

  take(): { text: Buffer; resources: number } {
    const taken = { text: Buffer.from(this.lines.join('\n') + '\n'), resources: this.lines.length };
    this.lines = [];
    this.bytes = 0;
    return taken;
  }
}

export class ExportRunner {
  private readonly running = new Map<string, { kind: JobKind; controller: AbortController; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private filling = false;
  private lastSweep = 0;

  constructor(
    private readonly db: SqlDatabase,
    private readonly jobs: ExportJobs,
    private readonly catalog: SearchCatalog,
    private readonly compartment: ReadonlyMap<string, readonly string[]>,
    private readonly options: RunnerOptions,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.wake(), this.options.pollMs);
    this.timer.unref();
    this.wake();
  }

  /** Looks for work now (a kick-off in this process) and sweeps when due. */
  wake(): void {
    if (this.stopping || this.filling) return;
    this.filling = true;
    void this.fill().finally(() => (this.filling = false));
  }

  private async fill(): Promise<void> {
    try {
      if (Date.now() - this.lastSweep >= SWEEP_EVERY_MS) {
        this.lastSweep = Date.now();
        await this.jobs.sweep();
      }
      for (const kind of ['request', 'export'] as const) {
        while (!this.stopping && this.runningOf(kind) < this.capacity(kind)) {
          const job = await this.jobs.claim(this.options.leaseMs, kind);
          if (!job) break;
          const controller = new AbortController();
          const done = this.run(job, controller.signal).finally(() => {
            this.running.delete(job.id);
            this.wake();
          });
          this.running.set(job.id, { kind, controller, done });
        }
      }
    } catch (error) {
      this.options.logger?.error({ err: error }, 'export: could not claim or sweep jobs');
    }
  }

  private runningOf(kind: JobKind): number {
    let count = 0;
    for (const job of this.running.values()) if (job.kind === kind) count++;
    return count;
  }

  private capacity(kind: JobKind): number {
    if (kind === 'export') return this.options.workers;
    return this.options.runRequest ? (this.options.requestWorkers ?? 0) : 0;
  }

  /** Stops looking for work and gives the running jobs back (resumed by the next process to claim them). */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    for (const { controller } of this.running.values()) controller.abort();
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  private async run(job: ClaimedJob, signal: AbortSignal): Promise<void> {
    const log = this.options.logger;
    const lost = new AbortController();
    const heartbeat = setInterval(
      () => {
        this.jobs
          .heartbeat(job, this.options.leaseMs)
          .then((held) => held || lost.abort())
          .catch(() => undefined);
      },
      Math.max(100, Math.floor(this.options.leaseMs / 3)),
    );
    heartbeat.unref();
    const stop = AbortSignal.any([signal, lost.signal]);
    // Log lines name the job as what it is: an export, or an asynchronous request.
    const [what, key] = job.kind === 'request' ? ['async request', 'async_id'] : ['export', 'export_id'];
    try {
      if (job.kind === 'request') {
        const result = await this.request(job, stop);
        await this.jobs.complete(job, result, this.options.ttlMs);
        log?.info({ [key]: job.id, status: result.status }, `${what}: completed`);
      } else {
        const output = await this.export(job, stop);
        await this.jobs.complete(job, output, this.options.ttlMs);
        log?.info({ [key]: job.id, files: output.length }, `${what}: completed`);
      }
    } catch (error) {
      if (signal.aborted) {
        await this.jobs.release(job).catch(() => undefined);
        log?.info({ [key]: job.id }, `${what}: given back at shutdown`);
      } else if (error instanceof JobLostError || lost.signal.aborted) {
        log?.info({ [key]: job.id }, `${what}: cancelled or taken over, stopped`);
      } else {
        const bound = error instanceof ExportBoundError;
        if (bound) log?.info({ [key]: job.id }, `${what}: stopped at the account bound on stored bytes`);
        else log?.error({ err: error, [key]: job.id }, `${what}: failed`);
        const reason = error instanceof Error ? error.message : String(error);
        await this.jobs.fail(job, reason, this.options.ttlMs, bound ? error.code : undefined).catch(() => undefined);
      }
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** Runs an asynchronous request as its account now may; its answer is saved as the job's one file. */
  private async request(job: ClaimedJob, stop: AbortSignal): Promise<RequestResult> {
    const principal = await this.options.principalOf(job);
    const save = (chunk: Chunk) => this.jobs.save(job, START, chunk, this.options.leaseMs);
    try {
      return await this.options.runRequest!(job, principal, stop, save);
    } catch (error) {
      if (stop.aborted) throw new StoppedError();
      throw error;
    }
  }

  /** Walks the job's types from its saved progress; answers the files written. */
  private async export(job: ClaimedJob, stop: AbortSignal): Promise<OutputFile[]> {
    const spec = job.spec as ExportSpec;
    const window: SnapshotWindow = { until: job.transactionTime, since: spec.since };
    // With read replicas, the pages are read on one that has replayed everything committed before the
    // job (re)started, so nothing written before its transactionTime is missing.
    const position = await currentWritePosition(this.db);
    const readAfter: ReadAfter | undefined = position === undefined ? undefined : () => Promise.resolve(position);
    const chunkBytes = this.options.chunkBytes ?? CHUNK_BYTES;
    let progress: ExportProgress = job.progress;
    const save = (next: ExportProgress, chunk?: { type: string; data: Buffer }) =>
      this.jobs.save(
        job,
        next,
        chunk && { ...chunk, fileNo: progress.fileNo, seq: progress.seq, offset: progress.gzip.bytes },
        this.options.leaseMs,
      );
    while (progress.typeIndex < spec.types.length) {
      const type = spec.types[progress.typeIndex];
      const selection = selectionFor(this.db.dialect, this.catalog, this.compartment, spec, type, job.transactionTime);
      const buffer = new ChunkBuffer();
      let afterPk = progress.afterPk;
      /**
       * Writes the buffer as the file's next chunk, with the progress up to `pk`; closes a full file (its
       * last chunk ends the gzip stream).
       */
      const flush = async (pk: number, endOfType: boolean) => {
        const { text, resources } = buffer.take();
        const fileResources = progress.fileResources + resources;
        const full = fileResources >= FILE_MAX_RESOURCES;
        const closing = full || (endOfType && fileResources > 0);
        let gzip = progress.gzip;
        const pieces: Buffer[] = [];
        if (resources > 0) {
          const piece = await gzipPiece(gzip, text);
          pieces.push(piece.data);
          gzip = piece.state;
        }
        if (closing) {
          const end = gzipEnd(gzip);
          pieces.push(end.data);
          gzip = end.state;
        }
        const file: OutputFile = {
          type,
          fileNo: progress.fileNo,
          count: fileResources,
          bytes: gzip.bytes,
          textBytes: gzip.textBytes,
        };
        const next: ExportProgress = {
          ...progress,
          afterPk: pk,
          seq: pieces.length > 0 ? (closing ? 0 : progress.seq + 1) : progress.seq,
          fileNo: closing ? progress.fileNo + 1 : progress.fileNo,
          fileResources: closing ? 0 : fileResources,
          gzip: closing ? EMPTY_GZIP : gzip,
          files: closing ? [...progress.files, file] : progress.files,
          resources: progress.resources + resources,
        };
        await save(next, pieces.length > 0 ? { type, data: Buffer.concat(pieces) } : undefined);
        progress = next;
      };
      for (;;) {
        if (stop.aborted) throw new StoppedError();
        const shown = type === 'Binary' ? await this.binaryFilter(job) : undefined;
        const page = await this.readPage(type, selection, window, afterPk, stop, readAfter);
        for (const row of page) {
          // Per row, not per page: a shutdown does not wait for a page of history lookups.
          if (stop.aborted) throw new StoppedError();
          const pk = Number(row.pk);
          afterPk = pk;
          let content = rowContent(row, window);
          if (content === 'history') content = await this.versionAt(pk, window, stop, readAfter);
          if (content === undefined || (shown && !shown(content))) continue;
          buffer.add(content);
          if (buffer.bytes >= chunkBytes || progress.fileResources + buffer.lines.length >= FILE_MAX_RESOURCES) {
            await flush(pk, false);
          }
        }
        if (page.length === 0) break;
      }
      await flush(afterPk, true);
      progress = {
        ...progress,
        typeIndex: progress.typeIndex + 1,
        afterPk: 0,
        fileNo: 1,
        seq: 0,
        fileResources: 0,
        gzip: EMPTY_GZIP,
      };
      await save(progress);
    }
    return [...progress.files];
  }

  /**
   * Which Binaries the job may export (docs/api.md: one with a securityContext only to a caller who may
   * read what it points at), asked anew for each page so that scopes the account lost since the
   * kick-off apply. Decided on each version as exported (the one at transactionTime), parsed as it
   * streams: a later change of its securityContext does not decide what an earlier version shows.
   */
  private async binaryFilter(job: ClaimedJob): Promise<(content: string) => boolean> {
    const principal = await this.options.principalOf(job);
    const canRead = (type: string) => principal?.canFhir('read', type) ?? false;
    const { references, registry } = this.catalog;
    return (content) => binaryContextReadable(content, references, registry.resourceTypes, canRead);
  }

  private readPage(
    type: string,
    selection: ReturnType<typeof selectionFor>,
    window: SnapshotWindow,
    afterPk: number,
    signal: AbortSignal,
    readAfter: ReadAfter | undefined,
  ): Promise<PageRow[]> {
    const statement = pageQuery(this.db.dialect, type, selection, window, afterPk);
    return this.db.boundedQuery<PageRow>(statement.text, statement.params, this.budget(signal, readAfter));
  }

  private async versionAt(
    pk: number,
    window: SnapshotWindow,
    signal: AbortSignal,
    readAfter: ReadAfter | undefined,
  ): Promise<string | undefined> {
    const statement = versionAtQuery(pk, window.until);
    const [version] = await this.db.boundedQuery<VersionRow>(
      statement.text,
      statement.params,
      this.budget(signal, readAfter),
    );
    return versionContent(version, window);
  }

  private budget(signal: AbortSignal, readAfter: ReadAfter | undefined): ReadBudget {
    return { deadline: performance.now() + PAGE_TIMEOUT_MS, limitMs: PAGE_TIMEOUT_MS, signal, readAfter };
  }
}
