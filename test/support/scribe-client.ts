// Helpers for the scribe API tests: requests through app.inject the way a client sends them (JSON,
// multipart forms with repeated fields and files), and waiting for a record to finish.
import { fhirClient } from './fhir-client.js';
import type { Injector, Reply } from './fhir-client.js';

export const SCRIBE = '/v1/ambient/api/scribe';
export const TEMPLATES = '/v1/ambient/api/templates';

export type FormValue = string | { filename: string; contentType: string; data: Buffer | string };

/** A multipart/form-data body, as fetch would send it; repeated names are repeated fields. */
export async function multipartBody(
  fields: [string, FormValue][],
): Promise<{ payload: Buffer; headers: Record<string, string> }> {
  const form = new FormData();
  for (const [name, value] of fields) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, new Blob([value.data], { type: value.contentType }), value.filename);
  }
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return {
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type')! },
  };
}

export interface ScribeClient {
  submit(body: Record<string, unknown>): Promise<Reply>;
  submitForm(fields: [string, FormValue][]): Promise<Reply>;
  get(id: number | string): Promise<Reply>;
  /** POST /scribe/{id}/retry, without a body. */
  retry(id: number | string): Promise<Reply>;
  list(query?: string): Promise<Reply>;
  /** Polls the record until it is no longer IN_PROGRESS. */
  finished(id: number, timeoutMs?: number): Promise<Record<string, any>>;
}

export function scribeClient(app: Injector, token: string): ScribeClient {
  const http = fhirClient(app, token);
  const client: ScribeClient = {
    submit: (body) => http.post(SCRIBE, body, { 'content-type': 'application/json' }),
    async submitForm(fields) {
      const { payload, headers } = await multipartBody(fields);
      return http.post(SCRIBE, payload, headers);
    },
    get: (id) => http.get(`${SCRIBE}/${id}`),
    retry: (id) => http.post(`${SCRIBE}/${id}/retry`),
    list: (query = '') => http.get(`${SCRIBE}${query}`),
    async finished(id, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const res = await client.get(id);
        if (res.statusCode !== 200) throw new Error(`GET scribe ${id}: ${res.statusCode} ${res.body}`);
        const record = res.json();
        if (record.status !== 'IN_PROGRESS') return record;
        if (Date.now() > deadline) throw new Error(`scribe ${id} still IN_PROGRESS after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
  return client;
}
