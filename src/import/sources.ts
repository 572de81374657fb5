// What `import` reads: files and folders → an ordered list of JSON and NDJSON files, each readable as
// text whether plain or gzipped.
import { createReadStream, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createGunzip, gunzipSync } from 'node:zlib';

export type SourceKind = 'json' | 'ndjson';

export interface SourceFile {
  readonly path: string;
  readonly kind: SourceKind;
}

const PATTERN = /\.(json|ndjson)(\.gz)?$/i;
/** A bulk export's log (OperationOutcome-like lines, not resources): skipped inside folders. */
const BULK_EXPORT_LOG = /^log\.ndjson(\.gz)?$/i;

/**
 * Resources that others refer to by conditional reference (`Practitioner?identifier=...`) are loaded
 * first, so those references resolve: organisations, places and practitioners before patients, and
 * patients before their records. Synthea's practitioner and hospital bundles come first for the same reason.
 */
const TYPE_ORDER = ['Organization', 'Location', 'Practitioner', 'PractitionerRole', 'Patient'];

export function loadOrder(path: string): number {
  const name = basename(path);
  if (/^(hospital|practitioner)Information/i.test(name)) return 0;
  const type = /^([A-Z][A-Za-z]+)[.-]/.exec(name)?.[1];
  const rank = type ? TYPE_ORDER.indexOf(type) : -1;
  return rank >= 0 ? 1 + rank : 1 + TYPE_ORDER.length;
}

/** Expands folders (recursively) into the JSON and NDJSON files in them, in load order. */
export function findSourceFiles(paths: readonly string[]): SourceFile[] {
  const files: string[] = [];
  const visit = (path: string, explicit: boolean) => {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) visit(join(path, name), false);
    } else if (explicit || (PATTERN.test(path) && !BULK_EXPORT_LOG.test(basename(path)))) {
      files.push(path);
    }
  };
  for (const path of paths) visit(path, true);
  return files
    .map((path, i) => ({ path, i }))
    .sort((a, b) => loadOrder(a.path) - loadOrder(b.path) || a.i - b.i)
    .map(({ path }) => ({ path, kind: /\.ndjson(\.gz)?$/i.test(path) ? 'ndjson' : 'json' }));
}

/**
 * The most a JSON file may hold, or an NDJSON line, in characters: one longer is reported and skipped,
 * never held whole (the importer keeps to 300 MB; V8's longest string is about 512 MiB anyway).
 */
export const MAX_JSON_CHARS = 128 * 1024 * 1024;

/** A JSON file or NDJSON line over `MAX_JSON_CHARS`. */
export class TooLongError extends Error {}

/** A JSON file's text (plain or gzipped); TooLongError past `max` characters. */
export function readJsonText(path: string, max = MAX_JSON_CHARS): string {
  const tooLong = () => new TooLongError(`longer than ${max.toLocaleString('en-US')} characters`);
  if (!path.endsWith('.gz')) {
    // Bytes: at least as many as characters, at most four times as many.
    if (statSync(path).size > 4 * max) throw tooLong();
    const text = readFileSync(path, 'utf8');
    if (text.length > max) throw tooLong();
    return text;
  }
  let raw: Buffer;
  try {
    raw = gunzipSync(readFileSync(path), { maxOutputLength: 4 * max });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw tooLong();
    throw error;
  }
  const text = raw.toString('utf8');
  if (text.length > max) throw tooLong();
  return text;
}

/**
 * The lines of an NDJSON file (plain or gzipped), streamed, with their 1-based numbers; blank lines are
 * left out. A line ends at `\n` (a `\r` before it is dropped). One longer than `max` characters is
 * answered as `{ line, tooLong: true }` without its text: the rest of it is skipped as it arrives.
 */
export async function* readLines(
  path: string,
  max = MAX_JSON_CHARS,
): AsyncGenerator<
  { line: number; text: string; tooLong?: undefined } | { line: number; text?: undefined; tooLong: true }
> {
  const stream = createReadStream(path);
  const input = path.endsWith('.gz') ? stream.pipe(createGunzip()) : stream;
  input.setEncoding('utf8');
  let line = 0;
  let pending = '';
  let skipping = false;
  const ended = (text: string) => (text.endsWith('\r') ? text.slice(0, -1) : text);
  for await (const chunk of input as AsyncIterable<string>) {
    let start = 0;
    for (let end = chunk.indexOf('\n'); end !== -1; end = chunk.indexOf('\n', start)) {
      line++;
      const text = skipping ? '' : ended(pending + chunk.slice(start, end));
      pending = '';
      start = end + 1;
      if (skipping || text.length > max) yield { line, tooLong: true };
      else if (text.trim() !== '') yield { line, text };
      skipping = false;
    }
    if (!skipping) {
      pending += chunk.slice(start);
      if (pending.length > max) {
        skipping = true;
        pending = '';
      }
    }
  }
  line++;
  if (skipping) yield { line, tooLong: true };
  else if (pending.trim() !== '') yield { line, text: ended(pending) };
}
