// Validation ahead of the writer, on worker threads (issue 13): the importer's one thread validated,
// indexed and wrote every resource, and validation (FHIRPath invariants above all) was a quarter of
// its time. While the writer stores one chunk of NDJSON lines, the workers validate the next ones.
//
// The verdicts are keyed by the resource's canonical JSON text, and the writer's validate() uses a
// verdict only for a resource whose own text is that key: one the write path changed before validating
// it (a reference rewritten by a transaction, say) misses and is validated on the spot, and so does one
// whose text holds `null` (`lossy`: JSON.stringify writes an infinite number so). So what is stored has
// passed the same rules as ever, whichever thread checked it.
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { ValidationIssue } from '../validation/validate.js';
import { startWorker } from '../workers/start-worker.js';
import { CLAIMED_BY_WRITER } from './validation-protocol.js';
import type { ValidationReply, ValidationRequest, ValidationWorkerData } from './validation-protocol.js';

/** `baseUrl`: the server's FHIR base, so that the worker checks absolute references on it as the writer does. */
function spawnWorker(baseUrl: string | undefined): Worker {
  const workerData: ValidationWorkerData = { baseUrl };
  return startWorker(new URL('./validation-worker.js', import.meta.url), { workerData });
}

/** Workers for a machine: the cores the writer's thread (and, on PostgreSQL, the database) leave, 1 to 4. */
function defaultValidationWorkers(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

type Waiter = { resolve: (reply: ValidationReply) => void; reject: (error: unknown) => void };

/** One worker thread and the requests it has not answered yet. */
class PooledWorker {
  private readonly thread: Worker;
  private readonly ready: Promise<void>;
  private readonly pending = new Map<number, Waiter>();
  private nextId = 0;
  /** False once the thread failed or exited: asked nothing more. */
  alive = true;
  /** True once the thread has loaded the definitions and can answer at once. */
  started = false;

  constructor(baseUrl: string | undefined) {
    this.thread = spawnWorker(baseUrl);
    this.ready = new Promise<void>((resolve, reject) => {
      this.thread.once('error', reject);
      this.thread.once('exit', (code) => reject(new Error(`validation worker exited (${code})`)));
      this.thread.once('message', () => {
        this.started = true;
        resolve();
      });
    });
    this.ready.catch(() => undefined); // awaited by validate(), whose caller falls back
    this.thread.on('message', (message: ValidationReply | { ready: true }) => {
      if (!('id' in message)) return;
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      waiter?.resolve(message);
    });
    // A worker that dies fails what it was asked (the writer then validates those lines itself).
    const fail = (error: unknown) => {
      this.alive = false;
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    this.thread.on('error', fail);
    this.thread.on('exit', (code) => fail(new Error(`validation worker exited (${code})`)));
  }

  get busy(): number {
    return this.pending.size;
  }

  /** Answers once the worker has; counted busy from the call, so that requests spread while it starts. */
  validate(texts: readonly string[], shared?: ValidationRequest['shared']): Promise<ValidationReply> {
    const id = this.nextId++;
    const reply = new Promise<ValidationReply>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    const post = () => {
      if (this.pending.has(id)) this.thread.postMessage({ id, texts, shared } satisfies ValidationRequest);
    };
    // Posted now when the worker is up: a caller that goes on to validate a share itself must not hold
    // the request back until it is done.
    if (this.started) {
      post();
      return reply;
    }
    this.ready.then(post, (error: unknown) => {
      this.pending.get(id)?.reject(error);
      this.pending.delete(id);
    });
    return reply;
  }

  async terminate(): Promise<void> {
    await this.thread.terminate();
  }
}

/**
 * Whether a JSON text may stand for other values than the resource it was written from: JSON.stringify
 * writes a number JSON.parse made infinite (`1e400`) as `null`, so a verdict on that text could be for a
 * `null` the resource does not hold. Any text with `null` in it is left to the writer (a few false
 * alarms, the word in a narrative, cost only the head start).
 */
function lossy(text: string): boolean {
  return text.includes('null');
}

export class ValidationPool {
  /** Started by the first NDJSON chunk or rewritten transaction: an import of nothing never needs them. */
  private workers: PooledWorker[] | undefined;
  /** Verdicts of the chunks in flight, by canonical text; a chunk's are removed when it is done. */
  private readonly verdicts = new Map<string, ValidationIssue[]>();

  /** `baseUrl`: the server's FHIR base, as the write path's validation knows it (undefined: relative references only). */
  constructor(
    private readonly size = defaultValidationWorkers(),
    private readonly baseUrl?: string,
  ) {}

  /**
   * Validates the lines on the least busy worker and keeps the verdicts until `release` is called with
   * what this returns. A worker that fails costs only the head start: the writer validates as before.
   */
  async prevalidate(given: readonly string[]): Promise<readonly string[]> {
    // A text that may not say what its resource holds would give a verdict the writer never takes.
    const texts = given.filter((text) => !lossy(text));
    if (texts.length === 0) return [];
    const alive = this.workerThreads().filter((worker) => worker.alive);
    if (alive.length === 0) return [];
    const worker = alive.reduce((a, b) => (b.busy < a.busy ? b : a));
    try {
      const reply = await worker.validate(texts);
      for (const { key, issues } of reply.verdicts) this.verdicts.set(key, issues);
      return reply.verdicts.map((verdict) => verdict.key);
    } catch {
      return [];
    }
  }

  /**
   * Validates `resources` now, shared between the started workers and this thread: the workers take them
   * from the front, this thread from the back, until they meet (validation-protocol.ts), so neither
   * waits long for the other. Keeps each verdict under the resource's text, as `prevalidate` does; the
   * answer forgets those the writer did not use. For what the importer could not validate ahead as the
   * transaction rewrites it (a conditional reference in a Bundle, a target that changed since).
   */
  async prevalidateResources(
    given: readonly unknown[],
    validate: (resource: unknown) => ValidationIssue[],
  ): Promise<() => void> {
    // Those with a verdict already (the importer validated the entries of a transaction Bundle ahead, as
    // they would be written) are not validated again.
    const resources: unknown[] = [];
    const texts: string[] = [];
    for (const resource of given) {
      const text = JSON.stringify(resource);
      // Validated ahead already; or a text that may not say what the resource holds: validated by the writer.
      if (this.verdicts.has(text) || lossy(text)) continue;
      resources.push(resource);
      texts.push(text);
    }
    if (texts.length === 0) return () => undefined;
    // A worker still loading could not help: it is not asked.
    const helpers = this.workerThreads().filter((worker) => worker.alive && worker.started);
    const claims = new Int32Array(new SharedArrayBuffer(4 * texts.length));
    const front = new Int32Array(new SharedArrayBuffer(4));
    const entered = new Int32Array(new SharedArrayBuffer(4 * Math.max(1, helpers.length)));
    const replies = helpers.map((worker, slot) =>
      worker.validate(texts, { claims, front, entered, slot }).catch(() => undefined),
    );
    const keys: string[] = [];
    let last = texts.length - 1;
    for (; last >= 0 && Atomics.compareExchange(claims, last, 0, CLAIMED_BY_WRITER) === 0; last--) {
      try {
        this.verdicts.set(texts[last], validate(resources[last]));
        keys.push(texts[last]);
      } catch {
        // Validated again by the writer, which reports the error.
      }
    }
    // Only a worker that had begun when this thread found a line taken can hold lines: the others (busy
    // with an earlier request) will answer nothing, and are not waited for.
    if (last >= 0) {
      const holding = replies.filter((_, slot) => Atomics.load(entered, slot) === 1);
      for (const reply of await Promise.all(holding)) {
        for (const { key, issues } of reply?.verdicts ?? []) {
          this.verdicts.set(key, issues);
          keys.push(key);
        }
      }
    }
    return () => this.release(keys);
  }

  /** The workers, started on the first call. */
  private workerThreads(): PooledWorker[] {
    this.workers ??= Array.from({ length: this.size }, () => new PooledWorker(this.baseUrl));
    return this.workers;
  }

  /** Forgets the verdicts of a chunk that is done (those the writer did not use). */
  release(keys: readonly string[]): void {
    for (const key of keys) this.verdicts.delete(key);
  }

  /** `validate` for the write path: the worker's verdict for this very text, else `validate` itself. */
  validateWith(validate: (resource: unknown) => ValidationIssue[]): (resource: unknown) => ValidationIssue[] {
    return (resource) => {
      if (this.verdicts.size === 0) return validate(resource);
      const key = JSON.stringify(resource);
      if (lossy(key)) return validate(resource);
      const issues = this.verdicts.get(key);
      if (issues === undefined) return validate(resource);
      this.verdicts.delete(key); // used once: a second resource with the same text is validated again
      return issues;
    };
  }

  async close(): Promise<void> {
    await Promise.all((this.workers ?? []).map((worker) => worker.terminate()));
  }
}
