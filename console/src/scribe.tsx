// Scribe: the account's records (the scribe API's list, newest first), a new visit (a transcript and a
// template), and a record's page, asked again every second until the record is COMPLETED or FAILED,
// with the note's sections and a link to the DocumentReference each note was filed as.
import { useEffect, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError } from './api';
import type { Session } from './api';
import { localReference } from './format';
import { ErrorText, ResourceLink } from './parts';
import { consoleHref, followLink, navigate } from './router';

const SCRIBE = '/v1/ambient/api/scribe';
const PAGE_SIZE = 20;
const REFRESH_MS = 1000;

interface ScribeRecord {
  scribe_id: number;
  status: 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';
  submitted_at: string;
  completed_at: string | null;
  patient_name: string | null;
  patient: string | null;
  encounter: string | null;
  date_of_service: string | null;
  template_ids: number[];
  transcripts: string[];
  notes: {
    template_id: number;
    template_name: string;
    sections: { title: string; text: string }[];
    document_reference: string;
  }[];
  error: string | null;
}
interface Template {
  id: number;
  name: string;
}

const message = (e: unknown) => (e instanceof ApiError || e instanceof Error ? e.message : String(e));
const when = (iso: string | null) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');

export function ScribeScreen({ session }: { session: Session }): JSX.Element {
  const [creating, setCreating] = useState(false);
  if (!session.scopes.includes('scribe.read')) {
    return (
      <section>
        <h1>Scribe</h1>
        <p>This account's scopes do not include scribe.read: it cannot see scribe records.</p>
      </section>
    );
  }
  return (
    <section>
      <div class="title-row">
        <h1>Scribe</h1>
        {session.scopes.includes('scribe.write') && (
          <button type="button" onClick={() => setCreating(true)} disabled={creating}>
            New visit
          </button>
        )}
      </div>
      {creating && <NewVisit onCancel={() => setCreating(false)} />}
      <Records />
    </section>
  );
}

function Records(): JSX.Element {
  // The cursors of the pages seen so far: Previous goes back one.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [page, setPage] = useState<{ items: ScribeRecord[]; next_cursor: string | null } | undefined>();
  const [error, setError] = useState<string | undefined>();
  const cursor = cursors[cursors.length - 1];
  useEffect(() => {
    let live = true;
    const query = new URLSearchParams({ limit: String(PAGE_SIZE), ...(cursor ? { cursor } : {}) });
    api<{ items: ScribeRecord[]; next_cursor: string | null }>(`${SCRIBE}?${query}`)
      .then((r) => live && setPage(r.body))
      .catch((e) => live && setError(message(e)));
    return () => {
      live = false;
    };
  }, [cursor]);
  if (error) return <ErrorText message={error} />;
  if (!page) return <p class="muted">Loading…</p>;
  return (
    <div class="results">
      <div class="results-head">
        <h2 class="bare">Records</h2>
        <div class="pager">
          <button type="button" onClick={() => setCursors((c) => c.slice(0, -1))} disabled={cursors.length < 2}>
            Previous
          </button>
          <button
            type="button"
            onClick={() => setCursors((c) => [...c, page.next_cursor])}
            disabled={!page.next_cursor}
          >
            Next
          </button>
        </div>
      </div>
      {page.items.length === 0 ? (
        <p class="muted">No scribe records yet.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Scribe records</caption>
            <thead>
              <tr>
                <th scope="col">Record</th>
                <th scope="col">Status</th>
                <th scope="col">Submitted</th>
                <th scope="col">Patient</th>
                <th scope="col">Notes</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((r) => (
                <tr>
                  <td>
                    <a
                      href={consoleHref(`/scribe/${r.scribe_id}`)}
                      onClick={(e) => followLink(e, `/scribe/${r.scribe_id}`)}
                    >
                      {r.scribe_id}
                    </a>
                  </td>
                  <td>
                    <Status status={r.status} />
                  </td>
                  <td class="nowrap">{when(r.submitted_at)}</td>
                  <td>{r.patient_name ?? r.patient ?? ''}</td>
                  <td>{r.notes.map((n) => n.template_name).join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function Status({ status }: { status: ScribeRecord['status'] }): JSX.Element {
  const label = { IN_PROGRESS: 'In progress', COMPLETED: 'Completed', FAILED: 'Failed' }[status] ?? status;
  return <span class={`status status-${status.toLowerCase().replace('_', '-')}`}>{label}</span>;
}

function NewVisit({ onCancel }: { onCancel: () => void }): JSX.Element {
  const [templates, setTemplates] = useState<Template[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api<{ items: Template[] }>('/v1/ambient/api/templates')
      .then((r) => setTemplates(r.body.items))
      .catch((e) => setError(message(e)));
  }, []);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const optional = (name: string) => String(form.get(name) ?? '').trim() || undefined;
    setBusy(true);
    setError(undefined);
    try {
      const response = await api<{ scribe_id: number }>(SCRIBE, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: {
          transcripts: [String(form.get('transcript') ?? '')],
          template_ids: [Number(form.get('template'))],
          patient_name: optional('patient_name'),
          patient: optional('patient'),
        },
      });
      navigate(`/scribe/${response.body.scribe_id}`);
    } catch (e) {
      setError(message(e));
      setBusy(false);
    }
  };
  return (
    <form class="editor" onSubmit={submit}>
      <h2>New visit</h2>
      {error && <ErrorText message={error} />}
      <label for="transcript">Transcript</label>
      <textarea
        id="transcript"
        name="transcript"
        rows={10}
        required
        placeholder={'Doctor: What brings you in today?\nPatient: A sore throat for three days.'}
      />
      <div class="search">
        <div class="field">
          <label for="template">Template</label>
          <select id="template" name="template" required disabled={!templates}>
            {(templates ?? []).map((t) => (
              <option value={String(t.id)}>{t.name}</option>
            ))}
          </select>
        </div>
        <div class="field grow">
          <label for="patient-name">Patient name (optional)</label>
          <input id="patient-name" name="patient_name" autocomplete="off" />
        </div>
        <div class="field grow">
          <label for="patient-reference">Patient reference (optional)</label>
          <input
            id="patient-reference"
            name="patient"
            placeholder="Patient/123"
            autocomplete="off"
            spellcheck={false}
          />
        </div>
      </div>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !templates}>
          Submit
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function ScribeRecordPage({ id }: { id: string }): JSX.Element {
  const [record, setRecord] = useState<ScribeRecord | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let live = true;
    const load = () =>
      api<ScribeRecord>(`${SCRIBE}/${encodeURIComponent(id)}`)
        .then((r) => {
          if (!live) return;
          setRecord(r.body);
          if (r.body.status === 'IN_PROGRESS') timer = setTimeout(load, REFRESH_MS);
        })
        .catch((e) => live && setError(message(e)));
    void load();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [id]);
  const crumbs = (
    <p class="crumbs">
      <a href={consoleHref('/scribe')} onClick={(e) => followLink(e, '/scribe')}>
        Scribe
      </a>{' '}
      › record {id}
    </p>
  );
  if (error) {
    return (
      <section>
        {crumbs}
        <h1>Scribe record {id}</h1>
        <ErrorText message={error} />
      </section>
    );
  }
  if (!record) return <p class="muted">Loading…</p>;
  const patient = localReference(record.patient);
  return (
    <article>
      {crumbs}
      <div class="title-row">
        <h1>Scribe record {record.scribe_id}</h1>
        <Status status={record.status} />
      </div>
      <p class="meta" aria-live="polite">
        Submitted {when(record.submitted_at)}
        {record.completed_at
          ? ` · ${record.status === 'FAILED' ? 'failed' : 'completed'} ${when(record.completed_at)}`
          : ' · writing the note…'}
        {record.patient_name ? ` · ${record.patient_name}` : ''}
        {record.date_of_service ? ` · seen ${record.date_of_service}` : ''}
      </p>
      {patient && (
        <p>
          Patient: <ResourceLink type={patient.type} id={patient.id} />
        </p>
      )}
      {record.error && <ErrorText message={record.error} />}
      {record.notes.map((note) => {
        const filed = localReference(note.document_reference);
        return (
          <section class="note" aria-label={note.template_name}>
            <h2>{note.template_name}</h2>
            {filed && (
              <p class="meta">
                Filed as <ResourceLink type={filed.type} id={filed.id} />
              </p>
            )}
            {note.sections.map((s) => (
              <>
                <h3>{s.title}</h3>
                <p class="note-text">{s.text}</p>
              </>
            ))}
          </section>
        );
      })}
      <section aria-labelledby="transcript-heading">
        <h2 id="transcript-heading">Transcript</h2>
        {record.transcripts.map((t) => (
          <pre class="json transcript">{t}</pre>
        ))}
      </section>
    </article>
  );
}
