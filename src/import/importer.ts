// Bulk loading (`ambient-fhir import`): transaction and batch Bundles and NDJSON files go through the
// same write path as the API, the transaction interaction, so every resource is validated, indexed and
// versioned, urn:uuid fullUrls become ids, and conditional references (`Practitioner?identifier=...`)
// are resolved by search.
import { randomUUID } from 'node:crypto';
import { ADMINISTRATOR } from '../auth/administrator.js';
import { AppError } from '../errors.js';
import { errorEntry } from '../fhir/interactions/bundle-entry.js';
import type { InputEntry } from '../fhir/interactions/bundle-input.js';
import { bundleInteraction, parseEntries } from '../fhir/interactions/transaction.js';
import { forEachReference, parseConditionalReference } from '../fhir/references.js';
import { fullUrlIdentity } from '../fhir/interactions/transaction-identities.js';
import type { PlannedEntry } from '../fhir/interactions/transaction-identities.js';
import { conditionalTarget, localRewrites, rewrittenCopy } from '../fhir/interactions/transaction-references.js';
import type { FhirRequest, FhirServices } from '../fhir/services.js';
import type { SqlExecutor } from '../storage/sql/database.js';
import { ChunkPipeline } from './pipeline.js';
import { MAX_JSON_CHARS, readJsonText, readLines, TooLongError } from './sources.js';
import type { SourceFile } from './sources.js';
import type { ValidationPool } from './validation-pool.js';

export interface ImportFailure {
  readonly file: string;
  /** The NDJSON line, or the Bundle entry (0-based), that failed. */
  readonly line?: number;
  readonly entry?: number;
  readonly reason: string;
}

export interface ImportSummary {
  files: number;
  resources: number;
  seconds: number;
  failures: ImportFailure[];
}

export interface ImportProgress {
  readonly file: string;
  readonly filesDone: number;
  readonly filesTotal: number;
  readonly resources: number;
}

type Json = Record<string, unknown>;
type Entry = { fullUrl?: string; resource?: Json; request: { method: string; url: string } };
interface ResponseEntry {
  response?: { status?: string; outcome?: { issue?: { diagnostics?: string }[] } };
}

function reasonOf(error: unknown): string {
  if (error instanceof AppError) {
    const details = (error.options.issues ?? [])
      .slice(1, 4)
      .map((i) => i.diagnostics)
      .filter(Boolean);
    return [error.message, ...details].join('; ');
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * NDJSON chunks read and sent to the validation workers ahead of the one the pipeline takes next: with
 * one, the writer and the workers waited for each other a fifth of the time, each chunk taking a little
 * longer on one side or the other.
 */
const READ_AHEAD_CHUNKS = 2;

/** Lines of a file's first NDJSON chunk (the next ones double, up to the chunk size). */
const FIRST_CHUNK_LINES = 125;

/** Conditional references the importer keeps looked up (conditionalAhead): a bound on its memory. */
const MAX_CONDITIONAL_TARGETS = 10_000;

/**
 * A conditional reference (`"reference": "Patient?identifier=..."`) in a line's text. One spelled with
 * escapes goes unnoticed: then its early verdict is only wasted work, never used.
 */
const CONDITIONAL_REFERENCE = /"reference"\s*:\s*"[A-Z][A-Za-z]*\?/;

/** A failed entry's status and what its OperationOutcome says. */
function responseReason(entry: ResponseEntry): string {
  const status = entry.response?.status ?? '';
  const diagnostics =
    entry.response?.outcome?.issue
      ?.map((i) => i.diagnostics)
      .filter(Boolean)
      .join('; ') ?? status;
  return `${status}: ${diagnostics}`;
}

/** NDJSON resources keep their ids (PUT, an upsert): bulk exports refer to each other by those ids. */
function entryFor(resource: Json): Entry {
  const type = String(resource.resourceType);
  return typeof resource.id === 'string'
    ? { resource, request: { method: 'PUT', url: `${type}/${resource.id}` } }
    : { resource, request: { method: 'POST', url: type } };
}

export interface ImporterOptions {
  /**
   * Where the importer looks up conditional references (`Practitioner?identifier=...`) ahead of their
   * transaction, to have the lines that carry them validated on the workers too. The transaction resolves
   * them itself as ever: a line whose text then differs from the one validated is validated on the spot.
   */
  readonly database?: SqlExecutor;
  /** NDJSON lines per transaction. */
  readonly chunkSize?: number;
  /**
   * NDJSON transactions in flight at once (ChunkPipeline): more than one only where the database writes
   * concurrent transactions in parallel (Dialect.concurrentWriters).
   */
  readonly concurrency?: number;
  /**
   * Validates NDJSON lines and transaction Bundles' entries on worker threads ahead of the writer;
   * without it the writer validates.
   */
  readonly validationPool?: ValidationPool;
}

export class Importer {
  private readonly request: FhirRequest;
  private readonly chunkSize: number;
  private readonly concurrency: number;
  private readonly validationPool: ValidationPool | undefined;
  private readonly database: SqlExecutor | undefined;
  /** Conditional references looked up ahead that had one match: `Type/id`. */
  private readonly conditionalTargets = new Map<string, string>();

  constructor(services: FhirServices, options: ImporterOptions = {}) {
    this.validationPool = options.validationPool;
    this.database = options.database;
    const pool = this.validationPool;
    const validate = pool?.validateWith(services.validate) ?? services.validate;
    const prevalidate =
      pool && ((resources: readonly unknown[]) => pool.prevalidateResources(resources, services.validate));
    this.request = { services: { ...services, validate, prevalidate }, principal: ADMINISTRATOR };
    this.chunkSize = options.chunkSize ?? 250;
    this.concurrency = options.concurrency ?? 1;
  }

  async importFiles(
    files: readonly SourceFile[],
    onProgress?: (progress: ImportProgress) => void,
  ): Promise<ImportSummary> {
    const started = performance.now();
    const summary: ImportSummary = { files: 0, resources: 0, seconds: 0, failures: [] };
    // Transaction Bundles that only write by id or create are written several at a time, where the
    // database writes in parallel (a Synthea import is hundreds of them); anything else waits for them.
    const bundles = new ChunkPipeline(this.concurrency);
    for (const file of files) {
      const before = summary.resources;
      const report = () =>
        onProgress?.({
          file: file.path,
          filesDone: summary.files,
          filesTotal: files.length,
          resources: summary.resources,
        });
      report();
      if (file.kind === 'ndjson') {
        await bundles.drain();
        await this.importNdjson(file.path, summary, report);
      } else {
        await this.importJson(file.path, summary, bundles);
      }
      summary.files++;
      if (summary.resources !== before) report();
    }
    await bundles.drain();
    // Bundles finish in any order: failures are reported in file order (and a file's in line order).
    const order = new Map(files.map((file, index) => [file.path, index]));
    summary.failures.sort((a, b) => (order.get(a.file) ?? 0) - (order.get(b.file) ?? 0));
    summary.seconds = (performance.now() - started) / 1000;
    return summary;
  }

  private async importJson(path: string, summary: ImportSummary, bundles: ChunkPipeline): Promise<void> {
    let document: Json;
    try {
      document = JSON.parse(readJsonText(path)) as Json;
    } catch (error) {
      const what = error instanceof TooLongError ? 'too long' : 'not JSON';
      summary.failures.push({ file: path, reason: `${what}: ${(error as Error).message}` });
      return;
    }
    if (document.resourceType !== 'Bundle' || (document.type !== 'transaction' && document.type !== 'batch')) {
      // A single resource, or a Bundle of another kind (collection, searchset): load what it holds.
      const resources =
        document.resourceType === 'Bundle'
          ? ((document.entry as { resource?: Json }[] | undefined) ?? []).flatMap((e) =>
              e.resource ? [e.resource] : [],
            )
          : [document];
      await bundles.drain();
      await this.writeEach(path, resources.map(entryFor), summary, (entry) => ({ entry }));
      return;
    }
    const planned = document.type === 'transaction' ? this.plannedEntries(document) : undefined;
    if (!planned) {
      await bundles.drain();
      await bundleInteraction(this.request, document, { returnResources: false })
        .then((response) => this.count(path, response.body, summary, (entry) => ({ entry })))
        .catch((error: unknown) => void summary.failures.push({ file: path, reason: reasonOf(error) }));
      return;
    }
    // The ids of the creates are chosen here: the entries are then known as the transaction will write
    // them, and the workers validate them while the Bundles before this one are written.
    const ids = new Map(
      planned.flatMap((entry) => (entry.action.kind === 'create' ? [[entry.index, randomUUID()]] : [])),
    );
    const validated = this.validationPool?.prevalidate(this.asWritten(planned, ids));
    const write = async (): Promise<void> => {
      const verdicts = (await validated) ?? [];
      try {
        const response = await bundleInteraction(this.request, document, {
          returnResources: false,
          newId: (index) => ids.get(index) ?? randomUUID(),
        });
        this.count(path, response.body, summary, (entry) => ({ entry }));
      } finally {
        this.validationPool?.release(verdicts);
      }
    };
    const keys = new Set(
      planned.flatMap(({ action }) =>
        action.kind === 'update' || action.kind === 'patch' || action.kind === 'delete'
          ? [`${action.type}/${action.id}`]
          : [],
      ),
    );
    // A Bundle that fails beside others (a conditional reference to what one of them creates is not
    // there yet) runs again once every Bundle before it is done; only then does its failure count.
    await bundles.add(
      keys,
      () =>
        write().then(
          () => true,
          () => false,
        ),
      () => write().catch((error: unknown) => void summary.failures.push({ file: path, reason: reasonOf(error) })),
    );
  }

  /**
   * A transaction Bundle's entries, when it only creates (unconditionally) and writes by id: what it does
   * then does not depend on Bundles beside it except through those ids and its conditional references.
   * Otherwise (a conditional create, update or delete, a read, a malformed entry) undefined: it runs
   * alone, after the others.
   */
  private plannedEntries(document: Json): PlannedEntry[] | undefined {
    let planned: PlannedEntry[];
    try {
      planned = parseEntries(this.request, Array.isArray(document.entry) ? (document.entry as InputEntry[]) : []);
    } catch {
      return undefined;
    }
    const independent = planned.every(
      ({ action }) =>
        (action.kind === 'create' && action.ifNoneExist === undefined) ||
        action.kind === 'update' ||
        action.kind === 'patch' ||
        action.kind === 'delete',
    );
    return independent ? planned : undefined;
  }

  /**
   * The texts of the resources the transaction will create and update, as it will write them with the
   * creates' ids `ids` (their references to other entries rewritten as transaction-references.ts does):
   * the write path finds a verdict only for the very text it validates, so a text guessed wrong costs
   * only the head start. Entries with a conditional reference are left out: only the transaction's
   * search resolves those.
   */
  private asWritten(planned: readonly PlannedEntry[], ids: ReadonlyMap<number, string>): string[] {
    const withIds = planned.map((entry) => ({ ...entry, assignedId: ids.get(entry.index) }));
    const idsByFullUrl = new Map<string, string>();
    for (const entry of withIds) {
      const identity = fullUrlIdentity(entry);
      if (identity !== undefined) idsByFullUrl.set(entry.fullUrl!, identity);
    }
    const texts: string[] = [];
    for (const entry of withIds) {
      if (!entry.resource || (entry.action.kind !== 'create' && entry.action.kind !== 'update')) continue;
      try {
        const { rewrites, conditional } = localRewrites(entry, idsByFullUrl);
        if (conditional.size > 0) continue;
        texts.push(JSON.stringify(rewrites.size > 0 ? rewrittenCopy(entry.resource, rewrites) : entry.resource));
      } catch {
        // Deeper than JSON may be walked: the transaction refuses it (and reports it for this file).
      }
    }
    return texts;
  }

  private async importNdjson(path: string, summary: ImportSummary, report: () => void): Promise<void> {
    const pipeline = new ChunkPipeline(this.concurrency);
    const failuresBefore = summary.failures.length;
    let chunk: { line: number; text: string; entry: Entry }[] = [];
    // With one transaction at a time (SQLite), a file's first chunks are small and double up to the full
    // size: the writer waits for a chunk's verdicts before writing it, and the worker for the writer to
    // need more, so a file that began with a full chunk kept each idle in turn (the writer waited a third
    // of the Synthea export's load). With several in flight (PostgreSQL) the smaller chunks only cost
    // statements (measured: 4-6% slower), so they start full.
    const fullChunk = Math.min(this.chunkSize, this.request.services.config.maxBundleEntries);
    let chunkLimit = this.concurrency > 1 ? fullChunk : Math.min(FIRST_CHUNK_LINES, fullChunk);
    // Chunks handed to the pipeline in order, the last READ_AHEAD_CHUNKS of them perhaps still waiting.
    let handOff = Promise.resolve();
    const handOffs: Promise<void>[] = [];
    const flush = async (): Promise<void> => {
      if (chunk.length === 0) return;
      const lines = chunk;
      chunk = [];
      const where = (entry: number) => ({ line: lines[entry].line });
      const keys = new Set(lines.flatMap((l) => (l.entry.request.method === 'PUT' ? [l.entry.request.url] : [])));
      // Started now, while earlier chunks are still being written. A line with a conditional reference is
      // validated as its transaction will rewrite it, with the references looked up ahead (conditionalAhead).
      const conditional: typeof lines = [];
      const plain: string[] = [];
      for (const l of lines) {
        if (CONDITIONAL_REFERENCE.test(l.text)) conditional.push(l);
        else plain.push(l.text);
      }
      const validatedPlain = this.validationPool?.prevalidate(plain);
      const rewritten =
        conditional.length > 0
          ? this.conditionalAhead(conditional.flatMap((l) => (l.entry.resource ? [l.entry.resource] : [])))
          : undefined;
      const validated =
        validatedPlain && Promise.all([validatedPlain, rewritten]).then(([a, b]) => (b ? [...a, ...b] : a));
      // Handed to the pipeline in order, while the next chunks are read and validated ahead.
      handOff = handOff.then(() => add(keys, validated, lines, where));
      handOffs.push(handOff);
      if (handOffs.length > READ_AHEAD_CHUNKS) await handOffs.shift();
    };
    const add = (
      keys: ReadonlySet<string>,
      validated: Promise<readonly string[]> | undefined,
      lines: { line: number; text: string; entry: Entry }[],
      where: (entry: number) => Partial<ImportFailure>,
    ) =>
      pipeline.add(
        keys,
        async () => {
          const verdicts = (await validated) ?? [];
          try {
            const response = await bundleInteraction(
              this.request,
              { resourceType: 'Bundle', type: 'transaction', entry: lines.map((l) => l.entry) },
              { returnResources: false },
            );
            this.count(path, response.body, summary, where);
            report();
            return true;
          } catch {
            return false;
          } finally {
            this.validationPool?.release(verdicts);
          }
        },
        // One bad line fails its whole transaction: load the lines one by one to find it and keep the rest.
        async () => {
          await this.writeEach(
            path,
            lines.map((l) => l.entry),
            summary,
            where,
          );
          report();
        },
      );
    for await (const { line, text, tooLong } of readLines(path)) {
      if (tooLong) {
        summary.failures.push({
          file: path,
          line,
          reason: `line longer than ${MAX_JSON_CHARS.toLocaleString('en-US')} characters`,
        });
        continue;
      }
      let resource: Json;
      try {
        resource = JSON.parse(text) as Json;
      } catch (error) {
        summary.failures.push({ file: path, line, reason: `not JSON: ${(error as Error).message}` });
        continue;
      }
      if (!resource || typeof resource !== 'object' || typeof resource.resourceType !== 'string') {
        summary.failures.push({ file: path, line, reason: 'not a FHIR resource (no resourceType)' });
        continue;
      }
      chunk.push({ line, text, entry: entryFor(resource) });
      if (chunk.length >= chunkLimit) {
        await flush();
        chunkLimit = Math.min(chunkLimit * 2, fullChunk);
      }
    }
    await flush();
    await handOff;
    await pipeline.drain();
    // Chunks finish in any order: the file's failures are reported in line order, as read.
    const failures = summary.failures.splice(failuresBefore);
    summary.failures.push(...failures.sort((a, b) => (a.line ?? 0) - (b.line ?? 0)));
  }

  /**
   * The workers' verdicts (keys to release) on `resources` as their transactions will write them: their
   * conditional references replaced by the one match each has now (transaction-references.ts), read
   * outside any transaction and kept for the rest of the import (a target gone stale costs only the head
   * start). A resource whose reference has no single match is left out (its transaction fails, or finds
   * what arrived since, and validates then).
   */
  private async conditionalAhead(resources: readonly Json[]): Promise<readonly string[]> {
    const pool = this.validationPool;
    const database = this.database;
    if (!pool || !database) return [];
    // This chunk's references without a single match now: not searched again for its other lines.
    const unresolvable = new Set<string>();
    const texts: string[] = [];
    for (const resource of resources) {
      try {
        const rewrites = new Map<string, string>();
        const references = new Set<string>();
        forEachReference(resource, (reference) => void references.add(reference));
        let resolved = true;
        for (const reference of references) {
          if (!parseConditionalReference(reference)) continue;
          // Known targets without a turn of the event loop: most lines name the same few.
          const target =
            this.conditionalTargets.get(reference) ?? (await this.targetNow(database, reference, unresolvable));
          if (target === undefined) {
            resolved = false;
            break;
          }
          rewrites.set(reference, target);
        }
        if (resolved && rewrites.size > 0) texts.push(JSON.stringify(rewrittenCopy(resource, rewrites)));
      } catch {
        // Deeper than JSON may be walked, or criteria the search refuses: the transaction reports it.
      }
    }
    return pool.prevalidate(texts);
  }

  /**
   * The one resource a conditional reference matches now (`Type/id`), found as the transaction finds it
   * (conditionalTarget), or undefined for none, several or criteria it refuses.
   */
  private async targetNow(
    database: SqlExecutor,
    reference: string,
    unresolvable: Set<string>,
  ): Promise<string | undefined> {
    if (unresolvable.has(reference)) return undefined;
    let target: string;
    try {
      target = await conditionalTarget(this.request, database, reference);
    } catch {
      unresolvable.add(reference); // the transaction reports it
      return undefined;
    }
    if (this.conditionalTargets.size >= MAX_CONDITIONAL_TARGETS) this.conditionalTargets.clear();
    this.conditionalTargets.set(reference, target);
    return target;
  }

  /**
   * Entries one by one, each its own transaction, so each succeeds or fails alone and still has its
   * conditional references resolved (a batch leaves them as they are: https://hl7.org/fhir/R4/http.html#trules).
   */
  private async writeEach(
    path: string,
    entries: Entry[],
    summary: ImportSummary,
    where: (entry: number) => Partial<ImportFailure>,
  ) {
    for (const [index, entry] of entries.entries()) {
      try {
        const response = await bundleInteraction(
          this.request,
          { resourceType: 'Bundle', type: 'transaction', entry: [entry] },
          { returnResources: false },
        );
        this.count(path, response.body, summary, () => where(index));
      } catch (error) {
        const reason = error instanceof AppError ? responseReason(errorEntry(error)) : reasonOf(error);
        summary.failures.push({ file: path, ...where(index), reason });
      }
    }
  }

  /** Counts the written entries of a batch/transaction response and records the failed ones. */
  private count(
    path: string,
    body: unknown,
    summary: ImportSummary,
    where: (entry: number) => Partial<ImportFailure>,
  ): void {
    const bundle = (typeof body === 'string' ? JSON.parse(body) : body) as { entry?: ResponseEntry[] };
    (bundle.entry ?? []).forEach((entry, index) => {
      const status = entry.response?.status ?? '';
      if (/^20[01]/.test(status)) summary.resources++;
      else if (!/^2/.test(status))
        summary.failures.push({ file: path, ...where(index), reason: responseReason(entry) });
    });
  }
}
