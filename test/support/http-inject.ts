// Fastify's `inject` over the network: the same request and response shapes (those of light-my-request
// that the suites use), sent to a real server's base URL, for the process pair's front and for suites
// that run `serve` processes.
import http from 'node:http';

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

export interface HttpInjector {
  inject(options: InjectOptions | string): Promise<InjectResponse>;
  /** Closes the kept-alive connections. */
  close(): void;
}

/** Requests to `baseUrl` on kept-alive connections. */
export function httpInject(baseUrl: string): HttpInjector {
  const agent = new http.Agent({ keepAlive: true });
  return {
    inject: (options) => send(agent, baseUrl, typeof options === 'string' ? { url: options } : options),
    close: () => agent.destroy(),
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
