// No acknowledged write is lost to a power cut (docs/reliability.md, "Power cuts"). kill -9 keeps the
// page cache, so it cannot test the fsync ordering SQLite's durability rests on (src/storage/sqlite/
// wal-sync.ts, checkpointer.ts). Here the database lives on the power-cut layer (test/powercut/
// powercut-fs.c): at each cut the server is killed with SIGKILL, then everything not fsynced (data, and
// directory entries not fsynced with their directory) is thrown away, and a fresh server opens what is
// left. Checked after each cut: every acknowledged write reads back exactly, nothing in flight is half
// there (a transaction all or nothing), the identifier search counts what is stored, history runs 1..n.
// Also an export and an import cut mid-way.
//
// Cuts are drawn from a seed, printed; POWERCUT_SEED=<seed> repeats the same cut points (the
// same workload, cut at the same write). AMBIENT_FULL_TESTS=1 runs more cuts. SQLite only: this tests our
// own durability code; PostgreSQL's is its own. Skipped, with the reason, where FUSE cannot run.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  countByIdentifierSystem,
  Ledger,
  sameJson,
  verifyAcked,
  verifyHistory,
  verifyInFlight,
  writeClient,
} from '../bench/write-ledger.mjs';
import type { Resource, WriteStats } from '../bench/write-ledger.mjs';
import { AccountStore } from '../src/auth/accounts.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { SqliteDatabase } from '../src/storage/sqlite/sqlite-database.js';
import { bearer, passwordToken } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { PowercutMount, powercutUnavailable } from './support/powercut.js';
import type { PowercutCounters } from './support/powercut.js';
import { startServerProcess } from './support/server-process.js';
import { FULL } from './support/full-tests.js';
import type { ServerProcess } from './support/server-process.js';

const unavailable = powercutUnavailable();
if (unavailable) console.warn(`power-cut suite skipped: ${unavailable}`);

const SEED = Number(process.env.POWERCUT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const WRITE_CUTS = Number(process.env.POWERCUT_WRITE_CUTS ?? (FULL ? 16 : 3));
const CLIENTS = 6;
/** A cut comes before the k-th write of a round, k drawn from 1..MAX_WRITES_BEFORE_CUT. */
const MAX_WRITES_BEFORE_CUT = 400;
/** An early cut: before the first checkpoint of a server that has just created its WAL. */
const EARLY_CUT = 30;

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** Patients of the import and the export: 3,000 of ~2.4 KB, three import transactions, several export chunks. */
const BULK_PATIENTS = 3000;
const FHIR_JSON = 'application/fhir+json';

/** mulberry32: a small seeded generator, so that a seed repeats a run. */
function generator(...seeds: number[]): () => number {
  let state = seeds.reduce((h, s) => Math.imul(h ^ s, 2654435761) >>> 0, 0x9e3779b9);
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Counts a workload's unexpected answers (any is a failure: nothing here should be refused). */
class Errors implements WriteStats {
  readonly seen: string[] = [];
  record(): void {}
  error(op: string, status: number | string, detail: string): void {
    // Answers lost to the kill are expected: those writes stay in flight.
    if (status !== 'network') this.seen.push(`${op} ${status}: ${detail}`);
  }
}

describe.skipIf(unavailable)(`power cuts on SQLite (seed ${SEED})`, () => {
  let dir: string;
  let layer: PowercutMount;
  const username = `powercut-${randomUUID()}`;
  const password = `pw-${randomUUID()}`;
  const servers = new Set<ServerProcess>();

  beforeAll(async () => {
    console.log(`power-cut suite: seed ${SEED} (POWERCUT_SEED=${SEED} repeats these cuts)`);
    dir = mkdtempSync(join(tmpdir(), 'ambient-powercut-'));
    layer = new PowercutMount(join(dir, 'backing'), join(dir, 'mnt'));
    await layer.mount();
  });
  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGKILL');
    await Promise.all([...servers].map((s) => s.exited));
    await layer?.unmount();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A database on the layer, with an account, created as an operator would (then closed cleanly). */
  async function newDatabase(name: string): Promise<string> {
    const url = `sqlite:${join(layer.mountpoint, name, 'ambient.db')}`;
    const db = openDatabase(url);
    await migrate(db);
    await new AccountStore(db).create({ username, password });
    await db.close();
    return url;
  }

  async function start(url: string, env: Record<string, string> = {}) {
    const server = await startServerProcess({ DATABASE_URL: url, ...env });
    servers.add(server);
    void server.exited.then(() => servers.delete(server));
    const headers = bearer(await passwordToken(httpInject(server.url), username, password));
    return { server, headers };
  }

  /** SIGKILL, then the cut (nothing more reaches the disk), then the power comes back. */
  async function killAndCut(child: ChildProcess, exited: Promise<unknown>) {
    child.kill('SIGKILL');
    await exited;
    layer.cut();
    const counters = layer.counters();
    await layer.remount();
    return counters;
  }

  // A new WAL's name must be durable before its first commit is acknowledged: our fsync (wal-sync.ts)
  // syncs the file, not its directory. SQLite syncs a new WAL's header, and with it the directory, at the
  // first commit into it, even with synchronous=NORMAL; this pins that, before any checkpoint.
  it('a commit acknowledged right after the database is opened survives a cut (before any checkpoint)', async () => {
    const url = `sqlite:${join(layer.mountpoint, 'early', 'early.db')}`;
    const setup = new SqliteDatabase(url, { readWorkers: 0 });
    await setup.execute('CREATE TABLE acknowledged (id TEXT PRIMARY KEY)');
    await setup.close(); // cleanly: checkpointed, the WAL removed
    const db = new SqliteDatabase(url, { readWorkers: 0 }); // a new WAL
    await db.transaction((tx) => tx.execute('INSERT INTO acknowledged (id) VALUES (?)', ['first']));
    // Acknowledged. The power goes at once, before the checkpoint worker's first checkpoint.
    layer.cut();
    const counters = layer.counters();
    await db.close().catch(() => undefined); // the disk is off: closing fails, the handles go
    await layer.remount();
    const reopened = new SqliteDatabase(url, { readWorkers: 0 });
    try {
      const rows = await reopened.query<{ id: string }>('SELECT id FROM acknowledged');
      expect(rows, `lost at the cut: ${JSON.stringify(counters)}`).toEqual([{ id: 'first' }]);
    } finally {
      await reopened.close();
    }
  });

  /** Ten creates acknowledged one after another on a fresh server, then at once SIGKILL and the cut. */
  async function tenCreatesThenCut(name: string, env: Record<string, string>) {
    const url = await newDatabase(name);
    const { server, headers } = await start(url, env);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${server.url}/fhir/Patient`, {
        method: 'POST',
        headers: { ...headers, 'content-type': FHIR_JSON },
        body: JSON.stringify({ resourceType: 'Patient', name: [{ family: `Ten${i}` }] }),
      });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as Resource).id);
    }
    await killAndCut(server.child, server.exited);
    const after = await start(url);
    try {
      const statuses = await Promise.all(
        ids.map(
          async (id) => (await fetch(`${after.server.url}/fhir/Patient/${id}`, { headers: after.headers })).status,
        ),
      );
      return statuses.filter((status) => status !== 200).length;
    } finally {
      after.server.child.kill('SIGTERM');
      await after.server.exited;
    }
  }

  it('keeps writes acknowledged just before the cut (synchronous=full, the default)', async () => {
    expect(await tenCreatesThenCut('ten-full', {})).toBe(0);
  });

  // The suite can fail: a server that acknowledges before the WAL is fsynced loses those writes here.
  it('sees the loss when commits are acknowledged before their fsync (synchronous=normal)', async () => {
    expect(await tenCreatesThenCut('ten-normal', { AMBIENT_SQLITE_SYNCHRONOUS: 'normal' })).toBeGreaterThan(0);
  });

  it(`loses no acknowledged write over ${WRITE_CUTS} cuts of creates, updates and transactions`, async () => {
    const url = await newDatabase('writes');
    const ledgers: Ledger[] = [];
    const problems: string[] = [];
    const rounds: string[] = [];
    let running: Awaited<ReturnType<typeof start>> | undefined;
    for (let round = 0; round < WRITE_CUTS; round++) {
      const roundStarted = performance.now();
      const random = generator(SEED, round);
      // Half the rounds start on a cleanly stopped database (SQLite creates a new WAL), half go on with
      // the server that checked the last cut (the WAL it recovered). A new WAL's rounds are cut early as
      // often as late: the first checkpoint (after CHECKPOINT_EVERY commits) changes what is synced.
      const fresh = !running || random() < 0.5;
      const cutBefore = 1 + Math.floor(random() * (fresh && random() < 0.5 ? EARLY_CUT : MAX_WRITES_BEFORE_CUT));
      if (fresh && running) {
        running.server.child.kill('SIGTERM');
        expect(await running.server.exited).toBe(0);
        running = undefined;
      }
      const { server, headers } = running ?? (await start(url));
      const ledger = new Ledger(`urn:powercut:${SEED}:${round}`);
      ledgers.push(ledger);
      const errors = new Errors();
      let writes = 0;
      let stopped = false;
      let reachedCut!: () => void;
      const cutPoint = new Promise<void>((resolve) => (reachedCut = resolve));
      const mix = { create: 45, update: 35, transaction: 20, search: 0 };
      const clients = Array.from({ length: CLIENTS }, (_, n) =>
        writeClient(n, {
          url: server.url,
          headers,
          ledger,
          stats: errors,
          mix,
          random: generator(SEED, round, n + 1),
          until: () => stopped,
          beforeWrite: () => {
            if (++writes === cutBefore) {
              stopped = true;
              server.child.kill('SIGKILL');
              reachedCut();
            }
          },
        }),
      );
      await cutPoint;
      const counters: PowercutCounters = await killAndCut(server.child, server.exited);
      await Promise.all(clients);
      problems.push(...errors.seen.map((e) => `round ${round}: ${e}`));

      running = await start(url);
      const check = running;
      const { problems: halfWritten, outcome } = await verifyInFlight(check.server.url, check.headers, ledger);
      const lost = await verifyAcked(check.server.url, check.headers, ledger);
      const history = await verifyHistory(check.server.url, check.headers, ledger);
      const counted = await countByIdentifierSystem(check.server.url, check.headers, ledger.system, 'Patient');
      const index =
        counted === ledger.patients ? [] : [`identifier search counts ${counted}, stored ${ledger.patients}`];
      for (const problem of [...lost, ...halfWritten, ...history, ...index])
        problems.push(`round ${round} (cut before write ${cutBefore}, ${fresh ? 'new' : 'recovered'} WAL): ${problem}`);
      rounds.push(
        `cut ${round} (${Math.round((performance.now() - roundStarted) / 100) / 10} s): before write ${cutBefore}, ${fresh ? 'new' : 'recovered'} WAL, ${ledger.acked.size} acknowledged, ` +
          `${ledger.inFlight.length} in flight (creates ${outcome.creates.committed}/${outcome.creates.absent}, ` +
          `updates ${outcome.updates.new}/${outcome.updates.old}, transactions ${outcome.transactions.committed}/` +
          `${outcome.transactions.absent} whole/absent); lost at the cut: ${counters.bytes_lost} bytes in ` +
          `${counters.files_reverted} files, ${counters.dir_changes_undone} directory changes`,
      );
      console.log(rounds[rounds.length - 1]);
    }
    // Every earlier round's writes survived every later cut too.
    for (const ledger of ledgers.slice(0, -1)) {
      for (const problem of await verifyAcked(running!.server.url, running!.headers, ledger))
        problems.push(`after the last cut, ${ledger.system}: ${problem}`);
    }
    if (running) {
      running.server.child.kill('SIGTERM');
      expect(await running.server.exited).toBe(0);
    }
    console.log(`power-cut suite, seed ${SEED}:\n  ${rounds.join('\n  ')}`);
    expect(problems, `seed ${SEED}`).toEqual([]);
  }, 600_000);
  /** The Patients of the import, as NDJSON lines would carry them (ids chosen, so a line is known by id). */
  const bulkSystem = `urn:powercut-bulk:${SEED}`;
  const bulkPatient = (i: number) => ({
    resourceType: 'Patient',
    id: `bulk-${i}`,
    identifier: [{ system: bulkSystem, value: String(i) }],
    name: [{ family: `Bulk${i}`, given: ['Power', 'Cut'] }],
    text: {
      status: 'generated',
      div: `<div xmlns="http://www.w3.org/1999/xhtml">${'Power cut. '.repeat(200)}${i}</div>`,
    },
  });

  /** Every Patient of the bulk system the server holds, by id (a search paged through). */
  async function bulkPatients(url: string, headers: Record<string, string>): Promise<Map<string, Resource>> {
    const found = new Map<string, Resource>();
    let next: string | undefined = `${url}/fhir/Patient?identifier=${encodeURIComponent(`${bulkSystem}|`)}&_count=500`;
    while (next) {
      const res = await fetch(next, { headers });
      if (res.status !== 200) throw new Error(`search: ${res.status} ${await res.text()}`);
      const bundle = (await res.json()) as {
        entry?: { resource: Resource }[];
        link?: { relation: string; url: string }[];
      };
      for (const entry of bundle.entry ?? []) found.set(entry.resource.id, entry.resource);
      // The link names the public URL, which for a server on PORT=0 is not where it listens.
      const link = bundle.link?.find((l) => l.relation === 'next')?.url;
      next = link && `${url}${new URL(link).pathname}${new URL(link).search}`;
    }
    return found;
  }

  /** `import` of the bulk file, cut after its `cutAfter`-th reported chunk and `delayMs` more. */
  async function cutImport(url: string, file: string, cutAfter: number, delayMs: number) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'import', '--progress-every', '0', file], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | string | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    let reported = 0;
    let reports = 0;
    let output = '';
    const reachedCut = new Promise<void>((resolve) => {
      child.stderr.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        for (const match of chunk.toString().matchAll(/(\d+) resources,/g)) {
          if (Number(match[1]) > reported) {
            reported = Number(match[1]);
            if (++reports === cutAfter) setTimeout(resolve, delayMs);
          }
        }
      });
      void exited.then(() => resolve());
    });
    await reachedCut;
    const finished = child.exitCode !== null;
    const counters = await killAndCut(child, exited);
    return { reported, finished, exit: await exited, counters, output };
  }

  it('an import cut mid-way keeps what it reported as written, and no line half there', async () => {
    const url = await newDatabase('bulk');
    const file = join(dir, 'bulk.ndjson');
    writeFileSync(file, Array.from({ length: BULK_PATIENTS }, (_, i) => JSON.stringify(bulkPatient(i))).join('\n'));
    const random = generator(SEED, 1000);
    const cutAfter = 1 + Math.floor(random() * 2);
    const delayMs = Math.floor(random() * 400);
    const cut = await cutImport(url, file, cutAfter, delayMs);
    const { server, headers } = await start(url);
    try {
      const stored = await bulkPatients(server.url, headers).catch((error: unknown) => {
        throw new Error(`search after the cut failed (${String(error)}); server output:\n${server.output()}`);
      });
      const problems: string[] = [];
      if (stored.size < cut.reported)
        problems.push(`import reported ${cut.reported} resources written, ${stored.size} are there`);
      // Lines go in in order, a transaction at a time: what is there is whole lines, the first ones.
      for (let i = 0; i < stored.size; i++) {
        const resource = stored.get(`bulk-${i}`);
        const { meta: _meta, ...content } = resource ?? { meta: undefined };
        if (!resource) problems.push(`bulk-${i} missing while ${stored.size} lines are there`);
        else if (!sameJson(content, bulkPatient(i))) problems.push(`bulk-${i} is not the line imported`);
        else if (resource.meta?.versionId !== '1') problems.push(`bulk-${i} at version ${resource.meta?.versionId}`);
      }
      const counted = await countByIdentifierSystem(server.url, headers, bulkSystem, 'Patient');
      if (counted !== stored.size) problems.push(`identifier search counts ${counted}, stored ${stored.size}`);
      console.log(
        `import cut after report ${cutAfter} + ${delayMs} ms: reported ${cut.reported}, ${stored.size} there` +
          `${cut.finished ? ' (it had finished)' : ''}; lost at the cut: ${cut.counters.bytes_lost} bytes in ` +
          `${cut.counters.files_reverted} files, ${cut.counters.dir_changes_undone} directory changes`,
      );
      expect(problems, `seed ${SEED}; import output:\n${cut.output}`).toEqual([]);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  }, 600_000);

  it('an export cut mid-way is resumed to a whole result (or fails cleanly), never served half', async () => {
    const url = await newDatabase('export');
    const file = join(dir, 'export.ndjson');
    writeFileSync(file, Array.from({ length: BULK_PATIENTS }, (_, i) => JSON.stringify(bulkPatient(i))).join('\n'));
    const load = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'import', file], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url },
      stdio: 'ignore',
    });
    expect(await new Promise((resolve) => load.on('exit', resolve))).toBe(0);

    const env = { AMBIENT_EXPORT_LEASE_SECONDS: '1' };
    const random = generator(SEED, 2000);
    const cutAt = 1 + Math.floor(random() * BULK_PATIENTS);
    let { server, headers } = await start(url, env);
    const kickoff = await fetch(`${server.url}/fhir/$export?_type=Patient`, {
      headers: { ...headers, prefer: 'respond-async', accept: FHIR_JSON },
    });
    expect(kickoff.status, await kickoff.text()).toBe(202);
    const statusPath = new URL(kickoff.headers.get('content-location')!).pathname;
    let progress = '';
    for (;;) {
      const status = await fetch(`${server.url}${statusPath}`, { headers });
      await status.arrayBuffer();
      if (status.status !== 202) break; // finished before the cut point
      progress = status.headers.get('x-progress') ?? '';
      const written = Number(/(\d+) resources written/.exec(progress)?.[1] ?? 0);
      if (written >= cutAt) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const counters = await killAndCut(server.child, server.exited);
    ({ server, headers } = await start(url, env));
    try {
      let manifest: { output: { type: string; url: string; count: number }[] } | undefined;
      let failure: unknown;
      const deadline = Date.now() + 120_000;
      while (!manifest && failure === undefined && Date.now() < deadline) {
        const status = await fetch(`${server.url}${statusPath}`, { headers });
        if (status.status === 200) manifest = (await status.json()) as typeof manifest;
        else if (status.status === 202) await status.arrayBuffer();
        else failure = { status: status.status, body: await status.json() };
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      console.log(
        `export cut at ${progress || 'its end'} (cut point ${cutAt}): ` +
          `${manifest ? `completed, ${manifest.output.length} files` : `failed: ${JSON.stringify(failure)}`}; ` +
          `lost at the cut: ${counters.bytes_lost} bytes in ${counters.files_reverted} files`,
      );
      if (!manifest) {
        // A failure must be a clean one: an OperationOutcome saying so, no files.
        expect(failure).toMatchObject({ body: { resourceType: 'OperationOutcome' } });
        return;
      }
      const exported = new Map<string, number>();
      for (const output of manifest.output) {
        const res = await fetch(`${server.url}${new URL(output.url).pathname}`, {
          headers: { ...headers, accept: 'application/fhir+ndjson' },
        });
        expect(res.status).toBe(200);
        const lines = (await res.text()).split('\n').filter(Boolean);
        expect(lines.length, `${output.url}: lines against the manifest's count`).toBe(output.count);
        for (const line of lines) {
          const { meta: _meta, ...content } = JSON.parse(line) as Resource;
          const i = Number(content.id.replace('bulk-', ''));
          expect(sameJson(content, bulkPatient(i)), `${content.id} exported whole`).toBe(true);
          exported.set(content.id, (exported.get(content.id) ?? 0) + 1);
        }
      }
      // Each Patient exactly once: nothing lost, nothing repeated across the cut.
      expect(exported.size).toBe(BULK_PATIENTS);
      expect([...exported.values()].every((n) => n === 1)).toBe(true);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  }, 600_000);
});
