// What `import` reads: files and folders → an ordered list of JSON and NDJSON files, each readable as
// text whether plain or gzipped.
import { createReadStream, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
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

export function readJsonText(path: string): string {
  const raw = readFileSync(path);
  return (path.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8');
}

/** The lines of an NDJSON file (plain or gzipped), streamed, with their 1-based numbers. */
export async function* readLines(path: string): AsyncGenerator<{ line: number; text: string }> {
  const stream = createReadStream(path);
  const input = path.endsWith('.gz') ? stream.pipe(createGunzip()) : stream;
  let line = 0;
  for await (const text of createInterface({ input, crlfDelay: Infinity })) {
    line++;
    if (text.trim() !== '') yield { line, text };
  }
}
