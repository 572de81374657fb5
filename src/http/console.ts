// The web console (docs/console.md): `GET /` redirects to it; `/console` and its client-side routes
// answer its page, `/console/assets/<name>` its hashed assets. Served from a fixed list read into memory
// at start-up (dist/console/, built by `npm run build`): a request names an entry of the list or gets a
// 404, and never reaches the file system, so no path can lead outside the list. The page needs no
// token; everything it shows comes through the API with the signed-in account's.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { pathOf } from '../url-parts.js';
import { sendError } from './error-handler.js';

/** Where `npm run build` writes the console, whether this module runs from src/ (tsx) or dist/. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/**
 * No inline script or style, nothing from another host: the page's own script and stylesheet, its API
 * calls to this server, and images only from here or data: URLs (a narrative's image elsewhere is not
 * fetched). No <base>, no form submission anywhere, no framing.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Hashed names never change content: a year, and no revalidation. */
export const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';
/** The page names the current assets: cached, but asked again (a 304 when unchanged) on every load. */
export const PAGE_CACHE_CONTROL = 'no-cache';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};
/** Bounds on what start-up reads: Vite writes a handful of files of at most a few hundred KB. */
const MAX_ASSETS = 200;
const MAX_FILE_BYTES = 4 * 1024 * 1024;
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,150}$/;

interface ConsoleFile {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

export interface ConsoleFiles {
  readonly page: ConsoleFile;
  /** By name, as under /console/assets/. */
  readonly assets: ReadonlyMap<string, ConsoleFile>;
}

function file(body: Buffer, contentType: string): ConsoleFile {
  return { body, contentType, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

function bounded(path: string): Buffer {
  const body = readFileSync(path);
  if (body.length > MAX_FILE_BYTES) throw new Error(`${path} is larger than ${MAX_FILE_BYTES} bytes`);
  return body;
}

/**
 * The console's files, or undefined when it is not built. `prefix` is the public address's path (a
 * proxy's prefix, usually empty), so that the page names its assets where the browser finds them.
 */
export function loadConsoleFiles(dir: string, prefix = ''): ConsoleFiles | undefined {
  let html: Buffer;
  try {
    html = bounded(join(dir, 'index.html'));
  } catch {
    return undefined;
  }
  const assets = new Map<string, ConsoleFile>();
  const entries = readdirSync(join(dir, 'assets'), { withFileTypes: true });
  for (const entry of entries) {
    // Regular files with plain names and a known type only: no symbolic links, no folders, no dotfiles.
    const contentType = CONTENT_TYPES[extname(entry.name)];
    if (!entry.isFile() || !ASSET_NAME.test(entry.name) || !contentType) continue;
    if (assets.size >= MAX_ASSETS) throw new Error(`${dir} has more than ${MAX_ASSETS} assets`);
    assets.set(entry.name, file(bounded(join(dir, 'assets', entry.name)), contentType));
  }
  const page = html.toString('utf8').replaceAll('"/console/assets/', `"${prefix}/console/assets/`);
  return { page: file(Buffer.from(page), 'text/html; charset=utf-8'), assets };
}

/** The console's own routes (app.tsx): anything else under /console is a 404, not the page. */
const CLIENT_ROUTES = new Set(['resources', 'scribe', 'exports']);

/** Whether the path below /console is the page: '' or a client route, no `.`/`..` segment however encoded. */
export function isClientRoute(path: string): boolean {
  const segments = path.replace(/\/$/, '').split('/').slice(1);
  if (segments.length === 0) return true;
  if (!CLIENT_ROUTES.has(segments[0])) return false;
  return segments.every((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return false;
    }
    return decoded !== '' && decoded !== '.' && decoded !== '..' && !/[/\\\0]/.test(decoded);
  });
}

function matches(request: FastifyRequest, etag: string): boolean {
  const header = request.headers['if-none-match'];
  return header !== undefined && header.split(',').some((tag) => [etag, `W/${etag}`, '*'].includes(tag.trim()));
}

function send(request: FastifyRequest, reply: FastifyReply, item: ConsoleFile, cacheControl: string) {
  reply
    .header('Cache-Control', cacheControl)
    .header('ETag', item.etag)
    .header('X-Content-Type-Options', 'nosniff')
    .header('Cross-Origin-Resource-Policy', 'same-origin');
  if (matches(request, item.etag)) return reply.code(304).send();
  return reply.type(item.contentType).send(item.body);
}

function sendPage(request: FastifyRequest, reply: FastifyReply, files: ConsoleFiles) {
  reply
    .header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
    .header('Referrer-Policy', 'no-referrer')
    .header('X-Frame-Options', 'DENY')
    .header('Cross-Origin-Opener-Policy', 'same-origin');
  return send(request, reply, files.page, PAGE_CACHE_CONTROL);
}

export interface ConsoleOptions {
  /** The console's files; undefined when it is not built (its paths then answer 404 saying so). */
  readonly files: ConsoleFiles | undefined;
  /**
   * The public address's path, without a trailing slash ('' unless behind a proxy's prefix). Not named
   * `prefix`: Fastify would take that as the routes' own prefix.
   */
  readonly publicPath: string;
}

export async function consoleRoutes(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const { files, publicPath } = options;
  const notBuilt = () => new AppError('unknown-route', 'The console is not built here: run `npm run build`.');
  const unknown = (request: FastifyRequest) =>
    new AppError('unknown-route', `No endpoint at ${request.method} ${pathOf(request.url)}`);

  app.get('/', async (_request, reply) => reply.redirect(`${publicPath}/console`, 302));
  app.get('/console', async (request, reply) =>
    files ? sendPage(request, reply, files) : sendError(request, reply, notBuilt()),
  );
  app.get('/console/*', async (request, reply) => {
    const below = pathOf(request.url).slice('/console'.length);
    if (!files) return sendError(request, reply, notBuilt());
    if (below.startsWith('/assets/')) {
      const asset = files.assets.get(below.slice('/assets/'.length));
      return asset ? send(request, reply, asset, ASSET_CACHE_CONTROL) : sendError(request, reply, unknown(request));
    }
    return isClientRoute(below) ? sendPage(request, reply, files) : sendError(request, reply, unknown(request));
  });
}
