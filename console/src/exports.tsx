// Exports: start a Bulk Data export of the types ticked (none ticked: every type the account may read),
// follow its progress on the status URL, then download its NDJSON files. The API has no list of an
// account's exports, so the screen shows those started in this page (kept while the page is open).
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError, fhirPathOf } from './api';
import type { Session } from './api';
import { RESOURCE_TYPES } from './columns';
import { ErrorText } from './parts';
import { may } from './scopes';

/** Offered first: what most exports are for. The rest are under "Other types". */
const COMMON = [
  'Patient',
  'Encounter',
  'Observation',
  'Condition',
  'Procedure',
  'MedicationRequest',
  'AllergyIntolerance',
  'Immunization',
  'DiagnosticReport',
  'DocumentReference',
  'Practitioner',
  'Organization',
];
const MIN_POLL_MS = 1000;
const MAX_POLL_MS = 5000;

interface ExportJob {
  readonly statusPath: string;
  readonly types: readonly string[];
  readonly startedAt: string;
}
interface Manifest {
  transactionTime: string;
  output: { type: string; url: string; count?: number }[];
  error?: { type: string; url: string }[];
}

/** The exports started in this page (not in any storage: like the token, gone with the page). */
let started: ExportJob[] = [];

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

export function ExportsScreen({ session }: { session: Session }): JSX.Element {
  const readable = useMemo(() => RESOURCE_TYPES.filter((t) => may(session.scopes, t, 'r')), [session]);
  const [jobs, setJobs] = useState<ExportJob[]>(started);
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const start = async (event: SubmitEvent) => {
    event.preventDefault();
    const types = new FormData(event.currentTarget as HTMLFormElement).getAll('type').map(String);
    setBusy(true);
    setError(undefined);
    try {
      const query = types.length > 0 ? `?_type=${types.map(encodeURIComponent).join(',')}` : '';
      const response = await api('/fhir/$export' + query, { headers: { Prefer: 'respond-async' } });
      const location = response.headers.get('content-location');
      if (!location) throw new Error('The server answered without a status URL.');
      started = [{ statusPath: fhirPathOf(location), types, startedAt: new Date().toISOString() }, ...started];
      setJobs(started);
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  };
  if (readable.length === 0) {
    return (
      <section>
        <h1>Exports</h1>
        <p>This account's scopes allow reading no resource type: it has nothing to export.</p>
      </section>
    );
  }
  const common = COMMON.filter((t) => readable.includes(t));
  const others = readable.filter((t) => !COMMON.includes(t));
  return (
    <section>
      <h1>Exports</h1>
      <form class="editor" onSubmit={start}>
        <fieldset class="types">
          <legend>Types to include (none ticked: every type this account may read)</legend>
          <TypeBoxes types={common} />
          {others.length > 0 && (
            <details>
              <summary>Other types ({others.length})</summary>
              <TypeBoxes types={others} />
            </details>
          )}
        </fieldset>
        {error && <ErrorText message={error} />}
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Start export
          </button>
        </div>
      </form>
      {jobs.length > 0 && <h2>Started in this page</h2>}
      {jobs.map((job) => (
        <ExportStatus key={job.statusPath} job={job} />
      ))}
    </section>
  );
}

function TypeBoxes({ types }: { types: readonly string[] }): JSX.Element {
  return (
    <div class="checkboxes">
      {types.map((t) => (
        <label class="check">
          <input type="checkbox" name="type" value={t} /> {t}
        </label>
      ))}
    </div>
  );
}

function ExportStatus({ job }: { job: ExportJob }): JSX.Element {
  const [progress, setProgress] = useState('Queued');
  const [manifest, setManifest] = useState<Manifest | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const response = await api<Manifest>(job.statusPath);
        if (!live) return;
        if (response.status === 202) {
          setProgress(response.headers.get('x-progress') ?? 'Running');
          const after = Number(response.headers.get('retry-after') ?? '1') * 1000;
          timer = setTimeout(poll, Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, after || MIN_POLL_MS)));
        } else {
          setManifest(response.body);
        }
      } catch (e) {
        if (live) setError(message(e));
      }
    };
    void poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [job.statusPath]);
  const label = job.types.length > 0 ? job.types.join(', ') : 'Every type';
  return (
    <div class="export" aria-label={`Export of ${label}`}>
      <h3>{label}</h3>
      <p class="meta">Started {job.startedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</p>
      {error && <ErrorText message={error} />}
      {!error && !manifest && (
        <p role="status" class="progress">
          {progress}
        </p>
      )}
      {manifest && <Files manifest={manifest} />}
    </div>
  );
}

function Files({ manifest }: { manifest: Manifest }): JSX.Element {
  const [error, setError] = useState<string | undefined>();
  if (manifest.output.length === 0) return <p>Done: nothing to export.</p>;
  const counters = new Map<string, number>();
  const download = async (event: MouseEvent, url: string, name: string) => {
    event.preventDefault();
    setError(undefined);
    try {
      // The files need the token, so a plain link cannot fetch them: the file is read here, then saved.
      const response = await fetchFile(url);
      const href = URL.createObjectURL(response);
      const a = document.createElement('a');
      a.href = href;
      a.download = name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(href), 60_000);
    } catch (e) {
      setError(message(e));
    }
  };
  return (
    <>
      <p>Done: a snapshot as of {manifest.transactionTime}.</p>
      {error && <ErrorText message={error} />}
      <ul class="files">
        {manifest.output.map((file) => {
          const n = (counters.get(file.type) ?? 0) + 1;
          counters.set(file.type, n);
          const name = `${file.type}-${n}.ndjson`;
          return (
            <li>
              <a href={file.url} onClick={(e) => download(e, file.url, name)}>
                {name}
              </a>{' '}
              <span class="muted">{file.count === undefined ? '' : `${file.count} resources`}</span>
            </li>
          );
        })}
      </ul>
    </>
  );
}

async function fetchFile(url: string): Promise<Blob> {
  const response = await api<unknown>(fhirPathOf(url), { headers: { Accept: 'application/fhir+ndjson' }, raw: true });
  if (!(response.body instanceof Blob)) throw new ApiError(response.status, 'The file could not be read.');
  return response.body;
}
