// Two real `serve` processes on one PostgreSQL database behind a front that sends each request to the
// other process than the one before, as a load balancer in front of two hosts would. The `processes`
// vitest project (AMBIENT_TEST_PROCESSES=2) runs the end-to-end suites through it (test-app.ts), so a
// token issued by one process, a `next` link made by the other, a scribe job submitted to one and
// polled on the other, all have to work.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpInject } from './http-inject.js';
import type { InjectOptions, InjectResponse } from './http-inject.js';
import { startServerProcess } from './server-process.js';
import type { ServerProcess } from './server-process.js';

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
  // Idle connections stay open until the pair closes: a suite that blocks its event loop for longer than
  // Node's 5 s keep-alive (spawnSync of a CLI command under load) would otherwise send its next request
  // on a connection the front closed meanwhile, and read ECONNRESET.
  front.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  const client = httpInject(url);

  return {
    url,
    served,
    inject: client.inject,
    async close() {
      client.close();
      await new Promise<void>((resolve) => front.close(() => resolve()));
      for (const p of processes) p.child.kill('SIGTERM');
      await Promise.all(processes.map((p) => p.exited));
    },
  };
}
