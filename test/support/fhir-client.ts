// The one HTTP client of the end-to-end suites: a bearer token, JSON requests shaped the way a FHIR
// client sends them, and Bundle paging, over Fastify's inject (an app in the test process, or the
// process pair's front) or over the network to a server's base URL (http-inject.ts).
import type { LightMyRequestResponse } from 'fastify';

export const FHIR_JSON = 'application/fhir+json';
export const JSON_PATCH = 'application/json-patch+json';
export const FORM_URLENCODED = 'application/x-www-form-urlencoded';
export const TOKEN_PATH = '/v1/ambient/api/auth/token';

export type Headers = Record<string, string>;
export type Method = 'GET' | 'HEAD' | 'OPTIONS' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A request as the client hands it to its transport: what light-my-request and http-inject.ts both take. */
export interface InjectRequest {
  readonly method: Method;
  readonly url: string;
  readonly headers: Headers;
  readonly payload?: string | Buffer;
}

/** What the suites read of an answer: light-my-request's response, or http-inject.ts's. */
export type Reply = Pick<LightMyRequestResponse, 'statusCode' | 'headers' | 'body' | 'payload' | 'rawPayload' | 'json'>;

/** Fastify's app, the process pair, or httpInject(baseUrl): anything that answers a request. */
export interface Injector {
  inject(request: InjectRequest): Promise<Reply>;
}

export interface Bundle {
  resourceType: string;
  type?: string;
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: {
    fullUrl?: string;
    resource?: { resourceType: string; id: string; [k: string]: unknown };
    [k: string]: unknown;
  }[];
  [k: string]: unknown;
}

/** The path and query of a URL the server wrote (inject and httpInject take paths). */
export function pathOf(url: string): string {
  const parsed = new URL(url, 'http://path.only');
  return parsed.pathname + parsed.search;
}

/** The URL of a Bundle's link, if it has one. */
export const linkOf = (
  bundle: { link?: readonly { relation: string; url: string }[] },
  relation: string,
): string | undefined => bundle.link?.find((l) => l.relation === relation)?.url;

export interface FhirClient {
  readonly token: string | undefined;
  /** `{ authorization: 'Bearer …' }` (empty without a token), for requests the helpers do not shape. */
  readonly auth: Headers;
  /**
   * A request with the token. A body that is a string or a Buffer is sent as it is, anything else as
   * JSON; a body is labelled `application/fhir+json` (a PATCH of an array: JSON Patch) unless `headers`
   * say otherwise.
   */
  request(method: Method, url: string, body?: unknown, headers?: Headers): Promise<Reply>;
  get(url: string, headers?: Headers): Promise<Reply>;
  delete(url: string, headers?: Headers): Promise<Reply>;
  post(url: string, body?: unknown, headers?: Headers): Promise<Reply>;
  put(url: string, body?: unknown, headers?: Headers): Promise<Reply>;
  patch(url: string, body: unknown, headers?: Headers): Promise<Reply>;
  /** POST /fhir/{resourceType}. */
  create(resource: { resourceType: string; [k: string]: unknown }, headers?: Headers): Promise<Reply>;
  /** A form POST (`POST …/_search`). */
  postForm(url: string, form: string, headers?: Headers): Promise<Reply>;
  /** Every page of a Bundle from `url` along its `next` links; throws on an answer other than 200. */
  pages(url: string, headers?: Headers): Promise<Bundle[]>;
  /** The same transport with another token (undefined: none). */
  withToken(token: string | undefined): FhirClient;
}

function encode(method: Method, body: unknown): { payload?: string | Buffer; contentType?: string } {
  if (body === undefined) return {};
  const contentType = method === 'PATCH' && Array.isArray(body) ? JSON_PATCH : FHIR_JSON;
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return { payload, contentType };
}

/** The header that carries a token, for requests made without the client (fetch, raw sockets). */
export const bearer = (token: string): { authorization: string } => ({ authorization: `Bearer ${token}` });

export function fhirClient(target: Injector, token?: string): FhirClient {
  const auth: Headers = token === undefined ? {} : bearer(token);
  const client: FhirClient = {
    token,
    auth,
    request(method, url, body, headers = {}) {
      const { payload, contentType } = encode(method, body);
      return target.inject({
        method,
        url,
        headers: { ...auth, ...(contentType ? { 'content-type': contentType } : {}), ...headers },
        ...(payload === undefined ? {} : { payload }),
      });
    },
    get: (url, headers) => client.request('GET', url, undefined, headers),
    delete: (url, headers) => client.request('DELETE', url, undefined, headers),
    post: (url, body, headers) => client.request('POST', url, body, headers),
    put: (url, body, headers) => client.request('PUT', url, body, headers),
    patch: (url, body, headers) => client.request('PATCH', url, body, headers),
    create: (resource, headers) => client.request('POST', `/fhir/${resource.resourceType}`, resource, headers),
    postForm: (url, form, headers = {}) =>
      client.request('POST', url, form, { 'content-type': FORM_URLENCODED, ...headers }),
    async pages(url, headers) {
      const pages: Bundle[] = [];
      for (let next: string | undefined = url; next !== undefined;) {
        const res = await client.get(pathOf(next), headers);
        if (res.statusCode !== 200) throw new Error(`GET ${next}: ${res.statusCode} ${res.body}`);
        const bundle = res.json<Bundle>();
        pages.push(bundle);
        next = linkOf(bundle, 'next');
      }
      return pages;
    },
    withToken: (other) => fhirClient(target, other),
  };
  return client;
}

/** A token from the token endpoint for a username and password (and `scope`); throws on anything but 200. */
export async function passwordToken(
  target: Injector,
  username: string,
  password: string,
  scope?: string,
): Promise<string> {
  const res = await target.inject({
    method: 'POST',
    url: TOKEN_PATH,
    headers: { 'content-type': FORM_URLENCODED },
    payload: new URLSearchParams({ username, password, ...(scope === undefined ? {} : { scope }) }).toString(),
  });
  if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
  return res.json<{ access_token: string }>().access_token;
}
