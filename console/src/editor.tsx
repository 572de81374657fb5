// The JSON editor of a resource, new or stored. The server validates (R4 definitions, invariants); its
// OperationOutcome's issues are listed each next to the element path it names (expression, or location).
import { useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError } from './api';
import type { OperationOutcomeIssue } from './api';

export interface EditorProps {
  readonly type: string;
  readonly initial: Record<string, unknown>;
  /** The stored resource's id and version (an update with If-Match), or none (a create). */
  readonly stored?: { readonly id: string; readonly versionId?: string };
  readonly onSaved: (resource: { resourceType: string; id: string }) => void;
  readonly onCancel: () => void;
}

interface Problem {
  readonly path: string;
  readonly message: string;
}

function problemsOf(error: unknown): Problem[] {
  if (!(error instanceof ApiError)) return [{ path: '', message: String(error) }];
  if (error.issues.length === 0) return [{ path: '', message: error.message }];
  return error.issues
    .filter((i: OperationOutcomeIssue) => i.severity !== 'information')
    .map((i) => {
      const path = (i.expression ?? i.location ?? []).join(', ');
      const message = i.diagnostics ?? i.details?.text ?? i.code ?? '';
      // The diagnostics often start with the path too: said once, next to the message.
      return { path, message: path && message.startsWith(`${path}: `) ? message.slice(path.length + 2) : message };
    });
}

/** The id a create was given, from its Location (`.../Type/id/_history/1`) when it answered no body. */
function idFromLocation(location: string | null): string | undefined {
  return location ? /\/([^/]+)\/_history\/[^/]+$/.exec(new URL(location, 'http://x').pathname)?.[1] : undefined;
}

export function Editor({ type, initial, stored, onSaved, onCancel }: EditorProps): JSX.Element {
  const [text, setText] = useState(() => JSON.stringify(initial, null, 2));
  const [problems, setProblems] = useState<Problem[]>([]);
  const [busy, setBusy] = useState(false);
  const save = async (event: SubmitEvent) => {
    event.preventDefault();
    let resource: unknown;
    try {
      resource = JSON.parse(text);
    } catch (e) {
      setProblems([{ path: '', message: `The text is not JSON: ${(e as Error).message}` }]);
      return;
    }
    setBusy(true);
    try {
      const path = `/fhir/${encodeURIComponent(type)}${stored ? `/${encodeURIComponent(stored.id)}` : ''}`;
      const headers: Record<string, string> = { Prefer: 'return=representation' };
      if (stored?.versionId) headers['If-Match'] = `W/"${stored.versionId}"`;
      const response = await api<{ resourceType: string; id: string } | undefined>(path, {
        method: stored ? 'PUT' : 'POST',
        body: resource,
        headers,
      });
      const id = response.body?.id ?? stored?.id ?? idFromLocation(response.headers.get('location'));
      setProblems([]);
      if (id) onSaved({ resourceType: type, id });
    } catch (e) {
      setProblems(problemsOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="editor" onSubmit={save}>
      <h2>{stored ? `Edit ${type}/${stored.id}` : `New ${type}`}</h2>
      {problems.length > 0 && (
        <div class="problems" role="alert">
          <p>{stored ? 'Not saved:' : 'Not created:'}</p>
          <ul aria-label="Validation errors">
            {problems.map((p) => (
              <li>
                {p.path && <code class="path">{p.path}</code>}
                <span>{p.message}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
      <label for="resource-json">Resource JSON</label>
      <textarea
        id="resource-json"
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        spellcheck={false}
        autocomplete="off"
        rows={Math.min(20, Math.max(8, text.split('\n').length + 1))}
      />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Save
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
