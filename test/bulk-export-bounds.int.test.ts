// What one account's exports may cost the server (issue 23, items 4 and 11), over HTTP on both databases,
// as an attacker with a read-only token sends them: many kick-offs (429 past AMBIENT_EXPORT_MAX_ACTIVE
// unfinished, or past AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT kept), an export that would cross the bound
// (stopped, its error in its status), the space of expired exports given back to the file system, and
// downloads paused on real sockets (bounded memory, dropped after AMBIENT_DOWNLOAD_IDLE_TIMEOUT_MS).
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/storage/open-database.js';
import { sqliteFileName } from '../src/storage/database-url.js';
import { BulkClient, pathOf } from './support/bulk-export-client.js';
import type { Manifest } from './support/bulk-export-client.js';
import { BACKENDS, backendsQuickOn } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

/** Creates `count` resources made by `make(i)` with transaction Bundles of 250 entries. */
async function load(fhir: FhirClient, count: number, make: (i: number) => object): Promise<void> {
  for (let start = 0; start < count; start += 250) {
    const entry = [];
    for (let i = start; i < Math.min(count, start + 250); i++) {
      const resource = make(i) as { resourceType: string; id: string };
      entry.push({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
    }
    const res = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry });
    expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
  }
}

/** Random hex text of `bytes` (compresses about 2:1), where no search parameter indexes it. */
const filler = (bytes: number) => [
  { url: 'http://example.org/filler', valueString: randomBytes(bytes / 2).toString('hex') },
];

function observation(id: string, bytes: number) {
  return { resourceType: 'Observation', id, status: 'final', code: { text: 'note' }, extension: filler(bytes) };
}

function patient(id: string, bytes: number) {
  return { resourceType: 'Patient', id, extension: filler(bytes) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(BACKENDS)('export bounds per account on %s', (backend) => {
  it('refuses a kick-off past AMBIENT_EXPORT_MAX_ACTIVE unfinished exports: 429, OperationOutcome, Retry-After', async () => {
    // No export worker: the kick-offs stay queued, as they would behind a slow export.
    const t = await startTestApp(backend, { AMBIENT_EXPORT_WORKERS: '0', AMBIENT_EXPORT_MAX_ACTIVE: '2' });
    try {
      const attacker = new BulkClient(t.app, await t.token('system/Patient.rs'));
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await attacker.kickoff('/fhir/$export?_type=Patient'));
      expect(answers.map((a) => a.statusCode)).toEqual([202, 202, 429, 429, 429, 429]);
      const refused = answers[2];
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      const outcome = refused.json();
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0]).toMatchObject({ severity: 'error', code: 'throttled' });
      expect(outcome.issue[0].diagnostics).toMatch(/2 exports queued or running/);
      // Another account is not held back by this one.
      const other = new BulkClient(t.app, await t.token('system/Patient.rs'));
      expect((await other.kickoff('/fhir/$export?_type=Patient')).statusCode).toBe(202);
    } finally {
      await t.close();
    }
  });

  describe('kept bytes', () => {
    const MAX_BYTES = 64 * 1024;
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(backend, { AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT: String(MAX_BYTES) });
      const writer = await t.client();
      // One Patient export: ~20 KB of NDJSON, one chunk. One Observation export: ~1.6 MB, two chunks.
      await load(writer, 20, (i) => patient(`bp${i}`, 1000));
      await load(writer, 500, (i) => observation(`bo${i}`, 3000));
    });
    afterAll(async () => t?.close());

    it('refuses kick-offs with 429 and Retry-After once the account keeps AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT', async () => {
      const attackerFhir = await t.client('system/Patient.rs');
      const attacker = new BulkClient(t.app, attackerFhir.token!);
      const completed: Manifest[] = [];
      let refused;
      for (let i = 0; i < 30 && !refused; i++) {
        const kick = await attacker.kickoff('/fhir/$export?_type=Patient');
        if (kick.statusCode === 429) refused = kick;
        else {
          expect(kick.statusCode, kick.body).toBe(202);
          completed.push(await attacker.manifest(String(kick.headers['content-location'])));
        }
      }
      expect(refused, `30 exports accepted (${completed.length} completed)`).toBeDefined();
      expect(Number(refused!.headers['retry-after'])).toBeGreaterThan(0);
      expect(refused!.json().issue[0]).toMatchObject({ code: 'throttled' });
      expect(refused!.json().issue[0].diagnostics).toMatch(/AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT/);
      // What the account keeps, as served gzip-encoded (the stored bytes): at the bound, passed by at most
      // the last export's one chunk.
      let kept = 0;
      let last = 0;
      for (const manifest of completed) {
        const res = await attackerFhir.get(pathOf(manifest.output[0].url), { 'accept-encoding': 'gzip' });
        expect(res.headers['content-encoding']).toBe('gzip');
        last = res.rawPayload.length;
        kept += last;
      }
      expect(kept).toBeGreaterThanOrEqual(MAX_BYTES);
      expect(kept - last).toBeLessThan(MAX_BYTES);
      // Only this account: another one exports.
      const other = new BulkClient(t.app, await t.token('system/Patient.rs'));
      expect((await other.kickoff('/fhir/$export?_type=Patient')).statusCode).toBe(202);
    });

    it('stops an export that would cross the bound, with the reason in its status, and keeps none of it', async () => {
      const attacker = new BulkClient(t.app, await t.token('system/Observation.rs'));
      const statusUrl = await attacker.start('/fhir/$export?_type=Observation');
      let res;
      for (let i = 0; i < 300; i++) {
        res = await attacker.status(statusUrl);
        if (res.statusCode !== 202) break;
        await sleep(100);
      }
      expect(res!.statusCode, res!.body).toBe(422);
      const issue = res!.json().issue[0];
      expect(issue.code).toBe('too-costly');
      expect(issue.diagnostics).toMatch(/AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT \(65536 bytes/);
      // Its first chunk is gone with it: the account can export again at once.
      expect((await attacker.kickoff('/fhir/$export?_type=Observation')).statusCode).toBe(202);
    });
  });
});

describe.each(BACKENDS)('export storage on %s', (backend) => {
  let t: TestApp;
  let reader: BulkClient;
  let readerFhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_EXPORT_TTL_SECONDS: '2' });
    await load(await t.client(), 500, (i) => observation(`so${i}`, 3000));
    readerFhir = await t.client('system/Observation.rs');
    reader = new BulkClient(t.app, readerFhir.token!);
  });
  afterAll(async () => t?.close());

  const jobs = async () => {
    const db = openDatabase(t.database.url);
    try {
      const [{ n }] = await db.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM export_job');
      return Number(n);
    } finally {
      await db.close();
    }
  };

  /** Bytes the database holds in free pages (SQLite) or in export_chunk (PostgreSQL), and export files beside it. */
  async function space(): Promise<{ database: number; files: number }> {
    const db = openDatabase(t.database.url);
    try {
      if (backend === 'sqlite') {
        const [{ freelist_count: free }] = await db.query<{ freelist_count: number }>('PRAGMA freelist_count');
        const [{ page_size: page }] = await db.query<{ page_size: number }>('PRAGMA page_size');
        const folder = `${sqliteFileName(t.database.url)}-files`;
        return { database: Number(free) * Number(page), files: folderBytes(folder) };
      }
      const [{ n }] = await db.query<{ n: string }>("SELECT pg_total_relation_size('export_chunk') AS n");
      return { database: Number(n), files: 0 };
    } finally {
      await db.close();
    }
  }

  it('stores export files gzip-compressed and serves them as stored, or inflated, per Accept-Encoding', async () => {
    const manifest = await reader.manifest(await reader.start('/fhir/$export?_type=Observation'));
    const url = pathOf(manifest.output[0].url);
    const plain = await readerFhir.get(url, { 'accept-encoding': 'identity' });
    const gzip = await readerFhir.get(url, { 'accept-encoding': 'br;q=1, gzip;q=0.5' });
    const none = await readerFhir.get(url);
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
    const lines = plain.body.trimEnd().split('\n');
    expect(lines).toHaveLength(manifest.output[0].count);
    expect(new Set(lines.map((l) => (JSON.parse(l) as { id: string }).id)).size).toBe(manifest.output[0].count);
    expect(none.body).toBe(plain.body);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers.vary).toMatch(/accept-encoding/i);
    expect(gunzipSync(gzip.rawPayload).toString()).toBe(plain.body);
    // Compressed about 2:1 (random hex), and served as it is stored: the Content-Length is known.
    expect(gzip.rawPayload.length).toBeLessThan(plain.rawPayload.length * 0.6);
    expect(Number(gzip.headers['content-length'])).toBe(gzip.rawPayload.length);
    expect(Number(plain.headers['content-length'])).toBe(plain.rawPayload.length);
  });

  it('gives the space of expired and cancelled exports back to the file system', async () => {
    // Let the first test's export expire and be swept, so that it does not count here.
    await waitFor(async () => (await jobs()) === 0, 20_000);
    const before = await space();
    const urls = [];
    for (let i = 0; i < 3; i++) urls.push(await reader.start('/fhir/$export?_type=Observation'));
    for (const url of urls.slice(0, 2)) await reader.manifest(url);
    await reader.cancel(urls[2]);
    const kept = await space();
    // Two exports of ~1.6 MB of NDJSON (~0.8 MB gzip) each are stored somewhere.
    expect(kept.database + kept.files - (before.database + before.files)).toBeGreaterThan(1_000_000);
    // Expired after 2 s, swept every 5 s: the database returns to what it was, the files are gone.
    let after = kept;
    await waitFor(async () => {
      after = await space();
      return after.files === 0 && after.database - before.database < 256 * 1024;
    }, 20_000);
    expect(after.files).toBe(0);
    expect(after.database - before.database).toBeLessThan(256 * 1024);
  });
});

// A 16 MB export per database: on SQLite in `npm test`, on both in `npm run test:full`.
describe.each(backendsQuickOn('sqlite'))('export downloads on %s', (backend) => {
  // Long enough that all 40 paused readers are open before the first is dropped, on a loaded machine too.
  const IDLE_MS = 15_000;
  let t: TestApp;
  let token: string;
  let fileUrl: string;
  let fileBytes: number;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_DOWNLOAD_IDLE_TIMEOUT_MS: String(IDLE_MS) });
    // A file of ~16 MB of NDJSON (~8 MB gzip): more than the socket buffers of a reader that stops.
    await load(await t.client(), 1600, (i) => observation(`do${i}`, 10_000));
    token = await t.token('system/Observation.rs');
    const client = new BulkClient(t.app, token);
    const manifest = await client.manifest(await client.start('/fhir/$export?_type=Observation'), 120_000);
    expect(manifest.output).toHaveLength(1);
    fileUrl = pathOf(manifest.output[0].url);
    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = Number(new URL(address).port);
    fileBytes = await readAll(port, fileUrl, token, 'identity');
    expect(fileBytes).toBeGreaterThan(15_000_000);
  }, 240_000);
  afterAll(async () => t?.close());

  it('holds little memory for readers that stop reading, and drops them after the idle timeout', async () => {
    // Warm: a complete download each way first, so that what is measured is what paused readers hold.
    await readAll(port, fileUrl, token, 'gzip');
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        t.app.server.getConnections((error, n) => (error ? reject(error) : resolve(n))),
      );
    const idle = await connections();
    const baseline = process.memoryUsage().rss;
    const readers: Socket[] = [];
    for (let i = 0; i < 40; i++) readers.push(await pausedReader(port, fileUrl, token, i % 2 ? 'gzip' : 'identity'));
    await sleep(1500);
    const grown = process.memoryUsage().rss - baseline;
    expect(await connections()).toBe(idle + 40);
    // 40 paused downloads of a 16 MB file: a bounded buffer each, never the file (before: ~1-16 MB each,
    // 106-177 MB in all). The bound leaves room for the heap's own growth on a loaded machine (45 MB seen).
    expect(grown, `RSS grew ${Math.round(grown / 1e6)} MB`).toBeLessThan(64 * 1024 * 1024);
    // Dropped once they have read nothing for AMBIENT_DOWNLOAD_IDLE_TIMEOUT_MS.
    await waitFor(async () => (await connections()) === idle, IDLE_MS + 10_000);
    expect(await connections()).toBe(idle);
    // A dropped reader that resumes gets what the buffers held, then the end: never the whole file.
    const received = await drain(readers[0]);
    expect(received).toBeLessThan(fileBytes);
    for (const socket of readers) socket.destroy();
  }, 60_000);
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition()) && Date.now() < deadline) await sleep(250);
}

function folderBytes(folder: string): number {
  if (!existsSync(folder)) return 0;
  return readdirSync(folder, { withFileTypes: true }).reduce((sum, entry) => {
    const path = join(folder, entry.name);
    return sum + (entry.isDirectory() ? folderBytes(path) : statSync(path).size);
  }, 0);
}

function request(url: string, token: string, encoding: string): string {
  return `GET ${url} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nAccept-Encoding: ${encoding}\r\nConnection: close\r\n\r\n`;
}

/** Sends a download request and never reads the answer (a paused client). */
function pausedReader(port: number, url: string, token: string, encoding: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => {
      socket.write(request(url, token, encoding));
      socket.pause();
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

/** Reads what a socket still gets until the server ends it; answers the bytes after the headers. */
function drain(socket: Socket): Promise<number> {
  return new Promise((resolve) => {
    let bytes = 0;
    socket.on('data', (data: Buffer) => (bytes += data.length));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(bytes));
    socket.resume();
  });
}

/** A complete download over a socket; answers the body's bytes (headers excluded). */
async function readAll(port: number, url: string, token: string, encoding: string): Promise<number> {
  const socket = await pausedReader(port, url, token, encoding);
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve) => {
    socket.on('data', (data: Buffer) => chunks.push(data));
    socket.on('close', () => resolve());
    socket.resume();
  });
  const all = Buffer.concat(chunks);
  const head = all.indexOf('\r\n\r\n');
  expect(all.subarray(0, head).toString()).toMatch(/^HTTP\/1.1 200/);
  return all.length - head - 4;
}
