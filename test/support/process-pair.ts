// Two real `serve` processes on one PostgreSQL database behind a front that sends each request to the
// other process than the one before, as a load balancer in front of two hosts would. The `processes`
// vitest project (AMBIENT_TEST_PROCESSES=2) runs the end-to-end suites through it (test-app.ts), so a
// token issued by one process, a `next` link made by the other, a scribe job submitted to one and
// polled on the other, all have to work.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startServerProcess } from './server-process.js';
import type { ServerProcess } from './server-process.js';

/** What the suites use of Fastify's `inject`: the request and response shapes of light-my-request. */
export interface InjectOptions {
  readonly method?: string;
  readonly url: string;
  readonly headers?: Record<string, string | string[] | undefined>;
  readonly payload?: unknown;
  readonly body?: unknown;
  readonly query?: Record<string, string>;
}

export interface InjectResponse {
  readonly statusCode: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly payload: string;
  readonly rawPayload: Buffer;
  json(): any;
}

export interface ProcessPair {
  /** The front's address (http://127.0.0.1:port), for clients such as fhir-kit-client. */
  readonly url: string;
  /** How many requests each process answered, to check that both served. */
  readonly served: readonly number[];
  inject(options: InjectOptions | string): Promise<InjectResponse>;
  close(): Promise<void>;
}

export async function startProcessPair(env: Record<string, string>): Promise<ProcessPair> {
  const processes: ServerProcess[] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  const upstreams = processes.map((p) => new URL(p.url));
  const served = upstreams.map(() => 0);
  let next = 0;

  // The front passes on whatever the processes would get (their own limits answer, not the front's).
  const front = http.createServer({ maxHeaderSize: 1024 * 1024 }, (request, response) => {
    const index = next++ % upstreams.length;
    served[index]++;
    const target = upstreams[index];
    const forward = http.request(
      { host: target.hostname, port: target.port, method: request.method, path: request.url, headers: request.headers },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forward.on('error', (error) => {
      response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(`front: process ${index} unreachable: ${error.message}`);
    });
    request.pipe(forward);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  const agent = new http.Agent({ keepAlive: true });

  return {
    url,
    served,
    inject: (options) => send(agent, url, typeof options === 'string' ? { url: options } : options),
    async close() {
      agent.destroy();
      await new Promise<void>((resolve) => front.close(() => resolve()));
      for (const p of processes) p.child.kill('SIGTERM');
      await Promise.all(processes.map((p) => p.exited));
    },
  };
}

function send(agent: http.Agent, base: string, options: InjectOptions): Promise<InjectResponse> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value !== undefined) headers[name.toLowerCase()] = value;
  }
  const given = options.payload ?? options.body;
  let payload: Buffer | undefined;
  if (given !== undefined) {
    if (Buffer.isBuffer(given)) payload = given;
    else if (typeof given === 'string') payload = Buffer.from(given);
    else {
      // As light-my-request: an object is sent as JSON.
      payload = Buffer.from(JSON.stringify(given));
      headers['content-type'] ??= 'application/json';
    }
    headers['content-length'] = String(payload.length);
  }
  const target = new URL(options.url, base);
  for (const [name, value] of Object.entries(options.query ?? {})) target.searchParams.append(name, value);
  return new Promise((resolve, reject) => {
    const request = http.request(target, { method: options.method ?? 'GET', headers, agent }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        const rawPayload = Buffer.concat(chunks);
        const body = rawPayload.toString('utf8');
        resolve({
          statusCode: response.statusCode ?? 0,
          headers: response.headers,
          body,
          payload: body,
          rawPayload,
          json: () => JSON.parse(body),
        });
      });
    });
    request.on('error', reject);
    request.end(payload);
  });
}
