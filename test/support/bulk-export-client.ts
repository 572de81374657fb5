// A Bulk Data client over app.inject, as the IG describes one: kick-off, poll the status URL until the
// manifest, download the files with the bearer token.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { SqlDatabase } from '../../src/storage/sql/database.js';
import { fhirClient, pathOf } from './fhir-client.js';
import type { FhirClient, Injector } from './fhir-client.js';

export { pathOf };

export interface Manifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: boolean;
  output: { type: string; url: string; count: number }[];
  error: unknown[];
}

export type Resource = { resourceType: string; id: string; meta?: { versionId?: string }; [k: string]: unknown };

export const PREFER_ASYNC = { prefer: 'respond-async', accept: 'application/fhir+json' };

export class BulkClient {
  private readonly fhir: FhirClient;

  constructor(app: Injector, token: string) {
    this.fhir = fhirClient(app, token);
  }

  kickoff(url: string, headers: Record<string, string> = {}, method: 'GET' | 'POST' = 'GET', body?: unknown) {
    return this.fhir.request(method, url, body, { ...PREFER_ASYNC, ...headers });
  }

  /** Kicks off and answers the status URL; fails the test on anything but 202. */
  async start(url: string, headers: Record<string, string> = {}): Promise<string> {
    const res = await this.kickoff(url, headers);
    if (res.statusCode !== 202) throw new Error(`kick-off ${url}: ${res.statusCode} ${res.body}`);
    return String(res.headers['content-location']);
  }

  status(statusUrl: string) {
    return this.fhir.get(pathOf(statusUrl));
  }

  cancel(statusUrl: string) {
    return this.fhir.delete(pathOf(statusUrl));
  }

  /** Polls until the manifest (200); fails on anything but 202 before it. */
  async manifest(statusUrl: string, timeoutMs = 30_000): Promise<Manifest> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.status(statusUrl);
      if (res.statusCode === 200) return res.json() as Manifest;
      if (res.statusCode !== 202) throw new Error(`status: ${res.statusCode} ${res.body}`);
      if (Date.now() > deadline) throw new Error(`export not done after ${timeoutMs} ms: ${res.headers['x-progress']}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  file(url: string, token = this.fhir.token) {
    return this.fhir.withToken(token).get(pathOf(url), { accept: 'application/fhir+ndjson' });
  }

  /** Every resource of the manifest's files, by type. */
  async resources(manifest: Manifest): Promise<Map<string, Resource[]>> {
    const byType = new Map<string, Resource[]>();
    for (const output of manifest.output) {
      const res = await this.file(output.url);
      if (res.statusCode !== 200) throw new Error(`file ${output.url}: ${res.statusCode} ${res.body}`);
      const lines = res.body.split('\n').filter((line) => line !== '');
      const resources = lines.map((line) => JSON.parse(line) as Resource);
      byType.set(output.type, [...(byType.get(output.type) ?? []), ...resources]);
    }
    return byType;
  }
}

export const ids = (resources: readonly Resource[] | undefined): string[] => (resources ?? []).map((r) => r.id).sort();

/** Bytes of an export's output wherever it is stored: export_chunk rows, or files beside a SQLite database. */
export async function storedOutputBytes(db: SqlDatabase, jobId: string): Promise<number> {
  const [{ n }] = await db.query<{ n: number | string | null }>(
    'SELECT SUM(LENGTH(data)) AS n FROM export_chunk WHERE job_id = ?',
    [jobId],
  );
  const folder = db.localFolder === undefined ? undefined : join(db.localFolder, 'exports', jobId);
  const files =
    folder && existsSync(folder)
      ? readdirSync(folder).reduce((sum, name) => sum + statSync(join(folder, name)).size, 0)
      : 0;
  return Number(n ?? 0) + files;
}
